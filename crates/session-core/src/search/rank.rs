//! Ordering and paging of matches for stores that check candidates in
//! process: chronological, or by BM25 relevance.

use super::fold::fold_case;
use super::query::{SearchHit, SearchMode, SearchQuery, SearchScope};
use super::terms::ParsedQuery;
use crate::event::SessionEvent;
use crate::filter::{Page, Total};

/// BM25 term-frequency saturation.
const K1: f64 = 1.2;
/// BM25 length normalisation.
const B: f64 = 0.75;

/// Collection figures for relevance: how many events the scope holds and,
/// per included term (in [`ParsedQuery::include`] order), how many hold it
/// (an index's candidate count is a fair upper bound).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RankStats {
    /// Events in the scope.
    pub docs: u64,
    /// Events holding each included term.
    pub doc_freq: Vec<u64>,
}

/// Counts as `f64` for the formula (exact below 2^53, which a count never reaches).
fn float(n: u64) -> f64 {
    let capped = u32::try_from(n).unwrap_or(u32::MAX);
    f64::from(capped)
}

impl RankStats {
    /// No figures yet for `query`'s included terms: each session searched adds its own.
    pub fn for_query(query: &ParsedQuery) -> Self {
        Self {
            docs: 0,
            doc_freq: vec![0; query.include().len()],
        }
    }
}

fn idf(docs: u64, df: u64) -> f64 {
    let (n, df) = (float(docs.max(df)), float(df));
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// The BM25 score of each folded text.
fn bm25(query: &ParsedQuery, folded: &[String], stats: &RankStats) -> Vec<f64> {
    let lens: Vec<f64> = folded
        .iter()
        .map(|t| float(u64::try_from(t.len()).unwrap_or(u64::MAX)))
        .collect();
    let avg = if lens.is_empty() {
        1.0
    } else {
        (lens.iter().sum::<f64>() / float(u64::try_from(lens.len()).unwrap_or(u64::MAX))).max(1.0)
    };
    let matched = u64::try_from(folded.len()).unwrap_or(u64::MAX);
    let idfs: Vec<f64> = (0..query.include().len())
        .map(|i| {
            let df = stats
                .doc_freq
                .get(i)
                .copied()
                .unwrap_or(matched)
                .max(matched);
            idf(stats.docs.max(matched), df)
        })
        .collect();
    folded
        .iter()
        .zip(&lens)
        .map(|(text, len)| {
            query
                .term_counts(text)
                .into_iter()
                .zip(&idfs)
                .map(|(tf, idf)| {
                    let tf = f64::from(tf);
                    idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg))
                })
                .sum()
        })
        .collect()
}

fn chronological(a: &SessionEvent, b: &SessionEvent) -> std::cmp::Ordering {
    (a.timestamp, &a.session_id, a.seq).cmp(&(b.timestamp, &b.session_id, b.seq))
}

/// Matches a chronological search counts past the end of its page before
/// it stops (its total then becomes a lower bound).
pub const COUNT_PAST_PAGE: usize = 500;

/// How many matches, in order, a chronological search of one session needs
/// to read before it may stop: the pages before, this page, and
/// [`COUNT_PAST_PAGE`] more to count.
pub fn matches_needed(query: &SearchQuery) -> usize {
    query
        .page
        .saturating_mul(query.page_size)
        .saturating_add(query.page_size)
        .saturating_add(COUNT_PAST_PAGE)
}

/// How many matches a search over `sessions` sessions reads before it may
/// stop: [`matches_needed`] for a chronological search of one session
/// (oldest first, so the page and a count past it are known by then),
/// `None` (all of them) otherwise.
pub fn read_limit(query: &SearchQuery, sessions: usize) -> Option<usize> {
    (sessions == 1 && query.mode == SearchMode::Literal).then(|| matches_needed(query))
}

/// Like [`page_of_matches`] for a read that stopped after the first
/// [`matches_needed`] matches (`complete: false`): the page is the same,
/// the total a lower bound.
pub fn page_of_first_matches(
    query: &SearchQuery,
    parsed: &ParsedQuery,
    matches: Vec<SessionEvent>,
    complete: bool,
) -> Page<SearchHit> {
    let mut page = page_of_matches(query, parsed, matches, None);
    if !complete {
        page.has_more = true;
        page.total = page.total.map(|t| Total { exact: false, ..t });
    }
    page
}

/// One page of hits from *every* match of `query` in its scope (checked
/// with [`SearchQuery::admits`]): chronological in literal mode (by seq in
/// one session; by time, session and seq across sessions), by BM25 in
/// ranked mode (in any-of mode the terms an event lacks add nothing to
/// its score, so events holding more of them come first); with an exact
/// total and snippets.
pub fn page_of_matches(
    query: &SearchQuery,
    parsed: &ParsedQuery,
    mut matches: Vec<SessionEvent>,
    stats: Option<&RankStats>,
) -> Page<SearchHit> {
    let total = Total::exact(matches.len());
    let scored: Vec<(Option<f64>, SessionEvent)> = if query.mode == SearchMode::Ranked {
        let folded: Vec<String> = matches
            .iter()
            .map(|e| fold_case(&e.message.search_text()))
            .collect();
        let scores = bm25(parsed, &folded, stats.unwrap_or(&RankStats::default()));
        let mut scored: Vec<(f64, SessionEvent)> = scores.into_iter().zip(matches).collect();
        scored.sort_by(|(sa, a), (sb, b)| sb.total_cmp(sa).then_with(|| chronological(a, b)));
        scored.into_iter().map(|(s, e)| (Some(s), e)).collect()
    } else {
        match query.scope {
            SearchScope::Session(_) => matches.sort_by_key(|e| e.seq),
            SearchScope::User { .. } => matches.sort_by(chronological),
        }
        matches.into_iter().map(|e| (None, e)).collect()
    };
    let mut page = Page::paginate(scored, query.page, query.page_size)
        .map(|(score, e)| SearchHit::new(e, parsed, score));
    page.total = Some(total);
    page
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Message;

    fn event(seq: u64, text: &str) -> SessionEvent {
        let mut e = SessionEvent::builder(Message::user(text)).build().unwrap();
        e.seq = seq;
        e.session_id = "s".into();
        e
    }

    #[test]
    fn ranked_puts_denser_matches_first_and_literal_keeps_seq_order() {
        let matches = vec![
            event(
                1,
                "the invoice was sent, a long message about many other things entirely",
            ),
            event(2, "invoice invoice invoice"),
            event(3, "an invoice"),
        ];
        let parsed = ParsedQuery::parse("invoice").unwrap();
        let q = SearchQuery::in_session("s", "invoice").mode(SearchMode::Ranked);
        let page = page_of_matches(&q, &parsed, matches.clone(), None);
        let order: Vec<u64> = page.items.iter().map(|h| h.event.seq).collect();
        assert_eq!(order, [2, 3, 1]);
        assert!(page.items.iter().all(|h| h.score.is_some_and(|s| s > 0.0)));
        assert_eq!(page.total, Some(Total::exact(3)));
        let q = SearchQuery::in_session("s", "invoice").page(0, 2);
        let mut shuffled = matches;
        shuffled.reverse();
        let page = page_of_matches(&q, &parsed, shuffled, None);
        let order: Vec<u64> = page.items.iter().map(|h| h.event.seq).collect();
        assert_eq!(order, [1, 2]);
        assert!(page.has_more);
        assert_eq!(page.items[1].snippet, "invoice invoice invoice");
    }

    #[test]
    fn rarer_terms_weigh_more() {
        let parsed = ParsedQuery::parse("common rare").unwrap();
        let stats = RankStats {
            docs: 1000,
            doc_freq: vec![900, 3],
        };
        let texts = [
            "common common common rare".to_owned(),
            "common rare rare rare".to_owned(),
        ];
        let s = bm25(&parsed, &texts, &stats);
        assert!(s[1] > s[0], "{s:?}");
    }
}
