//! The store built in `docs/backends/new.md`: a `BTreeMap` behind a mutex,
//! written the way every backend is (read the head, ask core for the plan,
//! persist it), passing the whole conformance suite. The guide shows this
//! file; `the_guide_shows_this_file` keeps the two the same.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use session_core::plan::{
    plan_update, readable, writable, AppendPlan, ContextPlan, CreatePlan, EventBatch, Head,
    ImportPlan, NewEvent, RewindPlan, RewindTo, Stored,
};
use session_core::retention::{PrunePlan, Pruned, Standing};
use session_core::state::apply_delta;
use session_core::{
    page_of_matches, AppName, AppendOutcome, Capabilities, ContextLog, Erased, EventFilter,
    EventView, ImportOutcome, Limits, NewSession, Page, Result, RewindOutcome, SearchHit,
    SearchQuery, SearchScope, Session, SessionDump, SessionError, SessionEvent, SessionId,
    SessionQuery, SessionRepository, SessionUpdate, SharedClock, SharedDelta, SharedState,
    StateMap, UserId,
};

/// One session as the engine keeps it.
struct Row {
    session: Session,
    initial_state: StateMap,
    last_seq: u64,
    archive: BTreeMap<u64, SessionEvent>,
    ids: HashMap<String, u64>,
    context: Vec<u64>,
    /// One record per context replace: when events left the context.
    context_log: ContextLog,
}

#[derive(Default)]
struct Tables {
    sessions: BTreeMap<String, Row>,
    apps: BTreeMap<String, StateMap>,
    users: BTreeMap<(String, String), StateMap>,
}

/// A whole store in one map: the smallest backend that meets the contract.
pub struct TinyStore {
    tables: Mutex<Tables>,
    clock: SharedClock,
    limits: Limits,
}

impl TinyStore {
    /// An empty store on `clock`.
    pub fn new(clock: SharedClock) -> Self {
        Self {
            tables: Mutex::new(Tables::default()),
            clock,
            limits: Limits::default(),
        }
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Tables>> {
        self.tables
            .lock()
            .map_err(|_| SessionError::backend("tiny", "a writer panicked"))
    }
}

// --- engine I/O: read a head, the held ids, write a plan's pieces --------

fn found(row: Option<&mut Row>) -> Option<(&mut Row, Option<DateTime<Utc>>)> {
    row.map(|r| {
        let expires = r.session.expires_at;
        (r, expires)
    })
}

impl Row {
    fn head(&self) -> Head {
        Head::new(
            self.session.id.clone(),
            self.last_seq,
            self.session.version,
            self.session.status,
        )
        .with_event_count(u64::try_from(self.archive.len()).unwrap_or(u64::MAX))
        .with_event_bytes(self.session.event_bytes)
    }

    fn stored(&self, batch: &EventBatch) -> HashMap<String, Stored> {
        let held = batch
            .ids()
            .into_iter()
            .filter_map(|id| self.archive.get(self.ids.get(id)?));
        held.map(|e| {
            (
                e.id.clone(),
                Stored {
                    seq: e.seq,
                    tokens: e.token_estimate,
                },
            )
        })
        .collect()
    }

    fn write_events(&mut self, batch: &EventBatch, new: &[NewEvent]) {
        for n in new {
            let Some(e) = batch.events.get(n.index) else {
                continue;
            };
            let mut e = e.clone();
            e.seq = n.seq;
            e.session_id = self.session.id.to_string();
            self.ids.insert(e.id.clone(), n.seq);
            self.archive.insert(n.seq, e);
        }
        self.session.event_count = count(self.archive.len());
        let added = batch.added_bytes(new);
        self.session.event_bytes = self.session.event_bytes.saturating_add(added);
    }
}

fn user_key(app: &str, user_id: &str) -> (String, String) {
    (app.to_owned(), user_id.to_owned())
}

fn write_shared(tables: &mut Tables, s: &Session, delta: &SharedDelta) {
    apply_delta(
        tables.apps.entry(s.app.to_string()).or_default(),
        &delta.app,
    );
    let user = tables
        .users
        .entry(user_key(&s.app, &s.user_id))
        .or_default();
    apply_delta(user, &delta.user);
}

fn read_shared(tables: &Tables, app: &str, user_id: &str) -> SharedState {
    SharedState {
        app: tables.apps.get(app).cloned().unwrap_or_default(),
        user: tables
            .users
            .get(&user_key(app, user_id))
            .cloned()
            .unwrap_or_default(),
    }
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

// --- the contract: read -> plan -> persist ------------------------------

#[async_trait]
impl SessionRepository for TinyStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities::basic("tiny")
    }

    async fn create(&self, new: NewSession) -> Result<Session> {
        let now = self.clock.now();
        let mut t = self.lock()?;
        let existing = t
            .sessions
            .get(new.id.as_str())
            .map(|r| r.session.expires_at);
        let plan = CreatePlan::new(new, existing, now)?;
        write_shared(&mut t, &plan.session, &plan.shared);
        let row = Row {
            session: plan.session.clone(),
            initial_state: plan.initial_state,
            last_seq: 0,
            archive: BTreeMap::new(),
            ids: HashMap::new(),
            context: Vec::new(),
            context_log: ContextLog::default(),
        };
        t.sessions.insert(plan.session.id.to_string(), row);
        Ok(plan.session)
    }

    async fn get(&self, id: &SessionId) -> Result<Session> {
        let mut t = self.lock()?;
        readable(found(t.sessions.get_mut(id.as_str())), id, self.clock.now())
            .map(|r| r.session.clone())
    }

    async fn update(&self, id: &SessionId, update: SessionUpdate) -> Result<Session> {
        let now = self.clock.now();
        update.validate(now)?;
        let mut t = self.lock()?;
        let row = writable(found(t.sessions.get_mut(id.as_str())), id, now)?;
        plan_update(&row.head(), &update)?;
        update.apply_to(&mut row.session, now)?;
        Ok(row.session.clone())
    }

    async fn delete(&self, id: &SessionId) -> Result<bool> {
        Ok(self.lock()?.sessions.remove(id.as_str()).is_some())
    }

    async fn erase_user(&self, app: &AppName, user_id: &UserId) -> Result<Erased> {
        let mut t = self.lock()?;
        let mut erased = Erased::default();
        t.sessions.retain(|_, row| {
            let theirs = row.session.app == *app && row.session.user_id == *user_id;
            if theirs {
                erased.sessions += 1;
                erased.events += u64::try_from(row.archive.len()).unwrap_or(u64::MAX);
            }
            !theirs
        });
        erased.user_state = t.users.remove(&user_key(app, user_id)).is_some();
        Ok(erased)
    }

    async fn list(&self, query: &SessionQuery) -> Result<Page<Session>> {
        query.check(&self.limits)?;
        let now = self.clock.now();
        let t = self.lock()?;
        let mut found: Vec<Session> = t
            .sessions
            .values()
            .map(|r| r.session.clone())
            .filter(|s| !s.is_expired_at(now) && query.matches(s))
            .collect();
        found.sort_by(|a, b| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(Page::paginate(found, query.page, query.page_size))
    }

    async fn purge_expired(&self, now: DateTime<Utc>) -> Result<u64> {
        let mut t = self.lock()?;
        let before = t.sessions.len();
        t.sessions.retain(|_, r| !r.session.is_expired_at(now));
        Ok(count(before.saturating_sub(t.sessions.len())))
    }

    async fn append(&self, id: &SessionId, events: Vec<SessionEvent>) -> Result<AppendOutcome> {
        let batch = EventBatch::new(events, &self.limits)?;
        let now = self.clock.now();
        let mut t = self.lock()?;
        let row = writable(found(t.sessions.get_mut(id.as_str())), id, now)?;
        let plan = AppendPlan::new(&row.head(), &batch, &row.stored(&batch))?;
        if plan.is_noop() {
            return Ok(plan.outcome());
        }
        row.write_events(&batch, &plan.new);
        row.context.extend(plan.new.iter().map(|n| n.seq));
        apply_delta(&mut row.session.state, &plan.state.session);
        row.last_seq = plan.last_seq;
        row.session.context_tokens = row.session.context_tokens.saturating_add(plan.added_tokens);
        row.session.version = plan.version;
        row.session.updated_at = row.session.updated_at.max(now);
        let session = row.session.clone();
        write_shared(&mut t, &session, &plan.state.shared);
        Ok(plan.outcome())
    }

    async fn events(&self, id: &SessionId, filter: &EventFilter) -> Result<Page<SessionEvent>> {
        filter.check(&self.limits)?;
        let mut t = self.lock()?;
        let row = readable(found(t.sessions.get_mut(id.as_str())), id, self.clock.now())?;
        match filter.view {
            EventView::Archive => {
                // Archive reads say when each event left the context.
                let mut page = filter.apply(row.archive.values())?;
                row.context_log.annotate(&mut page.items);
                Ok(page)
            }
            EventView::Context => {
                filter.apply(row.context.iter().filter_map(|s| row.archive.get(s)))
            }
        }
    }

    async fn event_version(&self, id: &SessionId) -> Result<u64> {
        self.get(id).await.map(|s| s.version)
    }

    async fn replace_context(
        &self,
        id: &SessionId,
        events: Vec<SessionEvent>,
        expected_version: u64,
    ) -> Result<bool> {
        let batch = EventBatch::new(events, &self.limits)?;
        let now = self.clock.now();
        let mut t = self.lock()?;
        let row = writable(found(t.sessions.get_mut(id.as_str())), id, now)?;
        let stored = row.stored(&batch);
        let Some(plan) = ContextPlan::new(&row.head(), expected_version, &batch, &stored)? else {
            return Ok(false);
        };
        row.write_events(&batch, &plan.new);
        row.context_log.push(plan.change(now));
        row.context = plan.context;
        apply_delta(&mut row.session.state, &plan.state.session);
        row.last_seq = plan.last_seq;
        row.session.context_tokens = plan.context_tokens;
        row.session.version = plan.version;
        row.session.updated_at = row.session.updated_at.max(now);
        let session = row.session.clone();
        write_shared(&mut t, &session, &plan.state.shared);
        Ok(true)
    }

    async fn rewind_to(&self, id: &SessionId, to: &RewindTo) -> Result<RewindOutcome> {
        let now = self.clock.now();
        let mut t = self.lock()?;
        let row = writable(found(t.sessions.get_mut(id.as_str())), id, now)?;
        let first = to.invocation().and_then(|invocation| {
            let mut archive = row.archive.values();
            archive
                .find(|e| e.invocation_id.as_deref() == Some(invocation.as_str()))
                .map(|e| e.seq)
        });
        let plan = RewindPlan::new(&row.head(), to, first)?;
        let removed = row.archive.split_off(&plan.from_seq);
        let removed_bytes = SessionEvent::stored_bytes_of(removed.values())?;
        let removed = removed.len();
        row.session.event_bytes = row.session.event_bytes.saturating_sub(removed_bytes);
        row.ids.retain(|_, seq| *seq < plan.from_seq);
        row.context.retain(|seq| *seq < plan.from_seq);
        let deltas = row.archive.values().filter_map(|e| e.state_delta.as_ref());
        row.session.state = RewindPlan::state(&row.initial_state, deltas);
        row.session.event_count = count(row.archive.len());
        row.session.context_tokens = row
            .context
            .iter()
            .filter_map(|s| row.archive.get(s))
            .map(|e| u64::from(e.token_estimate))
            .sum();
        row.session.version = plan.version;
        row.session.updated_at = row.session.updated_at.max(now);
        Ok(RewindOutcome {
            version: plan.version,
            removed,
        })
    }

    async fn prune_events(
        &self,
        id: &SessionId,
        seqs: &[u64],
        expected_version: u64,
    ) -> Result<Option<Pruned>> {
        let now = self.clock.now();
        let mut t = self.lock()?;
        let row = writable(found(t.sessions.get_mut(id.as_str())), id, now)?;
        // Core decides which seqs may go: archived, not in the context,
        // and nothing rewind replays (system messages, state changes).
        let standing = |seq| match row.archive.get(&seq) {
            Some(e) => Standing::of_event(e, row.context.contains(&seq)),
            None => Standing::Absent,
        };
        let Some(plan) = PrunePlan::new(&row.head(), expected_version, seqs, standing)? else {
            return Ok(None);
        };
        let gone: Vec<SessionEvent> = plan
            .seqs
            .iter()
            .filter_map(|s| row.archive.remove(s))
            .collect();
        for e in &gone {
            row.ids.remove(&e.id);
        }
        let gone_bytes = SessionEvent::stored_bytes_of(&gone)?;
        row.session.event_bytes = row.session.event_bytes.saturating_sub(gone_bytes);
        row.session.event_count = count(row.archive.len());
        row.session.version = plan.version;
        Ok(Some(Pruned {
            removed: count(gone.len()),
            version: plan.version,
        }))
    }

    async fn search(&self, query: &SearchQuery) -> Result<Page<SearchHit>> {
        query.check(&self.limits)?;
        self.capabilities().check_search(query)?;
        let parsed = query.parsed()?;
        let now = self.clock.now();
        let mut t = self.lock()?;
        let rows: Vec<&Row> = match &query.scope {
            SearchScope::Session(id) => {
                let id = SessionId::new(id.as_str())?;
                vec![&*readable(
                    found(t.sessions.get_mut(id.as_str())),
                    &id,
                    now,
                )?]
            }
            SearchScope::User { app, user_id } => t
                .sessions
                .values()
                .filter(|r| r.session.app == *app && r.session.user_id == *user_id)
                .filter(|r| !r.session.is_expired_at(now))
                .collect(),
        };
        // The reference matcher decides; core orders, pages and cuts snippets.
        let matches: Vec<SessionEvent> = rows
            .iter()
            .flat_map(|r| r.archive.values())
            .filter(|e| query.admits(&parsed, e))
            .cloned()
            .collect();
        Ok(page_of_matches(query, &parsed, matches, None))
    }

    async fn shared_state(&self, app: &AppName, user_id: &UserId) -> Result<SharedState> {
        Ok(read_shared(&*self.lock()?, app, user_id))
    }

    async fn export_session(&self, id: &SessionId) -> Result<SessionDump> {
        let mut t = self.lock()?;
        let row = readable(found(t.sessions.get_mut(id.as_str())), id, self.clock.now())?;
        let (session, initial_state) = (row.session.clone(), row.initial_state.clone());
        let (last_seq, context) = (row.last_seq, row.context.clone());
        let events = row.archive.values().cloned().collect();
        let context_log = row.context_log.changes().to_vec();
        let shared = read_shared(&t, &session.app, &session.user_id);
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

    async fn import_session(&self, dump: SessionDump) -> Result<ImportOutcome> {
        let now = self.clock.now();
        let mut t = self.lock()?;
        let live = t
            .sessions
            .get(dump.session.id.as_str())
            .filter(|r| !r.session.is_expired_at(now))
            .map(|r| r.session.version);
        // Held to the limits an append is: quotas and the event size.
        let Some(plan) = ImportPlan::new(dump, live, &self.limits)? else {
            return Ok(ImportOutcome::Unchanged);
        };
        let d = plan.dump;
        let s = &d.session;
        if !d.shared.app.is_empty() {
            t.apps.insert(s.app.to_string(), d.shared.app.clone());
        }
        if !d.shared.user.is_empty() {
            t.users
                .insert(user_key(&s.app, &s.user_id), d.shared.user.clone());
        }
        let row = Row {
            session: d.session.clone(),
            initial_state: d.initial_state,
            last_seq: d.last_seq,
            ids: d.events.iter().map(|e| (e.id.clone(), e.seq)).collect(),
            archive: d.events.into_iter().map(|e| (e.seq, e)).collect(),
            context: d.context,
            context_log: ContextLog::new(d.context_log),
        };
        t.sessions.insert(row.session.id.to_string(), row);
        Ok(ImportOutcome::Imported)
    }
}

// --- the one line that runs the suite ----------------------------------

async fn tiny(clock: SharedClock) -> Option<session_testkit::TestStore> {
    Some(session_testkit::TestStore::new(TinyStore::new(clock)))
}

session_testkit::conformance_suite!(tiny);

#[test]
fn the_guide_shows_this_file() {
    let guide = include_str!("../../../docs/backends/new.md");
    let this = include_str!("guide_store.rs");
    let start = guide.find("```rust\n").map(|i| i + "```rust\n".len());
    let shown = start.and_then(|s| guide[s..].find("\n```").map(|e| &guide[s..=s + e]));
    assert_eq!(
        shown,
        Some(this),
        "docs/backends/new.md must show guide_store.rs unchanged"
    );
}
