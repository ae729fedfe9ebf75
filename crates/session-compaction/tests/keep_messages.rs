//! Keep-recent in messages (Open Astra keeps the 10 newest messages
//! verbatim): the summarizing strategies cut by messages instead of whole
//! turns, never between a tool call and its result and never past a call
//! still waiting for its result; the preset carries the seed's numbers.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use session_compaction::{
    CompactionError, CompactionPolicy, CompactionRequest, CompactionStrategy,
    RecursiveSummarization, StructuredSummary, Summarizer, SummaryRequest, Trigger,
    OPEN_ASTRA_RECENT_MESSAGES,
};
use session_core::{Message, NewSession, Session, SessionEvent, ToolCall};
use support::pairs_hold;

fn session() -> Session {
    NewSession::new("app", "u", chrono::Utc::now())
        .unwrap()
        .to_session(chrono::Utc::now())
}

/// Answers with a fixed summary and remembers what it was shown.
#[derive(Debug, Default)]
struct Recording {
    shown: Mutex<Vec<String>>,
}

#[async_trait]
impl Summarizer for Recording {
    async fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, CompactionError> {
        *self.shown.lock() = request
            .events
            .iter()
            .map(|e| e.message.text().to_owned())
            .collect();
        Ok("summary".to_owned())
    }
}

/// Three plain turns, then one turn of a user message and 8 tool steps
/// (a call and its result): 23 events, seqs from 1.
fn conversation() -> Vec<SessionEvent> {
    let mut messages = Vec::new();
    for i in 0..3 {
        messages.push(Message::user(format!("q{i}")));
        messages.push(Message::assistant(format!("a{i}")));
    }
    messages.push(Message::user("fix the build"));
    for i in 0..8 {
        let id = format!("call_{i}");
        let call = ToolCall::new(&id, "read_file", &serde_json::json!({"n": i}));
        messages.push(Message::assistant_tool_calls(
            format!("call {i}"),
            vec![call],
        ));
        messages.push(Message::tool_result(
            &id,
            "read_file",
            format!("result {i}"),
        ));
    }
    (1u64..)
        .zip(messages)
        .map(|(seq, m)| {
            let mut e = SessionEvent::new(m);
            e.seq = seq;
            e
        })
        .collect()
}

fn texts(events: &[SessionEvent]) -> Vec<String> {
    events.iter().map(|e| e.message.text().to_owned()).collect()
}

#[tokio::test]
async fn the_newest_messages_stay_and_a_call_keeps_its_result() {
    let events = conversation();
    let recording = Arc::new(Recording::default());
    // 9 newest messages would start at `result 3`: the cut moves back to its call.
    let strategy = RecursiveSummarization::new(2, recording.clone())
        .with_keep_recent_messages(9)
        .unwrap();
    let result = strategy
        .compact(&CompactionRequest::new(session(), events.clone()))
        .await
        .unwrap();
    let kept = &result.context[2..];
    assert_eq!(texts(kept), texts(&events[13..]), "from `call 3` on");
    assert_eq!(kept.len(), 10);
    assert!(pairs_hold(&result.context));
    assert_eq!(result.context[1].message.text(), "summary");
    assert_eq!(*recording.shown.lock(), texts(&events[..13]));
    assert_eq!(result.archived.len(), 13);
    // Cutting by turns instead (keep 2 turns) would keep the whole tool loop.
    let by_turns = RecursiveSummarization::new(1, recording.clone())
        .compact(&CompactionRequest::new(session(), events.clone()))
        .await
        .unwrap();
    assert_eq!(by_turns.context.len(), 2 + 17);
}

#[tokio::test]
async fn the_structured_summary_cuts_by_messages_too() {
    let events = conversation();
    let summarizer = Arc::new(session_compaction::ExtractiveSummarizer::new());
    let strategy = StructuredSummary::new(2, summarizer)
        .with_keep_recent_messages(4)
        .unwrap();
    let result = strategy
        .compact(&CompactionRequest::new(session(), events.clone()))
        .await
        .unwrap();
    assert_eq!(texts(&result.context[2..]), texts(&events[19..]));
    assert!(pairs_hold(&result.context));
}

#[tokio::test]
async fn nothing_leaves_when_every_message_is_recent_or_a_call_waits() {
    let events = conversation();
    let strategy = RecursiveSummarization::new(2, Arc::new(Recording::default()))
        .with_keep_recent_messages(30)
        .unwrap();
    let result = strategy
        .compact(&CompactionRequest::new(session(), events.clone()))
        .await
        .unwrap();
    assert!(result.is_noop());
    let why = result.unchanged_because.unwrap();
    assert!(
        why.contains("30 messages kept verbatim (23 in the context)"),
        "{why}"
    );
    // A call without its result in the first turn: nothing from that turn on can go.
    let mut waiting = events.clone();
    let call = ToolCall::new("late", "search", &serde_json::json!({}));
    waiting[1] = SessionEvent::new(Message::assistant_tool_calls("a0", vec![call]));
    let result = RecursiveSummarization::new(2, Arc::new(Recording::default()))
        .with_keep_recent_messages(3)
        .unwrap()
        .compact(&CompactionRequest::new(session(), waiting))
        .await
        .unwrap();
    assert!(result.is_noop());
    assert!(result.unchanged_because.unwrap().contains("waiting"));
    assert!(
        RecursiveSummarization::new(2, Arc::new(Recording::default()))
            .with_keep_recent_messages(0)
            .is_err()
    );
}

#[test]
fn the_open_astra_preset_carries_the_seeds_numbers() {
    let summarizer = Arc::new(Recording::default());
    let strategy = RecursiveSummarization::open_astra(summarizer.clone());
    assert_eq!(
        strategy.keep_recent_messages,
        Some(OPEN_ASTRA_RECENT_MESSAGES)
    );
    assert_eq!(OPEN_ASTRA_RECENT_MESSAGES, 10);
    assert!(strategy.prompts.system.contains("500 words"));
    let policy = CompactionPolicy::open_astra(128_000, summarizer);
    assert_eq!(
        *policy.trigger(),
        Trigger::ContextFraction {
            max_tokens: 128_000,
            fraction: 0.7
        }
    );
}
