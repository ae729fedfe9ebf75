//! [`SessionService`]: the lifecycle API agents call, owner-scoped.

use async_trait::async_trait;

use super::compact::{Compacted, Compactor};
use super::requests::{CreateSessionRequest, ResetPolicy, ResolveRequest, Resolved, Rewound};
use crate::context::ContextOptions;
use crate::dump::SessionDump;
use crate::error::Result;
use crate::event::SessionEvent;
use crate::filter::{EventFilter, Page, SessionQuery};
use crate::fork_at::ForkAt;
use crate::ids::SessionId;
use crate::message::Message;
use crate::outcome::AppendOutcome;
use crate::owner::Owner;
use crate::plan::RewindTo;
use crate::repository::Erased;
use crate::retention::{ArchiveRetention, Pruned, RetentionReport};
use crate::search::{SearchHit, SearchQuery};
use crate::session::{Session, SessionUpdate};
use crate::state::{ScopedState, SharedState, StateMap};
use crate::usage::UsageReport;

/// The lifecycle API, owner-scoped and object safe: the one door every
/// face (HTTP owner routes, MCP tools, the Python and Node bindings, the
/// CLI's everyday commands) calls. A call that names another owner's
/// session gets `NotFound`, exactly as for an unknown id.
#[async_trait]
pub trait SessionService: Send + Sync {
    /// Creates a session.
    async fn create(&self, request: CreateSessionRequest) -> Result<Session>;
    /// Reads a session, with session, `user:` and `app:` state merged.
    async fn get(&self, owner: &Owner, id: &SessionId) -> Result<Session>;
    /// Lists the owner's sessions (the query's app and user are the owner's).
    async fn list(&self, owner: &Owner, query: SessionQuery) -> Result<Page<Session>>;
    /// Lists the sessions of any owner the query matches: for an
    /// operator's tool (the CLI) and for a framework that lists an app's
    /// sessions without naming a user (the query names the app).
    async fn list_all(&self, query: SessionQuery) -> Result<Page<Session>>;
    /// The session `id` whoever owns it (shared state merged): for an
    /// operator's tool that names sessions by id alone (the CLI), which
    /// then calls the owner-scoped operations as [`Owner::of`] it.
    async fn locate(&self, id: &SessionId) -> Result<Session>;
    /// Changes metadata, session state, status or expiry.
    async fn update(&self, owner: &Owner, id: &SessionId, update: SessionUpdate)
        -> Result<Session>;
    /// Deletes a session and all its events.
    async fn delete(&self, owner: &Owner, id: &SessionId) -> Result<()>;
    /// Ends (archives) a session: still readable and searchable, never
    /// resolved again, and closed to writes (`SessionEnded`) until reopened.
    async fn end(&self, owner: &Owner, id: &SessionId) -> Result<Session>;
    /// Forks a session at `at` into a new session of the same owner (see
    /// [`crate::ForkAt`]); the source is untouched. `list` with
    /// `SessionQuery::forks_of` finds a session's forks.
    async fn fork(&self, owner: &Owner, id: &SessionId, at: &ForkAt) -> Result<Session>;
    /// Erases everything stored of the owner (every session of the user in
    /// the app, forks and ended ones included, their events and index
    /// entries, and the `user:` state); idempotent.
    async fn erase_user(&self, owner: &Owner) -> Result<Erased>;
    /// Reopens an ended session: writable again, and `resolve` may return it
    /// again (the most recently active session of a key wins).
    async fn reopen(&self, owner: &Owner, id: &SessionId) -> Result<Session>;
    /// Appends one message as a new event.
    async fn append_message(
        &self,
        owner: &Owner,
        id: &SessionId,
        message: Message,
    ) -> Result<AppendOutcome>;
    /// Appends a batch of events atomically (`temp:` state keys are
    /// dropped); an event without a token estimate gets the service's
    /// estimator's.
    async fn append_events(
        &self,
        owner: &Owner,
        id: &SessionId,
        events: Vec<SessionEvent>,
    ) -> Result<AppendOutcome>;
    /// Appends to `session` and applies the deltas, `temp:` keys included, to its in-memory state.
    async fn append_to(
        &self,
        session: &mut Session,
        events: Vec<SessionEvent>,
    ) -> Result<AppendOutcome>;
    /// The model-ready context (see [`crate::model_context`]): the pinned
    /// system messages first, then the context of the branch `options`
    /// names, tool calls without their results (and results without their
    /// calls) left out. Every face answers "the context" with this.
    async fn context(
        &self,
        owner: &Owner,
        id: &SessionId,
        options: &ContextOptions,
    ) -> Result<Vec<Message>>;
    /// The model-ready context of the whole session ([`Self::context`] with
    /// the default options).
    async fn messages(&self, owner: &Owner, id: &SessionId) -> Result<Vec<Message>> {
        self.context(owner, id, &ContextOptions::default()).await
    }
    /// Events through a filter.
    async fn events(
        &self,
        owner: &Owner,
        id: &SessionId,
        filter: &EventFilter,
    ) -> Result<Page<SessionEvent>>;
    /// A page of events as an adapter reads them back: each the object it
    /// stored under metadata `key`, or the event where there is none
    /// ([`crate::KeyedItem`]).
    async fn items(
        &self,
        owner: &Owner,
        id: &SessionId,
        key: &str,
        filter: &EventFilter,
    ) -> Result<Page<crate::item::KeyedItem>>;
    /// The session (as [`Self::get`] answers it) with a page of
    /// [`Self::items`], behind one owner check: an adapter's read of a
    /// whole conversation in one call. Another owner's session is
    /// `NotFound`, as `get`'s.
    async fn session_items(
        &self,
        owner: &Owner,
        id: &SessionId,
        key: &str,
        filter: &EventFilter,
    ) -> Result<crate::item::SessionItems>;
    /// Keyword search in one session's archive or across the owner's sessions.
    async fn search(&self, owner: &Owner, query: &SearchQuery) -> Result<Page<SearchHit>>;
    /// Compacts the context with `compactor` (a strategy, trigger and
    /// summarizer: `session-compaction`'s policies); the archive keeps
    /// every event.
    async fn compact(
        &self,
        owner: &Owner,
        id: &SessionId,
        compactor: &dyn Compactor,
    ) -> Result<Compacted>;
    /// Compare-and-swap of the context: the session's new version, or
    /// `Conflict` (with the version the session is at) when it was not at
    /// `expected_version`, and nothing changed. Events without a token
    /// estimate get the service's estimator's.
    async fn replace_context(
        &self,
        owner: &Owner,
        id: &SessionId,
        events: Vec<SessionEvent>,
        expected_version: u64,
    ) -> Result<u64>;
    /// Removes the events at and after `to` (an invocation's first event,
    /// or a seq) from the context and the archive, restores the context
    /// the session had there and replays the session state; returns the
    /// session after and how many events went.
    async fn rewind(&self, owner: &Owner, id: &SessionId, to: &RewindTo) -> Result<Rewound>;
    /// Removes the latest event that is not a summary from the archive and
    /// the context (a compaction since then is undone with it, as by a
    /// rewind); answers it, or `None` when the session has none.
    async fn pop(&self, owner: &Owner, id: &SessionId) -> Result<Option<SessionEvent>>;
    /// Finds or creates the active session for a key, resetting it by policy.
    async fn resolve(&self, request: &ResolveRequest, policy: &ResetPolicy) -> Result<Resolved>;
    /// Archives the active session for a key (if any) and creates a new one.
    async fn reset(&self, request: &ResolveRequest) -> Result<Session>;
    /// A session's state, one map per scope, and its version.
    async fn state(&self, owner: &Owner, id: &SessionId) -> Result<ScopedState>;
    /// Merges `patch` into the session scope (`null` removes a key) at
    /// `expected_version` (else at the version it reads); answers the state
    /// after. A `user:`, `app:` or `temp:` key is `InvalidInput`: those
    /// change through events' state deltas.
    async fn patch_state(
        &self,
        owner: &Owner,
        id: &SessionId,
        patch: &StateMap,
        expected_version: Option<u64>,
    ) -> Result<ScopedState>;
    /// The owner's `user:` state and the app's `app:` state.
    async fn shared_state(&self, owner: &Owner) -> Result<SharedState>;
    /// The whole session (head, events, context), as `export` writes it.
    async fn export(&self, owner: &Owner, id: &SessionId) -> Result<SessionDump>;
    /// Deletes every expired session; returns how many.
    async fn purge_expired(&self) -> Result<u64>;
    /// Sets (or with `None` clears) a session's own archive retention
    /// policy (see [`crate::retention`]); returns the session after.
    async fn set_retention(
        &self,
        owner: &Owner,
        id: &SessionId,
        policy: Option<ArchiveRetention>,
    ) -> Result<Session>;
    /// Runs the retention policy that applies to a session (its own, else
    /// the service's defaults) now.
    async fn prune_archive(&self, owner: &Owner, id: &SessionId) -> Result<Pruned>;
    /// Runs the retention policies over every session of the store (what a
    /// purge does besides deleting expired sessions).
    async fn prune_archives(&self) -> Result<RetentionReport>;
    /// The model usage recorded in a session ([`crate::ModelUsage`] on its
    /// events), in total, per invocation and per model.
    async fn usage(&self, owner: &Owner, id: &SessionId) -> Result<UsageReport>;
}
