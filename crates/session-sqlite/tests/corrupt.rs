//! Corrupt stored rows are reported as `Serialization` errors naming the
//! session and seq, only on the reads that touch them; nothing panics.
#![allow(clippy::unwrap_used)]

use session_core::{
    ErrorKind, EventFilter, Message, NewSession, SearchQuery, SessionEvent, SessionRepository,
};
use session_sqlite::SqliteRepository;

#[tokio::test(flavor = "multi_thread")]
async fn corrupt_event_body_is_a_serialization_error_naming_session_and_seq() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("corrupt.db");
    let repo = SqliteRepository::open(&db).await.unwrap();
    let now = chrono::Utc::now();
    let bad = repo
        .create(
            NewSession::new("app", "alice", now)
                .unwrap()
                .with_id("bad")
                .unwrap(),
        )
        .await
        .unwrap();
    let good = repo
        .create(
            NewSession::new("app", "alice", now)
                .unwrap()
                .with_id("good")
                .unwrap(),
        )
        .await
        .unwrap();
    for id in [&bad.id, &good.id] {
        let events = (1..=3)
            .map(|i| SessionEvent::new(Message::user(format!("apple {i}"))))
            .collect();
        repo.append(id, events).await.unwrap();
    }
    let raw = rusqlite::Connection::open(&db).unwrap();
    raw.execute(
        "UPDATE events SET body = '{not json' WHERE session_id = 'bad' AND seq = 2",
        [],
    )
    .unwrap();

    let err = repo
        .events(&bad.id, &EventFilter::archive())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization);
    let msg = err.to_string();
    assert!(
        msg.contains("session bad") && msg.contains("seq 2"),
        "{msg}"
    );
    // Search keeps the readable hits and names the corrupt row.
    let page = repo
        .search(&SearchQuery::in_session("bad", "apple"))
        .await
        .unwrap();
    let texts: Vec<&str> = page.items.iter().map(|h| h.event.message.text()).collect();
    assert_eq!(texts, ["apple 1", "apple 3"]);
    assert_eq!(page.unreadable, ["bad/2"]);

    // Reads that do not touch the row, and other sessions, still work.
    let last = repo.events(&bad.id, &EventFilter::last(1)).await.unwrap();
    assert_eq!(last.items[0].message.text(), "apple 3");
    assert_eq!(repo.get(&bad.id).await.unwrap().event_count, 3);
    assert_eq!(
        repo.events(&good.id, &EventFilter::archive())
            .await
            .unwrap()
            .items
            .len(),
        3
    );
    assert_eq!(
        repo.search(&SearchQuery::in_session("good", "apple"))
            .await
            .unwrap()
            .items
            .len(),
        3
    );
    // Writes still work too.
    repo.append(&bad.id, vec![SessionEvent::new(Message::user("more"))])
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn corrupt_session_row_is_reported_not_panicked_on() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("corrupt.db");
    let repo = SqliteRepository::open(&db).await.unwrap();
    let s1 = repo
        .create(
            NewSession::new("app", "alice", chrono::Utc::now())
                .unwrap()
                .with_id("s1")
                .unwrap(),
        )
        .await
        .unwrap();
    let raw = rusqlite::Connection::open(&db).unwrap();
    raw.execute(
        "UPDATE sessions SET metadata = '[1,' , status = 'weird' WHERE id = 's1'",
        [],
    )
    .unwrap();
    let err = repo.get(&s1.id).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization);
    assert!(err.to_string().contains("session s1"), "{err}");
    // An append reads the status (an ended session takes no writes), so a
    // damaged status stops it with an error naming the session.
    let err = repo
        .append(&s1.id, vec![SessionEvent::new(Message::user("x"))])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization);
    assert!(err.to_string().contains("session s1 status"), "{err}");
    // Damaged metadata alone does not: an append reads only what it changes.
    raw.execute("UPDATE sessions SET status = 'active' WHERE id = 's1'", [])
        .unwrap();
    repo.append(&s1.id, vec![SessionEvent::new(Message::user("x"))])
        .await
        .unwrap();
    // A listing names the damaged session instead of failing.
    let listed = repo.list(&session_core::SessionQuery::new()).await.unwrap();
    assert!(listed.items.is_empty());
    assert_eq!(listed.unreadable, ["s1"]);
}

/// A version past `i64::MAX` (which SQLite silently stores as a REAL) in
/// one session row fails only that session: listings, stats and exports of
/// every other session go on, and name the damaged one as unreadable.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_row_with_a_real_version_is_reported_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("corrupt.db");
    let repo = SqliteRepository::open(&db).await.unwrap();
    let fx = session_testkit::Fixture::new(
        std::sync::Arc::new(repo),
        std::sync::Arc::new(session_core::ManualClock::new()),
    );
    session_testkit::hostile::corrupt_session_is_reported_alone(fx, |id| async move {
        let raw = rusqlite::Connection::open(&db).unwrap();
        raw.execute(
            "UPDATE sessions SET version = 1.8446744073709552e19 WHERE id = ?1",
            [&id],
        )
        .unwrap();
    })
    .await;
}

/// A corrupt row of the context's history fails the archive reads of its
/// session only, as a `Serialization` error naming it; its context view and
/// other sessions read on.
#[tokio::test(flavor = "multi_thread")]
async fn corrupt_context_change_fails_only_its_sessions_archive_reads() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("history.db");
    let repo = SqliteRepository::open(&db).await.unwrap();
    let now = chrono::Utc::now();
    let mut ids = Vec::new();
    for name in ["bad", "good"] {
        let s = repo
            .create(
                NewSession::new("app", "alice", now)
                    .unwrap()
                    .with_id(name)
                    .unwrap(),
            )
            .await
            .unwrap();
        let events = (1..=3)
            .map(|i| SessionEvent::new(Message::user(format!("m {i}"))))
            .collect();
        repo.append(&s.id, events).await.unwrap();
        let context = repo.events(&s.id, &EventFilter::context()).await.unwrap();
        let kept = context.items[2..].to_vec();
        assert!(repo.replace_context(&s.id, kept, 1).await.unwrap());
        ids.push(s.id);
    }
    let raw = rusqlite::Connection::open(&db).unwrap();
    let n = raw
        .execute(
            "UPDATE context_changes SET body = '{\"version\":2,\"context\":[[5,1]]' WHERE session_id = 'bad'",
            [],
        )
        .unwrap();
    assert_eq!(n, 1);

    let err = repo
        .events(&ids[0], &EventFilter::archive())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization);
    assert!(err.to_string().contains("session bad"), "{err}");
    let context = repo.events(&ids[0], &EventFilter::context()).await.unwrap();
    assert_eq!(
        context.items.len(),
        1,
        "the context view does not need the history"
    );
    let good = repo.events(&ids[1], &EventFilter::archive()).await.unwrap();
    let left: Vec<bool> = good
        .items
        .iter()
        .map(|e| e.left_context.is_some())
        .collect();
    assert_eq!(left, [true, true, false]);
}
