//! `RetryLayer`: retries the calls that are safe to repeat when a remote
//! store is briefly unavailable.

use std::time::Duration;

use async_trait::async_trait;
use backon::{ExponentialBuilder, Retryable};
use chrono::{DateTime, Utc};

use crate::dump::SessionDump;
use crate::error::{Result, SessionError};
use crate::event::SessionEvent;
use crate::filter::{EventFilter, Page, SessionQuery};
use crate::ids::{AppName, SessionId, UserId};
use crate::outcome::{AppendOutcome, ImportOutcome, RewindOutcome};
use crate::plan::RewindTo;
use crate::repository::{Capabilities, Erased, SessionRepository};
use crate::search::{SearchHit, SearchQuery};
use crate::session::{NewSession, Session, SessionUpdate};
use crate::state::SharedState;

/// How often and how long [`RetryLayer`] retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (default 3).
    pub max_retries: usize,
    /// The first delay (default 50 ms); each next one doubles, with full jitter.
    pub min_delay: Duration,
    /// The longest delay (default 2 s).
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            min_delay: Duration::from_millis(50),
            max_delay: Duration::from_secs(2),
        }
    }
}

impl RetryPolicy {
    fn backoff(&self) -> ExponentialBuilder {
        ExponentialBuilder::default()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_max_times(self.max_retries)
            .with_jitter()
    }
}

/// Wraps a repository so that calls failing with a retryable error
/// ([`SessionError::is_retryable`]: the store is unreachable or
/// overloaded) are tried again with jittered exponential backoff.
///
/// Only calls that give the same answer when repeated are retried: reads,
/// `append` (idempotent by event id), `import_session` (idempotent by
/// version) and `purge_expired`. `create`, `update`, `delete`,
/// `replace_context` and `rewind` run once: a retry after a write that
/// succeeded but whose answer was lost would report `AlreadyExists`,
/// `Conflict`, `false` or `NotFound` for a call that worked.
#[derive(Debug, Clone)]
pub struct RetryLayer<R> {
    inner: R,
    policy: RetryPolicy,
}

impl<R> RetryLayer<R> {
    /// Wraps `inner` with the default policy.
    pub fn new(inner: R) -> Self {
        Self::with_policy(inner, RetryPolicy::default())
    }

    /// Wraps `inner` with `policy`.
    pub fn with_policy(inner: R, policy: RetryPolicy) -> Self {
        Self { inner, policy }
    }

    /// The wrapped repository.
    pub fn inner(&self) -> &R {
        &self.inner
    }
}

fn retryable(e: &SessionError) -> bool {
    e.is_retryable()
}

fn notify(e: &SessionError, after: Duration) {
    tracing::debug!(kind = ?e.kind(), retry_in_ms = after.as_millis(), "store unavailable; retrying");
}

#[async_trait]
impl<R: SessionRepository> SessionRepository for RetryLayer<R> {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn create(&self, session: NewSession) -> Result<Session> {
        self.inner.create(session).await
    }
    async fn get(&self, id: &SessionId) -> Result<Session> {
        (|| self.inner.get(id))
            .retry(self.policy.backoff())
            .when(retryable)
            .notify(notify)
            .await
    }
    async fn update(&self, id: &SessionId, update: SessionUpdate) -> Result<Session> {
        self.inner.update(id, update).await
    }
    async fn delete(&self, id: &SessionId) -> Result<bool> {
        self.inner.delete(id).await
    }
    async fn list(&self, query: &SessionQuery) -> Result<Page<Session>> {
        (|| self.inner.list(query))
            .retry(self.policy.backoff())
            .when(retryable)
            .notify(notify)
            .await
    }
    async fn purge_expired(&self, now: DateTime<Utc>) -> Result<u64> {
        (|| self.inner.purge_expired(now))
            .retry(self.policy.backoff())
            .when(retryable)
            .notify(notify)
            .await
    }
    async fn append(&self, id: &SessionId, events: Vec<SessionEvent>) -> Result<AppendOutcome> {
        (|| self.inner.append(id, events.clone()))
            .retry(self.policy.backoff())
            .when(retryable)
            .notify(notify)
            .await
    }
    async fn append_owned(
        &self,
        owner: &crate::owner::Owner,
        id: &SessionId,
        events: Vec<SessionEvent>,
    ) -> Result<AppendOutcome> {
        (|| self.inner.append_owned(owner, id, events.clone()))
            .retry(self.policy.backoff())
            .when(retryable)
            .notify(notify)
            .await
    }
    async fn events(&self, id: &SessionId, filter: &EventFilter) -> Result<Page<SessionEvent>> {
        (|| self.inner.events(id, filter))
            .retry(self.policy.backoff())
            .when(retryable)
            .notify(notify)
            .await
    }
    async fn owner_of(&self, id: &SessionId) -> Result<crate::owner::Owner> {
        (|| self.inner.owner_of(id))
            .retry(self.policy.backoff())
            .when(retryable)
            .notify(notify)
            .await
    }
    async fn items(
        &self,
        id: &SessionId,
        key: &str,
        filter: &EventFilter,
    ) -> Result<Page<crate::item::KeyedItem>> {
        (|| self.inner.items(id, key, filter))
            .retry(self.policy.backoff())
            .when(retryable)
            .notify(notify)
            .await
    }
    async fn session_items(
        &self,
        id: &SessionId,
        key: &str,
        filter: &EventFilter,
    ) -> Result<(crate::item::SessionItems, SharedState)> {
        (|| self.inner.session_items(id, key, filter))
            .retry(self.policy.backoff())
            .when(retryable)
            .notify(notify)
            .await
    }
    async fn event_version(&self, id: &SessionId) -> Result<u64> {
        (|| self.inner.event_version(id))
            .retry(self.policy.backoff())
            .when(retryable)
            .notify(notify)
            .await
    }
    async fn replace_context(
        &self,
        id: &SessionId,
        events: Vec<SessionEvent>,
        expected_version: u64,
    ) -> Result<bool> {
        self.inner
            .replace_context(id, events, expected_version)
            .await
    }
    async fn rewind_to(&self, id: &SessionId, to: &RewindTo) -> Result<RewindOutcome> {
        self.inner.rewind_to(id, to).await
    }
    async fn search(&self, query: &SearchQuery) -> Result<Page<SearchHit>> {
        (|| self.inner.search(query))
            .retry(self.policy.backoff())
            .when(retryable)
            .notify(notify)
            .await
    }
    async fn shared_state(&self, app: &AppName, user_id: &UserId) -> Result<SharedState> {
        (|| self.inner.shared_state(app, user_id))
            .retry(self.policy.backoff())
            .when(retryable)
            .notify(notify)
            .await
    }
    async fn export_session(&self, id: &SessionId) -> Result<SessionDump> {
        (|| self.inner.export_session(id))
            .retry(self.policy.backoff())
            .when(retryable)
            .notify(notify)
            .await
    }
    async fn context_log(&self, id: &SessionId) -> Result<crate::ContextLog> {
        (|| self.inner.context_log(id))
            .retry(self.policy.backoff())
            .when(retryable)
            .notify(notify)
            .await
    }
    async fn erase_user(&self, app: &AppName, user_id: &UserId) -> Result<Erased> {
        (|| self.inner.erase_user(app, user_id))
            .retry(self.policy.backoff())
            .when(retryable)
            .notify(notify)
            .await
    }
    /// Retried: a prune that landed but whose answer was lost finds the
    /// version moved on the retry and answers `None`, and the caller plans again.
    async fn prune_events(
        &self,
        id: &SessionId,
        seqs: &[u64],
        expected_version: u64,
    ) -> Result<Option<crate::retention::Pruned>> {
        (|| self.inner.prune_events(id, seqs, expected_version))
            .retry(self.policy.backoff())
            .when(retryable)
            .notify(notify)
            .await
    }

    /// Retried with the same id: a fork that landed but whose answer was
    /// lost is found and returned on the retry.
    async fn fork_session(
        &self,
        source: &SessionId,
        at: &crate::ForkAt,
        id: SessionId,
        now: DateTime<Utc>,
    ) -> Result<Session> {
        (|| self.inner.fork_session(source, at, id.clone(), now))
            .retry(self.policy.backoff())
            .when(retryable)
            .notify(notify)
            .await
    }

    async fn import_session(&self, dump: SessionDump) -> Result<ImportOutcome> {
        (|| self.inner.import_session(dump.clone()))
            .retry(self.policy.backoff())
            .when(retryable)
            .notify(notify)
            .await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::{InMemoryRepository, Message};

    /// The memory store, failing the next `failures` calls with `Unavailable`.
    struct Flaky {
        inner: InMemoryRepository,
        failures: AtomicUsize,
        calls: AtomicUsize,
    }

    impl Flaky {
        fn fail(&self) -> Result<()> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let left = self.failures.load(Ordering::SeqCst);
            if left > 0 {
                self.failures.store(left - 1, Ordering::SeqCst);
                return Err(SessionError::unavailable("flaky", "connection reset"));
            }
            Ok(())
        }
    }

    #[async_trait]
    impl SessionRepository for Flaky {
        fn capabilities(&self) -> Capabilities {
            self.inner.capabilities()
        }
        async fn create(&self, s: NewSession) -> Result<Session> {
            self.fail()?;
            self.inner.create(s).await
        }
        async fn get(&self, id: &SessionId) -> Result<Session> {
            self.fail()?;
            self.inner.get(id).await
        }
        async fn update(&self, id: &SessionId, u: SessionUpdate) -> Result<Session> {
            self.inner.update(id, u).await
        }
        async fn delete(&self, id: &SessionId) -> Result<bool> {
            self.inner.delete(id).await
        }
        async fn list(&self, q: &SessionQuery) -> Result<Page<Session>> {
            self.inner.list(q).await
        }
        async fn purge_expired(&self, now: DateTime<Utc>) -> Result<u64> {
            self.inner.purge_expired(now).await
        }
        async fn append(&self, id: &SessionId, e: Vec<SessionEvent>) -> Result<AppendOutcome> {
            self.fail()?;
            self.inner.append(id, e).await
        }
        async fn events(&self, id: &SessionId, f: &EventFilter) -> Result<Page<SessionEvent>> {
            self.inner.events(id, f).await
        }
        async fn event_version(&self, id: &SessionId) -> Result<u64> {
            self.inner.event_version(id).await
        }
        async fn replace_context(
            &self,
            id: &SessionId,
            e: Vec<SessionEvent>,
            v: u64,
        ) -> Result<bool> {
            self.fail()?;
            self.inner.replace_context(id, e, v).await
        }
        async fn rewind_to(&self, id: &SessionId, to: &RewindTo) -> Result<RewindOutcome> {
            self.inner.rewind_to(id, to).await
        }
        async fn search(&self, q: &SearchQuery) -> Result<Page<SearchHit>> {
            self.inner.search(q).await
        }
        async fn shared_state(&self, a: &AppName, u: &UserId) -> Result<SharedState> {
            self.inner.shared_state(a, u).await
        }
        async fn export_session(&self, id: &SessionId) -> Result<SessionDump> {
            self.inner.export_session(id).await
        }
        async fn import_session(&self, d: SessionDump) -> Result<ImportOutcome> {
            self.inner.import_session(d).await
        }
        async fn erase_user(&self, app: &AppName, user: &UserId) -> Result<Erased> {
            self.inner.erase_user(app, user).await
        }
        async fn prune_events(
            &self,
            id: &SessionId,
            seqs: &[u64],
            v: u64,
        ) -> Result<Option<crate::retention::Pruned>> {
            self.inner.prune_events(id, seqs, v).await
        }
    }

    fn flaky(failures: usize) -> RetryLayer<Flaky> {
        RetryLayer::with_policy(
            Flaky {
                inner: InMemoryRepository::new(),
                failures: AtomicUsize::new(failures),
                calls: AtomicUsize::new(0),
            },
            RetryPolicy {
                max_retries: 3,
                min_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(2),
            },
        )
    }

    #[tokio::test]
    async fn idempotent_calls_are_retried_until_the_store_answers() {
        let repo = flaky(0);
        let s = repo
            .create(NewSession::new("app", "alice", Utc::now()).unwrap())
            .await
            .unwrap();
        repo.inner().failures.store(2, Ordering::SeqCst);
        let out = repo
            .append(&s.id, vec![SessionEvent::new(Message::user("hi"))])
            .await
            .unwrap();
        assert_eq!(out.seqs, vec![1], "written once, after two failures");
        repo.inner().failures.store(3, Ordering::SeqCst);
        assert_eq!(repo.get(&s.id).await.unwrap().event_count, 1);
        repo.inner().failures.store(4, Ordering::SeqCst);
        let err = repo.get(&s.id).await.unwrap_err();
        assert!(err.is_retryable(), "gives up after max_retries: {err}");
    }

    #[tokio::test]
    async fn calls_unsafe_to_repeat_run_once() {
        let repo = flaky(1);
        let err = repo
            .create(NewSession::new("app", "alice", Utc::now()).unwrap())
            .await
            .unwrap_err();
        assert!(err.is_retryable());
        assert_eq!(
            repo.inner().calls.load(Ordering::SeqCst),
            1,
            "create ran once"
        );
        let s = repo
            .create(NewSession::new("app", "alice", Utc::now()).unwrap())
            .await
            .unwrap();
        repo.inner().failures.store(1, Ordering::SeqCst);
        let calls = repo.inner().calls.load(Ordering::SeqCst);
        assert!(repo.replace_context(&s.id, vec![], 0).await.is_err());
        assert_eq!(
            repo.inner().calls.load(Ordering::SeqCst),
            calls + 1,
            "a compare-and-swap is never repeated"
        );
    }
}
