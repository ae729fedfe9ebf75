//! Forks: a new session that starts as a copy of another up to a point.
//!
//! A fork holds the source's archive up to the fork point, the context the
//! source had there (what a rewind to that point leaves, compacted turns a
//! later summary had replaced brought back), and the session state replayed
//! to it. Its metadata names its parent ([`FORKED_FROM`], [`FORKED_AT_SEQ`]),
//! which is how `list` finds a session's forks. The source is untouched, and
//! the two never see each other's appends.

use std::collections::{BTreeSet, HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::context_log::{ContextChange, ContextLog};
use crate::dump::SessionDump;
use crate::error::{Result, SessionError};
use crate::event::{SessionEvent, REPLACES_KEY};
use crate::fork_at::{ForkAt, FORKED_AT_SEQ, FORKED_FROM};
use crate::ids::SessionId;
use crate::plan::{compaction_order, context_at, Restorable, Restore, RewindPlan};
use crate::session::{Session, SessionStatus};
use crate::state::{SharedState, StateMap};
use crate::validate::next_version;

/// The seqs a summary replaced, from its `replaces` metadata value.
fn replaces_of(value: Option<&Value>) -> Vec<u64> {
    value
        .and_then(Value::as_array)
        .map(|seqs| seqs.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

/// The events, in any order, that the removed context events had replaced
/// (their `replaces` metadata): what a cut brings back into the context.
pub(crate) fn replaced_by<'a>(
    removed: impl IntoIterator<Item = &'a SessionEvent>,
) -> BTreeSet<u64> {
    removed
        .into_iter()
        .flat_map(|e| replaces_of(e.metadata.get(REPLACES_KEY)))
        .collect()
}

/// The context after a cut, with `restored` events brought back, in the
/// order compaction writes it ([`compaction_order`]): what a restore does
/// when the session's history cannot tell the context at the point.
pub(crate) fn merge_restored<T: Restorable>(mut after: Vec<T>, restored: Vec<T>) -> Vec<T> {
    after.extend(restored);
    compaction_order(after)
}

/// What a fork needs to know of one event of its source: never its content.
#[derive(Debug, Clone, PartialEq)]
pub struct EventOutline {
    /// Its seq.
    pub seq: u64,
    /// Its invocation.
    pub invocation_id: Option<String>,
    /// Whether it is a summary.
    pub synthetic: bool,
    /// Whether it is a stored system message (not a summary).
    pub system: bool,
    /// The seqs it replaced (a summary's `replaces` metadata; empty otherwise).
    pub replaces: Vec<u64>,
    /// Its session-scope and shared state changes.
    pub state_delta: Option<StateMap>,
    /// Its token estimate.
    pub token_estimate: u32,
}

impl EventOutline {
    /// The outline of `event`.
    pub fn of(event: &SessionEvent) -> Self {
        Self {
            seq: event.seq,
            invocation_id: event.invocation_id.clone(),
            synthetic: event.is_synthetic(),
            system: Restorable::system(event),
            replaces: replaces_of(event.metadata.get(REPLACES_KEY)),
            state_delta: event.state_delta.clone(),
            token_estimate: event.token_estimate,
        }
    }

    /// The seqs a summary replaced, from the JSON text of its `replaces`
    /// metadata as a store extracts it from the stored event (`None`: none).
    pub fn parse_replaces(json: Option<&str>) -> Result<Vec<u64>> {
        let Some(text) = json else {
            return Ok(Vec::new());
        };
        let value: Value = serde_json::from_str(text)
            .map_err(|e| SessionError::serialization("an event's replaces metadata", e))?;
        Ok(replaces_of(Some(&value)))
    }
}

/// The source of a fork as a store reads it in one consistent step: its
/// session row, every archived event in outline, its context and history.
#[derive(Debug, Clone, PartialEq)]
pub struct ForkSource {
    /// The source session.
    pub session: Session,
    /// Its initial state (what the fork's state is replayed from).
    pub initial_state: StateMap,
    /// Its highest seq ever assigned.
    pub last_seq: u64,
    /// Every archived event, in seq order.
    pub events: Vec<EventOutline>,
    /// The context, as seqs in context order.
    pub context: Vec<u64>,
    /// The context's history.
    pub context_log: Vec<ContextChange>,
}

/// What a fork writes: a new session holding the source's archived events
/// with seqs up to [`ForkPlan::last_seq`], which a store copies as they
/// are stored (no decoding or re-encoding where the engine can copy rows).
#[derive(Debug, Clone, PartialEq)]
pub struct ForkPlan {
    /// The new session: counters of what it holds, except `event_bytes`,
    /// which the store counts as it copies.
    pub session: Session,
    /// The source's initial state.
    pub initial_state: StateMap,
    /// The last seq of the source the fork holds: events up to it are copied.
    pub last_seq: u64,
    /// The fork's context, as seqs in context order.
    pub context: Vec<u64>,
    /// The fork's context history.
    pub context_log: Vec<ContextChange>,
}

impl ForkPlan {
    /// Plans a fork of `source` at `at` as the new session `id`, created at
    /// `now`.
    ///
    /// `NotFound` for a seq the source never had or an invocation it does
    /// not hold. The fork is active, has no resolution key (the source
    /// keeps it), keeps the source's owner, metadata and expiry, and its own
    /// counters start from the cut.
    pub fn new(source: ForkSource, at: &ForkAt, id: SessionId, now: DateTime<Utc>) -> Result<Self> {
        let last_kept = match at {
            ForkAt::Latest => source.last_seq,
            ForkAt::Seq(seq) if (1..=source.last_seq).contains(seq) => *seq,
            ForkAt::Seq(seq) => {
                return Err(SessionError::NotFound {
                    what: "seq",
                    id: format!("{seq} in session {}", source.session.id),
                })
            }
            ForkAt::Invocation(inv) => source
                .events
                .iter()
                .find(|e| e.invocation_id.as_deref() == Some(inv.as_str()))
                .map(|e| e.seq.saturating_sub(1))
                .ok_or_else(|| SessionError::NotFound {
                    what: "invocation",
                    id: inv.to_string(),
                })?,
        };
        let ForkSource {
            mut session,
            initial_state,
            events,
            context,
            context_log,
            ..
        } = source;
        let source_id = session.id.clone();
        let by_seq: HashMap<u64, &EventOutline> = events.iter().map(|e| (e.seq, e)).collect();
        let point = last_kept.saturating_add(1);
        let log = ContextLog::new(context_log);
        let (context, brought_back) = match (at, context_at(&log, &events, point)) {
            (ForkAt::Latest, _) => (context, false),
            (_, Restore::Context(seqs)) => (seqs, false),
            (_, Restore::Unknown) => {
                let restored = restored_by_summaries(&context, &by_seq, last_kept);
                let changed = !restored
                    .iter()
                    .eq(context.iter().filter(|s| **s <= last_kept));
                (restored, changed)
            }
        };
        let context_tokens = context
            .iter()
            .filter_map(|s| by_seq.get(s))
            .fold(0u64, |sum, e| {
                sum.saturating_add(u64::from(e.token_estimate))
            });
        let kept: Vec<&EventOutline> = events.iter().filter(|e| e.seq <= last_kept).collect();

        // The context history up to the cut; a change whose context reaches
        // past it belongs to the source's later life.
        let mut context_log: Vec<ContextChange> = log
            .into_changes()
            .into_iter()
            .filter(|c| c.before_seq <= last_kept && c.context.iter().all(|r| r[1] <= last_kept))
            .collect();
        let mut version = session.version;
        if brought_back {
            version = next_version(version)?;
            context_log.push(ContextChange::new(version, now, last_kept, &context));
        }

        session.state = RewindPlan::state(
            &initial_state,
            kept.iter().filter_map(|e| e.state_delta.as_ref()),
        );
        session
            .metadata
            .insert(FORKED_FROM.to_owned(), Value::from(source_id.as_str()));
        session
            .metadata
            .insert(FORKED_AT_SEQ.to_owned(), Value::from(last_kept));
        session.id = id;
        session.key = None;
        session.status = SessionStatus::Active;
        session.created_at = now;
        session.updated_at = now;
        session.version = version;
        session.event_count = u64::try_from(kept.len()).unwrap_or(u64::MAX);
        session.event_bytes = 0;
        session.context_tokens = context_tokens;
        Ok(Self {
            session,
            initial_state,
            last_seq: last_kept,
            context,
            context_log,
        })
    }

    /// Each context seq's 1-based position in the fork's context.
    pub fn positions(&self) -> HashMap<u64, i64> {
        (1i64..)
            .zip(self.context.iter().copied())
            .map(|(p, s)| (s, p))
            .collect()
    }
}

/// The context a fork at `last_kept` gets when the source's history cannot
/// tell it (compacted before its store kept context changes): the source's
/// context up to the cut, with the events the removed summaries replaced
/// brought back.
fn restored_by_summaries(
    context: &[u64],
    by_seq: &HashMap<u64, &EventOutline>,
    last_kept: u64,
) -> Vec<u64> {
    let (kept_ctx, removed_ctx): (Vec<u64>, Vec<u64>) =
        context.iter().partition(|seq| **seq <= last_kept);
    let wanted: BTreeSet<u64> = removed_ctx
        .iter()
        .filter_map(|s| by_seq.get(s))
        .flat_map(|e| e.replaces.iter().copied())
        .collect();
    let in_context: HashSet<u64> = kept_ctx.iter().copied().collect();
    let restored: Vec<&EventOutline> = wanted
        .iter()
        .filter(|seq| **seq <= last_kept && !in_context.contains(seq))
        .filter_map(|seq| by_seq.get(seq).copied())
        .collect();
    let after: Vec<&EventOutline> = kept_ctx
        .iter()
        .filter_map(|s| by_seq.get(s).copied())
        .collect();
    merge_restored(after, restored)
        .iter()
        .map(Restorable::seq)
        .collect()
}

impl Restorable for EventOutline {
    fn seq(&self) -> u64 {
        self.seq
    }
    fn synthetic(&self) -> bool {
        self.synthetic
    }
    fn system(&self) -> bool {
        self.system
    }
}

/// What a native fork into `id` does with the session it finds there
/// (`found`, expired or not): `Some` to return it when it is a live fork of
/// `source` (a retried fork whose answer was lost), `AlreadyExists` for any
/// other live session, `None` to go on (nothing there, or an expired
/// session the fork replaces).
pub fn fork_target(
    found: Option<Session>,
    source: &SessionId,
    id: &SessionId,
    now: DateTime<Utc>,
) -> Result<Option<Session>> {
    match found {
        Some(s) if !s.is_expired_at(now) => {
            if s.metadata.get(FORKED_FROM).and_then(Value::as_str) == Some(source.as_str()) {
                Ok(Some(s))
            } else {
                Err(SessionError::AlreadyExists {
                    what: "session",
                    id: id.to_string(),
                })
            }
        }
        _ => Ok(None),
    }
}

/// Plans a fork of `source` (a dump of the source session) at `at`: the
/// dump to import as the new session `id`, created at `now` (see
/// [`ForkPlan::new`]).
pub fn fork_dump(
    source: SessionDump,
    at: &ForkAt,
    id: SessionId,
    now: DateTime<Utc>,
) -> Result<SessionDump> {
    let SessionDump {
        session,
        initial_state,
        last_seq,
        events,
        context,
        context_log,
        ..
    } = source;
    let outline = ForkSource {
        session,
        initial_state,
        last_seq,
        events: events.iter().map(EventOutline::of).collect(),
        context,
        context_log,
    };
    let plan = ForkPlan::new(outline, at, id, now)?;
    Ok(SessionDump {
        events: events
            .into_iter()
            .filter(|e| e.seq <= plan.last_seq)
            .collect(),
        session: plan.session,
        initial_state: plan.initial_state,
        last_seq: plan.last_seq,
        context: plan.context,
        shared: SharedState::default(),
        context_log: plan.context_log,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use chrono::TimeZone;
    use serde_json::json;

    use super::*;
    use crate::{ErrorKind, InvocationId, Message, NewSession, StateMap};

    fn dump() -> SessionDump {
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let mut session = NewSession::new("app", "alice", now)
            .unwrap()
            .to_session(now);
        session.key = Some(crate::Key::new("chat:1").unwrap());
        let events: Vec<SessionEvent> = (1..=4u64)
            .map(|seq| {
                let mut e = SessionEvent::new(Message::user(format!("m{seq}")));
                e.seq = seq;
                e.invocation_id = Some(format!("i{}", seq.div_ceil(2)));
                e.state_delta = json!({"step": seq}).as_object().cloned();
                e
            })
            .collect();
        session.version = 4;
        SessionDump {
            session,
            initial_state: StateMap::new(),
            last_seq: 5,
            events,
            context: vec![1, 2, 3, 4],
            shared: SharedState::default(),
            context_log: Vec::new(),
        }
    }

    #[test]
    fn a_fork_cuts_the_archive_replays_state_and_names_its_parent() {
        let now = Utc.with_ymd_and_hms(2026, 2, 1, 0, 0, 0).unwrap();
        let id = SessionId::new("fork-1").unwrap();
        let inv = ForkAt::Invocation(InvocationId::new("i2").unwrap());
        let fork = fork_dump(dump(), &inv, id.clone(), now).unwrap();
        assert_eq!(fork.session.id, id);
        assert_eq!((fork.last_seq, fork.context.clone()), (2, vec![1, 2]));
        assert_eq!(fork.events.len(), 2);
        assert_eq!(fork.session.state.get("step"), Some(&json!(2)));
        assert_eq!(fork.session.key, None, "the key stays with the source");
        assert_eq!(fork.session.created_at, now);
        assert_eq!(fork.session.metadata.get(FORKED_AT_SEQ), Some(&json!(2)));
        assert!(fork.validate().is_ok());
        let whole = fork_dump(dump(), &ForkAt::Latest, id.clone(), now).unwrap();
        assert_eq!((whole.last_seq, whole.events.len()), (5, 4));
        let err = |at: ForkAt| fork_dump(dump(), &at, id.clone(), now).unwrap_err().kind();
        assert_eq!(err(ForkAt::Seq(0)), ErrorKind::NotFound);
        assert_eq!(err(ForkAt::Seq(6)), ErrorKind::NotFound);
        assert_eq!(
            err(ForkAt::Invocation(InvocationId::new("i9").unwrap())),
            ErrorKind::NotFound
        );
    }
}
