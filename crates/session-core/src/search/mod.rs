//! Search: the query language (parsed once, matched the same on every
//! store), the query and hit types, ranking, and the trigram index the
//! stores without a full-text engine keep.

mod fold;
mod query;
mod rank;
mod terms;
mod trigram;

pub use fold::{contains_folded, fold_case};
pub use query::{MatchTerms, SearchHit, SearchMode, SearchQuery, SearchScope};
pub use rank::{
    matches_needed, page_of_first_matches, page_of_matches, read_limit, RankStats, COUNT_PAST_PAGE,
};
pub use terms::{ParsedQuery, MAX_QUERY_TERMS};
pub use trigram::{
    candidates_from, combine_term_candidates, intersect_all, push_varint, read_varint,
    term_candidates_from, trigrams_of, trigrams_of_folded, Trigram, TrigramIndex,
};
