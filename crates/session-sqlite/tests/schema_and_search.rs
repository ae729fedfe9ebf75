//! SQLite-specific behaviour beyond the conformance suite: migrations,
//! ranked search, and search exactness across index batches.
#![allow(clippy::unwrap_used)]

mod support;
use session_core::{
    ErrorKind, Message, NewSession, SearchMode, SearchQuery, SessionEvent, SessionId,
    SessionRepository,
};
use session_sqlite::{SqliteRepository, SCHEMA_VERSION};
use support::{UNDO_VERSION_6, UNDO_VERSION_7};

#[tokio::test(flavor = "multi_thread")]
async fn migrate_is_idempotent_and_runs_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    let repo = SqliteRepository::open(&db).await.unwrap();
    let kept = repo
        .create(
            NewSession::new("app", "u", chrono::Utc::now())
                .unwrap()
                .with_id("kept")
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(repo.migrate().await.unwrap(), SCHEMA_VERSION);
    assert_eq!(repo.migrate().await.unwrap(), SCHEMA_VERSION);
    drop(repo);
    let again = SqliteRepository::open(&db).await.unwrap();
    assert!(
        again.get(&kept.id).await.is_ok(),
        "reopening keeps the data"
    );
    let raw = rusqlite::Connection::open(&db).unwrap();
    let rows: i64 = raw
        .query_row("SELECT COUNT(*) FROM schema_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, SCHEMA_VERSION, "each migration is recorded once");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_newer_schema_is_refused_not_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    drop(SqliteRepository::open(&db).await.unwrap());
    let raw = rusqlite::Connection::open(&db).unwrap();
    raw.execute(
        "INSERT INTO schema_version (version, applied_at) VALUES (?1, 'future')",
        [SCHEMA_VERSION + 1],
    )
    .unwrap();
    let err = SqliteRepository::open(&db).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Backend);
    let report = err.report().to_string();
    assert!(report.contains("newer"), "{report}");
}

#[tokio::test(flavor = "multi_thread")]
async fn ranked_search_orders_by_relevance() {
    let repo = SqliteRepository::in_memory().await.unwrap();
    assert!(repo.capabilities().ranked_search);
    let s = repo
        .create(NewSession::new("app", "u", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    let texts = [
        "the weather is nice",
        "rust rust rust: ownership, borrowing and rust lifetimes",
        "a note about rust",
        "nothing relevant here",
    ];
    let events = texts
        .iter()
        .map(|t| SessionEvent::new(Message::user(*t)))
        .collect();
    repo.append(&s.id, events).await.unwrap();
    let hits = repo
        .search(&SearchQuery::in_session(&s.id, "rust").mode(SearchMode::Ranked))
        .await
        .unwrap();
    let got: Vec<&str> = hits.items.iter().map(|h| h.event.message.text()).collect();
    assert_eq!(got, [texts[1], texts[2]]);
    assert!(hits.items[0].score > hits.items[1].score);
    // Every word is required in ranked mode too.
    let hits = repo
        .search(&SearchQuery::in_session(&s.id, "rust ownership").mode(SearchMode::Ranked))
        .await
        .unwrap();
    assert_eq!(hits.items.len(), 1);
    // Terms too short for the trigram index are ranked in process.
    let hits = repo
        .search(&SearchQuery::in_session(&s.id, "a b").mode(SearchMode::Ranked))
        .await
        .unwrap();
    let got: Vec<&str> = hits.items.iter().map(|h| h.event.message.text()).collect();
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(hits.items.iter().all(|h| h.score.is_some()));
}

/// Every acknowledged event is found by the next search, whether it is
/// already in the index or still in the unindexed tail, across batch edges.
#[tokio::test(flavor = "multi_thread")]
async fn search_sees_indexed_and_pending_events_alike() {
    let dir = tempfile::tempdir().unwrap();
    let repo = SqliteRepository::builder(dir.path().join("s.db"))
        .index_batch(7)
        .open()
        .await
        .unwrap();
    let s = repo
        .create(NewSession::new("app", "u", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    for i in 1..=40 {
        repo.append(
            &s.id,
            vec![SessionEvent::new(Message::user(format!(
                "marker-{i:02} kiwi"
            )))],
        )
        .await
        .unwrap();
        let hits = repo
            .search(&SearchQuery::in_session(&s.id, "KIWI").page(0, 100))
            .await
            .unwrap();
        assert_eq!(hits.items.len(), i, "after {i} appends");
        let last = hits.items.last().unwrap();
        assert_eq!(last.event.message.text(), format!("marker-{i:02} kiwi"));
    }
}

/// The index watermark of the database at `db`: the last event rowid in the search index.
fn indexed_through(db: &std::path::Path) -> i64 {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row("SELECT indexed_through FROM fts_state", [], |r| r.get(0))
        .unwrap()
}

/// A new session of `repo` holding the events `0..to`, each "marker-<n> kiwi".
async fn kiwi_session(repo: &SqliteRepository, to: usize) -> SessionId {
    let s = repo
        .create(NewSession::new("app", "u", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    append_kiwis(repo, &s.id, 0, to).await;
    s.id
}

/// Appends the events `from..to` to session `id`, in one call.
async fn append_kiwis(repo: &SqliteRepository, id: &SessionId, from: usize, to: usize) {
    let events = (from..to)
        .map(|i| SessionEvent::new(Message::user(format!("marker-{i:03} kiwi"))))
        .collect();
    repo.append(id, events).await.unwrap();
}

/// How many events of session `id` a search for "kiwi" finds.
async fn kiwis(repo: &SqliteRepository, id: &SessionId) -> usize {
    repo.search(&SearchQuery::in_session(id, "kiwi").page(0, 1000))
        .await
        .unwrap()
        .items
        .len()
}

/// Appends leave up to a default batch (4,096) out of the index; a search
/// scans a pending tail of up to 256 events directly and indexes a longer
/// one first, and finds every event either way.
#[tokio::test(flavor = "multi_thread")]
async fn a_search_indexes_a_long_pending_tail_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let repo = SqliteRepository::builder(&db).open().await.unwrap();
    let id = kiwi_session(&repo, 200).await;
    assert_eq!(kiwis(&repo, &id).await, 200);
    assert_eq!(
        indexed_through(&db),
        0,
        "a short tail is scanned, not indexed"
    );
    append_kiwis(&repo, &id, 200, 300).await;
    assert_eq!(indexed_through(&db), 0, "appends wait for a full batch");
    assert_eq!(kiwis(&repo, &id).await, 300);
    let mark = indexed_through(&db);
    assert!(mark >= 300, "the search indexed the tail: watermark {mark}");
    append_kiwis(&repo, &id, 300, 310).await;
    assert_eq!(
        kiwis(&repo, &id).await,
        310,
        "indexed events and the new tail alike"
    );
}

/// Indexing the pending tail is only a speed-up: a search that cannot take
/// the write lock (another process holds it past the busy timeout) reads
/// the tail directly and still finds every event.
#[tokio::test(flavor = "multi_thread")]
async fn a_search_blocked_from_indexing_still_finds_the_pending_tail() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let repo = SqliteRepository::builder(&db)
        .busy_timeout(std::time::Duration::from_millis(20))
        .open()
        .await
        .unwrap();
    let id = kiwi_session(&repo, 300).await;

    let other = rusqlite::Connection::open(&db).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    assert_eq!(kiwis(&repo, &id).await, 300);
    other.execute_batch("ROLLBACK").unwrap();
    assert_eq!(indexed_through(&db), 0, "the index could not catch up");
}

/// A version-1 database (its trigram index holding text folded for case
/// only) is re-indexed by migration 2: accents fold, "cafe" finds "Café".
#[tokio::test(flavor = "multi_thread")]
async fn migration_two_refolds_the_search_index() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v1.db");
    let repo = SqliteRepository::open(&db).await.unwrap();
    let s = repo
        .create(NewSession::new("app", "u", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    repo.append(&s.id, vec![SessionEvent::new(Message::user("Café CRÈME"))])
        .await
        .unwrap();
    drop(repo);
    // Back to what version 1 wrote: the search text lower-cased, accents kept.
    let raw = rusqlite::Connection::open(&db).unwrap();
    raw.execute_batch(UNDO_VERSION_7).unwrap();
    raw.execute_batch(UNDO_VERSION_6).unwrap();
    raw.execute_batch(
        "DELETE FROM schema_version WHERE version >= 2; \
         ALTER TABLE sessions DROP COLUMN ctx_base; \
         ALTER TABLE sessions DROP COLUMN event_bytes; \
         DROP TABLE context_changes; \
         INSERT INTO events_fts (events_fts) VALUES ('delete-all'); \
         INSERT INTO events_fts (rowid, text) SELECT rowid, 'café crème' FROM events; \
         UPDATE fts_state SET indexed_through = (SELECT MAX(rowid) FROM events);",
    )
    .unwrap();
    drop(raw);
    let repo = SqliteRepository::open(&db).await.unwrap();
    let hits = repo
        .search(&SearchQuery::in_session(&s.id, "cafe creme"))
        .await
        .unwrap();
    assert_eq!(hits.items.len(), 1);
}

/// A word in nearly every event reads the session in order instead of
/// the index, stops counting 500 matches past the page (the total is then
/// a lower bound), and still pages exactly.
#[tokio::test(flavor = "multi_thread")]
async fn a_word_in_every_event_pages_exactly_with_a_bounded_count() {
    let repo = SqliteRepository::in_memory().await.unwrap();
    let s = repo
        .create(NewSession::new("app", "u", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    let events = (0..2500)
        .map(|i| SessionEvent::new(Message::user(format!("kiwi number {i}"))))
        .collect();
    repo.append(&s.id, events).await.unwrap();
    let first = repo
        .search(&SearchQuery::in_session(&s.id, "kiwi"))
        .await
        .unwrap();
    assert_eq!(first.items.len(), 10);
    assert!(first.has_more);
    assert_eq!(first.total, Some(session_core::Total::at_least(510)));
    let deep = repo
        .search(&SearchQuery::in_session(&s.id, "KIWI number").page(240, 10))
        .await
        .unwrap();
    let seqs: Vec<u64> = deep.items.iter().map(|h| h.event.seq).collect();
    assert_eq!(seqs, (2401..=2410).collect::<Vec<u64>>());
    assert_eq!(deep.total, Some(session_core::Total::exact(2500)));
    let one = repo
        .search(&SearchQuery::in_session(&s.id, "kiwi 1234"))
        .await
        .unwrap();
    assert_eq!(one.items.len(), 1);
    assert_eq!(one.total, Some(session_core::Total::exact(1)));
}
