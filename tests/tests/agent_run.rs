//! Scenario: one agent run end to end through the facade, as an agent developer writes it.
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use agent_session::{
    CreateSessionRequest, DefaultSessionService, EventFilter, Message, Owner, ResetPolicy,
    ResolveRequest, SearchQuery, SessionEvent, SessionService, ToolCall,
};
use serde_json::json;

async fn service() -> DefaultSessionService {
    DefaultSessionService::new(agent_session::open("memory://").await.unwrap())
}

/// A run with a tool call, a sub-agent branch and a state change is stored
/// so that the next model call gets valid OpenAI messages back, the
/// sub-agent's peer does not see its work, and recall search finds it.
#[tokio::test]
async fn tool_call_run_round_trips_to_openai_messages() {
    let svc = service().await;
    let alice = Owner::user("alice");
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
#[tokio::test]
async fn retry_then_rewind_a_bad_run() {
    let svc = service().await;
    let alice = Owner::user("alice");
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
    let after = svc.rewind(&alice, &s.id, "inv-2").await.unwrap();
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
