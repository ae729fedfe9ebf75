//! The conformance suite against plain files: one temporary directory per test.

use session_core::{Limits, SharedClock};
use session_fs::FsRepository;
use session_testkit::TestStore;

async fn fs_store(clock: SharedClock) -> Option<TestStore> {
    fs_store_with(clock, Limits::default()).await
}

async fn fs_store_with(clock: SharedClock, limits: Limits) -> Option<TestStore> {
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = FsRepository::builder(dir.path())
        .clock(clock)
        .limits(limits)
        .open()
        .await
        .expect("open fs store");
    Some(TestStore::new(repo).with_guard(dir))
}

session_testkit::conformance_suite!(fs_store);
session_testkit::model_suite!(fs_store);
session_testkit::promise_suite!(fs_store, 64);
session_testkit::stress_suite!(fs_store);

/// The suite through the encryption layer: sealing changes nothing an
/// agent can observe on this store.
mod encrypted {
    use std::sync::Arc;

    use session_core::{Limits, SharedClock};
    use session_encryption::{sealed_limits, EncryptedRepository, Keyring};
    use session_testkit::TestStore;

    async fn sealed(clock: SharedClock) -> Option<TestStore> {
        let ring = Keyring::generate("k1").expect("keyring");
        super::fs_store_with(clock, sealed_limits(&Limits::default()))
            .await
            .map(|s| s.map(|inner| Arc::new(EncryptedRepository::new(inner, ring))))
    }

    session_testkit::conformance_suite!(sealed);
}
