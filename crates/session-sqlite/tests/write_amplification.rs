//! What an append writes: the pages of one commit, counted as frames of
//! the write-ahead log, and the activity time the session lists order by.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use chrono::{TimeZone, Utc};
use session_core::{
    Clock as _, ManualClock, Message, NewSession, SessionEvent, SessionQuery, SessionRepository,
};
use session_sqlite::SqliteRepository;

/// Frames in the write-ahead log (the log is truncated before each count).
fn wal_frames(db: &Path) -> u64 {
    let wal = db.with_extension("db-wal");
    let len = std::fs::metadata(wal).map_or(0, |m| m.len());
    // A 32-byte header, then 24 bytes and a 4,096-byte page per frame.
    len.saturating_sub(32) / (24 + 4096)
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
    let mut ids = Vec::new();
    for user in ["a", "b", "c"] {
        let s = repo
            .create(NewSession::new("app", user, clock.now()).unwrap())
            .await
            .unwrap();
        ids.push(s.id);
    }
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
    println!("WAL frames per append within a second: {frames:?}");
    // The events row and its three indexes and the session row (schema 5
    // wrote 9: the three activity indexes moved with every append; schema
    // 6 wrote 6: the AUTOINCREMENT counter too); the first commit after a
    // checkpoint writes two pages more.
    assert!(frames[1..].iter().all(|&f| f <= 5), "{frames:?}");

    // The seconds follow `updated_at` through appends across seconds.
    for (step, id) in ids.iter().enumerate().rev() {
        clock.advance(chrono::Duration::milliseconds(700));
        repo.append(id, vec![event(200 + step)]).await.unwrap();
        let (active, updated) = active_at(&db, id.as_str());
        assert_eq!(active, updated.div_euclid(1_000_000), "session {step}");
    }
    let listed: Vec<_> = repo
        .list(&SessionQuery::default().app("app"))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(listed, ids, "newest activity first");
}
