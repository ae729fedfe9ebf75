//! What the writes of a store answer: appends (with what a service's
//! persist filters did to their events), rewinds and imports.

use serde::{Deserialize, Serialize};

use crate::persist_filter::FilteredEvent;

/// What an append did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AppendOutcome {
    /// The session's version after the append (unchanged if nothing new was written).
    pub version: u64,
    /// The seq of each event of the batch, in batch order (existing seqs for re-sent ids).
    pub seqs: Vec<u64>,
    /// How many events were new.
    pub written: usize,
    /// The events of the batch a service's persist filters dropped or
    /// redacted (`seqs` then holds only the stored ones); always empty
    /// from a repository.
    pub filtered: Vec<FilteredEvent>,
}

/// What a rewind did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RewindOutcome {
    /// The session's version after the rewind.
    pub version: u64,
    /// How many events left the archive.
    pub removed: usize,
}

/// What an import did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ImportOutcome {
    /// The session was written.
    Imported,
    /// The store already held the session at the same or a later version: nothing changed.
    Unchanged,
}
