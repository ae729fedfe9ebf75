//! A compaction asked for by name and parameters (the server's and the
//! Python package's `compact`): which strategy, with what, and what it did.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use session_core::{SessionError, SessionId, SessionRepository};

use crate::{
    CompactionError, CompactionOutcome, CompactionPolicy, CompactionStrategy, ExtractiveSummarizer,
    RecursiveSummarization, SlidingWindow, TokenBudget, ToolResultClearing, Trigger, TurnWindow,
};

/// Which strategy compacts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum StrategyName {
    /// Keep the last `max_events` events.
    SlidingWindow,
    /// Keep the last `max_turns` turns.
    TurnWindow,
    /// Keep the newest events within `max_tokens`.
    TokenBudget,
    /// Summarize all but the last `keep` turns into a summary turn.
    Summarize,
    /// Clear the text of old tool results, keeping the last `keep`.
    ToolResultClearing,
}

/// A strategy and its parameters.
///
/// ```
/// use session_compaction::{StrategyName, StrategySpec};
/// let spec: StrategySpec = serde_json::from_str(r#"{"strategy": "summarize", "keep": 2}"#).unwrap();
/// assert_eq!(spec.strategy, StrategyName::Summarize);
/// assert!(spec.build().is_ok());
/// let bad: StrategySpec = serde_json::from_str(r#"{"strategy": "sliding_window"}"#).unwrap();
/// assert!(bad.build().is_err(), "max_events is needed");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct StrategySpec {
    /// The strategy.
    pub strategy: StrategyName,
    /// `sliding_window`: events kept.
    #[serde(default)]
    pub max_events: Option<usize>,
    /// `turn_window`: turns kept.
    #[serde(default)]
    pub max_turns: Option<usize>,
    /// `token_budget`: tokens the context may hold.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// `summarize`: turns kept verbatim (default 2); `tool_result_clearing`:
    /// tool results kept (default 3).
    #[serde(default)]
    pub keep: Option<usize>,
}

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Compacted {
    /// Whether the context changed.
    pub compacted: bool,
    /// Why not, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Context events before.
    pub events_before: usize,
    /// Context events after.
    pub events_after: usize,
    /// Context tokens before.
    pub tokens_before: u64,
    /// Context tokens after.
    pub tokens_after: u64,
    /// The summary written, for `summarize`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

fn needed<T>(value: Option<T>, field: &str) -> Result<T, SessionError> {
    value.ok_or_else(|| SessionError::invalid(field, "this strategy needs it"))
}

/// A compaction failure as the session error it is: the store's own, or
/// the summarizer's as a `Backend` error.
pub fn session_error(e: CompactionError) -> SessionError {
    match e {
        CompactionError::Session(e) => e,
        other => SessionError::backend("summarizer", other),
    }
}

impl StrategySpec {
    /// The strategy, offline (the extractive summarizer for `summarize`);
    /// `InvalidInput` naming a parameter the strategy needs and lacks.
    pub fn build(&self) -> Result<Arc<dyn CompactionStrategy>, SessionError> {
        Ok(match self.strategy {
            StrategyName::SlidingWindow => Arc::new(SlidingWindow {
                max_events: needed(self.max_events, "max_events")?,
            }),
            StrategyName::TurnWindow => Arc::new(TurnWindow {
                max_turns: needed(self.max_turns, "max_turns")?,
            }),
            StrategyName::TokenBudget => Arc::new(TokenBudget {
                max_tokens: needed(self.max_tokens, "max_tokens")?,
            }),
            StrategyName::Summarize => Arc::new(RecursiveSummarization::new(
                self.keep.unwrap_or(2),
                Arc::new(ExtractiveSummarizer::default()),
            )),
            StrategyName::ToolResultClearing => Arc::new(ToolResultClearing {
                keep_last: self.keep.unwrap_or(3),
                ..Default::default()
            }),
        })
    }

    /// Compacts session `id` now with this strategy. A writer that got in
    /// between is a `Conflict` (nothing changed); nothing to compact is
    /// `compacted: false` with the reason.
    pub async fn compact_now(
        &self,
        repo: &dyn SessionRepository,
        id: &SessionId,
    ) -> Result<Compacted, SessionError> {
        let policy = CompactionPolicy::new(Trigger::TurnCount(0), self.build()?);
        let outcome = policy.compact_now(repo, id).await.map_err(session_error)?;
        Ok(match outcome {
            CompactionOutcome::Compacted(r) => Compacted {
                compacted: true,
                reason: None,
                events_before: r.metrics.events_before,
                events_after: r.metrics.events_after,
                tokens_before: r.metrics.tokens_before,
                tokens_after: r.metrics.tokens_after,
                summary: r.summary,
            },
            CompactionOutcome::LostRace { read_version } => {
                let actual = repo.event_version(id).await?;
                return Err(SessionError::Conflict {
                    id: id.to_string(),
                    expected: read_version,
                    actual,
                });
            }
            CompactionOutcome::NotNeeded { reason } => {
                let tokens = repo.get(id).await?.context_tokens;
                Compacted {
                    compacted: false,
                    reason: Some(reason),
                    events_before: 0,
                    events_after: 0,
                    tokens_before: tokens,
                    tokens_after: tokens,
                    summary: None,
                }
            }
        })
    }
}
