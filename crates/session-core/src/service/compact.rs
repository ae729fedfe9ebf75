//! Compaction through the service: the [`Compactor`] seam a compaction
//! policy fills, and the [`Compacted`] report every face answers with.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::repository::SessionRepository;
use crate::session::Session;

/// What compacts a session's context: a strategy with its trigger and
/// summarizer (`session-compaction`'s `CompactionPolicy` and its specs).
/// The service checks the owner and hands the session over; the compactor
/// reads the context, plans, and swaps it in by compare-and-swap.
#[async_trait]
pub trait Compactor: Send + Sync {
    /// Compacts `session`'s context in `repository`: what it did, or
    /// `compacted: false` and the reason when nothing had to go; a writer
    /// that kept getting in between is `Conflict` and nothing changed.
    async fn compact(
        &self,
        repository: &dyn SessionRepository,
        session: Session,
    ) -> Result<Compacted>;
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
    /// The strategy that ran (`summarize`, `token-budget`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// Context events before (0 when nothing was compacted).
    pub events_before: usize,
    /// Context events after (0 when nothing was compacted).
    pub events_after: usize,
    /// Context tokens before.
    pub tokens_before: u64,
    /// Context tokens after.
    pub tokens_after: u64,
    /// The summary written, for summarizing strategies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The session's version after (unchanged when nothing was compacted).
    pub version: u64,
    /// When the context is still over the strategy's budget (tokens,
    /// events or turns), by how much and why: a budget is met or this
    /// says so, never silently overshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shortfall: Option<BudgetShortfall>,
}

/// What a budget counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum BudgetUnit {
    /// Context tokens (`token_budget`).
    Tokens,
    /// Context events (`sliding_window`).
    Events,
    /// Turns (`turn_window`).
    Turns,
}

/// A context left over its budget after a compaction, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BudgetShortfall {
    /// What the budget counts.
    pub unit: BudgetUnit,
    /// The budget.
    pub budget: u64,
    /// What the context holds after the compaction.
    pub after: u64,
    /// How far over the budget it is (`after - budget`).
    pub over_by: u64,
    /// Why the rest could not go (the pinned system messages, the newest
    /// step, a tool call waiting for its result).
    pub reason: String,
}

impl BudgetShortfall {
    /// The shortfall of a context holding `after` against `budget`, or
    /// `None` when it fits.
    pub fn of(
        unit: BudgetUnit,
        budget: u64,
        after: u64,
        reason: impl FnOnce() -> String,
    ) -> Option<Self> {
        (after > budget).then(|| Self {
            unit,
            budget,
            after,
            over_by: after.saturating_sub(budget),
            reason: reason(),
        })
    }
}

impl std::fmt::Display for BudgetShortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let unit = match self.unit {
            BudgetUnit::Tokens => "tokens",
            BudgetUnit::Events => "events",
            BudgetUnit::Turns => "turns",
        };
        write!(
            f,
            "{} {unit} over the budget of {} ({} {unit} left): {}",
            self.over_by, self.budget, self.after, self.reason
        )
    }
}
