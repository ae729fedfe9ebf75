//! Write planning: the repository contract, decided once, in core.
//!
//! A backend reads what the write depends on (the session's [`Head`], and
//! which ids of the batch it already [`Stored`]), asks this module for the
//! plan, and persists the plan in one transaction, script or request. Seq
//! assignment, idempotency, state-delta merging, version bumps, the
//! compare-and-swap decision and the typed errors all live here, so every
//! store answers the same way; the in-memory reference store uses the same
//! planner.
//!
//! ```
//! use std::collections::HashMap;
//! use session_core::plan::{AppendPlan, EventBatch, Head};
//! use session_core::{Limits, Message, SessionEvent, SessionId, SessionStatus};
//!
//! let head = Head::new(SessionId::new("s1").unwrap(), 3, 7, SessionStatus::Active);
//! let batch = EventBatch::new(vec![SessionEvent::new(Message::user("hi"))], &Limits::default()).unwrap();
//! let plan = AppendPlan::new(&head, &batch, &HashMap::new()).unwrap();
//! assert_eq!(plan.seqs, vec![4]);
//! assert_eq!(plan.version, 8);
//! ```

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use crate::batch::{prepare_events, size_events};
use crate::context_log::ContextChange;
use crate::error::{Result, SessionError};
use crate::event::{check_unique_ids, SessionEvent};
use crate::ids::{InvocationId, SessionId};
use crate::outcome::AppendOutcome;
use crate::session::{NewSession, Session, SessionStatus, SessionUpdate};
use crate::state::{ScopedDelta, SharedDelta};
use crate::validate::{check_seq_room, next_version, Limits};
use crate::StateMap;

mod change;
mod head;
mod import;
mod remembered;
mod restore;
mod window;
pub use change::{ContextTokens, HeadChange, NewEvent, StateChanges};
pub use head::{Head, OwnerQuota, SessionQuota};
pub use import::ImportPlan;
pub use remembered::{RememberedHeads, DEFAULT_REMEMBERED_HEADS};
pub use restore::{compaction_order, context_at, Restorable, Restore};
pub use window::ReadWindow;

/// Whether a session read for a write may be written: `NotFound` when
/// there is none, `Expired` when its expiry is at or before `now`.
pub fn writable<T>(
    found: Option<(T, Option<DateTime<Utc>>)>,
    id: &SessionId,
    now: DateTime<Utc>,
) -> Result<T> {
    match found {
        None => Err(SessionError::session_not_found(id.as_str())),
        Some((_, Some(at))) if at <= now => Err(SessionError::Expired { id: id.to_string() }),
        Some((head, _)) => Ok(head),
    }
}

/// Whether a session read for a read is visible: `NotFound` when there is
/// none or it has expired at `now`.
pub fn readable<T>(
    found: Option<(T, Option<DateTime<Utc>>)>,
    id: &SessionId,
    now: DateTime<Utc>,
) -> Result<T> {
    match found {
        Some((value, expires)) if expires.is_none_or(|at| at > now) => Ok(value),
        _ => Err(SessionError::session_not_found(id.as_str())),
    }
}

/// An event the session already holds, as a planner needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    /// Its seq.
    pub seq: u64,
    /// Its token estimate.
    pub tokens: u32,
}

/// The events of one append or context replace, checked and normalized by
/// [`prepare_events`] (or [`size_events`]): ids valid, sizes within
/// limits, `temp:` keys stripped. `bodies[i]` is event `i` encoded as JSON
/// without seq and session id, for stores that keep the encoding.
#[derive(Debug, Clone)]
pub struct EventBatch {
    /// The events, in batch order.
    pub events: Vec<SessionEvent>,
    /// Each event's JSON encoding; empty for a batch made by
    /// [`EventBatch::sized`].
    pub bodies: Vec<String>,
    /// Each event's stored size: the length in bytes of its encoding.
    pub sizes: Vec<u64>,
    /// The store's per-session quotas, checked by [`AppendPlan`].
    pub quota: SessionQuota,
}

impl EventBatch {
    /// Checks `events` against `limits` and keeps their encodings.
    pub fn new(mut events: Vec<SessionEvent>, limits: &Limits) -> Result<Self> {
        let bodies = prepare_events(&mut events, limits)?;
        let sizes = bodies
            .iter()
            .map(|b| u64::try_from(b.len()).unwrap_or(u64::MAX))
            .collect();
        Ok(Self {
            events,
            bodies,
            sizes,
            quota: SessionQuota::of(limits),
        })
    }

    /// Checks `events` against `limits` and keeps their sizes only, for a
    /// store that keeps the events themselves (no `bodies`).
    pub fn sized(mut events: Vec<SessionEvent>, limits: &Limits) -> Result<Self> {
        let sizes = size_events(&mut events, limits)?;
        Ok(Self {
            events,
            bodies: Vec::new(),
            sizes,
            quota: SessionQuota::of(limits),
        })
    }

    /// The stored size of event `index` (its encoding's length in bytes).
    pub fn stored_bytes(&self, index: usize) -> u64 {
        self.sizes.get(index).copied().unwrap_or(0)
    }

    /// The stored sizes of the `new` events, summed.
    pub fn added_bytes(&self, new: &[NewEvent]) -> u64 {
        new.iter().fold(0u64, |sum, n| {
            sum.saturating_add(self.stored_bytes(n.index))
        })
    }

    /// The distinct ids of the batch, for a store to look up which it holds.
    pub fn ids(&self) -> Vec<&str> {
        if self.events.len() < 2 {
            return self.events.iter().map(|e| e.id.as_str()).collect();
        }
        let mut seen = std::collections::HashSet::new();
        self.events
            .iter()
            .map(|e| e.id.as_str())
            .filter(|id| seen.insert(*id))
            .collect()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

/// What an append writes.
#[derive(Debug, Clone, PartialEq)]
pub struct AppendPlan {
    /// The seq of each batch event, in batch order (held ones keep theirs).
    pub seqs: Vec<u64>,
    /// The events to write, in seq order; each joins the archive and the end of the context.
    pub new: Vec<NewEvent>,
    /// The highest seq after the write.
    pub last_seq: u64,
    /// The version after the write (unchanged when nothing is new).
    pub version: u64,
    /// The state changes of the new events.
    pub state: StateChanges,
    /// The token estimates of the new events, summed.
    pub added_tokens: u64,
    /// The stored sizes of the new events, summed (what the session's
    /// `event_bytes` grows by).
    pub added_bytes: u64,
}

impl AppendPlan {
    /// Plans appending `batch` to a session at `head` holding the `stored` ids of the batch.
    pub fn new(head: &Head, batch: &EventBatch, stored: &HashMap<String, Stored>) -> Result<Self> {
        let mut seqs = Vec::with_capacity(batch.events.len());
        let mut new = Vec::new();
        let mut state = StateChanges::default();
        // Ids repeated within the batch take the seq of their first
        // occurrence; a batch of one event has none to look up.
        let repeats_possible = batch.events.len() > 1;
        let mut assigned: HashMap<&str, u64> = HashMap::new();
        let mut last_seq = head.last_seq;
        let mut added_tokens = 0u64;
        let fresh = batch
            .ids()
            .into_iter()
            .filter(|id| !stored.contains_key(*id))
            .count();
        if fresh > 0 {
            head.check_open()?;
            check_seq_room(head.last_seq, fresh)?;
        }
        let version = if fresh > 0 {
            next_version(head.version)?
        } else {
            head.version
        };
        for (index, e) in batch.events.iter().enumerate() {
            if let Some(s) = stored.get(&e.id) {
                seqs.push(s.seq);
                continue;
            }
            if let Some(seq) = assigned.get(e.id.as_str()) {
                seqs.push(*seq);
                continue;
            }
            // Room for every fresh id was checked above.
            last_seq = last_seq.saturating_add(1);
            if repeats_possible {
                assigned.insert(&e.id, last_seq);
            }
            seqs.push(last_seq);
            new.push(NewEvent {
                index,
                seq: last_seq,
            });
            state.add(e.state_delta.as_ref());
            added_tokens = added_tokens.saturating_add(u64::from(e.token_estimate));
        }
        let added_bytes = batch.added_bytes(&new);
        if fresh > 0 {
            let events = u64::try_from(fresh).unwrap_or(u64::MAX);
            batch.quota.check(head, events, added_bytes)?;
        }
        Ok(Self {
            seqs,
            new,
            last_seq,
            version,
            state,
            added_tokens,
            added_bytes,
        })
    }

    /// Whether the append writes nothing (every event was already held).
    pub fn is_noop(&self) -> bool {
        self.new.is_empty()
    }

    /// What the append changes in the session's head: new events join the
    /// end of the context, so its token estimate grows by theirs.
    pub fn head_change(&self) -> HeadChange<'_> {
        HeadChange {
            version: self.version,
            last_seq: self.last_seq,
            context_tokens: ContextTokens::Add(self.added_tokens),
            new: &self.new,
            added_bytes: self.added_bytes,
            state: &self.state,
        }
    }

    /// What the append reports to its caller.
    pub fn outcome(&self) -> AppendOutcome {
        AppendOutcome {
            version: self.version,
            seqs: self.seqs.clone(),
            written: self.new.len(),
            filtered: Vec::new(),
        }
    }
}

/// What a context compare-and-swap writes.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextPlan {
    /// The new context, as seqs in context order.
    pub context: Vec<u64>,
    /// Events not held yet: written to the archive with these seqs.
    pub new: Vec<NewEvent>,
    /// The highest seq after the write.
    pub last_seq: u64,
    /// The version after the write.
    pub version: u64,
    /// The state changes of the new events.
    pub state: StateChanges,
    /// The token estimate of the new context.
    pub context_tokens: u64,
    /// The highest seq before the write.
    pub before_seq: u64,
    /// The stored sizes of the new events, summed (not checked against the
    /// bytes quota: a replace shrinks what the agent reads).
    pub added_bytes: u64,
}

impl ContextPlan {
    /// Plans replacing the context with `batch`: `None` when the version is
    /// not `expected` (the caller reports `false` and writes nothing).
    pub fn new(
        head: &Head,
        expected: u64,
        batch: &EventBatch,
        stored: &HashMap<String, Stored>,
    ) -> Result<Option<Self>> {
        check_unique_ids(&batch.events)?;
        head.check_open()?;
        if head.version != expected {
            return Ok(None);
        }
        let version = next_version(head.version)?;
        let fresh = batch
            .events
            .iter()
            .filter(|e| !stored.contains_key(&e.id))
            .count();
        check_seq_room(head.last_seq, fresh)?;
        let mut plan = Self {
            context: Vec::with_capacity(batch.events.len()),
            new: Vec::new(),
            last_seq: head.last_seq,
            version,
            state: StateChanges::default(),
            context_tokens: 0,
            before_seq: head.last_seq,
            added_bytes: 0,
        };
        for (index, e) in batch.events.iter().enumerate() {
            let (seq, tokens) = if let Some(s) = stored.get(&e.id) {
                (s.seq, s.tokens)
            } else {
                plan.last_seq = plan.last_seq.saturating_add(1);
                plan.new.push(NewEvent {
                    index,
                    seq: plan.last_seq,
                });
                plan.state.add(e.state_delta.as_ref());
                (plan.last_seq, e.token_estimate)
            };
            plan.context.push(seq);
            plan.context_tokens = plan.context_tokens.saturating_add(u64::from(tokens));
        }
        plan.added_bytes = batch.added_bytes(&plan.new);
        Ok(Some(plan))
    }

    /// What the replace changes in the session's head: the context's token
    /// estimate is the new context's.
    pub fn head_change(&self) -> HeadChange<'_> {
        HeadChange {
            version: self.version,
            last_seq: self.last_seq,
            context_tokens: ContextTokens::Set(self.context_tokens),
            new: &self.new,
            added_bytes: self.added_bytes,
            state: &self.state,
        }
    }

    /// The record of this replace in the session's context history, written
    /// `at` (the store's clock), which every store keeps with the write.
    pub fn change(&self, at: DateTime<Utc>) -> ContextChange {
        ContextChange::new(self.version, at, self.before_seq, &self.context)
    }
}

/// Where a rewind goes back to: everything from that point on leaves the archive and the context.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum RewindTo {
    /// Before the first archived event of this invocation.
    Invocation(InvocationId),
    /// Before the event with this seq (it goes too).
    Seq(u64),
}

impl RewindTo {
    /// Before the first event of invocation `id`; `InvalidInput` for an invalid id.
    pub fn before_invocation(id: impl Into<String>) -> crate::Result<Self> {
        Ok(Self::Invocation(InvocationId::new(id)?))
    }

    /// The invocation, when rewinding to one.
    pub fn invocation(&self) -> Option<&InvocationId> {
        match self {
            Self::Invocation(i) => Some(i),
            Self::Seq(_) => None,
        }
    }
}

/// What a rewind removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RewindPlan {
    /// Every archived event at or after this seq goes.
    pub from_seq: u64,
    /// The version after the rewind.
    pub version: u64,
}

impl RewindPlan {
    /// Plans a rewind to before `to`. For an invocation, `first_seq` is its
    /// first archived seq as the store found it (`None`: not in the archive,
    /// `NotFound`); for a seq, the store passes `None` and the seq must be
    /// one the session has assigned (`1..=last_seq`, else `NotFound`).
    pub fn new(head: &Head, to: &RewindTo, first_seq: Option<u64>) -> Result<Self> {
        head.check_open()?;
        let from_seq = match to {
            RewindTo::Invocation(invocation) => {
                first_seq.ok_or_else(|| SessionError::NotFound {
                    what: "invocation",
                    id: invocation.to_string(),
                })?
            }
            RewindTo::Seq(seq) if (1..=head.last_seq).contains(seq) => *seq,
            RewindTo::Seq(seq) => {
                return Err(SessionError::NotFound {
                    what: "seq",
                    id: seq.to_string(),
                })
            }
        };
        Ok(Self {
            from_seq,
            version: next_version(head.version)?,
        })
    }

    /// The session-scope state after the rewind: `initial` with the deltas of the remaining events replayed.
    pub fn state<'a>(
        initial: &StateMap,
        remaining: impl IntoIterator<Item = &'a StateMap>,
    ) -> StateMap {
        crate::state::replay_deltas(initial, remaining)
    }
}

/// What a create writes.
#[derive(Debug, Clone, PartialEq)]
pub struct CreatePlan {
    /// The session at version 0.
    pub session: Session,
    /// The initial state as given (what a rewind replays from).
    pub initial_state: StateMap,
    /// The `app:` and `user:` keys of the initial state.
    pub shared: SharedDelta,
}

impl CreatePlan {
    /// Plans creating `new` at `now`. `existing` is the expiry of a session
    /// the store already holds under the same id (`Some(None)`: one that
    /// never expires): a live one makes the create `AlreadyExists`, an
    /// expired one is replaced.
    pub fn new(
        new: NewSession,
        existing: Option<Option<DateTime<Utc>>>,
        now: DateTime<Utc>,
    ) -> Result<Self> {
        new.validate(now)?;
        if existing.is_some_and(|expiry| expiry.is_none_or(|at| at > now)) {
            return Err(SessionError::AlreadyExists {
                what: "session",
                id: new.id.to_string(),
            });
        }
        let split = ScopedDelta::split(&new.state);
        let mut shared = SharedDelta::default();
        shared.add(&split);
        Ok(Self {
            session: new.to_session(now),
            initial_state: new.state,
            shared,
        })
    }
}

/// The version a session update writes: `Conflict` when the update expects
/// another version than `head`'s, `SessionEnded` when it changes the
/// metadata or state of an ended session without reopening it (status and
/// expiry changes are always allowed: that is how a session ends, reopens,
/// and is kept or let go).
pub fn plan_update(head: &Head, update: &SessionUpdate) -> Result<u64> {
    if update.writes_content() && update.status != Some(SessionStatus::Active) {
        head.check_open()?;
    }
    if let Some(expected) = update.expected_version {
        if head.version != expected {
            return Err(SessionError::Conflict {
                id: head.id.to_string(),
                expected,
                actual: head.version,
            });
        }
    }
    next_version(head.version)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{ErrorKind, Message, MAX_SEQ, MAX_VERSION};

    fn head(last_seq: u64, version: u64) -> Head {
        Head::new(
            SessionId::new("s").unwrap(),
            last_seq,
            version,
            SessionStatus::Active,
        )
    }

    fn event(id: &str, delta: &serde_json::Value) -> SessionEvent {
        let mut e = SessionEvent::new(Message::user(id));
        e.id = id.to_owned();
        e.state_delta = delta.as_object().cloned();
        e
    }

    fn batch(events: Vec<SessionEvent>) -> EventBatch {
        EventBatch::new(events, &Limits::default()).unwrap()
    }

    #[test]
    fn append_assigns_next_seqs_skips_held_and_repeated_ids_and_merges_state() {
        let b = batch(vec![
            event("a", &json!({"k": 1, "user:u": 1, "temp:t": 1})),
            event("held", &json!({"k": 9})),
            event("b", &json!({"k": null, "app:x": 2})),
            event("a", &json!({})),
        ]);
        let stored = HashMap::from([("held".to_owned(), Stored { seq: 3, tokens: 5 })]);
        let plan = AppendPlan::new(&head(7, 4), &b, &stored).unwrap();
        assert_eq!(plan.seqs, vec![8, 3, 9, 8]);
        assert_eq!(
            plan.new
                .iter()
                .map(|n| (n.index, n.seq))
                .collect::<Vec<_>>(),
            [(0, 8), (2, 9)]
        );
        assert_eq!((plan.last_seq, plan.version), (9, 5));
        assert_eq!(
            plan.state.session,
            json!({"k": null}).as_object().cloned().unwrap()
        );
        assert_eq!(
            plan.state.shared.user,
            json!({"user:u": 1}).as_object().cloned().unwrap()
        );
        assert_eq!(
            plan.state.shared.app,
            json!({"app:x": 2}).as_object().cloned().unwrap()
        );
        let resend = AppendPlan::new(
            &head(9, 5),
            &batch(vec![event("held", &json!({}))]),
            &stored,
        )
        .unwrap();
        assert!(resend.is_noop());
        assert_eq!(
            (resend.version, resend.seqs.clone()),
            (5, vec![3]),
            "a retry changes nothing"
        );
    }

    #[test]
    fn counters_at_the_maximum_refuse_new_events_but_not_retries() {
        let stored = HashMap::from([("held".to_owned(), Stored { seq: 1, tokens: 1 })]);
        let err = AppendPlan::new(
            &head(MAX_SEQ, 1),
            &batch(vec![event("n", &json!({}))]),
            &stored,
        )
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        let err = AppendPlan::new(
            &head(1, MAX_VERSION),
            &batch(vec![event("n", &json!({}))]),
            &stored,
        )
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(AppendPlan::new(
            &head(MAX_SEQ, MAX_VERSION),
            &batch(vec![event("held", &json!({}))]),
            &stored
        )
        .is_ok());
    }

    #[test]
    fn context_plan_is_a_compare_and_swap() {
        let stored = HashMap::from([("old".to_owned(), Stored { seq: 2, tokens: 10 })]);
        let mut summary = event("sum", &json!({}));
        summary.token_estimate = 4;
        let b = batch(vec![summary, event("old", &json!({}))]);
        assert_eq!(ContextPlan::new(&head(5, 3), 2, &b, &stored).unwrap(), None);
        let plan = ContextPlan::new(&head(5, 3), 3, &b, &stored)
            .unwrap()
            .unwrap();
        assert_eq!(plan.context, vec![6, 2]);
        assert_eq!(
            (plan.last_seq, plan.version, plan.context_tokens),
            (6, 4, 14)
        );
        let twice = batch(vec![event("x", &json!({})), event("x", &json!({}))]);
        assert!(ContextPlan::new(&head(5, 3), 3, &twice, &stored).is_err());
    }

    #[test]
    fn rewind_update_create_and_import_decide_their_errors() {
        let inv = RewindTo::Invocation(InvocationId::new("i1").unwrap());
        assert_eq!(
            RewindPlan::new(&head(5, 3), &inv, None).unwrap_err().kind(),
            ErrorKind::NotFound
        );
        assert_eq!(
            RewindPlan::new(&head(5, 3), &inv, Some(2)).unwrap().version,
            4
        );
        let to_seq = RewindPlan::new(&head(5, 3), &RewindTo::Seq(5), None).unwrap();
        assert_eq!(to_seq.from_seq, 5);
        for bad in [0, 6] {
            let err = RewindPlan::new(&head(5, 3), &RewindTo::Seq(bad), None).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::NotFound);
        }
        let update = SessionUpdate::new().expect_version(2);
        assert_eq!(
            plan_update(&head(5, 3), &update).unwrap_err().kind(),
            ErrorKind::Conflict
        );
        let now = Utc::now();
        let new = || NewSession::new("app", "alice", now).unwrap();
        let live = Some(Some(now + chrono::Duration::hours(1)));
        assert_eq!(
            CreatePlan::new(new(), live, now).unwrap_err().kind(),
            ErrorKind::AlreadyExists
        );
        assert_eq!(
            CreatePlan::new(new(), Some(None), now).unwrap_err().kind(),
            ErrorKind::AlreadyExists
        );
        assert!(
            CreatePlan::new(new(), Some(Some(now)), now).is_ok(),
            "an expired one is replaced"
        );
        let id = SessionId::new("s").unwrap();
        assert_eq!(
            writable(Some(((), Some(now))), &id, now)
                .unwrap_err()
                .kind(),
            ErrorKind::Expired
        );
        assert_eq!(
            readable(Some(((), Some(now))), &id, now)
                .unwrap_err()
                .kind(),
            ErrorKind::NotFound
        );
        assert!(readable(Some(((), None)), &id, now).is_ok());
    }

    #[test]
    fn an_ended_session_takes_no_writes_but_its_status_and_expiry_change() {
        let ended = Head {
            status: SessionStatus::Archived,
            ..head(2, 5)
        };
        let fresh = batch(vec![event("new", &json!(null))]);
        assert_eq!(
            AppendPlan::new(&ended, &fresh, &HashMap::new())
                .unwrap_err()
                .kind(),
            ErrorKind::SessionEnded
        );
        // A retried append of events the session already holds still answers as before.
        let held = HashMap::from([("new".to_owned(), Stored { seq: 2, tokens: 1 })]);
        let again = AppendPlan::new(&ended, &fresh, &held).unwrap();
        assert!(again.is_noop());
        assert_eq!(again.seqs, vec![2]);
        assert_eq!(
            ContextPlan::new(&ended, 5, &fresh, &HashMap::new())
                .unwrap_err()
                .kind(),
            ErrorKind::SessionEnded
        );
        assert_eq!(
            RewindPlan::new(&ended, &RewindTo::Seq(1), None)
                .unwrap_err()
                .kind(),
            ErrorKind::SessionEnded
        );
        let state = SessionUpdate::new().state(StateMap::new());
        assert_eq!(
            plan_update(&ended, &state).unwrap_err().kind(),
            ErrorKind::SessionEnded
        );
        assert_eq!(
            plan_update(&ended, &state.clone().status(SessionStatus::Active)).unwrap(),
            6,
            "an update that reopens may also set the state"
        );
        assert_eq!(
            plan_update(
                &ended,
                &SessionUpdate::new().status(SessionStatus::Archived)
            )
            .unwrap(),
            6
        );
        assert_eq!(
            plan_update(&ended, &SessionUpdate::new().expires_at(None)).unwrap(),
            6
        );
    }
}
