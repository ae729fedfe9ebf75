//! Property tests: every strategy keeps its promises on random conversations
//! with tool calls (some still pending), sub-agent branches and earlier summaries.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::sync::Arc;

use proptest::prelude::*;
use session_compaction::{
    CompactionRequest, CompactionStrategy, ExtractiveSummarizer, RecursiveSummarization,
    SlidingWindow, StructuredSummary, TokenBudget, TurnWindow,
};
use session_core::{CompactionSource, Message, NewSession, Role, Session, SessionEvent, ToolCall};

#[derive(Debug, Clone)]
struct TurnSpec {
    tool_calls: usize,
    branched: bool,
    words: usize,
    /// The turn's first tool result arrives this many turns later (right
    /// after that turn's question, or at the end), not after its call.
    late: Option<usize>,
}

/// A conversation; in turn `pending_at` (if any) the last tool call gets no
/// result (a long-running tool), and later turns go on around it.
fn conversation(
    prior_summary: bool,
    turns: &[TurnSpec],
    pending_at: Option<usize>,
) -> Vec<SessionEvent> {
    let mut events = Vec::new();
    if prior_summary {
        let [p, a] = SessionEvent::summary_turn(
            "Earlier the user said the code is 4711.",
            CompactionSource::Custom("imported".into()),
            chrono::Utc::now(),
        );
        events.extend([p, a]);
    }
    let mut call_id = 0;
    let mut deferred: Vec<(usize, SessionEvent)> = Vec::new();
    for (t, spec) in turns.iter().enumerate() {
        events.push(SessionEvent::new(Message::user(format!(
            "question {t} {}",
            "word ".repeat(spec.words)
        ))));
        let (due, later): (Vec<_>, Vec<_>) = deferred.drain(..).partition(|(at, _)| *at <= t);
        deferred = later;
        events.extend(due.into_iter().map(|(_, e)| e));
        for c in 0..spec.tool_calls {
            call_id += 1;
            let id = format!("call_{call_id}");
            events.push(SessionEvent::new(Message::assistant_tool_calls(
                "",
                vec![ToolCall::new(&id, "lookup", &serde_json::json!({"q": c}))],
            )));
            let last = pending_at == Some(t) && c + 1 == spec.tool_calls;
            let result =
                SessionEvent::new(Message::tool_result(&id, "lookup", format!("result {c}")));
            match spec.late {
                _ if last => {}
                Some(by) if c == 0 => deferred.push((t + by, result)),
                _ => events.push(result),
            }
        }
        if spec.branched {
            events.push(
                SessionEvent::builder(Message::user("sub-agent task"))
                    .branch("orch.researcher")
                    .build()
                    .unwrap(),
            );
        }
        events.push(SessionEvent::new(Message::assistant(format!(
            "answer {t} {}",
            "word ".repeat(spec.words)
        ))));
    }
    events.extend(deferred.into_iter().map(|(_, e)| e));
    events
}

fn session() -> Session {
    let n = NewSession::new("app", "u", chrono::Utc::now()).unwrap();
    Session {
        id: n.id,
        app: n.app,
        user_id: n.user_id,
        key: None,
        status: session_core::SessionStatus::Active,
        created_at: n.created_at,
        updated_at: n.created_at,
        expires_at: n.expires_at,
        metadata: n.metadata,
        state: n.state,
        event_count: 0,
        event_bytes: 0,
        context_tokens: 0,
        version: 0,
    }
}

fn strategies() -> Vec<(Arc<dyn CompactionStrategy>, Option<u64>)> {
    let summarizer = Arc::new(ExtractiveSummarizer::new());
    vec![
        (Arc::new(SlidingWindow::new(6).unwrap()), None),
        (Arc::new(TurnWindow::new(2).unwrap()), None),
        (Arc::new(TokenBudget::new(120).unwrap()), Some(120)),
        (
            Arc::new(RecursiveSummarization::new(2, summarizer.clone()).with_overlap(1)),
            None,
        ),
        (Arc::new(StructuredSummary::new(1, summarizer)), None),
    ]
}

fn tool_ids(events: &[SessionEvent]) -> (HashSet<String>, HashSet<String>) {
    let mut calls = HashSet::new();
    let mut results = HashSet::new();
    for e in events {
        for c in e.message.tool_calls() {
            calls.insert(c.id.clone());
        }
        if let Message::Tool { tool_call_id, .. } = &e.message {
            results.insert(tool_call_id.clone());
        }
    }
    (calls, results)
}

fn turn_spec() -> impl Strategy<Value = TurnSpec> {
    (
        0usize..3,
        any::<bool>(),
        1usize..30,
        prop::option::of(1usize..4),
    )
        .prop_map(|(tool_calls, branched, words, late)| TurnSpec {
            tool_calls,
            branched,
            words,
            late,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn strategies_keep_their_invariants(
        turns in prop::collection::vec(turn_spec(), 1..12),
        prior_summary in any::<bool>(),
        pending_at in prop::option::of(0usize..12),
    ) {
        let pending_at = pending_at.filter(|&t| t < turns.len() && turns[t].tool_calls > 0);
        let pending = pending_at.is_some();
        let events = conversation(prior_summary, &turns, pending_at);
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        for (strategy, budget) in strategies() {
            let request = CompactionRequest::new(session(), events.clone());
            let result = rt.block_on(strategy.compact(&request)).unwrap();
            let name = strategy.name();
            let ctx_ids: HashSet<&str> = result.context.iter().map(|e| e.id.as_str()).collect();
            let arc_ids: HashSet<&str> = result.archived.iter().map(|e| e.id.as_str()).collect();

            // Every original event is either still in the context or archived, never both.
            for e in &events {
                prop_assert!(ctx_ids.contains(e.id.as_str()) ^ arc_ids.contains(e.id.as_str()),
                    "{name}: event {:?} lost or duplicated", e.message.text());
            }
            // A tool call and its result are never separated.
            let (calls, results) = tool_ids(&result.context);
            let (all_calls, all_results) = tool_ids(&events);
            for id in &calls {
                prop_assert!(results.contains(id) || !all_results.contains(id), "{name}: call {id} kept without its result");
            }
            for id in &results {
                prop_assert!(calls.contains(id) || !all_calls.contains(id), "{name}: result {id} kept without its call");
            }
            // A tool call still waiting for its result stays.
            for id in all_calls.difference(&all_results) {
                prop_assert!(calls.contains(id), "{name}: pending call {id} compacted away");
            }
            // Synthetic events come first; existing ones are kept (summarizers fold their own).
            let first_real = result.context.iter().position(|e| !e.is_synthetic()).unwrap_or(result.context.len());
            prop_assert!(result.context[first_real..].iter().all(|e| !e.is_synthetic()), "{name}: synthetic after real");
            for e in events.iter().filter(|e| e.is_synthetic()) {
                prop_assert!(ctx_ids.contains(e.id.as_str()), "{name}: earlier summary dropped");
            }
            // Real events keep their order.
            let order: Vec<&str> = events.iter().filter(|e| ctx_ids.contains(e.id.as_str()) && !e.is_synthetic()).map(|e| e.id.as_str()).collect();
            let kept: Vec<&str> = result.context.iter().filter(|e| !e.is_synthetic()).map(|e| e.id.as_str()).collect();
            prop_assert_eq!(order, kept, "{}: order changed", name);
            // The result fits the budget, or says by how much it does not.
            if let Some(max) = budget {
                let after = result.metrics.tokens_after;
                match &result.shortfall {
                    None => prop_assert!(after <= max, "{name}: {after} tokens over {max}, silently"),
                    Some(s) => prop_assert_eq!((s.after, s.over_by), (after, after - max), "{}", name),
                }
            }
            // It fits whenever the latest turn alone would.
            if let Some(max) = budget {
                let synthetic: u64 = events.iter().filter(|e| e.is_synthetic()).map(|e| u64::from(e.token_estimate)).sum();
                let real: Vec<SessionEvent> = events.iter().filter(|e| !e.is_synthetic()).cloned().collect();
                let last_turn = session_core::split_turns(&real).last().map_or(0, |t| t.iter().map(|e| u64::from(e.token_estimate)).sum::<u64>());
                if synthetic + last_turn <= max && !pending {
                    prop_assert!(result.metrics.tokens_after <= max, "{name}: {} tokens over {max}", result.metrics.tokens_after);
                }
            }
            // Summaries open the context with a synthetic user/assistant pair.
            if let Some(summary) = &result.summary {
                prop_assert_eq!(result.context[0].role(), Role::User);
                prop_assert_eq!(result.context[1].message.text(), summary.as_str());
            }
        }
    }
}
