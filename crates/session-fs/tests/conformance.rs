//! The conformance suite against plain files: one temporary directory per test.

use session_core::SharedClock;
use session_fs::FsRepository;
use session_testkit::TestStore;

async fn fs_store(clock: SharedClock) -> Option<TestStore> {
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = FsRepository::builder(dir.path())
        .clock(clock)
        .open()
        .await
        .expect("open fs store");
    Some(TestStore::new(repo).with_guard(dir))
}

session_testkit::conformance_suite!(fs_store);
session_testkit::model_suite!(fs_store);
session_testkit::stress_suite!(fs_store);
