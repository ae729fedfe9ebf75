//! [`AppendHook`]: the seam that runs after every append that wrote something.

use async_trait::async_trait;

use crate::ids::SessionId;
use crate::outcome::AppendOutcome;
use crate::owner::Owner;
use crate::repository::SessionRepository;

/// Runs after every append that wrote something: the seam where a
/// compaction policy plugs in (see `session-compaction`).
///
/// The append is already durable when the hook runs; a hook handles its
/// own failures (and should log them), it cannot undo the append.
#[async_trait]
pub trait AppendHook: Send + Sync {
    /// Called with the session's id, its owner and what the append did.
    async fn after_append(
        &self,
        repository: &dyn SessionRepository,
        owner: &Owner,
        session_id: &SessionId,
        outcome: &AppendOutcome,
    );
}
