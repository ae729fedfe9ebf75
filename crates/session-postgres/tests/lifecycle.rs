//! Lifecycle checks that need a store of their own: `erase_user` leaves
//! nothing of the user in any row of any table of the store's schema; the
//! events quota holds.
#![allow(clippy::unwrap_used)]

use session_core::Limits;
use session_encryption::{EncryptedRepository, Keyring};
use session_postgres::PostgresRepository;
use session_testkit::erasure::plant;

fn url() -> String {
    std::env::var("POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// Every row of every table in `schema`, as JSON text, one per line.
async fn raw_rows(schema: &str) -> String {
    let (client, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let tables: Vec<String> = client
        .query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1",
            &[&schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut out = String::new();
    for t in tables {
        let rows = client
            .query(
                &format!("SELECT row_to_json(t)::text FROM \"{schema}\".\"{t}\" t"),
                &[],
            )
            .await
            .unwrap();
        for r in rows {
            let row: String = r.get(0);
            out.push_str(&format!("[{t}] {row}\n"));
        }
    }
    out
}

/// A store in a fresh schema with `limits`, and the schema's name; `None`
/// (after a printed skip, refused under CI) when no PostgreSQL answers.
async fn store(limits: Limits) -> Option<(PostgresRepository, String)> {
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    match PostgresRepository::builder(url())
        .schema(schema.clone())
        .limits(limits)
        .connect()
        .await
    {
        Ok(repo) => Some((repo, schema)),
        Err(e) => session_testkit::skip(
            "postgres",
            &format!("no PostgreSQL at {}: {e}", url()),
            false,
        ),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn erase_user_leaves_no_row_of_the_user_in_any_table() {
    let Some((repo, schema)) = store(Limits::default()).await else {
        return;
    };
    let planted = plant(&repo, chrono::Utc::now()).await;
    planted.check_before(&raw_rows(&schema).await);
    planted.erase(&repo).await;
    let after = raw_rows(&schema).await;
    repo.drop_schema().await.unwrap();
    planted.check_after(&after);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_quotas_hold_under_racing_writers() {
    let Some((repo, _)) = store(session_testkit::quota::quota_limits()).await else {
        return;
    };
    session_testkit::quota::all(std::sync::Arc::new(repo.clone())).await;
    repo.drop_schema().await.unwrap();
}

/// Behind the encryption layer, no row of any table holds a canary in
/// plain text.
/// Values moved, swapped or replaced in the store do not open.
#[tokio::test(flavor = "multi_thread")]
async fn encrypted_sessions_leave_no_plain_canary_in_any_table() {
    let Some((repo, schema)) = store(Limits::default()).await else {
        return;
    };
    let repo = std::sync::Arc::new(repo);
    let sealed = EncryptedRepository::new(repo.clone(), Keyring::generate("k1").unwrap());
    session_testkit::sealed::plant(&sealed, chrono::Utc::now()).await;
    session_testkit::sealed::moved_or_replaced_values_are_refused(&sealed, sealed.inner()).await;
    let raw = raw_rows(&schema).await;
    repo.drop_schema().await.unwrap();
    session_testkit::sealed::check_sealed(&raw);
}
