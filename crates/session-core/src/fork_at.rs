//! Where a fork branches off, and the metadata keys that name a fork's
//! parent: what a query filters forks by, below the fork planning itself.

use crate::ids::InvocationId;

/// The metadata key naming the session a fork was made from.
pub const FORKED_FROM: &str = "forked_from";
/// The metadata key holding the last seq of the source a fork holds.
pub const FORKED_AT_SEQ: &str = "forked_at_seq";

/// Where a fork branches off its source.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ForkAt {
    /// After the event with this seq: the fork holds it and everything before.
    Seq(u64),
    /// Before the first event of this invocation: the point to run that turn again differently.
    Invocation(InvocationId),
    /// After the source's latest event: a copy of the whole session.
    Latest,
}
