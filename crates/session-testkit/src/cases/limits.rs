//! Limits and text: oversize events, NUL and astral text, page sizes, 100k-event sessions, clock jumps.

use chrono::Duration;
use serde_json::json;
use session_core::{
    Clock as _, ErrorKind, EventFilter, Expiry, Limits, Message, ResetPolicy, ResolveRequest,
    SearchQuery, SessionEvent, SessionQuery, SessionService,
};

use super::support::{kind, numbered, owner};
use crate::fixture::{texts, user, Fixture, APP, LARGE_SESSION_BATCH};

/// An event over the size limit is `InvalidInput` and nothing is written.
pub async fn oversize_event_is_rejected(fx: Fixture) {
    let s = fx.session("alice").await;
    let limit = Limits::default().max_event_bytes;
    let err = fx.repo.append(&s.id, vec![user(&"x".repeat(limit))]).await;
    assert_eq!(kind(err), ErrorKind::InvalidInput);
    assert!(fx.archive(&s.id).await.is_empty());
    assert_eq!(fx.repo.event_version(&s.id).await.unwrap(), 0);
    let fits = user(&"y".repeat(limit - 4096));
    fx.append(&s.id, vec![fits.clone()]).await;
    assert_eq!(fx.archive(&s.id).await[0].message, fits.message);
    fx.append(&s.id, vec![user("")]).await;
    assert_eq!(fx.archive(&s.id).await[1].message.text(), "");
}

/// An event of about 1.6 MB whose text holds 200,000 distinct words (a
/// large tool output) is stored whole and found by literal and (where the
/// store ranks) ranked search: no engine index may refuse it.
pub async fn a_large_event_of_many_distinct_words_is_stored_and_found(fx: Fixture) {
    let s = fx.session("alice").await;
    let mut text = String::new();
    for i in 0..200_000 {
        text.push_str(&format!("w{i:x}q "));
    }
    fx.append(&s.id, vec![user(&text), user("after it")]).await;
    let got = fx.archive(&s.id).await;
    assert_eq!(got[0].message.text(), text);
    let mut modes = vec![SearchQuery::in_session(&s.id, "w2a3fq")];
    if fx.repo.capabilities().ranked_search {
        modes.push(SearchQuery::in_session(&s.id, "w2a3fq").mode(session_core::SearchMode::Ranked));
    }
    for q in modes {
        let hits = fx.repo.search(&q).await.unwrap();
        assert_eq!(hits.items.len(), 1, "{:?}", q.mode);
        assert_eq!(hits.items[0].event.seq, 1);
    }
}

/// NUL characters and every Unicode plane round-trip exactly, and are searchable.
pub async fn nul_and_astral_text_round_trips(fx: Fixture) {
    let s = fx.session("alice").await;
    let nasty = "nul:\0: bmp:é中: astral:𝄞🦀\u{10FFFF}: rtl:\u{202E}x: bom:\u{FEFF}: cr:\r\n:";
    let e = SessionEvent::builder(Message::user(nasty))
        .state("k\0ey", "v\0al🦀")
        .metadata("m", "\0")
        .build()
        .unwrap();
    fx.append(&s.id, vec![e.clone()]).await;
    let got = &fx.archive(&s.id).await[0];
    assert_eq!(got.message.text(), nasty);
    assert_eq!(got.state_delta, e.state_delta);
    assert_eq!(got.metadata, e.metadata);
    assert_eq!(
        fx.repo.get(&s.id).await.unwrap().state.get("k\0ey"),
        Some(&json!("v\0al🦀"))
    );
    let hits = fx
        .repo
        .search(&SearchQuery::in_session(&s.id, "𝄞🦀"))
        .await
        .unwrap();
    assert_eq!(hits.items.len(), 1);
    let hits = fx
        .repo
        .search(&SearchQuery::in_session(&s.id, "nul:\0:"))
        .await
        .unwrap();
    assert_eq!(hits.items.len(), 1);
}

/// Page sizes of 0 and over the maximum are `InvalidInput`; huge pages are empty.
pub async fn page_size_limits(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(&s.id, numbered("m", 3)).await;
    for size in [0, 1001, 1_000_000_000] {
        assert_eq!(
            kind(
                fx.repo
                    .events(&s.id, &EventFilter::archive().page(0, size))
                    .await
            ),
            ErrorKind::InvalidInput,
            "events page size {size}"
        );
        assert_eq!(
            kind(
                fx.repo
                    .search(&SearchQuery::in_session(&s.id, "m").page(0, size))
                    .await
            ),
            ErrorKind::InvalidInput
        );
        assert_eq!(
            kind(fx.repo.list(&SessionQuery::new().page(0, size)).await),
            ErrorKind::InvalidInput
        );
    }
    let far = fx
        .repo
        .events(&s.id, &EventFilter::archive().page(usize::MAX / 2, 1000))
        .await
        .unwrap();
    assert!(far.items.is_empty());
    assert_eq!(
        fx.texts(&s.id, &EventFilter::archive().page(0, 1000))
            .await
            .len(),
        3
    );
}

/// A session of 100,000 events (batches of 5,000; fewer where the store
/// asks, [`Fixture::large_session_events`]): counters, the last page, a
/// deep page, the context's tail and a search for one event are right.
pub async fn session_of_100k_events_pages_and_searches(fx: Fixture) {
    let n = fx.large_session_events;
    let batches = n / LARGE_SESSION_BATCH;
    let s = fx.session("alice").await;
    for b in 0..batches {
        let batch: Vec<SessionEvent> = (0..LARGE_SESSION_BATCH)
            .map(|i| user(&format!("e{}", b * LARGE_SESSION_BATCH + i)))
            .collect();
        fx.append(&s.id, batch).await;
    }
    let got = fx.repo.get(&s.id).await.unwrap();
    assert_eq!((got.event_count, got.version), (n, batches));
    let pages = usize::try_from(n / 1000).unwrap();
    let page = fx
        .repo
        .events(&s.id, &EventFilter::archive().page(pages - 1, 1000))
        .await
        .unwrap();
    assert_eq!(page.items.len(), 1000);
    assert!(!page.has_more);
    assert_eq!(page.items[0].message.text(), format!("e{}", n - 1000));
    assert_eq!(page.items[999].seq, n);
    // 73 % of the way in: page 73 of 100,000 events.
    let deep_page = n / 1000 * 73 / 100;
    let deep = fx
        .repo
        .events(
            &s.id,
            &EventFilter::archive().page(usize::try_from(deep_page).unwrap(), 1000),
        )
        .await
        .unwrap();
    assert_eq!(deep.items[0].seq, deep_page * 1000 + 1);
    assert!(deep.has_more);
    assert!(fx
        .repo
        .events(&s.id, &EventFilter::archive().page(pages, 1000))
        .await
        .unwrap()
        .items
        .is_empty());
    let tail: Vec<String> = (n - 3..n).map(|i| format!("e{i}")).collect();
    assert_eq!(fx.texts(&s.id, &EventFilter::last(3)).await, tail);
    // e77777 of 100,000 events.
    let sought = n * 7 / 9;
    let hits = fx
        .repo
        .search(&SearchQuery::in_session(&s.id, format!("e{sought}")))
        .await
        .unwrap();
    let found: Vec<u64> = hits.items.iter().map(|h| h.event.seq).collect();
    assert_eq!(found, [sought + 1]);
}

/// The injectable clock jumping back an hour, then forward a day: seqs and
/// versions still increase and nothing reorders; a session last active "in
/// the future" is not reset by an idle policy; expiry follows the clock.
pub async fn clock_jumps_back_and_forward(fx: Fixture) {
    let svc = fx.service();
    let o = owner();
    let req =
        ResolveRequest::new(APP, "alice", "clock-jumps").expiry(Expiry::Ttl(Duration::hours(12)));
    let policy = ResetPolicy::never().idle(Duration::minutes(30));
    let s = svc.resolve(&req, &policy).await.unwrap().session;
    let first = svc
        .append_message(&o, &s.id, Message::user("before the jump"))
        .await
        .unwrap();
    fx.clock.advance(Duration::hours(-1));
    let again = svc.resolve(&req, &policy).await.unwrap();
    assert!(!again.is_new, "last activity in the future is not idle");
    assert_eq!(again.session.id, s.id);
    let second = svc
        .append_message(&o, &s.id, Message::user("after going back"))
        .await
        .unwrap();
    assert_eq!(second.seqs, [first.seqs[0] + 1]);
    assert_eq!(second.version, first.version + 1);
    let both = ["before the jump", "after going back"];
    assert_eq!(texts(&fx.archive(&s.id).await), both);
    assert_eq!(texts(&fx.context(&s.id).await), both);
    let hits = svc
        .search(&o, &SearchQuery::in_session(&s.id, "jump"))
        .await
        .unwrap();
    assert_eq!(hits.items.len(), 1);

    // A day later, past the 12 h expiry.
    fx.clock.advance(Duration::hours(24));
    assert_eq!(kind(fx.repo.get(&s.id).await), ErrorKind::NotFound);
    assert_eq!(
        kind(fx.repo.append(&s.id, vec![user("late")]).await),
        ErrorKind::Expired
    );
    let fresh = svc.resolve(&req, &policy).await.unwrap();
    assert!(fresh.is_new);
    assert_ne!(fresh.session.id, s.id);
    let out = svc
        .append_message(&o, &fresh.session.id, Message::user("a new day"))
        .await
        .unwrap();
    assert_eq!(out.seqs, [1]);
    assert_eq!(fx.repo.purge_expired(fx.clock.now()).await.unwrap(), 1);
    assert_eq!(texts(&fx.archive(&fresh.session.id).await), ["a new day"]);
}
