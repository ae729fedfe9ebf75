//! Replay parity: the same scripted agent runs twice, once without
//! compaction and once with compaction at random points (every strategy),
//! and every fact the script plants stays reachable — in the context, or
//! through recall over the archive — while every tool call in the context
//! keeps its result.
#![allow(clippy::unwrap_used)]

mod support;

use support::pairs_hold;

use std::sync::Arc;

use proptest::prelude::*;
use session_compaction::{
    CompactionPolicy, CompactionStrategy, ExtractiveSummarizer, RecursiveSummarization,
    SlidingWindow, TokenBudget, ToolResultClearing, Trigger, TurnWindow,
};
use session_core::{
    CreateSessionRequest, DefaultSessionService, EventView, InMemoryRepository, Message, Owner,
    SearchQuery, SessionEvent, SessionId, SessionRepository, SessionRepositoryExt, SessionService,
    ToolCall,
};

fn strategy(pick: u8) -> Arc<dyn CompactionStrategy> {
    match pick % 5 {
        0 => Arc::new(TokenBudget::new(120).unwrap()),
        1 => Arc::new(SlidingWindow::new(6).unwrap()),
        2 => Arc::new(TurnWindow::new(2).unwrap()),
        3 => Arc::new(ToolResultClearing::new(1).unwrap()),
        _ => Arc::new(RecursiveSummarization::new(
            1,
            Arc::new(ExtractiveSummarizer::new()),
        )),
    }
}

/// The scripted agent's turn `t`: a question planting a fact, a tool call,
/// a tool result planting a second fact, an answer.
fn turn(t: usize) -> Vec<SessionEvent> {
    let id = format!("call-{t}");
    vec![
        SessionEvent::new(Message::user(format!(
            "remember locker L{t}x{} please",
            t * 7 + 3
        ))),
        SessionEvent::new(Message::assistant_tool_calls(
            "",
            vec![ToolCall::new(&id, "lookup", &serde_json::json!({"t": t}))],
        )),
        SessionEvent::new(Message::tool_result(
            &id,
            "lookup",
            format!("order O{t}y{} is on its way", t * 11 + 5),
        )),
        SessionEvent::new(Message::assistant(format!("Noted, turn {t}."))),
    ]
}

fn facts(turns: usize) -> Vec<String> {
    (0..turns)
        .flat_map(|t| {
            [
                format!("L{t}x{}", t * 7 + 3),
                format!("O{t}y{}", t * 11 + 5),
            ]
        })
        .collect()
}

async fn reachable(repo: &dyn SessionRepository, id: &SessionId, fact: &str) -> bool {
    let context = repo.all_events(id, EventView::Context).await.unwrap();
    if context
        .iter()
        .any(|e| e.message.search_text().contains(fact))
    {
        return true;
    }
    !repo
        .search(&SearchQuery::in_session(id.as_str(), fact))
        .await
        .unwrap()
        .items
        .is_empty()
}

async fn run(turns: usize, compactions: &[Option<u8>]) -> (Arc<dyn SessionRepository>, SessionId) {
    let repo = InMemoryRepository::new().shared();
    let svc = DefaultSessionService::new(repo.clone());
    let owner = Owner::user("alice").unwrap();
    let s = svc
        .create(CreateSessionRequest::builder("alice").build().unwrap())
        .await
        .unwrap();
    for t in 0..turns {
        svc.append_events(&owner, &s.id, turn(t)).await.unwrap();
        if let Some(Some(pick)) = compactions.get(t) {
            let policy = CompactionPolicy::new(Trigger::TurnCount(1), strategy(*pick));
            policy.compact_now(repo.as_ref(), &s.id).await.unwrap();
            let context = repo.all_events(&s.id, EventView::Context).await.unwrap();
            assert!(pairs_hold(&context), "after compaction {pick} at turn {t}");
        }
    }
    (repo, s.id)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn every_planted_fact_stays_reachable_with_or_without_compaction(
        turns in 1usize..10,
        compactions in prop::collection::vec(prop::option::of(0u8..5), 10),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let (plain, plain_id) = run(turns, &[]).await;
            let (compacted, compacted_id) = run(turns, &compactions).await;
            for fact in facts(turns) {
                assert!(reachable(plain.as_ref(), &plain_id, &fact).await, "{fact} without compaction");
                assert!(reachable(compacted.as_ref(), &compacted_id, &fact).await, "{fact} lost with {compactions:?}");
            }
            let originals = |events: Vec<SessionEvent>| {
                events
                    .into_iter()
                    .filter(|e| !e.is_synthetic() && !e.metadata.contains_key(session_compaction::CLEARED_SEQ))
                    .map(|e| e.message.search_text())
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                originals(plain.all_events(&plain_id, EventView::Archive).await.unwrap()),
                originals(compacted.all_events(&compacted_id, EventView::Archive).await.unwrap()),
                "the archive holds every original event, in order"
            );
            let context = compacted.all_events(&compacted_id, EventView::Context).await.unwrap();
            assert!(pairs_hold(&context));
        });
    }
}
