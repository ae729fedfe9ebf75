//! `TracingLayer`: one span per repository call, with its duration and outcome.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tracing::Instrument;

use crate::dump::SessionDump;
use crate::error::{ErrorKind, Result, SessionError};
use crate::event::SessionEvent;
use crate::filter::{EventFilter, Page, SessionQuery};
use crate::ids::{AppName, SessionId, UserId};
use crate::outcome::{AppendOutcome, ImportOutcome, RewindOutcome};
use crate::plan::RewindTo;
use crate::repository::{Capabilities, Erased, SessionRepository};
use crate::search::{SearchHit, SearchQuery};
use crate::session::{NewSession, Session, SessionUpdate};
use crate::state::SharedState;

/// Wraps a repository so that every call runs in a `debug` span
/// `session_store` with the fields `backend`, `op` and (where there is one)
/// `session_id`, and ends with a `debug` event carrying `elapsed_us` and,
/// on failure, the error `kind`. Identifiers are logged; event content,
/// state and connection URLs never are.
///
/// `agent_session::open` wraps every store in it.
#[derive(Clone)]
pub struct TracingLayer<R> {
    inner: R,
    observer: Option<Arc<dyn StoreObserver>>,
}

/// Told of every call a [`TracingLayer`] sees: how to feed store latency
/// and errors into metrics (the server's `/metrics` uses one).
pub trait StoreObserver: Send + Sync {
    /// One finished call: the backend, the operation (`append`, `get`,
    /// ...), how long it took and, when it failed, the error's kind.
    fn observe(
        &self,
        backend: &'static str,
        op: &'static str,
        elapsed: Duration,
        error: Option<ErrorKind>,
    );
}

impl<R: std::fmt::Debug> std::fmt::Debug for TracingLayer<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TracingLayer")
            .field("inner", &self.inner)
            .field("observed", &self.observer.is_some())
            .finish()
    }
}

impl<R> TracingLayer<R> {
    /// Wraps `inner`.
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            observer: None,
        }
    }

    /// Also tells `observer` of every call.
    pub fn with_observer(mut self, observer: Arc<dyn StoreObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The wrapped repository.
    pub fn inner(&self) -> &R {
        &self.inner
    }
}

impl<R: SessionRepository> TracingLayer<R> {
    async fn traced<T>(
        &self,
        op: &'static str,
        session_id: Option<&str>,
        call: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        if self.observer.is_none() && !tracing::enabled!(tracing::Level::DEBUG) {
            // Nothing would see the span or the timing: skip the clock reads.
            return call.await;
        }
        let backend = self.inner.capabilities().backend;
        let span = tracing::debug_span!(
            "session_store",
            backend,
            op,
            session_id = session_id.unwrap_or_default()
        );
        async move {
            let started = Instant::now();
            let out = call.await;
            let elapsed = started.elapsed();
            let elapsed_us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
            match &out {
                Ok(_) => tracing::debug!(elapsed_us, "ok"),
                Err(e) => tracing::debug!(elapsed_us, kind = ?e.kind(), "failed"),
            }
            if let Some(observer) = &self.observer {
                observer.observe(
                    backend,
                    op,
                    elapsed,
                    out.as_ref().err().map(SessionError::kind),
                );
            }
            out
        }
        .instrument(span)
        .await
    }
}

#[async_trait]
impl<R: SessionRepository> SessionRepository for TracingLayer<R> {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn create(&self, session: NewSession) -> Result<Session> {
        let id = session.id.clone();
        self.traced("create", Some(&id), self.inner.create(session))
            .await
    }
    async fn get(&self, id: &SessionId) -> Result<Session> {
        self.traced("get", Some(id), self.inner.get(id)).await
    }
    async fn update(&self, id: &SessionId, update: SessionUpdate) -> Result<Session> {
        self.traced("update", Some(id), self.inner.update(id, update))
            .await
    }
    async fn delete(&self, id: &SessionId) -> Result<bool> {
        self.traced("delete", Some(id), self.inner.delete(id)).await
    }
    async fn list(&self, query: &SessionQuery) -> Result<Page<Session>> {
        self.traced("list", None, self.inner.list(query)).await
    }
    async fn purge_expired(&self, now: DateTime<Utc>) -> Result<u64> {
        self.traced("purge_expired", None, self.inner.purge_expired(now))
            .await
    }
    async fn append(&self, id: &SessionId, events: Vec<SessionEvent>) -> Result<AppendOutcome> {
        self.traced("append", Some(id), self.inner.append(id, events))
            .await
    }
    async fn append_owned(
        &self,
        owner: &crate::owner::Owner,
        id: &SessionId,
        events: Vec<SessionEvent>,
    ) -> Result<AppendOutcome> {
        self.traced(
            "append",
            Some(id),
            self.inner.append_owned(owner, id, events),
        )
        .await
    }
    async fn events(&self, id: &SessionId, filter: &EventFilter) -> Result<Page<SessionEvent>> {
        self.traced("events", Some(id), self.inner.events(id, filter))
            .await
    }
    async fn owner_of(&self, id: &SessionId) -> Result<crate::owner::Owner> {
        self.traced("owner_of", Some(id), self.inner.owner_of(id))
            .await
    }
    async fn items(
        &self,
        id: &SessionId,
        key: &str,
        filter: &EventFilter,
    ) -> Result<Page<crate::item::KeyedItem>> {
        self.traced("items", Some(id), self.inner.items(id, key, filter))
            .await
    }
    async fn session_items(
        &self,
        id: &SessionId,
        key: &str,
        filter: &EventFilter,
    ) -> Result<(crate::item::SessionItems, SharedState)> {
        let read = self.inner.session_items(id, key, filter);
        self.traced("session_items", Some(id), read).await
    }
    async fn event_version(&self, id: &SessionId) -> Result<u64> {
        self.traced("event_version", Some(id), self.inner.event_version(id))
            .await
    }
    async fn replace_context(
        &self,
        id: &SessionId,
        events: Vec<SessionEvent>,
        expected_version: u64,
    ) -> Result<bool> {
        let call = self.inner.replace_context(id, events, expected_version);
        self.traced("replace_context", Some(id), call).await
    }
    async fn rewind_to(&self, id: &SessionId, to: &RewindTo) -> Result<RewindOutcome> {
        self.traced("rewind", Some(id), self.inner.rewind_to(id, to))
            .await
    }
    async fn search(&self, query: &SearchQuery) -> Result<Page<SearchHit>> {
        self.traced("search", None, self.inner.search(query)).await
    }
    async fn shared_state(&self, app: &AppName, user_id: &UserId) -> Result<SharedState> {
        let call = self.inner.shared_state(app, user_id);
        self.traced("shared_state", None, call).await
    }
    async fn export_session(&self, id: &SessionId) -> Result<SessionDump> {
        self.traced("export", Some(id), self.inner.export_session(id))
            .await
    }
    async fn context_log(&self, id: &SessionId) -> Result<crate::ContextLog> {
        self.traced("context_log", Some(id), self.inner.context_log(id))
            .await
    }
    async fn erase_user(&self, app: &AppName, user_id: &UserId) -> Result<Erased> {
        self.traced("erase_user", None, self.inner.erase_user(app, user_id))
            .await
    }
    async fn prune_events(
        &self,
        id: &SessionId,
        seqs: &[u64],
        expected_version: u64,
    ) -> Result<Option<crate::retention::Pruned>> {
        self.traced(
            "prune_events",
            Some(id),
            self.inner.prune_events(id, seqs, expected_version),
        )
        .await
    }

    async fn fork_session(
        &self,
        source: &SessionId,
        at: &crate::ForkAt,
        id: SessionId,
        now: DateTime<Utc>,
    ) -> Result<Session> {
        self.traced(
            "fork",
            Some(source),
            self.inner.fork_session(source, at, id, now),
        )
        .await
    }

    async fn import_session(&self, dump: SessionDump) -> Result<ImportOutcome> {
        let id = dump.session.id.clone();
        self.traced("import", Some(&id), self.inner.import_session(dump))
            .await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::{InMemoryRepository, Message};

    /// Collects the `op` field of every span opened.
    #[derive(Clone, Default)]
    struct Ops(Arc<Mutex<Vec<String>>>);

    struct OpVisitor<'a>(&'a mut Option<String>);

    impl tracing::field::Visit for OpVisitor<'_> {
        fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
            if field.name() == "op" {
                *self.0 = Some(value.to_owned());
            }
        }
        fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
    }

    impl tracing::Subscriber for Ops {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            let mut op = None;
            span.record(&mut OpVisitor(&mut op));
            let mut ops = self.0.lock().unwrap();
            ops.extend(op);
            tracing::span::Id::from_u64(u64::try_from(ops.len()).unwrap().saturating_add(1))
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, _: &tracing::Event<'_>) {}
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    #[test]
    fn every_call_through_the_layer_opens_one_span_named_by_its_operation() {
        let ops = Ops::default();
        let _guard = tracing::subscriber::set_default(ops.clone());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let repo = TracingLayer::new(InMemoryRepository::new());
            let s = repo
                .create(NewSession::new("app", "alice", Utc::now()).unwrap())
                .await
                .unwrap();
            repo.append(&s.id, vec![SessionEvent::new(Message::user("hi"))])
                .await
                .unwrap();
            assert!(repo.get(&SessionId::new("nope").unwrap()).await.is_err());
        });
        assert_eq!(*ops.0.lock().unwrap(), ["create", "append", "get"]);
    }
}
