//! The storage SPI every backend implements.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::context_log::ContextLog;
use crate::dump::SessionDump;
use crate::error::{Result, SessionError};
use crate::event::SessionEvent;
use crate::filter::{EventFilter, EventView, Page, SessionQuery};
use crate::fork::{fork_dump, fork_target, merge_restored, replaced_by};
use crate::fork_at::ForkAt;
use crate::ids::{AppName, InvocationId, SessionId, UserId};
use crate::item::{KeyedItem, SessionItems};
use crate::outcome::{AppendOutcome, ImportOutcome, RewindOutcome};
use crate::owner::Owner;
use crate::plan::{context_at, Restore, RewindTo};
use crate::retention::Pruned;
use crate::search::{SearchHit, SearchMode, SearchQuery};
use crate::session::{NewSession, Session, SessionUpdate};
use crate::state::SharedState;

/// What a backend supports beyond the common contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
#[allow(clippy::struct_excessive_bools)] // independent yes/no facts about a backend
pub struct Capabilities {
    /// The backend's short name (`memory`, `sqlite`, ...).
    pub backend: &'static str,
    /// [`SearchMode::Ranked`] is supported.
    pub ranked_search: bool,
    /// Expiry is enforced by the engine itself (key TTLs).
    pub native_ttl: bool,
    /// Data survives the process.
    pub durable: bool,
    /// Several processes may share the store.
    pub multi_process: bool,
}

impl Capabilities {
    /// The capabilities of a backend named `backend` with no extras.
    pub fn basic(backend: &'static str) -> Self {
        Self {
            backend,
            ranked_search: false,
            native_ttl: false,
            durable: false,
            multi_process: false,
        }
    }

    /// Declares ranked search.
    pub fn with_ranked_search(mut self) -> Self {
        self.ranked_search = true;
        self
    }

    /// Declares engine-enforced expiry.
    pub fn with_native_ttl(mut self) -> Self {
        self.native_ttl = true;
        self
    }

    /// Declares durable storage.
    pub fn with_durable(mut self) -> Self {
        self.durable = true;
        self
    }

    /// Declares multi-process sharing.
    pub fn with_multi_process(mut self) -> Self {
        self.multi_process = true;
        self
    }

    /// The one check of a search against what the backend supports:
    /// `Unsupported` for ranked search on a backend without it.
    pub fn check_search(&self, query: &SearchQuery) -> Result<()> {
        if query.mode == SearchMode::Ranked && !self.ranked_search {
            return Err(SessionError::unsupported(self.backend, "ranked search"));
        }
        Ok(())
    }
}

/// The storage SPI: sessions, their event log in two views, shared state.
///
/// Object safe; use it as `Arc<dyn SessionRepository>`. Every method is
/// required. Conveniences live on [`SessionRepositoryExt`]. The repository
/// is unscoped (an operator's view): owner checks are the service's job.
///
/// # Contract
///
/// **Sessions.** `create` stores a [`NewSession`] at version 0 after
/// [`NewSession::validate`]; an id held by a live session is
/// `AlreadyExists` (an expired, unpurged one is replaced). Its initial state
/// is applied like a state delta. `get`, `events`, `event_version` and
/// `search` treat an expired session as absent (`NotFound`); writes to one
/// are `Expired`. `delete` removes the session and all its events (no
/// tombstone) and returns whether it existed. `list` returns sessions
/// matching a [`SessionQuery`], newest activity first (ties by id),
/// expired ones left out. `purge_expired(now)` deletes exactly the
/// sessions whose expiry is at or before `now`.
///
/// **Versions.** Every successful mutating call (an append batch that
/// writes something, a context replace, a rewind, an update) bumps the
/// version by exactly one; it never goes back, and readers never see it go
/// down. Order and concurrency use `seq` and the version, never timestamps.
///
/// **Append.** Atomic for the batch: all events are written or none.
/// Each new event gets the next `seq` (strictly increasing per session,
/// never reused, even after a rewind), joins the end of the context and the
/// archive, and has its `state_delta` applied in the same atomic step:
/// plain keys to the session's state, `user:` keys to the (app, user)
/// scope, `app:` keys to the app scope; `null` removes a key. `temp:` keys
/// are never stored ([`crate::prepare_events`] strips them). An event
/// whose id the session already holds writes nothing and reports its
/// existing seq, so a client that timed out can always retry. Events are
/// checked with [`crate::prepare_events`] before anything is written.
///
/// **Views.** The context is what the agent sends its model; the archive is
/// every event appended, in `seq` order. `replace_context(id, events,
/// expected)` is a compare-and-swap: if the version is not `expected`
/// it returns `false` and changes nothing; else the context becomes
/// exactly `events` in the given order (ids the session holds refer to the
/// stored events; new ids are appended to the archive with new seqs, as
/// an append would) and the version bumps. Nothing ever leaves the archive
/// except through delete, rewind and purge.
///
/// **Rewind.** `rewind_to(id, to)` finds the first archived event of
/// an invocation (`NotFound` if none), or takes a seq the session assigned
/// (`NotFound` outside `1..=last_seq`), and removes it and every later
/// event from the archive and the context; the session-scope state becomes
/// the session's initial state with the remaining events' deltas replayed.
///
/// **Reads.** `events` applies an [`EventFilter`] (see its docs); `search`
/// returns exactly the archived events (synthetic ones included) that
/// [`SearchQuery::admits`]: at or after the query's `since`, and whose
/// [`crate::Message::search_text`] the query's [`crate::ParsedQuery`]
/// matches (every word, or any one in [`crate::MatchTerms::Any`] mode, as
/// a case- and accent-insensitive substring, quoted phrases, `-`
/// exclusions; nothing else is syntax), chronological (`seq`;
/// across sessions by timestamp, then session id, then seq) or, ranked,
/// best first; with a snippet per hit and the page's `total`.
///
/// **Text.** Any valid Rust `String` round-trips exactly: NUL and every
/// Unicode plane included. Timestamps round-trip at microsecond precision.
///
/// # Implementing a backend
///
/// Identifiers arrive valid ([`SessionId`], [`InvocationId`], [`AppName`],
/// [`UserId`] can only hold valid values), so a backend never checks them.
/// Every write follows one pattern: read what the write depends on (the
/// session's [`crate::plan::Head`] and which ids of the batch it already
/// holds), ask [`crate::plan`] for the plan (seqs, duplicates, merged state
/// changes, the new version, or the typed error), and persist the plan in
/// one transaction, script or request. Reads use [`crate::plan::readable`]
/// and the queries' `check` methods. Map engine errors onto
/// [`SessionError`] in the crate's `error.rs`, keeping the driver error as
/// the source; report corrupt stored rows as `Serialization` errors naming
/// the session and seq; declare what the engine supports in
/// [`Capabilities`] and use its checks for optional features; run the
/// `session-testkit` conformance suite. `docs/backends/new.md` walks
/// through a complete store.
#[async_trait]
pub trait SessionRepository: Send + Sync {
    /// What this backend supports.
    fn capabilities(&self) -> Capabilities;

    /// Stores a new session.
    async fn create(&self, session: NewSession) -> Result<Session>;

    /// Reads a session (session-scope state only).
    async fn get(&self, id: &SessionId) -> Result<Session>;

    /// Changes metadata, state, status or expiry; bumps the version.
    async fn update(&self, id: &SessionId, update: SessionUpdate) -> Result<Session>;

    /// Deletes a session and all its events; `false` if there was none.
    async fn delete(&self, id: &SessionId) -> Result<bool>;

    /// Lists sessions, newest activity first.
    async fn list(&self, query: &SessionQuery) -> Result<Page<Session>>;

    /// Deletes every session expired at `now`; returns how many.
    async fn purge_expired(&self, now: DateTime<Utc>) -> Result<u64>;

    /// Appends a batch of events atomically.
    async fn append(&self, id: &SessionId, events: Vec<SessionEvent>) -> Result<AppendOutcome>;

    /// [`Self::append`] to a session `owner` may use (see
    /// [`Owner::may_access`]): another owner's session is `NotFound`, as
    /// are absent and expired ones, and nothing is written.
    ///
    /// Default: [`Self::owner_of`], then [`Self::append`]; a store
    /// overrides it to check the owner in the append's own transaction.
    async fn append_owned(
        &self,
        owner: &Owner,
        id: &SessionId,
        events: Vec<SessionEvent>,
    ) -> Result<AppendOutcome> {
        if !owner.may_access(&self.owner_of(id).await?) {
            return Err(SessionError::session_not_found(id));
        }
        self.append(id, events).await
    }

    /// The owner of session `id`, what the service checks callers
    /// against: `NotFound` where [`Self::get`] is (absent, expired).
    ///
    /// Default: [`Self::get`]; a store overrides it to read the owner alone.
    async fn owner_of(&self, id: &SessionId) -> Result<Owner> {
        self.get(id).await.map(|s| Owner::of(&s))
    }

    /// Reads events of one view through a filter.
    async fn events(&self, id: &SessionId, filter: &EventFilter) -> Result<Page<SessionEvent>>;

    /// A page of `filter`'s events as an adapter reads them back: each the
    /// object stored under metadata `key`, or the event (see [`KeyedItem`]).
    ///
    /// Default: [`Self::events`], each event's metadata looked up; a store
    /// that keeps events as JSON text overrides it to copy the objects out
    /// without decoding the events.
    async fn items(
        &self,
        id: &SessionId,
        key: &str,
        filter: &EventFilter,
    ) -> Result<Page<KeyedItem>> {
        Ok(crate::item::keyed_page(self.events(id, filter).await?, key))
    }

    /// The session (session-scope state), the shared state of its app and
    /// user, and a page of [`Self::items`], read together: what the
    /// service's [`crate::SessionService::session_items`] answers from.
    ///
    /// Default: [`Self::get`], [`Self::shared_state`], then
    /// [`Self::items`]; a store overrides it to read the three in one
    /// snapshot.
    async fn session_items(
        &self,
        id: &SessionId,
        key: &str,
        filter: &EventFilter,
    ) -> Result<(SessionItems, SharedState)> {
        session_items_apart(self, id, key, filter).await
    }

    /// The session's current version.
    async fn event_version(&self, id: &SessionId) -> Result<u64>;

    /// Compare-and-swap of the context; `false` = the version moved, nothing changed.
    async fn replace_context(
        &self,
        id: &SessionId,
        events: Vec<SessionEvent>,
        expected_version: u64,
    ) -> Result<bool>;

    /// Removes the events from `to` on (an invocation's first event, or a
    /// seq) from the archive and the context, and replays state.
    async fn rewind_to(&self, id: &SessionId, to: &RewindTo) -> Result<RewindOutcome>;

    /// [`Self::rewind_to`] the first archived event of an invocation.
    async fn rewind(
        &self,
        id: &SessionId,
        before_invocation_id: &InvocationId,
    ) -> Result<RewindOutcome> {
        self.rewind_to(id, &RewindTo::Invocation(before_invocation_id.clone()))
            .await
    }

    /// Literal (or ranked) keyword search over archives.
    async fn search(&self, query: &SearchQuery) -> Result<Page<SearchHit>>;

    /// The `app:` and `user:` scopes of one user in one app.
    async fn shared_state(&self, app: &AppName, user_id: &UserId) -> Result<SharedState>;

    /// Everything about one session, for export and migration.
    async fn export_session(&self, id: &SessionId) -> Result<SessionDump>;

    /// The session's context history: one change per context replace,
    /// oldest first (what a restoring rewind plans from).
    ///
    /// Default: read out of [`Self::export_session`], which costs the whole
    /// session; a store that keeps the changes apart overrides it.
    async fn context_log(&self, id: &SessionId) -> Result<ContextLog> {
        Ok(ContextLog::new(self.export_session(id).await?.context_log))
    }

    /// Writes a dumped session exactly (ids, seqs, timestamps, version,
    /// context, state, and the owner's shared scopes). Idempotent: if the
    /// store holds the session at the same or a later version, nothing changes.
    async fn import_session(&self, dump: SessionDump) -> Result<ImportOutcome>;

    /// Erases everything the store holds of `user_id` in `app`: every
    /// session the user owns (active, ended, expired but not yet purged,
    /// forks included) with its events, context history and search index
    /// entries, and the user's `user:` state. Group sessions of the app and
    /// the `app:` state are not the user's and stay. Idempotent: a second
    /// call erases nothing and reports zeros.
    async fn erase_user(&self, app: &AppName, user_id: &UserId) -> Result<Erased>;

    /// Removes the archived events at `seqs` (as
    /// [`crate::retention::ArchiveRetention::removable`] chooses them), with
    /// their search index entries and their ids, if the session is still at
    /// `expected_version`; `None` (nothing written) if it moved. Plan with
    /// [`crate::retention::PrunePlan`], given where each seq stands as read
    /// with the head: a seq in the context or not in the archive is
    /// `InvalidInput` naming it, and nothing is pruned. The version goes up
    /// by one, the event count drops by the events removed, `last_seq` and
    /// `updated_at` stay (a prune is not activity).
    async fn prune_events(
        &self,
        id: &SessionId,
        seqs: &[u64],
        expected_version: u64,
    ) -> Result<Option<Pruned>>;

    /// Forks session `source` at `at` into the new session `id` created at
    /// `now` (planned by [`crate::ForkPlan`]) and returns it; the source is
    /// never touched. When `id` already holds a fork of `source` (a retried
    /// fork whose answer was lost), that fork is returned.
    ///
    /// Default: one consistent export, planned in core, written by one
    /// import. A store that can copy its stored rows overrides it to copy
    /// the events as they are stored, without decoding them; a layer that
    /// rewrites events (encryption) keeps the default.
    async fn fork_session(
        &self,
        source: &SessionId,
        at: &ForkAt,
        id: SessionId,
        now: DateTime<Utc>,
    ) -> Result<Session> {
        let found = match self.get(&id).await {
            Ok(s) => Some(s),
            Err(SessionError::NotFound { .. }) => None,
            Err(e) => return Err(e),
        };
        if let Some(held) = fork_target(found, source, &id, now)? {
            return Ok(held);
        }
        let dump = self.export_session(source).await?;
        let fork = fork_dump(dump, at, id, now)?;
        let id = fork.session.id.clone();
        self.import_session(fork).await?;
        self.get(&id).await
    }
}

/// What [`SessionRepository::erase_user`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Erased {
    /// Sessions removed.
    pub sessions: u64,
    /// Events removed with them.
    pub events: u64,
    /// Whether the user had `user:` state, now removed.
    pub user_state: bool,
}

/// Conveniences over any [`SessionRepository`].
#[async_trait]
pub trait SessionRepositoryExt: SessionRepository {
    /// Every event of a view, reading page by page with the keyset cursor
    /// ([`EventFilter::after`]), so the cost is linear in the view's length.
    async fn all_events(&self, id: &SessionId, view: EventView) -> Result<Vec<SessionEvent>> {
        let mut out = Vec::new();
        let mut filter = EventFilter::default().view(view).page(0, 1000);
        loop {
            let p = self.events(id, &filter).await?;
            let next = p.next_after();
            out.extend(p.items);
            match next {
                Some(seq) => filter = filter.after(seq),
                None => return Ok(out),
            }
        }
    }

    /// Rewinds to before `to` and leaves the context exactly as it was just
    /// before that point was appended, whatever compactions ran since: the
    /// session's [`ContextLog`] tells the context at the point
    /// ([`crate::plan::context_at`]), and the events of it the rewind kept
    /// come back in their order. A session compacted before its store kept
    /// context changes gets back what the removed summaries and
    /// placeholders replaced (their [`crate::REPLACES_KEY`]), pinned system
    /// messages first. The restore is a compare-and-swap on the version the
    /// rewind left: a writer that moved the session on in between wins and
    /// the context stays as the rewind left it. This is what
    /// [`crate::SessionService::rewind`] and the CLI's `rewind` run.
    async fn rewind_restoring(&self, id: &SessionId, to: &RewindTo) -> Result<RewindOutcome> {
        let log = self.context_log(id).await?;
        let point = match to {
            RewindTo::Seq(seq) => Some(*seq),
            RewindTo::Invocation(inv) => {
                let first = EventFilter::archive().invocation(inv.as_str()).page(0, 1);
                self.events(id, &first).await?.items.first().map(|e| e.seq)
            }
        };
        let before = self.all_events(id, EventView::Context).await?;
        let out = self.rewind_to(id, to).await?;
        let after = self.all_events(id, EventView::Context).await?;
        let planned = match point {
            Some(point) if !log.changes().is_empty() => {
                let archive = self.all_events(id, EventView::Archive).await?;
                match context_at(&log, &archive, point) {
                    Restore::Context(seqs) => Some((seqs, archive)),
                    Restore::Unknown => None,
                }
            }
            _ => None,
        };
        let context = match planned {
            Some((seqs, _)) if seqs.iter().copied().eq(after.iter().map(|e| e.seq)) => {
                return Ok(out)
            }
            Some((seqs, archive)) => {
                let mut by_seq: HashMap<u64, SessionEvent> =
                    archive.into_iter().map(|e| (e.seq, e)).collect();
                seqs.iter().filter_map(|s| by_seq.remove(s)).collect()
            }
            None => match restored_by_summaries(self, id, &before, after).await? {
                Some(context) => context,
                None => return Ok(out),
            },
        };
        if self.replace_context(id, context, out.version).await? {
            Ok(RewindOutcome {
                version: out.version.saturating_add(1),
                removed: out.removed,
            })
        } else {
            tracing::info!(session_id = %id, "the session moved on during a rewind; its context was not restored");
            Ok(out)
        }
    }

    /// Forks session `source` at `at` into a new session with a generated
    /// id, created at `now` (see [`SessionRepository::fork_session`]); the
    /// source is never touched.
    async fn fork(&self, source: &SessionId, at: &ForkAt, now: DateTime<Utc>) -> Result<Session> {
        self.fork_session(source, at, SessionId::generate(), now)
            .await
    }

    /// Appends one event; returns its seq.
    async fn append_one(&self, id: &SessionId, event: SessionEvent) -> Result<u64> {
        let out = self.append(id, vec![event]).await?;
        out.seqs.first().copied().ok_or_else(|| {
            SessionError::backend(self.capabilities().backend, "append returned no seq")
        })
    }
}

impl<T: SessionRepository + ?Sized> SessionRepositoryExt for T {}

/// [`SessionRepository::session_items`] as three reads one after the
/// other: [`SessionRepository::get`], [`SessionRepository::shared_state`],
/// then [`SessionRepository::items`] (the default, and what a store falls
/// back on for a filter it cannot read in one snapshot).
pub async fn session_items_apart<R: SessionRepository + ?Sized>(
    repo: &R,
    id: &SessionId,
    key: &str,
    filter: &EventFilter,
) -> Result<(SessionItems, SharedState)> {
    let session = repo.get(id).await?;
    let shared = repo.shared_state(&session.app, &session.user_id).await?;
    let items = repo.items(id, key, filter).await?;
    Ok((SessionItems { session, items }, shared))
}

/// The context a rewind leaves when the session's history cannot tell the
/// context at the point: `after` (the context the rewind left) with the
/// events the removed summaries of `before` replaced brought back; `None`
/// when there are none.
async fn restored_by_summaries<R: SessionRepository + ?Sized>(
    repo: &R,
    id: &SessionId,
    before: &[SessionEvent],
    after: Vec<SessionEvent>,
) -> Result<Option<Vec<SessionEvent>>> {
    let still: HashSet<&str> = after.iter().map(|e| e.id.as_str()).collect();
    let wanted = replaced_by(before.iter().filter(|e| !still.contains(e.id.as_str())));
    if wanted.is_empty() {
        return Ok(None);
    }
    let in_context: HashSet<u64> = after.iter().map(|e| e.seq).collect();
    let restored: Vec<SessionEvent> = repo
        .all_events(id, EventView::Archive)
        .await?
        .into_iter()
        .filter(|e| wanted.contains(&e.seq) && !in_context.contains(&e.seq))
        .collect();
    if restored.is_empty() {
        return Ok(None);
    }
    Ok(Some(merge_restored(after, restored)))
}

macro_rules! forward_repository {
    ($($ty:ty),*) => {$(
        #[async_trait]
        impl<T: SessionRepository + ?Sized> SessionRepository for $ty {
            fn capabilities(&self) -> Capabilities {
                (**self).capabilities()
            }
            async fn create(&self, session: NewSession) -> Result<Session> {
                (**self).create(session).await
            }
            async fn get(&self, id: &SessionId) -> Result<Session> {
                (**self).get(id).await
            }
            async fn update(&self, id: &SessionId, update: SessionUpdate) -> Result<Session> {
                (**self).update(id, update).await
            }
            async fn delete(&self, id: &SessionId) -> Result<bool> {
                (**self).delete(id).await
            }
            async fn list(&self, query: &SessionQuery) -> Result<Page<Session>> {
                (**self).list(query).await
            }
            async fn purge_expired(&self, now: DateTime<Utc>) -> Result<u64> {
                (**self).purge_expired(now).await
            }
            async fn append(&self, id: &SessionId, events: Vec<SessionEvent>) -> Result<AppendOutcome> {
                (**self).append(id, events).await
            }
            async fn owner_of(&self, id: &SessionId) -> Result<Owner> {
                (**self).owner_of(id).await
            }
            async fn append_owned(
                &self,
                owner: &Owner,
                id: &SessionId,
                events: Vec<SessionEvent>,
            ) -> Result<AppendOutcome> {
                (**self).append_owned(owner, id, events).await
            }
            async fn events(&self, id: &SessionId, filter: &EventFilter) -> Result<Page<SessionEvent>> {
                (**self).events(id, filter).await
            }
            async fn items(&self, id: &SessionId, key: &str, filter: &EventFilter) -> Result<Page<KeyedItem>> {
                (**self).items(id, key, filter).await
            }
            async fn session_items(
                &self,
                id: &SessionId,
                key: &str,
                filter: &EventFilter,
            ) -> Result<(SessionItems, SharedState)> {
                (**self).session_items(id, key, filter).await
            }
            async fn event_version(&self, id: &SessionId) -> Result<u64> {
                (**self).event_version(id).await
            }
            async fn replace_context(
                &self,
                id: &SessionId,
                events: Vec<SessionEvent>,
                expected_version: u64,
            ) -> Result<bool> {
                (**self).replace_context(id, events, expected_version).await
            }
            async fn rewind_to(&self, id: &SessionId, to: &RewindTo) -> Result<RewindOutcome> {
                (**self).rewind_to(id, to).await
            }
            async fn search(&self, query: &SearchQuery) -> Result<Page<SearchHit>> {
                (**self).search(query).await
            }
            async fn shared_state(&self, app: &AppName, user_id: &UserId) -> Result<SharedState> {
                (**self).shared_state(app, user_id).await
            }
            async fn export_session(&self, id: &SessionId) -> Result<SessionDump> {
                (**self).export_session(id).await
            }
            async fn context_log(&self, id: &SessionId) -> Result<ContextLog> {
                (**self).context_log(id).await
            }
            async fn erase_user(&self, app: &AppName, user_id: &UserId) -> Result<Erased> {
                (**self).erase_user(app, user_id).await
            }
            async fn prune_events(
                &self,
                id: &SessionId,
                seqs: &[u64],
                expected_version: u64,
            ) -> Result<Option<Pruned>> {
                (**self).prune_events(id, seqs, expected_version).await
            }
            async fn import_session(&self, dump: SessionDump) -> Result<ImportOutcome> {
                (**self).import_session(dump).await
            }
            async fn fork_session(
                &self,
                source: &SessionId,
                at: &ForkAt,
                id: SessionId,
                now: DateTime<Utc>,
            ) -> Result<Session> {
                (**self).fork_session(source, at, id, now).await
            }
        }
    )*};
}

forward_repository!(Arc<T>, Box<T>);

impl std::fmt::Debug for dyn SessionRepository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionRepository")
            .field("backend", &self.capabilities().backend)
            .finish_non_exhaustive()
    }
}
