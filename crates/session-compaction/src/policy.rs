//! Wiring compaction into a session's life: checked after appends, run now, or on a context-length error.

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use session_core::BudgetShortfall;
use session_core::{
    AppendHook, AppendOutcome, EventView, Owner, Session, SessionEvent, SessionId,
    SessionRepository, SessionRepositoryExt,
};

use crate::error::CompactionError;
use crate::strategy::{
    CompactionNotice, CompactionRequest, CompactionResult, CompactionStrategy, Trigger, NOTICE_KEY,
};

/// The pre-compaction flush (Open Astra's): sees the context about to be
/// compacted before the summarizer runs, and may save what matters
/// elsewhere (the events that leave stay in the archive).
#[async_trait]
pub trait BeforeCompaction: Send + Sync {
    /// Called exactly once per compaction, before the strategy (and its
    /// summarizer) runs; not again when a lost compare-and-swap makes the
    /// compaction plan again over the newer context.
    async fn before_compaction(&self, session: &Session, context: &[SessionEvent]);
}

/// How many times a compaction plans over a newer context after losing the
/// compare-and-swap to a concurrent write before it reports the lost race.
pub const COMPACTION_ATTEMPTS: usize = 3;

/// What a compaction attempt came to.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum CompactionOutcome {
    /// The trigger did not fire, or the strategy had nothing to remove.
    NotNeeded {
        /// Why, in a sentence a user can act on ("the context holds 3
        /// turns, within the limit of 10", "below the trigger ...").
        reason: String,
        /// When the context is over the strategy's budget and nothing
        /// could go: by how much and why.
        shortfall: Option<BudgetShortfall>,
    },
    /// The context was replaced.
    Compacted(CompactionResult),
    /// Someone wrote between reading and replacing: nothing changed (no
    /// event is ever lost); the next append will check again.
    LostRace {
        /// The version the compaction read.
        read_version: u64,
    },
}

/// A trigger plus a strategy, checked after every append that wrote something.
///
/// ```
/// use std::sync::Arc;
/// use session_compaction::{CompactionPolicy, TurnWindow, Trigger};
/// use session_core::{DefaultSessionService, InMemoryRepository};
///
/// let policy = CompactionPolicy::new(Trigger::TurnCount(20), Arc::new(TurnWindow::new(10).unwrap()));
/// let service = DefaultSessionService::new(InMemoryRepository::new().shared())
///     .with_append_hook(Arc::new(policy));
/// ```
#[derive(Clone)]
pub struct CompactionPolicy {
    trigger: Trigger,
    strategy: Arc<dyn CompactionStrategy>,
    before: Option<Arc<dyn BeforeCompaction>>,
    background: Option<Arc<dyn SessionRepository>>,
}

impl std::fmt::Debug for CompactionPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactionPolicy")
            .field("trigger", &self.trigger)
            .field("strategy", &self.strategy.name())
            .field("background", &self.background.is_some())
            .finish_non_exhaustive()
    }
}

impl CompactionPolicy {
    /// Compacts with `strategy` whenever `trigger` fires; inline by default.
    pub fn new(trigger: Trigger, strategy: Arc<dyn CompactionStrategy>) -> Self {
        Self {
            trigger,
            strategy,
            before: None,
            background: None,
        }
    }

    /// Open Astra's compaction: at 70 % of `max_context_tokens`, the 10
    /// newest messages stay verbatim and the rest become a summary of
    /// about 500 words ([`crate::RecursiveSummarization::open_astra`]).
    pub fn open_astra(max_context_tokens: u64, summarizer: Arc<dyn crate::Summarizer>) -> Self {
        Self::new(
            Trigger::context_fraction(max_context_tokens),
            Arc::new(crate::RecursiveSummarization::open_astra(summarizer)),
        )
    }

    /// ADK's events compaction: every `interval` new invocations, the older
    /// ones are summarized with `summarizer` and the newest `overlap` stay
    /// verbatim (one invocation per turn, as agent frameworks run them).
    pub fn every_invocations(
        interval: usize,
        overlap: usize,
        summarizer: Arc<dyn crate::Summarizer>,
    ) -> Result<Self, CompactionError> {
        if interval == 0 {
            return Err(CompactionError::invalid("interval", "must be at least 1"));
        }
        Ok(Self::new(
            Trigger::InvocationCount(interval.saturating_add(overlap)),
            Arc::new(crate::RecursiveSummarization::new(overlap, summarizer)),
        ))
    }

    /// Runs the pre-compaction flush before every compaction.
    pub fn with_before_compaction(mut self, hook: Arc<dyn BeforeCompaction>) -> Self {
        self.before = Some(hook);
        self
    }

    /// Compacts on a background task over `repository` instead of inside the append call.
    pub fn in_background(mut self, repository: Arc<dyn SessionRepository>) -> Self {
        self.background = Some(repository);
        self
    }

    /// The trigger.
    pub fn trigger(&self) -> &Trigger {
        &self.trigger
    }

    /// The strategy's name.
    pub fn strategy_name(&self) -> &'static str {
        self.strategy.name()
    }

    /// Compacts if the trigger fires.
    pub async fn maybe_compact(
        &self,
        repository: &dyn SessionRepository,
        session_id: &SessionId,
    ) -> Result<CompactionOutcome, CompactionError> {
        self.maybe_compact_calibrated(repository, session_id, 1.0)
            .await
    }

    /// Compacts if the trigger fires for the context's token count scaled by
    /// `factor` (the provider's count over the estimate, as
    /// [`crate::UsageCalibration`] learns it).
    pub async fn maybe_compact_calibrated(
        &self,
        repository: &dyn SessionRepository,
        session_id: &SessionId,
        factor: f64,
    ) -> Result<CompactionOutcome, CompactionError> {
        let session = repository.get(session_id).await?;
        self.if_triggered(repository, session, factor).await
    }

    /// Compacts `session` if the trigger fires for its context's token
    /// count scaled by `factor`.
    pub(crate) async fn if_triggered(
        &self,
        repository: &dyn SessionRepository,
        session: Session,
        factor: f64,
    ) -> Result<CompactionOutcome, CompactionError> {
        let tokens = crate::calibration::scale(session.context_tokens, factor);
        if !self.trigger.needs_events() && !self.trigger.fires(tokens, 0, 0) {
            return Ok(CompactionOutcome::NotNeeded {
                reason: format!(
                    "below the trigger ({:?}) at {tokens} context tokens",
                    self.trigger
                ),
                shortfall: None,
            });
        }
        self.run(repository, session, Some(factor)).await
    }

    /// Compacts now, whatever the trigger says (the seeds' forceCompaction).
    pub async fn compact_now(
        &self,
        repository: &dyn SessionRepository,
        session_id: &SessionId,
    ) -> Result<CompactionOutcome, CompactionError> {
        let session = repository.get(session_id).await?;
        self.run(repository, session, None).await
    }

    /// Runs a model call; if it fails with a context-length error
    /// (`is_context_length`), compacts now and retries the call once.
    pub async fn retry_after_compaction<T, E, F, Fut>(
        &self,
        repository: &dyn SessionRepository,
        session_id: &SessionId,
        mut call: F,
        is_context_length: impl Fn(&E) -> bool,
    ) -> Result<Result<T, E>, CompactionError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        match call().await {
            Err(e) if is_context_length(&e) => {
                tracing::info!(
                    %session_id,
                    "context length exceeded: compacting and retrying once"
                );
                self.compact_now(repository, session_id).await?;
                Ok(call().await)
            }
            other => Ok(other),
        }
    }

    pub(crate) async fn run(
        &self,
        repository: &dyn SessionRepository,
        mut session: Session,
        trigger_factor: Option<f64>,
    ) -> Result<CompactionOutcome, CompactionError> {
        let mut flushed = false;
        let mut attempt = 1;
        loop {
            let read_version = session.version;
            let id = session.id.clone();
            match self
                .attempt(repository, session, trigger_factor, &mut flushed)
                .await?
            {
                CompactionOutcome::LostRace { .. } if attempt < COMPACTION_ATTEMPTS => {
                    attempt += 1;
                    tracing::info!(session_id = %id, read_version, attempt, "compaction lost a race; planning again over the newer context");
                    session = repository.get(&id).await?;
                }
                outcome => return Ok(outcome),
            }
        }
    }

    /// One plan over the session's current context: trigger, flush (once
    /// per compaction: `flushed`), strategy, compare-and-swap.
    async fn attempt(
        &self,
        repository: &dyn SessionRepository,
        session: Session,
        trigger_factor: Option<f64>,
        flushed: &mut bool,
    ) -> Result<CompactionOutcome, CompactionError> {
        let read_version = session.version;
        let context = repository
            .all_events(&session.id, EventView::Context)
            .await?;
        let mut request = CompactionRequest::new(session, context);
        let check_trigger = trigger_factor.is_some();
        let estimated = request.token_count;
        if let Some(factor) = trigger_factor {
            request.token_count = crate::calibration::scale(estimated, factor);
        }
        let fires = !check_trigger || self.trigger.fires_for(&request);
        request.token_count = estimated;
        if !fires {
            return Ok(CompactionOutcome::NotNeeded {
                reason: format!(
                    "below the trigger ({:?}): {} tokens, {} events, {} turns",
                    self.trigger, request.token_count, request.event_count, request.turn_count
                ),
                shortfall: None,
            });
        }
        if let Some(hook) = self.before.as_ref().filter(|_| !*flushed) {
            hook.before_compaction(&request.session, &request.events)
                .await;
            *flushed = true;
        }
        let mut result = self.strategy.compact(&request).await?;
        if result.is_noop() {
            let reason = result.unchanged_because.take().unwrap_or_else(|| {
                format!(
                    "the {} strategy found nothing to remove",
                    self.strategy.name()
                )
            });
            return Ok(CompactionOutcome::NotNeeded {
                reason,
                shortfall: result.shortfall,
            });
        }
        if result.metrics.tokens_after >= result.metrics.tokens_before {
            let m = result.metrics;
            return Ok(CompactionOutcome::NotNeeded {
                reason: format!(
                    "{} would not make the context smaller ({} tokens before, {} after), so nothing was written",
                    self.strategy.name(),
                    m.tokens_before,
                    m.tokens_after
                ),
                shortfall: result.shortfall,
            });
        }
        result.notice = Some(CompactionNotice {
            strategy: self.strategy.name().to_owned(),
            trigger: if check_trigger {
                format!("{:?}", self.trigger)
            } else {
                "requested".to_owned()
            },
            events_archived: result.metrics.archived,
            tokens_before: result.metrics.tokens_before,
            tokens_after: result.metrics.tokens_after,
        });
        let context = mark_replacements(&request.events, &result);
        let replaced = repository
            .replace_context(&request.session.id, context, read_version)
            .await?;
        if replaced {
            // A successful replace bumps the version by exactly one.
            result.version = Some(session_core::next_version(read_version)?);
            tracing::info!(
                session_id = %request.session.id,
                strategy = self.strategy.name(),
                events_before = result.metrics.events_before,
                events_after = result.metrics.events_after,
                tokens_before = result.metrics.tokens_before,
                tokens_after = result.metrics.tokens_after,
                "compacted"
            );
            Ok(CompactionOutcome::Compacted(result))
        } else {
            tracing::info!(session_id = %request.session.id, read_version, "compaction lost a race; nothing changed");
            Ok(CompactionOutcome::LostRace { read_version })
        }
    }
}

#[async_trait]
impl AppendHook for CompactionPolicy {
    async fn after_append(
        &self,
        repository: &dyn SessionRepository,
        _owner: &Owner,
        session_id: &SessionId,
        _outcome: &AppendOutcome,
    ) {
        if let Some(repo) = &self.background {
            let policy = self.clone();
            let repo = repo.clone();
            let id = session_id.clone();
            tokio::spawn(async move {
                if let Err(e) = policy.maybe_compact(repo.as_ref(), &id).await {
                    tracing::warn!(session_id = %id, error = %session_core::ErrorReport(&e), "background compaction failed; the context is unchanged");
                }
            });
            return;
        }
        if let Err(e) = self.maybe_compact(repository, session_id).await {
            tracing::warn!(%session_id, error = %session_core::ErrorReport(&e), "compaction failed; the context is unchanged");
        }
    }
}

/// The new context with every event the compaction added (a summary turn,
/// a placeholder) marked with the seqs of the events that left with it
/// ([`session_core::REPLACES_KEY`]), so a rewind that removes it can bring
/// them back.
fn mark_replacements(before: &[SessionEvent], result: &CompactionResult) -> Vec<SessionEvent> {
    let known: std::collections::HashSet<&str> = before.iter().map(|e| e.id.as_str()).collect();
    let replaced: Vec<u64> = result.archived.iter().map(|e| e.seq).collect();
    let notice = result
        .notice
        .as_ref()
        .and_then(|n| serde_json::to_value(n).ok());
    let mut context = result.context.clone();
    for e in &mut context {
        if !known.contains(e.id.as_str()) {
            e.metadata.insert(
                session_core::REPLACES_KEY.to_owned(),
                serde_json::json!(replaced),
            );
            if let Some(n) = &notice {
                e.metadata.insert(NOTICE_KEY.to_owned(), n.clone());
            }
        }
    }
    context
}
