//! The [`SessionRepository`] of the file store: read the session file under
//! its lock, ask `session_core::plan` for the plan, write the files.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use session_core::plan::{
    self, plan_update, AppendPlan, ContextPlan, CreatePlan, EventBatch, HeadChange, ImportPlan,
    NewEvent, OwnerQuota, RewindPlan, Stored,
};
use session_core::retention::{PrunePlan, Pruned, Standing};
use session_core::state::apply_delta;
use session_core::{
    AppName, AppendOutcome, Capabilities, ContextLog, Erased, EventFilter, EventView,
    ImportOutcome, NewSession, Page, RewindOutcome, RewindTo, SearchHit, SearchQuery, Session,
    SessionDump, SessionEvent, SessionId, SessionQuery, SessionRepository, SessionUpdate,
    SharedDelta, SharedState, UserId,
};

use crate::commit::{self, Commit};
use crate::error::{io_err, Result, BACKEND};
use crate::files::{read_json, sync_dir, to_pretty, write_atomic, Lock};
use crate::format::{count, ContextFile, SessionFile};
use crate::repository::{FsRepository, Inner};
use crate::shared::{self, Write};
use crate::{log, search_index, view};

/// The session file in `dir` (named `what` in errors), if there is one,
/// settled up to the appends committed in its log since it was written.
fn read_settled(dir: &Path, what: &str) -> Result<Option<SessionFile>> {
    let Some(mut file) = read_json::<SessionFile>(&dir.join("session.json"), what)? else {
        return Ok(None);
    };
    file.checkpoint = file.log_bytes;
    commit::settle(dir, &mut file)?;
    Ok(Some(file))
}

/// The owner of a session, whose shared scopes its writes change.
fn owner(s: &Session) -> (&AppName, &UserId) {
    (&s.app, &s.user_id)
}

/// The new events of a plan, in seq order, with their seqs set.
fn numbered<'a>(batch: &'a mut EventBatch, new: &[NewEvent]) -> Vec<&'a SessionEvent> {
    for n in new {
        if let Some(e) = batch.events.get_mut(n.index) {
            e.seq = n.seq;
        }
    }
    let batch: &'a EventBatch = batch;
    new.iter()
        .filter_map(|n| batch.events.get(n.index))
        .collect()
}

/// The new events of a plan as the id index holds them.
fn held(batch: &EventBatch, new: &[NewEvent]) -> Vec<(String, Stored)> {
    new.iter()
        .filter_map(|n| {
            let e = batch.events.get(n.index)?;
            let held = Stored {
                seq: n.seq,
                tokens: e.token_estimate,
            };
            Some((e.id.clone(), held))
        })
        .collect()
}

impl Inner {
    /// The session file in `dir`, if there is one, settled up to the
    /// appends committed in its log since it was written.
    fn read_file(dir: &Path, id: &SessionId) -> Result<Option<SessionFile>> {
        read_settled(dir, &format!("session {id}"))
    }

    /// Rewrites the session file in `dir` atomically.
    fn save(&self, dir: &Path, file: &SessionFile) -> Result<()> {
        write_atomic(&dir.join("session.json"), &to_pretty(file)?, self.sync)
    }

    /// A live session's directory and file, for reading.
    pub(crate) fn live(&self, id: &SessionId) -> Result<(PathBuf, SessionFile)> {
        let dir = self.layout.session_dir(id)?;
        let found = Self::read_file(&dir, id)?.map(SessionFile::with_expiry);
        let file = plan::readable(found, id, self.now())?;
        Ok((dir, file))
    }

    /// Locks a session for writing and brings its log in line with its file:
    /// its directory, its file, and the lock, held until dropped.
    fn writable(&self, id: &SessionId) -> Result<(PathBuf, SessionFile, Lock)> {
        let dir = self.layout.session_dir(id)?;
        let found = if dir.is_dir() {
            let lock = Lock::exclusive(&dir.join(".lock"))?;
            Self::read_file(&dir, id)?.map(|f| {
                let (file, at) = f.with_expiry();
                ((file, lock), at)
            })
        } else {
            None
        };
        let (file, lock) = plan::writable(found, id, self.now())?;
        let file = log::recover(&dir, file, self.sync)?;
        Ok((dir, file, lock))
    }

    /// Sets the version and the activity time a write leaves.
    fn stamp(&self, file: &mut SessionFile, version: u64) {
        file.session.version = version;
        file.session.updated_at = file.session.updated_at.max(self.now());
    }

    /// Ends a write: stamps the file and saves it (the commit point).
    fn commit(&self, dir: &Path, file: &mut SessionFile, version: u64) -> Result<()> {
        self.stamp(file, version);
        self.save(dir, file)
    }

    /// Replaces the log of the session in `dir` with `kept` (a rewind, a
    /// prune): a new generation, and the saved search index discarded (it
    /// covers events that left). The session file is first saved at the
    /// settled end of the old log when appends committed only by their log
    /// lines lie past it: the new log has no commit lines, so a crash
    /// before the file is saved again must find a file that covers at least
    /// what the new log holds (its recount then keeps every whole record).
    fn rewrite_log(&self, dir: &Path, file: &mut SessionFile, kept: &[SessionEvent]) -> Result<()> {
        if file.log_bytes != file.checkpoint {
            self.save(dir, file)?;
            file.checkpoint = file.log_bytes;
        }
        let lines = log::encode(kept)?;
        write_atomic(&log::path(dir), &lines, self.sync)?;
        file.log_bytes = count(lines.len());
        file.log_generation = crate::format::fresh_generation();
        search_index::discard(dir)
    }

    /// Removes a session directory: renamed away first, so it disappears at once.
    fn remove(&self, id: &SessionId, dir: &Path) -> Result<()> {
        let trash = self.layout.trash_dir(id);
        fs::rename(dir, &trash).map_err(|e| io_err(dir, e))?;
        fs::remove_dir_all(&trash).map_err(|e| io_err(&trash, e))?;
        self.ids.lock().forget(id);
        self.search_indexes.lock().forget(id);
        Ok(())
    }

    fn create(&self, new: NewSession) -> Result<Session> {
        let now = self.now();
        let id = new.id.clone();
        let dir = self.layout.session_dir(&id)?;
        let _create = Lock::exclusive(&self.layout.create_lock())?;
        let existing = Self::read_file(&dir, &id)?.map(|f| f.session.expires_at);
        let plan = CreatePlan::new(new, existing, now)?;
        self.check_owner_quota(&plan.session, now)?;
        if dir.exists() {
            // An expired session, or a create that crashed before writing its session file.
            self.remove(&id, &dir)?;
        }
        let staging = self.layout.staging_dir("new", &id);
        let _ = fs::remove_dir_all(&staging);
        fs::create_dir(&staging).map_err(|e| io_err(&staging, e))?;
        fs::File::create(log::path(&staging)).map_err(|e| io_err(&staging, e))?;
        let file = SessionFile {
            session: plan.session,
            initial_state: plan.initial_state,
            last_seq: 0,
            log_bytes: 0,
            context: ContextFile::default(),
            context_changes: Vec::new(),
            log_generation: crate::format::fresh_generation(),
            checkpoint: 0,
        };
        self.save(&staging, &file)?;
        fs::rename(&staging, &dir).map_err(|e| io_err(&dir, e))?;
        if self.sync {
            sync_dir(&self.layout.sessions_dir())?;
        }
        shared::write(
            &self.layout,
            self.sync,
            owner(&file.session),
            &plan.shared,
            Write::Merge,
        )?;
        Ok(file.session)
    }

    fn append(&self, id: &SessionId, mut batch: EventBatch) -> Result<AppendOutcome> {
        let (dir, mut file, _lock) = self.writable(id)?;
        let mut ids = self.ids.lock();
        let stored = ids.stored(&dir, id, log::Extent::of(&file), &batch)?;
        let plan = AppendPlan::new(&file.head(), &batch, &stored)?;
        if plan.is_noop() {
            return Ok(plan.outcome());
        }
        let lines = log::encode(numbered(&mut batch, &plan.new))?;
        let past_checkpoint = file.log_bytes.saturating_sub(file.checkpoint);
        if plan.state.session.is_empty() && past_checkpoint < commit::CHECKPOINT_BYTES {
            // Committed by its own last line: one log write, one fsync.
            advance(&mut file, &plan.head_change());
            self.stamp(&mut file, plan.version);
            let lines = Commit::of(&file).seal(lines)?;
            let written = log::append_or_undo(&dir, &lines, self.sync, file.log_bytes)?;
            file.log_bytes = file.log_bytes.saturating_add(written);
        } else {
            // Session state changes, or a checkpoint is due: the session file commits.
            let written = log::append(&dir, &lines, self.sync)?;
            file.log_bytes = file.log_bytes.saturating_add(written);
            advance(&mut file, &plan.head_change());
            self.commit(&dir, &mut file, plan.version)?;
        }
        ids.extend(id, log::Extent::of(&file), held(&batch, &plan.new));
        drop(ids);
        shared::write(
            &self.layout,
            self.sync,
            owner(&file.session),
            &plan.state.shared,
            Write::Merge,
        )?;
        Ok(plan.outcome())
    }

    fn replace_context(
        &self,
        id: &SessionId,
        mut batch: EventBatch,
        expected: u64,
    ) -> Result<bool> {
        let (dir, mut file, _lock) = self.writable(id)?;
        let stored = log::stored(&dir, &file, &batch)?;
        let Some(plan) = ContextPlan::new(&file.head(), expected, &batch, &stored)? else {
            return Ok(false);
        };
        let lines = log::encode(numbered(&mut batch, &plan.new))?;
        let written = log::append(&dir, &lines, self.sync)?;
        file.log_bytes = file.log_bytes.saturating_add(written);
        advance(&mut file, &plan.head_change());
        file.context_changes.push(plan.change(self.now()));
        file.context = ContextFile {
            seqs: plan.context,
            through: plan.last_seq,
        };
        self.commit(&dir, &mut file, plan.version)?;
        self.ids.lock().forget(id);
        self.search_indexes.lock().forget(id);
        shared::write(
            &self.layout,
            self.sync,
            owner(&file.session),
            &plan.state.shared,
            Write::Merge,
        )?;
        Ok(true)
    }

    fn rewind(&self, id: &SessionId, to: &RewindTo) -> Result<RewindOutcome> {
        let (dir, mut file, _lock) = self.writable(id)?;
        let archive = log::archive(&dir, &file)?;
        let first = to.invocation().and_then(|invocation| {
            archive
                .iter()
                .find(|e| e.invocation_id.as_deref() == Some(invocation.as_str()))
                .map(|e| e.seq)
        });
        let plan = RewindPlan::new(&file.head(), to, first)?;
        let (mut kept, removed): (Vec<SessionEvent>, Vec<SessionEvent>) =
            archive.into_iter().partition(|e| e.seq < plan.from_seq);
        for e in &mut kept {
            e.session_id.clear();
        }
        let kept_bytes = SessionEvent::stored_bytes_of(&kept)?;
        self.rewrite_log(&dir, &mut file, &kept)?;
        file.context.seqs.retain(|s| *s < plan.from_seq);
        let seqs: Vec<u64> = kept.iter().map(|e| e.seq).collect();
        let context: HashSet<u64> = file.context.resolve(&seqs).into_iter().collect();
        let s = &mut file.session;
        s.state = RewindPlan::state(
            &file.initial_state,
            kept.iter().filter_map(|e| e.state_delta.as_ref()),
        );
        s.event_count = count(kept.len());
        s.event_bytes = kept_bytes;
        s.context_tokens = kept
            .iter()
            .filter(|e| context.contains(&e.seq))
            .map(|e| u64::from(e.token_estimate))
            .sum();
        self.commit(&dir, &mut file, plan.version)?;
        self.ids.lock().forget(id);
        self.search_indexes.lock().forget(id);
        Ok(RewindOutcome {
            version: plan.version,
            removed: removed.len(),
        })
    }

    fn prune(&self, id: &SessionId, seqs: &[u64], expected: u64) -> Result<Option<Pruned>> {
        let (dir, mut file, _lock) = self.writable(id)?;
        let archive = log::archive(&dir, &file)?;
        let archived: HashMap<u64, &SessionEvent> = archive.iter().map(|e| (e.seq, e)).collect();
        let through = file.context.through;
        let replaced: HashSet<u64> = file.context.seqs.iter().copied().collect();
        let standing = |seq| match archived.get(&seq) {
            Some(e) => Standing::of_event(e, seq > through || replaced.contains(&seq)),
            None => Standing::Absent,
        };
        let Some(plan) = PrunePlan::new(&file.head(), expected, seqs, standing)? else {
            return Ok(None);
        };
        let gone: HashSet<u64> = plan.seqs.iter().copied().collect();
        let held = archive.len();
        let mut kept: Vec<SessionEvent> = archive
            .into_iter()
            .filter(|e| !gone.contains(&e.seq))
            .collect();
        let removed = held.saturating_sub(kept.len());
        let kept_bytes = SessionEvent::stored_bytes_of(&kept)?;
        if removed > 0 {
            for e in &mut kept {
                e.session_id.clear();
            }
            self.rewrite_log(&dir, &mut file, &kept)?;
        }
        file.session.event_count = count(kept.len());
        file.session.event_bytes = kept_bytes;
        file.session.version = plan.version;
        self.save(&dir, &file)?;
        self.ids.lock().forget(id);
        self.search_indexes.lock().forget(id);
        Ok(Some(Pruned {
            removed: count(removed),
            version: plan.version,
        }))
    }

    fn update(&self, id: &SessionId, update: SessionUpdate) -> Result<Session> {
        let now = self.now();
        update.validate(now)?;
        let (dir, mut file, _lock) = self.writable(id)?;
        plan_update(&file.head(), &update)?;
        update.apply_to(&mut file.session, now)?;
        self.save(&dir, &file)?;
        Ok(file.session)
    }

    fn delete(&self, id: &SessionId) -> Result<bool> {
        let dir = self.layout.session_dir(id)?;
        if !dir.is_dir() {
            return Ok(false);
        }
        let _lock = Lock::exclusive(&dir.join(".lock"))?;
        self.remove(id, &dir)?;
        Ok(true)
    }

    fn import(&self, dump: SessionDump) -> Result<ImportOutcome> {
        let id = dump.session.id.clone();
        let dir = self.layout.session_dir(&id)?;
        let _create = Lock::exclusive(&self.layout.create_lock())?;
        let now = self.now();
        let live_version = Self::read_file(&dir, &id)?
            .filter(|f| !f.session.is_expired_at(now))
            .map(|f| f.session.version);
        let Some(plan) = ImportPlan::new(dump, live_version, &self.limits)? else {
            return Ok(ImportOutcome::Unchanged);
        };
        if live_version.is_none() {
            self.check_owner_quota(&plan.dump.session, now)?;
        }
        if dir.exists() {
            let _lock = Lock::exclusive(&dir.join(".lock"))?;
            self.remove(&id, &dir)?;
        }
        let dump = plan.dump;
        let staging = self.layout.staging_dir("import", &id);
        let _ = fs::remove_dir_all(&staging);
        fs::create_dir(&staging).map_err(|e| io_err(&staging, e))?;
        let log_bytes = log::append(&staging, &log::encode(&dump.events)?, self.sync)?;
        let file = SessionFile {
            session: dump.session,
            initial_state: dump.initial_state,
            last_seq: dump.last_seq,
            log_bytes,
            context: ContextFile {
                seqs: dump.context,
                through: dump.last_seq,
            },
            context_changes: dump.context_log,
            log_generation: crate::format::fresh_generation(),
            checkpoint: 0,
        };
        self.save(&staging, &file)?;
        fs::rename(&staging, &dir).map_err(|e| io_err(&dir, e))?;
        if self.sync {
            sync_dir(&self.layout.sessions_dir())?;
        }
        let scopes = SharedDelta {
            app: dump.shared.app,
            user: dump.shared.user,
        };
        shared::write(
            &self.layout,
            self.sync,
            owner(&file.session),
            &scopes,
            Write::Replace,
        )?;
        Ok(ImportOutcome::Imported)
    }

    /// Every session file, each read on its own: a corrupt one is reported
    /// by its directory name and never hides the others.
    fn all_sessions(&self) -> Result<Vec<(String, Result<SessionFile>)>> {
        let dir = self.layout.sessions_dir();
        let mut out = Vec::new();
        for entry in fs::read_dir(&dir).map_err(|e| io_err(&dir, e))? {
            let entry = entry.map_err(|e| io_err(&dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with('.') || !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            match read_settled(&entry.path(), &format!("session {name}")) {
                Ok(Some(f)) => out.push((name.to_owned(), Ok(f))),
                Ok(None) => {}
                Err(e) => out.push((name.to_owned(), Err(e))),
            }
        }
        Ok(out)
    }

    /// The readable session files; each unreadable one is logged and left out.
    pub(crate) fn readable_sessions(&self) -> Result<Vec<SessionFile>> {
        Ok(Page::from_overfetch_decoded(self.all_sessions()?, 0, usize::MAX).items)
    }

    fn list(&self, q: &SessionQuery) -> Result<Page<Session>> {
        let now = self.now();
        let mut found: Vec<Session> = Vec::new();
        let mut unreadable = Vec::new();
        for (name, file) in self.all_sessions()? {
            match file {
                Ok(f) if !f.session.is_expired_at(now) && q.matches(&f.session) => {
                    found.push(f.session);
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(id = %name, kind = ?e.kind(), "unreadable session file");
                    unreadable.push(name);
                }
            }
        }
        found.sort_by(|a, b| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        let mut page = Page::paginate(found, q.page, q.page_size);
        // An unreadable file's owner is unknown: it is named only in an
        // operator's unfiltered listing, so no owner sees another's ids.
        if q.page == 0 && q.is_unfiltered() {
            unreadable.sort();
            page.unreadable = unreadable;
        }
        Ok(page)
    }

    /// The sessions-per-user quota for a new `session`: its owner's live
    /// sessions, counted under the create lock every create and import holds.
    fn check_owner_quota(&self, session: &Session, now: DateTime<Utc>) -> Result<()> {
        OwnerQuota::check_counted(&self.limits, session, || {
            let live = self
                .readable_sessions()?
                .iter()
                .filter(|f| f.session.counts_for_owner_of(session, now))
                .count();
            Ok(count(live))
        })
    }

    fn erase_user(&self, app: &AppName, user_id: &UserId) -> Result<Erased> {
        let mut erased = Erased::default();
        for f in self.readable_sessions()? {
            if f.session.app != *app || f.session.user_id != *user_id {
                continue;
            }
            let dir = self.layout.session_dir(&f.session.id)?;
            let _lock = Lock::exclusive(&dir.join(".lock"))?;
            self.remove(&f.session.id, &dir)?;
            erased.sessions = erased.sessions.saturating_add(1);
            erased.events = erased.events.saturating_add(f.session.event_count);
        }
        let path = self.layout.user_state(app, user_id)?;
        let _shared = Lock::exclusive(&self.layout.shared_lock())?;
        erased.user_state = match std::fs::remove_file(&path) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(io_err(&path, e)),
        };
        Ok(erased)
    }

    fn purge_expired(&self, now: DateTime<Utc>) -> Result<u64> {
        let mut n = 0;
        for f in self.readable_sessions()? {
            if f.session.is_expired_at(now) {
                let dir = self.layout.session_dir(&f.session.id)?;
                let _lock = Lock::exclusive(&dir.join(".lock"))?;
                self.remove(&f.session.id, &dir)?;
                n += 1;
            }
        }
        Ok(n)
    }

    fn events(&self, id: &SessionId, filter: &EventFilter) -> Result<Page<SessionEvent>> {
        let (dir, file) = self.live(id)?;
        let mut page = view::page(&dir, &file, filter)?;
        if filter.view == EventView::Archive {
            ContextLog::checked(id, file.context_changes)?.annotate(&mut page.items);
        }
        Ok(page)
    }

    fn export(&self, id: &SessionId) -> Result<SessionDump> {
        let (dir, file) = self.live(id)?;
        let events = log::archive(&dir, &file)?;
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        let (app, user) = owner(&file.session);
        Ok(SessionDump {
            context: file.context.resolve(&seqs),
            shared: shared::load(&self.layout, app, user)?,
            initial_state: file.initial_state,
            last_seq: file.last_seq,
            events,
            context_log: ContextLog::checked(id, file.context_changes)?.into_changes(),
            session: file.session,
        })
    }
}

/// Writes what an append or a context replace changes in the session's
/// head into its file (the log's extent and the context aside).
fn advance(file: &mut SessionFile, change: &HeadChange<'_>) {
    file.last_seq = change.last_seq;
    let s = &mut file.session;
    s.event_count = s.event_count.saturating_add(change.added_count());
    s.event_bytes = s.event_bytes.saturating_add(change.added_bytes);
    s.context_tokens = change.context_tokens.after(s.context_tokens);
    apply_delta(&mut s.state, &change.state.session);
}

#[async_trait]
impl SessionRepository for FsRepository {
    fn capabilities(&self) -> Capabilities {
        Capabilities::basic(BACKEND)
            .with_durable()
            .with_multi_process()
            .with_ranked_search()
    }

    async fn create(&self, session: NewSession) -> Result<Session> {
        self.blocking(move |i| i.create(session)).await
    }

    async fn get(&self, id: &SessionId) -> Result<Session> {
        let id = id.clone();
        self.blocking(move |i| i.live(&id).map(|(_, f)| f.session))
            .await
    }

    async fn update(&self, id: &SessionId, update: SessionUpdate) -> Result<Session> {
        let id = id.clone();
        self.blocking(move |i| i.update(&id, update)).await
    }

    async fn delete(&self, id: &SessionId) -> Result<bool> {
        let id = id.clone();
        self.blocking(move |i| i.delete(&id)).await
    }

    async fn list(&self, query: &SessionQuery) -> Result<Page<Session>> {
        query.check(&self.inner.limits)?;
        let query = query.clone();
        self.blocking(move |i| i.list(&query)).await
    }

    async fn purge_expired(&self, now: DateTime<Utc>) -> Result<u64> {
        self.blocking(move |i| i.purge_expired(now)).await
    }

    async fn erase_user(&self, app: &AppName, user_id: &UserId) -> Result<Erased> {
        let (app, user) = (app.clone(), user_id.clone());
        self.blocking(move |i| i.erase_user(&app, &user)).await
    }

    async fn prune_events(
        &self,
        id: &SessionId,
        seqs: &[u64],
        expected_version: u64,
    ) -> Result<Option<Pruned>> {
        let (id, seqs) = (id.clone(), seqs.to_vec());
        self.blocking(move |i| i.prune(&id, &seqs, expected_version))
            .await
    }

    async fn append(&self, id: &SessionId, events: Vec<SessionEvent>) -> Result<AppendOutcome> {
        let batch = EventBatch::new(events, &self.inner.limits)?;
        let id = id.clone();
        self.blocking(move |i| i.append(&id, batch)).await
    }

    async fn events(&self, id: &SessionId, filter: &EventFilter) -> Result<Page<SessionEvent>> {
        filter.check(&self.inner.limits)?;
        let (id, filter) = (id.clone(), filter.clone());
        self.blocking(move |i| i.events(&id, &filter)).await
    }

    async fn event_version(&self, id: &SessionId) -> Result<u64> {
        let id = id.clone();
        self.blocking(move |i| i.live(&id).map(|(_, f)| f.session.version))
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
        self.blocking(move |i| i.replace_context(&id, batch, expected_version))
            .await
    }

    async fn rewind_to(&self, id: &SessionId, to: &RewindTo) -> Result<RewindOutcome> {
        let (id, to) = (id.clone(), to.clone());
        self.blocking(move |i| i.rewind(&id, &to)).await
    }

    async fn search(&self, query: &SearchQuery) -> Result<Page<SearchHit>> {
        query.check(&self.inner.limits)?;
        self.capabilities().check_search(query)?;
        let query = query.clone();
        self.blocking(move |i| i.search(&query)).await
    }

    async fn shared_state(&self, app: &AppName, user_id: &UserId) -> Result<SharedState> {
        let (app, user) = (app.clone(), user_id.clone());
        self.blocking(move |i| shared::load(&i.layout, &app, &user))
            .await
    }

    async fn export_session(&self, id: &SessionId) -> Result<SessionDump> {
        let id = id.clone();
        self.blocking(move |i| i.export(&id)).await
    }

    async fn context_log(&self, id: &SessionId) -> Result<ContextLog> {
        let id = id.clone();
        self.blocking(move |i| {
            let (_, file) = i.live(&id)?;
            ContextLog::checked(&id, file.context_changes)
        })
        .await
    }

    async fn import_session(&self, dump: SessionDump) -> Result<ImportOutcome> {
        self.blocking(move |i| i.import(dump)).await
    }
}
