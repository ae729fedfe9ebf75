//! Lifecycle checks that need a store of their own: `erase_user` leaves
//! nothing of the user in any document of any index of the fake node (live
//! or searchable copies); the events quota holds.
#![allow(clippy::unwrap_used)]

#[path = "support/fake_es.rs"]
mod fake_es;

use session_encryption::{EncryptedRepository, Keyring};
use session_es::EsRepository;
use session_testkit::erasure::plant;

#[tokio::test(flavor = "multi_thread")]
async fn erase_user_leaves_no_document_of_the_user() {
    let node = fake_es::FakeServer::start().await;
    let repo = EsRepository::builder(node.url())
        .prefix("erase")
        .connect()
        .await
        .unwrap();
    let planted = plant(&repo, chrono::Utc::now()).await;
    planted.check_before(&node.fake.dump());
    planted.erase(&repo).await;
    planted.check_after(&node.fake.dump());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_session_quotas_hold_under_racing_writers() {
    let node = fake_es::FakeServer::start().await;
    let repo = std::sync::Arc::new(
        EsRepository::builder(node.url())
            .prefix("quota")
            .limits(
                session_core::Limits::default()
                    .with_max_session_events(session_testkit::quota::MAX_SESSION_EVENTS)
                    .with_max_session_bytes(session_testkit::quota::MAX_SESSION_BYTES),
            )
            .connect()
            .await
            .unwrap(),
    );
    session_testkit::quota::events_per_session(repo.clone()).await;
    session_testkit::quota::bytes_per_session(repo.clone()).await;
    session_testkit::quota::imports_are_held_to_the_session_quotas_and_the_event_size_limit(repo)
        .await;
}

/// Behind the encryption layer, no document of any index holds a canary
/// in plain text.
/// Values moved, swapped or replaced in the store do not open.
#[tokio::test(flavor = "multi_thread")]
async fn encrypted_sessions_leave_no_plain_canary_in_any_document() {
    let node = fake_es::FakeServer::start().await;
    let repo = EsRepository::builder(node.url())
        .prefix("sealed")
        .connect()
        .await
        .unwrap();
    let sealed = EncryptedRepository::new(repo, Keyring::generate("k1").unwrap());
    session_testkit::sealed::plant(&sealed, chrono::Utc::now()).await;
    session_testkit::sealed::moved_or_replaced_values_are_refused(&sealed, sealed.inner()).await;
    session_testkit::sealed::check_sealed(&node.fake.dump());
}

/// Elasticsearch cannot count a user's sessions atomically with a create:
/// the quota is refused when the store is built, not ignored.
#[tokio::test]
async fn the_sessions_per_user_quota_is_refused() {
    let err = EsRepository::builder("http://127.0.0.1:1")
        .limits(session_core::Limits::default().with_max_user_sessions(3))
        .connect()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), session_core::ErrorKind::Unsupported, "{err}");
}
