//! The retention runs that read and write a store: one session, every
//! session of a store, and after each append.

use std::collections::HashSet;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::policy::{ArchiveRetention, Pruned, RetentionReport, RetentionRules};
use crate::clock::SharedClock;
use crate::error::{Result, SessionError};
use crate::event::SessionEvent;
use crate::filter::{EventFilter, EventView, SessionQuery};
use crate::ids::SessionId;
use crate::outcome::AppendOutcome;
use crate::owner::Owner;
use crate::repository::{SessionRepository, SessionRepositoryExt};
use crate::service::AppendHook;

/// How often a prune planned on a version that moved is planned again.
const ATTEMPTS: usize = 8;

/// Archived events read per page while planning a prune.
const PAGE: usize = 500;

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
    let over_count = policy.latest().is_some_and(|n| session.event_count > n);
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
