//! The search part ([`EventSearch`]): keyword search in one session or
//! across one owner's sessions, chronological or ranked by the engine.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{json, Value};
use session_core::search::COUNT_PAST_PAGE;
use session_core::{
    page_of_matches, MatchTerms, Page, ParsedQuery, SearchHit, SearchMode, SearchQuery,
    SearchScope, SessionEvent, Total,
};

use crate::body;
use crate::engine::TextFieldCell;
use crate::events::decode_event;
use crate::head::Head;
use crate::index::{Hit, Index};

/// The engine's scores of the matching events, by session and seq.
type Scores = HashMap<(String, u64), f64>;

/// What a search asks of the events index.
struct Request {
    query: Value,
    sort: Value,
    /// Whether every hit matches as is (else each is checked on the client).
    exact: bool,
}

/// Searches of the events index (`{prefix}-events`), with the reference
/// matcher as the last word on what matches.
#[derive(Clone)]
pub(crate) struct EventSearch {
    index: Index,
    /// The field type of the literal search text, as the events index has it.
    text_field: Arc<TextFieldCell>,
}

impl EventSearch {
    /// Searches of the events index `index`.
    pub(crate) fn new(index: Index, text_field: Arc<TextFieldCell>) -> Self {
        Self { index, text_field }
    }

    /// Search in the sessions of `heads` (the live heads the query's scope
    /// covers; ranked: their pending batches already indexed): every
    /// included term a `wildcard` on the folded text (all in the filter,
    /// or in any-of mode one `should` with `minimum_should_match: 1`),
    /// every excluded one in `must_not`, `since` a `range` on `ts_us`; the
    /// hits and the events of pending batches checked with the reference
    /// matcher. Chronological: up to
    /// [`COUNT_PAST_PAGE`] matches past the page are counted (beyond, the
    /// total is a lower bound). Ranked: a `match` on the analysed text
    /// scores the same hits.
    pub(crate) async fn page(
        &self,
        query: &SearchQuery,
        parsed: &ParsedQuery,
        heads: &[Head],
    ) -> session_core::Result<Page<SearchHit>> {
        if heads.is_empty() {
            let mut page = Page::empty(query.page, query.page_size);
            page.total = Some(Total::exact(0));
            return Ok(page);
        }
        let ranked = query.mode == SearchMode::Ranked;
        let by_inc: HashMap<&str, &Head> = heads.iter().map(|h| (h.inc.as_str(), h)).collect();
        let incs: Vec<&str> = by_inc.keys().copied().collect();
        let request = self.request(query, parsed, &incs, ranked);
        let want = query
            .page
            .saturating_mul(query.page_size)
            .saturating_add(query.page_size)
            .saturating_add(COUNT_PAST_PAGE)
            .saturating_add(1);
        let mut keep = |h: &Hit| keeps(h, &by_inc, ranked, request.exact, parsed);
        let hits = self
            .index
            .collect(
                &request.query,
                &request.sort,
                &json!(["seq", "body", "session_id", "inc"]),
                0,
                want,
                &mut keep,
                "",
            )
            .await?;
        let truncated = hits.len() >= want;
        let (mut matches, scores) = matching(&hits, query, parsed)?;
        let mut page = if ranked {
            ranked_page(query, parsed, matches, &scores)
        } else {
            for h in heads {
                matches.extend(pending_matches(h, query, parsed)?);
            }
            page_of_matches(query, parsed, matches, None)
        };
        if truncated {
            page.has_more = true;
            page.total = page.total.map(|t| Total { exact: false, ..t });
        }
        Ok(page)
    }

    /// The query and sort of a search over the incarnations `incs`.
    fn request(
        &self,
        query: &SearchQuery,
        parsed: &ParsedQuery,
        incs: &[&str],
        ranked: bool,
    ) -> Request {
        // `text_lc` holds the folded text as it is (NUL included): the terms
        // as parsed. A term a `keyword` text field cannot answer exactly is
        // narrowed (included) or left to the client (excluded), and every
        // hit is then checked before it counts.
        let text_field = self.text_field.get();
        let mut exact = true;
        let mut must: Vec<Value> = Vec::with_capacity(parsed.include().len().saturating_add(3));
        let mut terms: Vec<Value> = Vec::with_capacity(parsed.include().len());
        for t in parsed.include() {
            let (clause, whole) = body::search_literal(t, text_field);
            exact &= whole;
            terms.push(clause);
        }
        match parsed.match_terms() {
            MatchTerms::Any if terms.len() > 1 => {
                must.push(json!({"bool": {"should": terms, "minimum_should_match": 1}}));
            }
            _ => must.extend(terms),
        }
        if let Some(since) = query.since_micros() {
            must.push(json!({"range": {"ts_us": {"gte": since}}}));
        }
        if incs.len() <= body::MAX_TERMS {
            must.push(json!({"terms": {"inc": incs}}));
        } else if let SearchScope::User { app, user_id } = &query.scope {
            // More sessions than one `terms` query may name: the owner's
            // events, the live incarnations picked out by `keeps`.
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
        Request {
            query: q,
            sort,
            exact,
        }
    }
}

/// The session id an event document's `_source` names.
fn session_of(source: &Value) -> &str {
    source
        .get("session_id")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Whether a hit counts: a live, committed event of one of the searched
/// incarnations (`by_inc`), and, unless the query was `exact`, one the
/// reference matcher accepts.
fn keeps(
    h: &Hit,
    by_inc: &HashMap<&str, &Head>,
    ranked: bool,
    exact: bool,
    parsed: &ParsedQuery,
) -> bool {
    let inc = h
        .source
        .get("inc")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let seq = h.source.get("seq").and_then(Value::as_u64).unwrap_or(0);
    // Ranked: the pending batches were indexed before the search, the engine scores them too.
    by_inc.get(inc).is_some_and(|head| {
        let bound = if ranked {
            head.last_seq
        } else {
            head.indexed_max()
        };
        seq <= bound && !head.is_dead(seq)
    }) && (exact || {
        // An event that does not decode is kept: reading it below reports the error.
        match decode_event(session_of(&h.source), &h.source) {
            Ok(e) => parsed.matches(&e.message.search_text()),
            Err(_) => true,
        }
    })
}

/// The events of `hits` the query admits (see [`SearchQuery::admits`]), with their scores.
fn matching(
    hits: &[Hit],
    query: &SearchQuery,
    parsed: &ParsedQuery,
) -> session_core::Result<(Vec<SessionEvent>, Scores)> {
    let mut matches = Vec::with_capacity(hits.len());
    let mut scores = HashMap::new();
    for h in hits {
        let e = decode_event(session_of(&h.source), &h.source)?;
        if query.admits(parsed, &e) {
            scores.insert((e.session_id.clone(), e.seq), h.score.unwrap_or(0.0));
            matches.push(e);
        }
    }
    Ok((matches, scores))
}

/// The live events of a head's pending batch that the query admits
/// (chronological search: they may not be in the index yet).
fn pending_matches(
    head: &Head,
    query: &SearchQuery,
    parsed: &ParsedQuery,
) -> session_core::Result<Vec<SessionEvent>> {
    Ok(head
        .pending_events()?
        .into_iter()
        .filter(|e| query.admits(parsed, e))
        .collect())
}

/// A ranked page: the engine's scores order the matches.
fn ranked_page(
    query: &SearchQuery,
    parsed: &ParsedQuery,
    matches: Vec<SessionEvent>,
    scores: &Scores,
) -> Page<SearchHit> {
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
        .map(|(score, e)| SearchHit::new(e, parsed, Some(score)));
    page.total = Some(total);
    page
}
