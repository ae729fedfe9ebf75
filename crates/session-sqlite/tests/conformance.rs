//! The conformance suite against SQLite: one temporary database file per test.

use session_core::SharedClock;
use session_sqlite::SqliteRepository;
use session_testkit::TestStore;

async fn sqlite(clock: SharedClock) -> Option<TestStore> {
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = SqliteRepository::builder(dir.path().join("sessions.db"))
        .clock(clock)
        .open()
        .await
        .expect("open sqlite");
    Some(TestStore::new(repo).with_guard(dir))
}

session_testkit::conformance_suite!(sqlite);

mod in_memory {
    use super::*;

    async fn sqlite_memory(clock: SharedClock) -> Option<TestStore> {
        let repo = SqliteRepository::memory_builder()
            .clock(clock)
            .open()
            .await
            .expect("open sqlite in memory");
        Some(TestStore::new(repo))
    }

    session_testkit::conformance_suite!(sqlite_memory);
}
