//! The lifecycle API agents call: `SessionService` and `DefaultSessionService`.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Duration, FixedOffset, NaiveTime, TimeZone, Utc};
use serde_json::Value;

use crate::clock::{system_clock, truncate_micros, SharedClock};
use crate::error::{Result, SessionError};
use crate::event::{SessionEvent, StateMap};
use crate::filter::{
    EventFilter, EventView, Page, SearchHit, SearchQuery, SearchScope, SessionQuery,
};
use crate::ids::{InvocationId, SessionId};
use crate::message::Message;
use crate::repository::{AppendOutcome, SessionRepository, SessionRepositoryExt};
use crate::session::{
    default_ttl, NewSession, Session, SessionStatus, SessionUpdate, DEFAULT_APP, GROUP_USER,
};
use crate::state::{apply_delta, merge_scopes, take_temp};
use crate::tokens::{HeuristicEstimator, TokenEstimator};
use crate::validate::{validate_id, validate_name};

/// Who is calling: every service call is scoped to one (app, user).
///
/// A call naming a session of another app or user gets `NotFound`, exactly
/// as if the id did not exist. Group sessions (resolved without a user)
/// are open to every user of their app.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Owner {
    /// The app namespace.
    pub app: String,
    /// The user.
    pub user_id: String,
}

impl Owner {
    /// The owner `user_id` in `app`.
    pub fn new(app: impl Into<String>, user_id: impl Into<String>) -> Self {
        Self {
            app: app.into(),
            user_id: user_id.into(),
        }
    }

    /// `user_id` in the default app.
    pub fn user(user_id: impl Into<String>) -> Self {
        Self::new(DEFAULT_APP, user_id)
    }

    /// Whether this owner may see `session`.
    pub fn can_access(&self, session: &Session) -> bool {
        session.app == self.app && (session.user_id == self.user_id || session.is_group())
    }

    fn validate(&self) -> Result<()> {
        validate_name("app", &self.app)?;
        validate_name("user id", &self.user_id)
    }
}

/// When a new session expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Expiry {
    /// 60 days after creation.
    #[default]
    Default,
    /// This long after creation.
    Ttl(Duration),
    /// At this instant (must be in the future).
    At(DateTime<Utc>),
    /// Never.
    Never,
}

impl Expiry {
    fn resolve(self, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>> {
        match self {
            Self::Default => Ok(Some(now + default_ttl())),
            Self::Ttl(d) if d <= Duration::zero() => {
                Err(SessionError::invalid("ttl", "must be positive"))
            }
            Self::Ttl(d) => now
                .checked_add_signed(d)
                .map(Some)
                .ok_or_else(|| SessionError::invalid("ttl", "is too large")),
            Self::At(t) if t <= now => Err(SessionError::invalid(
                "expires_at",
                format!("{t} is not in the future"),
            )),
            Self::At(t) => Ok(Some(truncate_micros(t))),
            Self::Never => Ok(None),
        }
    }
}

/// What to create: built with [`CreateSessionRequest::builder`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CreateSessionRequest {
    /// The id; a UUID v7 is generated when `None`.
    pub id: Option<String>,
    /// The app namespace (default `default`).
    pub app: String,
    /// The owner.
    pub user_id: String,
    /// The resolution key.
    pub key: Option<String>,
    /// The expiry.
    pub expiry: Expiry,
    /// Metadata.
    pub metadata: StateMap,
    /// Initial state (`user:` and `app:` keys go to the shared scopes).
    pub state: StateMap,
}

impl CreateSessionRequest {
    /// Starts a request for `user_id`.
    ///
    /// ```
    /// use session_core::CreateSessionRequest;
    /// let req = CreateSessionRequest::builder("alice")
    ///     .id("my-session-id")
    ///     .ttl(chrono::Duration::hours(2))
    ///     .metadata("agentType", "research-assistant")
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(req.app, "default");
    /// ```
    pub fn builder(user_id: impl Into<String>) -> CreateSessionRequestBuilder {
        CreateSessionRequestBuilder {
            req: CreateSessionRequest {
                id: None,
                app: DEFAULT_APP.to_owned(),
                user_id: user_id.into(),
                key: None,
                expiry: Expiry::Default,
                metadata: StateMap::new(),
                state: StateMap::new(),
            },
        }
    }

    fn validate(&self) -> Result<()> {
        if let Some(id) = &self.id {
            validate_id("session id", id)?;
        }
        validate_name("app", &self.app)?;
        if self.user_id != GROUP_USER {
            validate_name("user id", &self.user_id)?;
        }
        if let Some(k) = &self.key {
            validate_name("key", k)?;
        }
        Ok(())
    }
}

/// Builder of [`CreateSessionRequest`].
#[derive(Debug, Clone)]
pub struct CreateSessionRequestBuilder {
    req: CreateSessionRequest,
}

impl CreateSessionRequestBuilder {
    /// Sets the id (default: a generated UUID v7).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.req.id = Some(id.into());
        self
    }

    /// Sets the app namespace.
    pub fn app(mut self, app: impl Into<String>) -> Self {
        self.req.app = app.into();
        self
    }

    /// Sets the resolution key.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.req.key = Some(key.into());
        self
    }

    /// Expires this long after creation.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.req.expiry = Expiry::Ttl(ttl);
        self
    }

    /// Expires at `t`; `build` rejects a past value.
    pub fn expires_at(mut self, t: DateTime<Utc>) -> Self {
        self.req.expiry = Expiry::At(t);
        self
    }

    /// Never expires.
    pub fn never_expires(mut self) -> Self {
        self.req.expiry = Expiry::Never;
        self
    }

    /// Adds a metadata entry.
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.req.metadata.insert(key.into(), value.into());
        self
    }

    /// Adds an initial state entry.
    pub fn state(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.req.state.insert(key.into(), value.into());
        self
    }

    /// Validates ids and expiry and returns the request.
    pub fn build(self) -> Result<CreateSessionRequest> {
        self.req.validate()?;
        match self.req.expiry {
            Expiry::At(t) if t <= Utc::now() => Err(SessionError::invalid(
                "expires_at",
                format!("{t} is in the past"),
            )),
            Expiry::Ttl(d) if d <= Duration::zero() => {
                Err(SessionError::invalid("ttl", "must be positive"))
            }
            _ => Ok(self.req),
        }
    }
}

/// A daily reset: sessions last active before today's `hour` (at `utc_offset_minutes`) start over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DailyReset {
    /// Hour of day, 0..=23, in the offset's local time.
    pub hour: u8,
    /// The offset from UTC in minutes (e.g. 120 for UTC+2).
    pub utc_offset_minutes: i32,
}

/// When `resolve` starts a session over instead of returning the existing one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResetPolicy {
    /// Reset when the last activity is older than this.
    pub idle_timeout: Option<Duration>,
    /// Reset when the last activity is before the latest daily reset time.
    pub daily_reset: Option<DailyReset>,
}

impl ResetPolicy {
    /// Never resets automatically.
    pub fn never() -> Self {
        Self::default()
    }

    /// Resets after `timeout` without activity.
    pub fn idle(mut self, timeout: Duration) -> Self {
        self.idle_timeout = Some(timeout);
        self
    }

    /// Resets daily at `hour` local time at `utc_offset_minutes`.
    pub fn daily_at(mut self, hour: u8, utc_offset_minutes: i32) -> Self {
        self.daily_reset = Some(DailyReset {
            hour,
            utc_offset_minutes,
        });
        self
    }

    fn validate(&self) -> Result<()> {
        if let Some(d) = self.daily_reset {
            if d.hour > 23 {
                return Err(SessionError::invalid("daily reset hour", "must be 0..=23"));
            }
            if d.utc_offset_minutes.abs() >= 24 * 60 {
                return Err(SessionError::invalid("utc offset", "must be within ±23:59"));
            }
        }
        if self.idle_timeout.is_some_and(|d| d <= Duration::zero()) {
            return Err(SessionError::invalid("idle timeout", "must be positive"));
        }
        Ok(())
    }

    /// Whether a session last active at `last_active` must be reset at `now`.
    pub fn should_reset(&self, last_active: DateTime<Utc>, now: DateTime<Utc>) -> bool {
        if self.idle_timeout.is_some_and(|t| now - last_active > t) {
            return true;
        }
        if let Some(d) = self.daily_reset {
            if let Some(boundary) = latest_daily_boundary(d, now) {
                return last_active < boundary;
            }
        }
        false
    }
}

/// The most recent instant at or before `now` when the local clock showed `hour:00`.
fn latest_daily_boundary(d: DailyReset, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let offset = FixedOffset::east_opt(d.utc_offset_minutes * 60)?;
    let local_now = now.with_timezone(&offset);
    let time = NaiveTime::from_hms_opt(u32::from(d.hour), 0, 0)?;
    let today = local_now.date_naive().and_time(time);
    let mut boundary = offset.from_local_datetime(&today).single()?;
    if boundary > local_now {
        boundary -= Duration::days(1);
    }
    Some(boundary.with_timezone(&Utc))
}

/// What `resolve` and `reset` look up: the active session for (app, user, key).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ResolveRequest {
    /// The app.
    pub app: String,
    /// The user; `None` = a group conversation shared by everyone in the app.
    pub user_id: Option<String>,
    /// The resolution key (`telegram:chat-123:agent-a`).
    pub key: String,
    /// Expiry of a session created by the call.
    pub expiry: Expiry,
    /// Metadata of a session created by the call.
    pub metadata: StateMap,
}

impl ResolveRequest {
    /// The session of `user_id` under `key` in `app`.
    pub fn new(app: impl Into<String>, user_id: impl Into<String>, key: impl Into<String>) -> Self {
        Self {
            app: app.into(),
            user_id: Some(user_id.into()),
            key: key.into(),
            expiry: Expiry::Default,
            metadata: StateMap::new(),
        }
    }

    /// The group session under `key` in `app`, shared by all its users.
    pub fn group(app: impl Into<String>, key: impl Into<String>) -> Self {
        Self {
            user_id: None,
            ..Self::new(app, "", key)
        }
    }

    /// Sets the expiry of a newly created session.
    pub fn expiry(mut self, expiry: Expiry) -> Self {
        self.expiry = expiry;
        self
    }

    fn owner_id(&self) -> &str {
        self.user_id.as_deref().unwrap_or(GROUP_USER)
    }
}

/// The result of `resolve`.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The active session for the key.
    pub session: Session,
    /// Whether it was created by this call.
    pub is_new: bool,
}

/// Runs after every append that wrote something: the seam where a
/// compaction policy plugs in (see `session-compaction`).
///
/// The append is already durable when the hook runs; a hook handles its
/// own failures (and should log them), it cannot undo the append.
#[async_trait]
pub trait AppendHook: Send + Sync {
    /// Called with the session's id, its owner and what the append did.
    async fn after_append(
        &self,
        repository: &dyn SessionRepository,
        owner: &Owner,
        session_id: &SessionId,
        outcome: &AppendOutcome,
    );
}

/// The lifecycle API: owner-scoped, object safe.
#[async_trait]
pub trait SessionService: Send + Sync {
    /// Creates a session.
    async fn create(&self, request: CreateSessionRequest) -> Result<Session>;
    /// Reads a session, with session, `user:` and `app:` state merged.
    async fn get(&self, owner: &Owner, id: &str) -> Result<Session>;
    /// Lists the owner's sessions (the query's app and user are the owner's).
    async fn list(&self, owner: &Owner, query: SessionQuery) -> Result<Page<Session>>;
    /// Changes metadata, session state, status or expiry.
    async fn update(&self, owner: &Owner, id: &str, update: SessionUpdate) -> Result<Session>;
    /// Deletes a session and all its events.
    async fn delete(&self, owner: &Owner, id: &str) -> Result<()>;
    /// Archives a session: still readable and searchable, never resolved again.
    async fn end(&self, owner: &Owner, id: &str) -> Result<Session>;
    /// Appends one message as a new event.
    async fn append_message(
        &self,
        owner: &Owner,
        id: &str,
        message: Message,
    ) -> Result<AppendOutcome>;
    /// Appends a batch of events atomically (`temp:` state keys are dropped).
    async fn append_events(
        &self,
        owner: &Owner,
        id: &str,
        events: Vec<SessionEvent>,
    ) -> Result<AppendOutcome>;
    /// Appends to `session` and applies the deltas, `temp:` keys included, to its in-memory state.
    async fn append_to(
        &self,
        session: &mut Session,
        events: Vec<SessionEvent>,
    ) -> Result<AppendOutcome>;
    /// The context as model messages, in context order.
    async fn messages(&self, owner: &Owner, id: &str) -> Result<Vec<Message>>;
    /// Events through a filter.
    async fn events(
        &self,
        owner: &Owner,
        id: &str,
        filter: &EventFilter,
    ) -> Result<Page<SessionEvent>>;
    /// Keyword search in one session's archive or across the owner's sessions.
    async fn search(&self, owner: &Owner, query: &SearchQuery) -> Result<Page<SearchHit>>;
    /// Compare-and-swap of the context.
    async fn replace_context(
        &self,
        owner: &Owner,
        id: &str,
        events: Vec<SessionEvent>,
        expected_version: u64,
    ) -> Result<bool>;
    /// Removes the events at and after an invocation; returns the session after.
    async fn rewind(&self, owner: &Owner, id: &str, before_invocation_id: &str) -> Result<Session>;
    /// Finds or creates the active session for a key, resetting it by policy.
    async fn resolve(&self, request: &ResolveRequest, policy: &ResetPolicy) -> Result<Resolved>;
    /// Archives the active session for a key (if any) and creates a new one.
    async fn reset(&self, request: &ResolveRequest) -> Result<Session>;
    /// Deletes every expired session; returns how many.
    async fn purge_expired(&self) -> Result<u64>;
}

/// The standard [`SessionService`] over any repository.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use session_core::*;
/// let service = DefaultSessionService::new(InMemoryRepository::new().shared());
/// let session = service.create(CreateSessionRequest::builder("alice").build()?).await?;
/// let owner = Owner::user("alice");
/// service.append_message(&owner, &session.id, Message::user("What is Rust?")).await?;
/// service.append_message(&owner, &session.id, Message::assistant("A language.")).await?;
/// assert_eq!(service.messages(&owner, &session.id).await?.len(), 2);
/// # Ok::<(), SessionError>(())
/// # }).unwrap();
/// ```
pub struct DefaultSessionService<R = Arc<dyn SessionRepository>> {
    repo: R,
    clock: SharedClock,
    estimator: Arc<dyn TokenEstimator>,
    hooks: Vec<Arc<dyn AppendHook>>,
}

impl<R> std::fmt::Debug for DefaultSessionService<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefaultSessionService")
            .field("estimator", &self.estimator)
            .field("hooks", &self.hooks.len())
            .finish_non_exhaustive()
    }
}

impl<R: SessionRepository> DefaultSessionService<R> {
    /// A service over `repository` on the system clock with the heuristic token estimator.
    pub fn new(repository: R) -> Self {
        Self {
            repo: repository,
            clock: system_clock(),
            estimator: Arc::new(HeuristicEstimator),
            hooks: Vec::new(),
        }
    }

    /// Uses `clock` (share it with the repository).
    pub fn with_clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// Estimates tokens of messages appended through [`SessionService::append_message`] with `estimator`.
    pub fn with_token_estimator(mut self, estimator: Arc<dyn TokenEstimator>) -> Self {
        self.estimator = estimator;
        self
    }

    /// Adds a hook run after every append that wrote something.
    pub fn with_append_hook(mut self, hook: Arc<dyn AppendHook>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// The underlying repository.
    pub fn repository(&self) -> &R {
        &self.repo
    }

    /// The token estimator in use.
    pub fn token_estimator(&self) -> &Arc<dyn TokenEstimator> {
        &self.estimator
    }

    /// Reads a session and checks the owner; another owner's session is `NotFound`.
    async fn owned(&self, owner: &Owner, id: &str) -> Result<Session> {
        owner.validate()?;
        let s = self.repo.get(&SessionId::new(id)?).await?;
        if owner.can_access(&s) {
            Ok(s)
        } else {
            Err(SessionError::session_not_found(id))
        }
    }

    async fn merged(&self, mut s: Session) -> Result<Session> {
        let shared = self.repo.shared_state(&s.app, &s.user_id).await?;
        s.state = merge_scopes(&s.state, &shared);
        Ok(s)
    }

    async fn append_checked(
        &self,
        owner: &Owner,
        session: &Session,
        events: Vec<SessionEvent>,
    ) -> Result<AppendOutcome> {
        let out = self.repo.append(&session.id, events).await?;
        if out.written > 0 {
            for hook in &self.hooks {
                hook.after_append(&self.repo, owner, &session.id, &out)
                    .await;
            }
        }
        Ok(out)
    }

    async fn create_session(&self, request: CreateSessionRequest) -> Result<Session> {
        let now = self.clock.now();
        let mut new = NewSession::new(request.app, request.user_id, now)?
            .with_expires_at(request.expiry.resolve(now)?)
            .with_metadata(request.metadata)
            .with_state(request.state);
        if let Some(id) = request.id {
            new = new.with_id(id)?;
        }
        if let Some(k) = request.key {
            new = new.with_key(k)?;
        }
        take_temp(&mut new.state);
        let s = self.repo.create(new).await?;
        self.merged(s).await
    }

    async fn active_for(&self, request: &ResolveRequest) -> Result<Option<Session>> {
        let page = self
            .repo
            .list(
                &SessionQuery::new()
                    .app(&request.app)
                    .user(request.owner_id())
                    .key(&request.key)
                    .status(SessionStatus::Active)
                    .page(0, 1),
            )
            .await?;
        Ok(page.items.into_iter().next())
    }

    async fn archive(&self, id: &SessionId) -> Result<()> {
        match self
            .repo
            .update(id, SessionUpdate::new().status(SessionStatus::Archived))
            .await
        {
            // Archived now, or deleted or expired meanwhile: out of the way either way.
            Ok(_) | Err(SessionError::NotFound { .. } | SessionError::Expired { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn create_for(&self, request: &ResolveRequest) -> Result<Session> {
        let mut create = CreateSessionRequest::builder(request.owner_id())
            .app(&request.app)
            .key(&request.key);
        create.req.expiry = request.expiry;
        create.req.metadata = request.metadata.clone();
        self.create_session(create.req).await
    }

    fn validate_resolve(request: &ResolveRequest) -> Result<()> {
        validate_name("app", &request.app)?;
        validate_name("key", &request.key)?;
        if let Some(u) = &request.user_id {
            validate_name("user id", u)?;
        }
        Ok(())
    }
}

#[async_trait]
impl<R: SessionRepository> SessionService for DefaultSessionService<R> {
    #[tracing::instrument(skip_all, fields(op = "create", app = %request.app))]
    async fn create(&self, request: CreateSessionRequest) -> Result<Session> {
        self.create_session(request).await
    }

    #[tracing::instrument(skip_all, fields(op = "get", app = %owner.app, session_id = %id))]
    async fn get(&self, owner: &Owner, id: &str) -> Result<Session> {
        let s = self.owned(owner, id).await?;
        self.merged(s).await
    }

    #[tracing::instrument(skip_all, fields(op = "list", app = %owner.app))]
    async fn list(&self, owner: &Owner, mut query: SessionQuery) -> Result<Page<Session>> {
        owner.validate()?;
        query.app = Some(owner.app.clone());
        query.user_id = Some(owner.user_id.clone());
        self.repo.list(&query).await
    }

    #[tracing::instrument(skip_all, fields(op = "update", app = %owner.app, session_id = %id))]
    async fn update(&self, owner: &Owner, id: &str, update: SessionUpdate) -> Result<Session> {
        let s = self.owned(owner, id).await?;
        let s = self.repo.update(&s.id, update).await?;
        self.merged(s).await
    }

    #[tracing::instrument(skip_all, fields(op = "delete", app = %owner.app, session_id = %id))]
    async fn delete(&self, owner: &Owner, id: &str) -> Result<()> {
        let s = self.owned(owner, id).await?;
        if self.repo.delete(&s.id).await? {
            Ok(())
        } else {
            Err(SessionError::session_not_found(id))
        }
    }

    #[tracing::instrument(skip_all, fields(op = "end", app = %owner.app, session_id = %id))]
    async fn end(&self, owner: &Owner, id: &str) -> Result<Session> {
        self.update(
            owner,
            id,
            SessionUpdate::new().status(SessionStatus::Archived),
        )
        .await
    }

    #[tracing::instrument(skip_all, fields(op = "append", app = %owner.app, session_id = %id, events = 1))]
    async fn append_message(
        &self,
        owner: &Owner,
        id: &str,
        message: Message,
    ) -> Result<AppendOutcome> {
        let session = self.owned(owner, id).await?;
        let event = SessionEvent::builder(message)
            .estimate_with(self.estimator.as_ref())
            .build()?;
        self.append_checked(owner, &session, vec![event]).await
    }

    #[tracing::instrument(skip_all, fields(op = "append", app = %owner.app, session_id = %id, events = events.len()))]
    async fn append_events(
        &self,
        owner: &Owner,
        id: &str,
        events: Vec<SessionEvent>,
    ) -> Result<AppendOutcome> {
        let session = self.owned(owner, id).await?;
        self.append_checked(owner, &session, events).await
    }

    #[tracing::instrument(skip_all, fields(op = "append", app = %session.app, session_id = %session.id, events = events.len()))]
    async fn append_to(
        &self,
        session: &mut Session,
        events: Vec<SessionEvent>,
    ) -> Result<AppendOutcome> {
        let owner = Owner::new(&session.app, &session.user_id);
        let stored = if session.is_group() {
            let s = self.repo.get(&session.id).await?;
            if s.app == session.app && s.is_group() {
                s
            } else {
                return Err(SessionError::session_not_found(&session.id));
            }
        } else {
            self.owned(&owner, &session.id).await?
        };
        let deltas: Vec<StateMap> = events
            .iter()
            .filter_map(|e| e.state_delta.clone())
            .collect();
        let out = self.append_checked(&owner, &stored, events).await?;
        for d in &deltas {
            apply_delta(&mut session.state, d);
        }
        session.version = out.version;
        Ok(out)
    }

    #[tracing::instrument(skip_all, fields(op = "messages", app = %owner.app, session_id = %id))]
    async fn messages(&self, owner: &Owner, id: &str) -> Result<Vec<Message>> {
        let s = self.owned(owner, id).await?;
        let events = self.repo.all_events(&s.id, EventView::Context).await?;
        Ok(events.into_iter().map(|e| e.message).collect())
    }

    #[tracing::instrument(skip_all, fields(op = "events", app = %owner.app, session_id = %id))]
    async fn events(
        &self,
        owner: &Owner,
        id: &str,
        filter: &EventFilter,
    ) -> Result<Page<SessionEvent>> {
        let s = self.owned(owner, id).await?;
        self.repo.events(&s.id, filter).await
    }

    #[tracing::instrument(skip_all, fields(op = "search", app = %owner.app))]
    async fn search(&self, owner: &Owner, query: &SearchQuery) -> Result<Page<SearchHit>> {
        match &query.scope {
            SearchScope::Session(id) => {
                self.owned(owner, id).await?;
            }
            SearchScope::User { app, user_id } => {
                owner.validate()?;
                if *app != owner.app || *user_id != owner.user_id {
                    return Ok(Page::empty(query.page, query.page_size));
                }
            }
        }
        self.repo.search(query).await
    }

    #[tracing::instrument(skip_all, fields(op = "replace_context", app = %owner.app, session_id = %id, events = events.len()))]
    async fn replace_context(
        &self,
        owner: &Owner,
        id: &str,
        events: Vec<SessionEvent>,
        expected_version: u64,
    ) -> Result<bool> {
        let s = self.owned(owner, id).await?;
        self.repo
            .replace_context(&s.id, events, expected_version)
            .await
    }

    #[tracing::instrument(skip_all, fields(op = "rewind", app = %owner.app, session_id = %id))]
    async fn rewind(&self, owner: &Owner, id: &str, before_invocation_id: &str) -> Result<Session> {
        let s = self.owned(owner, id).await?;
        self.repo
            .rewind(&s.id, &InvocationId::new(before_invocation_id)?)
            .await?;
        let s = self.repo.get(&s.id).await?;
        self.merged(s).await
    }

    #[tracing::instrument(skip_all, fields(op = "resolve", app = %request.app))]
    async fn resolve(&self, request: &ResolveRequest, policy: &ResetPolicy) -> Result<Resolved> {
        Self::validate_resolve(request)?;
        policy.validate()?;
        let now = self.clock.now();
        if let Some(existing) = self.active_for(request).await? {
            if !policy.should_reset(existing.updated_at, now) {
                return Ok(Resolved {
                    session: self.merged(existing).await?,
                    is_new: false,
                });
            }
            self.archive(&existing.id).await?;
        }
        Ok(Resolved {
            session: self.create_for(request).await?,
            is_new: true,
        })
    }

    #[tracing::instrument(skip_all, fields(op = "reset", app = %request.app))]
    async fn reset(&self, request: &ResolveRequest) -> Result<Session> {
        Self::validate_resolve(request)?;
        while let Some(existing) = self.active_for(request).await? {
            self.archive(&existing.id).await?;
        }
        self.create_for(request).await
    }

    #[tracing::instrument(skip_all, fields(op = "purge_expired"))]
    async fn purge_expired(&self) -> Result<u64> {
        self.repo.purge_expired(self.clock.now()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn daily_boundary_respects_offset() {
        // 2026-03-10 05:00 UTC is 07:00 at UTC+2; a 06:00 local reset happened at 04:00 UTC.
        let now = Utc.with_ymd_and_hms(2026, 3, 10, 5, 0, 0).unwrap();
        let d = DailyReset {
            hour: 6,
            utc_offset_minutes: 120,
        };
        assert_eq!(
            latest_daily_boundary(d, now),
            Some(Utc.with_ymd_and_hms(2026, 3, 10, 4, 0, 0).unwrap())
        );
        // At 03:00 UTC (05:00 local) the latest reset is yesterday's.
        let early = Utc.with_ymd_and_hms(2026, 3, 10, 3, 0, 0).unwrap();
        assert_eq!(
            latest_daily_boundary(d, early),
            Some(Utc.with_ymd_and_hms(2026, 3, 9, 4, 0, 0).unwrap())
        );
        let policy = ResetPolicy::never().daily_at(6, 120);
        assert!(policy.should_reset(Utc.with_ymd_and_hms(2026, 3, 10, 3, 59, 0).unwrap(), now));
        assert!(!policy.should_reset(Utc.with_ymd_and_hms(2026, 3, 10, 4, 1, 0).unwrap(), now));
    }

    #[test]
    fn builder_rejects_past_expiry() {
        let past = Utc::now() - Duration::seconds(1);
        let err = CreateSessionRequest::builder("alice")
            .expires_at(past)
            .build()
            .unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
        assert!(CreateSessionRequest::builder("alice")
            .ttl(Duration::zero())
            .build()
            .is_err());
        assert!(CreateSessionRequest::builder("a b").build().is_err());
    }

    #[test]
    fn policy_validation() {
        assert!(ResetPolicy::never().daily_at(24, 0).validate().is_err());
        assert!(ResetPolicy::never()
            .daily_at(23, 24 * 60)
            .validate()
            .is_err());
        assert!(ResetPolicy::never()
            .idle(Duration::zero())
            .validate()
            .is_err());
    }
}
