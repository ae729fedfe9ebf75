//! What an append or a context replace changes: the new events, the
//! merged state changes, and the one head change every store writes.

use crate::state::{ScopedDelta, SharedDelta, StateMap};

/// One new event of a plan: its index in the batch and the seq it gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewEvent {
    /// Index into [`EventBatch::events`](super::EventBatch::events) and
    /// [`EventBatch::bodies`](super::EventBatch::bodies).
    pub index: usize,
    /// The seq assigned to it.
    pub seq: u64,
}

/// State changes of a write, merged over its new events in order: a later
/// value for a key wins and `null` stays, so that applying the merge once
/// equals applying each event's delta in turn.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StateChanges {
    /// Session-scope keys.
    pub session: StateMap,
    /// `app:` and `user:` keys.
    pub shared: SharedDelta,
}

impl StateChanges {
    /// Merges one new event's state delta in.
    pub(crate) fn add(&mut self, delta: Option<&StateMap>) {
        if let Some(delta) = delta {
            let split = ScopedDelta::split(delta);
            for (k, v) in split.session {
                self.session.insert(k, v);
            }
            self.shared.add(&ScopedDelta {
                session: StateMap::new(),
                user: split.user,
                app: split.app,
            });
        }
    }

    /// Whether no scope changes.
    pub fn is_empty(&self) -> bool {
        self.session.is_empty() && self.shared.is_empty()
    }
}

/// How a write changes the context's token estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextTokens {
    /// New events joined the end of the context: the stored estimate grows by this.
    Add(u64),
    /// The context was replaced: this is its new estimate.
    Set(u64),
}

impl ContextTokens {
    /// The estimate after the write, from the `stored` one.
    pub fn after(self, stored: u64) -> u64 {
        match self {
            Self::Add(n) => stored.saturating_add(n),
            Self::Set(n) => n,
        }
    }
}

/// What an append ([`AppendPlan::head_change`](super::AppendPlan::head_change))
/// or a context replace ([`ContextPlan::head_change`](super::ContextPlan::head_change))
/// changes in the session's head: one shape, so a store writes both the
/// same way. What only a store knows (its next context position, its
/// clock) it adds when it writes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeadChange<'a> {
    /// The version after the write.
    pub version: u64,
    /// The highest seq after the write.
    pub last_seq: u64,
    /// The change to the context's token estimate.
    pub context_tokens: ContextTokens,
    /// The events written to the archive, in seq order.
    pub new: &'a [NewEvent],
    /// Their stored sizes, summed (what the session's `event_bytes` grows by).
    pub added_bytes: u64,
    /// The state changes of the new events.
    pub state: &'a StateChanges,
}

impl HeadChange<'_> {
    /// How many events join the archive (what the session's `event_count` grows by).
    pub fn added(&self) -> usize {
        self.new.len()
    }

    /// [`HeadChange::added`] as a count.
    pub fn added_count(&self) -> u64 {
        u64::try_from(self.new.len()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_add_to_or_replace_the_stored_estimate() {
        assert_eq!(ContextTokens::Add(3).after(4), 7);
        assert_eq!(ContextTokens::Add(3).after(u64::MAX), u64::MAX);
        assert_eq!(ContextTokens::Set(3).after(4), 3);
    }
}
