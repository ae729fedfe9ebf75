//! Capability-gated cases: each runs where the backend declares the
//! capability in [`session_core::Capabilities`], and elsewhere checks that
//! the call is refused with `Unsupported` and prints why the rest is skipped.

use session_core::{ErrorKind, SearchMode, SearchQuery};

use super::support::kind;
use crate::fixture::{user, Fixture};

/// Whether the backend under test declares a capability; prints the skip
/// reason when it does not, so a gated case never passes silently.
pub fn requires(fx: &Fixture, declared: bool, capability: &str, case: &str) -> bool {
    if !declared {
        let backend = fx.repo.capabilities().backend;
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            format!("SKIPPED {case} on {backend}: the backend does not declare {capability}\n")
                .as_bytes(),
        );
    }
    declared
}

/// Ranked search (declared by `ranked_search`) scores every hit and puts
/// the event that matches the query best first; a backend without it
/// answers `Unsupported` from core's one check, never a search of its own.
pub async fn ranked_search_puts_the_best_match_first(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(
        &s.id,
        vec![
            user("the weather is fine today"),
            user("rust ownership explained: ownership rules of rust, ownership and borrowing"),
            user("rust is a language; ownership is one of its ideas"),
            user("lunch at noon"),
        ],
    )
    .await;
    let query = SearchQuery::in_session(s.id.as_str(), "rust ownership").mode(SearchMode::Ranked);
    let caps = fx.repo.capabilities();
    if !requires(
        &fx,
        caps.ranked_search,
        "ranked_search",
        "ranked_search_puts_the_best_match_first",
    ) {
        assert_eq!(kind(fx.repo.search(&query).await), ErrorKind::Unsupported);
        return;
    }
    let hits = fx.repo.search(&query).await.unwrap();
    assert!(!hits.items.is_empty(), "ranked search finds the matches");
    assert!(
        hits.items.iter().all(|h| h.score.is_some()),
        "every ranked hit carries a score"
    );
    assert!(
        hits.items[0]
            .event
            .message
            .text()
            .starts_with("rust ownership explained"),
        "the best match comes first: {:?}",
        hits.items
            .iter()
            .map(|h| h.event.message.text())
            .collect::<Vec<_>>()
    );
    assert!(
        hits.items
            .iter()
            .all(|h| !h.event.message.text().contains("weather")
                && !h.event.message.text().contains("lunch")),
        "events with neither word are not hits"
    );
}
