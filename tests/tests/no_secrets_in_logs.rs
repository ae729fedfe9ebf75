//! With `tracing` at trace level, message text, tool arguments and state
//! values never reach the logs: ids, counts and sizes only — on every
//! backend, and with the `log` records of the engine drivers (tokio-postgres
//! logs each statement's parameters at debug level) forwarded to the same
//! global subscriber, as `tracing_subscriber::fmt().init()` does.
#![allow(clippy::unwrap_used)]

#[path = "../../crates/session-es/tests/support/fake_es.rs"]
#[allow(unreachable_pub)]
mod fake_es;

use std::io::Write;
use std::sync::{Arc, Mutex};

use agent_session::compaction::{
    CompactionPolicy, ConversationSearch, ExtractiveSummarizer, RecursiveSummarization,
    SessionMemory, ToolContext, Trigger,
};
use agent_session::{
    CreateSessionRequest, DefaultSessionService, EventFilter, Message, Owner, SearchQuery,
    SessionEvent, SessionRepository, SessionService, ToolCall,
};
use serde_json::json;

const CANARY: &str = "canary-7f3a9c";

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

async fn exercise(store: Arc<dyn SessionRepository>) {
    let policy = CompactionPolicy::new(
        Trigger::TurnCount(3),
        Arc::new(RecursiveSummarization::new(
            1,
            Arc::new(ExtractiveSummarizer::new()),
        )),
    );
    let svc: Arc<dyn SessionService> = Arc::new(
        DefaultSessionService::new(store.clone()).with_append_hook(Arc::new(policy.clone())),
    );
    let owner = Owner::user("alice").unwrap();
    let s = svc
        .create(
            CreateSessionRequest::builder("alice")
                .metadata("note", format!("{CANARY} in metadata"))
                .state("secret", format!("{CANARY} in state"))
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    for i in 0..4 {
        let call = ToolCall::new(
            format!("c{i}"),
            "lookup",
            &json!({"q": format!("{CANARY} args")}),
        );
        svc.append_events(
            &owner,
            &s.id,
            vec![
                SessionEvent::builder(Message::user(format!("{CANARY} question {i}")))
                    .state("user:k", format!("{CANARY} user state"))
                    .invocation_id(format!("inv-{i}"))
                    .build()
                    .unwrap(),
                SessionEvent::new(Message::assistant_tool_calls("", vec![call])),
                SessionEvent::new(Message::tool_result(
                    format!("c{i}"),
                    "lookup",
                    format!("{CANARY} result"),
                )),
                SessionEvent::new(Message::assistant(format!("{CANARY} answer"))),
            ],
        )
        .await
        .unwrap();
    }
    svc.search(&owner, &SearchQuery::in_session(&s.id, CANARY))
        .await
        .unwrap();
    svc.events(&owner, &s.id, &EventFilter::archive().keyword(CANARY))
        .await
        .unwrap();
    let tool = ConversationSearch::new(svc.clone());
    let ctx = ToolContext {
        owner: owner.clone(),
        session_id: s.id.clone(),
    };
    tool.call(&ctx, &json!({"inner_thought": CANARY, "query": CANARY}))
        .await
        .unwrap();
    let memory = SessionMemory::new(svc.clone()).with_compaction(policy);
    memory
        .prepare(&owner, &s.id, &format!("{CANARY} system"))
        .await
        .unwrap();
    memory
        .record(&owner, &s.id, Message::user(format!("{CANARY} late")))
        .await
        .unwrap();
    svc.rewind(
        &owner,
        &s.id,
        &agent_session::RewindTo::before_invocation("inv-3").unwrap(),
    )
    .await
    .unwrap();
    // Errors are logged and returned without content either.
    let _ = svc
        .append_message(
            &owner,
            &agent_session::SessionId::new("no-such-session").unwrap(),
            Message::user(CANARY),
        )
        .await;
    store.export_session(&s.id).await.unwrap();
    svc.delete(&owner, &s.id).await.unwrap();
}

/// The store URLs to exercise: the embedded ones always, PostgreSQL and
/// Redis where a server answers (under `CI=true` they must), and
/// Elasticsearch on the in-process fake node.
async fn store_urls(dir: &std::path::Path, es: &fake_es::FakeServer) -> Vec<String> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let mut urls = vec![
        "memory://".to_owned(),
        format!("sqlite://{}", dir.join("s.db").display()),
        format!("fs://{}", dir.join("files").display()),
        format!(
            "{}?prefix=logs",
            es.url().replacen("http://", "es+http://", 1)
        ),
    ];
    let servers = [
        (
            "POSTGRES_URL",
            "postgres://postgres@127.0.0.1:5432/test",
            "?schema=no_secrets_in_logs",
        ),
        (
            "REDIS_URL",
            "redis://127.0.0.1:6379",
            "?prefix=no-secrets-in-logs",
        ),
    ];
    for (var, default, suffix) in servers {
        let url = std::env::var(var).unwrap_or_else(|_| default.to_owned());
        let url = if url.contains('?') {
            url
        } else {
            format!("{url}{suffix}")
        };
        match agent_session::open(&url).await {
            Ok(_) => urls.push(url),
            Err(e) => {
                assert!(!ci, "{var}: no server under CI=true: {e}");
                let _ = std::io::stderr()
                    .write_all(format!("SKIPPED {var} in the log test: {e}\n").as_bytes());
            }
        }
    }
    urls
}

#[tokio::test(flavor = "multi_thread")]
async fn a_canary_in_every_field_never_reaches_the_logs() {
    let captured = Captured::default();
    let writer = captured.clone();
    // Global (every thread, blocking pools included) and bridging `log`.
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .try_init()
        .unwrap();
    assert!(
        log::log_enabled!(target: "tokio_postgres::query", log::Level::Debug),
        "driver debug records reach the subscriber"
    );

    let dir = tempfile::tempdir().unwrap();
    let es = fake_es::FakeServer::start().await;
    let urls = store_urls(dir.path(), &es).await;
    for url in &urls {
        exercise(agent_session::open(url).await.unwrap()).await;
    }
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("append"), "the operations were traced at all");
    if urls.iter().any(|u| u.starts_with("postgres")) {
        assert!(
            logs.contains("executing statement") && logs.contains("<redacted>"),
            "the driver's statement records reached the subscriber, parameters redacted"
        );
    }
    assert!(logs.contains("compacted"), "compaction was traced");
    let leaks: Vec<&str> = logs.lines().filter(|l| l.contains(CANARY)).collect();
    assert!(
        leaks.is_empty(),
        "a canary leaked into the logs ({} lines), e.g.:\n{}",
        leaks.len(),
        leaks
            .iter()
            .take(5)
            .map(|l| &l[..l.len().min(600)])
            .collect::<Vec<_>>()
            .join("\n")
    );
}
