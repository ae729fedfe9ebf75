//! Retention policies and prune plans: which archived events a policy
//! lets go, and what a prune writes. Pure: no store is read here; the
//! runs that read a store are in `run.rs`.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Result, SessionError};
use crate::event::SessionEvent;
use crate::ids::SessionId;
use crate::message::Role;
use crate::plan::Head;
use crate::session::Session;
use crate::state::StateMap;
use crate::validate::next_version;

/// The metadata key that holds a session's own [`ArchiveRetention`].
pub const RETENTION_KEY: &str = "retention";

/// The longest age a policy may keep: 100 years.
const MAX_AGE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Which archived events of a session to keep; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchiveRetention {
    /// Keep the latest this many archived events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_latest: Option<u64>,
    /// Keep events younger than this many seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_age_secs: Option<u64>,
}

impl ArchiveRetention {
    /// Keeps the latest `n` archived events (0 keeps only what always stays).
    pub fn keep_latest(n: u64) -> Self {
        Self {
            keep_latest: Some(n),
            max_age_secs: None,
        }
    }

    /// Keeps the events younger than `age` (at least a second, at most 100 years).
    pub fn younger_than(age: Duration) -> Result<Self> {
        Ok(Self {
            keep_latest: None,
            max_age_secs: Some(check_age(age)?),
        })
    }

    /// Also keeps no more than the latest `n` events.
    pub fn and_keep_latest(mut self, n: u64) -> Self {
        self.keep_latest = Some(n);
        self
    }

    /// Also keeps no event older than `age`.
    pub fn and_younger_than(mut self, age: Duration) -> Result<Self> {
        self.max_age_secs = Some(check_age(age)?);
        Ok(self)
    }

    /// The most archived events kept, if limited.
    pub fn latest(&self) -> Option<u64> {
        self.keep_latest
    }

    /// The oldest age kept, if limited.
    pub fn max_age(&self) -> Option<Duration> {
        self.max_age_secs.map(Duration::from_secs)
    }

    /// The policy as the metadata value stored under [`RETENTION_KEY`].
    pub fn to_metadata(&self) -> serde_json::Value {
        let mut out = serde_json::Map::new();
        if let Some(n) = self.keep_latest {
            out.insert("keep_latest".into(), n.into());
        }
        if let Some(secs) = self.max_age_secs {
            out.insert("max_age_secs".into(), secs.into());
        }
        serde_json::Value::Object(out)
    }

    /// The policy session `session` stores in its metadata, if any: a
    /// value that is not a policy is `InvalidInput` naming the session.
    pub fn of_session(session: &Session) -> Result<Option<Self>> {
        Self::from_metadata(&session.metadata, &session.id)
    }

    fn from_metadata(metadata: &StateMap, id: &SessionId) -> Result<Option<Self>> {
        let Some(value) = metadata.get(RETENTION_KEY) else {
            return Ok(None);
        };
        let policy: Self = serde_json::from_value(value.clone()).map_err(|e| {
            SessionError::invalid(
                "retention",
                format!("session {id} metadata `{RETENTION_KEY}` is not a retention policy: {e}"),
            )
        })?;
        if let Some(secs) = policy.max_age_secs {
            check_age(Duration::from_secs(secs))?;
        }
        Ok(Some(policy))
    }

    /// The instant before which events are too old, if an age is set.
    pub(crate) fn cutoff(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let secs = i64::try_from(self.max_age_secs?).ok()?;
        now.checked_sub_signed(chrono::TimeDelta::try_seconds(secs)?)
    }

    /// The seqs this policy removes, given the archive's oldest events in
    /// seq order (`oldest` must reach past the first `event_count - N`
    /// events and the first event not older than the age), the archive's
    /// size and the context's seqs. Context events, stored system messages
    /// and events with a state change are never chosen.
    pub fn removable(
        &self,
        oldest: &[SessionEvent],
        event_count: u64,
        context: &HashSet<u64>,
        now: DateTime<Utc>,
    ) -> Vec<u64> {
        let beyond = self.keep_latest.map_or(0, |n| {
            usize::try_from(event_count.saturating_sub(n)).unwrap_or(usize::MAX)
        });
        let too_old = self.cutoff(now).map_or(0, |cutoff| {
            oldest
                .iter()
                .position(|e| e.timestamp >= cutoff)
                .unwrap_or(oldest.len())
        });
        oldest
            .iter()
            .take(beyond.max(too_old))
            .filter(|e| !always_kept(e, context))
            .map(|e| e.seq)
            .collect()
    }

    /// Whether `oldest` (of an archive of `event_count`) reaches far enough
    /// for [`Self::removable`].
    pub(crate) fn covered(
        &self,
        oldest: &[SessionEvent],
        event_count: u64,
        now: DateTime<Utc>,
    ) -> bool {
        let read = u64::try_from(oldest.len()).unwrap_or(u64::MAX);
        let count_done = self
            .keep_latest
            .is_none_or(|n| read >= event_count.saturating_sub(n));
        let age_done = self
            .cutoff(now)
            .is_none_or(|cutoff| oldest.iter().any(|e| e.timestamp >= cutoff));
        count_done && age_done
    }
}

/// Whether an event stays whatever the policy says: it is in the context,
/// a stored system message, or a state change.
fn always_kept(e: &SessionEvent, context: &HashSet<u64>) -> bool {
    context.contains(&e.seq) || replayed(e)
}

fn check_age(age: Duration) -> Result<u64> {
    if age < Duration::from_secs(1) || age > MAX_AGE {
        return Err(SessionError::invalid(
            "retention",
            "the age kept must be between one second and 100 years",
        ));
    }
    Ok(age.as_secs())
}

/// What one prune removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Pruned {
    /// Archived events removed.
    pub removed: u64,
    /// The session's version after the prune (unchanged when nothing went).
    pub version: u64,
}

/// What [`crate::retention::prune_archives`] did over a store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RetentionReport {
    /// Sessions with a policy that were looked at.
    pub sessions: u64,
    /// Sessions that lost events.
    pub pruned_sessions: u64,
    /// Archived events removed in all.
    pub removed: u64,
}

/// Where an event a prune names stands, as a store read it in the same
/// step as the session's [`Head`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// The archive does not hold it (never assigned, rewound or pruned).
    Absent,
    /// Archived and outside the context: a prune may remove it.
    Archived,
    /// In the current context: a prune never removes it.
    InContext,
    /// Archived, but a stored system message or a state change, which
    /// rewind and fork replay: a prune never removes it (retention keeps
    /// it whatever the policy says).
    Replayed,
}

impl Standing {
    /// The standing of a seq from what a store read: `None` when the
    /// archive does not hold it, else whether it is in the context and
    /// whether it is replayed ([`replayed`]).
    pub fn of(held: Option<(bool, bool)>) -> Self {
        match held {
            None => Self::Absent,
            Some((true, _)) => Self::InContext,
            Some((false, true)) => Self::Replayed,
            Some((false, false)) => Self::Archived,
        }
    }

    /// The standing of `event`, which the archive holds, given whether it
    /// is in the context.
    pub fn of_event(event: &SessionEvent, in_context: bool) -> Self {
        Self::of(Some((in_context, replayed(event))))
    }
}

/// Whether rewind and fork replay `e`, so that no prune may remove it: a
/// stored (not synthetic) system message, or an event with a state change.
pub fn replayed(e: &SessionEvent) -> bool {
    (e.role() == Role::System && !e.is_synthetic())
        || e.state_delta.as_ref().is_some_and(|d| !d.is_empty())
}

/// The plan of a prune, which a store persists with
/// [`crate::SessionRepository::prune_events`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrunePlan {
    /// The version after the prune.
    pub version: u64,
    /// The seqs to remove: each named once, in the order given, every one
    /// archived and outside the context.
    pub seqs: Vec<u64>,
}

impl PrunePlan {
    /// Plans removing the archived events at `seqs` from the session at
    /// `head`, where `standing` tells where each stands (read with the
    /// head): `None` when the version is not `expected_version` (nothing is
    /// written); `InvalidInput` naming the session and the seq when one is
    /// in the context, replayed ([`replayed`]) or not in the archive
    /// (nothing is pruned).
    pub fn new(
        head: &Head,
        expected_version: u64,
        seqs: &[u64],
        standing: impl Fn(u64) -> Standing,
    ) -> Result<Option<Self>> {
        if head.version != expected_version {
            return Ok(None);
        }
        let mut seen = HashSet::with_capacity(seqs.len());
        let mut planned = Vec::with_capacity(seqs.len());
        for &seq in seqs {
            if !seen.insert(seq) {
                continue;
            }
            match standing(seq) {
                Standing::Archived => planned.push(seq),
                Standing::InContext => {
                    return Err(SessionError::invalid(
                        "seqs",
                        format!(
                            "seq {seq} of session {} is in the context: only archived events \
                             outside it can be pruned (replace the context first)",
                            head.id
                        ),
                    ))
                }
                Standing::Replayed => {
                    return Err(SessionError::invalid(
                        "seqs",
                        format!(
                            "seq {seq} of session {} is a system message or a state change, \
                             which rewind and fork replay: it is never pruned",
                            head.id
                        ),
                    ))
                }
                Standing::Absent => {
                    return Err(SessionError::invalid(
                        "seqs",
                        format!("session {} holds no archived event at seq {seq}", head.id),
                    ))
                }
            }
        }
        Ok(Some(Self {
            version: next_version(head.version)?,
            seqs: planned,
        }))
    }
}

/// Which policy applies to which session: its own (in its metadata), else
/// its app's default, else the default for every app, else none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionRules {
    every_app: Option<ArchiveRetention>,
    apps: HashMap<String, ArchiveRetention>,
}

impl RetentionRules {
    /// No defaults: only sessions with their own policy are pruned.
    pub fn new() -> Self {
        Self::default()
    }

    /// The policy of sessions of any app without their own.
    pub fn every_app(mut self, policy: ArchiveRetention) -> Self {
        self.every_app = Some(policy);
        self
    }

    /// The policy of sessions of `app` without their own.
    pub fn app(mut self, app: impl Into<String>, policy: ArchiveRetention) -> Self {
        self.apps.insert(app.into(), policy);
        self
    }

    /// The policy that applies to `session`.
    pub fn policy_for(&self, session: &Session) -> Result<Option<ArchiveRetention>> {
        Ok(ArchiveRetention::of_session(session)?
            .or_else(|| self.apps.get(session.app.as_str()).copied())
            .or(self.every_app))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{ErrorKind, SessionStatus};

    fn head(version: u64) -> Head {
        Head::new(
            SessionId::new("s-1").unwrap(),
            9,
            version,
            SessionStatus::Active,
        )
    }

    /// Seqs 1..=6 archived, 5 and 6 in the context, 3 a state change.
    fn standing(seq: u64) -> Standing {
        match seq {
            5 | 6 => Standing::InContext,
            3 => Standing::Replayed,
            1 | 2 | 4 => Standing::Archived,
            _ => Standing::Absent,
        }
    }

    #[test]
    fn a_prune_plans_archived_events_outside_the_context_once_each() {
        let plan = PrunePlan::new(&head(3), 3, &[2, 1, 2], standing)
            .unwrap()
            .unwrap();
        assert_eq!((plan.version, plan.seqs), (4, vec![2, 1]));
        assert_eq!(
            PrunePlan::new(&head(4), 3, &[5], standing).unwrap(),
            None,
            "a moved session is planned again, whatever the seqs"
        );
    }

    #[test]
    fn a_prune_of_a_context_event_or_an_unheld_seq_is_invalid_input_naming_it() {
        let err = PrunePlan::new(&head(3), 3, &[1, 5], standing).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(
            err.to_string()
                .contains("seq 5 of session s-1 is in the context"),
            "{err}"
        );
        let err = PrunePlan::new(&head(3), 3, &[1, 3], standing).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(
            err.to_string()
                .contains("seq 3 of session s-1 is a system message or a state change"),
            "{err}"
        );
        let err = PrunePlan::new(&head(3), 3, &[1, 7], standing).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(
            err.to_string()
                .contains("session s-1 holds no archived event at seq 7"),
            "{err}"
        );
    }
}
