//! The history the v0.1 fixture stores hold, written through any
//! repository: how the fixtures were made, and what a store written now
//! must reproduce byte for byte. Included with `#[path]` by the tests that
//! use it (the scenarios crate and session-fs).

use chrono::{TimeZone, Utc};
use serde_json::json;
use session_core::{
    Clock, CompactionSource, EventView, ManualClock, Message, NewSession, SessionEvent,
    SessionRepository, SessionRepositoryExt, ToolCall,
};

/// The fixture's sessions.
pub(crate) const SESSIONS: [&str; 2] = ["fixture-chat", "fixture-tools"];

/// The character heuristic the fixtures were estimated with in v0.1 (JSON
/// / 3, code fences / 6, other text / 4, plus 4 a message and 3 a call):
/// the history carries these estimates, so it stays byte for byte what the
/// fixtures hold whatever today's default estimator counts.
fn v0_1_estimate(m: &Message) -> u32 {
    let text = |t: &str| -> u32 {
        let len = t.chars().count();
        let trimmed = t.trim_start();
        let divisor = if trimmed.starts_with('{') || trimmed.starts_with('[') {
            3
        } else if t.contains("```") {
            6
        } else {
            4
        };
        u32::try_from(len.div_ceil(divisor)).unwrap()
    };
    let mut total = 4 + text(m.text());
    for call in m.tool_calls() {
        total += text(&call.name) + text(&call.arguments) + 3;
    }
    total
}

/// `events` with their v0.1 estimates.
fn v0_1(mut events: Vec<SessionEvent>) -> Vec<SessionEvent> {
    for e in &mut events {
        e.token_estimate = v0_1_estimate(&e.message);
    }
    events
}

/// Writes the same two-session history into any store.
pub(crate) async fn write_history(repo: &dyn SessionRepository, clock: &ManualClock) {
    let chat = repo
        .create(
            NewSession::new("support", "alice@example.com", clock.now())
                .unwrap()
                .with_id(SESSIONS[0])
                .unwrap()
                .with_key("telegram:chat-42:agent-a")
                .unwrap()
                .with_expires_at(None)
                .with_metadata(json!({"channel": "telegram"}).as_object().unwrap().clone())
                .with_state(
                    json!({"lang": "en", "user:tier": "gold"})
                        .as_object()
                        .unwrap()
                        .clone(),
                ),
        )
        .await
        .unwrap();
    let t =
        |m: i64| Utc.with_ymd_and_hms(2026, 11, 1, 9, 0, 0).unwrap() + chrono::Duration::minutes(m);
    let events = vec![
        SessionEvent::builder(Message::system("You are a support agent."))
            .id("ev-system")
            .timestamp(t(0))
            .build()
            .unwrap(),
        SessionEvent::builder(Message::user("my locker is 4711, order #A-1009"))
            .id("ev-1")
            .timestamp(t(1))
            .invocation_id("inv-1")
            .state("app:greeting", "hello")
            .build()
            .unwrap(),
        SessionEvent::builder(Message::assistant("Noted: locker 4711 — ünïcødé ✓ 𝄞"))
            .id("ev-2")
            .timestamp(t(2))
            .invocation_id("inv-1")
            .author("support-bot")
            .metadata("model", "gpt-4o")
            .build()
            .unwrap(),
    ];
    repo.append(&chat.id, v0_1(events)).await.unwrap();
    clock.advance(chrono::Duration::seconds(60));
    repo.append(
        &chat.id,
        v0_1(vec![SessionEvent::builder(Message::user("thanks"))
            .id("ev-3")
            .timestamp(t(3))
            .invocation_id("inv-2")
            .state("resolved", true)
            .build()
            .unwrap()]),
    )
    .await
    .unwrap();
    // A compaction: the context becomes a summary turn and the last event.
    let version = repo.event_version(&chat.id).await.unwrap();
    let archive = repo.all_events(&chat.id, EventView::Archive).await.unwrap();
    let source = CompactionSource::RecursiveSummarization;
    let mut context =
        v0_1(SessionEvent::summary_turn("Locker 4711, order A-1009.", source, t(3)).to_vec());
    for e in &mut context {
        e.id = format!("summary-{}", e.message.role().as_str());
    }
    context.push(archive.last().unwrap().clone());
    assert!(repo
        .replace_context(&chat.id, context, version)
        .await
        .unwrap());

    let tools = repo
        .create(
            NewSession::new("coder", "bob", clock.now())
                .unwrap()
                .with_id(SESSIONS[1])
                .unwrap()
                .with_expires_at(None),
        )
        .await
        .unwrap();
    let call = ToolCall::new("call-1", "read_file", &json!({"path": "src/main.rs"}));
    repo.append(
        &tools.id,
        v0_1(vec![
            SessionEvent::builder(Message::user("fix the build"))
                .id("t-1")
                .timestamp(t(10))
                .invocation_id("run-1")
                .build()
                .unwrap(),
            SessionEvent::builder(Message::assistant_tool_calls("", vec![call]))
                .id("t-2")
                .timestamp(t(11))
                .invocation_id("run-1")
                .branch("orch.coder")
                .build()
                .unwrap(),
            SessionEvent::builder(Message::tool_result(
                "call-1",
                "read_file",
                "fn main() {}\u{0}",
            ))
            .id("t-3")
            .timestamp(t(12))
            .invocation_id("run-1")
            .branch("orch.coder")
            .state("user:editor", "vim")
            .build()
            .unwrap(),
        ]),
    )
    .await
    .unwrap();
}
