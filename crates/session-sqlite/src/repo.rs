//! The `SessionRepository` impl: read the head, plan in `session_core::plan`, persist in one transaction.

use std::sync::atomic::Ordering;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::Transaction;
use session_core::plan::{
    plan_update, AppendPlan, ContextPlan, CreatePlan, EventBatch, HeadChange, ImportPlan,
    OwnerQuota, RewindPlan,
};
use session_core::retention::{PrunePlan, Pruned, Standing};
use session_core::ContextLog;
use session_core::{
    prepare_events, AppName, AppendOutcome, Capabilities, Erased, EventFilter, EventView, ForkAt,
    ImportOutcome, KeyedItem, Limits, NewSession, Owner, Page, RewindOutcome, RewindTo, SearchHit,
    SearchMode, SearchQuery, Session, SessionDump, SessionError, SessionEvent, SessionId,
    SessionItems, SessionQuery, SessionRepository, SessionUpdate, SharedState, UserId,
};

use crate::error::{Result, BACKEND};
use crate::repository::{Inner, Location, SqliteRepository};
use crate::sessions::SessionHead;
use crate::sql::next_position;
use crate::{events, history, search, sessions, shared};

/// Writes the session row and the shared scopes after an append or a
/// context replace: the planned state changes, version and counters.
fn write_head(
    tx: &Transaction<'_>,
    h: &mut SessionHead,
    change: &HeadChange<'_>,
    next_ctx_pos: i64,
    now: DateTime<Utc>,
) -> Result<()> {
    let json = h.state_after(&change.state.session)?;
    sessions::advance(tx, &h.head.id, json.as_deref(), change, next_ctx_pos, now)?;
    shared::apply(tx, &h.app, &h.user_id, &change.state.shared)
}

/// Appends `batch` to session `id` in the writer's transaction: the head
/// read, the plan, the new rows at the end of the context, the head written.
fn append_batch(
    tx: &Transaction<'_>,
    id: &SessionId,
    batch: &EventBatch,
    now: DateTime<Utc>,
    inner: &Inner,
) -> Result<AppendOutcome> {
    let mut h = sessions::head(tx, id, now)?;
    let held = events::held(tx, id, &batch.ids())?;
    let plan = AppendPlan::new(&h.head, batch, &held)?;
    if plan.is_noop() {
        return Ok(plan.outcome());
    }
    // New events join the end of the context.
    let mut pos = h.next_ctx_pos;
    let mut last_rowid = None;
    for n in &plan.new {
        let (event, body) = (&batch.events[n.index], &batch.bodies[n.index]);
        last_rowid = Some(events::insert(tx, id, n.seq, Some(pos), event, body)?);
        pos = next_position(pos)?;
    }
    write_head(tx, &mut h, &plan.head_change(), pos, now)?;
    if let Some(rowid) = last_rowid {
        inner.indexing().after_insert(tx, rowid)?;
    }
    Ok(plan.outcome())
}

/// The sessions-per-user quota for a new `session`, counted in the
/// writer's transaction.
fn check_owner_quota(
    tx: &rusqlite::Transaction<'_>,
    inner: &Inner,
    session: &Session,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<()> {
    OwnerQuota::check_counted(&inner.limits, session, || {
        sessions::live_of_owner(tx, &session.app, &session.user_id, now)
    })
}

impl SqliteRepository {
    /// Indexes the events waiting above the search index's watermark when
    /// more than [`search::SEARCH_TAIL`] wait, for a search about to read.
    /// Only a speed-up: when the write fails (another process holds the
    /// write lock past the busy timeout), the search scans the tail.
    async fn index_before_search(&self) {
        match self
            .write(|tx, _, _| search::index_pending(tx, search::SEARCH_TAIL))
            .await
        {
            Ok(mark) => self.inner.index_mark_hint.store(mark, Ordering::Relaxed),
            Err(e) => tracing::warn!(
                backend = BACKEND,
                error = %e,
                "could not index the pending events before a search; it reads them directly"
            ),
        }
    }
}

#[async_trait]
impl SessionRepository for SqliteRepository {
    fn capabilities(&self) -> Capabilities {
        let c = Capabilities::basic(BACKEND).with_ranked_search();
        match self.inner.location {
            Location::File(_) => c.with_durable().with_multi_process(),
            Location::Memory => c,
        }
    }

    async fn create(&self, new: NewSession) -> Result<Session> {
        self.write(move |tx, now, inner| {
            let existing = sessions::existing(tx, &new.id)?;
            let plan = CreatePlan::new(new, existing, now)?;
            check_owner_quota(tx, inner, &plan.session, now)?;
            if existing.is_some() {
                // An expired session under the same id: replaced.
                sessions::purge(tx, &plan.session.id)?;
            }
            sessions::insert(tx, &plan.session, &plan.initial_state, 0, 1)?;
            shared::apply(tx, &plan.session.app, &plan.session.user_id, &plan.shared)?;
            Ok(plan.session)
        })
        .await
    }

    async fn get(&self, id: &SessionId) -> Result<Session> {
        let id = id.clone();
        self.read(move |c, now| sessions::get(c, &id, now)).await
    }

    async fn owner_of(&self, id: &SessionId) -> Result<Owner> {
        let id = id.clone();
        self.read(move |c, now| sessions::owner_of(c, &id, now))
            .await
    }

    async fn update(&self, id: &SessionId, update: SessionUpdate) -> Result<Session> {
        update.validate(self.inner.clock.now())?;
        let id = id.clone();
        self.write(move |tx, now, _| {
            let h = sessions::head(tx, &id, now)?;
            let version = plan_update(&h.head, &update)?;
            sessions::update(tx, &id, &update, version, now)?;
            sessions::get(tx, &id, now)
        })
        .await
    }

    async fn delete(&self, id: &SessionId) -> Result<bool> {
        let id = id.clone();
        self.write(move |tx, _, _| sessions::purge(tx, &id)).await
    }

    async fn erase_user(&self, app: &AppName, user_id: &UserId) -> Result<Erased> {
        let (app, user) = (app.to_string(), user_id.to_string());
        let erased = self
            .write(move |tx, _, _| sessions::erase_user(tx, &app, &user))
            .await?;
        // `secure_delete` zeroed what the erasure freed in the pages; the
        // log's older page images go with the truncation.
        self.truncate_wal().await?;
        Ok(erased)
    }

    async fn list(&self, query: &SessionQuery) -> Result<Page<Session>> {
        query.check(&self.inner.limits)?;
        let query = query.clone();
        self.read(move |c, now| sessions::list(c, &query, now))
            .await
    }

    async fn purge_expired(&self, now: DateTime<Utc>) -> Result<u64> {
        self.write(move |tx, _, _| sessions::purge_expired(tx, now))
            .await
    }

    async fn append(&self, id: &SessionId, events: Vec<SessionEvent>) -> Result<AppendOutcome> {
        let batch = EventBatch::new(events, &self.inner.limits)?;
        let id = id.clone();
        self.write(move |tx, now, inner| append_batch(tx, &id, &batch, now, inner))
            .await
    }

    async fn append_owned(
        &self,
        owner: &Owner,
        id: &SessionId,
        events: Vec<SessionEvent>,
    ) -> Result<AppendOutcome> {
        // Checked before the batch is judged: another owner's session is
        // unknown, whatever the events (as on every store).
        let batch = EventBatch::new(events, &self.inner.limits);
        let (owner, id) = (owner.clone(), id.clone());
        self.write(move |tx, now, inner| {
            // In the append's transaction: no read of its own.
            if !owner.may_access(&sessions::owner_of(tx, &id, now)?) {
                return Err(SessionError::session_not_found(&id));
            }
            append_batch(tx, &id, &batch?, now, inner)
        })
        .await
    }

    async fn events(&self, id: &SessionId, filter: &EventFilter) -> Result<Page<SessionEvent>> {
        filter.check(&self.inner.limits)?;
        let id = id.clone();
        let filter = filter.clone();
        self.read(move |c, now| {
            sessions::ensure_live(c, &id, now)?;
            let mut page = events::read(c, &id, &filter)?;
            if filter.view == EventView::Archive {
                history::read(c, &id)?.annotate(&mut page.items);
            }
            Ok(page)
        })
        .await
    }

    async fn items(
        &self,
        id: &SessionId,
        key: &str,
        filter: &EventFilter,
    ) -> Result<Page<KeyedItem>> {
        // The archive view annotates events with their context history,
        // and the other criteria need the events' fields: both read whole.
        if filter.view == EventView::Archive || !filter.selects_by_position() {
            return Ok(session_core::keyed_page(
                self.events(id, filter).await?,
                key,
            ));
        }
        filter.check(&self.inner.limits)?;
        let (id, key, filter) = (id.clone(), key.to_owned(), filter.clone());
        self.read(move |c, now| {
            sessions::ensure_live(c, &id, now)?;
            events::read_items(c, &id, &key, &filter)
        })
        .await
    }

    async fn session_items(
        &self,
        id: &SessionId,
        key: &str,
        filter: &EventFilter,
    ) -> Result<(SessionItems, SharedState)> {
        if filter.view == EventView::Archive || !filter.selects_by_position() {
            // Read whole (see `items`), one read after the other.
            return session_core::session_items_apart(self, id, key, filter).await;
        }
        filter.check(&self.inner.limits)?;
        let (id, key, filter) = (id.clone(), key.to_owned(), filter.clone());
        // One snapshot: the session, its app's and user's state, the page.
        self.read(move |c, now| {
            let session = sessions::get(c, &id, now)?;
            let shared = shared::read(c, &session.app, &session.user_id)?;
            let items = events::read_items(c, &id, &key, &filter)?;
            Ok((SessionItems { session, items }, shared))
        })
        .await
    }

    async fn event_version(&self, id: &SessionId) -> Result<u64> {
        let id = id.clone();
        self.read(move |c, now| sessions::event_version(c, &id, now))
            .await
    }

    async fn replace_context(
        &self,
        id: &SessionId,
        events: Vec<SessionEvent>,
        expected_version: u64,
    ) -> Result<bool> {
        let batch = EventBatch::new(events, &self.inner.limits)?;
        let id = id.clone();
        self.write(move |tx, now, inner| {
            let mut h = sessions::head(tx, &id, now)?;
            let held = events::held(tx, &id, &batch.ids())?;
            let Some(plan) = ContextPlan::new(&h.head, expected_version, &batch, &held)? else {
                return Ok(false);
            };
            // The new context starts above every position so far; the
            // events that leave it keep their rows as they are, and one
            // row of the context's history says when they left.
            events::set_context_base(tx, &id, h.next_ctx_pos)?;
            history::record(tx, &id, &plan.change(now))?;
            // The context in batch order: held events move, new ones are written there.
            let mut new = plan.new.iter().peekable();
            let mut pos = h.next_ctx_pos;
            let mut last_rowid = None;
            for (index, seq) in plan.context.iter().enumerate() {
                match new.next_if(|n| n.index == index) {
                    Some(n) => {
                        let (event, body) = (&batch.events[index], &batch.bodies[index]);
                        let rowid = events::insert(tx, &id, n.seq, Some(pos), event, body)?;
                        last_rowid = Some(rowid);
                    }
                    None => events::set_position(tx, &id, *seq, pos)?,
                }
                pos = next_position(pos)?;
            }
            write_head(tx, &mut h, &plan.head_change(), pos, now)?;
            if let Some(rowid) = last_rowid {
                inner.indexing().after_insert(tx, rowid)?;
            }
            Ok(true)
        })
        .await
    }

    async fn rewind_to(&self, id: &SessionId, to: &RewindTo) -> Result<RewindOutcome> {
        let id = id.clone();
        let to = to.clone();
        self.write(move |tx, now, _| {
            let h = sessions::head(tx, &id, now)?;
            let first = match to.invocation() {
                Some(invocation) => events::first_of_invocation(tx, &id, invocation)?,
                None => None,
            };
            let plan = RewindPlan::new(&h.head, &to, first)?;
            let removed = events::remove_from(tx, &id, plan.from_seq)?;
            let initial = sessions::initial_state(tx, &id)?;
            let deltas = events::state_deltas(tx, &id)?;
            let state = RewindPlan::state(&initial, &deltas);
            sessions::rewound(tx, &id, &state, plan.version, now)?;
            Ok(RewindOutcome {
                version: plan.version,
                removed,
            })
        })
        .await
    }

    async fn prune_events(
        &self,
        id: &SessionId,
        seqs: &[u64],
        expected_version: u64,
    ) -> Result<Option<Pruned>> {
        let id = id.clone();
        let seqs = seqs.to_vec();
        self.write(move |tx, now, _| {
            let h = sessions::head(tx, &id, now)?;
            let standing = events::standing(tx, &id, &seqs)?;
            let at = |seq| Standing::of(standing.get(&seq).copied());
            let Some(plan) = PrunePlan::new(&h.head, expected_version, &seqs, at)? else {
                return Ok(None);
            };
            let removed = events::remove_seqs(tx, &id, &plan.seqs)?;
            sessions::pruned(tx, &id, plan.version)?;
            Ok(Some(Pruned {
                removed,
                version: plan.version,
            }))
        })
        .await
    }

    async fn search(&self, query: &SearchQuery) -> Result<Page<SearchHit>> {
        query.check(&self.inner.limits)?;
        self.capabilities().check_search(query)?;
        if query.mode == SearchMode::Ranked {
            // Ranking needs every event in the index: catch up first.
            self.write(|tx, _, _| search::index_pending(tx, 1)).await?;
        } else {
            let q = query.clone();
            let page = self
                .read(move |c, now| {
                    if search::pending(c)? > search::SEARCH_TAIL {
                        return Ok(None);
                    }
                    search::search(c, &q, now).map(Some)
                })
                .await?;
            if let Some(page) = page {
                return Ok(page);
            }
            self.index_before_search().await;
        }
        let query = query.clone();
        self.read(move |c, now| search::search(c, &query, now))
            .await
    }

    async fn shared_state(&self, app: &AppName, user_id: &UserId) -> Result<SharedState> {
        let (app, user_id) = (app.clone(), user_id.clone());
        self.read(move |c, _| shared::read(c, &app, &user_id)).await
    }

    async fn context_log(&self, id: &SessionId) -> Result<ContextLog> {
        let id = id.clone();
        self.read(move |c, now| {
            sessions::get(c, &id, now)?;
            history::read(c, &id)
        })
        .await
    }

    async fn export_session(&self, id: &SessionId) -> Result<SessionDump> {
        let id = id.clone();
        self.read(move |c, now| {
            let session = sessions::get(c, &id, now)?;
            let (initial_state, last_seq) = sessions::export_extras(c, &id)?;
            let (events, context) = events::archive_and_context(c, &id)?;
            let shared = shared::read(c, &session.app, &session.user_id)?;
            let context_log = history::read(c, &id)?.into_changes();
            Ok(SessionDump {
                session,
                initial_state,
                last_seq,
                events,
                context,
                shared,
                context_log,
            })
        })
        .await
    }

    async fn fork_session(
        &self,
        source: &SessionId,
        at: &ForkAt,
        id: SessionId,
        now: DateTime<Utc>,
    ) -> Result<Session> {
        let (source, at) = (source.clone(), at.clone());
        self.write(move |tx, clock, inner| {
            let to = crate::fork::ForkTo {
                id: &id,
                created: now,
                now: clock,
            };
            crate::fork::fork(tx, &source, &at, &to, |s| {
                check_owner_quota(tx, inner, s, clock)
            })
        })
        .await
    }

    async fn import_session(&self, mut dump: SessionDump) -> Result<ImportOutcome> {
        // Each body as an append stores it (encoded without seq and session id).
        let seqs: Vec<u64> = dump.events.iter().map(|e| e.seq).collect();
        let bodies = prepare_events(&mut dump.events, &Limits::unlimited())?;
        for (e, seq) in dump.events.iter_mut().zip(seqs) {
            e.seq = seq;
        }
        self.write(move |tx, now, inner| {
            let (stored, live_version) = sessions::live_version(tx, &dump.session.id, now)?;
            let Some(plan) = ImportPlan::with_bodies(dump, live_version, &bodies, &inner.limits)?
            else {
                return Ok(ImportOutcome::Unchanged);
            };
            let d = &plan.dump;
            let s = &d.session;
            if live_version.is_none() {
                check_owner_quota(tx, inner, s, now)?;
            }
            if stored {
                sessions::purge(tx, &s.id)?;
            }
            let next_ctx_pos = i64::try_from(d.context.len())
                .unwrap_or(i64::MAX)
                .saturating_add(1);
            sessions::insert(tx, s, &d.initial_state, d.last_seq, next_ctx_pos)?;
            for (e, body) in d.events.iter().zip(&bodies) {
                let pos = plan.positions.get(&e.seq).copied();
                events::insert(tx, &s.id, e.seq, pos, e, body)?;
            }
            shared::replace(tx, &s.app, &s.user_id, &d.shared)?;
            for change in &d.context_log {
                history::record(tx, &s.id, change)?;
            }
            Ok(ImportOutcome::Imported)
        })
        .await
    }
}
