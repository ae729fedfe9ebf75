//! What a store reads about a session before writing, and the per-session
//! quotas a write is checked against.

use crate::error::{Result, SessionError};
use crate::ids::SessionId;
use crate::session::{Session, SessionStatus};
use crate::validate::Limits;

use super::change::HeadChange;

/// What a store read about a session before writing to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The session.
    pub id: SessionId,
    /// The highest seq ever assigned.
    pub last_seq: u64,
    /// The current version.
    pub version: u64,
    /// How many events the archive holds (what the events quota counts);
    /// set with [`Head::with_event_count`].
    pub event_count: u64,
    /// Bytes of the archive's events as stored (what the bytes quota
    /// counts); set with [`Head::with_event_bytes`].
    pub event_bytes: u64,
    /// Whether the session is active or has ended; read in the same step
    /// as `version`, so a write planned on an active head cannot land after
    /// an `end` (which bumps the version).
    pub status: SessionStatus,
}

impl Head {
    /// The head of session `id` at `last_seq` and `version`, with `status`.
    pub fn new(id: SessionId, last_seq: u64, version: u64, status: SessionStatus) -> Self {
        Self {
            id,
            last_seq,
            version,
            event_count: 0,
            event_bytes: 0,
            status,
        }
    }

    /// The head with the archive's event count, which a store reads in the
    /// same step as the version (the quota of events per session needs it).
    pub fn with_event_count(mut self, event_count: u64) -> Self {
        self.event_count = event_count;
        self
    }

    /// The head with the archive's stored bytes, which a store reads in the
    /// same step as the version (the quota of bytes per session needs it).
    pub fn with_event_bytes(mut self, event_bytes: u64) -> Self {
        self.event_bytes = event_bytes;
        self
    }

    /// The head `change` leaves: its version and last seq, the archive's
    /// counters grown by the events it adds, the status unchanged.
    pub fn advanced(&self, change: &HeadChange<'_>) -> Self {
        Self::new(
            self.id.clone(),
            change.last_seq,
            change.version,
            self.status,
        )
        .with_event_count(self.event_count.saturating_add(change.added_count()))
        .with_event_bytes(self.event_bytes.saturating_add(change.added_bytes))
    }

    /// `SessionEnded` when the session has ended: its events and state are
    /// read-only until it is reopened.
    pub fn check_open(&self) -> Result<()> {
        match self.status {
            SessionStatus::Active => Ok(()),
            SessionStatus::Archived => Err(SessionError::SessionEnded {
                id: self.id.to_string(),
            }),
        }
    }
}

/// The per-session quotas of a store ([`Limits::max_session_events`] and
/// [`Limits::max_session_bytes`]), checked by an append plan against the
/// [`Head`] it was planned on, so the check commits or fails with the write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionQuota {
    /// Most events a session may hold.
    pub max_events: Option<u64>,
    /// Most bytes a session's events may take as stored.
    pub max_bytes: Option<u64>,
}

impl SessionQuota {
    /// The per-session quotas of `limits`.
    pub fn of(limits: &Limits) -> Self {
        Self {
            max_events: limits.max_session_events,
            max_bytes: limits.max_session_bytes,
        }
    }

    /// `QuotaExceeded` when `events` more events of `bytes` bytes would take
    /// the session at `head` past a quota; nothing is written then.
    pub fn check(&self, head: &Head, events: u64, bytes: u64) -> Result<()> {
        let over = |quota: &'static str, limit: u64, requested: u64| {
            Err(SessionError::QuotaExceeded {
                id: head.id.to_string(),
                quota,
                limit,
                requested,
            })
        };
        if let Some(max) = self.max_events {
            let after = head.event_count.saturating_add(events);
            if after > max {
                return over("events per session", max, after);
            }
        }
        if let Some(max) = self.max_bytes {
            let after = head.event_bytes.saturating_add(bytes);
            if after > max {
                return over("bytes per session", max, after);
            }
        }
        Ok(())
    }
}

/// The sessions-per-user quota ([`Limits::max_user_sessions`]) a create,
/// fork or import of a new session is checked against. A store counts its
/// owner's live sessions only when there is one (`OwnerQuota::of` is
/// `Some`), in the step that writes the session, and the decision is this:
///
/// ```
/// use session_core::plan::OwnerQuota;
/// use session_core::{Limits, NewSession};
/// let s = NewSession::new("app", "ada", chrono::Utc::now()).unwrap().to_session(chrono::Utc::now());
/// assert!(OwnerQuota::of(&Limits::default()).is_none());
/// let limits = Limits::default().with_max_user_sessions(2);
/// let quota = OwnerQuota::of(&limits).unwrap();
/// assert!(quota.check(&s, 1).is_ok());
/// assert!(quota.check(&s, 2).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnerQuota<'a> {
    limits: &'a Limits,
}

impl<'a> OwnerQuota<'a> {
    /// The quota of `limits`; `None` when there is none (nothing to count).
    pub fn of(limits: &'a Limits) -> Option<Self> {
        limits.max_user_sessions.map(|_| Self { limits })
    }

    /// `QuotaExceeded` when the owner of the new `session` already holds
    /// `live` live sessions (as the store counted them) and one more would
    /// pass the quota.
    pub fn check(&self, session: &Session, live: u64) -> Result<()> {
        self.limits.check_user_sessions(session, live)
    }

    /// Checks the new `session` against the quota of `limits`, counting its
    /// owner's live sessions with `count` only when there is a quota (for a
    /// store whose count is a blocking call).
    pub fn check_counted<E: From<SessionError>>(
        limits: &Limits,
        session: &Session,
        count: impl FnOnce() -> std::result::Result<u64, E>,
    ) -> std::result::Result<(), E> {
        match OwnerQuota::of(limits) {
            Some(quota) => Ok(quota.check(session, count()?)?),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::plan::{AppendPlan, EventBatch, Stored};
    use crate::{ErrorKind, Message, SessionEvent};

    fn head(count: u64, bytes: u64) -> Head {
        Head::new(
            SessionId::new("s").unwrap(),
            count,
            count,
            SessionStatus::Active,
        )
        .with_event_count(count)
        .with_event_bytes(bytes)
    }

    fn event(id: &str) -> SessionEvent {
        let mut e = SessionEvent::new(Message::user(id));
        e.id = id.to_owned();
        e
    }

    #[test]
    fn the_events_quota_refuses_a_batch_that_would_pass_it_whole() {
        let limits = Limits::default().with_max_session_events(3);
        let two = EventBatch::new(vec![event("a"), event("b")], &limits).unwrap();
        assert!(AppendPlan::new(&head(1, 0), &two, &HashMap::new()).is_ok());
        let err = AppendPlan::new(&head(2, 0), &two, &HashMap::new()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::QuotaExceeded);
        assert_eq!(
            err.to_string(),
            "quota exceeded on s: 4 events per session is over the limit of 3"
        );
        // Events already held do not count again.
        let held = HashMap::from([("a".to_owned(), Stored { seq: 1, tokens: 1 })]);
        assert!(AppendPlan::new(&head(2, 0), &two, &held).is_ok());
    }

    #[test]
    fn the_bytes_quota_counts_the_stored_encoding_of_the_new_events() {
        let two = EventBatch::new(vec![event("a"), event("b")], &Limits::default()).unwrap();
        let size: u64 = two
            .bodies
            .iter()
            .map(|b| u64::try_from(b.len()).unwrap())
            .sum();
        let limits = Limits::default().with_max_session_bytes(1000 + size);
        let two = EventBatch::new(two.events, &limits).unwrap();
        let plan = AppendPlan::new(&head(1, 1000), &two, &HashMap::new()).unwrap();
        assert_eq!(plan.added_bytes, size);
        let err = AppendPlan::new(&head(1, 1001), &two, &HashMap::new()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::QuotaExceeded);
        assert_eq!(
            err.to_string(),
            format!(
                "quota exceeded on s: {} bytes per session is over the limit of {}",
                1001 + size,
                1000 + size
            )
        );
        // A retry of held events adds nothing, so it still answers.
        let held = HashMap::from([
            ("a".to_owned(), Stored { seq: 1, tokens: 1 }),
            ("b".to_owned(), Stored { seq: 2, tokens: 1 }),
        ]);
        let retry = AppendPlan::new(&head(2, 5000), &two, &held).unwrap();
        assert_eq!((retry.added_bytes, retry.is_noop()), (0, true));
    }

    #[test]
    fn a_stored_size_equals_the_body_a_batch_keeps() {
        let mut e = event("a");
        e.seq = 9;
        e.session_id = "elsewhere".into();
        let batch = EventBatch::new(vec![e.clone()], &Limits::default()).unwrap();
        assert_eq!(
            e.stored_bytes().unwrap(),
            u64::try_from(batch.bodies[0].len()).unwrap()
        );
    }

    #[test]
    fn a_sized_batch_plans_the_bytes_and_refusals_of_an_encoded_one() {
        let mut big = event("b");
        big.metadata.insert("pad".into(), "x".repeat(600).into());
        let events = vec![event("a"), big];
        let encoded = EventBatch::new(events.clone(), &Limits::default()).unwrap();
        let sized = EventBatch::sized(events.clone(), &Limits::default()).unwrap();
        assert!(sized.bodies.is_empty());
        assert_eq!(sized.sizes, encoded.sizes);
        let plan = |b: &EventBatch| AppendPlan::new(&head(1, 0), b, &HashMap::new()).unwrap();
        assert_eq!(plan(&sized).added_bytes, plan(&encoded).added_bytes);
        let tight = Limits::default().with_max_event_bytes(600);
        let err = EventBatch::sized(events, &tight).unwrap_err();
        assert!(err.to_string().contains("bytes serialized"), "{err}");
    }

    #[test]
    fn the_head_a_plan_leaves_has_its_version_seq_and_grown_counters() {
        let before = head(3, 100);
        let batch = EventBatch::new(
            vec![
                SessionEvent::new(Message::user("a")),
                SessionEvent::new(Message::user("b")),
            ],
            &Limits::default(),
        )
        .unwrap();
        let plan = AppendPlan::new(&before, &batch, &HashMap::new()).unwrap();
        let after = before.advanced(&plan.head_change());
        assert_eq!((after.last_seq, after.version), (5, plan.version));
        assert_eq!(after.event_count, 5);
        assert_eq!(after.event_bytes, 100 + plan.head_change().added_bytes);
        assert_eq!(after.status, before.status);
    }
}
