//! The conformance suite against the PostgreSQL at `POSTGRES_URL` (default
//! the local server), each test in a schema of its own, dropped afterwards.

use session_core::SharedClock;
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
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    match PostgresRepository::builder(url())
        .schema(schema)
        .pool_size(8)
        .clock(clock)
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
session_testkit::stress_suite!(postgres);
