//! `InMemoryRepository`: the reference semantics, in process memory.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use parking_lot::RwLock;

use crate::clock::{system_clock, SharedClock};
use crate::error::{Result, SessionError};
use crate::event::{SessionEvent, StateMap};
use crate::filter::{
    contains_folded, fold_case, EventFilter, EventView, Page, SearchHit, SearchMode, SearchQuery,
    SearchScope, SessionQuery,
};
use crate::repository::{
    check_session_id, check_unique_ids, prepare_events, AppendOutcome, Capabilities, ImportOutcome,
    RewindOutcome, SessionDump, SessionRepository,
};
use crate::session::{NewSession, Session, SessionUpdate};
use crate::state::{apply_delta, replay_session_state, ScopedDelta, SharedState};
use crate::validate::{check_seq_room, next_version, validate_id, Limits};

const BACKEND: &str = "memory";

/// A repository in process memory: the reference semantics every backend
/// is checked against. Safe under concurrent use; nothing survives the process.
///
/// ```
/// # tokio_test_block(async {
/// use session_core::{InMemoryRepository, Message, NewSession, SessionEvent, SessionRepository};
/// let repo = InMemoryRepository::new();
/// let s = repo.create(NewSession::new("app", "alice", chrono::Utc::now())).await.unwrap();
/// let out = repo.append(&s.id, vec![SessionEvent::new(Message::user("hi"))]).await.unwrap();
/// assert_eq!(out.seqs, vec![1]);
/// # });
/// # fn tokio_test_block(f: impl std::future::Future<Output = ()>) {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Debug)]
pub struct InMemoryRepository {
    inner: RwLock<Inner>,
    clock: SharedClock,
    limits: Limits,
}

#[derive(Debug, Default)]
struct Inner {
    sessions: HashMap<String, Record>,
    app_state: HashMap<String, StateMap>,
    user_state: HashMap<(String, String), StateMap>,
}

#[derive(Debug)]
struct Record {
    session: Session,
    initial_state: StateMap,
    archive: BTreeMap<u64, SessionEvent>,
    context: Vec<u64>,
    ids: HashMap<String, u64>,
    last_seq: u64,
}

impl Record {
    fn context_tokens(&self) -> u64 {
        self.context
            .iter()
            .filter_map(|s| self.archive.get(s))
            .map(|e| u64::from(e.token_estimate))
            .sum()
    }

    /// How many distinct event ids of `events` the session does not hold yet.
    fn count_new(&self, events: &[SessionEvent]) -> usize {
        events
            .iter()
            .map(|e| e.id.as_str())
            .filter(|id| !self.ids.contains_key(*id))
            .collect::<HashSet<_>>()
            .len()
    }

    /// Adds a new event to the archive (not the context); returns its seq.
    fn archive_new(&mut self, inner_shared: &mut Shared<'_>, mut event: SessionEvent) -> u64 {
        // Room was checked before the write began (`check_seq_room`).
        self.last_seq = self.last_seq.saturating_add(1);
        let seq = self.last_seq;
        event.seq = seq;
        event.session_id.clone_from(&self.session.id);
        if let Some(delta) = &event.state_delta {
            let split = ScopedDelta::split(delta);
            apply_delta(&mut self.session.state, &split.session);
            inner_shared.apply(&self.session, &split);
        }
        self.ids.insert(event.id.clone(), seq);
        self.archive.insert(seq, event);
        self.session.event_count = self.session.event_count.saturating_add(1);
        seq
    }
}

struct Shared<'a> {
    app_state: &'a mut HashMap<String, StateMap>,
    user_state: &'a mut HashMap<(String, String), StateMap>,
}

impl Shared<'_> {
    fn apply(&mut self, session: &Session, split: &ScopedDelta) {
        if !split.app.is_empty() {
            apply_delta(
                self.app_state.entry(session.app.clone()).or_default(),
                &split.app,
            );
        }
        if !split.user.is_empty() {
            apply_delta(
                self.user_state
                    .entry((session.app.clone(), session.user_id.clone()))
                    .or_default(),
                &split.user,
            );
        }
    }
}

impl Inner {
    fn split(&mut self) -> (&mut HashMap<String, Record>, Shared<'_>) {
        (
            &mut self.sessions,
            Shared {
                app_state: &mut self.app_state,
                user_state: &mut self.user_state,
            },
        )
    }
}

impl Default for InMemoryRepository {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryRepository {
    /// An empty repository on the system clock with default limits.
    pub fn new() -> Self {
        Self {
            inner: RwLock::new(Inner::default()),
            clock: system_clock(),
            limits: Limits::default(),
        }
    }

    /// Uses `clock` for expiry and activity times.
    pub fn with_clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// Uses `limits` for event and page sizes.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Wraps the repository in an `Arc<dyn SessionRepository>`.
    pub fn shared(self) -> Arc<dyn SessionRepository> {
        Arc::new(self)
    }

    fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }
}

fn live<'a>(inner: &'a Inner, id: &str, now: DateTime<Utc>) -> Result<&'a Record> {
    match inner.sessions.get(id) {
        Some(r) if !r.session.is_expired_at(now) => Ok(r),
        _ => Err(SessionError::session_not_found(id)),
    }
}

fn writable<'a>(
    sessions: &'a mut HashMap<String, Record>,
    id: &str,
    now: DateTime<Utc>,
) -> Result<&'a mut Record> {
    match sessions.get_mut(id) {
        Some(r) if r.session.is_expired_at(now) => Err(SessionError::Expired { id: id.to_owned() }),
        Some(r) => Ok(r),
        None => Err(SessionError::session_not_found(id)),
    }
}

#[async_trait]
impl SessionRepository for InMemoryRepository {
    fn capabilities(&self) -> Capabilities {
        Capabilities::basic(BACKEND)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "create", app = %new.app, session_id = %new.id))]
    async fn create(&self, new: NewSession) -> Result<Session> {
        let now = self.now();
        new.validate(now)?;
        let mut inner = self.inner.write();
        if let Some(existing) = inner.sessions.get(&new.id) {
            if !existing.session.is_expired_at(now) {
                return Err(SessionError::AlreadyExists {
                    what: "session",
                    id: new.id,
                });
            }
        }
        let split = ScopedDelta::split(&new.state);
        let session = new.to_session(now);
        let (sessions, mut shared) = inner.split();
        shared.apply(&session, &split);
        sessions.insert(
            new.id,
            Record {
                session: session.clone(),
                initial_state: new.state,
                archive: BTreeMap::new(),
                context: Vec::new(),
                ids: HashMap::new(),
                last_seq: 0,
            },
        );
        Ok(session)
    }

    async fn get(&self, id: &str) -> Result<Session> {
        check_session_id(id)?;
        let inner = self.inner.read();
        live(&inner, id, self.now()).map(|r| r.session.clone())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "update", session_id = %id))]
    async fn update(&self, id: &str, update: SessionUpdate) -> Result<Session> {
        check_session_id(id)?;
        let now = self.now();
        update.validate(now)?;
        let mut inner = self.inner.write();
        let r = writable(&mut inner.sessions, id, now)?;
        update.apply_to(&mut r.session, now)?;
        Ok(r.session.clone())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "delete", session_id = %id))]
    async fn delete(&self, id: &str) -> Result<bool> {
        check_session_id(id)?;
        Ok(self.inner.write().sessions.remove(id).is_some())
    }

    async fn list(&self, query: &SessionQuery) -> Result<Page<Session>> {
        query.check(&self.limits)?;
        let now = self.now();
        let inner = self.inner.read();
        let mut found: Vec<&Session> = inner
            .sessions
            .values()
            .map(|r| &r.session)
            .filter(|s| !s.is_expired_at(now) && query.matches(s))
            .collect();
        found.sort_by(|a, b| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(Page::paginate(
            found.into_iter().cloned(),
            query.page,
            query.page_size,
        ))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "purge_expired"))]
    async fn purge_expired(&self, now: DateTime<Utc>) -> Result<u64> {
        let mut inner = self.inner.write();
        let before = inner.sessions.len();
        inner.sessions.retain(|_, r| !r.session.is_expired_at(now));
        Ok(u64::try_from(before.saturating_sub(inner.sessions.len())).unwrap_or(u64::MAX))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "append", session_id = %id, events = events.len()))]
    async fn append(&self, id: &str, mut events: Vec<SessionEvent>) -> Result<AppendOutcome> {
        check_session_id(id)?;
        prepare_events(&mut events, &self.limits)?;
        let now = self.now();
        let mut inner = self.inner.write();
        let (sessions, mut shared) = inner.split();
        let r = writable(sessions, id, now)?;
        let fresh = r.count_new(&events);
        if fresh > 0 {
            check_seq_room(r.last_seq, fresh)?;
            next_version(r.session.version)?;
        }
        let mut seqs = Vec::with_capacity(events.len());
        let mut written = 0;
        for e in events {
            if let Some(&seq) = r.ids.get(&e.id) {
                seqs.push(seq);
                continue;
            }
            let tokens = u64::from(e.token_estimate);
            let seq = r.archive_new(&mut shared, e);
            r.context.push(seq);
            r.session.context_tokens = r.session.context_tokens.saturating_add(tokens);
            seqs.push(seq);
            written += 1;
        }
        if written > 0 {
            r.session.version = next_version(r.session.version)?;
            r.session.updated_at = r.session.updated_at.max(now);
        }
        Ok(AppendOutcome {
            version: r.session.version,
            seqs,
            written,
        })
    }

    async fn events(&self, id: &str, filter: &EventFilter) -> Result<Page<SessionEvent>> {
        check_session_id(id)?;
        filter.check(&self.limits)?;
        let inner = self.inner.read();
        let r = live(&inner, id, self.now())?;
        Ok(match filter.view {
            EventView::Archive => filter.apply(r.archive.values()),
            EventView::Context => filter.apply(r.context.iter().filter_map(|s| r.archive.get(s))),
        })
    }

    async fn event_version(&self, id: &str) -> Result<u64> {
        check_session_id(id)?;
        let inner = self.inner.read();
        live(&inner, id, self.now()).map(|r| r.session.version)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "replace_context", session_id = %id, events = events.len()))]
    async fn replace_context(
        &self,
        id: &str,
        mut events: Vec<SessionEvent>,
        expected_version: u64,
    ) -> Result<bool> {
        check_session_id(id)?;
        prepare_events(&mut events, &self.limits)?;
        check_unique_ids(&events)?;
        let now = self.now();
        let mut inner = self.inner.write();
        let (sessions, mut shared) = inner.split();
        let r = writable(sessions, id, now)?;
        if r.session.version != expected_version {
            return Ok(false);
        }
        let version = next_version(r.session.version)?;
        check_seq_room(r.last_seq, r.count_new(&events))?;
        let mut context = Vec::with_capacity(events.len());
        for e in events {
            let seq = match r.ids.get(&e.id) {
                Some(&seq) => seq,
                None => r.archive_new(&mut shared, e),
            };
            context.push(seq);
        }
        r.context = context;
        r.session.context_tokens = r.context_tokens();
        r.session.version = version;
        r.session.updated_at = r.session.updated_at.max(now);
        Ok(true)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "rewind", session_id = %id))]
    async fn rewind(&self, id: &str, before_invocation_id: &str) -> Result<RewindOutcome> {
        check_session_id(id)?;
        validate_id("invocation id", before_invocation_id)?;
        let now = self.now();
        let mut inner = self.inner.write();
        let r = writable(&mut inner.sessions, id, now)?;
        let Some(from) = r
            .archive
            .values()
            .find(|e| e.invocation_id.as_deref() == Some(before_invocation_id))
            .map(|e| e.seq)
        else {
            return Err(SessionError::NotFound {
                what: "invocation",
                id: before_invocation_id.to_owned(),
            });
        };
        let version = next_version(r.session.version)?;
        let removed = r.archive.split_off(&from);
        r.ids.retain(|_, seq| *seq < from);
        r.context.retain(|seq| *seq < from);
        r.session.state = replay_session_state(&r.initial_state, r.archive.values());
        r.session.event_count = u64::try_from(r.archive.len()).unwrap_or(u64::MAX);
        r.session.context_tokens = r.context_tokens();
        r.session.version = version;
        r.session.updated_at = r.session.updated_at.max(now);
        Ok(RewindOutcome {
            version: r.session.version,
            removed: removed.len(),
        })
    }

    async fn search(&self, query: &SearchQuery) -> Result<Page<SearchHit>> {
        query.check(&self.limits)?;
        if query.mode == SearchMode::Ranked {
            return Err(SessionError::invalid(
                "search mode",
                "ranked search is not supported by the memory backend; use literal search",
            ));
        }
        let needle = fold_case(&query.text);
        let now = self.now();
        let inner = self.inner.read();
        let records: Vec<&Record> = match &query.scope {
            SearchScope::Session(id) => vec![live(&inner, id, now)?],
            SearchScope::User { app, user_id } => inner
                .sessions
                .values()
                .filter(|r| {
                    &r.session.app == app
                        && &r.session.user_id == user_id
                        && !r.session.is_expired_at(now)
                })
                .collect(),
        };
        let mut hits: Vec<&SessionEvent> = records
            .iter()
            .flat_map(|r| r.archive.values())
            .filter(|e| contains_folded(&e.message.search_text(), &needle))
            .collect();
        if records.len() > 1 {
            hits.sort_by(|a, b| {
                (a.timestamp, &a.session_id, a.seq).cmp(&(b.timestamp, &b.session_id, b.seq))
            });
        }
        Ok(Page::paginate(
            hits.into_iter().map(|e| SearchHit {
                session_id: e.session_id.clone(),
                event: e.clone(),
                score: None,
            }),
            query.page,
            query.page_size,
        ))
    }

    async fn export_session(&self, id: &str) -> Result<SessionDump> {
        check_session_id(id)?;
        let inner = self.inner.read();
        let r = live(&inner, id, self.now())?;
        Ok(SessionDump {
            session: r.session.clone(),
            initial_state: r.initial_state.clone(),
            last_seq: r.last_seq,
            events: r.archive.values().cloned().collect(),
            context: r.context.clone(),
            shared: SharedState {
                app: inner
                    .app_state
                    .get(&r.session.app)
                    .cloned()
                    .unwrap_or_default(),
                user: inner
                    .user_state
                    .get(&(r.session.app.clone(), r.session.user_id.clone()))
                    .cloned()
                    .unwrap_or_default(),
            },
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "import", session_id = %dump.session.id))]
    async fn import_session(&self, dump: SessionDump) -> Result<ImportOutcome> {
        dump.validate()?;
        let now = self.now();
        let mut inner = self.inner.write();
        if let Some(r) = inner.sessions.get(&dump.session.id) {
            if !r.session.is_expired_at(now) && r.session.version >= dump.session.version {
                return Ok(ImportOutcome::Unchanged);
            }
        }
        let s = &dump.session;
        if !dump.shared.app.is_empty() {
            inner
                .app_state
                .insert(s.app.clone(), dump.shared.app.clone());
        }
        if !dump.shared.user.is_empty() {
            inner
                .user_state
                .insert((s.app.clone(), s.user_id.clone()), dump.shared.user.clone());
        }
        let mut archive = BTreeMap::new();
        let mut ids = HashMap::new();
        for mut e in dump.events {
            e.session_id.clone_from(&s.id);
            ids.insert(e.id.clone(), e.seq);
            archive.insert(e.seq, e);
        }
        let mut record = Record {
            session: dump.session,
            initial_state: dump.initial_state,
            archive,
            context: dump.context,
            ids,
            last_seq: dump.last_seq,
        };
        record.session.event_count = u64::try_from(record.archive.len()).unwrap_or(u64::MAX);
        record.session.context_tokens = record.context_tokens();
        inner.sessions.insert(record.session.id.clone(), record);
        Ok(ImportOutcome::Imported)
    }

    async fn shared_state(&self, app: &str, user_id: &str) -> Result<SharedState> {
        crate::validate::validate_owner(app, user_id)?;
        let inner = self.inner.read();
        Ok(SharedState {
            app: inner.app_state.get(app).cloned().unwrap_or_default(),
            user: inner
                .user_state
                .get(&(app.to_owned(), user_id.to_owned()))
                .cloned()
                .unwrap_or_default(),
        })
    }
}
