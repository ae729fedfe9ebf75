//! Search: case-insensitive substring matching over the archive, paging, user-wide search.

use chrono::Duration;
use session_core::{
    Clock as _, CompactionSource, ErrorKind, MatchTerms, Message, ParsedQuery, SearchMode,
    SearchQuery, SessionEvent, Total,
};

use super::support::kind;
use crate::cases::requires;
use crate::fixture::{assistant, user, Fixture};

/// Search is a case-insensitive substring over the archive, synthetic summaries included.
pub async fn search_is_case_insensitive_over_the_archive(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(
        &s.id,
        vec![user("My cat is called Zebedee"), assistant("Nice name.")],
    )
    .await;
    let v = fx.repo.event_version(&s.id).await.unwrap();
    let [p, a] = SessionEvent::summary_turn(
        "User has a cat named ZEBEDEE.",
        CompactionSource::RecursiveSummarization,
        fx.clock.now(),
    );
    assert!(fx.repo.replace_context(&s.id, vec![p, a], v).await.unwrap());
    fx.append(&s.id, vec![user("unrelated")]).await;
    let hits = fx
        .repo
        .search(&SearchQuery::in_session(&s.id, "zebedee"))
        .await
        .unwrap();
    let got: Vec<String> = hits
        .items
        .iter()
        .map(|h| h.event.message.text().to_owned())
        .collect();
    assert_eq!(
        got,
        ["My cat is called Zebedee", "User has a cat named ZEBEDEE."]
    );
    assert!(hits.items.iter().all(|h| h.session_id == s.id));
    assert!(hits.items[1].event.is_synthetic());
    let hits = fx
        .repo
        .search(&SearchQuery::in_session(&s.id, "ebed"))
        .await
        .unwrap();
    assert_eq!(hits.items.len(), 2, "substrings match, not only words");
}

/// Results are chronological and paged (default page size 10).
pub async fn search_is_chronological_and_paged(fx: Fixture) {
    let s = fx.session("alice").await;
    let batch: Vec<SessionEvent> = (1..=25)
        .flat_map(|i| [user(&format!("needle {i}")), assistant("hay")])
        .collect();
    fx.append(&s.id, batch).await;
    let q = SearchQuery::in_session(&s.id, "NEEDLE");
    let p0 = fx.repo.search(&q).await.unwrap();
    assert_eq!(p0.items.len(), 10);
    assert!(p0.has_more);
    let p2 = fx.repo.search(&q.clone().page(2, 10)).await.unwrap();
    let got: Vec<String> = p2
        .items
        .iter()
        .map(|h| h.event.message.text().to_owned())
        .collect();
    let want: Vec<String> = (21..=25).map(|i| format!("needle {i}")).collect();
    assert_eq!(got, want);
    assert!(!p2.has_more);
    let seqs: Vec<u64> = p0.items.iter().map(|h| h.event.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
}

/// `%`, `_`, `*`, backslashes, parentheses, FTS and regex operators match
/// literally; the results are exactly what the reference matcher says.
pub async fn search_special_characters_match_literally(fx: Fixture) {
    let s = fx.session("alice").await;
    let hostile = [
        "100%",
        "a_b",
        "2*3",
        "say \"hi\"",
        "C:\\path",
        "f(x)",
        "cats NEAR dogs",
        "a.*b",
        "[abc]",
        "x?y",
        "it's",
        "^start$",
        "{1,2}",
        "a|b",
        "-neg",
        "col:val",
        "+plus",
        // FTS5 and Lucene query syntax, taken literally.
        "fox AND hound",
        "NOT owl",
        "OR",
        "near/3",
        "fuzzy~2",
        "boost^4",
        "/regex.*/",
        "a||b",
        "!bang",
        "title:(x)",
        "2026-01-01T00:00:00",
        "a\\*b",
        "0x00\u{0}nul",
        "emoji 😀 here",
    ];
    let batch: Vec<SessionEvent> = hostile.iter().map(|t| user(&format!("<{t}>"))).collect();
    fx.append(&s.id, batch).await;
    let decoy = "1000 aXb 23 say hi path fx cats dogs ab abc xy its start 12 ab neg colval plus \
                 fox hound owl near 3 fuzzy 2 boost 4 regex bang title x";
    fx.append(&s.id, vec![user(decoy)]).await;
    let stored: Vec<String> = hostile.iter().map(|t| format!("<{t}>")).collect();
    // Whole strings, and each special character on its own.
    let singles: Vec<String> = "%_*?[]\"\\()^$|{}:+-~!/'"
        .chars()
        .map(String::from)
        .collect();
    for t in hostile.iter().map(|t| (*t).to_owned()).chain(singles) {
        // The reference matcher says what the query means (words, phrases,
        // exclusions); nothing in it is a wildcard or engine syntax.
        let Ok(parsed) = ParsedQuery::parse(&t) else {
            assert_eq!(
                kind(fx.repo.search(&SearchQuery::in_session(&s.id, &t)).await),
                ErrorKind::InvalidInput,
                "query {t:?}"
            );
            continue;
        };
        let hits = fx
            .repo
            .search(&SearchQuery::in_session(&s.id, &t).page(0, 100))
            .await
            .unwrap();
        let got: Vec<String> = hits
            .items
            .iter()
            .map(|h| h.event.message.text().to_owned())
            .collect();
        let want: Vec<String> = stored
            .iter()
            .map(String::as_str)
            .chain([decoy])
            .filter(|text| parsed.matches(text))
            .map(str::to_owned)
            .collect();
        assert!(!want.is_empty(), "{t:?} is stored");
        assert_eq!(got, want, "query {t:?}");
        for text in &want {
            assert!(
                session_core::fold_case(text).contains(&parsed.include()[0]),
                "{t:?}: a hit holds the first term literally"
            );
        }
    }
}

/// No match is an empty page, not an error; an empty, blank or exclusion-only query is `InvalidInput`.
pub async fn search_without_match_is_empty(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(&s.id, vec![user("hello")]).await;
    let hits = fx
        .repo
        .search(&SearchQuery::in_session(&s.id, "absent"))
        .await
        .unwrap();
    assert!(hits.items.is_empty());
    assert!(!hits.has_more);
    for empty in ["", " ", "\t\n", "\"\"", "-hello"] {
        assert_eq!(
            kind(fx.repo.search(&SearchQuery::in_session(&s.id, empty)).await),
            ErrorKind::InvalidInput,
            "{empty:?} finds nothing to look for"
        );
    }
}

/// A user-scoped search covers all that user's sessions in the app, and only those.
pub async fn search_across_a_users_sessions(fx: Fixture) {
    let a1 = fx.session_in("app1", "alice").await;
    let a2 = fx.session_in("app1", "alice").await;
    let b = fx.session_in("app1", "bob").await;
    let other_app = fx.session_in("app2", "alice").await;
    let t0 = fx.clock.now();
    let at = |min: i64, t: &str| {
        SessionEvent::builder(Message::user(t))
            .timestamp(t0 + Duration::minutes(min))
            .build()
            .unwrap()
    };
    fx.append(&a1.id, vec![at(1, "orange one"), at(3, "orange three")])
        .await;
    fx.append(&a2.id, vec![at(2, "orange two")]).await;
    fx.append(&b.id, vec![at(0, "orange bob")]).await;
    fx.append(&other_app.id, vec![at(0, "orange elsewhere")])
        .await;
    let hits = fx
        .repo
        .search(&SearchQuery::for_user("app1", "alice", "orange"))
        .await
        .unwrap();
    let got: Vec<(String, String)> = hits
        .items
        .iter()
        .map(|h| (h.session_id.clone(), h.event.message.text().to_owned()))
        .collect();
    assert_eq!(
        got,
        [
            (a1.id.to_string(), "orange one".to_owned()),
            (a2.id.to_string(), "orange two".to_owned()),
            (a1.id.to_string(), "orange three".to_owned()),
        ]
    );
}

/// The texts of a page of hits, in order.
fn hit_texts(page: &session_core::Page<session_core::SearchHit>) -> Vec<String> {
    page.items
        .iter()
        .map(|h| h.event.message.text().to_owned())
        .collect()
}

/// Any-of mode (`MatchTerms::Any`): an event matches when it holds at
/// least one word or phrase and no exclusion; short terms (which no index
/// narrows) included; in one session and across a user's sessions; the
/// snippet is cut around the first term found.
pub async fn any_of_matches_events_with_any_term(fx: Fixture) {
    let s = fx.session("alice").await;
    let long = format!(
        "{} the train to LYON leaves at noon, locker later {}",
        "preamble ".repeat(20),
        "more ".repeat(40)
    );
    fx.append(
        &s.id,
        vec![
            user("my locker is 4711"),
            user("nothing to see"),
            assistant(&long),
            user("ticket 4711 was cancelled"),
            user("ox or cart"),
            user("the green gate"),
        ],
    )
    .await;
    let any = |text: &str| SearchQuery::in_session(&s.id, text).matching(MatchTerms::Any);
    let hits = fx
        .repo
        .search(&any("LOCKER lyon \"green gate\" -cancelled"))
        .await
        .unwrap();
    assert_eq!(
        hit_texts(&hits),
        ["my locker is 4711", long.as_str(), "the green gate"]
    );
    assert_eq!(hits.total, Some(Total::exact(3)));
    let snippet = &hits.items[1].snippet;
    assert!(
        snippet.contains("train to LYON") && snippet.starts_with('…'),
        "cut around the first term found: {snippet:?}"
    );
    let hits = fx.repo.search(&any("4711 zebra")).await.unwrap();
    assert_eq!(
        hit_texts(&hits),
        ["my locker is 4711", "ticket 4711 was cancelled"]
    );
    // A two-character term narrows nothing: every event is read and checked.
    let hits = fx.repo.search(&any("ox zebra")).await.unwrap();
    assert_eq!(hit_texts(&hits), ["ox or cart"]);
    let all = fx
        .repo
        .search(&SearchQuery::in_session(&s.id, "locker lyon"))
        .await
        .unwrap();
    assert_eq!(all.items.len(), 1, "every term is still the default");
    let page = fx.repo.search(&any("4711 gate").page(1, 2)).await.unwrap();
    assert_eq!(hit_texts(&page), ["the green gate"]);
    assert_eq!(page.total, Some(Total::exact(3)));
    assert!(!page.has_more);

    let other = fx.session("alice").await;
    fx.append(&other.id, vec![user("zebra crossing")]).await;
    let across = SearchQuery::for_user(s.app.as_str(), "alice", "zebra lyon -cancelled")
        .matching(MatchTerms::Any)
        .page(0, 50);
    let mut got = hit_texts(&fx.repo.search(&across).await.unwrap());
    got.sort();
    let mut want = vec![long.clone(), "zebra crossing".to_owned()];
    want.sort();
    assert_eq!(got, want, "across the user's sessions");

    let caps = fx.repo.capabilities();
    if requires(
        &fx,
        caps.ranked_search,
        "ranked_search",
        "any_of_matches_events_with_any_term (ranked part)",
    ) {
        let ranked = fx
            .repo
            .search(&any("4711 gate -cancelled").mode(SearchMode::Ranked))
            .await
            .unwrap();
        let mut got = hit_texts(&ranked);
        got.sort();
        assert_eq!(got, ["my locker is 4711", "the green gate"]);
        assert!(ranked.items.iter().all(|h| h.score.is_some()));
    }
}

/// `since` keeps the events at or after a time (inclusive, to the
/// microsecond), in one session and across a user's sessions, with
/// either mode; the total counts only those.
pub async fn since_bounds_cross_session_search(fx: Fixture) {
    let a1 = fx.session_in("app1", "alice").await;
    let a2 = fx.session_in("app1", "alice").await;
    let b = fx.session_in("app1", "bob").await;
    let t0 = fx.clock.now();
    let at = |min: i64, t: &str| {
        SessionEvent::builder(Message::user(t))
            .timestamp(t0 + Duration::minutes(min))
            .build()
            .unwrap()
    };
    // Seq order is not time order: a bound is on the timestamp.
    fx.append(
        &a1.id,
        vec![at(4, "plum four"), at(1, "plum one"), at(3, "plum three")],
    )
    .await;
    fx.append(&a2.id, vec![at(2, "plum two"), at(5, "pear five")])
        .await;
    fx.append(&b.id, vec![at(4, "plum bob")]).await;
    let across = |text: &str, since| {
        SearchQuery::for_user("app1", "alice", text)
            .since(since)
            .page(0, 50)
    };
    let hits = fx
        .repo
        .search(&across("plum", t0 + Duration::minutes(2)))
        .await
        .unwrap();
    assert_eq!(hit_texts(&hits), ["plum two", "plum three", "plum four"]);
    assert_eq!(hits.total, Some(Total::exact(3)));
    let just_after = t0 + Duration::minutes(2) + Duration::nanoseconds(500);
    let hits = fx.repo.search(&across("plum", just_after)).await.unwrap();
    assert_eq!(
        hit_texts(&hits),
        ["plum three", "plum four"],
        "an event half a microsecond before the bound is out"
    );
    let hits = fx
        .repo
        .search(&across("pear plum", t0 + Duration::minutes(4)).matching(MatchTerms::Any))
        .await
        .unwrap();
    assert_eq!(hit_texts(&hits), ["plum four", "pear five"]);
    let hits = fx
        .repo
        .search(&across("plum", t0 + Duration::days(1)))
        .await
        .unwrap();
    assert!(hits.items.is_empty());
    assert_eq!(hits.total, Some(Total::exact(0)));

    let in_a1 = SearchQuery::in_session(&a1.id, "plum").since(t0 + Duration::minutes(3));
    let hits = fx.repo.search(&in_a1).await.unwrap();
    assert_eq!(
        hit_texts(&hits),
        ["plum four", "plum three"],
        "one session: by seq"
    );
    let first = fx.repo.search(&in_a1.clone().page(0, 1)).await.unwrap();
    assert_eq!(hit_texts(&first), ["plum four"]);
    assert!(first.has_more);
    assert_eq!(first.total, Some(Total::exact(2)));
    let caps = fx.repo.capabilities();
    if requires(
        &fx,
        caps.ranked_search,
        "ranked_search",
        "since_bounds_cross_session_search (ranked part)",
    ) {
        let ranked = fx
            .repo
            .search(&in_a1.mode(SearchMode::Ranked))
            .await
            .unwrap();
        let mut got = hit_texts(&ranked);
        got.sort();
        assert_eq!(got, ["plum four", "plum three"]);
    }
}
