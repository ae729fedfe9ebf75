//! What every case works with: a [`Fixture`] (the repository under test
//! and its clock), the app it uses, and literals for ids and events.

use std::sync::Arc;

use session_core::{
    AppendOutcome, Clock as _, DefaultSessionService, EventFilter, EventView, ManualClock, Message,
    NewSession, Session, SessionEvent, SessionId, SessionRepository, SessionRepositoryExt,
    SharedClock,
};

/// A fresh repository under test plus the manual clock it was built with.
#[derive(Clone)]
pub struct Fixture {
    /// The repository under test.
    pub repo: Arc<dyn SessionRepository>,
    /// The clock the repository reads; advance it to test expiry and resets.
    pub clock: Arc<ManualClock>,
    /// Appends each of the 16 writers of the concurrency cases makes
    /// ([`DEFAULT_APPENDS_PER_WRITER`] unless the store asks for fewer).
    pub appends_per_writer: u64,
    /// Events of the large-session case ([`LARGE_SESSION_EVENTS`] unless
    /// the store asks for fewer).
    pub large_session_events: u64,
}

/// Appends per writer in the concurrency cases: 16 × 250 = 4,000 events.
pub const DEFAULT_APPENDS_PER_WRITER: u64 = 250;

/// Events of the large-session case: 100,000, in batches of
/// [`LARGE_SESSION_BATCH`].
pub const LARGE_SESSION_EVENTS: u64 = 100_000;

/// Events per append of the large-session case.
pub const LARGE_SESSION_BATCH: u64 = 5_000;

impl std::fmt::Debug for Fixture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fixture")
            .field("backend", &self.repo.capabilities().backend)
            .finish_non_exhaustive()
    }
}

/// The app every case uses unless it tests apps.
pub const APP: &str = "app";

impl Fixture {
    /// Wraps a repository and its clock.
    pub fn new(repo: Arc<dyn SessionRepository>, clock: Arc<ManualClock>) -> Self {
        Self {
            repo,
            clock,
            appends_per_writer: DEFAULT_APPENDS_PER_WRITER,
            large_session_events: LARGE_SESSION_EVENTS,
        }
    }

    /// The same fixture whose concurrency cases make `n` appends per writer.
    pub fn with_appends_per_writer(mut self, n: u64) -> Self {
        self.appends_per_writer = n;
        self
    }

    /// The same fixture whose large-session case appends `n` events (a
    /// multiple of [`LARGE_SESSION_BATCH`], at least 10,000).
    ///
    /// # Panics
    /// When `n` is not such a count: a factory's mistake, found on its
    /// first run.
    pub fn with_large_session_events(mut self, n: u64) -> Self {
        assert!(
            n >= 10_000 && n % LARGE_SESSION_BATCH == 0,
            "the large-session case needs a multiple of {LARGE_SESSION_BATCH} events, \
             at least 10,000; got {n}"
        );
        self.large_session_events = n;
        self
    }

    /// A service over the repository, on the same clock.
    pub fn service(&self) -> DefaultSessionService {
        DefaultSessionService::new(self.repo.clone()).with_clock(self.shared_clock())
    }

    /// The clock as the trait object repositories take.
    pub fn shared_clock(&self) -> SharedClock {
        self.clock.clone()
    }

    /// A new session of `user` in [`APP`].
    pub async fn session(&self, user: &str) -> Session {
        self.session_in(APP, user).await
    }

    /// A new session of `user` in `app`.
    pub async fn session_in(&self, app: &str, user: &str) -> Session {
        self.repo
            .create(NewSession::new(app, user, self.clock.now()).unwrap())
            .await
            .unwrap()
    }

    /// Compacts the first `n` context events of `id` into a summary turn
    /// that records them as replaced (as the summarizing strategies do),
    /// keeping the rest of the context after it.
    pub async fn summarize_first(&self, id: &SessionId, n: usize) {
        let ctx = self.context(id).await;
        let replaced: Vec<u64> = ctx.iter().take(n).map(|e| e.seq).collect();
        let mut summary = SessionEvent::summary_turn(
            "The user asked two questions.",
            session_core::CompactionSource::RecursiveSummarization,
            self.clock.now(),
        )
        .to_vec();
        for e in &mut summary {
            e.metadata.insert(
                session_core::REPLACES_KEY.to_owned(),
                serde_json::json!(replaced),
            );
        }
        summary.extend(ctx.into_iter().skip(n));
        let v = self.repo.event_version(id).await.unwrap();
        assert!(self.repo.replace_context(id, summary, v).await.unwrap());
    }

    /// Appends and expects success.
    pub async fn append(&self, id: &SessionId, events: Vec<SessionEvent>) -> AppendOutcome {
        self.repo.append(id, events).await.unwrap()
    }

    /// Every archived event.
    pub async fn archive(&self, id: &SessionId) -> Vec<SessionEvent> {
        self.repo.all_events(id, EventView::Archive).await.unwrap()
    }

    /// Every context event.
    pub async fn context(&self, id: &SessionId) -> Vec<SessionEvent> {
        self.repo.all_events(id, EventView::Context).await.unwrap()
    }

    /// The texts of events read through `filter`.
    pub async fn texts(&self, id: &SessionId, filter: &EventFilter) -> Vec<String> {
        texts(&self.repo.events(id, filter).await.unwrap().items)
    }
}

/// A session id for a test literal; panics on an invalid one.
pub fn sid(id: &str) -> SessionId {
    SessionId::new(id).unwrap()
}

/// An invocation id for a test literal; panics on an invalid one.
pub fn iid(id: &str) -> session_core::InvocationId {
    session_core::InvocationId::new(id).unwrap()
}

/// An app name for a test literal; panics on an invalid one.
pub fn app_name(app: &str) -> session_core::AppName {
    session_core::AppName::new(app).unwrap()
}

/// A user id for a test literal; panics on an invalid one.
pub fn user_id(user: &str) -> session_core::UserId {
    session_core::UserId::new(user).unwrap()
}

/// The message texts of events.
pub fn texts(events: &[SessionEvent]) -> Vec<String> {
    events.iter().map(|e| e.message.text().to_owned()).collect()
}

/// A user message event.
pub fn user(text: &str) -> SessionEvent {
    SessionEvent::new(Message::user(text))
}

/// An assistant message event.
pub fn assistant(text: &str) -> SessionEvent {
    SessionEvent::new(Message::assistant(text))
}
