//! Hostile input: counters at and past their maximum, absurd pages, racing
//! identical imports, and the identifiers chat platforms use. Every store
//! must answer with a typed error (or an empty page) and keep what it holds.

use serde_json::json;
use session_core::{
    Clock as _, ErrorKind, EventFilter, EventView, ImportOutcome, SearchQuery, SessionDump,
    SessionError, SessionEvent, SessionQuery, SessionRepository as _, SessionUpdate, MAX_SEQ,
    MAX_VERSION,
};

use crate::fixture::{user, Fixture, APP};

fn obj(v: &serde_json::Value) -> session_core::StateMap {
    v.as_object().cloned().unwrap()
}

fn kind<T: std::fmt::Debug>(r: Result<T, SessionError>) -> ErrorKind {
    r.expect_err("expected an error").kind()
}

/// A small exported session: three events, one state key.
async fn small_dump(fx: &Fixture) -> SessionDump {
    let s = fx.session("alice").await;
    fx.append(
        &s.id,
        vec![
            SessionEvent::builder(session_core::Message::user("one"))
                .state("n", 1)
                .build()
                .unwrap(),
            user("two"),
            user("three"),
        ],
    )
    .await;
    fx.repo.export_session(&s.id).await.unwrap()
}

/// `dump` with its events renumbered to end at `last` (and `last_seq` set).
fn renumbered(dump: &SessionDump, last: u64) -> SessionDump {
    let mut d = dump.clone();
    let n = u64::try_from(d.events.len()).unwrap();
    let first = last.wrapping_sub(n).wrapping_add(1);
    let map: std::collections::HashMap<u64, u64> = d
        .events
        .iter()
        .zip(0u64..)
        .map(|(e, i)| (e.seq, first.wrapping_add(i)))
        .collect();
    for e in &mut d.events {
        e.seq = map[&e.seq];
    }
    for s in &mut d.context {
        *s = map[s];
    }
    d.last_seq = last;
    d
}

/// An import whose seqs or version lie past the documented maximum
/// (`MAX_SEQ`, `MAX_VERSION`: 2^53 - 1) is refused with `InvalidInput`
/// before anything is written: `i64::MAX`, `2^63` and `u64::MAX` would
/// wrap or overflow a store's integer columns and corrupt later appends.
pub async fn import_refuses_counters_past_the_maximum(fx: Fixture) {
    let dump = small_dump(&fx).await;
    let id = dump.session.id.clone();
    fx.repo.delete(&id).await.unwrap();
    let huge = [MAX_SEQ + 1, i64::MAX.unsigned_abs(), 1 << 63, u64::MAX];
    let mut bad: Vec<SessionDump> = huge.iter().map(|&n| renumbered(&dump, n)).collect();
    for n in huge {
        let mut d = dump.clone();
        d.session.version = n;
        bad.push(d);
    }
    for d in bad {
        let (last, version) = (d.last_seq, d.session.version);
        assert_eq!(
            kind(fx.repo.import_session(d).await),
            ErrorKind::InvalidInput,
            "last_seq {last}, version {version}"
        );
        assert_eq!(
            kind(fx.repo.get(&id).await),
            ErrorKind::NotFound,
            "a refused import wrote nothing"
        );
    }
}

/// A session whose seqs reach `MAX_SEQ` takes no new event: the append is
/// `InvalidInput` and changes nothing, a retry of an event it holds still
/// answers its seq, and reads are intact. One at `MAX_VERSION` takes no
/// write that would bump the version (append, update, context replace).
pub async fn counters_at_the_maximum_refuse_writes_and_keep_data(fx: Fixture) {
    let dump = small_dump(&fx).await;
    let id = dump.session.id.clone();
    fx.repo.delete(&id).await.unwrap();
    let at_max = renumbered(&dump, MAX_SEQ);
    assert_eq!(
        fx.repo.import_session(at_max.clone()).await.unwrap(),
        ImportOutcome::Imported
    );
    let before = fx.repo.export_session(&id).await.unwrap();
    assert_eq!(
        kind(fx.repo.append(&id, vec![user("one more")]).await),
        ErrorKind::InvalidInput
    );
    let retry = fx
        .repo
        .append(&id, vec![at_max.events[2].clone()])
        .await
        .unwrap();
    assert_eq!((retry.seqs, retry.written), (vec![MAX_SEQ], 0));
    assert_eq!(fx.repo.export_session(&id).await.unwrap(), before);
    assert_eq!(fx.archive(&id).await.len(), 3);

    fx.repo.delete(&id).await.unwrap();
    let mut top = dump.clone();
    top.session.version = MAX_VERSION;
    fx.repo.import_session(top).await.unwrap();
    let before = fx.repo.export_session(&id).await.unwrap();
    assert_eq!(
        kind(fx.repo.append(&id, vec![user("one more")]).await),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        kind(
            fx.repo
                .update(&id, SessionUpdate::new().metadata(obj(&json!({"k": 1}))))
                .await
        ),
        ErrorKind::InvalidInput
    );
    let ctx = fx.context(&id).await;
    assert_eq!(
        kind(fx.repo.replace_context(&id, ctx, MAX_VERSION).await),
        ErrorKind::InvalidInput
    );
    assert_eq!(fx.repo.export_session(&id).await.unwrap(), before);
    assert_eq!(fx.repo.event_version(&id).await.unwrap(), MAX_VERSION);
}

/// Page numbers at the ends of every integer type (`u32::MAX`, `i64::MAX`,
/// `u64::MAX`, `usize::MAX`) times the smallest and largest page size give
/// an empty page, never a panic or an engine error, for events (both views,
/// with and without a filter), search and list; `last_n(usize::MAX)` is
/// `InvalidInput` (past the largest page), like any oversized page.
pub async fn extreme_pages_are_empty(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(&s.id, vec![user("a1"), user("a2"), user("a3")])
        .await;
    let pages = [
        usize::try_from(u32::MAX).unwrap_or(usize::MAX),
        usize::try_from(i64::MAX).unwrap_or(usize::MAX),
        usize::try_from(u64::MAX).unwrap_or(usize::MAX),
        usize::MAX,
        usize::MAX / 2,
    ];
    for page in pages {
        for size in [1, 1000] {
            for view in [EventView::Archive, EventView::Context] {
                for filter in [
                    EventFilter::default().view(view),
                    EventFilter::default().view(view).keyword("a"),
                ] {
                    let got = fx
                        .repo
                        .events(&s.id, &filter.page(page, size))
                        .await
                        .unwrap();
                    assert!(got.items.is_empty(), "page {page} x {size}");
                }
            }
            let hits = fx
                .repo
                .search(&SearchQuery::in_session(&s.id, "a").page(page, size))
                .await
                .unwrap();
            assert!(hits.items.is_empty(), "search page {page} x {size}");
            let listed = fx
                .repo
                .list(&SessionQuery::new().page(page, size))
                .await
                .unwrap();
            assert!(listed.items.is_empty(), "list page {page} x {size}");
        }
    }
    assert_eq!(
        fx.texts(&s.id, &EventFilter::last(1000)).await,
        ["a1", "a2", "a3"]
    );
    assert_eq!(
        kind(fx.repo.events(&s.id, &EventFilter::last(usize::MAX)).await),
        ErrorKind::InvalidInput,
        "last_n past the largest page"
    );
}

/// Eight imports of the same dump at once: all succeed, exactly one writes,
/// the others answer `Unchanged`, and the store holds the dump exactly.
pub async fn concurrent_identical_imports_write_once(fx: Fixture) {
    let dump = small_dump(&fx).await;
    let id = dump.session.id.clone();
    fx.repo.delete(&id).await.unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let repo = fx.repo.clone();
            let d = dump.clone();
            tokio::spawn(async move { repo.import_session(d).await })
        })
        .collect();
    let mut imported = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(ImportOutcome::Imported) => imported += 1,
            Ok(ImportOutcome::Unchanged) => {}
            Err(e) => panic!("a racing identical import failed: {e}"),
        }
    }
    assert_eq!(imported, 1, "exactly one import writes");
    assert_eq!(fx.repo.export_session(&id).await.unwrap(), dump);
}

/// User ids, app names and keys take `@ . + : / | #` (what chat platforms
/// and identity providers use): sessions, `user:`/`app:` state, owner
/// listings, key listings and cross-session search work for them, and
/// owners that a naive `app/user` or `app|user` join would confuse — or a
/// path like `../../x` — stay apart.
pub async fn chat_platform_identifiers_stay_apart(fx: Fixture) {
    let owners = [
        ("acme.support", "ada@example.com"),
        ("a/b", "c"),
        ("a", "b/c"),
        ("a|b", "c"),
        ("a", "b|c"),
        ("team#1", "+4915112345678"),
        (APP, "../../x"),
        (APP, "slack/T123/U456"),
    ];
    let mut ids = Vec::new();
    for (n, (app, user_id)) in owners.iter().enumerate() {
        let s = fx.session_in(app, user_id).await;
        fx.repo
            .update(
                &s.id,
                SessionUpdate::new()
                    .metadata(obj(&json!({"n": n})))
                    .state(obj(&json!({"owner": format!("{app} {user_id}")}))),
            )
            .await
            .unwrap();
        fx.append(
            &s.id,
            vec![
                SessionEvent::builder(session_core::Message::user(format!("secret-{n}")))
                    .state("user:who", format!("{app} {user_id}"))
                    .state("app:which", (*app).to_string())
                    .build()
                    .unwrap(),
            ],
        )
        .await;
        ids.push(s.id);
    }
    for (n, (app, user_id)) in owners.iter().enumerate() {
        let shared = fx
            .repo
            .shared_state(&crate::app_name(app), &crate::user_id(user_id))
            .await
            .unwrap();
        assert_eq!(
            shared.user.get("user:who"),
            Some(&json!(format!("{app} {user_id}"))),
            "user scope of {app:?} {user_id:?}"
        );
        assert_eq!(shared.app.get("app:which"), Some(&json!(app)));
        let listed = fx
            .repo
            .list(&SessionQuery::new().app(*app).user(*user_id))
            .await
            .unwrap();
        let listed: Vec<&str> = listed.items.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(
            listed,
            [ids[n].as_str()],
            "own sessions of {app:?} {user_id:?}"
        );
        let hits = fx
            .repo
            .search(&SearchQuery::for_user(*app, *user_id, "secret"))
            .await
            .unwrap();
        let texts: Vec<String> = hits
            .items
            .iter()
            .map(|h| h.event.message.text().to_owned())
            .collect();
        assert_eq!(
            texts,
            [format!("secret-{n}")],
            "search of {app:?} {user_id:?}"
        );
    }
    // A key with `/`, `|` and `#` is stored and listed as given.
    let keyed = fx
        .repo
        .create(
            session_core::NewSession::new(APP, "ada@example.com", fx.clock.now())
                .unwrap()
                .with_key("slack/T123/C456|#general")
                .unwrap(),
        )
        .await
        .unwrap();
    let by_key = fx
        .repo
        .list(
            &SessionQuery::new()
                .app(APP)
                .user("ada@example.com")
                .key("slack/T123/C456|#general"),
        )
        .await
        .unwrap();
    assert_eq!(by_key.items.len(), 1);
    assert_eq!(by_key.items[0].id, keyed.id);
    // Glob and path characters are still refused before any store sees them.
    for bad in ["a*b", "a?b", "a b", "a\\b", "{a}"] {
        assert_eq!(
            kind(session_core::UserId::new(bad)),
            ErrorKind::InvalidInput,
            "{bad:?}"
        );
    }
}

/// A session whose stored row `corrupt` damaged (a backend-specific hook,
/// given the session id) is reported for that session only: `get` and
/// `export_session` of it are `Serialization` errors, while the other
/// session of the same owner still lists, reads, exports and takes appends,
/// and an owner's or an operator's listing names the damaged one in
/// `Page::unreadable` instead of failing.
pub async fn corrupt_session_is_reported_alone<F, Fut>(fx: Fixture, corrupt: F)
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let healthy = fx.session("alice").await;
    let damaged = fx.session("alice").await;
    for id in [&healthy.id, &damaged.id] {
        fx.append(id, vec![user("before the damage")]).await;
    }
    corrupt(damaged.id.to_string()).await;
    assert_eq!(
        kind(fx.repo.get(&damaged.id).await),
        ErrorKind::Serialization,
        "the damaged session reports its corruption"
    );
    assert_eq!(
        kind(fx.repo.export_session(&damaged.id).await),
        ErrorKind::Serialization
    );
    for query in [
        SessionQuery::new().app(APP).user("alice").page(0, 100),
        SessionQuery::new().page(0, 100),
    ] {
        let page = fx.repo.list(&query).await.unwrap();
        let ids: Vec<&str> = page.items.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, [healthy.id.as_str()], "{query:?}");
        // An operator's listing names it; an owner's may not, where the
        // damage hides the owner (a store never guesses whose it is).
        if query.is_unfiltered() || !page.unreadable.is_empty() {
            assert_eq!(
                page.unreadable,
                std::slice::from_ref(&damaged.id),
                "{query:?}"
            );
        }
    }
    fx.repo.get(&healthy.id).await.unwrap();
    fx.repo.export_session(&healthy.id).await.unwrap();
    fx.append(&healthy.id, vec![user("after the damage")]).await;
    assert_eq!(fx.archive(&healthy.id).await.len(), 2);
}
