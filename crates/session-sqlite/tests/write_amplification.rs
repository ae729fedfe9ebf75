//! What an append writes: the pages of one commit, counted as frames of
//! the write-ahead log, and the activity time the session lists order by.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use chrono::{TimeZone, Utc};
use session_core::{ManualClock, Message, NewSession, SessionEvent, SessionRepository};
use session_sqlite::SqliteRepository;

/// The database's page size.
fn page_size(db: &Path) -> u64 {
    let raw = rusqlite::Connection::open(db).unwrap();
    let bytes: i64 = raw.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    u64::try_from(bytes).unwrap()
}

/// Frames in the write-ahead log (the log is truncated before each count).
fn wal_frames(db: &Path) -> u64 {
    let wal = db.with_extension("db-wal");
    let len = std::fs::metadata(wal).map_or(0, |m| m.len());
    // A 32-byte header, then 24 bytes and a page per frame.
    len.saturating_sub(32) / (24 + page_size(db))
}

fn checkpoint(db: &Path) {
    let raw = rusqlite::Connection::open(db).unwrap();
    raw.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
}

fn active_at(db: &Path, id: &str) -> (i64, i64) {
    let raw = rusqlite::Connection::open(db).unwrap();
    raw.query_row(
        "SELECT active_at, updated_at FROM sessions WHERE id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .unwrap()
}

fn event(n: usize) -> SessionEvent {
    SessionEvent::new(Message::user(format!(
        "question {n}: {}",
        "detail ".repeat(20)
    )))
}

/// An append in the same second as the session's last activity writes no
/// activity index: the event row, its indexes, the session row; the
/// activity time in whole seconds follows every write of `updated_at`, so
/// lists keep their newest-activity-first order.
#[tokio::test(flavor = "multi_thread")]
async fn an_append_within_the_second_leaves_the_activity_indexes_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    let start = Utc.with_ymd_and_hms(2026, 11, 27, 12, 0, 0).unwrap();
    let clock = Arc::new(ManualClock::at(start));
    let repo = SqliteRepository::builder(&db)
        .clock(clock.clone())
        .open()
        .await
        .unwrap();
    let ids = session_testkit::activity::three_sessions(&repo, &clock, "app").await;
    for n in 0..20 {
        repo.append(&ids[0], vec![event(n)]).await.unwrap();
    }

    let mut frames = Vec::new();
    for n in 0..5 {
        clock.advance(chrono::Duration::milliseconds(10));
        checkpoint(&db);
        repo.append(&ids[0], vec![event(100 + n)]).await.unwrap();
        frames.push(wal_frames(&db));
    }
    let page = page_size(&db);
    println!(
        "WAL frames per append within a second: {frames:?} of {page} bytes ({} bytes each)",
        frames[1..].iter().max().unwrap() * (page + 24)
    );
    assert_eq!(page, u64::from(session_sqlite::DEFAULT_PAGE_SIZE));
    // The events row and its three indexes and the session row (schema 5
    // wrote 9: the three activity indexes moved with every append; schema
    // 6 wrote 6: the AUTOINCREMENT counter too); the first commit after a
    // checkpoint writes two pages more.
    assert!(frames[1..].iter().all(|&f| f <= 5), "{frames:?}");

    // The seconds follow `updated_at` through appends across seconds.
    let stored = async |id: &session_core::SessionId| active_at(&db, id.as_str());
    session_testkit::activity::seconds_follow_each_append(&repo, &clock, "app", &ids, stored).await;
}

/// A new database takes the page size it is opened with (the default
/// unless told otherwise); one that exists keeps its own; a size SQLite
/// does not take is `InvalidInput`, before any file is made.
#[tokio::test(flavor = "multi_thread")]
async fn a_new_database_takes_the_page_size_and_an_old_one_keeps_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh.db");
    SqliteRepository::open(&fresh).await.unwrap();
    assert_eq!(page_size(&fresh), 2048);

    let big = dir.path().join("big.db");
    let repo = SqliteRepository::builder(&big)
        .page_size(8192)
        .unwrap()
        .open()
        .await
        .unwrap();
    drop(repo);
    assert_eq!(page_size(&big), 8192);
    // Opened again with the default: the file keeps its 8 KiB pages.
    let repo = SqliteRepository::open(&big).await.unwrap();
    let s = repo
        .create(NewSession::new("app", "u", Utc::now()).unwrap())
        .await
        .unwrap();
    repo.append(&s.id, vec![event(1)]).await.unwrap();
    drop(repo);
    assert_eq!(page_size(&big), 8192);

    for bad in [0, 256, 3000, 131_072] {
        let err = SqliteRepository::builder(dir.path().join("bad.db"))
            .page_size(bad)
            .unwrap_err();
        assert_eq!(
            err.kind(),
            session_core::ErrorKind::InvalidInput,
            "{bad}: {err}"
        );
    }
    assert!(!dir.path().join("bad.db").exists());
}

/// The merge policy of the search index as stored (`None`: FTS5's default).
fn automerge(db: &Path) -> Option<i64> {
    let raw = rusqlite::Connection::open(db).unwrap();
    raw.query_row(
        "SELECT v FROM events_fts_config WHERE k = 'automerge'",
        [],
        |r| r.get(0),
    )
    .ok()
}

/// The search index merges its segments eight at a time, not FTS5's four
/// (each merge rewrites what it takes: fewer levels, fewer rewrites per
/// appended event), on a new database and on one a build before this
/// setting wrote; searches still find events of every batch.
#[tokio::test(flavor = "multi_thread")]
async fn the_search_index_merges_eight_segments_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    let repo = SqliteRepository::builder(&db)
        .index_batch(4)
        .open()
        .await
        .unwrap();
    assert_eq!(automerge(&db), Some(8));
    let s = repo
        .create(NewSession::new("app", "u", Utc::now()).unwrap())
        .await
        .unwrap();
    for n in 0..64 {
        repo.append(&s.id, vec![event(n)]).await.unwrap();
    }
    drop(repo);

    // A file an earlier build left with FTS5's default.
    let raw = rusqlite::Connection::open(&db).unwrap();
    raw.execute_batch("DELETE FROM events_fts_config WHERE k = 'automerge'")
        .unwrap();
    drop(raw);
    assert_eq!(automerge(&db), None);
    let repo = SqliteRepository::open(&db).await.unwrap();
    assert_eq!(automerge(&db), Some(8));
    let hits = repo
        .search(&session_core::SearchQuery::in_session(
            s.id.as_str(),
            "question 42:",
        ))
        .await
        .unwrap();
    assert_eq!(hits.items.len(), 1, "{:?}", hits.total);
    assert_eq!(hits.items[0].event.seq, 43);
}
