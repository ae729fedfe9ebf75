//! The conformance suite against the PostgreSQL at `POSTGRES_URL` (default
//! the local server), each test in a schema of its own, dropped afterwards.

use session_core::{Limits, SharedClock};
use session_postgres::PostgresRepository;
use session_testkit::TestStore;

fn url() -> String {
    std::env::var("POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// Drops the test's schema when the test ends.
struct DropSchema(PostgresRepository);

impl Drop for DropSchema {
    fn drop(&mut self) {
        let repo = self.0.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(repo.drop_schema())
        })
        .join();
    }
}

async fn postgres(clock: SharedClock) -> Option<TestStore> {
    postgres_with(clock, Limits::default()).await
}

async fn postgres_with(clock: SharedClock, limits: Limits) -> Option<TestStore> {
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    match PostgresRepository::builder(url())
        .schema(schema)
        .pool_size(8)
        .clock(clock)
        .limits(limits)
        .connect()
        .await
    {
        Ok(repo) => Some(TestStore::new(repo.clone()).with_guard(DropSchema(repo))),
        Err(e) => session_testkit::skip(
            "postgres",
            &format!("no PostgreSQL at {}: {e}", url()),
            false,
        ),
    }
}

session_testkit::conformance_suite!(postgres);
session_testkit::model_suite!(postgres);
session_testkit::promise_suite!(postgres, 64);
session_testkit::stress_suite!(postgres);

/// The suite through the encryption layer: sealing changes nothing an
/// agent can observe on this store.
mod encrypted {
    use std::sync::Arc;

    use session_core::{Limits, SharedClock};
    use session_encryption::{sealed_limits, EncryptedRepository, Keyring};
    use session_testkit::TestStore;

    async fn sealed(clock: SharedClock) -> Option<TestStore> {
        let ring = Keyring::generate("k1").expect("keyring");
        super::postgres_with(clock, sealed_limits(&Limits::default()))
            .await
            .map(|s| s.map(|inner| Arc::new(EncryptedRepository::new(inner, ring))))
    }

    session_testkit::conformance_suite!(sealed);
}

/// A session row with a negative version (written by hand or by an old
/// bug) is reported for that session only; listings name it as unreadable.
#[test]
fn corrupt_session_row_is_reported_alone() {
    session_testkit::run_case(postgres, |fx| async move {
        session_testkit::hostile::corrupt_session_is_reported_alone(fx, |id| async move {
            let (client, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls)
                .await
                .expect("connect");
            tokio::spawn(conn);
            // Every test has its own schema: find the one holding this id.
            let rows = client
                .query(
                    "SELECT table_schema FROM information_schema.tables \
                     WHERE table_name = 'sessions' AND table_schema LIKE 't\\_%'",
                    &[],
                )
                .await
                .expect("schemas");
            // Other tests drop their schemas meanwhile: their errors are no concern.
            let mut damaged = 0;
            for row in rows {
                let schema: String = row.get(0);
                damaged += client
                    .execute(
                        &format!("UPDATE \"{schema}\".sessions SET version = -5 WHERE id = $1"),
                        &[&id],
                    )
                    .await
                    .unwrap_or(0);
            }
            assert_eq!(damaged, 1, "the session row was damaged");
        })
        .await;
    });
}
