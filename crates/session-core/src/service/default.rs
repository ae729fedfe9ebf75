//! [`DefaultSessionService`]: the [`SessionService`] over any repository.

use std::sync::Arc;

use async_trait::async_trait;

use super::api::SessionService;
use super::compact::{Compacted, Compactor};
use super::hook::AppendHook;
use super::requests::{CreateSessionRequest, ResetPolicy, ResolveRequest, Resolved, Rewound};
use crate::clock::{system_clock, SharedClock};
use crate::context::{model_context, ContextOptions};
use crate::dump::SessionDump;
use crate::error::{Result, SessionError};
use crate::event::SessionEvent;
use crate::filter::{EventFilter, EventView, Page, SessionQuery, SyntheticFilter};
use crate::fork_at::ForkAt;
use crate::ids::SessionId;
use crate::message::Message;
use crate::outcome::AppendOutcome;
use crate::owner::Owner;
use crate::persist_filter::{self, PersistFilter};
use crate::plan::RewindTo;
use crate::repository::{Erased, SessionRepository, SessionRepositoryExt};
use crate::retention::{ArchiveRetention, Pruned, RetentionReport, RetentionRules, RETENTION_KEY};
use crate::search::{SearchHit, SearchQuery, SearchScope};
use crate::session::{NewSession, Session, SessionStatus, SessionUpdate};
use crate::state::{
    apply_delta, merge_scopes, take_temp, ScopedState, SharedState, StateMap, StateScope,
};
use crate::tokens::{HeuristicEstimator, TokenEstimator};
use crate::validate::validate_name;

/// The standard [`SessionService`] over any repository.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use session_core::*;
/// let service = DefaultSessionService::new(InMemoryRepository::new().shared());
/// let session = service.create(CreateSessionRequest::builder("alice").build()?).await?;
/// let owner = Owner::user("alice")?;
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

/// Who checks that the caller owns the session an append goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// The store, in the append itself ([`SessionRepository::append_owned`]).
    Check,
    /// The caller, already.
    Checked,
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
    async fn owned(&self, owner: &Owner, id: &SessionId) -> Result<Session> {
        let s = self.repo.get(id).await?;
        if owner.can_access(&s) {
            Ok(s)
        } else {
            Err(SessionError::session_not_found(id))
        }
    }

    /// Checks that `owner` may use session `id` (its owner read alone);
    /// another owner's session is `NotFound`.
    async fn check_owner(&self, owner: &Owner, id: &SessionId) -> Result<()> {
        if owner.may_access(&self.repo.owner_of(id).await?) {
            Ok(())
        } else {
            Err(SessionError::session_not_found(id))
        }
    }

    /// The state of the stored session `s` by scope (one more read: the shared scopes).
    async fn scoped(&self, s: Session) -> Result<ScopedState> {
        let shared = self.repo.shared_state(&s.app, &s.user_id).await?;
        Ok(ScopedState {
            session: s.state,
            user: shared.user,
            app: shared.app,
            version: s.version,
        })
    }

    async fn merged(&self, mut s: Session) -> Result<Session> {
        let shared = self.repo.shared_state(&s.app, &s.user_id).await?;
        s.state = merge_scopes(&s.state, &shared);
        Ok(s)
    }

    /// Appends `events` for `owner` after the persist filters: the owner
    /// checked in the store's append ([`Access::Check`]) or already
    /// checked by the caller ([`Access::Checked`]). With persist filters,
    /// the owner is checked first: a filter never sees a stranger's events.
    async fn append_checked(
        &self,
        owner: &Owner,
        id: &SessionId,
        mut events: Vec<SessionEvent>,
        mut access: Access,
    ) -> Result<AppendOutcome> {
        if access == Access::Check && !self.filters.is_empty() {
            self.check_owner(owner, id).await?;
            access = Access::Checked;
        }
        SessionEvent::estimate_missing(&mut events, self.estimator.as_ref());
        let (events, filtered) = persist_filter::apply(&self.filters, events);
        if events.is_empty() {
            if access == Access::Check {
                self.check_owner(owner, id).await?;
            }
            // Everything was filtered out: nothing to store, nothing changed.
            return Ok(AppendOutcome {
                version: self.repo.event_version(id).await?,
                seqs: Vec::new(),
                written: 0,
                filtered,
            });
        }
        let mut out = match access {
            Access::Check => self.repo.append_owned(owner, id, events).await?,
            Access::Checked => self.repo.append(id, events).await?,
        };
        out.filtered = filtered;
        if out.written > 0 {
            for hook in &self.hooks {
                hook.after_append(&self.repo, owner, id, &out).await;
            }
            if self.prune_on_append {
                let due = crate::retention::prune_if_due(
                    &self.repo,
                    &self.retention,
                    id,
                    self.clock.now(),
                );
                if let Err(e) = due.await {
                    tracing::warn!(session_id = %id, error = %e, "archive prune after append failed");
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
    async fn get(&self, owner: &Owner, id: &SessionId) -> Result<Session> {
        let s = self.owned(owner, id).await?;
        self.merged(s).await
    }

    #[tracing::instrument(skip_all, fields(op = "list", app = %owner.app))]
    async fn list(&self, owner: &Owner, mut query: SessionQuery) -> Result<Page<Session>> {
        query.app = Some(owner.app.to_string());
        query.user_id = Some(owner.user.to_string());
        self.repo.list(&query).await
    }

    #[tracing::instrument(skip_all, fields(op = "list_all"))]
    async fn list_all(&self, query: SessionQuery) -> Result<Page<Session>> {
        self.repo.list(&query).await
    }

    #[tracing::instrument(skip_all, fields(op = "locate", session_id = %id))]
    async fn locate(&self, id: &SessionId) -> Result<Session> {
        let s = self.repo.get(id).await?;
        self.merged(s).await
    }

    #[tracing::instrument(skip_all, fields(op = "update", app = %owner.app, session_id = %id))]
    async fn update(
        &self,
        owner: &Owner,
        id: &SessionId,
        update: SessionUpdate,
    ) -> Result<Session> {
        let s = self.owned(owner, id).await?;
        let s = self.repo.update(&s.id, update).await?;
        self.merged(s).await
    }

    #[tracing::instrument(skip_all, fields(op = "delete", app = %owner.app, session_id = %id))]
    async fn delete(&self, owner: &Owner, id: &SessionId) -> Result<()> {
        let s = self.owned(owner, id).await?;
        if self.repo.delete(&s.id).await? {
            Ok(())
        } else {
            Err(SessionError::session_not_found(id))
        }
    }

    #[tracing::instrument(skip_all, fields(op = "end", app = %owner.app, session_id = %id))]
    async fn end(&self, owner: &Owner, id: &SessionId) -> Result<Session> {
        self.update(
            owner,
            id,
            SessionUpdate::new().status(SessionStatus::Archived),
        )
        .await
    }

    #[tracing::instrument(skip_all, fields(op = "fork", app = %owner.app, session_id = %id))]
    async fn fork(&self, owner: &Owner, id: &SessionId, at: &ForkAt) -> Result<Session> {
        let s = self.owned(owner, id).await?;
        let fork = self.repo.fork(&s.id, at, self.clock.now()).await?;
        self.merged(fork).await
    }

    #[tracing::instrument(skip_all, fields(op = "erase_user", app = %owner.app))]
    async fn erase_user(&self, owner: &Owner) -> Result<Erased> {
        self.repo.erase_user(&owner.app, &owner.user).await
    }

    #[tracing::instrument(skip_all, fields(op = "reopen", app = %owner.app, session_id = %id))]
    async fn reopen(&self, owner: &Owner, id: &SessionId) -> Result<Session> {
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
        id: &SessionId,
        message: Message,
    ) -> Result<AppendOutcome> {
        let event = match SessionEvent::builder(message)
            .estimate_with(self.estimator.as_ref())
            .build()
        {
            Ok(event) => event,
            Err(invalid) => {
                // Another owner's session is unknown, whatever the message.
                self.check_owner(owner, id).await?;
                return Err(invalid);
            }
        };
        self.append_checked(owner, id, vec![event], Access::Check)
            .await
    }

    #[tracing::instrument(skip_all, fields(op = "append", app = %owner.app, session_id = %id, events = events.len()))]
    async fn append_events(
        &self,
        owner: &Owner,
        id: &SessionId,
        events: Vec<SessionEvent>,
    ) -> Result<AppendOutcome> {
        self.append_checked(owner, id, events, Access::Check).await
    }

    #[tracing::instrument(skip_all, fields(op = "append", app = %session.app, session_id = %session.id, events = events.len()))]
    async fn append_to(
        &self,
        session: &mut Session,
        events: Vec<SessionEvent>,
    ) -> Result<AppendOutcome> {
        let owner = Owner::new(session.app.clone(), session.user_id.clone());
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
        let out = self
            .append_checked(&owner, &stored.id, events, Access::Checked)
            .await?;
        for d in &deltas {
            apply_delta(&mut session.state, d);
        }
        session.version = out.version;
        Ok(out)
    }

    #[tracing::instrument(skip_all, fields(op = "context", app = %owner.app, session_id = %id))]
    async fn context(
        &self,
        owner: &Owner,
        id: &SessionId,
        options: &ContextOptions,
    ) -> Result<Vec<Message>> {
        if let Some(branch) = &options.branch {
            crate::validate::validate_branch(branch)?;
        }
        let s = self.owned(owner, id).await?;
        let events = self.repo.all_events(&s.id, EventView::Context).await?;
        Ok(model_context(events, options))
    }

    #[tracing::instrument(skip_all, fields(op = "events", app = %owner.app, session_id = %id))]
    async fn events(
        &self,
        owner: &Owner,
        id: &SessionId,
        filter: &EventFilter,
    ) -> Result<Page<SessionEvent>> {
        self.check_owner(owner, id).await?;
        self.repo.events(id, filter).await
    }

    async fn items(
        &self,
        owner: &Owner,
        id: &SessionId,
        key: &str,
        filter: &EventFilter,
    ) -> Result<Page<crate::item::KeyedItem>> {
        self.check_owner(owner, id).await?;
        self.repo.items(id, key, filter).await
    }

    #[tracing::instrument(skip_all, fields(op = "session_items", app = %owner.app, session_id = %id))]
    async fn session_items(
        &self,
        owner: &Owner,
        id: &SessionId,
        key: &str,
        filter: &EventFilter,
    ) -> Result<crate::item::SessionItems> {
        let (mut read, shared) = self.repo.session_items(id, key, filter).await?;
        if !owner.can_access(&read.session) {
            return Err(SessionError::session_not_found(id));
        }
        read.session.state = merge_scopes(&read.session.state, &shared);
        Ok(read)
    }

    #[tracing::instrument(skip_all, fields(op = "search", app = %owner.app))]
    async fn search(&self, owner: &Owner, query: &SearchQuery) -> Result<Page<SearchHit>> {
        match &query.scope {
            SearchScope::Session(id) => {
                self.owned(owner, &SessionId::new(id.as_str())?).await?;
            }
            SearchScope::User { app, user_id } => {
                if owner.app != app.as_str() || owner.user != user_id.as_str() {
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
        id: &SessionId,
        events: Vec<SessionEvent>,
        expected_version: u64,
    ) -> Result<u64> {
        let s = self.owned(owner, id).await?;
        let mut events = events;
        SessionEvent::estimate_missing(&mut events, self.estimator.as_ref());
        if self
            .repo
            .replace_context(&s.id, events, expected_version)
            .await?
        {
            // A successful replace bumps the version by exactly one.
            crate::validate::next_version(expected_version)
        } else {
            Err(SessionError::Conflict {
                id: s.id.to_string(),
                expected: expected_version,
                actual: self.repo.event_version(&s.id).await?,
            })
        }
    }

    #[tracing::instrument(skip_all, fields(op = "compact", app = %owner.app, session_id = %id))]
    async fn compact(
        &self,
        owner: &Owner,
        id: &SessionId,
        compactor: &dyn Compactor,
    ) -> Result<Compacted> {
        let s = self.owned(owner, id).await?;
        // A compaction is a write: an ended session refuses it even when
        // there would be nothing to compact.
        if s.status == crate::session::SessionStatus::Archived {
            return Err(SessionError::SessionEnded {
                id: s.id.to_string(),
            });
        }
        compactor.compact(&self.repo, s).await
    }

    #[tracing::instrument(skip_all, fields(op = "rewind", app = %owner.app, session_id = %id))]
    async fn rewind(&self, owner: &Owner, id: &SessionId, to: &RewindTo) -> Result<Rewound> {
        let s = self.owned(owner, id).await?;
        let done = self.repo.rewind_restoring(&s.id, to).await?;
        let s = self.repo.get(&s.id).await?;
        Ok(Rewound {
            session: self.merged(s).await?,
            removed: done.removed,
        })
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
        id: &SessionId,
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
    async fn prune_archive(&self, owner: &Owner, id: &SessionId) -> Result<Pruned> {
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

    #[tracing::instrument(skip_all, fields(op = "pop", app = %owner.app, session_id = %id))]
    async fn pop(&self, owner: &Owner, id: &SessionId) -> Result<Option<SessionEvent>> {
        let s = self.owned(owner, id).await?;
        let filter = EventFilter::last(1)
            .view(EventView::Archive)
            .synthetic(SyntheticFilter::Exclude);
        let last = self.repo.events(&s.id, &filter).await?.items.pop();
        if let Some(event) = &last {
            self.repo
                .rewind_restoring(&s.id, &RewindTo::Seq(event.seq))
                .await?;
        }
        Ok(last)
    }

    #[tracing::instrument(skip_all, fields(op = "state", app = %owner.app, session_id = %id))]
    async fn state(&self, owner: &Owner, id: &SessionId) -> Result<ScopedState> {
        let s = self.owned(owner, id).await?;
        self.scoped(s).await
    }

    #[tracing::instrument(skip_all, fields(op = "patch_state", app = %owner.app, session_id = %id))]
    async fn patch_state(
        &self,
        owner: &Owner,
        id: &SessionId,
        patch: &StateMap,
        expected_version: Option<u64>,
    ) -> Result<ScopedState> {
        if let Some(key) = patch
            .keys()
            .find(|k| StateScope::of(k) != StateScope::Session)
        {
            return Err(SessionError::invalid(
                "state",
                format!(
                    "{key:?} is not a session-scope key: user:, app: and temp: keys change \
                     through the state deltas of events"
                ),
            ));
        }
        let s = self.owned(owner, id).await?;
        let mut state = s.state.clone();
        apply_delta(&mut state, patch);
        let update = SessionUpdate::new()
            .state(state)
            .expect_version(expected_version.unwrap_or(s.version));
        let updated = self.repo.update(&s.id, update).await?;
        self.scoped(updated).await
    }

    #[tracing::instrument(skip_all, fields(op = "shared_state", app = %owner.app))]
    async fn shared_state(&self, owner: &Owner) -> Result<SharedState> {
        self.repo.shared_state(&owner.app, &owner.user).await
    }

    #[tracing::instrument(skip_all, fields(op = "export", app = %owner.app, session_id = %id))]
    async fn export(&self, owner: &Owner, id: &SessionId) -> Result<SessionDump> {
        let s = self.owned(owner, id).await?;
        self.repo.export_session(&s.id).await
    }

    #[tracing::instrument(skip_all, fields(op = "usage", app = %owner.app, session_id = %id))]
    async fn usage(&self, owner: &Owner, id: &SessionId) -> Result<crate::UsageReport> {
        let s = self.owned(owner, id).await?;
        let events = self.repo.all_events(&s.id, EventView::Archive).await?;
        Ok(crate::UsageReport::from_events(&events))
    }
}
