//! Compaction policies as the service's [`Compactor`]: what every face
//! hands `SessionService::compact`, so a compaction runs the same way
//! from Rust, HTTP, MCP, the bindings and the CLI.

use async_trait::async_trait;
use session_core::{Compacted, Compactor, Session, SessionError, SessionRepository};

use crate::policy::{CompactionOutcome, CompactionPolicy};
use crate::spec::session_error;

/// A policy that compacts only when its trigger fires, for the context's
/// token count scaled by a calibration factor (1 by default): what an
/// agent runs after recording a message. [`CompactionPolicy`] itself, as a
/// [`Compactor`], compacts now whatever the trigger says.
#[derive(Debug, Clone)]
pub struct WhenTriggered {
    policy: CompactionPolicy,
    factor: f64,
}

impl WhenTriggered {
    /// Scales the context's token count by `factor` (the provider's count
    /// over the estimate, as [`crate::UsageCalibration`] learns it) before
    /// the trigger sees it.
    pub fn calibrated(mut self, factor: f64) -> Self {
        self.factor = factor;
        self
    }
}

impl CompactionPolicy {
    /// This policy as a [`Compactor`] that compacts only when the trigger fires.
    pub fn when_triggered(self) -> WhenTriggered {
        WhenTriggered {
            policy: self,
            factor: 1.0,
        }
    }
}

#[async_trait]
impl Compactor for CompactionPolicy {
    async fn compact(
        &self,
        repository: &dyn SessionRepository,
        session: Session,
    ) -> Result<Compacted, SessionError> {
        compact_with(self, None, repository, session).await
    }
}

#[async_trait]
impl Compactor for WhenTriggered {
    async fn compact(
        &self,
        repository: &dyn SessionRepository,
        session: Session,
    ) -> Result<Compacted, SessionError> {
        compact_with(&self.policy, Some(self.factor), repository, session).await
    }
}

/// Runs `policy` on `session` (only when its trigger fires for the token
/// count scaled by `trigger_factor`, when given) and reports what it did.
async fn compact_with(
    policy: &CompactionPolicy,
    trigger_factor: Option<f64>,
    repository: &dyn SessionRepository,
    session: Session,
) -> Result<Compacted, SessionError> {
    let at = Start::of(&session);
    let outcome = match trigger_factor {
        None => policy.run(repository, session, None).await,
        Some(factor) => policy.if_triggered(repository, session, factor).await,
    }
    .map_err(session_error)?;
    at.report(policy, repository, outcome).await
}

/// The session as the compaction found it.
struct Start {
    id: session_core::SessionId,
    version: u64,
    tokens: u64,
}

impl Start {
    fn of(session: &Session) -> Self {
        Self {
            id: session.id.clone(),
            version: session.version,
            tokens: session.context_tokens,
        }
    }

    /// The outcome as the service reports it: a lost race (after every
    /// attempt the policy makes) is a `Conflict`, nothing changed.
    async fn report(
        self,
        policy: &CompactionPolicy,
        repository: &dyn SessionRepository,
        outcome: CompactionOutcome,
    ) -> Result<Compacted, SessionError> {
        match outcome {
            CompactionOutcome::Compacted(r) => Ok(Compacted {
                compacted: true,
                reason: None,
                strategy: Some(policy.strategy_name().to_owned()),
                events_before: r.metrics.events_before,
                events_after: r.metrics.events_after,
                tokens_before: r.metrics.tokens_before,
                tokens_after: r.metrics.tokens_after,
                summary: r.summary,
                version: r.version.unwrap_or(self.version),
                shortfall: r.shortfall,
            }),
            CompactionOutcome::LostRace { read_version } => Err(SessionError::Conflict {
                id: self.id.to_string(),
                expected: read_version,
                actual: repository.event_version(&self.id).await?,
            }),
            CompactionOutcome::NotNeeded { reason, shortfall } => Ok(Compacted {
                compacted: false,
                reason: Some(reason),
                strategy: Some(policy.strategy_name().to_owned()),
                events_before: 0,
                events_after: 0,
                tokens_before: self.tokens,
                tokens_after: self.tokens,
                summary: None,
                version: self.version,
                shortfall,
            }),
        }
    }
}
