//! Import planning: a dump is written as it is, within the limits an
//! append is held to.

use std::collections::HashMap;

use crate::dump::SessionDump;
use crate::error::{Result, SessionError};
use crate::event::SessionEvent;
use crate::validate::Limits;

use super::SessionQuota;

/// What an import writes: the dump with its counters recomputed.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportPlan {
    /// The session, with `event_count`, `event_bytes` and `context_tokens`
    /// recomputed from the events.
    pub dump: SessionDump,
    /// Each context seq's 1-based position in the context.
    pub positions: HashMap<u64, i64>,
}

impl ImportPlan {
    /// Plans importing `dump` into a store with `limits` whose live copy of
    /// the session (if any) is at `existing_version`: `None` when that copy
    /// is at the same or a later version (the import leaves it unchanged).
    ///
    /// A dump this store could not have taken by appends is refused whole,
    /// before anything is written, whatever the store holds: an event over
    /// [`Limits::max_event_bytes`] is `InvalidInput` naming the session and
    /// the event; more events than [`Limits::max_session_events`] or more
    /// bytes than [`Limits::max_session_bytes`] is `QuotaExceeded` naming
    /// the session, as an append past the quota is.
    pub fn new(
        dump: SessionDump,
        existing_version: Option<u64>,
        limits: &Limits,
    ) -> Result<Option<Self>> {
        let sizes = dump
            .events
            .iter()
            .map(SessionEvent::stored_bytes)
            .collect::<Result<Vec<u64>>>()?;
        Self::planned(dump, existing_version, &sizes, limits)
    }

    /// [`ImportPlan::new`] for a store that already encoded the dump's
    /// events as it stores them (`bodies`, in event order, as
    /// [`crate::prepare_events`] makes them): their lengths are the
    /// events' stored sizes, so nothing is encoded twice.
    pub fn with_bodies(
        dump: SessionDump,
        existing_version: Option<u64>,
        bodies: &[String],
        limits: &Limits,
    ) -> Result<Option<Self>> {
        let sizes: Vec<u64> = bodies
            .iter()
            .map(|b| u64::try_from(b.len()).unwrap_or(u64::MAX))
            .collect();
        Self::planned(dump, existing_version, &sizes, limits)
    }

    fn planned(
        mut dump: SessionDump,
        existing_version: Option<u64>,
        sizes: &[u64],
        limits: &Limits,
    ) -> Result<Option<Self>> {
        dump.validate()?;
        let event_bytes = check_limits(&dump, sizes, limits)?;
        if existing_version.is_some_and(|v| v >= dump.session.version) {
            return Ok(None);
        }
        let id = dump.session.id.to_string();
        for e in &mut dump.events {
            e.session_id.clone_from(&id);
            e.left_context = None;
        }
        dump.session.event_count = u64::try_from(dump.events.len()).unwrap_or(u64::MAX);
        dump.session.event_bytes = event_bytes;
        dump.session.context_tokens = dump.context_tokens();
        let positions = dump.context_positions();
        Ok(Some(Self { dump, positions }))
    }
}

/// Checks the events of `dump`, of stored sizes `sizes` (in event order),
/// against the event size limit and the per-session quotas of `limits`;
/// returns their total size.
fn check_limits(dump: &SessionDump, sizes: &[u64], limits: &Limits) -> Result<u64> {
    let id = &dump.session.id;
    if sizes.len() != dump.events.len() {
        return Err(SessionError::invalid(
            "import",
            format!(
                "session {id}: {} stored sizes given for {} events",
                sizes.len(),
                dump.events.len()
            ),
        ));
    }
    let max_event = u64::try_from(limits.max_event_bytes).unwrap_or(u64::MAX);
    let mut total = 0u64;
    for (e, size) in dump.events.iter().zip(sizes) {
        if *size > max_event {
            return Err(SessionError::invalid(
                "event",
                format!(
                    "session {id} event {} (seq {}) is {size} bytes serialized; the limit is {}",
                    e.id, e.seq, limits.max_event_bytes
                ),
            ));
        }
        total = total.saturating_add(*size);
    }
    let count = u64::try_from(dump.events.len()).unwrap_or(u64::MAX);
    let empty = super::Head::new(id.clone(), 0, 0, dump.session.status);
    SessionQuota::of(limits).check(&empty, count, total)?;
    Ok(total)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{ErrorKind, Message, NewSession, SharedState, StateMap};

    fn dump(texts: &[&str]) -> SessionDump {
        let now = chrono::Utc::now();
        let session = NewSession::new("app", "alice", now)
            .and_then(|s| s.with_id("s-1"))
            .unwrap()
            .to_session(now);
        let events: Vec<SessionEvent> = texts
            .iter()
            .zip(1u64..)
            .map(|(t, seq)| {
                let mut e = SessionEvent::new(Message::user(*t));
                e.seq = seq;
                e
            })
            .collect();
        let last_seq = u64::try_from(events.len()).unwrap();
        SessionDump {
            session,
            initial_state: StateMap::new(),
            last_seq,
            context: events.iter().map(|e| e.seq).collect(),
            events,
            shared: SharedState::default(),
            context_log: Vec::new(),
        }
    }

    #[test]
    fn an_import_past_the_events_quota_is_quota_exceeded_naming_the_session() {
        let limits = Limits::default().with_max_session_events(2);
        assert!(ImportPlan::new(dump(&["a", "b"]), None, &limits).is_ok());
        let err = ImportPlan::new(dump(&["a", "b", "c"]), None, &limits).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::QuotaExceeded);
        assert_eq!(
            err.to_string(),
            "quota exceeded on s-1: 3 events per session is over the limit of 2"
        );
        // Refused even when the store holds the session at a later version.
        let err = ImportPlan::new(dump(&["a", "b", "c"]), Some(99), &limits).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::QuotaExceeded);
    }

    #[test]
    fn an_import_past_the_bytes_quota_counts_the_stored_sizes() {
        let d = dump(&["a", "b"]);
        let size = SessionEvent::stored_bytes_of(&d.events).unwrap();
        let fits = Limits::default().with_max_session_bytes(size);
        let plan = ImportPlan::new(d.clone(), None, &fits).unwrap().unwrap();
        assert_eq!(plan.dump.session.event_bytes, size);
        let over = Limits::default().with_max_session_bytes(size - 1);
        let err = ImportPlan::new(d, None, &over).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::QuotaExceeded);
        assert!(err.to_string().contains("bytes per session"), "{err}");
    }

    #[test]
    fn an_event_over_the_size_limit_is_invalid_input_naming_session_and_event() {
        let big = "x".repeat(2000);
        let d = dump(&["a", big.as_str()]);
        let limits = Limits::default().with_max_event_bytes(1000);
        let err = ImportPlan::new(d.clone(), None, &limits).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        let text = err.to_string();
        assert!(
            text.contains("session s-1")
                && text.contains(&d.events[1].id)
                && text.contains("(seq 2)"),
            "{text}"
        );
        let bodies: Vec<String> = vec!["{}".into(), "y".repeat(1001)];
        let err = ImportPlan::with_bodies(d.clone(), None, &bodies, &limits).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        let err = ImportPlan::with_bodies(d, None, &bodies[..1], &limits).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "a size per event");
    }

    #[test]
    fn an_import_within_the_limits_is_planned_as_before() {
        let mut d = dump(&["a", "b"]);
        d.session.version = 2;
        let plan = ImportPlan::new(d, Some(1), &Limits::default())
            .unwrap()
            .unwrap();
        assert_eq!(plan.dump.session.event_count, 2);
        assert_eq!(plan.positions.get(&2), Some(&2));
        let mut d = dump(&["a"]);
        d.session.version = 3;
        assert!(ImportPlan::new(d, Some(3), &Limits::default())
            .unwrap()
            .is_none());
    }
}
