//! Lifecycle checks that need a store of their own: `erase_user` leaves
//! nothing of the user in any row of any table of the store's schema; the
//! events quota holds; an append within the second changes no indexed
//! column of its session row.
#![allow(clippy::unwrap_used)]

use session_core::Limits;
use session_encryption::{EncryptedRepository, Keyring};
use session_postgres::PostgresRepository;
use session_testkit::erasure::plant;

fn url() -> String {
    std::env::var("POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// The one text column of the rows `sql` gives for `schema` (its `$1`).
async fn texts(client: &tokio_postgres::Client, sql: &str, schema: &str) -> Vec<String> {
    let rows = client.query(sql, &[&schema]).await.unwrap();
    rows.iter().map(|r| r.get(0)).collect()
}

/// Every row of every table in `schema`, as JSON text, one per line.
async fn raw_rows(schema: &str) -> String {
    let (client, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let tables = texts(
        &client,
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1",
        schema,
    )
    .await;
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

/// An append within the second changes no indexed column of its session's
/// row, so PostgreSQL can rewrite the row in place (a HOT update) instead
/// of adding entries to every index of the table; `active_at`, the
/// activity indexes' whole seconds, follows `updated_at` across seconds,
/// and lists keep their newest-activity-first order.
#[tokio::test(flavor = "multi_thread")]
async fn an_append_within_the_second_changes_no_indexed_column() {
    use chrono::TimeZone;
    use session_core::{ManualClock, Message, SessionEvent, SessionRepository};
    let start = chrono::Utc
        .with_ymd_and_hms(2026, 11, 27, 12, 0, 0)
        .unwrap();
    let clock = std::sync::Arc::new(ManualClock::at(start));
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    let Ok(repo) = PostgresRepository::builder(url())
        .schema(schema.clone())
        .clock(clock.clone())
        .connect()
        .await
    else {
        return session_testkit::skip::<()>("postgres", "no PostgreSQL answers", false)
            .unwrap_or(());
    };
    let (client, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    // Every column an append writes, and whether an index holds it.
    let written = [
        "version",
        "last_seq",
        "next_ctx_pos",
        "event_count",
        "context_tokens",
        "updated_at",
        "event_bytes",
    ];
    let indexed = texts(
        &client,
        "SELECT a.attname::text FROM pg_index i \
         JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
         JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey) \
         WHERE n.nspname = $1 AND c.relname = 'sessions'",
        &schema,
    )
    .await;
    assert!(indexed.iter().any(|c| c == "active_at"), "{indexed:?}");
    for column in written {
        assert!(!indexed.iter().any(|c| c == column), "{column} is indexed");
    }
    let active_at = async |id: &str| -> (i64, i64) {
        let row = client
            .query_one(
                &format!("SELECT active_at, updated_at FROM \"{schema}\".sessions WHERE id = $1"),
                &[&id],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    let event = |n: usize| vec![SessionEvent::new(Message::user(format!("m{n}")))];
    let ids = session_testkit::activity::three_sessions(&repo, &clock, "app").await;
    let before = active_at(ids[0].as_str()).await;
    for n in 0..5 {
        clock.advance(chrono::Duration::milliseconds(10));
        repo.append(&ids[0], event(n)).await.unwrap();
    }
    let after = active_at(ids[0].as_str()).await;
    assert_eq!(after.0, before.0, "active_at moved within the second");
    assert!(after.1 > before.1, "updated_at follows each append");
    // The seconds follow `updated_at` through appends across seconds.
    let stored = async |id: &session_core::SessionId| active_at(id.as_str()).await;
    session_testkit::activity::seconds_follow_each_append(&repo, &clock, "app", &ids, stored).await;
    repo.drop_schema().await.unwrap();
}
