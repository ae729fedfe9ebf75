//! Engine faults: a database held by another writer past the busy timeout
//! gives a typed, retryable error, writes nothing, and the same call
//! converges once the lock is gone.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use session_core::{
    ErrorKind, EventView, Message, NewSession, SessionEvent, SessionRepository,
    SessionRepositoryExt,
};
use session_sqlite::SqliteRepository;

#[tokio::test(flavor = "multi_thread")]
async fn a_busy_database_is_unavailable_then_the_retry_converges() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("busy.db");
    let repo = SqliteRepository::builder(&db)
        .busy_timeout(Duration::from_millis(50))
        .open()
        .await
        .unwrap();
    let s = repo
        .create(NewSession::new("app", "alice", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    repo.append(&s.id, vec![SessionEvent::new(Message::user("first"))])
        .await
        .unwrap();

    // Another process takes the write lock and keeps it.
    let other = rusqlite::Connection::open(&db).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let event = SessionEvent::builder(Message::user("second"))
        .id("e2")
        .build()
        .unwrap();
    let err = repo.append(&s.id, vec![event.clone()]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.is_retryable());
    // Reads still work (WAL) and show nothing half-written.
    let archive = repo.all_events(&s.id, EventView::Archive).await.unwrap();
    assert_eq!(archive.len(), 1);
    assert_eq!(repo.get(&s.id).await.unwrap().version, 1);

    other.execute_batch("ROLLBACK").unwrap();
    let out = repo.append(&s.id, vec![event.clone()]).await.unwrap();
    assert_eq!((out.written, out.version), (1, 2));
    let again = repo.append(&s.id, vec![event]).await.unwrap();
    assert_eq!(again.written, 0, "the retry after success writes nothing");
    assert_eq!(
        repo.all_events(&s.id, EventView::Archive)
            .await
            .unwrap()
            .len(),
        2
    );
}
