//! The conformance and model suites against an in-process fake node
//! (`support/fake_es.rs`): the backend's protocol (commit points, pending
//! batches, rewinds, paging, search) on every run, no server needed. The same
//! suites run against a real cluster in `conformance.rs`.

#![allow(clippy::unwrap_used)]

#[path = "support/fake_es.rs"]
mod fake_es;

use session_core::{Limits, SharedClock};
use session_es::EsRepository;
use session_testkit::TestStore;

async fn fake_store(clock: SharedClock) -> Option<TestStore> {
    fake_store_with(clock, Limits::default()).await
}

async fn fake_store_with(clock: SharedClock, limits: Limits) -> Option<TestStore> {
    let node = fake_es::FakeServer::start().await;
    let repo = EsRepository::builder(node.url())
        .prefix("t")
        .clock(clock)
        .limits(limits)
        .connect()
        .await
        .unwrap();
    Some(
        TestStore::new(repo)
            .with_guard(node)
            .with_appends_per_writer(FAKE_APPENDS_PER_WRITER)
            .with_large_session_events(FAKE_LARGE_SESSION_EVENTS),
    )
}

/// Appends per writer of the 16-writer concurrency case on the fake node
/// (250 on the in-process stores, 20 on the real nodes): every contended
/// append is a version-checked HTTP write to a debug-built server, so 800
/// keep the contention at a fifth of the time.
const FAKE_APPENDS_PER_WRITER: u64 = 50;

/// Events of the large-session case on the fake node (100,000 on every
/// real engine, the Elasticsearch and OpenSearch nodes of `conformance.rs`
/// included): each page and search is the debug-built node filtering and
/// sorting every document, and the encrypted suite's search reads the
/// whole archive, so 100,000 took four of the suite's five minutes. 20,000
/// still page past the nodes' 10,000-hit window.
const FAKE_LARGE_SESSION_EVENTS: u64 = 20_000;

session_testkit::conformance_suite!(fake_store);
session_testkit::model_suite!(fake_store);
session_testkit::promise_suite!(fake_store, 32);

/// The suite through the encryption layer: sealing changes nothing an
/// agent can observe on this store.
mod encrypted {
    use std::sync::Arc;

    use session_core::{Limits, SharedClock};
    use session_encryption::{sealed_limits, EncryptedRepository, Keyring};
    use session_testkit::TestStore;

    async fn sealed(clock: SharedClock) -> Option<TestStore> {
        let ring = Keyring::generate("k1").expect("keyring");
        super::fake_store_with(clock, sealed_limits(&Limits::default()))
            .await
            .map(|s| s.map(|inner| Arc::new(EncryptedRepository::new(inner, ring))))
    }

    session_testkit::conformance_suite!(sealed);
}
