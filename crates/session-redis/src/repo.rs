//! The [`SessionRepository`] implementation: read the head, ask core for the plan, persist it.
//!
//! A write reads what it depends on in one round trip, plans in
//! [`session_core::plan`], and runs one script that writes the plan if the
//! head is still the one it was made from. When it moved (another writer
//! came in between), the write reads again and re-plans, at most
//! `ATTEMPTS` times; appends are idempotent by event id, so re-planning
//! never writes an event twice. Writes of this repository to one session
//! take turns (`gate`), so only other processes make a write retry.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::HashMap;

use session_core::plan::{
    self, plan_update, AppendPlan, ContextPlan, CreatePlan, EventBatch, Head, ImportPlan,
    RewindPlan, Stored,
};
use session_core::retention::{PrunePlan, Pruned, Standing};
use session_core::ContextLog;
use session_core::{
    prepare_events, truncate_micros, AppName, AppendOutcome, Capabilities, Erased, EventFilter,
    EventView, ImportOutcome, Limits, NewSession, Page, RewindOutcome, RewindTo, SearchHit,
    SearchQuery, SearchScope, Session, SessionDump, SessionEvent, SessionId, SessionQuery,
    SessionRepository, SessionUpdate, SharedDelta, SharedState, StateMap, UserId, MAX_SEQ,
    MAX_VERSION,
};

use crate::error::{too_contended, BACKEND};
use crate::gate::{Attempts, ATTEMPTS};
use crate::head_fields::HeadFields;
use crate::repository::RedisRepository;
use crate::scripts::MOVED;
use crate::write::{stored_records, WholeSession};

/// The head fields of a session a write may change: `NotFound` when
/// there is none, `Expired` when it has expired.
fn writable(
    fields: HeadFields,
    id: &SessionId,
    now: DateTime<Utc>,
) -> session_core::Result<HeadFields> {
    let found = if fields.exists() {
        let expires = fields.expires_at(id)?;
        Some((fields, expires))
    } else {
        None
    };
    plan::writable(found, id, now)
}

impl RedisRepository {
    /// What an append or a context replace plans from: the head fields of
    /// a session that may be written, its head, and which of `ids` it holds.
    async fn read_batch(
        &self,
        id: &SessionId,
        ids: &[&str],
        tokens: bool,
        now: DateTime<Utc>,
    ) -> session_core::Result<(HeadFields, Head, HashMap<String, Stored>)> {
        let read = self.heads.read_for_write(id, ids, tokens).await?;
        let fields = writable(read.fields, id, now)?;
        let head = fields.head(id)?;
        Ok((fields, head, read.stored))
    }

    /// The sessions a search reads, with their event counts: the one
    /// session it names (live), or the live sessions of an owner.
    async fn in_scope(&self, scope: &SearchScope) -> session_core::Result<Vec<(String, u64)>> {
        Ok(match scope {
            SearchScope::Session(id) => {
                let id = SessionId::new(id.as_str())?;
                let (_, s) = self.heads.live(&id).await?;
                vec![(id.into_string(), s.event_count)]
            }
            SearchScope::User { app, user_id } => {
                let now = self.now();
                let ids = self.indexes.owned(app, user_id).await?;
                self.heads.owned_by(ids, app, user_id, now).await?
            }
        })
    }
}

#[async_trait]
impl SessionRepository for RedisRepository {
    fn capabilities(&self) -> Capabilities {
        Capabilities::basic(BACKEND)
            .with_native_ttl()
            .with_durable()
            .with_multi_process()
            .with_ranked_search()
    }

    async fn create(&self, new: NewSession) -> session_core::Result<Session> {
        let _turn = self.gates.enter(&new.id).await;
        let mut attempts = Attempts::default();
        while attempts.next().await {
            let now = self.now();
            let read = self.heads.read_for_write(&new.id, &[], false).await?.fields;
            let existing = if read.exists() {
                Some(read.expires_at(&new.id)?)
            } else {
                None
            };
            let plan = CreatePlan::new(new.clone(), existing, now)?;
            let whole = WholeSession {
                session: &plan.session,
                last_seq: 0,
                initial: &plan.initial_state,
                shared: &plan.shared,
                events: Vec::new(),
                context: Vec::new(),
                changes: Vec::new(),
                new_session: true,
            };
            if self.writer.persist_session(&read, whole, now).await? {
                return Ok(plan.session);
            }
        }
        Err(too_contended(&new.id, ATTEMPTS))
    }

    async fn get(&self, id: &SessionId) -> session_core::Result<Session> {
        Ok(self.heads.live(id).await?.1)
    }

    async fn update(&self, id: &SessionId, update: SessionUpdate) -> session_core::Result<Session> {
        update.validate(self.now())?;
        let _turn = self.gates.enter(id).await;
        self.heads.forget(id);
        let mut attempts = Attempts::default();
        while attempts.next().await {
            let now = self.now();
            let found = self.heads.find_session(id).await?;
            let (fields, mut session) = plan::writable(found, id, now)?;
            let read = HeadFields::from_map(&fields);
            plan_update(&read.head(id)?, &update)?;
            update.clone().apply_to(&mut session, now)?;
            if self
                .writer
                .persist_update(id, &read, &update, &session, now)
                .await?
            {
                // As a read returns it: times at microseconds, no `null` state values.
                session.updated_at = truncate_micros(session.updated_at);
                session.expires_at = session.expires_at.map(truncate_micros);
                session.state.retain(|_, v| !v.is_null());
                return Ok(session);
            }
        }
        Err(too_contended(id, ATTEMPTS))
    }

    async fn delete(&self, id: &SessionId) -> session_core::Result<bool> {
        let _turn = self.gates.enter(id).await;
        self.heads.forget(id);
        let mut attempts = Attempts::default();
        while attempts.next().await {
            let read = self.heads.read_for_write(id, &[], false).await?.fields;
            if !read.exists() {
                return Ok(false);
            }
            match self.writer.persist_delete(id, &read, self.now()).await? {
                MOVED => {}
                n => return Ok(n == 1),
            }
        }
        Err(too_contended(id, ATTEMPTS))
    }

    async fn erase_user(&self, app: &AppName, user_id: &UserId) -> session_core::Result<Erased> {
        let ids = self.indexes.owned(app, user_id).await?;
        let mut erased = Erased::default();
        for id in ids {
            let id = SessionId::new(&id)?;
            let fields = self.heads.read_for_write(&id, &[], false).await?.fields;
            if !fields.exists() {
                continue;
            }
            let events = fields
                .counter(id.as_str(), "event_count", MAX_SEQ)
                .unwrap_or(0);
            if self.delete(&id).await? {
                erased.sessions = erased.sessions.saturating_add(1);
                erased.events = erased.events.saturating_add(events);
            }
        }
        // Two commands, not a pipeline: the keys live in different cluster slots.
        erased.user_state = self.shared.erase_user(app, user_id).await?;
        self.indexes.drop_owner(app, user_id).await?;
        Ok(erased)
    }

    async fn list(&self, query: &SessionQuery) -> session_core::Result<Page<Session>> {
        query.check(&self.limits)?;
        let now = self.now();
        let ids = self.indexes.listed(query).await?;
        self.heads.list(ids, query, now).await
    }

    async fn purge_expired(&self, now: DateTime<Utc>) -> session_core::Result<u64> {
        let mut n = 0;
        for id in self.indexes.expired(now).await? {
            // An entry that is no session id was never written by a session.
            if let Ok(sid) = SessionId::new(id.as_str()) {
                if self.delete(&sid).await? {
                    n += 1;
                }
            }
            self.indexes.unexpire(&id).await?;
        }
        Ok(n)
    }

    async fn append(
        &self,
        id: &SessionId,
        events: Vec<SessionEvent>,
    ) -> session_core::Result<AppendOutcome> {
        let batch = EventBatch::new(events, &self.limits)?;
        let ids = batch.ids();
        let _turn = self.gates.enter(id).await;
        // First from the head this repository's last append left, if any
        // (see `RememberedHeads`); the script refuses a wrong guess and the loop reads.
        if let Some(fields) = self.heads.take_remembered(id) {
            let now = self.now();
            let guess = writable(fields, id, now).and_then(|fields| {
                let head = fields.head(id)?;
                Ok((AppendPlan::new(&head, &batch, &HashMap::new())?, fields))
            });
            // An empty batch changes nothing, not even `updated_at`: the read
            // below answers it from the stored head.
            if let Some((plan, fields)) = guess.ok().filter(|(plan, _)| !plan.is_noop()) {
                if let Some(left) = self
                    .writer
                    .persist_events(id, &fields, &batch, (&plan).into(), now)
                    .await?
                {
                    self.heads.remember(id, left);
                    return Ok(plan.outcome());
                }
            }
        }
        let mut attempts = Attempts::default();
        while attempts.next().await {
            let now = self.now();
            let (fields, head, stored) = self.read_batch(id, &ids, false, now).await?;
            let plan = AppendPlan::new(&head, &batch, &stored)?;
            if plan.is_noop() {
                return Ok(plan.outcome());
            }
            if let Some(left) = self
                .writer
                .persist_events(id, &fields, &batch, (&plan).into(), now)
                .await?
            {
                self.heads.remember(id, left);
                return Ok(plan.outcome());
            }
        }
        Err(too_contended(id, ATTEMPTS))
    }

    async fn events(
        &self,
        id: &SessionId,
        filter: &EventFilter,
    ) -> session_core::Result<Page<SessionEvent>> {
        filter.check(&self.limits)?;
        self.heads.live(id).await?;
        let mut page = self.events.page(id, filter).await?;
        if filter.view == EventView::Archive {
            self.events.context_log(id).await?.annotate(&mut page.items);
        }
        Ok(page)
    }

    async fn event_version(&self, id: &SessionId) -> session_core::Result<u64> {
        Ok(self.heads.live(id).await?.1.version)
    }

    async fn replace_context(
        &self,
        id: &SessionId,
        events: Vec<SessionEvent>,
        expected_version: u64,
    ) -> session_core::Result<bool> {
        let batch = EventBatch::new(events, &self.limits)?;
        let ids = batch.ids();
        let _turn = self.gates.enter(id).await;
        let mut attempts = Attempts::default();
        while attempts.next().await {
            let now = self.now();
            let (fields, head, stored) = self.read_batch(id, &ids, true, now).await?;
            let Some(plan) = ContextPlan::new(&head, expected_version, &batch, &stored)? else {
                return Ok(false);
            };
            // A head that moved is read again: the plan then says `false`.
            if let Some(left) = self
                .writer
                .persist_events(id, &fields, &batch, (&plan).into(), now)
                .await?
            {
                self.heads.remember(id, left);
                return Ok(true);
            }
        }
        Err(too_contended(id, ATTEMPTS))
    }

    async fn prune_events(
        &self,
        id: &SessionId,
        seqs: &[u64],
        expected_version: u64,
    ) -> session_core::Result<Option<Pruned>> {
        let _turn = self.gates.enter(id).await;
        self.heads.forget(id);
        let mut attempts = Attempts::default();
        while attempts.next().await {
            let now = self.now();
            let read = self.heads.read_for_prune(id, seqs).await?;
            if read.moved {
                continue;
            }
            let fields = writable(read.fields, id, now)?;
            let at = |seq| Standing::of(read.standing.get(&seq).copied());
            let Some(plan) = PrunePlan::new(&fields.head(id)?, expected_version, seqs, at)? else {
                return Ok(None);
            };
            if let Some(removed) = self
                .writer
                .persist_prune(id, &fields, &plan.seqs, plan.version, now)
                .await?
            {
                return Ok(Some(Pruned {
                    removed,
                    version: plan.version,
                }));
            }
        }
        Err(too_contended(id, ATTEMPTS))
    }

    async fn rewind_to(
        &self,
        id: &SessionId,
        to: &RewindTo,
    ) -> session_core::Result<RewindOutcome> {
        // A rewind to a seq looks up no invocation (the empty field is never set).
        let invocation = to.invocation().map_or("", |i| i.as_str());
        let _turn = self.gates.enter(id).await;
        self.heads.forget(id);
        let mut attempts = Attempts::default();
        while attempts.next().await {
            let now = self.now();
            let read = self.heads.read_for_rewind(id, invocation).await?;
            let fields = writable(read.fields, id, now)?;
            let plan = RewindPlan::new(&fields.head(id)?, to, read.first_seq)?;
            let mut kept: Vec<(u64, StateMap)> = Vec::new();
            for (seq, delta) in read.deltas {
                if seq < plan.from_seq {
                    let delta = serde_json::from_str(&delta).map_err(|e| {
                        session_core::SessionError::serialization(
                            format!("session {id} seq {seq} state delta"),
                            e,
                        )
                    })?;
                    kept.push((seq, delta));
                }
            }
            kept.sort_by_key(|(seq, _)| *seq);
            let state = RewindPlan::state(&read.initial, kept.iter().map(|(_, d)| d));
            if let Some(removed) = self
                .writer
                .persist_rewind(id, &fields, plan.from_seq, plan.version, &state, now)
                .await?
            {
                return Ok(RewindOutcome {
                    version: plan.version,
                    removed,
                });
            }
        }
        Err(too_contended(id, ATTEMPTS))
    }

    async fn search(&self, query: &SearchQuery) -> session_core::Result<Page<SearchHit>> {
        query.check(&self.limits)?;
        self.capabilities().check_search(query)?;
        let parsed = query.parsed()?;
        let sessions = self.in_scope(&query.scope).await?;
        self.search.search(query, &parsed, &sessions).await
    }

    async fn shared_state(
        &self,
        app: &AppName,
        user_id: &UserId,
    ) -> session_core::Result<SharedState> {
        self.shared.read(app, user_id).await
    }

    async fn context_log(&self, id: &SessionId) -> session_core::Result<ContextLog> {
        self.heads.live(id).await?;
        self.events.context_log(id).await
    }

    async fn export_session(&self, id: &SessionId) -> session_core::Result<SessionDump> {
        let (fields, session) = self.heads.live(id).await?;
        let last_seq = HeadFields::from_map(&fields).counter(id, "last_seq", MAX_SEQ)?;
        let initial_state = self.events.initial_state(id).await?;
        let events = self
            .events
            .fetch(id, &self.events.seqs(id, EventView::Archive).await?)
            .await?;
        let context = self.events.seqs(id, EventView::Context).await?;
        let shared = self.shared.read(&session.app, &session.user_id).await?;
        let context_log = self.events.context_log(id).await?.into_changes();
        Ok(SessionDump {
            session,
            initial_state,
            last_seq,
            events,
            context,
            shared,
            context_log,
        })
    }

    async fn import_session(&self, mut dump: SessionDump) -> session_core::Result<ImportOutcome> {
        let id = dump.session.id.clone();
        let _turn = self.gates.enter(&id).await;
        self.heads.forget(&id);
        let mut attempts = Attempts::default();
        while attempts.next().await {
            let now = self.now();
            let read = self.heads.read_for_write(&id, &[], false).await?.fields;
            let existing = if read.exists() {
                match (
                    read.counter(&id, "version", MAX_VERSION),
                    read.expires_at(&id),
                ) {
                    (Ok(version), Ok(expires)) => {
                        plan::readable(Some((version, expires)), &id, now).ok()
                    }
                    // A head too damaged to read: the import replaces it.
                    _ => None,
                }
            } else {
                None
            };
            let Some(plan) = ImportPlan::new(dump, existing, &self.limits)? else {
                return Ok(ImportOutcome::Unchanged);
            };
            let d = &plan.dump;
            let mut normalized = d.events.clone();
            let bodies = prepare_events(&mut normalized, &Limits::unlimited())?;
            let context = d
                .context
                .iter()
                .filter_map(|seq| {
                    let pos = u64::try_from(*plan.positions.get(seq)?).ok()?;
                    Some((pos, *seq))
                })
                .collect();
            let shared = SharedDelta {
                app: d.shared.app.clone(),
                user: d.shared.user.clone(),
            };
            let whole = WholeSession {
                session: &d.session,
                last_seq: d.last_seq,
                initial: &d.initial_state,
                shared: &shared,
                events: stored_records(&d.events, &bodies)?,
                context,
                changes: d
                    .context_log
                    .iter()
                    .map(session_core::ContextChange::encode)
                    .collect::<session_core::Result<_>>()?,
                new_session: existing.is_none(),
            };
            if self.writer.persist_session(&read, whole, now).await? {
                return Ok(ImportOutcome::Imported);
            }
            dump = plan.dump;
        }
        Err(too_contended(&id, ATTEMPTS))
    }
}
