//! One index as the parts use it ([`Index`]): document paths, paged
//! searches with `search_after`, counts, deletes by id or by query; and the
//! refresh policy of writes ([`Refresh`]).

use elasticsearch::http::Method;
use serde_json::{json, Value};
use session_core::SessionError;

use crate::body;
use crate::client::{bulk_items, Client, ItemResult, Reply};
use crate::error::{EsError, BACKEND};

/// Hits fetched per `_search` round trip while collecting results.
pub(crate) const CHUNK: usize = 1000;

/// Sort values fetched per round trip while skipping to a deep page.
const SKIP_CHUNK: usize = 10_000;

/// Documents deleted per `_bulk` request, and ids found per `_search` round.
const DELETE_CHUNK: usize = 1000;

/// When writes become visible to searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Refresh {
    /// `refresh=true`: the written shards refresh before the write returns (lowest latency).
    #[default]
    Immediate,
    /// `refresh=wait_for`: the write returns after the next scheduled refresh (cheaper for the cluster, up to `refresh_interval` slower).
    WaitFor,
}

impl Refresh {
    /// The `refresh` query parameter of a write.
    pub(crate) fn query(self) -> (&'static str, String) {
        ("refresh", self.param().to_owned())
    }

    fn param(self) -> &'static str {
        match self {
            Self::Immediate => "true",
            Self::WaitFor => "wait_for",
        }
    }
}

/// The path of one document, its id percent-encoded (ids may hold `:` and `|`).
pub(crate) fn doc_path(index: &str, id: &str) -> String {
    let mut out = format!("{index}/_doc/");
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One search hit as returned.
#[derive(Debug, Clone)]
pub(crate) struct Hit {
    pub(crate) id: String,
    pub(crate) source: Value,
    pub(crate) sort: Value,
    pub(crate) score: Option<f64>,
}

/// Reads the hits of a `_search` answer.
fn parse_hits(body: &Value) -> session_core::Result<Vec<Hit>> {
    let hits = body
        .get("hits")
        .and_then(|h| h.get("hits"))
        .and_then(Value::as_array)
        .ok_or_else(|| SessionError::serialization("search response", "no hits.hits array"))?;
    Ok(hits
        .iter()
        .map(|h| Hit {
            id: h
                .get("_id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            source: h.get("_source").cloned().unwrap_or(Value::Null),
            sort: h.get("sort").cloned().unwrap_or(Value::Null),
            score: h.get("_score").and_then(Value::as_f64),
        })
        .collect())
}

/// How many items of a `_bulk` answer deleted a document (`result: deleted`).
fn deleted_items(answer: &Value) -> usize {
    answer
        .get("items")
        .and_then(Value::as_array)
        .map_or(0, |items| {
            items
                .iter()
                .filter(|i| i.pointer("/delete/result").and_then(Value::as_str) == Some("deleted"))
                .count()
        })
}

/// One index of a repository (`{prefix}-{which}`) and the client that reaches it.
#[derive(Clone)]
pub(crate) struct Index {
    client: Client,
    name: String,
}

impl Index {
    /// The index `{prefix}-{which}`, reached through `client`.
    pub(crate) fn new(client: Client, prefix: &str, which: &str) -> Self {
        Self {
            client,
            name: format!("{prefix}-{which}"),
        }
    }

    /// The index's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Sends one request about one document (`{index}/_doc/{id}`).
    pub(crate) async fn doc(
        &self,
        method: Method,
        id: &str,
        query: &[(&str, String)],
        body: Option<String>,
    ) -> session_core::Result<Reply> {
        self.client
            .send(method, &doc_path(&self.name, id), query, body)
            .await
    }

    /// Posts to one endpoint of the index (`{index}/_search`, `_count`, `_mget`, `_refresh`).
    pub(crate) async fn post(
        &self,
        endpoint: &str,
        body: Option<String>,
    ) -> session_core::Result<Reply> {
        self.client
            .send(
                Method::Post,
                &format!("{}/{endpoint}", self.name),
                &[],
                body,
            )
            .await
    }

    /// Sends one `_bulk` body (its action lines name this index).
    pub(crate) async fn bulk(
        &self,
        query: &[(&str, String)],
        body: String,
    ) -> session_core::Result<Reply> {
        self.client
            .send(Method::Post, "_bulk", query, Some(body))
            .await
    }

    /// Makes every write so far visible to searches (`_refresh`).
    pub(crate) async fn refresh(&self, session_id: &str) -> session_core::Result<()> {
        self.post("_refresh", None).await?.success(session_id)?;
        Ok(())
    }

    /// One `_search` round trip.
    async fn search_page(
        &self,
        request: &Value,
        session_id: &str,
    ) -> session_core::Result<Vec<Hit>> {
        let reply = self.post("_search", Some(request.to_string())).await?;
        parse_hits(&reply.success(session_id)?)
    }

    /// Collects hits of `query` in `sort` order: skips the first `skip` hits
    /// for which `keep` holds (fetching `source` without the event bodies),
    /// then returns up to `take` more. Pages with `search_after`, never `from`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn collect(
        &self,
        query: &Value,
        sort: &Value,
        source: &Value,
        mut skip: usize,
        take: usize,
        keep: &mut (dyn FnMut(&Hit) -> bool + Send),
        session_id: &str,
    ) -> session_core::Result<Vec<Hit>> {
        let light = match source.as_array() {
            Some(fields) => Value::Array(
                fields
                    .iter()
                    .filter(|f| *f != "body" && *f != "head")
                    .cloned()
                    .collect(),
            ),
            None => source.clone(),
        };
        let mut out = Vec::new();
        let mut after: Option<Value> = None;
        while out.len() < take {
            // While skipping, never fetch past the skip: the page itself is fetched with bodies.
            let (size, src) = if skip > 0 {
                (skip.min(SKIP_CHUNK), &light)
            } else {
                ((take - out.len()).clamp(1, CHUNK), source)
            };
            let req = body::search_request(query, sort, size, after.as_ref(), src);
            let hits = self.search_page(&req, session_id).await?;
            let n = hits.len();
            for h in hits {
                after = Some(h.sort.clone());
                if !keep(&h) {
                    continue;
                }
                if skip > 0 {
                    skip -= 1;
                } else {
                    out.push(h);
                }
            }
            if n < size {
                break;
            }
        }
        Ok(out)
    }

    /// How many documents match `query`.
    pub(crate) async fn count(
        &self,
        query: &Value,
        session_id: &str,
    ) -> session_core::Result<usize> {
        let reply = self
            .post("_count", Some(json!({ "query": query }).to_string()))
            .await?;
        let body = reply.success(session_id)?;
        Ok(body
            .get("count")
            .and_then(Value::as_u64)
            .map_or(0, |c| usize::try_from(c).unwrap_or(usize::MAX)))
    }

    /// Deletes documents by id (`_bulk` delete items, refreshed: searches
    /// stop seeing them). How many were there to delete.
    pub(crate) async fn delete_ids(
        &self,
        ids: &[String],
        session_id: &str,
    ) -> session_core::Result<usize> {
        let mut deleted = 0usize;
        for chunk in ids.chunks(DELETE_CHUNK) {
            let mut lines = String::new();
            for id in chunk {
                body::bulk_line(&mut lines, "delete", &self.name, id, None);
            }
            let reply = self.bulk(&[("refresh", "true".to_owned())], lines).await?;
            let answer = reply.success(session_id)?;
            for item in bulk_items(&answer)? {
                if let ItemResult::Failed(e) = item {
                    return Err(e.into_session_error(session_id));
                }
            }
            deleted = deleted.saturating_add(deleted_items(&answer));
        }
        Ok(deleted)
    }

    /// Deletes every document matching `query`, reporting a failure: the
    /// ids found by `_search`, deleted by `_bulk`, again until none is
    /// found. Every node can do this (`_delete_by_query` needs the `reindex`
    /// module, which an Elasticsearch test distribution lacks).
    pub(crate) async fn delete_matching(
        &self,
        query: &Value,
        session_id: &str,
    ) -> session_core::Result<()> {
        // Documents written without a refresh become visible first.
        self.refresh(session_id).await?;
        let request = json!({
            "query": query,
            "size": DELETE_CHUNK,
            "sort": ["_doc"],
            "_source": false,
        });
        loop {
            let reply = self.post("_search", Some(request.to_string())).await?;
            let answer = reply.success(session_id)?;
            let ids: Vec<String> = answer
                .pointer("/hits/hits")
                .and_then(Value::as_array)
                .ok_or_else(|| {
                    SessionError::serialization("search response", "no hits.hits array")
                })?
                .iter()
                .filter_map(|h| h.get("_id").and_then(Value::as_str).map(str::to_owned))
                .collect();
            if ids.is_empty() {
                return Ok(());
            }
            if self.delete_ids(&ids, session_id).await? == 0 {
                // Found again though already gone: the search does not see the deletes.
                return Err(SessionError::backend(
                    BACKEND,
                    EsError::stuck(&self.name, ids.len()),
                ));
            }
        }
    }

    /// [`Index::delete_matching`] as cleanup: a failure is logged, the
    /// documents stay hidden by the head.
    pub(crate) async fn delete_matching_quietly(&self, query: &Value, session_id: &str) {
        if let Err(e) = self.delete_matching(query, session_id).await {
            tracing::warn!(backend = BACKEND, error = %e, "cleanup of unreachable documents failed; they stay hidden");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Value {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn document_paths_escape_ids() {
        assert_eq!(
            doc_path("p-state", "u|app|bob"),
            "p-state/_doc/u%7Capp%7Cbob"
        );
        assert_eq!(
            doc_path("p-sessions", "chat:1.a_b-c"),
            "p-sessions/_doc/chat%3A1.a_b-c"
        );
    }

    #[test]
    fn search_responses_give_ids_sources_sort_values_and_scores() {
        let hits = parse_hits(&fixture("search_hits.json")).unwrap();
        assert_eq!(hits.len(), 2);
        let last = hits.last().unwrap();
        assert_eq!(
            last.sort,
            json!([4_098_435_132_000_i64, "FaslK3QBySSL_rrj9zM5"])
        );
        assert!(last.score.is_none(), "sorted searches carry no score");
        let scored = parse_hits(&fixture("search_hits_scored.json")).unwrap();
        assert!(scored.iter().all(|h| h.score.is_some() && !h.id.is_empty()));
        assert!(parse_hits(&fixture("search_empty.json"))
            .unwrap()
            .is_empty());
        assert!(
            parse_hits(&fixture("count.json")).is_err(),
            "a body without hits is an error"
        );
    }
}
