//! PostgreSQL-specific behaviour: a connection killed mid-transaction,
//! concurrent migrations, and index use of the hot queries.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use session_core::{
    AppName, ErrorKind, EventFilter, EventView, Message, NewSession, SessionEvent,
    SessionRepository, SessionRepositoryExt, UserId,
};
use session_postgres::{PostgresRepository, SCHEMA_VERSION};
use tokio_postgres::NoTls;

fn url() -> String {
    std::env::var("POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

fn schema() -> String {
    format!("t_{}", uuid::Uuid::new_v4().simple())
}

async fn repo(schema: &str) -> Option<PostgresRepository> {
    match PostgresRepository::builder(url())
        .schema(schema)
        .connect()
        .await
    {
        Ok(r) => Some(r),
        Err(e) => session_testkit::skip(
            "postgres",
            &format!("no PostgreSQL at {}: {e}", url()),
            false,
        ),
    }
}

async fn admin() -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(&url(), NoTls).await.unwrap();
    tokio::spawn(conn);
    client
}

/// A connection terminated by the server in the middle of an append's
/// transaction leaves nothing behind; a retry with the same event ids
/// writes the batch exactly once, and a further retry writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_connection_mid_append_is_all_or_nothing_and_retry_converges() {
    let schema = schema();
    let Some(repo) = repo(&schema).await else {
        return;
    };
    let s = repo
        .create(NewSession::new("app", "alice", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    let seed = SessionEvent::builder(Message::user("seed"))
        .state("user:n", 0)
        .build()
        .unwrap();
    repo.append(&s.id, vec![seed]).await.unwrap();

    // Hold the user-state row so the next append blocks inside its transaction.
    let mut holder = admin().await;
    let hold = holder.transaction().await.unwrap();
    hold.execute(
        &format!("SELECT state FROM \"{schema}\".user_state WHERE app = 'app' AND user_id = 'alice' FOR UPDATE"),
        &[],
    )
    .await
    .unwrap();

    let batch: Vec<SessionEvent> = (0..3)
        .map(|i| {
            SessionEvent::builder(Message::user(format!("batch {i}")))
                .state("user:n", i)
                .build()
                .unwrap()
        })
        .collect();
    let blocked = {
        let repo = repo.clone();
        let id = s.id.clone();
        let batch = batch.clone();
        tokio::spawn(async move { repo.append(&id, batch).await })
    };
    // Find the append's backend, waiting on our lock, and terminate it.
    let killer = admin().await;
    let mut killed = false;
    for _ in 0..200 {
        let rows = killer
            .query(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
                 AND pid <> pg_backend_pid() AND query LIKE $1",
                &[&format!("%\"{schema}\".user_state%")],
            )
            .await
            .unwrap();
        if let Some(row) = rows.first() {
            let pid: i32 = row.get(0);
            killer
                .execute("SELECT pg_terminate_backend($1)", &[&pid])
                .await
                .unwrap();
            killed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(killed, "the append never blocked on the held lock");
    let err = blocked.await.unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.is_retryable());
    hold.rollback().await.unwrap();

    // Nothing of the batch is there: not the events, not the version bump, not the state.
    assert_eq!(
        repo.all_events(&s.id, EventView::Archive)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(repo.event_version(&s.id).await.unwrap(), 1);
    let (app, alice) = (AppName::new("app").unwrap(), UserId::new("alice").unwrap());
    assert_eq!(
        repo.shared_state(&app, &alice).await.unwrap().user["user:n"],
        0
    );

    // Retry with the same ids: written once; again: nothing new.
    let first = repo.append(&s.id, batch.clone()).await.unwrap();
    assert_eq!((first.seqs.clone(), first.written), (vec![2, 3, 4], 3));
    let again = repo.append(&s.id, batch).await.unwrap();
    assert_eq!(
        (again.seqs, again.written, again.version),
        (first.seqs, 0, first.version)
    );
    assert_eq!(
        repo.shared_state(&app, &alice).await.unwrap().user["user:n"],
        2
    );
    repo.drop_schema().await.unwrap();
}

/// Two processes (here: two pools) migrating the same schema at once both
/// succeed, and the migration is recorded once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_migrations_are_safe_and_idempotent() {
    let schema = schema();
    let (a, b) = tokio::join!(repo(&schema), repo(&schema));
    let (Some(a), Some(b)) = (a, b) else { return };
    assert_eq!(a.migrate().await.unwrap(), SCHEMA_VERSION);
    assert_eq!(b.migrate().await.unwrap(), SCHEMA_VERSION);
    let rows: i64 = admin()
        .await
        .query_one(
            &format!("SELECT COUNT(*) FROM \"{schema}\".schema_version"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, SCHEMA_VERSION);
    a.drop_schema().await.unwrap();
}

/// The hot queries use indexes, not sequential scans of the events or
/// sessions tables (plans printed with `--nocapture`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_queries_use_indexes() {
    let schema = schema();
    let Some(repo) = repo(&schema).await else {
        return;
    };
    let mut target = None;
    for s in 0..50 {
        let session = repo
            .create(NewSession::new("app", format!("user{}", s % 5), chrono::Utc::now()).unwrap())
            .await
            .unwrap();
        let events: Vec<SessionEvent> = (0..400)
            .map(|i| {
                SessionEvent::new(Message::user(format!(
                    "session {s} message {i} about topic{}",
                    i % 37
                )))
            })
            .collect();
        repo.append(&session.id, events).await.unwrap();
        target = Some(session.id);
    }
    let target = target.unwrap();
    assert_eq!(
        repo.events(&target, &EventFilter::last(20))
            .await
            .unwrap()
            .items
            .len(),
        20
    );
    let db = admin().await;
    // A realistic number of sessions, so that the planner's choices are the ones production sees.
    db.batch_execute(&format!(
        "INSERT INTO \"{schema}\".sessions SELECT 'bulk' || g, 'app', 'user' || (g % 500), NULL, 'active', \
         0, g, NULL, '{{}}', '{{}}', '{{}}', 0, 0, 0, 0, 1 FROM generate_series(1, 20000) g; \
         ANALYZE \"{schema}\".events; ANALYZE \"{schema}\".sessions"
    ))
    .await
    .unwrap();
    let e = format!("\"{schema}\".events");
    let sessions = format!("\"{schema}\".sessions");
    let queries = [
        ("last 20 of the archive", format!("SELECT seq, body FROM {e} WHERE session_id = $1 ORDER BY seq DESC LIMIT 20")),
        ("last 20 of the context", format!("SELECT seq, body FROM {e} WHERE session_id = $1 AND ctx_pos IS NOT NULL AND ctx_pos >= (SELECT ctx_base FROM {sessions} WHERE id = $1) ORDER BY ctx_pos DESC LIMIT 20")),
        ("page 3 of the archive", format!("SELECT seq, body FROM {e} WHERE session_id = $1 ORDER BY seq LIMIT 11 OFFSET 30")),
        ("a keyset page of the archive", format!("SELECT seq, body FROM {e} WHERE session_id = $1 AND seq > 100 ORDER BY seq LIMIT 1001")),
        ("a keyset page of the context", format!("SELECT seq, body FROM {e} WHERE session_id = $1 AND ctx_pos IS NOT NULL AND ctx_pos >= (SELECT ctx_base FROM {sessions} WHERE id = $1) AND ctx_pos > 100 ORDER BY ctx_pos LIMIT 1001")),
        ("search one session", format!("SELECT session_id, seq, body FROM {e} WHERE session_id = $1 AND search_text LIKE '%topic17%' ESCAPE '\\' ORDER BY seq LIMIT 11")),
        ("held ids of a batch", format!("SELECT id, seq, token_estimate FROM {e} WHERE session_id = $1 AND id = ANY(ARRAY['x', 'y'])")),
        ("sessions of a user", format!("SELECT id FROM {sessions} WHERE app = 'app' AND user_id = 'user1' ORDER BY updated_at DESC, id LIMIT 11")),
    ];
    for (name, sql) in queries {
        let sql = sql.replace("$1", &format!("'{target}'"));
        let plan: Vec<String> = db
            .query(&format!("EXPLAIN {sql}"), &[])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect();
        let plan = plan.join("\n");
        println!("-- {name}\n{plan}\n");
        assert!(plan.contains("Index"), "{name} uses no index:\n{plan}");
        assert!(
            !plan.contains("Seq Scan"),
            "{name} scans a whole table:\n{plan}"
        );
    }
    repo.drop_schema().await.unwrap();
}

/// With `sslmode=require` the connection is TLS with verified certificates:
/// a server whose certificate chains to no trusted root is refused, and
/// trusting its CA (here the server's self-signed certificate) lets it in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_is_verified_when_required() {
    let cert_path = "/etc/ssl/certs/ssl-cert-snakeoil.pem";
    let ssl_on: bool = match tokio_postgres::connect(&url(), NoTls).await {
        Ok((c, conn)) => {
            tokio::spawn(conn);
            c.query_one("SHOW ssl", &[])
                .await
                .unwrap()
                .get::<_, String>(0)
                == "on"
        }
        Err(e) => {
            session_testkit::skip::<()>(
                "postgres",
                &format!("no PostgreSQL at {}: {e}", url()),
                false,
            );
            return;
        }
    };
    let Ok(pem) = std::fs::read(cert_path) else {
        eprintln!("SKIPPED TLS test: no server certificate at {cert_path}");
        return;
    };
    if !ssl_on {
        eprintln!("SKIPPED TLS test: the server has ssl = off");
        return;
    }
    let tls_url = "postgres://postgres@localhost:5432/test?sslmode=require";
    let schema = schema();
    let err = PostgresRepository::builder(tls_url)
        .schema(&schema)
        .connect()
        .await
        .unwrap_err();
    let report = err.report().to_string();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{report}");
    assert!(report.to_lowercase().contains("certificate"), "{report}");
    let repo = PostgresRepository::builder(tls_url)
        .schema(&schema)
        .tls_root_certificates_pem(pem)
        .connect()
        .await
        .unwrap();
    let s = repo
        .create(NewSession::new("app", "u", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    assert!(repo.get(&s.id).await.is_ok());
    let encrypted: bool = admin()
        .await
        .query_one(
            "SELECT bool_or(ssl) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) WHERE datname = 'test' AND usename = 'postgres' AND ssl",
            &[],
        )
        .await
        .unwrap()
        .get::<_, Option<bool>>(0)
        .unwrap_or(false);
    assert!(encrypted, "the pool's connections are encrypted");
    repo.drop_schema().await.unwrap();
}

/// Ranked search (declared in `Capabilities`) orders hits by `ts_rank`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranked_search_orders_by_relevance() {
    let schema = schema();
    let Some(repo) = repo(&schema).await else {
        return;
    };
    assert!(repo.capabilities().ranked_search);
    let s = repo
        .create(NewSession::new("app", "u", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    let texts = [
        "the weather is nice",
        "rust rust rust: ownership, borrowing and rust lifetimes",
        "a note about rust",
        "nothing relevant here",
    ];
    let events = texts
        .iter()
        .map(|t| SessionEvent::new(Message::user(*t)))
        .collect();
    repo.append(&s.id, events).await.unwrap();
    let hits = repo
        .search(
            &session_core::SearchQuery::in_session(&s.id, "rust ownership")
                .mode(session_core::SearchMode::Ranked),
        )
        .await
        .unwrap();
    let got: Vec<&str> = hits.items.iter().map(|h| h.event.message.text()).collect();
    assert_eq!(got, [texts[1]], "plainto_tsquery needs every word");
    assert!(hits.items[0].score.unwrap() > 0.0);
    repo.drop_schema().await.unwrap();
}

/// A server error is `Backend` with the driver error as its typed source:
/// the SQLSTATE is reachable through `source()`, and the message does not
/// repeat the server's text (the report prints it once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_keep_their_sqlstate_as_the_source() {
    let schema = schema();
    let Some(repo) = repo(&schema).await else {
        return;
    };
    let s = repo
        .create(NewSession::new("app", "u", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    admin()
        .await
        .batch_execute(&format!("DROP TABLE \"{schema}\".events"))
        .await
        .unwrap();
    let err = repo
        .append(&s.id, vec![SessionEvent::new(Message::user("hi"))])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Backend, "{}", err.report());
    assert!(!err.is_retryable());
    assert_eq!(err.to_string(), "postgres backend error");
    let pg = std::error::Error::source(&err)
        .and_then(|s| s.downcast_ref::<tokio_postgres::Error>())
        .expect("the driver error is the source");
    assert_eq!(
        pg.code(),
        Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE)
    );
    assert!(
        err.report().to_string().contains("does not exist"),
        "{}",
        err.report()
    );
    repo.drop_schema().await.unwrap();
}

/// A context replace writes only the events it keeps: the events that
/// leave the context keep their rows untouched (same `xmin`), because the
/// session's context base moves past them instead; reads and exports see
/// exactly the new context.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_replace_leaves_the_rows_it_drops_untouched() {
    let schema = schema();
    let Some(repo) = repo(&schema).await else {
        return;
    };
    let s = repo
        .create(NewSession::new("app", "alice", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    let events: Vec<SessionEvent> = (0..200)
        .map(|i| SessionEvent::new(Message::user(format!("m {i}"))))
        .collect();
    repo.append(&s.id, events).await.unwrap();
    let db = admin().await;
    let sql = format!(
        "SELECT seq, xmin::text FROM \"{schema}\".events WHERE session_id = $1 ORDER BY seq"
    );
    let id = s.id.to_string();
    let xmins = || async {
        db.query(&sql, &[&id])
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get::<_, i64>(0), r.get::<_, String>(1)))
            .collect::<Vec<_>>()
    };
    let before = xmins().await;
    let context = repo.all_events(&s.id, EventView::Context).await.unwrap();
    let version = repo.event_version(&s.id).await.unwrap();
    let kept = context[190..].to_vec();
    assert!(repo
        .replace_context(&s.id, kept.clone(), version)
        .await
        .unwrap());
    let after = xmins().await;
    let untouched = before.iter().zip(&after).filter(|(b, a)| b == a).count();
    assert_eq!(untouched, 190, "only the 10 kept events are rewritten");
    let now = repo.all_events(&s.id, EventView::Context).await.unwrap();
    assert_eq!(now, kept);
    let dump = repo.export_session(&s.id).await.unwrap();
    let kept_seqs: Vec<u64> = kept.iter().map(|e| e.seq).collect();
    assert_eq!(dump.context, kept_seqs);
    assert_eq!(dump.events.len(), 200);
    // Appends join the context after the kept events.
    repo.append(&s.id, vec![SessionEvent::new(Message::user("next"))])
        .await
        .unwrap();
    let last = repo.events(&s.id, &EventFilter::last(11)).await.unwrap();
    assert_eq!(last.items.len(), 11);
    assert_eq!(last.items[..10], kept[..]);
    repo.drop_schema().await.unwrap();
}
