//! The [`SessionRepository`] implementation: each write reads the locked
//! head, asks `session_core::plan` for the plan, and persists it in one transaction.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use deadpool_postgres::Transaction;
use futures::try_join;
use session_core::plan::{
    plan_update, AppendPlan, ContextPlan, CreatePlan, EventBatch, HeadChange, ImportPlan,
    RewindPlan, Stored,
};
use session_core::retention::{PrunePlan, Pruned, Standing};
use session_core::ContextLog;
use session_core::{
    prepare_events, AppName, AppendOutcome, Capabilities, Erased, EventFilter, EventView, ForkAt,
    ImportOutcome, Limits, NewSession, Owner, Page, RewindOutcome, RewindTo, SearchHit,
    SearchQuery, Session, SessionDump, SessionError, SessionEvent, SessionId, SessionQuery,
    SessionRepository, SessionUpdate, SharedState, UserId,
};

use crate::error::{retryable, settle, StoreError, BACKEND, R};
use crate::events::{self, NewRow};
use crate::quiet::Quiet;
use crate::remembered::{self, LeftHead};
use crate::repository::PostgresRepository;
use crate::sessions::{self, Locked};
use crate::sql::{sql_int, sql_len};
use crate::tables::Tables;
use crate::{history, search, shared};

/// How many times a transaction that lost a serialization or deadlock race is run.
const MAX_ATTEMPTS: u32 = 5;

/// Runs one write transaction, retrying serialization failures and deadlocks.
macro_rules! write_tx {
    ($self:ident, |$tx:ident, $now:ident| $body:expr) => {{
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut client = $self.client().await?;
            let $now = $self.clock.now();
            let result: R<_> = async {
                let $tx = client.transaction().await?;
                let out = $body.await?;
                $tx.commit().await?;
                Ok(out)
            }
            .await;
            match settle(client, result) {
                Err(e) if retryable(&e) && attempt < MAX_ATTEMPTS => {
                    tracing::debug!(
                        backend = BACKEND,
                        attempt,
                        "retrying a transaction that lost a race"
                    );
                    tokio::time::sleep(Duration::from_millis(5 * u64::from(attempt))).await;
                }
                other => break other.map_err(SessionError::from),
            }
        }
    }};
}

/// Runs a read on a pooled connection.
macro_rules! read {
    ($self:ident, |$c:ident| $body:expr) => {{
        let $c = $self.client().await?;
        let result = $body.await;
        settle($c, result).map_err(SessionError::from)
    }};
}

/// Locks the session row and reads which ids of `batch` it holds, in one
/// round trip: with both statements prepared, the lock query is sent
/// first and the lookup right behind it on the same connection, so the
/// server runs the lookup after the lock is held (pipelining).
async fn lock_and_held(
    tx: &Transaction<'_>,
    t: &Tables,
    id: &SessionId,
    batch: &EventBatch,
    now: DateTime<Utc>,
) -> R<(Locked, HashMap<String, Stored>)> {
    let (lock, held) = try_join!(
        sessions::lock_statement(tx, t),
        events::held_statement(tx, t)
    )?;
    let ids = batch.ids();
    try_join!(
        sessions::lock_with(tx, &lock, id, now),
        events::held_with(tx, &held, id, &ids)
    )
}

async fn create(
    tx: &Transaction<'_>,
    t: &Tables,
    limits: &Limits,
    new: NewSession,
    now: DateTime<Utc>,
) -> R<Session> {
    let existing = sessions::lock_existing(tx, t, &new.id).await?;
    let plan = CreatePlan::new(new, existing, now)?;
    let s = &plan.session;
    sessions::check_owner_quota(tx, t, limits, s, now).await?;
    if existing.is_some() {
        sessions::delete(tx, t, &s.id).await?;
    }
    sessions::insert(tx, t, s, &plan.initial_state, 0, 1).await?;
    shared::merge(tx, t, &s.app, &s.user_id, &plan.shared).await?;
    Ok(plan.session)
}

async fn update(
    tx: &Transaction<'_>,
    t: &Tables,
    id: &SessionId,
    update: &SessionUpdate,
    now: DateTime<Utc>,
) -> R<Session> {
    let locked = sessions::lock(tx, t, id, now).await?;
    let version = plan_update(&locked.head, update)?;
    sessions::update(tx, t, id, update, version, now).await
}

/// Writes what a plan decided: the new rows, the head (with the
/// session-scope state the plan changed) and the shared scopes. Independent
/// statements of one transaction: pipelined.
#[allow(clippy::too_many_arguments)] // the transaction, the table names and what the plan decided
async fn persist(
    tx: &Transaction<'_>,
    t: &Tables,
    id: &SessionId,
    locked: &mut Locked,
    rows: &[NewRow<'_>],
    change: &HeadChange<'_>,
    next_ctx_pos: i64,
    now: DateTime<Utc>,
) -> R<()> {
    let state = locked.changed_state(&change.state.session)?;
    try_join!(
        events::insert(tx, t, id, rows),
        sessions::advance(tx, t, id, state.as_deref(), change, next_ctx_pos, now),
        shared::merge(tx, t, &locked.app, &locked.user_id, &change.state.shared),
    )?;
    Ok(())
}

/// The transaction of an append (of one `owner` may use, if named): the
/// outcome, and the head it left if it wrote.
async fn append(
    tx: &Transaction<'_>,
    t: &Tables,
    id: &SessionId,
    batch: &EventBatch,
    owner: Option<&Owner>,
    now: DateTime<Utc>,
) -> R<(AppendOutcome, Option<LeftHead>)> {
    let (mut locked, held) = match lock_and_held(tx, t, id, batch, now).await {
        // To an owner, an expired session is absent, as on reads.
        Err(StoreError::Session(SessionError::Expired { .. })) if owner.is_some() => {
            return Err(SessionError::session_not_found(id).into())
        }
        read => read?,
    };
    let stored_owner = locked.owner(id)?;
    if owner.is_some_and(|o| !o.may_access(&stored_owner)) {
        return Err(SessionError::session_not_found(id).into());
    }
    let plan = AppendPlan::new(&locked.head, batch, &held)?;
    if plan.is_noop() {
        return Ok((plan.outcome(), None));
    }
    let (first, next_ctx_pos) = locked.positions(plan.new.len())?;
    let rows = events::new_rows(batch, &plan.new, Some(first));
    let change = plan.head_change();
    persist(tx, t, id, &mut locked, &rows, &change, next_ctx_pos, now).await?;
    let left = LeftHead::after(&locked.head, &change, next_ctx_pos, stored_owner);
    Ok((plan.outcome(), Some(left)))
}

impl PostgresRepository {
    /// Appends `batch` (to a session `owner` may use, if named): in one
    /// statement from the head this repository's last append left, if it
    /// still holds, else in a transaction that reads the head.
    async fn append_batch(
        &self,
        owner: Option<&Owner>,
        id: &SessionId,
        batch: &EventBatch,
    ) -> session_core::Result<AppendOutcome> {
        if let Some(guess) = self.remembered.take(id.as_str()) {
            let c = self.client().await?;
            let now = self.clock.now();
            let result = remembered::append(&c, &self.tables, &guess, owner, batch, now).await;
            match settle(c, result) {
                Ok(Some((outcome, left))) => {
                    self.remembered.remember(id.as_str(), left);
                    return Ok(outcome);
                }
                // A stale guess, or a race lost: the transaction decides.
                Ok(None) => {}
                Err(e) if retryable(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let t = &self.tables;
        let (outcome, left) = write_tx!(self, |tx, now| append(&tx, t, id, batch, owner, now))?;
        if let Some(left) = left {
            self.remembered.remember(id.as_str(), left);
        }
        Ok(outcome)
    }
}

async fn replace_context(
    tx: &Transaction<'_>,
    t: &Tables,
    id: &SessionId,
    batch: &EventBatch,
    expected_version: u64,
    now: DateTime<Utc>,
) -> R<bool> {
    let (mut locked, held) = lock_and_held(tx, t, id, batch, now).await?;
    let Some(plan) = ContextPlan::new(&locked.head, expected_version, batch, &held)? else {
        return Ok(false);
    };
    let (first, next_ctx_pos) = locked.positions(plan.context.len())?;
    let position: HashMap<u64, i64> = plan.context.iter().copied().zip(first..).collect();
    // Held events (seqs up to the head's) move to their new positions;
    // new ones are inserted at theirs.
    let (seqs, positions): (Vec<i64>, Vec<i64>) = plan
        .context
        .iter()
        .zip(first..)
        .filter(|(seq, _)| **seq <= locked.head.last_seq)
        .map(|(seq, pos)| (sql_int(*seq), pos))
        .unzip();
    events::place_context(tx, t, id, &seqs, &positions, first).await?;
    let mut rows = events::new_rows(batch, &plan.new, None);
    for row in &mut rows {
        row.ctx_pos = position.get(&row.seq).copied();
    }
    // After the context is cleared and placed, the rest is as for an append.
    persist(
        tx,
        t,
        id,
        &mut locked,
        &rows,
        &plan.head_change(),
        next_ctx_pos,
        now,
    )
    .await?;
    history::record(tx, t, id, &[plan.change(now)]).await?;
    Ok(true)
}

async fn rewind(
    tx: &Transaction<'_>,
    t: &Tables,
    id: &SessionId,
    to: &RewindTo,
    now: DateTime<Utc>,
) -> R<RewindOutcome> {
    let locked = sessions::lock(tx, t, id, now).await?;
    let first = match to.invocation() {
        Some(invocation) => events::first_seq_of(tx, t, id, invocation).await?,
        None => None,
    };
    let plan = RewindPlan::new(&locked.head, to, first)?;
    let removed = events::remove_from(tx, t, id, plan.from_seq).await?;
    let initial = sessions::initial_state(tx, t, id).await?;
    let deltas = events::deltas(tx, t, id).await?;
    let state = RewindPlan::state(&initial, &deltas);
    sessions::rewound(tx, t, id, &state, plan.version, now).await?;
    Ok(RewindOutcome {
        version: plan.version,
        removed: usize::try_from(removed).unwrap_or(usize::MAX),
    })
}

async fn prune(
    tx: &Transaction<'_>,
    t: &Tables,
    id: &SessionId,
    seqs: &[u64],
    expected_version: u64,
    now: DateTime<Utc>,
) -> R<Option<Pruned>> {
    let locked = sessions::lock(tx, t, id, now).await?;
    let standing = events::standing(tx, t, id, seqs).await?;
    let at = |seq| Standing::of(standing.get(&seq).copied());
    let Some(plan) = PrunePlan::new(&locked.head, expected_version, seqs, at)? else {
        return Ok(None);
    };
    let removed = events::remove_seqs(tx, t, id, &plan.seqs).await?;
    sessions::pruned(tx, t, id, plan.version).await?;
    Ok(Some(Pruned {
        removed,
        version: plan.version,
    }))
}

async fn import(
    tx: &Transaction<'_>,
    t: &Tables,
    limits: &Limits,
    dump: SessionDump,
    now: DateTime<Utc>,
) -> R<ImportOutcome> {
    let id = dump.session.id.clone();
    // Concurrent imports of one id queue here, so the later ones (each
    // statement reads what committed before it, at READ COMMITTED) find
    // the session written and change nothing, instead of failing on the
    // primary key. Row locks cannot do this: the row does not exist yet.
    let lock = tx
        .prepare_cached("SELECT pg_advisory_xact_lock(hashtext('agent-session import ' || $1))")
        .await?;
    tx.run(&lock, &[&id.as_str()]).await?;
    let existing = sessions::lock_for_import(tx, t, &id, now).await?;
    let live = existing.flatten();
    // The stored body leaves seq and session id out, as an append stores it.
    let mut stored = dump.events.clone();
    let bodies = prepare_events(&mut stored, &Limits::unlimited())?;
    let Some(plan) = ImportPlan::with_bodies(dump, live, &bodies, limits)? else {
        return Ok(ImportOutcome::Unchanged);
    };
    if live.is_none() {
        sessions::check_owner_quota(tx, t, limits, &plan.dump.session, now).await?;
    }
    if existing.is_some() {
        sessions::delete(tx, t, &id).await?;
    }
    let dump = &plan.dump;
    let s = &dump.session;
    let next_ctx_pos = sql_len(dump.context.len()).saturating_add(1);
    sessions::insert(tx, t, s, &dump.initial_state, dump.last_seq, next_ctx_pos).await?;
    let rows: Vec<NewRow<'_>> = dump
        .events
        .iter()
        .zip(&stored)
        .zip(&bodies)
        .map(|((e, event), body)| NewRow {
            seq: e.seq,
            ctx_pos: plan.positions.get(&e.seq).copied(),
            event,
            body,
        })
        .collect();
    events::insert(tx, t, &id, &rows).await?;
    history::record(tx, t, &id, &dump.context_log).await?;
    shared::replace(tx, t, &s.app, &s.user_id, &dump.shared).await?;
    Ok(ImportOutcome::Imported)
}

#[async_trait]
impl SessionRepository for PostgresRepository {
    fn capabilities(&self) -> Capabilities {
        Capabilities::basic(BACKEND)
            .with_ranked_search()
            .with_durable()
            .with_multi_process()
    }

    async fn create(&self, session: NewSession) -> session_core::Result<Session> {
        let t = &self.tables;
        let limits = &self.limits;
        write_tx!(self, |tx, now| create(&tx, t, limits, session.clone(), now))
    }

    async fn get(&self, id: &SessionId) -> session_core::Result<Session> {
        read!(self, |c| sessions::get(
            &c,
            &self.tables,
            id,
            self.clock.now()
        ))
    }

    async fn update(
        &self,
        id: &SessionId,
        changes: SessionUpdate,
    ) -> session_core::Result<Session> {
        changes.validate(self.clock.now())?;
        let t = &self.tables;
        write_tx!(self, |tx, now| update(&tx, t, id, &changes, now))
    }

    async fn delete(&self, id: &SessionId) -> session_core::Result<bool> {
        let t = &self.tables;
        write_tx!(self, |tx, _now| sessions::delete(&tx, t, id))
    }

    async fn erase_user(&self, app: &AppName, user_id: &UserId) -> session_core::Result<Erased> {
        let t = &self.tables;
        write_tx!(self, |tx, _now| sessions::erase_user(
            &tx,
            t,
            app.as_str(),
            user_id.as_str()
        ))
    }

    async fn list(&self, query: &SessionQuery) -> session_core::Result<Page<Session>> {
        query.check(&self.limits)?;
        read!(self, |c| sessions::list(
            &c,
            &self.tables,
            query,
            self.clock.now()
        ))
    }

    async fn purge_expired(&self, now: DateTime<Utc>) -> session_core::Result<u64> {
        let t = &self.tables;
        write_tx!(self, |tx, _clock_now| sessions::purge_expired(&tx, t, now))
    }

    async fn append(
        &self,
        id: &SessionId,
        events: Vec<SessionEvent>,
    ) -> session_core::Result<AppendOutcome> {
        let batch = EventBatch::new(events, &self.limits)?;
        self.append_batch(None, id, &batch).await
    }

    async fn append_owned(
        &self,
        owner: &Owner,
        id: &SessionId,
        events: Vec<SessionEvent>,
    ) -> session_core::Result<AppendOutcome> {
        match EventBatch::new(events, &self.limits) {
            Ok(batch) => self.append_batch(Some(owner), id, &batch).await,
            // Another owner's session is unknown, whatever the events.
            Err(e) if owner.may_access(&self.owner_of(id).await?) => Err(e),
            Err(_) => Err(SessionError::session_not_found(id)),
        }
    }

    async fn events(
        &self,
        id: &SessionId,
        filter: &EventFilter,
    ) -> session_core::Result<Page<SessionEvent>> {
        filter.check(&self.limits)?;
        read!(self, |c| async {
            sessions::live(&c, &self.tables, id, self.clock.now()).await?;
            let mut page = events::read(&c, &self.tables, id, filter).await?;
            if filter.view == EventView::Archive {
                history::read(&c, &self.tables, id)
                    .await?
                    .annotate(&mut page.items);
            }
            Ok(page)
        })
    }

    async fn event_version(&self, id: &SessionId) -> session_core::Result<u64> {
        read!(self, |c| async {
            let row = sessions::live(&c, &self.tables, id, self.clock.now()).await?;
            sessions::live_version(&row, id)
        })
    }

    async fn replace_context(
        &self,
        id: &SessionId,
        events: Vec<SessionEvent>,
        expected_version: u64,
    ) -> session_core::Result<bool> {
        let batch = EventBatch::new(events, &self.limits)?;
        let t = &self.tables;
        write_tx!(self, |tx, now| replace_context(
            &tx,
            t,
            id,
            &batch,
            expected_version,
            now
        ))
    }

    async fn rewind_to(
        &self,
        id: &SessionId,
        to: &RewindTo,
    ) -> session_core::Result<RewindOutcome> {
        let t = &self.tables;
        write_tx!(self, |tx, now| rewind(&tx, t, id, to, now))
    }

    async fn prune_events(
        &self,
        id: &SessionId,
        seqs: &[u64],
        expected_version: u64,
    ) -> session_core::Result<Option<Pruned>> {
        let t = &self.tables;
        write_tx!(self, |tx, now| prune(
            &tx,
            t,
            id,
            seqs,
            expected_version,
            now
        ))
    }

    async fn search(&self, query: &SearchQuery) -> session_core::Result<Page<SearchHit>> {
        query.check(&self.limits)?;
        self.capabilities().check_search(query)?;
        read!(self, |c| search::search(
            &c,
            &self.tables,
            query,
            self.clock.now()
        ))
    }

    async fn shared_state(
        &self,
        app: &AppName,
        user_id: &UserId,
    ) -> session_core::Result<SharedState> {
        read!(self, |c| shared::read(&c, &self.tables, app, user_id))
    }

    async fn context_log(&self, id: &SessionId) -> session_core::Result<ContextLog> {
        read!(self, |c| async {
            sessions::live(&c, &self.tables, id, self.clock.now()).await?;
            history::read(&c, &self.tables, id).await
        })
    }

    async fn export_session(&self, id: &SessionId) -> session_core::Result<SessionDump> {
        read!(self, |c| async {
            let session = sessions::get(&c, &self.tables, id, self.clock.now()).await?;
            let row = sessions::live(&c, &self.tables, id, self.clock.now()).await?;
            let (last_seq, initial_state) = sessions::live_export(&row, id)?;
            let (events, context) = events::archive(&c, &self.tables, id).await?;
            let shared = shared::read(&c, &self.tables, &session.app, &session.user_id).await?;
            let context_log = history::read(&c, &self.tables, id).await?.into_changes();
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
    }

    async fn fork_session(
        &self,
        source: &SessionId,
        at: &ForkAt,
        id: SessionId,
        now: DateTime<Utc>,
    ) -> session_core::Result<Session> {
        let t = &self.tables;
        write_tx!(self, |tx, clock| crate::fork::fork(
            &tx,
            t,
            &self.limits,
            source,
            at,
            crate::fork::ForkTo {
                id: &id,
                created: now,
                now: clock,
            }
        ))
    }

    async fn import_session(&self, dump: SessionDump) -> session_core::Result<ImportOutcome> {
        let t = &self.tables;
        write_tx!(self, |tx, now| import(
            &tx,
            t,
            &self.limits,
            dump.clone(),
            now
        ))
    }
}
