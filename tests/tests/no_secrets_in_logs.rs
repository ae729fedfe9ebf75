//! With `tracing` at trace level, message text, tool arguments and state
//! values never reach the logs: ids, counts and sizes only.
#![allow(clippy::unwrap_used)]

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
    let owner = Owner::user("alice");
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
    let memory = SessionMemory::new(svc.clone()).with_compaction(policy, store.clone());
    memory
        .prepare(&owner, &s.id, &format!("{CANARY} system"))
        .await
        .unwrap();
    memory
        .record(&owner, &s.id, Message::user(format!("{CANARY} late")))
        .await
        .unwrap();
    svc.rewind(&owner, &s.id, "inv-3").await.unwrap();
    // Errors are logged and returned without content either.
    let _ = svc
        .append_message(&owner, "no-such-session", Message::user(CANARY))
        .await;
    store.export_session(&s.id).await.unwrap();
    svc.delete(&owner, &s.id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_canary_in_every_field_never_reaches_the_logs() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let dir = tempfile::tempdir().unwrap();
    for url in [
        "memory://".to_owned(),
        format!("sqlite://{}", dir.path().join("s.db").display()),
        format!("fs://{}", dir.path().join("files").display()),
    ] {
        exercise(agent_session::open(&url).await.unwrap()).await;
    }
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("append"),
        "the operations were traced at all:\n{logs}"
    );
    assert!(logs.contains("compacted"), "compaction was traced:\n{logs}");
    assert!(
        !logs.contains(CANARY),
        "a canary leaked into the logs:\n{}",
        logs.lines()
            .filter(|l| l.contains(CANARY))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
