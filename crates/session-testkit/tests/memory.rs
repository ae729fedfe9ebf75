//! The conformance suite against the reference backend, `InMemoryRepository`.

use session_core::{InMemoryRepository, SharedClock};
use session_testkit::TestStore;

async fn memory(clock: SharedClock) -> Option<TestStore> {
    Some(TestStore::new(InMemoryRepository::new().with_clock(clock)))
}

session_testkit::conformance_suite!(memory);
session_testkit::stress_suite!(memory);
