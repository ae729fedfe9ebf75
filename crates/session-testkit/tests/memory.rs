//! The conformance suite against the reference backend, `InMemoryRepository`.

use session_core::{InMemoryRepository, SharedClock};
use session_testkit::TestStore;

async fn memory(clock: SharedClock) -> Option<TestStore> {
    Some(TestStore::new(InMemoryRepository::new().with_clock(clock)))
}

session_testkit::conformance_suite!(memory);
session_testkit::stress_suite!(memory);
session_testkit::promise_suite!(memory, 256);

/// `erase_user` leaves nothing of the user anywhere in the store's maps
/// (its `Debug` form prints every session, event, index entry and state).
#[tokio::test]
async fn erase_user_leaves_nothing_of_the_user_in_memory() {
    let repo = InMemoryRepository::new();
    let planted = session_testkit::erasure::plant(&repo, chrono::Utc::now()).await;
    planted.check_before(&format!("{repo:?}"));
    planted.erase(&repo).await;
    planted.check_after(&format!("{repo:?}"));
}

/// The events and sessions-per-user quotas hold under racing writers.
#[tokio::test(flavor = "multi_thread")]
async fn the_quotas_hold_under_racing_writers() {
    let repo = InMemoryRepository::new().with_limits(session_testkit::quota::quota_limits());
    session_testkit::quota::all(std::sync::Arc::new(repo)).await;
}
