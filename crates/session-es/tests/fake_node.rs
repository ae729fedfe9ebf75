//! The conformance and model suites against an in-process fake node
//! (`support/fake_es.rs`): the backend's protocol (commit points, pending
//! batches, rewinds, paging, search) on every run, no server needed. The same
//! suites run against a real cluster in `conformance.rs`.

#![allow(clippy::unwrap_used)]

#[path = "support/fake_es.rs"]
mod fake_es;

use session_core::SharedClock;
use session_es::EsRepository;
use session_testkit::TestStore;

async fn fake_store(clock: SharedClock) -> Option<TestStore> {
    let node = fake_es::FakeServer::start().await;
    let repo = EsRepository::builder(node.url())
        .prefix("t")
        .clock(clock)
        .connect()
        .await
        .unwrap();
    Some(TestStore::new(repo).with_guard(node))
}

session_testkit::conformance_suite!(fake_store);
session_testkit::model_suite!(fake_store);
