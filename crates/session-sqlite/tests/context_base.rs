//! A context replace moves the session's context base instead of rewriting
//! the rows of the events that leave the context (schema version 3), and a
//! database written by version 2 (left events marked with a NULL position)
//! reads the same after the upgrade; a version 4 database counts its
//! sessions' event bytes when opened.
#![allow(clippy::unwrap_used)]

mod support;
use session_core::{
    EventView, Message, NewSession, Session, SessionEvent, SessionRepository, SessionRepositoryExt,
};
use session_sqlite::SqliteRepository;
use support::{UNDO_VERSION_6, UNDO_VERSION_7};

/// `(seq, ctx_pos)` of every event row of a session, in seq order.
fn positions(db: &std::path::Path, id: &str) -> Vec<(i64, Option<i64>)> {
    let raw = rusqlite::Connection::open(db).unwrap();
    let mut stmt = raw
        .prepare("SELECT seq, ctx_pos FROM events WHERE session_id = ?1 ORDER BY seq")
        .unwrap();
    stmt.query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A store at `db` holding one session of `n` user messages.
async fn with_events(db: &std::path::Path, n: usize) -> (SqliteRepository, Session) {
    let repo = SqliteRepository::open(db).await.unwrap();
    let s = repo
        .create(NewSession::new("app", "alice", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    let events: Vec<SessionEvent> = (0..n)
        .map(|i| SessionEvent::new(Message::user(format!("m {i}"))))
        .collect();
    repo.append(&s.id, events).await.unwrap();
    (repo, s)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_context_replace_leaves_the_rows_it_drops_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let (repo, s) = with_events(&db, 200).await;
    let before = positions(&db, s.id.as_str());
    let context = repo.all_events(&s.id, EventView::Context).await.unwrap();
    let version = repo.event_version(&s.id).await.unwrap();
    let kept = context[190..].to_vec();
    assert!(repo
        .replace_context(&s.id, kept.clone(), version)
        .await
        .unwrap());
    let after = positions(&db, s.id.as_str());
    let untouched = before.iter().zip(&after).filter(|(b, a)| b == a).count();
    assert_eq!(untouched, 190, "only the 10 kept events get a new position");
    assert_eq!(
        repo.all_events(&s.id, EventView::Context).await.unwrap(),
        kept
    );
    let dump = repo.export_session(&s.id).await.unwrap();
    let kept_seqs: Vec<u64> = kept.iter().map(|e| e.seq).collect();
    assert_eq!(dump.context, kept_seqs);
    assert_eq!(dump.events.len(), 200);
    let tokens: u64 = kept.iter().map(|e| u64::from(e.token_estimate)).sum();
    assert_eq!(repo.get(&s.id).await.unwrap().context_tokens, tokens);
    // Appends join the context after the kept events; a rewind recounts from the base.
    let next = repo
        .append(&s.id, vec![SessionEvent::new(Message::user("next"))])
        .await
        .unwrap();
    let context = repo.all_events(&s.id, EventView::Context).await.unwrap();
    assert_eq!(context.len(), 11);
    assert_eq!(context.last().unwrap().message.text(), "next");
    let from = kept[5].seq;
    repo.rewind_to(&s.id, &session_core::RewindTo::Seq(from))
        .await
        .unwrap();
    let context = repo.all_events(&s.id, EventView::Context).await.unwrap();
    assert_eq!(context, kept[..5]);
    let tokens: u64 = kept[..5].iter().map(|e| u64::from(e.token_estimate)).sum();
    assert_eq!(repo.get(&s.id).await.unwrap().context_tokens, tokens);
    assert!(next.seqs[0] > from);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_version_2_database_reads_the_same_after_the_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v2.db");
    let (repo, s) = with_events(&db, 20).await;
    drop(repo);
    // What version 2 left after a compaction that kept the last 5 events:
    // positions 0.. for the kept ones, NULL for the others, no base column.
    let raw = rusqlite::Connection::open(&db).unwrap();
    raw.execute_batch(UNDO_VERSION_7).unwrap();
    raw.execute_batch(UNDO_VERSION_6).unwrap();
    raw.execute_batch(
        "UPDATE events SET ctx_pos = CASE WHEN seq > 15 THEN seq - 16 END; \
         ALTER TABLE sessions DROP COLUMN ctx_base; \
         ALTER TABLE sessions DROP COLUMN event_bytes; \
         DROP TABLE context_changes; \
         DELETE FROM schema_version WHERE version >= 3;",
    )
    .unwrap();
    drop(raw);
    let repo = SqliteRepository::open(&db).await.unwrap();
    let context = repo.all_events(&s.id, EventView::Context).await.unwrap();
    let seqs: Vec<u64> = context.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [16, 17, 18, 19, 20]);
    assert_eq!(repo.export_session(&s.id).await.unwrap().context, seqs);
}

#[tokio::test]
async fn a_version_4_database_counts_its_event_bytes_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v4.db");
    let (repo, s) = with_events(&db, 20).await;
    let counted = repo.get(&s.id).await.unwrap().event_bytes;
    assert!(counted > 20 * 10, "{counted}");
    drop(repo);
    let raw = rusqlite::Connection::open(&db).unwrap();
    raw.execute_batch(UNDO_VERSION_7).unwrap();
    raw.execute_batch(UNDO_VERSION_6).unwrap();
    raw.execute_batch(
        "ALTER TABLE sessions DROP COLUMN event_bytes; \
         DELETE FROM schema_version WHERE version >= 5;",
    )
    .unwrap();
    drop(raw);
    let repo = SqliteRepository::open(&db).await.unwrap();
    assert_eq!(repo.get(&s.id).await.unwrap().event_bytes, counted);
}
