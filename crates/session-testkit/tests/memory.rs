//! The conformance suite against the reference backend, `InMemoryRepository`.

use std::sync::Arc;

use session_core::{InMemoryRepository, SessionRepository, SharedClock};

async fn memory(clock: SharedClock) -> Option<Arc<dyn SessionRepository>> {
    Some(Arc::new(InMemoryRepository::new().with_clock(clock)))
}

session_testkit::conformance_suite!(memory);
