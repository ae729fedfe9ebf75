//! Lifecycle checks that need a store of their own: `erase_user` leaves
//! nothing of the user in any row of any table of the database file
//! (search index shadow tables included); the events quota holds.
#![allow(clippy::unwrap_used)]

use rusqlite::types::ValueRef;
use session_encryption::{EncryptedRepository, Keyring};
use session_sqlite::SqliteRepository;
use session_testkit::erasure::plant;

/// Every value of every row of every table, as text, one per line.
fn raw_rows(db: &std::path::Path) -> String {
    let c = rusqlite::Connection::open(db).unwrap();
    let tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    let mut out = String::new();
    for t in tables {
        let mut stmt = c.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
        let n = stmt.column_count();
        let mut rows = stmt.query([]).unwrap();
        while let Some(row) = rows.next().unwrap() {
            for i in 0..n {
                match row.get_ref(i).unwrap() {
                    ValueRef::Text(b) | ValueRef::Blob(b) => {
                        out.push_str(&String::from_utf8_lossy(b));
                    }
                    ValueRef::Integer(v) => out.push_str(&v.to_string()),
                    ValueRef::Real(v) => out.push_str(&v.to_string()),
                    ValueRef::Null => {}
                }
                out.push('\t');
            }
            out.push_str(&format!("\t[{t}]\n"));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn erase_user_leaves_no_row_of_the_user_in_any_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("erase.db");
    let repo = SqliteRepository::open(&db).await.unwrap();
    let planted = plant(&repo, chrono::Utc::now()).await;
    planted.check_before(&raw_rows(&db));
    planted.erase(&repo).await;
    planted.check_after(&raw_rows(&db));
}

/// The bytes of the database file and its write-ahead log, as text.
fn raw_bytes(db: &std::path::Path) -> String {
    let mut out = String::new();
    for suffix in ["", "-wal", "-shm"] {
        let path = format!("{}{suffix}", db.display());
        if let Ok(bytes) = std::fs::read(&path) {
            out.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    out
}

/// `erase_user` overwrites what it frees (`secure_delete`) and truncates
/// the write-ahead log: no byte of the files on disk still holds the
/// erased text or names the erased sessions, while the store stays open.
#[tokio::test(flavor = "multi_thread")]
async fn erase_user_leaves_no_byte_of_the_user_in_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("erase.db");
    let repo = SqliteRepository::open(&db).await.unwrap();
    let planted = plant(&repo, chrono::Utc::now()).await;
    planted.check_before(&raw_bytes(&db));
    planted.erase(&repo).await;
    planted.check_after(&raw_bytes(&db));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_quotas_hold_under_racing_writers() {
    let dir = tempfile::tempdir().unwrap();
    let repo = SqliteRepository::builder(dir.path().join("quota.db"))
        .limits(session_testkit::quota::quota_limits())
        .open()
        .await
        .unwrap();
    session_testkit::quota::all(std::sync::Arc::new(repo)).await;
}

/// Behind the encryption layer, no row of any table (search index shadow
/// tables included) holds a canary in plain text.
/// Values moved, swapped or replaced in the store do not open.
#[tokio::test(flavor = "multi_thread")]
async fn encrypted_sessions_leave_no_plain_canary_in_any_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sealed.db");
    let repo = SqliteRepository::open(&db).await.unwrap();
    let sealed = EncryptedRepository::new(repo, Keyring::generate("k1").unwrap());
    session_testkit::sealed::plant(&sealed, chrono::Utc::now()).await;
    session_testkit::sealed::moved_or_replaced_values_are_refused(&sealed, sealed.inner()).await;
    session_testkit::sealed::check_sealed(&raw_rows(&db));
}
