//! The whole conformance suite through a `session-server`: each test starts
//! a server on a loopback port over a real store (SQLite, PostgreSQL) and
//! runs the case against a [`RemoteRepository`] connected to it, so every
//! behaviour of the contract holds over HTTP as it does in-process.

use std::sync::Arc;

use session_client::RemoteRepository;
use session_core::{SessionRepository, SharedClock};
use session_server::SessionServer;
use session_testkit::TestStore;

/// Stops the server when the test ends.
struct Running(tokio::task::JoinHandle<std::io::Result<()>>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A remote store served by a new server over `repo`, and the server's guard.
async fn through_server(repo: Arc<dyn SessionRepository>) -> (RemoteRepository, Running) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("local address");
    let server = tokio::spawn(SessionServer::new(repo).serve(listener, std::future::pending()));
    let remote = RemoteRepository::connect(&format!("http://{addr}"))
        .await
        .expect("connect to the server");
    (remote, Running(server))
}

mod sqlite {
    use super::*;
    use session_sqlite::SqliteRepository;

    async fn sqlite_via_server(clock: SharedClock) -> Option<TestStore> {
        let dir = tempfile::tempdir().expect("temp dir");
        let repo = SqliteRepository::builder(dir.path().join("sessions.db"))
            .clock(clock)
            .open()
            .await
            .expect("open sqlite");
        let (remote, server) = through_server(Arc::new(repo)).await;
        Some(TestStore::new(remote).with_guard((server, dir)))
    }

    session_testkit::conformance_suite!(sqlite_via_server);
    session_testkit::promise_suite!(sqlite_via_server, 16);
}

mod postgres {
    use super::*;
    use session_postgres::PostgresRepository;

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

    async fn postgres_via_server(clock: SharedClock) -> Option<TestStore> {
        let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
        let repo = match PostgresRepository::builder(url())
            .schema(schema)
            .pool_size(4)
            .clock(clock)
            .connect()
            .await
        {
            Ok(repo) => repo,
            Err(e) => {
                return session_testkit::skip(
                    "postgres",
                    &format!("no PostgreSQL at {}: {e}", url()),
                    false,
                )
            }
        };
        let (remote, server) = through_server(Arc::new(repo.clone())).await;
        Some(TestStore::new(remote).with_guard((server, DropSchema(repo))))
    }

    session_testkit::conformance_suite!(postgres_via_server);
}
