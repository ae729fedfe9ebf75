//! Retention inside a live session: an archive policy that removes old
//! archived events while the session goes on.
//!
//! An [`ArchiveRetention`] keeps the latest N events and/or the events
//! younger than a duration. It works on the oldest end of the archive: an
//! event goes when it is among the archive's first `event_count - N`
//! events, or when it and every event before it are older than the
//! duration. Whatever the policy says, these stay:
//!
//! - events in the context (what the agent sends to its model);
//! - stored system messages (the pinned instructions);
//! - events that changed session state (rewind and fork replay the state
//!   from the events' deltas).
//!
//! Seqs never move: the archive simply has gaps where events went, the
//! next append continues after the highest seq ever assigned, search no
//! longer finds the removed events, and an export holds what is left (and
//! imports elsewhere as it is). A rewind or fork into the removed part
//! cannot bring those events back.
//!
//! A session's own policy lives in its metadata under [`RETENTION_KEY`];
//! [`RetentionRules`] add defaults per app and for every app.
//! [`prune_archive`] runs a policy on one session, [`prune_archives`] on
//! every session of a store (what `agent-session purge` does), and
//! [`PruneOnAppend`] after every append.
//!
//! ```
//! use session_core::retention::{prune_archive, ArchiveRetention};
//! use session_core::{InMemoryRepository, Message, NewSession, SessionEvent, SessionRepository};
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let repo = InMemoryRepository::new();
//! let now = chrono::Utc::now();
//! let s = repo.create(NewSession::new("app", "alice", now)?).await?;
//! for i in 0..5 {
//!     repo.append(&s.id, vec![SessionEvent::new(Message::user(format!("m{i}")))]).await?;
//! }
//! // Keep the context to the last two events, then keep the latest three archived.
//! let context: Vec<SessionEvent> = repo.events(&s.id, &Default::default()).await?.items;
//! let v = repo.event_version(&s.id).await?;
//! repo.replace_context(&s.id, context[3..].to_vec(), v).await?;
//! let pruned = prune_archive(&repo, &s.id, &ArchiveRetention::keep_latest(3), now).await?;
//! assert_eq!(pruned.removed, 2);
//! assert_eq!(repo.get(&s.id).await?.event_count, 3);
//! # Ok::<(), session_core::SessionError>(())
//! # }).unwrap();
//! ```

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::plan::Head;
use crate::service::{AppendHook, Owner};
use crate::validate::next_version;
use crate::{
    AppendOutcome, EventFilter, EventView, Result, Role, Session, SessionError, SessionEvent,
    SessionId, SessionQuery, SessionRepository, SessionRepositoryExt, SharedClock, StateMap,
};

/// The metadata key that holds a session's own [`ArchiveRetention`].
pub const RETENTION_KEY: &str = "retention";

/// The longest age a policy may keep: 100 years.
const MAX_AGE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// How often a prune planned on a version that moved is planned again.
const ATTEMPTS: usize = 8;

/// Archived events read per page while planning a prune.
const PAGE: usize = 500;

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
    fn cutoff(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
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
    fn covered(&self, oldest: &[SessionEvent], event_count: u64, now: DateTime<Utc>) -> bool {
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

/// What [`prune_archives`] did over a store.
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
/// [`SessionRepository::prune_events`].
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

/// Runs `policy` on session `id` at `now`: reads the context and the
/// oldest archived events, asks [`ArchiveRetention::removable`], and
/// removes them with [`SessionRepository::prune_events`] on the version
/// the plan was made on (planned again if a writer moved the session).
pub async fn prune_archive<R: SessionRepository + ?Sized>(
    repo: &R,
    id: &SessionId,
    policy: &ArchiveRetention,
    now: DateTime<Utc>,
) -> Result<Pruned> {
    for _ in 0..ATTEMPTS {
        let session = repo.get(id).await?;
        let context: HashSet<u64> = repo
            .all_events(id, EventView::Context)
            .await?
            .iter()
            .map(|e| e.seq)
            .collect();
        let oldest = oldest_events(repo, id, policy, session.event_count, now).await?;
        let seqs = policy.removable(&oldest, session.event_count, &context, now);
        if seqs.is_empty() {
            return Ok(Pruned {
                removed: 0,
                version: session.version,
            });
        }
        if let Some(pruned) = repo.prune_events(id, &seqs, session.version).await? {
            return Ok(pruned);
        }
    }
    Err(SessionError::backend(
        repo.capabilities().backend,
        format!("session {id} kept moving while its archive was pruned ({ATTEMPTS} attempts)"),
    ))
}

/// The archive's oldest events, page by page, until `policy` can decide.
async fn oldest_events<R: SessionRepository + ?Sized>(
    repo: &R,
    id: &SessionId,
    policy: &ArchiveRetention,
    event_count: u64,
    now: DateTime<Utc>,
) -> Result<Vec<SessionEvent>> {
    let mut out = Vec::new();
    let mut filter = EventFilter::archive().page(0, PAGE);
    while !policy.covered(&out, event_count, now) {
        let page = repo.events(id, &filter).await?;
        let next = page.next_after();
        out.extend(page.items);
        match next {
            Some(seq) => filter = filter.after(seq),
            None => break,
        }
    }
    Ok(out)
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

/// Runs the policy [`RetentionRules`] give each session of the store (of
/// `app` only, if given) at `now`. A session whose policy cannot be read,
/// or that a prune fails on, is logged and skipped; the others go on.
pub async fn prune_archives<R: SessionRepository + ?Sized>(
    repo: &R,
    rules: &RetentionRules,
    app: Option<&str>,
    now: DateTime<Utc>,
) -> Result<RetentionReport> {
    let mut report = RetentionReport::default();
    let mut query = SessionQuery::default().page(0, 100);
    query.app = app.map(str::to_owned);
    loop {
        let page = repo.list(&query).await?;
        for s in &page.items {
            let policy = match rules.policy_for(s) {
                Ok(Some(p)) => p,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(session_id = %s.id, error = %e, "retention policy unreadable, session skipped");
                    continue;
                }
            };
            report.sessions = report.sessions.saturating_add(1);
            match prune_archive(repo, &s.id, &policy, now).await {
                Ok(p) if p.removed > 0 => {
                    report.pruned_sessions = report.pruned_sessions.saturating_add(1);
                    report.removed = report.removed.saturating_add(p.removed);
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(session_id = %s.id, error = %e, "archive prune failed, session skipped");
                }
            }
        }
        if !page.has_more {
            return Ok(report);
        }
        query.page = query.page.saturating_add(1);
    }
}

/// An [`AppendHook`] that runs the retention policy of a session after
/// each append that wrote to it. A failed prune is logged; the append
/// stands. Cheap when nothing is due: it reads the session and, for an
/// age policy, the oldest archived event.
#[derive(Debug, Clone)]
pub struct PruneOnAppend {
    rules: RetentionRules,
    clock: SharedClock,
}

impl PruneOnAppend {
    /// Prunes by `rules` on `clock`'s time.
    pub fn new(rules: RetentionRules, clock: SharedClock) -> Self {
        Self { rules, clock }
    }
}

/// Runs the policy `rules` give session `id` when it is due: the archive
/// holds more events than the policy keeps, or its oldest event is past
/// the age. Reads the session and, for an age policy, the oldest event;
/// prunes only then. What [`PruneOnAppend`] and the service's
/// prune-on-append run.
pub async fn prune_if_due<R: SessionRepository + ?Sized>(
    repo: &R,
    rules: &RetentionRules,
    id: &SessionId,
    now: DateTime<Utc>,
) -> Result<Pruned> {
    let session = repo.get(id).await?;
    let idle = Pruned {
        removed: 0,
        version: session.version,
    };
    let Some(policy) = rules.policy_for(&session)? else {
        return Ok(idle);
    };
    let over_count = policy.keep_latest.is_some_and(|n| session.event_count > n);
    let over_age = match policy.cutoff(now) {
        Some(cutoff) => repo
            .events(id, &EventFilter::archive().page(0, 1))
            .await?
            .items
            .first()
            .is_some_and(|e| e.timestamp < cutoff),
        None => false,
    };
    if over_count || over_age {
        prune_archive(repo, id, &policy, now).await
    } else {
        Ok(idle)
    }
}

#[async_trait]
impl AppendHook for PruneOnAppend {
    async fn after_append(
        &self,
        repository: &dyn SessionRepository,
        _owner: &Owner,
        session_id: &SessionId,
        _outcome: &AppendOutcome,
    ) {
        let due = prune_if_due(repository, &self.rules, session_id, self.clock.now());
        if let Err(e) = due.await {
            tracing::warn!(session_id = %session_id, error = %e, "archive prune after append failed");
        }
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
