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
}
