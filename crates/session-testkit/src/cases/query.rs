//! The query language on every store: words in any order, accents and case
//! folded, phrases, exclusions; results equal to the reference matcher on
//! random texts; hits with seq, role, snippet and a total.

use std::collections::BTreeSet;

use session_core::{
    ErrorKind, MatchTerms, ParsedQuery, Role, SearchMode, SearchQuery, SessionEvent, SessionId,
    Total,
};

use super::capabilities::requires;
use super::support::kind;
use crate::fixture::{assistant, user, Fixture};

/// Every hit of `q`, page after page (page size 7), and the first page's total.
async fn all_pages(fx: &Fixture, q: &SearchQuery) -> (Vec<(String, u64, String)>, Option<Total>) {
    let mut out = Vec::new();
    let mut total = None;
    for page in 0.. {
        let p = fx.repo.search(&q.clone().page(page, 7)).await.unwrap();
        if page == 0 {
            total = p.total;
        }
        out.extend(p.items.iter().map(|h| {
            (
                h.session_id.clone(),
                h.event.seq,
                h.event.message.text().to_owned(),
            )
        }));
        if !p.has_more {
            break;
        }
        assert!(page < 1000, "paging ends");
    }
    (out, total)
}

/// "locker 4711" finds "my locker is 4711": every word must occur, in any
/// order, as a case- and accent-insensitive substring; phrases keep their
/// words together; `-word` excludes.
pub async fn search_finds_every_word_in_any_order(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(
        &s.id,
        vec![
            user("my locker is 4711"),
            assistant("Locker 4711 is on floor two, near gate B."),
            user("the locker room is closed"),
            user("Crème brûlée at the CAFÉ"),
            user("gate b locker, cancelled"),
        ],
    )
    .await;
    let texts = |q: &str| {
        let fx = &fx;
        let id = s.id.clone();
        let q = q.to_owned();
        async move {
            let p = fx
                .repo
                .search(&SearchQuery::in_session(&id, q).page(0, 50))
                .await
                .unwrap();
            p.items
                .iter()
                .map(|h| h.event.message.text().to_owned())
                .collect::<Vec<_>>()
        }
    };
    let both = [
        "my locker is 4711",
        "Locker 4711 is on floor two, near gate B.",
    ];
    assert_eq!(texts("locker 4711").await, both);
    assert_eq!(texts("4711 LOCKER").await, both, "any order, any case");
    assert_eq!(
        texts("  lock   4711 ").await,
        both,
        "substrings; extra spaces"
    );
    assert_eq!(
        texts("creme brulee cafe").await,
        ["Crème brûlée at the CAFÉ"]
    );
    assert_eq!(texts("CRÈME").await, ["Crème brûlée at the CAFÉ"]);
    assert_eq!(
        texts("\"gate b\" locker").await,
        [
            "Locker 4711 is on floor two, near gate B.",
            "gate b locker, cancelled"
        ]
    );
    assert_eq!(texts("\"b locker\"").await, ["gate b locker, cancelled"]);
    assert_eq!(
        texts("locker -4711 -cancelled").await,
        ["the locker room is closed"]
    );
    assert!(texts("locker 4712").await.is_empty());
}

/// A tiny deterministic generator (xorshift), so a failing case replays.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % u64::try_from(n.max(1)).unwrap_or(1)).unwrap_or(0)
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

const FRAGMENTS: &[&str] = &[
    "lock", "Locker", "4711", "café", "CAFE", "Straße", "strasse", "naïve", "ﬁle", "file", "日本",
    "😀", "a_b", "100%", "\"q\"", "-x", "é", "e\u{301}", "İ", "Ω", "ω", "x", "ab", "abc", "*",
    "\\",
];
const SEPARATORS: &[&str] = &[" ", "", "-", "\n", "  ", ", "];

/// Model-based: on random texts (Unicode, accents as precomposed and
/// combining marks, compatibility forms, syntax characters) and random
/// queries (words, cut-out substrings, phrases, exclusions), every page of
/// results equals what the reference matcher selects, in seq order, with
/// an exact total; an unparseable query is `InvalidInput`. Across a user's
/// two sessions, the same set of events. Each query is asked in both
/// [`MatchTerms`] modes (every term, any term).
pub async fn search_agrees_with_the_reference_matcher(fx: Fixture) {
    let a = fx.session("carol").await;
    let b = fx.session("carol").await;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut stored: Vec<(SessionId, u64, String)> = Vec::new();
    for i in 0..60 {
        let n = 1 + rng.below(7);
        let mut text = String::new();
        for j in 0..n {
            if j > 0 {
                text.push_str(rng.pick(SEPARATORS));
            }
            text.push_str(rng.pick(FRAGMENTS));
        }
        let id = if i % 3 == 0 { &b.id } else { &a.id };
        let out = fx.append(id, vec![user(&text)]).await;
        stored.push((id.clone(), out.seqs[0], text));
    }
    for _ in 0..40 {
        let terms = 1 + rng.below(3);
        let mut q = String::new();
        for k in 0..terms {
            let (_, _, source) = &stored[rng.below(stored.len())];
            let chars: Vec<char> = source.chars().collect();
            let start = rng.below(chars.len());
            let len = 1 + rng.below(6);
            let cut: String = chars[start..(start + len).min(chars.len())]
                .iter()
                .collect();
            let term = match rng.below(5) {
                0 => rng.pick(FRAGMENTS).to_owned(),
                1 if !cut.contains('"') => format!("\"{cut}\""),
                2 if k > 0 => format!("-{}", rng.pick(FRAGMENTS)),
                _ => cut,
            };
            q.push_str(&term);
            q.push(' ');
        }
        for terms in [MatchTerms::All, MatchTerms::Any] {
            let in_a = SearchQuery::in_session(a.id.as_str(), q.clone()).matching(terms);
            let Ok(parsed) = ParsedQuery::parse(&q) else {
                assert_eq!(
                    kind(fx.repo.search(&in_a).await),
                    ErrorKind::InvalidInput,
                    "{q:?}"
                );
                continue;
            };
            let parsed = parsed.matching(terms);
            let want: Vec<(String, u64, String)> = stored
                .iter()
                .filter(|(id, _, text)| *id == a.id && parsed.matches(text))
                .map(|(id, seq, text)| (id.to_string(), *seq, text.clone()))
                .collect();
            let (got, total) = all_pages(&fx, &in_a).await;
            assert_eq!(got, want, "query {q:?} ({terms:?})");
            assert_eq!(
                total,
                Some(Total::exact(want.len())),
                "total of {q:?} ({terms:?})"
            );
            let across = SearchQuery::for_user(a.app.as_str(), "carol", q.clone()).matching(terms);
            let (got, _) = all_pages(&fx, &across).await;
            let got: BTreeSet<(String, u64)> = got.into_iter().map(|(s, q, _)| (s, q)).collect();
            let want: BTreeSet<(String, u64)> = stored
                .iter()
                .filter(|(_, _, text)| parsed.matches(text))
                .map(|(id, seq, _)| (id.to_string(), *seq))
                .collect();
            assert_eq!(got, want, "across sessions: {q:?} ({terms:?})");
        }
    }
}

/// A hit names its session, seq, role and time, and carries a snippet cut
/// around the match; a page carries the total and whether more follow.
pub async fn search_hits_carry_seq_role_snippet_and_total(fx: Fixture) {
    let s = fx.session("alice").await;
    let long = format!(
        "{} the parcel number is ZX-4471 and it left Lyon {}",
        "preamble ".repeat(30),
        "more text ".repeat(40)
    );
    let mut batch: Vec<SessionEvent> = vec![user("hello"), assistant(&long)];
    batch.extend((0..12).map(|i| user(&format!("parcel update {i}"))));
    fx.append(&s.id, batch).await;
    let p = fx
        .repo
        .search(&SearchQuery::in_session(&s.id, "ZX-4471"))
        .await
        .unwrap();
    assert_eq!(p.items.len(), 1);
    let hit = &p.items[0];
    assert_eq!((hit.session_id.as_str(), hit.event.seq), (s.id.as_str(), 2));
    assert_eq!(hit.event.role(), Role::Assistant);
    assert!(hit.snippet.contains("ZX-4471"), "{:?}", hit.snippet);
    assert!(hit.snippet.starts_with('…') && hit.snippet.ends_with('…'));
    assert!(hit.snippet.chars().count() < long.chars().count() / 2);
    assert_eq!(p.total, Some(Total::exact(1)));
    assert!(!p.has_more);
    let p = fx
        .repo
        .search(&SearchQuery::in_session(&s.id, "parcel").page(1, 5))
        .await
        .unwrap();
    assert_eq!(p.total, Some(Total::exact(13)));
    assert!(p.has_more);
    assert_eq!(p.items.len(), 5);
    assert_eq!(p.items[0].snippet, "parcel update 4");
}

/// Ranked search returns the same matches as chronological search, each
/// scored, best first; the query language is the same (exclusions hold).
pub async fn ranked_search_returns_the_same_matches(fx: Fixture) {
    let caps = fx.repo.capabilities();
    if !requires(
        &fx,
        caps.ranked_search,
        "ranked_search",
        "ranked_search_returns_the_same_matches",
    ) {
        return;
    }
    let s = fx.session("alice").await;
    fx.append(
        &s.id,
        vec![
            user("invoice sent"),
            user("the invoices: invoice 1, invoice 2, invoice 3"),
            user("an invoice for the locker"),
            user("nothing here"),
            user("invoice by paypal"),
        ],
    )
    .await;
    let q = SearchQuery::in_session(&s.id, "invoice -paypal").page(0, 50);
    let plain = fx.repo.search(&q).await.unwrap();
    let ranked = fx
        .repo
        .search(&q.clone().mode(SearchMode::Ranked))
        .await
        .unwrap();
    let seqs = |p: &session_core::Page<session_core::SearchHit>| {
        p.items.iter().map(|h| h.event.seq).collect::<BTreeSet<_>>()
    };
    assert_eq!(seqs(&plain), BTreeSet::from([1, 2, 3]));
    assert_eq!(seqs(&ranked), seqs(&plain), "the same matches");
    assert!(ranked.items.iter().all(|h| h.score.is_some()));
    assert_eq!(ranked.items[0].event.seq, 2, "the densest match first");
    assert_eq!(ranked.total, Some(Total::exact(3)));
}
