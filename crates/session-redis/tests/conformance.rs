//! The conformance suite against the Redis at `REDIS_URL` (default the local
//! server), each test under its own random key prefix, removed afterwards.

use session_core::{Limits, SharedClock};
use session_redis::RedisRepository;
use session_testkit::TestStore;

fn url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// Removes every key under the test's prefix when the test ends (SCAN with an escaped pattern).
struct DropPrefix(String);

impl Drop for DropPrefix {
    fn drop(&mut self) {
        if let Ok(client) = redis::Client::open(url()) {
            if let Ok(mut c) = client.get_connection() {
                let keys: Vec<String> = redis::cmd("KEYS")
                    .arg(format!("{}:*", self.0))
                    .query(&mut c)
                    .unwrap_or_default();
                if !keys.is_empty() {
                    let _: Result<(), _> = redis::cmd("DEL").arg(keys).query(&mut c);
                }
            }
        }
    }
}

async fn redis_store(clock: SharedClock) -> Option<TestStore> {
    redis_store_with(clock, Limits::default()).await
}

async fn redis_store_with(clock: SharedClock, limits: Limits) -> Option<TestStore> {
    let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    match RedisRepository::builder(url())
        .prefix(&prefix)
        .clock(clock)
        .limits(limits)
        .connect()
        .await
    {
        Ok(repo) => Some(TestStore::new(repo).with_guard(DropPrefix(prefix))),
        Err(e) => session_testkit::skip("redis", &format!("no Redis at {}: {e}", url()), false),
    }
}

session_testkit::conformance_suite!(redis_store);
session_testkit::model_suite!(redis_store);
session_testkit::promise_suite!(redis_store, 64);
session_testkit::stress_suite!(redis_store);

/// The suite through the encryption layer: sealing changes nothing an
/// agent can observe on this store.
mod encrypted {
    use std::sync::Arc;

    use session_core::{Limits, SharedClock};
    use session_encryption::{sealed_limits, EncryptedRepository, Keyring};
    use session_testkit::TestStore;

    async fn sealed(clock: SharedClock) -> Option<TestStore> {
        let ring = Keyring::generate("k1").expect("keyring");
        super::redis_store_with(clock, sealed_limits(&Limits::default()))
            .await
            .map(|s| s.map(|inner| Arc::new(EncryptedRepository::new(inner, ring))))
    }

    session_testkit::conformance_suite!(sealed);
}

/// A session whose head hash holds a version that is not a number is
/// reported for that session only; listings name it as unreadable.
#[test]
fn corrupt_session_head_is_reported_alone() {
    session_testkit::run_case(redis_store, |fx| async move {
        session_testkit::hostile::corrupt_session_is_reported_alone(fx, |id| async move {
            let client = redis::Client::open(url()).expect("client");
            let mut c = client.get_connection().expect("connection");
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(format!("t*:{{{id}}}:s"))
                .query(&mut c)
                .expect("keys");
            assert_eq!(keys.len(), 1, "{keys:?}");
            let _: () = redis::cmd("HSET")
                .arg(&keys[0])
                .arg("version")
                .arg("1.8446744073709552e19")
                .query(&mut c)
                .expect("corrupt");
        })
        .await;
    });
}
