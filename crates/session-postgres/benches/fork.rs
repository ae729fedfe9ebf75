//! The cost of a fork on PostgreSQL: the native fork (rows copied with
//! `INSERT … SELECT` under a share lock on the source, bodies untouched)
//! against the portable one (export, cut in core, import) in the same run,
//! interleaved in pairs, in a schema of its own that is dropped after.
//!
//! `cargo bench -p session-postgres --bench fork` (from the workspace
//! root) against `POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`); `FORK_EVENTS` and
//! `FORK_PAIRS` as for SQLite.

use session_postgres::PostgresRepository;

fn main() {
    let (events, pairs) = session_testkit::fork_cost::settings();
    let url = std::env::var("POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let schema = format!("bench_fork_{}", std::process::id());
        let repo = PostgresRepository::builder(&url)
            .schema(&schema)
            .connect()
            .await
            .expect("connect");
        println!(
            "postgres {}",
            session_testkit::fork_cost::measure(&repo, events, pairs).await
        );
        repo.drop_schema().await.expect("drop the bench schema");
    });
}
