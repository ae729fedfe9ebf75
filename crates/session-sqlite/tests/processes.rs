//! Several processes on one database file, and writers killed with SIGKILL
//! mid-append (the shared harness in `session_testkit::process`).
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use session_core::SessionRepository;
use session_sqlite::SqliteRepository;

async fn open(path: String) -> Arc<dyn SessionRepository> {
    Arc::new(SqliteRepository::open(&path).await.unwrap())
}

fn location(dir: &std::path::Path) -> String {
    dir.join("store.db").display().to_string()
}

/// `PRAGMA integrity_check` is ok.
fn integrity_ok(path: &str) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let result: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(result, "ok");
}

session_testkit::process_suite!(open, location, integrity_ok);
