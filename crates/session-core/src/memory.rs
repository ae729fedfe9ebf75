//! `InMemoryRepository`: the reference semantics, in process memory.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::clock::{system_clock, SharedClock};
use crate::context_log::ContextLog;
use crate::dump::SessionDump;
use crate::error::Result;
use crate::event::SessionEvent;
use crate::filter::{EventFilter, EventView, Page, SessionQuery};
use crate::ids::{AppName, SessionId, UserId};
use crate::outcome::{AppendOutcome, ImportOutcome, RewindOutcome};
use crate::plan::{
    self, plan_update, readable, AppendPlan, ContextPlan, CreatePlan, EventBatch, Head, ImportPlan,
    NewEvent, RewindPlan, RewindTo, StateChanges, Stored,
};
use crate::repository::{Capabilities, Erased, SessionRepository};
use crate::retention::{PrunePlan, Pruned, Standing};
use crate::search::{
    page_of_first_matches, page_of_matches, read_limit, RankStats, SearchHit, SearchMode,
    SearchQuery, SearchScope, TrigramIndex,
};
use crate::session::{NewSession, Session, SessionUpdate};
use crate::state::StateMap;
use crate::state::{apply_delta, SharedDelta, SharedState};
use crate::validate::Limits;

mod context_events;

use context_events::ContextEvents;

const BACKEND: &str = "memory";

/// A repository in process memory: the reference semantics every backend
/// is checked against. Safe under concurrent use; nothing survives the process.
///
/// ```
/// # tokio_test_block(async {
/// use session_core::{InMemoryRepository, Message, NewSession, SessionEvent, SessionRepository};
/// let repo = InMemoryRepository::new();
/// let s = repo.create(NewSession::new("app", "alice", chrono::Utc::now()).unwrap()).await.unwrap();
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
    /// The archive's trigram index: search checks its candidates only.
    /// It holds the events up to `indexed_through`; later ones are added
    /// by the next search that reads the session ([`Record::index_pending`]),
    /// so an append does not pay for indexing and a search still sees
    /// every event appended before it.
    index: TrigramIndex,
    /// The highest seq whose event `index` holds (or that was looked at).
    indexed_through: u64,
    /// The context's history: when events left it.
    context_log: ContextLog,
}

impl Record {
    fn context_tokens(&self) -> u64 {
        self.context
            .iter()
            .filter_map(|s| self.archive.get(s))
            .map(|e| u64::from(e.token_estimate))
            .sum()
    }

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

    /// The events of `batch` this session already holds.
    fn stored(&self, batch: &EventBatch) -> HashMap<String, Stored> {
        batch
            .ids()
            .into_iter()
            .filter_map(|id| {
                let seq = *self.ids.get(id)?;
                let tokens = self.archive.get(&seq).map_or(0, |e| e.token_estimate);
                Some((id.to_owned(), Stored { seq, tokens }))
            })
            .collect()
    }

    /// Whether the session belongs to user `user_id` of `app`.
    fn is_owned_by(&self, app: &str, user_id: &str) -> bool {
        self.session.app == *app && self.session.user_id == *user_id
    }

    /// Whether events were appended since the index last caught up.
    fn has_pending(&self) -> bool {
        self.indexed_through < self.last_seq
    }

    /// Adds the events appended since the last search to the index.
    fn index_pending(&mut self) {
        let from = self.indexed_through.saturating_add(1);
        for (seq, e) in self.archive.range(from..) {
            self.index.add(*seq, &e.message.search_text());
        }
        self.indexed_through = self.indexed_through.max(self.last_seq);
    }

    /// Moves the planned new events of `batch` into the archive.
    fn archive_new(&mut self, batch: EventBatch, new: &[NewEvent]) {
        let added = batch.added_bytes(new);
        let in_batch_order =
            new.len() == batch.events.len() && new.iter().enumerate().all(|(k, n)| n.index == k);
        if in_batch_order {
            for (event, n) in batch.events.into_iter().zip(new) {
                self.archive_one(event, n.seq);
            }
        } else {
            let mut events: Vec<Option<SessionEvent>> =
                batch.events.into_iter().map(Some).collect();
            for n in new {
                if let Some(event) = events.get_mut(n.index).and_then(Option::take) {
                    self.archive_one(event, n.seq);
                }
            }
        }
        self.session.event_count = u64::try_from(self.archive.len()).unwrap_or(u64::MAX);
        self.session.event_bytes = self.session.event_bytes.saturating_add(added);
    }

    /// Files one new event under `seq`.
    fn archive_one(&mut self, mut event: SessionEvent, seq: u64) {
        event.seq = seq;
        event.session_id = self.session.id.to_string();
        self.ids.insert(event.id.clone(), seq);
        self.archive.insert(seq, event);
    }

    fn apply_state(&mut self, shared: &mut Shared<'_>, changes: &StateChanges) {
        apply_delta(&mut self.session.state, &changes.session);
        shared.apply(&self.session, &changes.shared);
    }
}

struct Shared<'a> {
    app_state: &'a mut HashMap<String, StateMap>,
    user_state: &'a mut HashMap<(String, String), StateMap>,
}

impl Shared<'_> {
    fn apply(&mut self, session: &Session, split: &SharedDelta) {
        if !split.app.is_empty() {
            apply_delta(
                self.app_state.entry(session.app.to_string()).or_default(),
                &split.app,
            );
        }
        if !split.user.is_empty() {
            apply_delta(
                self.user_state
                    .entry((session.app.to_string(), session.user_id.to_string()))
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
    /// A read guard under which the sessions a search of `scope` reads
    /// have their new events indexed: taken for writing only when some
    /// have events not indexed yet, so searches otherwise read side by side.
    fn read_indexed(&self, scope: &SearchScope) -> RwLockReadGuard<'_, Inner> {
        let inner = self.inner.read();
        if !scoped(&inner.sessions, scope).any(Record::has_pending) {
            return inner;
        }
        drop(inner);
        let mut inner = self.inner.write();
        match scope {
            SearchScope::Session(id) => {
                if let Some(r) = inner.sessions.get_mut(id.as_str()) {
                    r.index_pending();
                }
            }
            SearchScope::User { app, user_id } => inner
                .sessions
                .values_mut()
                .filter(|r| r.is_owned_by(app, user_id))
                .for_each(Record::index_pending),
        }
        RwLockWriteGuard::downgrade(inner)
    }

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

fn found(r: Option<&Record>) -> Option<(&Record, Option<DateTime<Utc>>)> {
    r.map(|r| (r, r.session.expires_at))
}

/// How many live sessions the owner of `session` holds.
fn live_of(inner: &Inner, session: &Session, now: DateTime<Utc>) -> u64 {
    let n = inner
        .sessions
        .values()
        .filter(|r| r.session.counts_for_owner_of(session, now))
        .count();
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// The sessions a search of `scope` reads (expired ones too).
fn scoped<'a>(
    sessions: &'a HashMap<String, Record>,
    scope: &'a SearchScope,
) -> Box<dyn Iterator<Item = &'a Record> + 'a> {
    match scope {
        SearchScope::Session(id) => Box::new(sessions.get(id.as_str()).into_iter()),
        SearchScope::User { app, user_id } => Box::new(
            sessions
                .values()
                .filter(move |r| r.is_owned_by(app, user_id)),
        ),
    }
}

fn live<'a>(inner: &'a Inner, id: &SessionId, now: DateTime<Utc>) -> Result<&'a Record> {
    readable(found(inner.sessions.get(id.as_str())), id, now)
}

fn writable<'a>(
    sessions: &'a mut HashMap<String, Record>,
    id: &SessionId,
    now: DateTime<Utc>,
) -> Result<&'a mut Record> {
    let r = sessions.get_mut(id.as_str());
    let expires = r.as_ref().map(|r| r.session.expires_at);
    plan::writable(r.zip(expires), id, now)
}

#[async_trait]
impl SessionRepository for InMemoryRepository {
    fn capabilities(&self) -> Capabilities {
        Capabilities::basic(BACKEND).with_ranked_search()
    }

    async fn create(&self, new: NewSession) -> Result<Session> {
        let now = self.now();
        let mut inner = self.inner.write();
        let existing = inner
            .sessions
            .get(new.id.as_str())
            .map(|r| r.session.expires_at);
        let plan = CreatePlan::new(new, existing, now)?;
        if self.limits.max_user_sessions.is_some() {
            self.limits
                .check_user_sessions(&plan.session, live_of(&inner, &plan.session, now))?;
        }
        let (sessions, mut shared) = inner.split();
        shared.apply(&plan.session, &plan.shared);
        sessions.insert(
            plan.session.id.to_string(),
            Record {
                session: plan.session.clone(),
                initial_state: plan.initial_state,
                archive: BTreeMap::new(),
                context: Vec::new(),
                ids: HashMap::new(),
                last_seq: 0,
                index: TrigramIndex::new(),
                indexed_through: 0,
                context_log: ContextLog::default(),
            },
        );
        Ok(plan.session)
    }

    async fn erase_user(&self, app: &AppName, user_id: &UserId) -> Result<Erased> {
        let mut inner = self.inner.write();
        let mut erased = Erased::default();
        inner.sessions.retain(|_, r| {
            let theirs = r.session.app == *app && r.session.user_id == *user_id;
            if theirs {
                erased.sessions = erased.sessions.saturating_add(1);
                let events = u64::try_from(r.archive.len()).unwrap_or(u64::MAX);
                erased.events = erased.events.saturating_add(events);
            }
            !theirs
        });
        erased.user_state = inner
            .user_state
            .remove(&(app.to_string(), user_id.to_string()))
            .is_some();
        Ok(erased)
    }

    async fn prune_events(
        &self,
        id: &SessionId,
        seqs: &[u64],
        expected_version: u64,
    ) -> Result<Option<Pruned>> {
        let mut inner = self.inner.write();
        let r = writable(&mut inner.sessions, id, self.now())?;
        let context: HashSet<u64> = r.context.iter().copied().collect();
        let standing = |seq| match r.archive.get(&seq) {
            Some(e) => Standing::of_event(e, context.contains(&seq)),
            None => Standing::Absent,
        };
        let Some(plan) = PrunePlan::new(&r.head(), expected_version, seqs, standing)? else {
            return Ok(None);
        };
        let bytes =
            SessionEvent::stored_bytes_of(plan.seqs.iter().filter_map(|s| r.archive.get(s)))?;
        let gone: HashSet<u64> = plan
            .seqs
            .iter()
            .copied()
            .filter(|s| r.archive.remove(s).is_some())
            .collect();
        r.session.event_bytes = r.session.event_bytes.saturating_sub(bytes);
        r.index.remove(&gone);
        r.ids.retain(|_, seq| !gone.contains(seq));
        r.session.event_count = u64::try_from(r.archive.len()).unwrap_or(u64::MAX);
        r.session.version = plan.version;
        Ok(Some(Pruned {
            removed: u64::try_from(gone.len()).unwrap_or(u64::MAX),
            version: plan.version,
        }))
    }

    async fn get(&self, id: &SessionId) -> Result<Session> {
        let inner = self.inner.read();
        live(&inner, id, self.now()).map(|r| r.session.clone())
    }

    async fn update(&self, id: &SessionId, update: SessionUpdate) -> Result<Session> {
        let now = self.now();
        update.validate(now)?;
        let mut inner = self.inner.write();
        let r = writable(&mut inner.sessions, id, now)?;
        plan_update(&r.head(), &update)?;
        update.apply_to(&mut r.session, now)?;
        Ok(r.session.clone())
    }

    async fn delete(&self, id: &SessionId) -> Result<bool> {
        Ok(self.inner.write().sessions.remove(id.as_str()).is_some())
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

    async fn purge_expired(&self, now: DateTime<Utc>) -> Result<u64> {
        let mut inner = self.inner.write();
        let before = inner.sessions.len();
        inner.sessions.retain(|_, r| !r.session.is_expired_at(now));
        Ok(u64::try_from(before.saturating_sub(inner.sessions.len())).unwrap_or(u64::MAX))
    }

    async fn append(&self, id: &SessionId, events: Vec<SessionEvent>) -> Result<AppendOutcome> {
        let batch = EventBatch::sized(events, &self.limits)?;
        let now = self.now();
        let mut inner = self.inner.write();
        let (sessions, mut shared) = inner.split();
        let r = writable(sessions, id, now)?;
        let plan = AppendPlan::new(&r.head(), &batch, &r.stored(&batch))?;
        if !plan.is_noop() {
            r.archive_new(batch, &plan.new);
            r.context.extend(plan.new.iter().map(|n| n.seq));
            r.apply_state(&mut shared, &plan.state);
            r.last_seq = plan.last_seq;
            r.session.context_tokens = r.session.context_tokens.saturating_add(plan.added_tokens);
            r.session.version = plan.version;
            r.session.updated_at = r.session.updated_at.max(now);
        }
        Ok(plan.outcome())
    }

    async fn events(&self, id: &SessionId, filter: &EventFilter) -> Result<Page<SessionEvent>> {
        filter.check(&self.limits)?;
        let inner = self.inner.read();
        let r = live(&inner, id, self.now())?;
        match (filter.view, filter.after) {
            (EventView::Archive, after) => {
                let from = after.map_or(0, |a| a.saturating_add(1));
                let mut page = filter.apply(r.archive.range(from..).map(|(_, e)| e))?;
                r.context_log.annotate(&mut page.items);
                Ok(page)
            }
            (EventView::Context, after) => {
                // Start past the cursor's position, found among the context's
                // seqs alone: by bisection while they ascend (until a
                // compaction puts a summary before older events), so the
                // pages of a whole read do not each scan the ones before.
                let from = match after {
                    None => 0,
                    Some(a) => r
                        .context
                        .binary_search(&a)
                        .ok()
                        .or_else(|| r.context.iter().position(|s| *s == a))
                        .map(|i| i.saturating_add(1))
                        .ok_or_else(|| filter.cursor_left_context())?,
                };
                let rest = r.context.get(from..).unwrap_or_default();
                let past_cursor = EventFilter {
                    after: None,
                    ..filter.clone()
                };
                past_cursor.apply(ContextEvents::new(rest, &r.archive))
            }
        }
    }

    async fn event_version(&self, id: &SessionId) -> Result<u64> {
        let inner = self.inner.read();
        live(&inner, id, self.now()).map(|r| r.session.version)
    }

    async fn replace_context(
        &self,
        id: &SessionId,
        events: Vec<SessionEvent>,
        expected_version: u64,
    ) -> Result<bool> {
        let batch = EventBatch::sized(events, &self.limits)?;
        let now = self.now();
        let mut inner = self.inner.write();
        let (sessions, mut shared) = inner.split();
        let r = writable(sessions, id, now)?;
        let Some(plan) = ContextPlan::new(&r.head(), expected_version, &batch, &r.stored(&batch))?
        else {
            return Ok(false);
        };
        r.archive_new(batch, &plan.new);
        r.apply_state(&mut shared, &plan.state);
        r.context_log.push(plan.change(now));
        r.context = plan.context;
        r.last_seq = plan.last_seq;
        r.session.context_tokens = plan.context_tokens;
        r.session.version = plan.version;
        r.session.updated_at = r.session.updated_at.max(now);
        Ok(true)
    }

    async fn rewind_to(&self, id: &SessionId, to: &RewindTo) -> Result<RewindOutcome> {
        let now = self.now();
        let mut inner = self.inner.write();
        let r = writable(&mut inner.sessions, id, now)?;
        let first = to.invocation().and_then(|inv| {
            r.archive
                .values()
                .find(|e| e.invocation_id.as_deref() == Some(inv.as_str()))
                .map(|e| e.seq)
        });
        let plan = RewindPlan::new(&r.head(), to, first)?;
        let bytes =
            SessionEvent::stored_bytes_of(r.archive.range(plan.from_seq..).map(|(_, e)| e))?;
        let removed = r.archive.split_off(&plan.from_seq);
        r.session.event_bytes = r.session.event_bytes.saturating_sub(bytes);
        r.index.remove_from(plan.from_seq);
        r.indexed_through = r.indexed_through.min(plan.from_seq.saturating_sub(1));
        r.ids.retain(|_, seq| *seq < plan.from_seq);
        r.context.retain(|seq| *seq < plan.from_seq);
        r.session.state = RewindPlan::state(
            &r.initial_state,
            r.archive.values().filter_map(|e| e.state_delta.as_ref()),
        );
        r.session.event_count = u64::try_from(r.archive.len()).unwrap_or(u64::MAX);
        r.session.context_tokens = r.context_tokens();
        r.session.version = plan.version;
        r.session.updated_at = r.session.updated_at.max(now);
        Ok(RewindOutcome {
            version: plan.version,
            removed: removed.len(),
        })
    }

    async fn search(&self, query: &SearchQuery) -> Result<Page<SearchHit>> {
        query.check(&self.limits)?;
        self.capabilities().check_search(query)?;
        let parsed = query.parsed()?;
        let now = self.now();
        let inner = self.read_indexed(&query.scope);
        let records: Vec<&Record> = match &query.scope {
            SearchScope::Session(id) => vec![live(&inner, &SessionId::new(id.as_str())?, now)?],
            SearchScope::User { app, user_id } => inner
                .sessions
                .values()
                .filter(|r| r.is_owned_by(app, user_id) && !r.session.is_expired_at(now))
                .collect(),
        };
        let limit = read_limit(query, records.len());
        let (in_order, enough) = (limit.is_some(), limit.unwrap_or(usize::MAX));
        let mut matches = Vec::new();
        let mut complete = true;
        for r in &records {
            let candidates: Box<dyn Iterator<Item = &SessionEvent>> =
                match r.index.candidates(&parsed) {
                    Some(seqs) => Box::new(seqs.into_iter().filter_map(|s| r.archive.get(&s))),
                    None => Box::new(r.archive.values()),
                };
            let mut found = candidates.filter(|e| query.admits(&parsed, e));
            matches.extend(found.by_ref().take(enough).cloned());
            complete &= found.next().is_none();
        }
        if in_order {
            return Ok(page_of_first_matches(query, &parsed, matches, complete));
        }
        let stats = (query.mode == SearchMode::Ranked).then(|| RankStats {
            docs: records.iter().map(|r| r.session.event_count).sum(),
            doc_freq: parsed
                .include()
                .iter()
                .map(|t| records.iter().filter_map(|r| r.index.doc_freq(t)).sum())
                .collect(),
        });
        Ok(page_of_matches(query, &parsed, matches, stats.as_ref()))
    }

    async fn export_session(&self, id: &SessionId) -> Result<SessionDump> {
        let inner = self.inner.read();
        let r = live(&inner, id, self.now())?;
        let shared = shared_of(&inner, &r.session.app, &r.session.user_id);
        Ok(SessionDump {
            session: r.session.clone(),
            initial_state: r.initial_state.clone(),
            last_seq: r.last_seq,
            events: r.archive.values().cloned().collect(),
            context: r.context.clone(),
            shared,
            context_log: r.context_log.changes().to_vec(),
        })
    }

    async fn context_log(&self, id: &SessionId) -> Result<ContextLog> {
        let inner = self.inner.read();
        Ok(live(&inner, id, self.now())?.context_log.clone())
    }

    async fn import_session(&self, dump: SessionDump) -> Result<ImportOutcome> {
        let now = self.now();
        let mut inner = self.inner.write();
        let existing = inner
            .sessions
            .get(dump.session.id.as_str())
            .filter(|r| !r.session.is_expired_at(now))
            .map(|r| r.session.version);
        let Some(plan) = ImportPlan::new(dump, existing, &self.limits)? else {
            return Ok(ImportOutcome::Unchanged);
        };
        let dump = plan.dump;
        let s = &dump.session;
        if existing.is_none() && self.limits.max_user_sessions.is_some() {
            self.limits
                .check_user_sessions(s, live_of(&inner, s, now))?;
        }
        if !dump.shared.app.is_empty() {
            inner
                .app_state
                .insert(s.app.to_string(), dump.shared.app.clone());
        }
        if !dump.shared.user.is_empty() {
            inner.user_state.insert(
                (s.app.to_string(), s.user_id.to_string()),
                dump.shared.user.clone(),
            );
        }
        let ids = dump.events.iter().map(|e| (e.id.clone(), e.seq)).collect();
        let mut index = TrigramIndex::new();
        for e in &dump.events {
            index.add(e.seq, &e.message.search_text());
        }
        let archive = dump.events.into_iter().map(|e| (e.seq, e)).collect();
        let record = Record {
            session: dump.session,
            initial_state: dump.initial_state,
            archive,
            context: dump.context,
            ids,
            last_seq: dump.last_seq,
            index,
            indexed_through: dump.last_seq,
            context_log: ContextLog::new(dump.context_log),
        };
        inner.sessions.insert(record.session.id.to_string(), record);
        Ok(ImportOutcome::Imported)
    }

    async fn shared_state(&self, app: &AppName, user_id: &UserId) -> Result<SharedState> {
        Ok(shared_of(&self.inner.read(), app, user_id))
    }
}

fn shared_of(inner: &Inner, app: &AppName, user_id: &UserId) -> SharedState {
    SharedState {
        app: inner
            .app_state
            .get(app.as_str())
            .cloned()
            .unwrap_or_default(),
        user: inner
            .user_state
            .get(&(app.to_string(), user_id.to_string()))
            .cloned()
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;

    /// The texts of a session's hits for `word`, in seq order.
    async fn found(repo: &InMemoryRepository, id: &SessionId, word: &str) -> Vec<String> {
        let page = repo
            .search(&SearchQuery::in_session(id.as_str(), word))
            .await
            .expect("search");
        let mut hits: Vec<_> = page.items.into_iter().map(|h| h.event).collect();
        hits.sort_by_key(|e| e.seq);
        hits.iter().map(|e| e.message.search_text()).collect()
    }

    /// Appends a user message saying `text`.
    async fn say(repo: &InMemoryRepository, id: &SessionId, text: &str) -> AppendOutcome {
        let events = vec![SessionEvent::new(Message::user(text))];
        repo.append(id, events).await.expect("append")
    }

    #[tokio::test]
    async fn search_indexes_what_was_appended_since_the_last_search_and_not_what_was_rewound() {
        let repo = InMemoryRepository::new();
        let s = repo
            .create(NewSession::new("app", "ada", Utc::now()).expect("new"))
            .await
            .expect("create");
        say(&repo, &s.id, "parcel alpha").await;
        assert_eq!(found(&repo, &s.id, "parcel").await, ["parcel alpha"]);
        // Appended after a search: indexed by the next one.
        let beta = say(&repo, &s.id, "parcel beta").await;
        say(&repo, &s.id, "parcel gamma").await;
        assert_eq!(
            found(&repo, &s.id, "parcel").await,
            ["parcel alpha", "parcel beta", "parcel gamma"]
        );
        // Rewound away, then appended again (before any search): only what stands.
        repo.rewind_to(&s.id, &RewindTo::Seq(beta.seqs[0]))
            .await
            .expect("rewind");
        say(&repo, &s.id, "parcel delta").await;
        assert_eq!(
            found(&repo, &s.id, "parcel").await,
            ["parcel alpha", "parcel delta"]
        );
        assert!(found(&repo, &s.id, "gamma").await.is_empty());
        // A user-wide search indexes the user's sessions too.
        let other = repo
            .create(NewSession::new("app", "ada", Utc::now()).expect("new"))
            .await
            .expect("create");
        say(&repo, &other.id, "parcel epsilon").await;
        let user = SearchQuery::for_user("app", "ada", "epsilon");
        let hits = repo.search(&user).await.expect("search").items;
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].session_id, other.id.as_str());
    }
}
