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

use crate::context_log::ContextChange;
use crate::error::{Result, SessionError};
use crate::event::{SessionEvent, REPLACES_KEY};
use crate::ids::{InvocationId, SessionId};
use crate::plan::RewindPlan;
use crate::repository::SessionDump;
use crate::session::SessionStatus;
use crate::state::SharedState;
use crate::validate::next_version;

/// The metadata key naming the session a fork was made from.
pub const FORKED_FROM: &str = "forked_from";
/// The metadata key holding the last seq of the source a fork holds.
pub const FORKED_AT_SEQ: &str = "forked_at_seq";

/// Where a fork branches off its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForkAt {
    /// After the event with this seq: the fork holds it and everything before.
    Seq(u64),
    /// Before the first event of this invocation: the point to run that turn again differently.
    Invocation(InvocationId),
    /// After the source's latest event: a copy of the whole session.
    Latest,
}

/// The events, in any order, that the removed context events had replaced
/// (their `replaces` metadata): what a cut brings back into the context.
pub(crate) fn replaced_by<'a>(
    removed: impl IntoIterator<Item = &'a SessionEvent>,
) -> BTreeSet<u64> {
    removed
        .into_iter()
        .filter_map(|e| e.metadata.get(REPLACES_KEY))
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(Value::as_u64)
        .collect()
}

/// The context after a cut, with `restored` events brought back: the
/// summaries still in it, then the restored summaries, then every other
/// event in seq order.
pub(crate) fn merge_restored(
    after: Vec<SessionEvent>,
    restored: Vec<SessionEvent>,
) -> Vec<SessionEvent> {
    let (mut context, mut rest): (Vec<SessionEvent>, Vec<SessionEvent>) =
        after.into_iter().partition(SessionEvent::is_synthetic);
    let (old_summaries, restored): (Vec<SessionEvent>, Vec<SessionEvent>) =
        restored.into_iter().partition(SessionEvent::is_synthetic);
    context.extend(old_summaries);
    rest.extend(restored);
    rest.sort_by_key(|e| e.seq);
    context.extend(rest);
    context
}

/// Plans a fork of `source` (a dump of the source session) at `at`: the
/// dump to import as the new session `id`, created at `now`.
///
/// `NotFound` for a seq the source never had or an invocation it does not
/// hold. The fork is active, has no resolution key (the source keeps it),
/// keeps the source's owner, metadata and expiry, and its own counters
/// start from the cut.
pub fn fork_dump(
    source: SessionDump,
    at: &ForkAt,
    id: SessionId,
    now: DateTime<Utc>,
) -> Result<SessionDump> {
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
    let SessionDump {
        mut session,
        initial_state,
        events,
        context,
        context_log,
        ..
    } = source;
    let source_id = session.id.clone();
    let by_seq: HashMap<u64, &SessionEvent> = events.iter().map(|e| (e.seq, e)).collect();
    let (kept_ctx, removed_ctx): (Vec<u64>, Vec<u64>) =
        context.iter().partition(|seq| **seq <= last_kept);
    let wanted = replaced_by(removed_ctx.iter().filter_map(|s| by_seq.get(s).copied()));
    let in_context: HashSet<u64> = kept_ctx.iter().copied().collect();
    let restored: Vec<SessionEvent> = wanted
        .iter()
        .filter(|seq| **seq <= last_kept && !in_context.contains(seq))
        .filter_map(|seq| by_seq.get(seq).map(|e| (*e).clone()))
        .collect();
    let after: Vec<SessionEvent> = kept_ctx
        .iter()
        .filter_map(|s| by_seq.get(s).map(|e| (*e).clone()))
        .collect();
    let brought_back = !restored.is_empty();
    let context: Vec<u64> = merge_restored(after, restored)
        .iter()
        .map(|e| e.seq)
        .collect();
    let kept: Vec<SessionEvent> = events.into_iter().filter(|e| e.seq <= last_kept).collect();

    // The context history up to the cut; a change whose context reaches
    // past it belongs to the source's later life.
    let mut context_log: Vec<ContextChange> = context_log
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
    Ok(SessionDump {
        session,
        initial_state,
        last_seq: last_kept,
        events: kept,
        context,
        shared: SharedState::default(),
        context_log,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use chrono::TimeZone;
    use serde_json::json;

    use super::*;
    use crate::{ErrorKind, Message, NewSession, StateMap};

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
