//! The conformance suite against SQLite: one temporary database per test,
//! with the default search-index batching, indexing inside every append
//! (in memory), and small batches so that searches mix indexed events with
//! the not-yet-indexed tail.

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
session_testkit::model_suite!(sqlite);
session_testkit::promise_suite!(sqlite, 64);
session_testkit::stress_suite!(sqlite);

mod in_memory {
    use super::*;

    async fn sqlite_memory(clock: SharedClock) -> Option<TestStore> {
        let repo = SqliteRepository::memory_builder()
            .clock(clock)
            .index_batch(1)
            .open()
            .await
            .expect("open sqlite in memory");
        Some(TestStore::new(repo))
    }

    session_testkit::conformance_suite!(sqlite_memory);
}

mod small_index_batches {
    use super::*;

    async fn sqlite_batch_3(clock: SharedClock) -> Option<TestStore> {
        let dir = tempfile::tempdir().expect("temp dir");
        let repo = SqliteRepository::builder(dir.path().join("sessions.db"))
            .clock(clock)
            .index_batch(3)
            .open()
            .await
            .expect("open sqlite");
        Some(TestStore::new(repo).with_guard(dir))
    }

    session_testkit::conformance_suite!(sqlite_batch_3);
}

/// The suite through the encryption layer: sealing changes nothing an
/// agent can observe on the default store.
mod encrypted {
    use super::*;
    use session_core::Limits;
    use session_encryption::{sealed_limits, EncryptedRepository, Keyring};

    async fn sqlite_encrypted(clock: SharedClock) -> Option<TestStore> {
        let dir = tempfile::tempdir().expect("temp dir");
        let inner = SqliteRepository::builder(dir.path().join("sessions.db"))
            .clock(clock)
            .limits(sealed_limits(&Limits::default()))
            .open()
            .await
            .expect("open sqlite");
        let keys = format!(
            "{}\n{}",
            Keyring::generate_entry("old"),
            Keyring::generate_entry("current")
        );
        let ring = Keyring::parse(&keys).expect("keyring");
        Some(TestStore::new(EncryptedRepository::new(inner, ring)).with_guard(dir))
    }

    session_testkit::conformance_suite!(sqlite_encrypted);
}
