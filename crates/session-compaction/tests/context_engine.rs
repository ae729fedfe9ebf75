//! The context engine in the cases real agents hit: one long tool loop
//! inside a single turn, pinned system messages, a preamble before the
//! first user message.
#![allow(clippy::unwrap_used)]

mod support;

use support::pairs_hold;

use proptest::prelude::*;
use session_compaction::{
    CompactionRequest, CompactionStrategy, SlidingWindow, TokenBudget, TurnWindow,
};
use session_core::{Message, NewSession, Role, Session, SessionEvent, ToolCall};

fn session() -> Session {
    NewSession::new("app", "u", chrono::Utc::now())
        .unwrap()
        .to_session(chrono::Utc::now())
}

fn event(message: Message, tokens: u32) -> SessionEvent {
    SessionEvent::builder(message)
        .token_estimate(tokens)
        .build()
        .unwrap()
}

/// One user message and `steps` tool steps (a call and its result), each step `tokens` heavy.
fn long_turn(steps: usize, tokens: u32) -> Vec<SessionEvent> {
    let mut events = vec![event(Message::user("fix the build"), 5)];
    for i in 0..steps {
        let id = format!("call_{i}");
        events.push(event(
            Message::assistant_tool_calls(
                "",
                vec![ToolCall::new(
                    &id,
                    "read_file",
                    &serde_json::json!({"n": i}),
                )],
            ),
            tokens / 2,
        ));
        events.push(event(
            Message::tool_result(&id, "read_file", "x".repeat(400)),
            tokens / 2,
        ));
    }
    events
}

/// A memory store, its service, alice, and a session of hers holding
/// `turns` turns of `question i` / `answer i`.
async fn alice_with_turns(
    turns: usize,
) -> (
    std::sync::Arc<dyn session_core::SessionRepository>,
    std::sync::Arc<dyn session_core::SessionService>,
    session_core::Owner,
    Session,
) {
    use session_core::{CreateSessionRequest, DefaultSessionService, InMemoryRepository, Owner};
    let repo = InMemoryRepository::new().shared();
    let svc: std::sync::Arc<dyn session_core::SessionService> =
        std::sync::Arc::new(DefaultSessionService::new(repo.clone()));
    let owner = Owner::user("alice").unwrap();
    let s = svc
        .create(CreateSessionRequest::builder("alice").build().unwrap())
        .await
        .unwrap();
    for i in 0..turns {
        for m in [
            Message::user(format!("question {i}")),
            Message::assistant(format!("answer {i}")),
        ] {
            svc.append_message(&owner, &s.id, m).await.unwrap();
        }
    }
    (repo, svc, owner, s)
}

/// Invocation `i{i}`: "question {i}" and "answer {i}".
/// Invocation `i`: a question and its answer, long enough that a summary
/// of a few of them saves tokens (texts start `question {i}`, `answer {i}`).
fn invocation(i: usize) -> Vec<SessionEvent> {
    let detail = " about the order, its delivery and the refund".repeat(6);
    [
        Message::user(format!("question {i}{detail}")),
        Message::assistant(format!("answer {i}{detail}")),
    ]
    .into_iter()
    .map(|m| {
        SessionEvent::builder(m)
            .invocation_id(format!("i{i}"))
            .build()
            .unwrap()
    })
    .collect()
}

fn tokens(events: &[SessionEvent]) -> u64 {
    events.iter().map(|e| u64::from(e.token_estimate)).sum()
}

async fn run(
    strategy: &dyn CompactionStrategy,
    events: Vec<SessionEvent>,
) -> (Vec<SessionEvent>, Vec<SessionEvent>) {
    let out = strategy
        .compact(&CompactionRequest::new(session(), events))
        .await
        .unwrap();
    (out.context, out.archived)
}

#[tokio::test]
async fn a_long_turn_is_cut_inside_at_step_boundaries_within_the_token_budget() {
    let events = long_turn(20, 40);
    assert!(tokens(&events) > 100);
    let (context, archived) = run(&TokenBudget::new(100).unwrap(), events.clone()).await;
    assert!(
        tokens(&context) <= 100,
        "within budget: {}",
        tokens(&context)
    );
    assert_eq!(
        context[0].message.text(),
        "fix the build",
        "the turn's user message stays"
    );
    assert!(pairs_hold(&context), "no call without its result");
    assert_eq!(
        context.last().unwrap().id,
        events.last().unwrap().id,
        "the newest step stays"
    );
    assert_eq!(
        context.len() + archived.len(),
        events.len(),
        "nothing is lost: the rest is archived"
    );
}

#[tokio::test]
async fn a_long_turn_is_cut_inside_by_event_count() {
    let events = long_turn(20, 40);
    let (context, _) = run(&SlidingWindow::new(4).unwrap(), events).await;
    assert!(context.len() <= 4, "{} events", context.len());
    assert_eq!(context[0].role(), Role::User);
    assert!(pairs_hold(&context));
}

#[tokio::test]
async fn a_pending_call_keeps_its_step() {
    let mut events = long_turn(6, 40);
    events.push(event(
        Message::assistant_tool_calls(
            "",
            vec![ToolCall::new("open", "run_tests", &serde_json::json!({}))],
        ),
        20,
    ));
    let (context, _) = run(&TokenBudget::new(60).unwrap(), events).await;
    assert!(context
        .iter()
        .any(|e| e.message.tool_calls().iter().any(|c| c.id == "open")));
    assert_eq!(context[0].role(), Role::User);
}

#[tokio::test]
async fn the_latest_system_message_is_pinned_first_and_never_archived() {
    let mut events = vec![event(Message::system("You are terse."), 10)];
    for t in 0..5 {
        events.push(event(Message::user(format!("q{t}")), 10));
        events.push(event(Message::assistant(format!("a{t}")), 10));
    }
    events.push(event(Message::system("You are a pirate now."), 10));
    events.push(event(Message::user("ahoy?"), 10));
    let (context, archived) = run(&TokenBudget::new(40).unwrap(), events).await;
    assert_eq!(
        context[0].message.text(),
        "You are a pirate now.",
        "pinned first"
    );
    assert_eq!(
        context.iter().filter(|e| e.role() == Role::System).count(),
        1,
        "the newest system message supersedes the older one"
    );
    assert!(archived
        .iter()
        .any(|e| e.message.text() == "You are terse."));
    assert!(tokens(&context) <= 40);
    assert_eq!(context.last().unwrap().message.text(), "ahoy?");
}

#[tokio::test]
async fn turn_window_within_its_limit_leaves_the_preamble_alone() {
    let events = vec![
        event(Message::assistant("boot: tools loaded"), 5),
        event(Message::user("q1"), 5),
        event(Message::assistant("a1"), 5),
        event(Message::user("q2"), 5),
        event(Message::assistant("a2"), 5),
    ];
    let out = TurnWindow::new(2)
        .unwrap()
        .compact(&CompactionRequest::new(session(), events.clone()))
        .await
        .unwrap();
    assert!(out.is_noop(), "two turns fit: nothing to compact");
    assert_eq!(out.context, events);
    let (context, archived) = run(&TurnWindow::new(1).unwrap(), events).await;
    assert_eq!(
        context[0].message.text(),
        "boot: tools loaded",
        "the preamble stays"
    );
    assert_eq!(archived.len(), 2, "only the first turn leaves");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// For random histories ending in a long turn, the token budget keeps
    /// the turn's user message, never separates a call from its result, and
    /// is met whenever the user message and the newest step fit at all.
    #[test]
    fn long_turns_compact_within_budget(
        earlier in 0usize..4,
        steps in 1usize..25,
        step_tokens in 2u32..80,
        budget in 10u64..400,
        with_system in any::<bool>(),
    ) {
        let mut events = Vec::new();
        if with_system {
            events.push(event(Message::system("rules"), 7));
        }
        for t in 0..earlier {
            events.push(event(Message::user(format!("old {t}")), 5));
            events.push(event(Message::assistant("ok"), 5));
        }
        let turn = long_turn(steps, step_tokens);
        let user_id = turn[0].id.clone();
        let newest = tokens(&turn[turn.len() - 2..]);
        events.extend(turn);
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let (context, archived) = rt.block_on(run(&TokenBudget::new(budget).unwrap(), events.clone()));
        prop_assert!(pairs_hold(&context));
        prop_assert!(context.iter().any(|e| e.id == user_id), "the turn's user message stays");
        prop_assert_eq!(context.len() + archived.len(), events.len());
        let floor = 5 + newest + if with_system { 7 } else { 0 };
        if floor <= budget {
            prop_assert!(tokens(&context) <= budget, "{} > {budget}", tokens(&context));
        }
    }
}

#[tokio::test]
async fn older_tool_results_become_placeholders_and_the_archive_keeps_them() {
    let mut events = long_turn(5, 40);
    for (seq, e) in (1u64..).zip(events.iter_mut()) {
        e.seq = seq;
        if e.role() == Role::Tool {
            e.token_estimate = 100; // 400 characters of file content
        }
    }
    let strategy = session_compaction::ToolResultClearing::new(2).unwrap();
    let (context, archived) = run(&strategy, events.clone()).await;
    assert_eq!(
        context.len(),
        events.len(),
        "placeholders keep every position"
    );
    assert_eq!(archived.len(), 3, "three of five results leave the context");
    assert!(pairs_hold(&context), "each call keeps an answer");
    let placeholders: Vec<&SessionEvent> = context
        .iter()
        .filter(|e| e.metadata.contains_key(session_compaction::CLEARED_SEQ))
        .collect();
    assert_eq!(placeholders.len(), 3);
    assert!(placeholders[0].message.text().contains("read_file"));
    assert!(placeholders[0].message.text().contains("call_0"));
    assert!(
        placeholders[0].message.text().contains("seq 3"),
        "{}",
        placeholders[0].message.text()
    );
    assert!(tokens(&context) < tokens(&events));
    // Too few to clear, or an excluded tool: nothing changes.
    let lazy = session_compaction::ToolResultClearing::new(2)
        .unwrap()
        .with_min_clear(4)
        .unwrap();
    let (_, archived) = run(&lazy, events.clone()).await;
    assert!(
        archived.is_empty(),
        "fewer than min_clear: the prompt prefix stays stable"
    );
    let excluded = session_compaction::ToolResultClearing::new(1)
        .unwrap()
        .with_excluded_tools(["read_file"]);
    let (_, archived) = run(&excluded, events).await;
    assert!(archived.is_empty());
}

/// Three invocations, a summary that replaces the first two, then a rewind
/// to before the third: the context is the first two turns again, not empty.
#[tokio::test]
async fn rewind_after_compaction_brings_back_what_the_summary_replaced() {
    use session_compaction::{
        CompactionPolicy, ExtractiveSummarizer, RecursiveSummarization, Trigger,
    };
    use session_core::{
        CreateSessionRequest, DefaultSessionService, InMemoryRepository, Owner, SessionService,
    };
    use std::sync::Arc;
    let repo = InMemoryRepository::new().shared();
    let svc = DefaultSessionService::new(repo.clone());
    let owner = Owner::user("alice").unwrap();
    let s = svc
        .create(CreateSessionRequest::builder("alice").build().unwrap())
        .await
        .unwrap();
    for i in 1..=3 {
        svc.append_events(&owner, &s.id, invocation(i))
            .await
            .unwrap();
    }
    let policy = CompactionPolicy::new(
        Trigger::TurnCount(1),
        Arc::new(RecursiveSummarization::new(
            1,
            Arc::new(ExtractiveSummarizer::new()),
        )),
    );
    let outcome = policy.compact_now(repo.as_ref(), &s.id).await.unwrap();
    assert!(matches!(
        outcome,
        session_compaction::CompactionOutcome::Compacted(_)
    ));
    svc.rewind(
        &owner,
        &s.id,
        &session_core::RewindTo::before_invocation("i3").unwrap(),
    )
    .await
    .unwrap();
    let texts: Vec<String> = svc
        .messages(&owner, &s.id)
        .await
        .unwrap()
        .iter()
        .map(|m| m.text().split(" about").next().unwrap_or("").to_owned())
        .collect();
    assert_eq!(texts, ["question 1", "answer 1", "question 2", "answer 2"]);
}

#[tokio::test]
async fn summarizing_with_nothing_kept_summarizes_inside_a_long_turn() {
    use std::sync::Arc;
    let events = long_turn(10, 40);
    let strategy = session_compaction::RecursiveSummarization::new(
        0,
        Arc::new(session_compaction::ExtractiveSummarizer::new()),
    );
    let out = strategy
        .compact(&CompactionRequest::new(session(), events.clone()))
        .await
        .unwrap();
    assert!(out.summary.is_some(), "the steps are summarized");
    let real: Vec<&SessionEvent> = out.context.iter().filter(|e| !e.is_synthetic()).collect();
    assert_eq!(
        real[0].message.text(),
        "fix the build",
        "the user message stays"
    );
    assert_eq!(
        real.last().unwrap().id,
        events.last().unwrap().id,
        "the newest step stays"
    );
    assert_eq!(
        real.len(),
        3,
        "user message, the newest call and its result"
    );
    assert!(pairs_hold(&out.context));
    assert_eq!(out.archived.len(), events.len() - 3);
}

/// An agent compacts its own context with the `compact_context` tool; the
/// summary it leaves says what the compaction did, and another owner cannot
/// compact the session.
#[tokio::test]
async fn the_compact_context_tool_compacts_the_callers_session_and_records_a_notice() {
    use session_compaction::{
        CompactContext, CompactionPolicy, ExtractiveSummarizer, RecursiveSummarization,
        ToolContext, Trigger, NOTICE_KEY,
    };
    use session_core::{ErrorKind, EventView, Owner, SessionRepositoryExt};
    use std::sync::Arc;
    let (repo, svc, owner, s) = alice_with_turns(4).await;
    let policy = CompactionPolicy::new(
        Trigger::TurnCount(100),
        Arc::new(RecursiveSummarization::new(
            1,
            Arc::new(ExtractiveSummarizer::new()),
        )),
    );
    let tool = CompactContext::new(svc.clone(), policy);
    assert_eq!(tool.definition()["function"]["name"], "compact_context");
    let ctx = ToolContext {
        owner: owner.clone(),
        session_id: s.id.clone(),
    };
    let answer: serde_json::Value = serde_json::from_str(
        &tool
            .call(&ctx, &serde_json::json!({"innerThought": "done"}))
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(answer["compacted"], true, "{answer}");
    assert_eq!(answer["strategy"], "recursive-summarization");
    assert_eq!(answer["events_before"], 8);
    let context = repo.all_events(&s.id, EventView::Context).await.unwrap();
    let notice = &context[0].metadata[NOTICE_KEY];
    assert_eq!(notice["strategy"], "recursive-summarization");
    assert_eq!(notice["trigger"], "requested");
    assert_eq!(notice["events_archived"], 6);
    let stranger = ToolContext {
        owner: Owner::user("mallory").unwrap(),
        session_id: s.id.clone(),
    };
    let err = tool
        .call(&stranger, &serde_json::json!({}))
        .await
        .unwrap_err();
    assert!(
        matches!(err, session_compaction::CompactionError::Session(e) if e.kind() == ErrorKind::NotFound)
    );
}

#[tokio::test]
async fn constructors_refuse_settings_that_cannot_work() {
    use session_compaction::{ToolResultClearing, Trigger};
    use session_core::ErrorKind;
    let kind = |e: session_compaction::CompactionError| match e {
        session_compaction::CompactionError::Session(e) => e.kind(),
        other => panic!("{other}"),
    };
    assert_eq!(
        kind(SlidingWindow::new(0).unwrap_err()),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        kind(TurnWindow::new(0).unwrap_err()),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        kind(TokenBudget::new(0).unwrap_err()),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        kind(ToolResultClearing::new(0).unwrap_err()),
        ErrorKind::InvalidInput
    );
    assert!(ToolResultClearing::new(2)
        .unwrap()
        .with_min_clear(0)
        .is_err());
    assert!(Trigger::token_count(0).is_err());
    assert!(Trigger::turn_count(0).is_err());
    assert!(Trigger::event_count(0).is_err());
    assert!(Trigger::fraction_of(1000, 0.0).is_err());
    assert!(Trigger::fraction_of(1000, 1.5).is_err());
    assert!(Trigger::fraction_of(0, 0.5).is_err());
    assert!(Trigger::any(vec![]).is_err() && Trigger::all(vec![]).is_err());
    let summarizer = std::sync::Arc::new(session_compaction::ExtractiveSummarizer::new());
    let s = session_compaction::RecursiveSummarization::new(2, summarizer);
    assert!(
        s.clone().try_with_overlap(2).is_err(),
        "overlap at keep_recent"
    );
    assert!(s.try_with_overlap(1).is_ok());
    // A budget below the pinned system messages cannot be met by any cut.
    let events = vec![
        event(Message::system("long rules"), 50),
        event(Message::user("hi"), 5),
    ];
    let err = TokenBudget::new(40)
        .unwrap()
        .compact(&CompactionRequest::new(session(), events))
        .await
        .unwrap_err();
    assert_eq!(kind(err), ErrorKind::InvalidInput);
}

#[test]
fn composite_triggers_combine_their_parts() {
    use session_compaction::Trigger;
    let any = Trigger::any(vec![
        Trigger::turn_count(3).unwrap(),
        Trigger::token_count(100).unwrap(),
    ])
    .unwrap();
    assert!(any.fires(10, 1, 3) && any.fires(100, 1, 1) && !any.fires(99, 1, 2));
    let all = Trigger::all(vec![
        Trigger::turn_count(3).unwrap(),
        Trigger::event_count(5).unwrap(),
    ])
    .unwrap();
    assert!(all.fires(0, 5, 3) && !all.fires(0, 4, 3) && !all.fires(0, 5, 2));
    let fraction = Trigger::fraction_of(1000, 0.7).unwrap();
    assert!(fraction.fires(700, 0, 0) && !fraction.fires(699, 0, 0));
}

/// A sub-agent's work is summarized on its branch, where it was; the root
/// and the sibling branch are untouched, and the sibling cannot see it.
#[tokio::test]
async fn branch_summary_compacts_one_sub_agent_only() {
    let on = |branch: &str, m: Message| {
        let mut e = SessionEvent::new(m);
        e.branch = Some(branch.to_owned());
        e
    };
    let mut events = vec![
        SessionEvent::new(Message::user("research flights and write the email")),
        SessionEvent::new(Message::assistant("delegating")),
    ];
    for i in 0..3 {
        let id = format!("r{i}");
        events.push(on(
            "orch.researcher",
            Message::assistant_tool_calls(
                "",
                vec![ToolCall::new(&id, "search", &serde_json::json!({"i": i}))],
            ),
        ));
        events.push(on(
            "orch.researcher",
            Message::tool_result(
                &id,
                "search",
                format!("flight LH{i}00 costs {}0 EUR", i + 3),
            ),
        ));
    }
    events.push(on("orch.writer", Message::assistant("Dear team, ...")));
    events.push(on(
        "orch.researcher",
        Message::assistant("cheapest is LH000"),
    ));
    events.push(SessionEvent::new(Message::assistant("done")));
    let strategy = session_compaction::BranchSummary::new(
        "orch.researcher",
        1,
        std::sync::Arc::new(session_compaction::ExtractiveSummarizer::new()),
    )
    .unwrap();
    let out = strategy
        .compact(&CompactionRequest::new(session(), events.clone()))
        .await
        .unwrap();
    assert_eq!(
        out.archived.len(),
        6,
        "the researcher's calls and results leave"
    );
    assert!(out
        .archived
        .iter()
        .all(|e| e.branch.as_deref() == Some("orch.researcher")));
    let untouched: Vec<&str> = events
        .iter()
        .filter(|e| e.branch.as_deref() != Some("orch.researcher"))
        .map(|e| e.id.as_str())
        .collect();
    let kept: Vec<&str> = out
        .context
        .iter()
        .filter(|e| e.branch.as_deref() != Some("orch.researcher"))
        .map(|e| e.id.as_str())
        .collect();
    assert_eq!(kept, untouched, "root and sibling events stay, in order");
    let summary_at = out
        .context
        .iter()
        .position(SessionEvent::is_synthetic)
        .unwrap();
    assert_eq!(
        summary_at, 2,
        "the summary sits where the branch's work began"
    );
    let summary = &out.context[summary_at + 1];
    assert!(summary.visible_to("orch.researcher") && summary.visible_to("orch.researcher.sub"));
    assert!(!summary.visible_to("orch.writer"), "siblings do not see it");
    assert!(pairs_hold(&out.context));
    assert!(session_compaction::BranchSummary::new(
        "bad..branch",
        1,
        std::sync::Arc::new(session_compaction::ExtractiveSummarizer::new())
    )
    .is_err());
}

/// ADK's events compaction: every 3 new invocations the older ones are
/// summarized and the newest stays verbatim.
#[tokio::test]
async fn every_n_invocations_compacts_on_schedule() {
    use session_compaction::{CompactionPolicy, ExtractiveSummarizer};
    use session_core::{
        CreateSessionRequest, DefaultSessionService, EventView, InMemoryRepository, Owner,
        SessionRepositoryExt, SessionService,
    };
    use std::sync::Arc;
    let repo = InMemoryRepository::new().shared();
    let policy =
        CompactionPolicy::every_invocations(3, 1, Arc::new(ExtractiveSummarizer::new())).unwrap();
    assert!(
        CompactionPolicy::every_invocations(0, 1, Arc::new(ExtractiveSummarizer::new())).is_err()
    );
    let svc = DefaultSessionService::new(repo.clone()).with_append_hook(Arc::new(policy));
    let owner = Owner::user("alice").unwrap();
    let s = svc
        .create(CreateSessionRequest::builder("alice").build().unwrap())
        .await
        .unwrap();
    let mut compacted_at = Vec::new();
    let mut last_summary: Vec<String> = Vec::new();
    for i in 1..=7 {
        svc.append_events(&owner, &s.id, invocation(i))
            .await
            .unwrap();
        let context = repo.all_events(&s.id, EventView::Context).await.unwrap();
        let summary: Vec<String> = context
            .iter()
            .filter(|e| e.is_synthetic())
            .map(|e| e.id.clone())
            .collect();
        if summary != last_summary {
            compacted_at.push(i);
            last_summary = summary;
        }
    }
    assert_eq!(
        compacted_at,
        [4, 7],
        "compacted after invocations 4 and 7: every 3 new ones"
    );
}

/// When nothing is compacted, the outcome says why.
#[tokio::test]
async fn a_compaction_that_removes_nothing_says_why() {
    use session_compaction::{CompactionOutcome, CompactionPolicy, Trigger};

    use std::sync::Arc;
    let (repo, _, _, s) = alice_with_turns(2).await;
    let reason = |o: CompactionOutcome| match o {
        CompactionOutcome::NotNeeded { reason, .. } => reason,
        other => panic!("{other:?}"),
    };
    let cases: Vec<(Trigger, Arc<dyn CompactionStrategy>, &str)> = vec![
        (
            Trigger::TurnCount(1),
            Arc::new(TurnWindow::new(5).unwrap()),
            "2 turns, within the limit of 5",
        ),
        (
            Trigger::TurnCount(1),
            Arc::new(TokenBudget::new(10_000).unwrap()),
            "fit the budget of 10000",
        ),
        (
            Trigger::TurnCount(1),
            Arc::new(SlidingWindow::new(50).unwrap()),
            "fit the window of 50",
        ),
        (
            Trigger::TurnCount(1),
            Arc::new(session_compaction::RecursiveSummarization::new(
                2,
                Arc::new(session_compaction::ExtractiveSummarizer::new()),
            )),
            "nothing is older than the 2 turns kept verbatim",
        ),
        (
            Trigger::TurnCount(1),
            Arc::new(session_compaction::ToolResultClearing::new(3).unwrap()),
            "0 tool results can be cleared",
        ),
    ];
    for (trigger, strategy, want) in cases {
        let policy = CompactionPolicy::new(trigger, strategy);
        let got = reason(policy.compact_now(repo.as_ref(), &s.id).await.unwrap());
        assert!(got.contains(want), "{got:?} should say {want:?}");
    }
    let policy = CompactionPolicy::new(
        Trigger::TurnCount(10),
        Arc::new(TurnWindow::new(1).unwrap()),
    );
    let got = reason(policy.maybe_compact(repo.as_ref(), &s.id).await.unwrap());
    assert!(got.starts_with("below the trigger"), "{got}");
}

/// A history resumed larger than the trigger is compacted before the first
/// model call, once.
#[tokio::test]
async fn initial_summarization_runs_before_the_first_call_once() {
    use session_compaction::{CompactionPolicy, SessionMemory, Trigger};
    use session_core::{EventView, SessionRepositoryExt};
    use std::sync::Arc;
    let (repo, svc, owner, s) = alice_with_turns(10).await;
    let policy =
        CompactionPolicy::new(Trigger::TurnCount(5), Arc::new(TurnWindow::new(2).unwrap()));
    let memory = SessionMemory::new(svc.clone())
        .with_compaction(policy)
        .with_initial_summarization();
    let messages = memory
        .prepare(&owner, &s.id, "You are helpful.")
        .await
        .unwrap();
    assert_eq!(
        messages.len(),
        5,
        "the system prompt and the two newest turns: {messages:?}"
    );
    let context = repo.all_events(&s.id, EventView::Context).await.unwrap();
    assert_eq!(context.len(), 4);
    // More turns arrive outside the memory; the initial summarization does not run again.
    for i in 10..16 {
        svc.append_message(&owner, &s.id, Message::user(format!("question {i}")))
            .await
            .unwrap();
    }
    memory
        .prepare(&owner, &s.id, "You are helpful.")
        .await
        .unwrap();
    let context = repo.all_events(&s.id, EventView::Context).await.unwrap();
    assert_eq!(context.len(), 10, "once per session");
}
