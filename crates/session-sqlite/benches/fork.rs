//! The cost of a fork on SQLite: the native fork (rows copied with
//! `INSERT … SELECT`, bodies untouched) against the portable one (export,
//! cut in core, import) in the same run, interleaved in pairs.
//!
//! `cargo bench -p session-sqlite --bench fork` (from the workspace root);
//! `FORK_EVENTS` sets the session size (default 1000), `FORK_PAIRS` the
//! number of pairs (default 15).

use session_sqlite::SqliteRepository;

fn main() {
    let (events, pairs) = session_testkit::fork_cost::settings();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = SqliteRepository::open(dir.path().join("fork.db"))
            .await
            .expect("open");
        println!(
            "sqlite {}",
            session_testkit::fork_cost::measure(&repo, events, pairs).await
        );
    });
}
