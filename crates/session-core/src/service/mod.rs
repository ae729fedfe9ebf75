//! The lifecycle API agents call: `SessionService` and `DefaultSessionService`.

mod persist_filter;
mod requests;

use std::sync::Arc;

use async_trait::async_trait;

use crate::clock::{system_clock, SharedClock};
use crate::error::{Result, SessionError};
use crate::event::SessionEvent;
use crate::filter::{EventFilter, EventView, Page, SessionQuery};
use crate::ids::{InvocationId, SessionId};
use crate::message::Message;
use crate::plan::RewindTo;
use crate::repository::{AppendOutcome, SessionRepository, SessionRepositoryExt};
use crate::retention::{ArchiveRetention, Pruned, RetentionReport, RetentionRules, RETENTION_KEY};
use crate::search::{SearchHit, SearchQuery, SearchScope};
use crate::session::{NewSession, Session, SessionStatus, SessionUpdate};
use crate::state::StateMap;
use crate::state::{apply_delta, merge_scopes, take_temp};
use crate::tokens::{HeuristicEstimator, TokenEstimator};
use crate::validate::validate_name;

pub use persist_filter::{
    failed_tool_call_ids, DropFailedToolCalls, DropSystemPrompts, FilterAction, FilterFn,
    FilteredEvent, PersistFilter, Verdict, TOOL_ERROR_KEY,
};
pub use requests::{
    CreateSessionRequest, CreateSessionRequestBuilder, DailyReset, Expiry, Owner, ResetPolicy,
    ResolveRequest, Resolved,
};
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
    /// Ends (archives) a session: still readable and searchable, never
    /// resolved again, and closed to writes (`SessionEnded`) until reopened.
    async fn end(&self, owner: &Owner, id: &str) -> Result<Session>;
    /// Forks a session at `at` into a new session of the same owner (see
    /// [`crate::ForkAt`]); the source is untouched. `list` with
    /// `SessionQuery::forks_of` finds a session's forks.
    async fn fork(&self, owner: &Owner, id: &str, at: &crate::ForkAt) -> Result<Session>;
    /// Erases everything stored of the owner (every session of the user in
    /// the app, forks and ended ones included, their events and index
    /// entries, and the `user:` state); idempotent.
    async fn erase_user(&self, owner: &Owner) -> Result<crate::Erased>;
    /// Reopens an ended session: writable again, and `resolve` may return it
    /// again (the most recently active session of a key wins).
    async fn reopen(&self, owner: &Owner, id: &str) -> Result<Session>;
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
    /// The context as model messages: the pinned system messages first (the
    /// latest stored system message of each branch; older ones are
    /// superseded and left out), then the rest in context order.
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
    /// Sets (or with `None` clears) a session's own archive retention
    /// policy (see [`crate::retention`]); returns the session after.
    async fn set_retention(
        &self,
        owner: &Owner,
        id: &str,
        policy: Option<ArchiveRetention>,
    ) -> Result<Session>;
    /// Runs the retention policy that applies to a session (its own, else
    /// the service's defaults) now.
    async fn prune_archive(&self, owner: &Owner, id: &str) -> Result<Pruned>;
    /// Runs the retention policies over every session of the store (what a
    /// purge does besides deleting expired sessions).
    async fn prune_archives(&self) -> Result<RetentionReport>;
    /// The model usage recorded in a session ([`crate::ModelUsage`] on its
    /// events), in total, per invocation and per model.
    async fn usage(&self, owner: &Owner, id: &str) -> Result<crate::UsageReport> {
        let mut events = Vec::new();
        let mut page = 0;
        loop {
            let got = self
                .events(owner, id, &EventFilter::archive().page(page, 1000))
                .await?;
            events.extend(got.items);
            if !got.has_more {
                break;
            }
            page = page.saturating_add(1);
        }
        Ok(crate::UsageReport::from_events(&events))
    }
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
    filters: Vec<Arc<dyn PersistFilter>>,
    retention: RetentionRules,
    prune_on_append: bool,
}

impl<R> std::fmt::Debug for DefaultSessionService<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefaultSessionService")
            .field("estimator", &self.estimator)
            .field("hooks", &self.hooks.len())
            .field("filters", &self.filters)
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
            filters: Vec::new(),
            retention: RetentionRules::new(),
            prune_on_append: false,
        }
    }

    /// The archive retention defaults for sessions without their own
    /// policy (see [`crate::retention`]).
    pub fn with_retention(mut self, rules: RetentionRules) -> Self {
        self.retention = rules;
        self
    }

    /// Also runs a session's retention policy after each append that wrote
    /// to it (when it is due: over its count, or its oldest event past the
    /// age); a failed prune is logged and the append stands.
    pub fn with_prune_on_append(mut self) -> Self {
        self.prune_on_append = true;
        self
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

    /// Adds a filter every appended event passes before it is stored
    /// (see [`PersistFilter`]); what it drops or redacts is reported in
    /// [`AppendOutcome::filtered`].
    pub fn with_persist_filter(mut self, filter: Arc<dyn PersistFilter>) -> Self {
        self.filters.push(filter);
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
        let (events, filtered) = persist_filter::apply(&self.filters, events);
        if events.is_empty() {
            // Everything was filtered out: nothing to store, nothing changed.
            return Ok(AppendOutcome {
                version: self.repo.event_version(&session.id).await?,
                seqs: Vec::new(),
                written: 0,
                filtered,
            });
        }
        let mut out = self.repo.append(&session.id, events).await?;
        out.filtered = filtered;
        if out.written > 0 {
            for hook in &self.hooks {
                hook.after_append(&self.repo, owner, &session.id, &out)
                    .await;
            }
            if self.prune_on_append {
                let due = crate::retention::prune_if_due(
                    &self.repo,
                    &self.retention,
                    &session.id,
                    self.clock.now(),
                );
                if let Err(e) = due.await {
                    tracing::warn!(session_id = %session.id, error = %e, "archive prune after append failed");
                }
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

    #[tracing::instrument(skip_all, fields(op = "fork", app = %owner.app, session_id = %id))]
    async fn fork(&self, owner: &Owner, id: &str, at: &crate::ForkAt) -> Result<Session> {
        let s = self.owned(owner, id).await?;
        let fork = self.repo.fork(&s.id, at, self.clock.now()).await?;
        self.merged(fork).await
    }

    #[tracing::instrument(skip_all, fields(op = "erase_user", app = %owner.app))]
    async fn erase_user(&self, owner: &Owner) -> Result<crate::Erased> {
        owner.validate()?;
        let app = crate::AppName::new(&owner.app)?;
        let user = crate::UserId::new(&owner.user_id)?;
        self.repo.erase_user(&app, &user).await
    }

    #[tracing::instrument(skip_all, fields(op = "reopen", app = %owner.app, session_id = %id))]
    async fn reopen(&self, owner: &Owner, id: &str) -> Result<Session> {
        self.update(
            owner,
            id,
            SessionUpdate::new().status(SessionStatus::Active),
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
        Ok(pinned_first(events))
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
            .rewind_restoring(
                &s.id,
                &RewindTo::Invocation(InvocationId::new(before_invocation_id)?),
            )
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
            if !policy.should_reset(existing.updated_at, now)? {
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

    #[tracing::instrument(skip_all, fields(op = "set_retention", app = %owner.app, session_id = %id))]
    async fn set_retention(
        &self,
        owner: &Owner,
        id: &str,
        policy: Option<ArchiveRetention>,
    ) -> Result<Session> {
        let s = self.owned(owner, id).await?;
        let mut metadata = s.metadata.clone();
        match policy {
            Some(p) => metadata.insert(RETENTION_KEY.to_owned(), p.to_metadata()),
            None => metadata.remove(RETENTION_KEY),
        };
        let update = SessionUpdate::new()
            .metadata(metadata)
            .expect_version(s.version);
        let updated = self.repo.update(&s.id, update).await?;
        self.merged(updated).await
    }

    #[tracing::instrument(skip_all, fields(op = "prune_archive", app = %owner.app, session_id = %id))]
    async fn prune_archive(&self, owner: &Owner, id: &str) -> Result<Pruned> {
        let s = self.owned(owner, id).await?;
        match self.retention.policy_for(&s)? {
            Some(policy) => {
                crate::retention::prune_archive(&self.repo, &s.id, &policy, self.clock.now()).await
            }
            None => Ok(Pruned {
                removed: 0,
                version: s.version,
            }),
        }
    }

    #[tracing::instrument(skip_all, fields(op = "prune_archives"))]
    async fn prune_archives(&self) -> Result<RetentionReport> {
        crate::retention::prune_archives(&self.repo, &self.retention, None, self.clock.now()).await
    }
}

/// The context's messages with the pinned system messages first: the latest
/// stored (non-synthetic) system message of each branch, in context order;
/// older system messages of a branch are superseded and left out.
fn pinned_first(events: Vec<SessionEvent>) -> Vec<Message> {
    use std::collections::HashMap;
    let is_system = |e: &SessionEvent| !e.is_synthetic() && e.role() == crate::Role::System;
    let mut latest: HashMap<Option<&str>, usize> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        if is_system(e) {
            latest.insert(e.branch.as_deref(), i);
        }
    }
    let pinned: std::collections::HashSet<usize> = latest.into_values().collect();
    let (mut first, mut rest) = (Vec::new(), Vec::new());
    for (i, e) in events.into_iter().enumerate() {
        if pinned.contains(&i) {
            first.push(e.message);
        } else if !is_system(&e) {
            rest.push(e.message);
        }
    }
    first.extend(rest);
    first
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_system_message_of_each_branch_comes_first() {
        let e = |m: Message| SessionEvent::new(m);
        let mut sub = e(Message::system("sub rules"));
        sub.branch = Some("orch.sub".to_owned());
        let got = pinned_first(vec![
            e(Message::system("old rules")),
            e(Message::user("hi")),
            sub,
            e(Message::system("new rules")),
            e(Message::assistant("hello")),
        ]);
        let texts: Vec<&str> = got.iter().map(Message::text).collect();
        assert_eq!(texts, ["sub rules", "new rules", "hi", "hello"]);
    }
}
