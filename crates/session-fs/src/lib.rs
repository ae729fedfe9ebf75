#![doc = include_str!("../README.md")]

mod store;

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use session_core::state::{apply_delta, replay_session_state, ScopedDelta, SharedDelta};
use session_core::{
    check_session_id, check_unique_ids, contains_folded, fold_case, next_seq, next_version,
    prepare_events, system_clock, validate_id, AppendOutcome, Capabilities, EventFilter, EventView,
    ImportOutcome, Limits, NewSession, Page, RewindOutcome, SearchHit, SearchMode, SearchQuery,
    SearchScope, Session, SessionDump, SessionError, SessionEvent, SessionQuery, SessionRepository,
    SessionUpdate, SharedClock, SharedState, StateMap,
};

use crate::store::{
    io_err, read_json, recover, scan_log, to_pretty, write_atomic, ContextFile, IdCache, Layout,
    Lock, Result, SessionFile,
};

pub(crate) const BACKEND: &str = "fs";

/// A [`SessionRepository`] in plain files under one directory:
/// `sessions/<id>/session.json` (pretty JSON) and
/// `sessions/<id>/events.jsonl` (one event per line), plus
/// `shared/app/<app>.json` and `shared/user/<app>/<user>.json`.
///
/// Writes take an advisory lock per session (so several processes can share
/// the directory), rewrite whole files atomically (temp file, fsync, rename,
/// fsync of the directory) and fsync each append to the log (configurable).
/// Every operation runs on tokio's blocking pool.
#[derive(Clone)]
pub struct FsRepository {
    inner: Arc<Inner>,
}

struct Inner {
    layout: Layout,
    sync: bool,
    clock: SharedClock,
    limits: Limits,
    ids: Mutex<IdCache>,
}

impl std::fmt::Debug for FsRepository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FsRepository")
            .field("root", &self.inner.layout.root)
            .field("sync", &self.inner.sync)
            .finish_non_exhaustive()
    }
}

/// Options for opening an [`FsRepository`].
#[derive(Debug, Clone)]
pub struct FsRepositoryBuilder {
    root: PathBuf,
    sync: bool,
    clock: SharedClock,
    limits: Limits,
}

impl FsRepositoryBuilder {
    /// Whether each write is fsynced before it is acknowledged (default true).
    /// Off, a process crash still loses nothing acknowledged; a power loss may.
    pub fn sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    /// The clock for expiry and activity times.
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// Event and page size limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Creates the directory layout if needed and opens the store.
    pub async fn open(self) -> session_core::Result<FsRepository> {
        tokio::task::spawn_blocking(move || {
            Ok(FsRepository {
                inner: Arc::new(Inner {
                    layout: Layout::new(&self.root)?,
                    sync: self.sync,
                    clock: self.clock,
                    limits: self.limits,
                    ids: Mutex::new(IdCache::default()),
                }),
            })
        })
        .await
        .map_err(|e| SessionError::backend(BACKEND, e))?
    }
}

impl FsRepository {
    /// Options for a store rooted at `root`.
    pub fn builder(root: impl AsRef<Path>) -> FsRepositoryBuilder {
        FsRepositoryBuilder {
            root: root.as_ref().to_path_buf(),
            sync: true,
            clock: system_clock(),
            limits: Limits::default(),
        }
    }

    /// Opens a store rooted at `root` with default options.
    pub async fn open(root: impl AsRef<Path>) -> session_core::Result<Self> {
        Self::builder(root).open().await
    }

    /// Opens the store an `fs://path` URL names.
    pub async fn from_url(url: &str) -> session_core::Result<Self> {
        let path = url
            .strip_prefix("fs://")
            .or_else(|| url.strip_prefix("file://"))
            .ok_or_else(|| {
                SessionError::invalid("store URL", format!("{url:?} is not fs://<directory>"))
            })?;
        let (path, _) = session_core::split_url_query(path, "fs", &[])?;
        if path.is_empty() {
            return Err(SessionError::invalid(
                "store URL",
                format!("{url:?} is not fs://<directory>"),
            ));
        }
        Self::open(path).await
    }

    async fn blocking<T, F>(&self, f: F) -> session_core::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> session_core::Result<T> + Send + 'static,
    {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || f(&inner))
            .await
            .map_err(|e| SessionError::backend(BACKEND, e))?
    }
}

/// A length as a stored counter.
fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

fn expired(s: &Session, now: DateTime<Utc>) -> bool {
    s.is_expired_at(now)
}

impl Inner {
    fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    fn load(&self, id: &str) -> Result<Option<(PathBuf, SessionFile)>> {
        let dir = self.layout.session_dir(id)?;
        Ok(
            read_json::<SessionFile>(&dir.join("session.json"), &format!("session {id}"))?
                .map(|f| (dir, f)),
        )
    }

    /// A live session's file for reading.
    fn live(&self, id: &str) -> Result<(PathBuf, SessionFile)> {
        match self.load(id)? {
            Some((dir, f)) if !expired(&f.session, self.now()) => Ok((dir, f)),
            _ => Err(SessionError::session_not_found(id)),
        }
    }

    /// Locks a session for writing and brings its log in line with its file.
    fn writable(&self, id: &str) -> Result<(PathBuf, SessionFile, Lock)> {
        let dir = self.layout.session_dir(id)?;
        if !dir.is_dir() {
            return Err(SessionError::session_not_found(id));
        }
        let lock = Lock::exclusive(&dir.join(".lock"))?;
        let Some(file) =
            read_json::<SessionFile>(&dir.join("session.json"), &format!("session {id}"))?
        else {
            return Err(SessionError::session_not_found(id));
        };
        if expired(&file.session, self.now()) {
            return Err(SessionError::Expired { id: id.to_owned() });
        }
        let file = recover(&dir, file, self.sync)?;
        Ok((dir, file, lock))
    }

    fn save(&self, dir: &Path, file: &SessionFile) -> Result<()> {
        write_atomic(&dir.join("session.json"), &to_pretty(file)?, self.sync)
    }

    fn archive(dir: &Path, file: &SessionFile) -> Result<Vec<SessionEvent>> {
        Ok(scan_log(
            &dir.join("events.jsonl"),
            file.log_bytes,
            &file.session.id,
            Some,
        )?
        .events)
    }

    /// Applies `app:` and `user:` changes under the store-wide shared-state lock.
    fn write_shared(
        &self,
        app: &str,
        user: &str,
        app_delta: &StateMap,
        user_delta: &StateMap,
        replace: bool,
    ) -> Result<()> {
        if app_delta.is_empty() && user_delta.is_empty() {
            return Ok(());
        }
        let _lock = Lock::exclusive(&self.layout.shared_lock())?;
        for (path, delta) in [
            (self.layout.app_state(app)?, app_delta),
            (self.layout.user_state(app, user)?, user_delta),
        ] {
            if delta.is_empty() {
                continue;
            }
            let mut state = if replace {
                StateMap::new()
            } else {
                store::read_shared(&path)?
            };
            apply_delta(&mut state, delta);
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent).map_err(|e| io_err(parent.display(), e))?;
            }
            write_atomic(&path, &to_pretty(&state)?, self.sync)?;
        }
        Ok(())
    }

    /// Appends new events to the log (after the caller checked ids); returns bytes written.
    fn write_events(&self, dir: &Path, events: &[SessionEvent]) -> Result<u64> {
        if events.is_empty() {
            return Ok(0);
        }
        let mut buf = Vec::new();
        for e in events {
            let mut stored = e.clone();
            stored.session_id.clear();
            serde_json::to_writer(&mut buf, &stored)
                .map_err(|err| SessionError::serialization(format!("event {}", e.id), err))?;
            buf.push(b'\n');
        }
        let log = dir.join("events.jsonl");
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| io_err(log.display(), e))?;
        f.write_all(&buf).map_err(|e| io_err(log.display(), e))?;
        if self.sync {
            f.sync_data().map_err(|e| io_err(log.display(), e))?;
        }
        Ok(count(buf.len()))
    }

    fn create(&self, new: NewSession) -> Result<Session> {
        let now = self.now();
        new.validate(now)?;
        let dir = self.layout.session_dir(&new.id)?;
        let _create = Lock::exclusive(&self.layout.root.join(".create.lock"))?;
        if let Some((_, existing)) = self.load(&new.id)? {
            if !expired(&existing.session, now) {
                return Err(SessionError::AlreadyExists {
                    what: "session",
                    id: new.id,
                });
            }
            self.remove(&new.id, &dir)?;
        } else if dir.exists() {
            // A create that crashed before writing its session file.
            self.remove(&new.id, &dir)?;
        }
        let split = ScopedDelta::split(&new.state);
        let session = new.to_session(now);
        let staging =
            self.layout
                .sessions_dir()
                .join(format!(".new-{}-{}", new.id, std::process::id()));
        let _ = fs::remove_dir_all(&staging);
        fs::create_dir(&staging).map_err(|e| io_err(staging.display(), e))?;
        fs::File::create(staging.join("events.jsonl")).map_err(|e| io_err(staging.display(), e))?;
        let file = SessionFile {
            session: session.clone(),
            initial_state: new.state,
            last_seq: 0,
            log_bytes: 0,
            context: ContextFile::default(),
        };
        write_atomic(&staging.join("session.json"), &to_pretty(&file)?, self.sync)?;
        fs::rename(&staging, &dir).map_err(|e| io_err(dir.display(), e))?;
        if self.sync {
            store::sync_dir(&self.layout.sessions_dir())?;
        }
        self.write_shared(
            &session.app,
            &session.user_id,
            &split.app,
            &split.user,
            false,
        )?;
        Ok(session)
    }

    /// Removes a session directory: renamed away first, so it disappears at once.
    fn remove(&self, id: &str, dir: &Path) -> Result<()> {
        let trash = self
            .layout
            .sessions_dir()
            .join(format!(".deleted-{id}-{}", uuid_like()));
        fs::rename(dir, &trash).map_err(|e| io_err(dir.display(), e))?;
        fs::remove_dir_all(&trash).map_err(|e| io_err(trash.display(), e))?;
        self.ids.lock().forget(id);
        Ok(())
    }

    fn append(&self, id: &str, events: Vec<SessionEvent>) -> Result<AppendOutcome> {
        let (dir, mut file, _lock) = self.writable(id)?;
        let mut cache = self.ids.lock();
        let ids = cache.ids(&dir, id, file.log_bytes)?;
        let mut seqs = Vec::with_capacity(events.len());
        let mut fresh: Vec<SessionEvent> = Vec::new();
        let mut batch: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
        let mut shared = SharedDelta::default();
        let mut tokens = 0u64;
        for mut e in events {
            if let Some(&seq) = ids.get(&e.id).or_else(|| batch.get(&e.id)) {
                seqs.push(seq);
                continue;
            }
            // Nothing is written before the loop ends: an error leaves the store as it was.
            file.last_seq = next_seq(file.last_seq)?;
            e.seq = file.last_seq;
            if let Some(d) = &e.state_delta {
                shared.apply_event(&mut file.session.state, d);
            }
            tokens = tokens.saturating_add(u64::from(e.token_estimate));
            batch.insert(e.id.clone(), e.seq);
            seqs.push(e.seq);
            fresh.push(e);
        }
        if !fresh.is_empty() {
            let version = next_version(file.session.version)?;
            let bytes = self.write_events(&dir, &fresh)?;
            file.log_bytes = file.log_bytes.saturating_add(bytes);
            file.session.event_count = file.session.event_count.saturating_add(count(fresh.len()));
            file.session.context_tokens = file.session.context_tokens.saturating_add(tokens);
            file.session.version = version;
            file.session.updated_at = file.session.updated_at.max(self.now());
            self.save(&dir, &file)?;
            cache.extend(id, file.log_bytes, batch);
            drop(cache);
            self.write_shared(
                &file.session.app,
                &file.session.user_id,
                &shared.app,
                &shared.user,
                false,
            )?;
        }
        Ok(AppendOutcome {
            version: file.session.version,
            seqs,
            written: fresh.len(),
        })
    }

    fn replace_context(&self, id: &str, events: Vec<SessionEvent>, expected: u64) -> Result<bool> {
        let (dir, mut file, _lock) = self.writable(id)?;
        if file.session.version != expected {
            return Ok(false);
        }
        let version = next_version(file.session.version)?;
        let archive = Self::archive(&dir, &file)?;
        let known: std::collections::HashMap<&str, u64> =
            archive.iter().map(|e| (e.id.as_str(), e.seq)).collect();
        let mut context = Vec::with_capacity(events.len());
        let mut fresh = Vec::new();
        let mut shared = SharedDelta::default();
        for mut e in events {
            if let Some(&seq) = known.get(e.id.as_str()) {
                context.push(seq);
                continue;
            }
            file.last_seq = next_seq(file.last_seq)?;
            e.seq = file.last_seq;
            if let Some(d) = &e.state_delta {
                shared.apply_event(&mut file.session.state, d);
            }
            context.push(e.seq);
            fresh.push(e);
        }
        let bytes = self.write_events(&dir, &fresh)?;
        let tokens: std::collections::HashMap<u64, u64> = archive
            .iter()
            .chain(fresh.iter())
            .map(|e| (e.seq, u64::from(e.token_estimate)))
            .collect();
        file.session.context_tokens = context.iter().filter_map(|s| tokens.get(s)).sum();
        file.context = ContextFile {
            seqs: context,
            through: file.last_seq,
        };
        file.log_bytes = file.log_bytes.saturating_add(bytes);
        file.session.event_count = file.session.event_count.saturating_add(count(fresh.len()));
        file.session.version = version;
        file.session.updated_at = file.session.updated_at.max(self.now());
        self.save(&dir, &file)?;
        self.ids.lock().forget(id);
        self.write_shared(
            &file.session.app,
            &file.session.user_id,
            &shared.app,
            &shared.user,
            false,
        )?;
        Ok(true)
    }

    fn rewind(&self, id: &str, invocation: &str) -> Result<RewindOutcome> {
        let (dir, mut file, _lock) = self.writable(id)?;
        let archive = Self::archive(&dir, &file)?;
        let Some(from) = archive
            .iter()
            .find(|e| e.invocation_id.as_deref() == Some(invocation))
            .map(|e| e.seq)
        else {
            return Err(SessionError::NotFound {
                what: "invocation",
                id: invocation.to_owned(),
            });
        };
        let version = next_version(file.session.version)?;
        let (kept, removed): (Vec<SessionEvent>, Vec<SessionEvent>) =
            archive.into_iter().partition(|e| e.seq < from);
        let mut buf = Vec::new();
        for e in &kept {
            let mut stored = e.clone();
            stored.session_id.clear();
            serde_json::to_writer(&mut buf, &stored)
                .map_err(|err| SessionError::serialization(format!("event {}", e.id), err))?;
            buf.push(b'\n');
        }
        write_atomic(&dir.join("events.jsonl"), &buf, self.sync)?;
        file.log_bytes = count(buf.len());
        file.context.seqs.retain(|s| *s < from);
        let seqs: Vec<u64> = kept.iter().map(|e| e.seq).collect();
        let ctx: std::collections::HashSet<u64> = file.context.resolve(&seqs).into_iter().collect();
        file.session.state = replay_session_state(&file.initial_state, &kept);
        file.session.event_count = count(kept.len());
        file.session.context_tokens = kept
            .iter()
            .filter(|e| ctx.contains(&e.seq))
            .map(|e| u64::from(e.token_estimate))
            .sum();
        file.session.version = version;
        file.session.updated_at = file.session.updated_at.max(self.now());
        self.save(&dir, &file)?;
        self.ids.lock().forget(id);
        Ok(RewindOutcome {
            version: file.session.version,
            removed: removed.len(),
        })
    }

    fn update(&self, id: &str, update: SessionUpdate) -> Result<Session> {
        update.validate(self.now())?;
        let (dir, mut file, _lock) = self.writable(id)?;
        update.apply_to(&mut file.session, self.now())?;
        self.save(&dir, &file)?;
        Ok(file.session)
    }

    /// Every session file in the store (unreadable ones are reported).
    /// Every session file, each read on its own: a corrupt one is reported
    /// by its directory name and never hides the others.
    fn all_sessions(&self) -> Result<Vec<(String, Result<SessionFile>)>> {
        let dir = self.layout.sessions_dir();
        let mut out = Vec::new();
        for entry in fs::read_dir(&dir).map_err(|e| io_err(dir.display(), e))? {
            let entry = entry.map_err(|e| io_err(dir.display(), e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with('.') || !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            match read_json::<SessionFile>(
                &entry.path().join("session.json"),
                &format!("session {name}"),
            ) {
                Ok(Some(f)) => out.push((name.to_owned(), Ok(f))),
                Ok(None) => {}
                Err(e) => out.push((name.to_owned(), Err(e))),
            }
        }
        Ok(out)
    }

    /// The readable session files; each unreadable one is logged and left out.
    fn readable_sessions(&self) -> Result<Vec<SessionFile>> {
        Ok(Page::from_overfetch_decoded(self.all_sessions()?, 0, usize::MAX).items)
    }

    fn list(&self, q: &SessionQuery) -> Result<Page<Session>> {
        let now = self.now();
        let mut found: Vec<Session> = Vec::new();
        let mut unreadable = Vec::new();
        for (name, file) in self.all_sessions()? {
            match file {
                Ok(f) if !expired(&f.session, now) && q.matches(&f.session) => {
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

    fn purge_expired(&self, now: DateTime<Utc>) -> Result<u64> {
        let mut n = 0;
        for f in self.readable_sessions()? {
            if expired(&f.session, now) {
                let dir = self.layout.session_dir(&f.session.id)?;
                let _lock = Lock::exclusive(&dir.join(".lock"))?;
                self.remove(&f.session.id, &dir)?;
                n += 1;
            }
        }
        Ok(n)
    }

    fn events(&self, id: &str, filter: &EventFilter) -> Result<Page<SessionEvent>> {
        let (dir, file) = self.live(id)?;
        let archive = Self::archive(&dir, &file)?;
        Ok(match filter.view {
            EventView::Archive => filter.apply(&archive),
            EventView::Context => {
                let by_seq: std::collections::HashMap<u64, &SessionEvent> =
                    archive.iter().map(|e| (e.seq, e)).collect();
                let seqs: Vec<u64> = archive.iter().map(|e| e.seq).collect();
                let order = file.context.resolve(&seqs);
                filter.apply(order.iter().filter_map(|s| by_seq.get(s).copied()))
            }
        })
    }

    fn search(&self, q: &SearchQuery) -> Result<Page<SearchHit>> {
        if q.mode == SearchMode::Ranked {
            return Err(SessionError::invalid(
                "search mode",
                "ranked search is not supported by the file backend; use literal search",
            ));
        }
        let needle = fold_case(&q.text);
        let now = self.now();
        let files: Vec<(PathBuf, SessionFile)> = match &q.scope {
            SearchScope::Session(id) => vec![self.live(id)?],
            SearchScope::User { app, user_id } => self
                .readable_sessions()?
                .into_iter()
                .filter(|f| {
                    &f.session.app == app
                        && &f.session.user_id == user_id
                        && !expired(&f.session, now)
                })
                .map(|f| Ok((self.layout.session_dir(&f.session.id)?, f)))
                .collect::<Result<_>>()?,
        };
        let multi = files.len() > 1;
        let mut hits = Vec::new();
        for (dir, f) in &files {
            // Streaming: only matching events are kept in memory.
            let scan = scan_log(&dir.join("events.jsonl"), f.log_bytes, &f.session.id, |e| {
                contains_folded(&e.message.search_text(), &needle).then_some(e)
            })?;
            hits.extend(scan.events);
        }
        if multi {
            hits.sort_by(|a, b| {
                (a.timestamp, &a.session_id, a.seq).cmp(&(b.timestamp, &b.session_id, b.seq))
            });
        }
        Ok(Page::paginate(
            hits.into_iter().map(|e| SearchHit {
                session_id: e.session_id.clone(),
                event: e,
                score: None,
            }),
            q.page,
            q.page_size,
        ))
    }

    fn export(&self, id: &str) -> Result<SessionDump> {
        let (dir, file) = self.live(id)?;
        let events = Self::archive(&dir, &file)?;
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        Ok(SessionDump {
            context: file.context.resolve(&seqs),
            shared: store::shared_state(&self.layout, &file.session.app, &file.session.user_id)?,
            initial_state: file.initial_state,
            last_seq: file.last_seq,
            events,
            session: file.session,
        })
    }

    fn import(&self, dump: &SessionDump) -> Result<ImportOutcome> {
        dump.validate()?;
        let id = dump.session.id.clone();
        let dir = self.layout.session_dir(&id)?;
        let _create = Lock::exclusive(&self.layout.root.join(".create.lock"))?;
        if let Some((_, existing)) = self.load(&id)? {
            if !expired(&existing.session, self.now())
                && existing.session.version >= dump.session.version
            {
                return Ok(ImportOutcome::Unchanged);
            }
            let _lock = Lock::exclusive(&dir.join(".lock"))?;
            self.remove(&id, &dir)?;
        }
        let staging = self
            .layout
            .sessions_dir()
            .join(format!(".import-{id}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&staging);
        fs::create_dir(&staging).map_err(|e| io_err(staging.display(), e))?;
        let bytes = self.write_events(&staging, &dump.events)?;
        let mut session = dump.session.clone();
        session.event_count = count(dump.events.len());
        let file = SessionFile {
            session,
            initial_state: dump.initial_state.clone(),
            last_seq: dump.last_seq,
            log_bytes: bytes,
            context: ContextFile {
                seqs: dump.context.clone(),
                through: dump.last_seq,
            },
        };
        self.save(&staging, &file)?;
        fs::rename(&staging, &dir).map_err(|e| io_err(dir.display(), e))?;
        self.write_shared(
            &file.session.app,
            &file.session.user_id,
            &dump.shared.app,
            &dump.shared.user,
            true,
        )?;
        Ok(ImportOutcome::Imported)
    }
}

/// A unique suffix for renamed-away directories.
fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}-{}",
        std::process::id(),
        Utc::now().timestamp_nanos_opt().unwrap_or_default(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

#[async_trait]
impl SessionRepository for FsRepository {
    fn capabilities(&self) -> Capabilities {
        Capabilities::basic(BACKEND)
            .with_durable()
            .with_multi_process()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "create", session_id = %session.id))]
    async fn create(&self, session: NewSession) -> session_core::Result<Session> {
        self.blocking(move |i| i.create(session)).await
    }

    async fn get(&self, id: &str) -> session_core::Result<Session> {
        check_session_id(id)?;
        let id = id.to_owned();
        self.blocking(move |i| i.live(&id).map(|(_, f)| f.session))
            .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "update", session_id = %id))]
    async fn update(&self, id: &str, update: SessionUpdate) -> session_core::Result<Session> {
        check_session_id(id)?;
        let id = id.to_owned();
        self.blocking(move |i| i.update(&id, update)).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "delete", session_id = %id))]
    async fn delete(&self, id: &str) -> session_core::Result<bool> {
        check_session_id(id)?;
        let id = id.to_owned();
        self.blocking(move |i| {
            let dir = i.layout.session_dir(&id)?;
            if !dir.is_dir() {
                return Ok(false);
            }
            let _lock = Lock::exclusive(&dir.join(".lock"))?;
            i.remove(&id, &dir)?;
            Ok(true)
        })
        .await
    }

    async fn list(&self, query: &SessionQuery) -> session_core::Result<Page<Session>> {
        query.check(&self.inner.limits)?;
        let query = query.clone();
        self.blocking(move |i| i.list(&query)).await
    }

    async fn purge_expired(&self, now: DateTime<Utc>) -> session_core::Result<u64> {
        self.blocking(move |i| i.purge_expired(now)).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "append", session_id = %id, events = events.len()))]
    async fn append(
        &self,
        id: &str,
        mut events: Vec<SessionEvent>,
    ) -> session_core::Result<AppendOutcome> {
        check_session_id(id)?;
        prepare_events(&mut events, &self.inner.limits)?;
        let id = id.to_owned();
        self.blocking(move |i| i.append(&id, events)).await
    }

    async fn events(
        &self,
        id: &str,
        filter: &EventFilter,
    ) -> session_core::Result<Page<SessionEvent>> {
        check_session_id(id)?;
        filter.check(&self.inner.limits)?;
        let (id, filter) = (id.to_owned(), filter.clone());
        self.blocking(move |i| i.events(&id, &filter)).await
    }

    async fn event_version(&self, id: &str) -> session_core::Result<u64> {
        check_session_id(id)?;
        let id = id.to_owned();
        self.blocking(move |i| i.live(&id).map(|(_, f)| f.session.version))
            .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "replace_context", session_id = %id))]
    async fn replace_context(
        &self,
        id: &str,
        mut events: Vec<SessionEvent>,
        expected_version: u64,
    ) -> session_core::Result<bool> {
        check_session_id(id)?;
        prepare_events(&mut events, &self.inner.limits)?;
        check_unique_ids(&events)?;
        let id = id.to_owned();
        self.blocking(move |i| i.replace_context(&id, events, expected_version))
            .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "rewind", session_id = %id))]
    async fn rewind(
        &self,
        id: &str,
        before_invocation_id: &str,
    ) -> session_core::Result<RewindOutcome> {
        check_session_id(id)?;
        validate_id("invocation id", before_invocation_id)?;
        let (id, inv) = (id.to_owned(), before_invocation_id.to_owned());
        self.blocking(move |i| i.rewind(&id, &inv)).await
    }

    async fn search(&self, query: &SearchQuery) -> session_core::Result<Page<SearchHit>> {
        query.check(&self.inner.limits)?;
        let query = query.clone();
        self.blocking(move |i| i.search(&query)).await
    }

    async fn shared_state(&self, app: &str, user_id: &str) -> session_core::Result<SharedState> {
        session_core::validate_owner(app, user_id)?;
        let (app, user) = (app.to_owned(), user_id.to_owned());
        self.blocking(move |i| store::shared_state(&i.layout, &app, &user))
            .await
    }

    async fn export_session(&self, id: &str) -> session_core::Result<SessionDump> {
        check_session_id(id)?;
        let id = id.to_owned();
        self.blocking(move |i| i.export(&id)).await
    }

    async fn import_session(&self, dump: SessionDump) -> session_core::Result<ImportOutcome> {
        self.blocking(move |i| i.import(&dump)).await
    }
}
