//! Searches: paging with `search_after`, session listings and keyword search across sessions.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use elasticsearch::http::Method;
use serde_json::{json, Value};
use session_core::{
    Page, SearchHit, SearchQuery, SearchScope, Session, SessionError, SessionEvent, SessionId,
    SessionQuery,
};

use crate::body::{self, micros};
use crate::events::decode_event;
use crate::head::Head;
use crate::EsRepository;

/// Hits fetched per `_search` round trip while collecting results.
pub(crate) const CHUNK: usize = 1000;
/// Sort values fetched per round trip while skipping to a deep page.
const SKIP_CHUNK: usize = 10_000;

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

impl EsRepository {
    /// One `_search` round trip on an index.
    async fn search_page(
        &self,
        which: &str,
        request: &Value,
        session_id: &str,
    ) -> session_core::Result<Vec<Hit>> {
        let reply = self
            .client
            .send(
                Method::Post,
                &format!("{}/_search", self.index(which)),
                &[],
                Some(request.to_string()),
            )
            .await?;
        parse_hits(&reply.success(session_id)?)
    }

    /// Collects hits of `query` in `sort` order: skips the first `skip` hits
    /// for which `keep` holds (fetching `source` without the event bodies),
    /// then returns up to `take` more. Pages with `search_after`, never `from`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn collect(
        &self,
        which: &str,
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
            let hits = self.search_page(which, &req, session_id).await?;
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

    /// Every session document matching `query`, in id order, with `source` fields.
    async fn all_sessions(&self, query: &Value, source: &Value) -> session_core::Result<Vec<Hit>> {
        self.collect(
            "sessions",
            query,
            &json!([{"sid": "asc"}]),
            source,
            0,
            usize::MAX,
            &mut |_| true,
            "",
        )
        .await
    }

    /// The sessions of a `list` page: matching `query`, newest activity
    /// first, from `offset`, one more than a page (to tell whether more follow).
    pub(crate) async fn list_sessions(
        &self,
        query: &SessionQuery,
        offset: usize,
    ) -> session_core::Result<Vec<Session>> {
        let q = body::sessions_query(query, micros(self.now()));
        let hits = self
            .collect(
                "sessions",
                &q,
                &json!([{"updated_us": "desc"}, {"sid": "asc"}]),
                &json!(["head"]),
                offset,
                query.page_size.saturating_add(1),
                &mut |_| true,
                "",
            )
            .await?;
        hits.iter()
            .map(|h| Head::from_source(&h.id, &h.source).map(|head| head.session))
            .collect::<session_core::Result<Vec<_>>>()
    }

    /// The ids of the sessions expired at `now`.
    pub(crate) async fn expired_ids(
        &self,
        now: DateTime<Utc>,
    ) -> session_core::Result<Vec<String>> {
        let q = json!({"range": {"expires_us": {"lte": micros(now)}}});
        let hits = self.all_sessions(&q, &json!(["sid"])).await?;
        Ok(hits.into_iter().map(|h| h.id).collect())
    }

    /// Live sessions of one owner (for cross-session search).
    async fn owner_heads(&self, app: &str, user_id: &str) -> session_core::Result<Vec<Head>> {
        let q = session_core::SessionQuery::new().app(app).user(user_id);
        let query = body::sessions_query(&q, micros(self.now()));
        let hits = self.all_sessions(&query, &json!(["head"])).await?;
        hits.iter()
            .map(|h| Head::from_source(&h.id, &h.source))
            .collect()
    }

    /// Literal search across the live sessions of one owner (pending batches included).
    pub(crate) async fn search_literal_all(
        &self,
        app: &str,
        user_id: &str,
        query: &SearchQuery,
    ) -> session_core::Result<Page<SearchHit>> {
        let heads = self.owner_heads(app, user_id).await?;
        if heads.is_empty() {
            return Ok(Page::empty(query.page, query.page_size));
        }
        let Some(offset) = query.page.checked_mul(query.page_size) else {
            return Ok(Page::empty(query.page, query.page_size));
        };
        let needle = session_core::fold_case(&query.text);
        let mut extra: Vec<SessionEvent> = Vec::new();
        for h in &heads {
            for e in h.pending_events()? {
                if session_core::contains_folded(&e.message.search_text(), &needle) {
                    extra.push(e);
                }
            }
        }
        let by_inc: HashMap<&str, &Head> = heads.iter().map(|h| (h.inc.as_str(), h)).collect();
        let incs: Vec<&str> = by_inc.keys().copied().collect();
        let q = body::bool_query(
            vec![
                json!({"term": {"app": app}}),
                json!({"term": {"user_id": user_id}}),
                json!({"terms": {"inc": incs}}),
                body::literal_text(&query.text),
            ],
            Vec::new(),
        );
        let want = offset.saturating_add(query.page_size).saturating_add(1);
        let mut keep = |h: &Hit| {
            let inc = h
                .source
                .get("inc")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let seq = h.source.get("seq").and_then(Value::as_u64).unwrap_or(0);
            by_inc
                .get(inc)
                .is_some_and(|head| seq <= head.indexed_max() && !head.is_dead(seq))
        };
        let hits = self
            .collect(
                "events",
                &q,
                &json!([{"ts_us": "asc"}, {"session_id": "asc"}, {"seq": "asc"}]),
                &json!(["seq", "body", "session_id", "inc"]),
                0,
                want,
                &mut keep,
                "",
            )
            .await?;
        let mut all = Vec::with_capacity(hits.len() + extra.len());
        for h in &hits {
            let sid = h
                .source
                .get("session_id")
                .and_then(Value::as_str)
                .unwrap_or_default();
            all.push(decode_event(sid, &h.source)?);
        }
        all.extend(extra);
        all.sort_by(|a, b| {
            (a.timestamp, &a.session_id, a.seq).cmp(&(b.timestamp, &b.session_id, b.seq))
        });
        Ok(Page::paginate(
            all.into_iter().map(|e| SearchHit {
                session_id: e.session_id.clone(),
                event: e,
                score: None,
            }),
            query.page,
            query.page_size,
        ))
    }

    /// Ranked (`match`) search in one session or across one owner's sessions.
    pub(crate) async fn search_ranked(
        &self,
        query: &SearchQuery,
    ) -> session_core::Result<Page<SearchHit>> {
        let heads = match &query.scope {
            SearchScope::Session(id) => {
                vec![self.heads().live(&SessionId::new(id.as_str())?).await?.head]
            }
            SearchScope::User { app, user_id } => self.owner_heads(app, user_id).await?,
        };
        if heads.is_empty() {
            return Ok(Page::empty(query.page, query.page_size));
        }
        let Some(offset) = query.page.checked_mul(query.page_size) else {
            return Ok(Page::empty(query.page, query.page_size));
        };
        let by_inc: HashMap<&str, &Head> = heads.iter().map(|h| (h.inc.as_str(), h)).collect();
        let incs: Vec<&str> = by_inc.keys().copied().collect();
        let q = json!({"bool": {
            "must": [{"match": {"text": {"query": query.text}}}],
            "filter": [{"terms": {"inc": incs}}]
        }});
        let mut keep = |h: &Hit| {
            let inc = h
                .source
                .get("inc")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let seq = h.source.get("seq").and_then(Value::as_u64).unwrap_or(0);
            by_inc
                .get(inc)
                .is_some_and(|head| seq <= head.last_seq && !head.is_dead(seq))
        };
        let hits = self
            .collect(
                "events",
                &q,
                &json!([{"_score": "desc"}, {"ts_us": "asc"}, {"session_id": "asc"}, {"seq": "asc"}]),
                &json!(["seq", "body", "session_id", "inc"]),
                offset,
                query.page_size.saturating_add(1),
                &mut keep,
                "",
            )
            .await?;
        let mut items = Vec::with_capacity(hits.len());
        for h in &hits {
            let sid = h
                .source
                .get("session_id")
                .and_then(Value::as_str)
                .unwrap_or_default();
            items.push(SearchHit {
                session_id: sid.to_owned(),
                event: decode_event(sid, &h.source)?,
                score: h.score,
            });
        }
        Ok(Page::from_overfetch(items, query.page, query.page_size))
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
