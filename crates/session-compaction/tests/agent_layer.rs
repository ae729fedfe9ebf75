//! The agent-facing layer: recall tools and `SessionMemory`.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use serde_json::{json, Value};
use session_compaction::{
    CompactionPolicy, ConversationSearch, CrossSessionSearch, SessionMemory, SummaryInjection,
    ToolContext, Trigger, TurnWindow, NO_RESULTS, TOOL_ERROR_KEY,
};
use session_core::{
    CompactionSource, CreateSessionRequest, DefaultSessionService, InMemoryRepository, Message,
    Owner, Role, SessionEvent, SessionId, SessionRepository, SessionService, ToolCall,
};

struct World {
    repo: Arc<dyn SessionRepository>,
    service: Arc<dyn SessionService>,
}

fn world() -> World {
    let repo = InMemoryRepository::new().shared();
    let service: Arc<dyn SessionService> = Arc::new(DefaultSessionService::new(repo.clone()));
    World { repo, service }
}

async fn session(w: &World, owner: &Owner) -> SessionId {
    w.service
        .create(CreateSessionRequest::for_owner(owner).build().unwrap())
        .await
        .unwrap()
        .id
}

#[tokio::test]
async fn conversation_search_returns_oldest_first_json_or_no_results() {
    let w = world();
    let alice = Owner::user("alice").unwrap();
    let id = session(&w, &alice).await;
    let t0 = chrono::DateTime::parse_from_rfc3339("2025-06-01T12:00:00Z")
        .unwrap()
        .to_utc();
    let said = [
        Message::user("Tell me about Spring AI"),
        Message::assistant("Spring AI is a framework..."),
        Message::user("unrelated"),
    ];
    for (secs, m) in (0i64..).zip(said) {
        let e = SessionEvent::builder(m)
            .timestamp(t0 + chrono::Duration::seconds(secs))
            .build()
            .unwrap();
        w.service.append_events(&alice, &id, vec![e]).await.unwrap();
    }
    let tool = ConversationSearch::new(w.service.clone());
    let ctx = ToolContext {
        owner: alice.clone(),
        session_id: id.clone(),
    };
    let call = json!({"innerThought": "secret reasoning", "query": "spring ai", "page": -4});
    let out = ConversationSearch::new(w.service.clone())
        .seed_exact()
        .call(&ctx, &call)
        .await
        .unwrap();
    // The seed's example, byte for byte: keys in the seed's order, compact JSON.
    assert_eq!(
        out,
        r#"[{"timestamp":"2025-06-01T12:00:00Z","type":"user","text":"Tell me about Spring AI"},{"timestamp":"2025-06-01T12:00:01Z","type":"assistant","text":"Spring AI is a framework..."}]"#
    );
    // By default each hit leads with its seq (short texts stay whole).
    let out = tool.call(&ctx, &call).await.unwrap();
    assert_eq!(
        out,
        r#"[{"seq":1,"timestamp":"2025-06-01T12:00:00Z","type":"user","text":"Tell me about Spring AI"},{"seq":2,"timestamp":"2025-06-01T12:00:01Z","type":"assistant","text":"Spring AI is a framework..."}]"#
    );
    assert!(
        !out.contains("secret reasoning"),
        "innerThought is never echoed"
    );
    assert_eq!(
        tool.call(&ctx, &json!({"innerThought": "x", "query": "zebra"}))
            .await
            .unwrap(),
        NO_RESULTS
    );
    assert_eq!(
        tool.call(
            &ctx,
            &json!({"innerThought": "x", "query": "spring", "page": 1})
        )
        .await
        .unwrap(),
        NO_RESULTS
    );
    let small = ConversationSearch::new(w.service.clone()).with_page_size(1);
    let p1: Value = serde_json::from_str(
        &small
            .call(&ctx, &json!({"query": "spring", "page": 1}))
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(p1[0]["type"], "assistant");
    let def = tool.definition();
    assert_eq!(def["function"]["name"], "conversation_search");
    assert_eq!(
        def["function"]["parameters"]["required"],
        json!(["innerThought", "query"])
    );
    // Another user's call context sees nothing.
    let mallory = ToolContext {
        owner: Owner::user("mallory").unwrap(),
        session_id: id.clone(),
    };
    assert!(tool
        .call(&mallory, &json!({"query": "spring"}))
        .await
        .is_err());
}

#[tokio::test]
async fn summaries_are_searchable_and_cross_session_search_names_sessions() {
    let w = world();
    let alice = Owner::user("alice").unwrap();
    let a = session(&w, &alice).await;
    let b = session(&w, &alice).await;
    let bob_s = session(&w, &Owner::user("bob").unwrap()).await;
    w.service
        .append_message(&alice, &a, Message::user("my locker is 42"))
        .await
        .unwrap();
    let [p, s] = SessionEvent::summary_turn(
        "User's locker: 42.",
        CompactionSource::RecursiveSummarization,
        chrono::Utc::now(),
    );
    w.service
        .append_events(&alice, &b, vec![p, s])
        .await
        .unwrap();
    w.service
        .append_message(
            &Owner::user("bob").unwrap(),
            &bob_s,
            Message::user("locker 7"),
        )
        .await
        .unwrap();
    let tool = CrossSessionSearch::new(w.service.clone(), alice.clone());
    let call = json!({"innerThought": "", "query": "LOCKER"});
    let seed = CrossSessionSearch::new(w.service.clone(), alice.clone())
        .seed_exact()
        .call(&call)
        .await
        .unwrap();
    // The seed's shape, key order included, plus the session id last.
    assert!(seed.starts_with(r#"[{"timestamp":""#), "{seed}");
    assert!(
        seed.contains(&format!(
            r#""type":"user","text":"my locker is 42","session_id":"{a}"}}"#
        )),
        "{seed}"
    );
    // By default each hit leads with its seq.
    let out = tool.call(&call).await.unwrap();
    assert!(out.starts_with(r#"[{"seq":1,"timestamp":""#), "{out}");
    assert!(
        out.contains(&format!(
            r#""type":"user","text":"my locker is 42","session_id":"{a}"}}"#
        )),
        "{out}"
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    let got: Vec<(String, String)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["session_id"].as_str().unwrap().to_owned(),
                h["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (a.to_string(), "my locker is 42".to_owned()),
            (b.to_string(), "User's locker: 42.".to_owned())
        ]
    );
    assert_eq!(
        tool.definition()["function"]["name"],
        "cross_session_search"
    );
}

#[tokio::test]
async fn memory_assembles_summary_history_and_clean_tool_calls() {
    let w = world();
    let alice = Owner::user("alice").unwrap();
    let id = session(&w, &alice).await;
    let memory = SessionMemory::new(w.service.clone()).with_fetch_size(4);
    for i in 0..3 {
        memory
            .record(&alice, &id, Message::user(format!("q{i}")))
            .await
            .unwrap();
        memory
            .record(&alice, &id, Message::assistant(format!("a{i}")))
            .await
            .unwrap();
    }
    // Compact by hand: a summary turn, then the last turn.
    let ctx = w
        .service
        .events(
            &alice,
            &id,
            &session_core::EventFilter::context().page(0, 100),
        )
        .await
        .unwrap()
        .items;
    let [p, s] = SessionEvent::summary_turn(
        "q0 and q1 were asked",
        CompactionSource::RecursiveSummarization,
        chrono::Utc::now(),
    );
    let mut new_ctx = vec![p, s];
    new_ctx.extend(ctx[4..].iter().cloned());
    let v = w.repo.event_version(&id).await.unwrap();
    assert!(w.repo.replace_context(&id, new_ctx, v).await.unwrap());
    // A tool call cut in half by the fetch window, and a stored system prompt.
    memory
        .record(&alice, &id, Message::system("old system prompt"))
        .await
        .unwrap();
    memory
        .record(
            &alice,
            &id,
            Message::assistant_tool_calls("", vec![ToolCall::new("c1", "f", &json!({}))]),
        )
        .await
        .unwrap();

    let msgs = memory
        .prepare(&alice, &id, "You are helpful.")
        .await
        .unwrap();
    assert_eq!(msgs[0].role(), Role::System);
    assert!(msgs[0]
        .text()
        .starts_with("You are helpful.\n\n<knowledge>\n<facts>"));
    assert!(msgs[0]
        .text()
        .contains("<content>q0 and q1 were asked</content>"));
    let rest: Vec<&str> = msgs[1..].iter().map(Message::text).collect();
    assert_eq!(
        rest,
        ["q2", "a2"],
        "system prompt dropped, pending tool call left out"
    );

    let turn = SessionMemory::new(w.service.clone())
        .with_summary_injection(SummaryInjection::SyntheticTurn);
    let msgs = turn.prepare(&alice, &id, "sys").await.unwrap();
    assert_eq!(msgs[0], Message::system("sys"));
    assert_eq!(msgs[1].text(), session_core::SUMMARY_PROMPT);
    assert_eq!(msgs[2].text(), "q0 and q1 were asked");
}

#[tokio::test]
async fn failed_tool_calls_can_be_dropped() {
    let w = world();
    let alice = Owner::user("alice").unwrap();
    let id = session(&w, &alice).await;
    let memory = SessionMemory::new(w.service.clone()).drop_failed_tool_calls(true);
    memory
        .record(&alice, &id, Message::user("weather?"))
        .await
        .unwrap();
    memory
        .record(
            &alice,
            &id,
            Message::assistant_tool_calls("", vec![ToolCall::new("c1", "weather", &json!({}))]),
        )
        .await
        .unwrap();
    let failed = SessionEvent::builder(Message::tool_result("c1", "weather", "Error: timeout"))
        .metadata(TOOL_ERROR_KEY, true)
        .build()
        .unwrap();
    memory.record_event(&alice, &id, failed).await.unwrap();
    memory
        .record(&alice, &id, Message::assistant("Sorry, try later."))
        .await
        .unwrap();
    let msgs = memory.prepare(&alice, &id, "sys").await.unwrap();
    let texts: Vec<&str> = msgs[1..].iter().map(Message::text).collect();
    assert_eq!(texts, ["weather?", "Sorry, try later."]);
}

#[tokio::test]
async fn memory_runs_compaction_and_retries_once_on_context_length() {
    let w = world();
    let alice = Owner::user("alice").unwrap();
    let id = session(&w, &alice).await;
    let policy = CompactionPolicy::new(
        Trigger::TurnCount(100),
        Arc::new(TurnWindow::new(1).unwrap()),
    );
    let memory = SessionMemory::new(w.service.clone()).with_compaction(policy);
    for i in 0..5 {
        memory
            .record(&alice, &id, Message::user(format!("q{i}")))
            .await
            .unwrap();
        memory
            .record(&alice, &id, Message::assistant(format!("a{i}")))
            .await
            .unwrap();
    }
    let mut calls = 0;
    let out = memory
        .call_model(
            &alice,
            &id,
            "sys",
            |msgs| {
                calls += 1;
                async move {
                    if msgs.len() > 3 {
                        Err("context_length_exceeded")
                    } else {
                        Ok(msgs.len())
                    }
                }
            },
            |e: &&str| e.contains("context_length"),
        )
        .await
        .unwrap();
    assert_eq!(out, Ok(3));
    assert_eq!(calls, 2);
}
