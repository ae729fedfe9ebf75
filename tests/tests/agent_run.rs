//! Scenario: one agent run end to end through the facade, as an agent developer writes it.
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;

use agent_session::{
    CreateSessionRequest, DefaultSessionService, EventFilter, Message, Owner, ResetPolicy,
    ResolveRequest, SearchQuery, SessionEvent, SessionRepository, SessionService, ToolCall,
};
use serde_json::json;

/// Every store URL this build can open here: memory, a temporary directory
/// of files, a temporary SQLite file, and a fresh schema on the PostgreSQL
/// at `POSTGRES_URL`.
async fn stores() -> Vec<(
    String,
    Arc<dyn SessionRepository>,
    Option<tempfile::TempDir>,
)> {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite://{}", dir.path().join("s.db").display());
    let mut out = vec![
        (
            "memory://".to_owned(),
            agent_session::open("memory://").await.unwrap(),
            None,
        ),
        (
            sqlite.clone(),
            agent_session::open(&sqlite).await.unwrap(),
            Some(dir),
        ),
    ];
    let pg = std::env::var("POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let pg = format!("{pg}?schema=scenario_{}", uuid::Uuid::new_v4().simple());
    match agent_session::open(&pg).await {
        Ok(store) => out.push((pg, store, None)),
        Err(e) => {
            session_testkit::skip::<()>("postgres", &format!("{e}"), false);
        }
    }
    out
}

async fn drop_pg_schema(url: &str) {
    if let Some((_, schema)) = url.split_once("?schema=") {
        if let Ok(repo) = agent_session::PostgresRepository::builder(url.split('?').next().unwrap())
            .schema(schema)
            .connect()
            .await
        {
            repo.drop_schema().await.unwrap();
        }
    }
}

/// A run with a tool call, a sub-agent branch and a state change is stored
/// so that the next model call gets valid OpenAI messages back, the
/// sub-agent's peer does not see its work, and recall search finds it.
#[tokio::test(flavor = "multi_thread")]
async fn tool_call_run_round_trips_to_openai_messages() {
    for (url, store, _dir) in stores().await {
        tool_call_run(DefaultSessionService::new(store)).await;
        drop_pg_schema(&url).await;
    }
}

async fn tool_call_run(svc: DefaultSessionService) {
    let alice = Owner::user("alice").unwrap();
    let resolved = svc
        .resolve(
            &ResolveRequest::new("default", "alice", "cli:main"),
            &ResetPolicy::never(),
        )
        .await
        .unwrap();
    let id = resolved.session.id;
    let call = ToolCall::new("call_1", "get_weather", &json!({"city": "Paris"}));
    let run = vec![
        SessionEvent::builder(Message::user("Weather in Paris?"))
            .invocation_id("inv-1")
            .build()
            .unwrap(),
        SessionEvent::builder(Message::assistant_tool_calls("", vec![call]))
            .invocation_id("inv-1")
            .build()
            .unwrap(),
        SessionEvent::builder(Message::tool_result(
            "call_1",
            "get_weather",
            "18C, light rain",
        ))
        .invocation_id("inv-1")
        .build()
        .unwrap(),
        SessionEvent::builder(Message::assistant("Researching umbrellas"))
            .invocation_id("inv-1")
            .branch("orch.researcher")
            .build()
            .unwrap(),
        SessionEvent::builder(Message::assistant("18C and light rain: take an umbrella."))
            .invocation_id("inv-1")
            .state("user:city", "Paris")
            .build()
            .unwrap(),
    ];
    svc.append_events(&alice, &id, run).await.unwrap();

    let history = svc.messages(&alice, &id).await.unwrap();
    let wire = serde_json::to_value(&history).unwrap();
    assert_eq!(wire[1]["tool_calls"][0]["function"]["name"], "get_weather");
    assert_eq!(wire[2]["role"], "tool");
    assert_eq!(wire[2]["tool_call_id"], "call_1");

    let writer_view = svc
        .events(
            &alice,
            &id,
            &EventFilter::context().branch("orch.writer").page(0, 100),
        )
        .await
        .unwrap();
    assert_eq!(
        writer_view.items.len(),
        4,
        "the researcher's event is hidden from its peer"
    );

    let later = svc
        .create(CreateSessionRequest::builder("alice").build().unwrap())
        .await
        .unwrap();
    assert_eq!(later.state.get("user:city"), Some(&json!("Paris")));

    let hits = svc
        .search(
            &alice,
            &SearchQuery::for_user("default", "alice", "umbrella"),
        )
        .await
        .unwrap();
    assert_eq!(hits.items.len(), 2);
}

/// A client that timed out re-sends the same batch: nothing is duplicated,
/// and a bad run is rewound away leaving the earlier turn intact.
#[tokio::test(flavor = "multi_thread")]
async fn retry_then_rewind_a_bad_run() {
    for (url, store, _dir) in stores().await {
        retry_then_rewind(DefaultSessionService::new(store)).await;
        drop_pg_schema(&url).await;
    }
}

async fn retry_then_rewind(svc: DefaultSessionService) {
    let alice = Owner::user("alice").unwrap();
    let s = svc
        .create(CreateSessionRequest::builder("alice").build().unwrap())
        .await
        .unwrap();
    let good = vec![
        SessionEvent::builder(Message::user("hi"))
            .invocation_id("inv-1")
            .build()
            .unwrap(),
        SessionEvent::builder(Message::assistant("hello"))
            .invocation_id("inv-1")
            .build()
            .unwrap(),
    ];
    let first = svc
        .append_events(&alice, &s.id, good.clone())
        .await
        .unwrap();
    let retry = svc.append_events(&alice, &s.id, good).await.unwrap();
    assert_eq!(first.seqs, retry.seqs);
    let bad = SessionEvent::builder(Message::assistant("a hallucinated answer"))
        .invocation_id("inv-2")
        .state("mood", "confused")
        .build()
        .unwrap();
    svc.append_events(&alice, &s.id, vec![bad]).await.unwrap();
    let after = svc
        .rewind(
            &alice,
            &s.id,
            &agent_session::RewindTo::before_invocation("inv-2").unwrap(),
        )
        .await
        .unwrap()
        .session;
    assert!(after.state.get("mood").is_none());
    let texts: Vec<String> = svc
        .messages(&alice, &s.id)
        .await
        .unwrap()
        .iter()
        .map(|m| m.text().to_owned())
        .collect();
    assert_eq!(texts, ["hi", "hello"]);
}
