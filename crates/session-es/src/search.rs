//! Searches: paging with `search_after`, session listings and keyword search across sessions.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use elasticsearch::http::Method;
use serde_json::{json, Value};
use session_core::search::COUNT_PAST_PAGE;
use session_core::{
    page_of_matches, Page, SearchHit, SearchMode, SearchQuery, SearchScope, Session, SessionError,
    SessionEvent, SessionId, SessionQuery, Total,
};

use crate::body::{self, micros};
use crate::events::{decode_event, CHUNK};
use crate::head::Head;
use crate::repository::EsRepository;

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
        let sort = json!([{"updated_us": "desc"}, {"sid": "asc"}]);
        let want = query.page_size.saturating_add(1);
        let hits = if query.metadata.is_empty() {
            self.collect(
                "sessions",
                &q,
                &sort,
                &json!(["head"]),
                offset,
                want,
                &mut |_| true,
                "",
            )
            .await?
        } else {
            // Metadata is not indexed here: the heads are read and matched on the client.
            let mut keep = |h: &Hit| {
                Head::from_source(&h.id, &h.source).is_ok_and(|head| query.matches(&head.session))
            };
            let mut hits = self
                .collect(
                    "sessions",
                    &q,
                    &sort,
                    &json!(["head"]),
                    0,
                    offset.saturating_add(want),
                    &mut keep,
                    "",
                )
                .await?;
            hits.drain(..offset.min(hits.len()));
            hits
        };
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

    /// Every session document of one owner, expired ones included: their
    /// ids and heads (what `erase_user` removes).
    pub(crate) async fn every_owner_head(
        &self,
        app: &str,
        user_id: &str,
    ) -> session_core::Result<Vec<Head>> {
        let q = json!({"bool": {"filter": [
            {"term": {"app": app}},
            {"term": {"user_id": user_id}}
        ]}});
        let hits = self.all_sessions(&q, &json!(["head"])).await?;
        hits.iter()
            .map(|h| Head::from_source(&h.id, &h.source))
            .collect()
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

    /// The live heads a search covers.
    async fn search_heads(&self, query: &SearchQuery) -> session_core::Result<Vec<Head>> {
        Ok(match &query.scope {
            SearchScope::Session(id) => {
                vec![self.heads().live(&SessionId::new(id.as_str())?).await?.head]
            }
            SearchScope::User { app, user_id } => self.owner_heads(app, user_id).await?,
        })
    }

    /// Search in one session or across one owner's sessions: every required
    /// term a `wildcard` on the folded text (`must`), every excluded one in
    /// `must_not`, the hits and the events of pending batches checked with
    /// the reference matcher. Chronological: up to [`COUNT_PAST_PAGE`]
    /// matches past the page are counted (beyond, the total is a lower
    /// bound). Ranked: a `match` on the analysed text scores the same hits.
    pub(crate) async fn search_events(
        &self,
        query: &SearchQuery,
    ) -> session_core::Result<Page<SearchHit>> {
        let parsed = query.parsed()?;
        let heads = self.search_heads(query).await?;
        if heads.is_empty() {
            let mut page = Page::empty(query.page, query.page_size);
            page.total = Some(Total::exact(0));
            return Ok(page);
        }
        let ranked = query.mode == SearchMode::Ranked;
        if ranked {
            // Relevance comes from the engine: every committed event must be in its index.
            for h in heads.iter().filter(|h| !h.pending.is_empty()) {
                self.index_pending(h).await?;
            }
        }
        let by_inc: HashMap<&str, &Head> = heads.iter().map(|h| (h.inc.as_str(), h)).collect();
        let incs: Vec<&str> = by_inc.keys().copied().collect();
        // `text_lc` holds the folded text as it is (NUL included): the terms
        // as parsed. A term a `keyword` text field cannot answer exactly is
        // narrowed (included) or left to the client (excluded), and every
        // hit is then checked before it counts.
        let text_field = self.text_field.get();
        let mut exact = true;
        let mut must: Vec<Value> = Vec::with_capacity(parsed.include().len().saturating_add(2));
        for t in parsed.include() {
            let (clause, whole) = body::search_literal(t, text_field);
            exact &= whole;
            must.push(clause);
        }
        if incs.len() <= body::MAX_TERMS {
            must.push(json!({"terms": {"inc": incs}}));
        } else if let SearchScope::User { app, user_id } = &query.scope {
            // More sessions than one `terms` query may name: the owner's
            // events, the live incarnations picked out by `keep` below.
            must.push(json!({"term": {"app": app}}));
            must.push(json!({"term": {"user_id": user_id}}));
        }
        let mut must_not: Vec<Value> = Vec::with_capacity(parsed.exclude().len());
        for t in parsed.exclude() {
            match body::search_literal(t, text_field) {
                (clause, true) => must_not.push(clause),
                (_, false) => exact = false,
            }
        }
        let mut q = body::bool_query(must, must_not);
        let sort = if ranked {
            let words = parsed.include().join(" ");
            if let Some(b) = q.get_mut("bool").and_then(Value::as_object_mut) {
                b.insert(
                    "should".into(),
                    json!([{"match": {"text": {"query": words}}}]),
                );
            }
            json!([{"_score": "desc"}, {"ts_us": "asc"}, {"session_id": "asc"}, {"seq": "asc"}])
        } else {
            json!([{"ts_us": "asc"}, {"session_id": "asc"}, {"seq": "asc"}])
        };
        let want = query
            .page
            .saturating_mul(query.page_size)
            .saturating_add(query.page_size)
            .saturating_add(COUNT_PAST_PAGE)
            .saturating_add(1);
        let mut keep = |h: &Hit| {
            let inc = h
                .source
                .get("inc")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let seq = h.source.get("seq").and_then(Value::as_u64).unwrap_or(0);
            // Ranked: the pending batches were indexed above, the engine scores them too.
            by_inc.get(inc).is_some_and(|head| {
                let bound = if ranked {
                    head.last_seq
                } else {
                    head.indexed_max()
                };
                seq <= bound && !head.is_dead(seq)
            }) && (exact || {
                let sid = h
                    .source
                    .get("session_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                // An event that does not decode is kept: reading it below reports the error.
                match decode_event(sid, &h.source) {
                    Ok(e) => parsed.matches(&e.message.search_text()),
                    Err(_) => true,
                }
            })
        };
        let hits = self
            .collect(
                "events",
                &q,
                &sort,
                &json!(["seq", "body", "session_id", "inc"]),
                0,
                want,
                &mut keep,
                "",
            )
            .await?;
        let truncated = hits.len() >= want;
        let mut matches = Vec::with_capacity(hits.len());
        let mut scores = HashMap::new();
        for h in &hits {
            let sid = h
                .source
                .get("session_id")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let e = decode_event(sid, &h.source)?;
            if parsed.matches(&e.message.search_text()) {
                scores.insert((e.session_id.clone(), e.seq), h.score.unwrap_or(0.0));
                matches.push(e);
            }
        }
        if !ranked {
            for h in &heads {
                for e in h.pending_events()? {
                    if parsed.matches(&e.message.search_text()) {
                        matches.push(e);
                    }
                }
            }
        }
        let mut page = if ranked {
            // The engine's scores order the page.
            let total = Total::exact(matches.len());
            let mut scored: Vec<(f64, SessionEvent)> = matches
                .into_iter()
                .map(|e| {
                    (
                        scores
                            .get(&(e.session_id.clone(), e.seq))
                            .copied()
                            .unwrap_or(0.0),
                        e,
                    )
                })
                .collect();
            scored.sort_by(|(a, x), (b, y)| {
                b.total_cmp(a).then_with(|| {
                    (x.timestamp, &x.session_id, x.seq).cmp(&(y.timestamp, &y.session_id, y.seq))
                })
            });
            let mut page = Page::paginate(scored, query.page, query.page_size)
                .map(|(score, e)| SearchHit::new(e, &parsed, Some(score)));
            page.total = Some(total);
            page
        } else {
            page_of_matches(query, &parsed, matches, None)
        };
        if truncated {
            page.has_more = true;
            page.total = page.total.map(|t| Total { exact: false, ..t });
        }
        Ok(page)
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
