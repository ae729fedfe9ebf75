//! Measuring a summarizer on the corpus: tokens before and after
//! `summarize --keep 2`, and where each planted fact can still be found.
//! Shared by `tests/corpus.rs` and `benches/compaction.rs`.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use session_compaction::{
    CompactionOutcome, CompactionPolicy, ExtractiveSummarizer, RecursiveSummarization, Summarizer,
    Trigger,
};
use session_core::{
    CreateSessionRequest, DefaultSessionService, EventView, InMemoryRepository, Owner, SearchQuery,
    SessionId, SessionRepository, SessionRepositoryExt, SessionService,
};
use session_testkit::corpus::Conversation;

/// What summarizing one conversation did.
#[derive(Debug, Clone)]
pub(crate) struct CorpusFigures {
    /// The conversation.
    pub name: String,
    /// Turns in it.
    pub turns: usize,
    /// Context tokens before compacting.
    pub tokens_before: u64,
    /// Context tokens after.
    pub tokens_after: u64,
    /// Planted facts.
    pub facts: usize,
    /// Facts whose needle is in the summary text.
    pub in_summary: Vec<String>,
    /// Facts a keyword search of the archive finds.
    pub by_recall: usize,
    /// The summary text.
    pub summary: String,
}

impl CorpusFigures {
    /// Tokens after ÷ tokens before.
    #[allow(clippy::cast_precision_loss)] // token counts
    pub(crate) fn ratio(&self) -> f64 {
        self.tokens_after as f64 / self.tokens_before.max(1) as f64
    }

    /// One row of the figures table (markdown).
    pub(crate) fn row(&self) -> String {
        format!(
            "| {} | {} | {} | {} | {:.1} % | {}/{} | {}/{} |",
            self.name,
            self.turns,
            self.tokens_before,
            self.tokens_after,
            self.ratio() * 100.0,
            self.in_summary.len(),
            self.facts,
            self.by_recall,
            self.facts
        )
    }
}

/// The table's header (markdown).
pub(crate) const HEADER: &str = "| conversation | turns | tokens before | tokens after | after/before | facts in summary | facts by recall |\n|---|---|---|---|---|---|---|";

/// A fresh in-memory store and service with an empty session of `c`'s app and user.
pub(crate) async fn empty_session_for(
    c: &Conversation,
) -> (
    Arc<dyn SessionRepository>,
    Arc<dyn SessionService>,
    Owner,
    session_core::Session,
) {
    let repo: Arc<dyn SessionRepository> = InMemoryRepository::new().shared();
    let service: Arc<dyn SessionService> = Arc::new(DefaultSessionService::new(repo.clone()));
    let owner = Owner::parse(&c.app, &c.user).unwrap();
    let request = CreateSessionRequest::builder(&c.user)
        .app(&c.app)
        .build()
        .unwrap();
    let session = service.create(request).await.unwrap();
    (repo, service, owner, session)
}

/// Loads `c` into a fresh in-memory store and summarizes it, keeping 2 turns.
pub(crate) async fn summarize_keep_2(
    c: &Conversation,
    summarizer: Arc<dyn Summarizer>,
) -> CorpusFigures {
    let (repo, service, owner, session) = empty_session_for(c).await;
    for batch in c.events.chunks(500) {
        service
            .append_events(&owner, &session.id, batch.to_vec())
            .await
            .unwrap();
    }
    let before = repo.get(&session.id).await.unwrap().context_tokens;
    let policy = CompactionPolicy::new(
        Trigger::token_count(1).unwrap(),
        Arc::new(RecursiveSummarization::new(2, summarizer)),
    );
    let outcome = policy
        .compact_now(repo.as_ref(), &session.id)
        .await
        .unwrap();
    assert!(
        matches!(outcome, CompactionOutcome::Compacted(_)),
        "{}: {outcome:?}",
        c.name
    );
    let after = repo.get(&session.id).await.unwrap().context_tokens;
    let summary = summary_text(repo.as_ref(), &session.id).await;
    let in_summary = c
        .facts
        .iter()
        .filter(|f| f.is_in(&summary))
        .map(|f| f.id.clone())
        .collect();
    let mut by_recall = 0;
    for f in &c.facts {
        let query = SearchQuery::in_session(session.id.to_string(), f.needle.as_str());
        if !service
            .search(&owner, &query)
            .await
            .unwrap()
            .items
            .is_empty()
        {
            by_recall += 1;
        }
    }
    CorpusFigures {
        name: c.name.clone(),
        turns: c.turns(),
        tokens_before: before,
        tokens_after: after,
        facts: c.facts.len(),
        in_summary,
        by_recall,
        summary,
    }
}

async fn summary_text(repo: &dyn SessionRepository, id: &SessionId) -> String {
    repo.all_events(id, EventView::Context)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.is_synthetic() && e.role() == session_core::Role::Assistant)
        .map(|e| e.message.text().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The offline summarizer as `summarize` uses it.
pub(crate) fn extractive() -> Arc<dyn Summarizer> {
    Arc::new(ExtractiveSummarizer::new())
}
