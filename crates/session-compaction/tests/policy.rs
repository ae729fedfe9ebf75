//! The compaction policy wired into `DefaultSessionService`.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use session_compaction::{
    BeforeCompaction, CompactionError, CompactionOutcome, CompactionPolicy, CompactionStrategy,
    ExtractiveSummarizer, RecursiveSummarization, StructuredSummary, Summarizer, SummaryRequest,
    Trigger, TurnWindow, COMPACTION_ATTEMPTS,
};
use session_core::{
    CreateSessionRequest, DefaultSessionService, EventView, InMemoryRepository, Message, Owner,
    SearchQuery, Session, SessionEvent, SessionId, SessionRepository, SessionRepositoryExt,
    SessionService,
};

fn owner() -> Owner {
    Owner::user("alice").unwrap()
}

async fn setup(
    policy: CompactionPolicy,
) -> (DefaultSessionService, Arc<dyn SessionRepository>, SessionId) {
    let repo = InMemoryRepository::new().shared();
    let svc = DefaultSessionService::new(repo.clone()).with_append_hook(Arc::new(policy));
    let s = svc
        .create(CreateSessionRequest::builder("alice").build().unwrap())
        .await
        .unwrap();
    (svc, repo, s.id)
}

async fn turn(svc: &DefaultSessionService, id: &session_core::SessionId, i: usize) {
    svc.append_message(&owner(), id, Message::user(format!("question {i}")))
        .await
        .unwrap();
    svc.append_message(&owner(), id, Message::assistant(format!("answer {i}")))
        .await
        .unwrap();
}

#[tokio::test]
async fn fires_after_append_and_keeps_the_archive() {
    let policy =
        CompactionPolicy::new(Trigger::TurnCount(5), Arc::new(TurnWindow::new(2).unwrap()));
    let (svc, repo, id) = setup(policy).await;
    for i in 1..=4 {
        turn(&svc, &id, i).await;
    }
    assert_eq!(
        svc.messages(&owner(), &id).await.unwrap().len(),
        8,
        "4 turns: not yet"
    );
    turn(&svc, &id, 5).await;
    let texts: Vec<String> = svc
        .messages(&owner(), &id)
        .await
        .unwrap()
        .iter()
        .map(|m| m.text().to_owned())
        .collect();
    assert_eq!(texts, ["question 4", "answer 4", "question 5", "answer 5"]);
    assert_eq!(
        repo.all_events(&id, EventView::Archive)
            .await
            .unwrap()
            .len(),
        10
    );
}

#[tokio::test]
async fn token_trigger_uses_the_running_total() {
    let policy = CompactionPolicy::new(
        Trigger::context_fraction(100),
        Arc::new(TurnWindow::new(1).unwrap()),
    );
    let (svc, repo, id) = setup(policy).await;
    let mut i = 0;
    while repo.get(&id).await.unwrap().context_tokens < 60 {
        i += 1;
        turn(&svc, &id, i).await;
    }
    let s = repo.get(&id).await.unwrap();
    assert!(
        s.context_tokens < 70,
        "compaction keeps it under 70% of 100: {}",
        s.context_tokens
    );
}

/// A strategy that lets the test append while it runs, to lose the race.
#[derive(Debug)]
struct Interleaving {
    repo: Arc<dyn SessionRepository>,
    inner: TurnWindow,
}

#[async_trait]
impl CompactionStrategy for Interleaving {
    fn name(&self) -> &'static str {
        "interleaving"
    }
    async fn compact(
        &self,
        request: &session_compaction::CompactionRequest,
    ) -> Result<session_compaction::CompactionResult, CompactionError> {
        self.repo
            .append(
                &request.session.id,
                vec![SessionEvent::new(Message::user("slipped in"))],
            )
            .await?;
        self.inner.compact(request).await
    }
}

#[tokio::test]
async fn a_lost_race_changes_nothing_and_loses_no_event() {
    let repo = InMemoryRepository::new().shared();
    let svc = DefaultSessionService::new(repo.clone());
    let s = svc
        .create(CreateSessionRequest::builder("alice").build().unwrap())
        .await
        .unwrap();
    for i in 1..=3 {
        turn(&svc, &s.id, i).await;
    }
    let policy = CompactionPolicy::new(
        Trigger::TurnCount(1),
        Arc::new(Interleaving {
            repo: repo.clone(),
            inner: TurnWindow::new(1).unwrap(),
        }),
    );
    // Each plan loses to a write that slips in; after the last attempt
    // the race is reported and nothing of the compaction is stored.
    let out = policy.compact_now(repo.as_ref(), &s.id).await.unwrap();
    let last_read = 6 + u64::try_from(COMPACTION_ATTEMPTS).unwrap() - 1;
    assert!(
        matches!(out, CompactionOutcome::LostRace { read_version } if read_version == last_read),
        "{out:?}"
    );
    let ctx = repo.all_events(&s.id, EventView::Context).await.unwrap();
    assert_eq!(
        ctx.len(),
        6 + COMPACTION_ATTEMPTS,
        "the old context plus each append that slipped in"
    );
    assert!(ctx[6..].iter().all(|e| e.message.text() == "slipped in"));
}

#[derive(Debug)]
struct Failing(&'static str);

#[async_trait]
impl Summarizer for Failing {
    async fn summarize(&self, _: &SummaryRequest<'_>) -> Result<String, CompactionError> {
        match self.0 {
            "error" => Err(CompactionError::summarizer("HTTP 500")),
            other => Ok(other.to_owned()),
        }
    }
}

#[tokio::test]
async fn a_bad_summary_aborts_and_leaves_the_context_untouched() {
    for (answer, structured) in [
        ("error", false),
        ("   ", false),
        ("{not json", true),
        ("{\"title\": \"x\"}", true),
    ] {
        let summarizer = Arc::new(Failing(answer));
        let strategy: Arc<dyn CompactionStrategy> = if structured {
            Arc::new(StructuredSummary::new(1, summarizer))
        } else {
            Arc::new(RecursiveSummarization::new(1, summarizer))
        };
        let policy = CompactionPolicy::new(Trigger::TurnCount(1), strategy);
        let (svc, repo, id) = setup(CompactionPolicy::new(
            Trigger::TurnCount(100),
            Arc::new(TurnWindow::new(1).unwrap()),
        ))
        .await;
        for i in 1..=3 {
            turn(&svc, &id, i).await;
        }
        let before = repo.all_events(&id, EventView::Context).await.unwrap();
        let v = repo.event_version(&id).await.unwrap();
        let err = policy.compact_now(repo.as_ref(), &id).await.unwrap_err();
        assert!(
            matches!(
                err,
                CompactionError::Summarizer { .. } | CompactionError::InvalidSummary { .. }
            ),
            "{answer:?}: {err}"
        );
        assert_eq!(
            repo.all_events(&id, EventView::Context).await.unwrap(),
            before,
            "{answer:?}"
        );
        assert_eq!(repo.event_version(&id).await.unwrap(), v);
    }
}

#[derive(Default)]
struct Flush {
    seen: Mutex<Vec<String>>,
}

#[async_trait]
impl BeforeCompaction for Flush {
    async fn before_compaction(&self, _session: &Session, context: &[SessionEvent]) {
        self.seen
            .lock()
            .extend(context.iter().map(|e| e.message.text().to_owned()));
    }
}

/// The flush sees the context about to be compacted (everything the
/// agent could still save from), before anything leaves it.
#[tokio::test]
async fn the_pre_compaction_flush_sees_the_context_before_it_is_compacted() {
    let flush = Arc::new(Flush::default());
    let policy =
        CompactionPolicy::new(Trigger::TurnCount(3), Arc::new(TurnWindow::new(1).unwrap()))
            .with_before_compaction(flush.clone());
    let (svc, _repo, id) = setup(policy).await;
    for i in 1..=3 {
        turn(&svc, &id, i).await;
    }
    assert_eq!(
        *flush.seen.lock(),
        [
            "question 1",
            "answer 1",
            "question 2",
            "answer 2",
            "question 3"
        ],
        "the trigger fires as the third turn starts"
    );
}

#[tokio::test]
async fn structured_summaries_merge_and_stay_searchable() {
    let policy = CompactionPolicy::new(
        Trigger::TurnCount(3),
        Arc::new(StructuredSummary::new(
            1,
            Arc::new(ExtractiveSummarizer::new()),
        )),
    );
    let (svc, _repo, id) = setup(policy).await;
    svc.append_message(
        &owner(),
        &id,
        Message::user("My flight is LH 454 on the 3rd."),
    )
    .await
    .unwrap();
    svc.append_message(&owner(), &id, Message::assistant("Noted."))
        .await
        .unwrap();
    // Turns long enough that each summary saves tokens (a summary that
    // would not is not made).
    let detail = " and the hotel, the transfer and the luggage".repeat(8);
    for i in 2..=6 {
        for m in [
            Message::user(format!("question {i}{detail}")),
            Message::assistant(format!("answer {i}{detail}")),
        ] {
            svc.append_message(&owner(), &id, m).await.unwrap();
        }
    }
    let ctx = svc.messages(&owner(), &id).await.unwrap();
    let summary: serde_json::Value = serde_json::from_str(ctx[1].text()).unwrap();
    session_compaction::validate_against_schema(
        &summary,
        &session_compaction::default_summary_schema(),
    )
    .unwrap();
    let facts = summary["key_facts"].as_array().unwrap();
    assert!(
        facts.iter().any(|f| f.as_str().unwrap().contains("454")),
        "a fact from the first compaction survives the later ones: {summary}"
    );
    let hits = svc
        .search(&owner(), &SearchQuery::in_session(&id, "LH 454"))
        .await
        .unwrap();
    assert!(hits.items.len() >= 2, "the original and the summaries");
}

#[tokio::test]
async fn a_context_length_error_compacts_and_retries_once() {
    let repo = InMemoryRepository::new().shared();
    let svc = DefaultSessionService::new(repo.clone());
    let s = svc
        .create(CreateSessionRequest::builder("alice").build().unwrap())
        .await
        .unwrap();
    for i in 1..=4 {
        turn(&svc, &s.id, i).await;
    }
    let policy = CompactionPolicy::new(
        Trigger::TurnCount(1000),
        Arc::new(TurnWindow::new(1).unwrap()),
    );
    let calls = AtomicUsize::new(0);
    let model = || {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        let repo = repo.clone();
        let id = s.id.clone();
        async move {
            let ctx = repo.all_events(&id, EventView::Context).await.unwrap();
            if ctx.len() > 2 {
                Err(format!("context_length_exceeded on call {n}"))
            } else {
                Ok(ctx.len())
            }
        }
    };
    let out = policy
        .retry_after_compaction(repo.as_ref(), &s.id, model, |e: &String| {
            e.contains("context_length")
        })
        .await
        .unwrap();
    assert_eq!(out, Ok(2));
    assert_eq!(calls.load(Ordering::SeqCst), 2, "exactly one retry");
}

#[tokio::test(flavor = "multi_thread")]
async fn background_compaction_runs_off_the_append_path() {
    let repo = InMemoryRepository::new().shared();
    let policy =
        CompactionPolicy::new(Trigger::TurnCount(2), Arc::new(TurnWindow::new(1).unwrap()))
            .in_background(repo.clone());
    let svc = DefaultSessionService::new(repo.clone()).with_append_hook(Arc::new(policy));
    let s = svc
        .create(CreateSessionRequest::builder("alice").build().unwrap())
        .await
        .unwrap();
    for i in 1..=3 {
        turn(&svc, &s.id, i).await;
    }
    for _ in 0..200 {
        if repo
            .all_events(&s.id, EventView::Context)
            .await
            .unwrap()
            .len()
            <= 2
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("background compaction never happened");
}

/// A session through the service, with a system prompt and `turns` short
/// question-answer turns, no compaction on append.
async fn short_turns(turns: usize) -> (DefaultSessionService, SessionId) {
    let repo = InMemoryRepository::new().shared();
    let svc = DefaultSessionService::new(repo);
    let s = svc
        .create(CreateSessionRequest::builder("alice").build().unwrap())
        .await
        .unwrap();
    svc.append_message(
        &owner(),
        &s.id,
        Message::system("You are a careful assistant who answers in one short sentence."),
    )
    .await
    .unwrap();
    for i in 1..=turns {
        turn(&svc, &s.id, i).await;
    }
    (svc, s.id)
}

/// Summarizing three short turns would write a summary turn larger than
/// what it replaces: nothing is written, and the outcome says why.
#[tokio::test]
async fn a_summary_that_would_not_save_tokens_is_not_made() {
    let (svc, id) = short_turns(3).await;
    let before = svc.get(&owner(), &id).await.unwrap();
    let policy = CompactionPolicy::new(
        Trigger::TurnCount(1),
        Arc::new(RecursiveSummarization::new(
            1,
            Arc::new(ExtractiveSummarizer::new()),
        )),
    );
    let done = svc.compact(&owner(), &id, &policy).await.unwrap();
    assert!(!done.compacted, "{done:?}");
    let reason = done.reason.unwrap();
    assert!(
        reason.contains("would not make the context smaller"),
        "{reason}"
    );
    let after = svc.get(&owner(), &id).await.unwrap();
    assert_eq!(after.version, before.version, "nothing written");
    assert_eq!(after.context_tokens, before.context_tokens);
}

/// A token budget below what the pinned system prompt and the newest turn
/// need is overshot only with a typed shortfall that says by how much.
#[tokio::test]
async fn a_budget_that_cannot_be_met_reports_the_shortfall() {
    let (svc, id) = short_turns(4).await;
    let policy = CompactionPolicy::new(
        Trigger::TurnCount(1),
        Arc::new(session_compaction::TokenBudget::new(30).unwrap()),
    );
    let done = svc.compact(&owner(), &id, &policy).await.unwrap();
    assert!(done.compacted, "the older turns went: {done:?}");
    let shortfall = done.shortfall.expect("over the budget, and says so");
    assert_eq!(shortfall.unit, session_core::BudgetUnit::Tokens);
    assert_eq!(shortfall.budget, 30);
    assert_eq!(shortfall.after, done.tokens_after);
    assert_eq!(shortfall.over_by, done.tokens_after - 30);
    assert!(shortfall.reason.contains("never cut"), "{shortfall}");
    let fits = CompactionPolicy::new(
        Trigger::TurnCount(1),
        Arc::new(session_compaction::TokenBudget::new(10_000).unwrap()),
    );
    let done = svc.compact(&owner(), &id, &fits).await.unwrap();
    assert_eq!(done.shortfall, None, "within the budget: {done:?}");
}

/// A spec's shadow prompt opens the summary turn it writes; a blank one is
/// refused before anything runs.
#[tokio::test]
async fn a_custom_shadow_prompt_opens_the_summary_turn() {
    let repo = InMemoryRepository::new().shared();
    let svc = DefaultSessionService::new(repo.clone());
    let s = svc
        .create(CreateSessionRequest::builder("alice").build().unwrap())
        .await
        .unwrap();
    let detail = " about the parcel, the depot and the courier".repeat(6);
    for i in 1..=3 {
        for m in [
            Message::user(format!("question {i}{detail}")),
            Message::assistant(format!("answer {i}{detail}")),
        ] {
            svc.append_message(&owner(), &s.id, m).await.unwrap();
        }
    }
    let spec = |shadow: &str| -> session_compaction::StrategySpec {
        serde_json::from_value(serde_json::json!({
            "strategy": "summarize", "keep": 1, "shadow_prompt": shadow
        }))
        .unwrap()
    };
    let blank = spec("  ").compactor().err().map(|e| e.kind());
    assert_eq!(blank, Some(session_core::ErrorKind::InvalidInput));
    let compactor = spec("Where did we leave off?").compactor().unwrap();
    let done = svc
        .compact(&owner(), &s.id, compactor.as_ref())
        .await
        .unwrap();
    assert!(done.compacted, "{done:?}");
    let context = repo.all_events(&s.id, EventView::Context).await.unwrap();
    assert!(context[0].is_synthetic());
    assert_eq!(context[0].message.text(), "Where did we leave off?");
}
