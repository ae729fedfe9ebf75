//! SQLite-specific behaviour beyond the conformance suite: migrations,
//! ranked search, and search exactness across index batches.
#![allow(clippy::unwrap_used)]

use session_core::{
    ErrorKind, Message, NewSession, SearchMode, SearchQuery, SessionEvent, SessionRepository,
};
use session_sqlite::{SqliteRepository, SCHEMA_VERSION};

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
        .search(&SearchQuery::in_session(&s.id, "rust ownership").mode(SearchMode::Ranked))
        .await
        .unwrap();
    let got: Vec<&str> = hits.items.iter().map(|h| h.event.message.text()).collect();
    assert_eq!(got, [texts[1], texts[2]]);
    assert!(hits.items[0].score > hits.items[1].score);
    let err = repo
        .search(&SearchQuery::in_session(&s.id, "a b").mode(SearchMode::Ranked))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
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
