//! Schema 7 keys events by a plain rowid: deleting the newest rows frees
//! their rowids for the next appends, and search stays exact — the index
//! watermark comes down with the rows, in this process and in another.
#![allow(clippy::unwrap_used)]

mod support;
use session_core::{
    Message, NewSession, RewindTo, SearchQuery, SessionEvent, SessionId, SessionRepository,
    SessionRepositoryExt,
};
use session_sqlite::SqliteRepository;
use support::UNDO_VERSION_7;

async fn open(path: &std::path::Path) -> SqliteRepository {
    SqliteRepository::builder(path)
        .index_batch(3)
        .open()
        .await
        .unwrap()
}

async fn say(repo: &SqliteRepository, id: &SessionId, words: &[String]) {
    for w in words {
        let event = SessionEvent::new(Message::user(w.clone()));
        repo.append(id, vec![event]).await.unwrap();
    }
}

/// A new session of user `u`.
async fn session(repo: &SqliteRepository) -> session_core::Session {
    repo.create(NewSession::new("app", "u", chrono::Utc::now()).unwrap())
        .await
        .unwrap()
}

fn words(stem: &str, n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{stem}-{i:02} marker")).collect()
}

/// The texts a search finds in session `id`, oldest first.
async fn found(repo: &SqliteRepository, id: &SessionId, query: &str) -> Vec<String> {
    let hits = repo
        .search(&SearchQuery::in_session(id, query).page(0, 200))
        .await
        .unwrap();
    hits.items
        .iter()
        .map(|h| h.event.message.text().to_owned())
        .collect()
}

fn highest_rowid(path: &std::path::Path) -> i64 {
    let raw = rusqlite::Connection::open(path).unwrap();
    raw.query_row("SELECT COALESCE(MAX(rowid), 0) FROM events", [], |r| {
        r.get(0)
    })
    .unwrap()
}

/// How many rows wait above the index watermark (searched without the index).
fn unindexed(path: &std::path::Path) -> i64 {
    let raw = rusqlite::Connection::open(path).unwrap();
    let mark: i64 = raw
        .query_row("SELECT indexed_through FROM fts_state", [], |r| r.get(0))
        .unwrap();
    highest_rowid(path) - mark
}

#[tokio::test(flavor = "multi_thread")]
async fn rowids_freed_at_the_top_are_searchable_when_taken_again() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let repo = open(&db).await;
    let s = session(&repo).await;
    say(&repo, &s.id, &words("kiwi", 10)).await;
    let top = highest_rowid(&db);
    // The last five (indexed already) go; their rowids come free.
    repo.rewind_to(&s.id, &RewindTo::Seq(6)).await.unwrap();
    assert_eq!(highest_rowid(&db), top - 5);
    say(&repo, &s.id, &words("plum", 7)).await;
    assert_eq!(
        highest_rowid(&db),
        top + 2,
        "the freed rowids were taken again"
    );
    assert!(unindexed(&db) < 3, "batches of 3 go on being indexed");
    assert_eq!(found(&repo, &s.id, "plum").await, words("plum", 7));
    assert_eq!(found(&repo, &s.id, "kiwi").await, words("kiwi", 5));

    // A whole newest session goes; another session takes its rowids.
    let newest = session(&repo).await;
    say(&repo, &newest.id, &words("fig", 8)).await;
    assert!(repo.delete(&newest.id).await.unwrap());
    say(&repo, &s.id, &words("pear", 4)).await;
    assert_eq!(found(&repo, &s.id, "pear").await, words("pear", 4));
    assert_eq!(found(&repo, &s.id, "marker").await.len(), 5 + 7 + 4);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delete_by_another_process_does_not_hide_the_next_appends() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let ours = open(&db).await;
    let s = session(&ours).await;
    say(&ours, &s.id, &words("kiwi", 12)).await;
    // Another process rewinds: this one's idea of the watermark is now
    // above the rows left.
    let theirs = open(&db).await;
    theirs.rewind_to(&s.id, &RewindTo::Seq(4)).await.unwrap();
    drop(theirs);
    say(&ours, &s.id, &words("plum", 2)).await;
    assert_eq!(found(&ours, &s.id, "plum").await, words("plum", 2));
    say(&ours, &s.id, &words("lime", 9)).await;
    assert!(unindexed(&db) < 3, "batches of 3 go on being indexed");
    assert_eq!(found(&ours, &s.id, "lime").await, words("lime", 9));
    assert_eq!(found(&ours, &s.id, "marker").await.len(), 3 + 2 + 9);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_version_6_database_drops_the_autoincrement_counter() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v6.db");
    let repo = open(&db).await;
    let s = session(&repo).await;
    say(&repo, &s.id, &words("kiwi", 9)).await;
    drop(repo);
    // Version 6, whose counter ran past rows deleted from the top: the
    // watermark stands above the highest rowid.
    let raw = rusqlite::Connection::open(&db).unwrap();
    raw.execute_batch(UNDO_VERSION_7).unwrap();
    raw.execute_batch(
        "DELETE FROM events_fts WHERE rowid IN (SELECT rowid FROM events WHERE seq > 7); \
         DELETE FROM events WHERE seq > 7; \
         UPDATE sessions SET last_seq = 7, event_count = 7;",
    )
    .unwrap();
    let counter: i64 = raw
        .query_row(
            "SELECT seq FROM sqlite_sequence WHERE name = 'events'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(counter, highest_rowid(&db) + 2);
    drop(raw);

    let repo = open(&db).await;
    let raw = rusqlite::Connection::open(&db).unwrap();
    let table: String = raw
        .query_row(
            "SELECT sql FROM sqlite_schema WHERE name = 'events'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(!table.contains("AUTOINCREMENT"), "{table}");
    let counters: i64 = raw
        .query_row(
            "SELECT COUNT(*) FROM sqlite_sequence WHERE name = 'events'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(counters, 0, "no counter row is left behind");
    let mark: i64 = raw
        .query_row("SELECT indexed_through FROM fts_state", [], |r| r.get(0))
        .unwrap();
    assert!(mark <= highest_rowid(&db), "watermark {mark} came down");
    drop(raw);
    assert_eq!(found(&repo, &s.id, "kiwi").await, words("kiwi", 7));
    say(&repo, &s.id, &words("plum", 3)).await;
    assert_eq!(found(&repo, &s.id, "plum").await, words("plum", 3));
    let seqs: Vec<u64> = repo
        .all_events(&s.id, session_core::EventView::Archive)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, (1..=10).collect::<Vec<_>>());
}
