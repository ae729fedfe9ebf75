//! [`SqliteRepository`]: its options ([`SqliteRepositoryBuilder`],
//! [`Synchronous`]), opening, the writer and the reader pool.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};
use session_core::{system_clock, Limits, SessionError, SharedClock};

use crate::error::{map_err, open_failed, BACKEND};
use crate::{schema, search};

/// Prepared statements the writer connection keeps.
const WRITER_STATEMENTS: usize = 64;

/// How hard SQLite works to make a commit durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// `synchronous = NORMAL` in WAL mode: a committed append survives a
    /// crash of the process; a power loss or OS crash may lose the last
    /// commits (never corrupts the file). The default.
    #[default]
    Normal,
    /// `synchronous = FULL`: every commit is fsynced and also survives power loss, at a write-speed cost.
    Full,
}

impl Synchronous {
    fn pragma(self) -> &'static str {
        match self {
            Self::Normal => "NORMAL",
            Self::Full => "FULL",
        }
    }
}

/// Where the database lives.
#[derive(Debug, Clone)]
pub(crate) enum Location {
    File(PathBuf),
    Memory,
}

/// Options for opening a [`SqliteRepository`].
#[derive(Debug, Clone)]
pub struct SqliteRepositoryBuilder {
    location: Location,
    synchronous: Synchronous,
    busy_timeout: Duration,
    readers: usize,
    index_batch: usize,
    page_size: u32,
    clock: SharedClock,
    limits: Limits,
}

/// How many appended events the search index takes at a time unless told
/// otherwise. The index's own cost is per event, but every batch is a
/// segment FTS5 later merges, rewriting its entries once per level they
/// climb: large batches make fewer levels. Over `bench --workload w1`
/// (10,000 appends) 4,096 instead of 256 cut the appends' instructions
/// from 2.15 to 1.70 billion (`valgrind --tool=callgrind`). A search
/// finding more than 256 events pending indexes them before it reads.
pub const DEFAULT_INDEX_BATCH: usize = 4096;

/// The page size of a new database file unless told otherwise: an append
/// writes a few small rows, each into its own B-tree page (the event,
/// its indexes, the session's row), and every page it touches is one
/// more WAL frame at commit: half SQLite's default 4 KiB halves those
/// bytes (W1 appends measured 15% faster; reads the same).
pub const DEFAULT_PAGE_SIZE: u32 = 2048;

impl SqliteRepositoryBuilder {
    /// Index events for search in batches of this many (default
    /// [`DEFAULT_INDEX_BATCH`]; 1 = index inside every append). Searches
    /// always see every committed event: a short not-yet-indexed tail is
    /// scanned directly, a longer one indexed first by the search.
    pub fn index_batch(mut self, n: usize) -> Self {
        self.index_batch = n.max(1);
        self
    }

    /// Durability of commits (default [`Synchronous::Normal`]).
    pub fn synchronous(mut self, s: Synchronous) -> Self {
        self.synchronous = s;
        self
    }

    /// How long a write waits for another process's write lock (default 5 s).
    pub fn busy_timeout(mut self, t: Duration) -> Self {
        self.busy_timeout = t;
        self
    }

    /// The page size in bytes of a database this opening creates: a power
    /// of two from 512 to 65536 (default [`DEFAULT_PAGE_SIZE`]). A database
    /// that exists keeps the page size it was created with.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a size SQLite does not take.
    pub fn page_size(mut self, bytes: u32) -> session_core::Result<Self> {
        if !(512..=65_536).contains(&bytes) || !bytes.is_power_of_two() {
            return Err(SessionError::invalid(
                "page size",
                format!("{bytes} bytes: SQLite takes a power of two from 512 to 65536"),
            ));
        }
        self.page_size = bytes;
        Ok(self)
    }

    /// How many read-only connections serve reads beside the writer (default 4; files only).
    pub fn readers(mut self, n: usize) -> Self {
        self.readers = n;
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

    /// Opens (creating if needed) the database and runs migrations.
    pub async fn open(self) -> session_core::Result<SqliteRepository> {
        tokio::task::spawn_blocking(move || self.open_blocking())
            .await
            .map_err(|e| SessionError::backend(BACKEND, e))?
    }

    fn connection(&self) -> session_core::Result<Connection> {
        let conn = match &self.location {
            Location::File(p) => Connection::open(p),
            Location::Memory => Connection::open_in_memory(),
        }
        .map_err(|e| match &self.location {
            Location::File(p) => open_failed(p.clone(), e),
            Location::Memory => map_err(e),
        })?;
        conn.busy_timeout(self.busy_timeout).map_err(map_err)?;
        conn.pragma_update(None, "synchronous", self.synchronous.pragma())
            .map_err(map_err)?;
        // What a delete frees is overwritten with zeros, so erased text
        // leaves no copy in free space (see `erase_user`).
        conn.pragma_update(None, "secure_delete", true)
            .map_err(map_err)?;
        stable_plans(&conn)?;
        Ok(conn)
    }

    fn open_blocking(self) -> session_core::Result<SqliteRepository> {
        let mut writer = self.connection()?;
        // Only a new, empty database takes it; an existing one keeps its own.
        writer
            .pragma_update(None, "page_size", self.page_size)
            .map_err(map_err)?;
        if let Location::File(_) = self.location {
            let mode: String = writer
                .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
                .map_err(map_err)?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(SessionError::backend(
                    BACKEND,
                    format!("could not switch the database to WAL mode (got {mode})"),
                ));
            }
        }
        schema::migrate(&mut writer)?;
        // Room for every statement shape a write uses, the held-id lookups' included.
        writer.set_prepared_statement_cache_capacity(WRITER_STATEMENTS);
        let mut readers = Vec::new();
        if let Location::File(p) = &self.location {
            for _ in 0..self.readers {
                let conn = Connection::open_with_flags(
                    p,
                    OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )
                .map_err(map_err)?;
                conn.busy_timeout(self.busy_timeout).map_err(map_err)?;
                stable_plans(&conn)?;
                readers.push(Mutex::new(conn));
            }
        }
        Ok(SqliteRepository {
            inner: Arc::new(Inner {
                writer: Mutex::new(writer),
                readers,
                next_reader: AtomicUsize::new(0),
                index_batch: i64::try_from(self.index_batch).unwrap_or(i64::MAX),
                index_mark_hint: AtomicI64::new(0),
                clock: self.clock,
                limits: self.limits,
                location: self.location,
            }),
        })
    }
}

/// Turns on SQLite's query planner stability guarantee: a cached
/// statement keeps the plan it was prepared with, whatever is bound to it.
/// Without it SQLite marked a context read's statement (the
/// `IN_CONTEXT` form) to be prepared again on every run, parsing and
/// planning its SQL each time. The store runs
/// no `ANALYZE`: no plan here depends on bound values.
fn stable_plans(conn: &Connection) -> session_core::Result<()> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map_err(map_err)?;
    Ok(())
}

/// A read transaction begun and ended by cached statements: a rusqlite
/// `Transaction` parses its `BEGIN` and `COMMIT` anew each time, a cost
/// a short read felt. Ended when dropped, should the read fail.
struct ReadSnapshot<'c> {
    conn: &'c Connection,
    open: bool,
}

impl<'c> ReadSnapshot<'c> {
    fn begin(conn: &'c Connection) -> session_core::Result<Self> {
        conn.prepare_cached("BEGIN")
            .and_then(|mut s| s.execute([]))
            .map_err(map_err)?;
        Ok(Self { conn, open: true })
    }

    fn end(mut self) -> session_core::Result<()> {
        self.conn
            .prepare_cached("COMMIT")
            .and_then(|mut s| s.execute([]))
            .map_err(map_err)?;
        self.open = false;
        Ok(())
    }
}

impl Drop for ReadSnapshot<'_> {
    fn drop(&mut self) {
        if self.open {
            // A read changed nothing: ending it cannot lose anything, and
            // a failure to end it shows at the connection's next `BEGIN`.
            let _ = self
                .conn
                .prepare_cached("ROLLBACK")
                .and_then(|mut s| s.execute([]));
        }
    }
}

/// A [`SessionRepository`](session_core::SessionRepository) in one SQLite file (or in memory).
///
/// WAL journal; one writer connection whose transactions all start with
/// `BEGIN IMMEDIATE`; read-only connections so reads never wait behind the
/// writer; every SQLite call runs on tokio's blocking pool, never on an
/// async worker thread. Search uses an FTS5 trigram index.
#[derive(Clone)]
pub struct SqliteRepository {
    pub(crate) inner: Arc<Inner>,
}

/// The store's connections and settings, shared by the clones of one
/// [`SqliteRepository`].
pub(crate) struct Inner {
    pub(crate) writer: Mutex<Connection>,
    pub(crate) readers: Vec<Mutex<Connection>>,
    pub(crate) next_reader: AtomicUsize,
    pub(crate) index_batch: i64,
    pub(crate) index_mark_hint: AtomicI64,
    pub(crate) clock: SharedClock,
    pub(crate) limits: Limits,
    pub(crate) location: Location,
}

impl Inner {
    /// A reader connection: the first idle one, so that a lone caller
    /// keeps reading through one connection whose page cache is warm
    /// (each reader's cache starts cold after a write); when every reader
    /// is busy, the next in turn, waited for.
    fn reader(&self) -> parking_lot::MutexGuard<'_, Connection> {
        if let Some(idle) = self.readers.iter().find_map(|r| r.try_lock()) {
            return idle;
        }
        let i = self.next_reader.fetch_add(1, Ordering::Relaxed) % self.readers.len();
        self.readers[i].lock()
    }

    /// How appends keep the search index up to date.
    pub(crate) fn indexing(&self) -> search::Indexing<'_> {
        search::Indexing {
            batch: self.index_batch,
            mark_hint: &self.index_mark_hint,
        }
    }
}

impl std::fmt::Debug for SqliteRepository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteRepository")
            .field("location", &self.inner.location)
            .field("readers", &self.inner.readers.len())
            .finish_non_exhaustive()
    }
}

impl SqliteRepository {
    /// Options for a database file at `path`.
    pub fn builder(path: impl AsRef<Path>) -> SqliteRepositoryBuilder {
        Self::builder_at(Location::File(path.as_ref().to_path_buf()))
    }

    /// Options for a private in-memory database (gone when the repository is dropped).
    pub fn memory_builder() -> SqliteRepositoryBuilder {
        Self::builder_at(Location::Memory)
    }

    fn builder_at(location: Location) -> SqliteRepositoryBuilder {
        SqliteRepositoryBuilder {
            location,
            synchronous: Synchronous::Normal,
            busy_timeout: Duration::from_secs(5),
            readers: 4,
            index_batch: DEFAULT_INDEX_BATCH,
            page_size: DEFAULT_PAGE_SIZE,
            clock: system_clock(),
            limits: Limits::default(),
        }
    }

    /// Opens (creating if needed) the database file at `path` with default options.
    pub async fn open(path: impl AsRef<Path>) -> session_core::Result<Self> {
        Self::builder(path).open().await
    }

    /// Opens a private in-memory database.
    pub async fn in_memory() -> session_core::Result<Self> {
        Self::memory_builder().open().await
    }

    /// Opens the database a URL names: `sqlite://path/to/file.db`,
    /// `sqlite:relative.db`, `sqlite::memory:` or `sqlite://:memory:`.
    pub async fn from_url(url: &str) -> session_core::Result<Self> {
        Self::from_url_with_limits(url, Limits::default()).await
    }

    /// [`Self::from_url`] with `limits` (the facade passes a URL's quota settings).
    pub async fn from_url_with_limits(url: &str, limits: Limits) -> session_core::Result<Self> {
        let rest = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .ok_or_else(|| {
                SessionError::invalid("store URL", format!("{url:?} is not a sqlite: URL"))
            })?;
        let (path, _) = session_core::split_url_query(rest, "sqlite", &[])?;
        match path {
            ":memory:" => Self::memory_builder().limits(limits).open().await,
            "" => Err(SessionError::invalid(
                "store URL",
                "sqlite:// needs a file path, e.g. sqlite://sessions.db",
            )),
            p => Self::builder(p).limits(limits).open().await,
        }
    }

    /// Brings the schema up to date. Runs on open; idempotent.
    pub async fn migrate(&self) -> session_core::Result<i64> {
        self.blocking(|inner| schema::migrate(&mut inner.writer.lock()))
            .await
    }

    /// Runs `f`, which blocks on SQLite, without stalling other tasks
    /// ([`session_core::run_blocking`]).
    async fn blocking<T, F>(&self, f: F) -> session_core::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> session_core::Result<T> + Send + 'static,
    {
        let inner = self.inner.clone();
        session_core::run_blocking(BACKEND, move || f(&inner)).await
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction on the writer, with the clock's `now`.
    pub(crate) async fn write<T, F>(&self, f: F) -> session_core::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>, DateTime<Utc>, &Inner) -> session_core::Result<T>
            + Send
            + 'static,
    {
        self.blocking(move |inner| {
            let mut conn = inner.writer.lock();
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(map_err)?;
            let now = inner.clock.now();
            let out = f(&tx, now, inner)?;
            tx.commit().map_err(map_err)?;
            Ok(out)
        })
        .await
    }

    /// Copies the write-ahead log into the database file and truncates it
    /// to nothing, so no earlier page image outlives an erasure there.
    /// A reader of another process that still holds an old snapshot keeps
    /// the log from being truncated: that is logged, and the next
    /// checkpoint finishes the work.
    pub(crate) async fn truncate_wal(&self) -> session_core::Result<()> {
        if !matches!(self.inner.location, Location::File(_)) {
            return Ok(());
        }
        self.blocking(|inner| {
            let conn = inner.writer.lock();
            let busy: i64 = conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
                .map_err(map_err)?;
            if busy != 0 {
                tracing::warn!(
                    "the write-ahead log could not be truncated after an erasure: another connection holds a read snapshot"
                );
            }
            Ok(())
        })
        .await
    }

    /// Runs `f` in one read snapshot on a reader (the writer for in-memory databases).
    pub(crate) async fn read<T, F>(&self, f: F) -> session_core::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, DateTime<Utc>) -> session_core::Result<T> + Send + 'static,
    {
        self.blocking(move |inner| {
            let now = inner.clock.now();
            let conn = if inner.readers.is_empty() {
                inner.writer.lock()
            } else {
                inner.reader()
            };
            // One snapshot for every statement of the read.
            let snapshot = ReadSnapshot::begin(&conn)?;
            let out = f(&conn, now)?;
            snapshot.end()?;
            Ok(out)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader's page cache is its own: a lone caller keeps the one it
    /// warmed, and only a caller that finds it busy takes another.
    #[tokio::test]
    async fn a_lone_caller_reads_through_one_warm_connection() -> session_core::Result<()> {
        let dir = tempfile::tempdir().map_err(|e| SessionError::backend(BACKEND, e))?;
        let repo = SqliteRepository::builder(dir.path().join("s.db"))
            .readers(3)
            .open()
            .await?;
        let inner = &repo.inner;
        // Each guard is dropped before the next read, as a read's is.
        let address = |guard: parking_lot::MutexGuard<'_, Connection>| -> *const Connection {
            &raw const *guard
        };
        let first = address(inner.reader());
        let again = address(inner.reader());
        assert_eq!(first, again, "sequential reads share one connection");
        let held = inner.reader();
        let other = address(inner.reader());
        assert_ne!(&raw const *held, other, "a busy reader is passed over");
        Ok(())
    }

    /// A store with one reader connection in a fresh directory (kept
    /// while the store is used), and a session in it.
    async fn one_reader_store(
    ) -> session_core::Result<(tempfile::TempDir, SqliteRepository, session_core::Session)> {
        use session_core::{NewSession, SessionRepository};
        let dir = tempfile::tempdir().map_err(|e| SessionError::backend(BACKEND, e))?;
        let repo = SqliteRepository::builder(dir.path().join("s.db"))
            .readers(1)
            .open()
            .await?;
        let session = repo
            .create(NewSession::new("app", "ada", chrono::Utc::now())?.with_id("s1")?)
            .await?;
        Ok((dir, repo, session))
    }

    /// A context read's statement is planned once, not on every read
    /// (see `stable_plans`); the snapshot's `BEGIN` is cached too.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_context_read_is_prepared_once() -> session_core::Result<()> {
        use rusqlite::StatementStatus::{RePrepare, Run};
        use session_core::{EventFilter, Message, SessionEvent, SessionRepository};
        let (_dir, repo, session) = one_reader_store().await?;
        for i in 0..30 {
            let mut e = SessionEvent::new(Message::user(format!("turn {i}")));
            e.metadata
                .insert("item".into(), serde_json::json!({ "n": i }));
            repo.append(&session.id, vec![e]).await?;
        }
        for _ in 0..3 {
            repo.items(&session.id, "item", &EventFilter::last(20))
                .await?;
        }
        let conn = repo.inner.reader();
        let read = conn
            .prepare_cached(&format!(
                "SELECT seq, CAST(body AS BLOB) FROM events WHERE session_id = ?1 AND {} \
                 ORDER BY ctx_pos DESC LIMIT 20",
                crate::events::IN_CONTEXT
            ))
            .map_err(map_err)?;
        let begin = conn.prepare_cached("BEGIN").map_err(map_err)?;
        assert_eq!(read.get_status(Run), 3, "the read ran this very statement");
        assert_eq!(
            read.get_status(RePrepare),
            0,
            "prepared again on a later run"
        );
        assert_eq!(
            begin.get_status(Run),
            3,
            "each read began with the cached BEGIN"
        );
        Ok(())
    }

    /// Each page of a whole context read starts its index range at the
    /// page's cursor: it steps through about one page of rows, wherever
    /// the cursor stands (with the context's base as the range's start,
    /// the fifth page walked the four before it too).
    #[tokio::test(flavor = "multi_thread")]
    async fn a_context_page_after_a_cursor_reads_one_page_of_rows() -> session_core::Result<()> {
        use rusqlite::StatementStatus::{Run, VmStep};
        use session_core::{
            EventView, Message, SessionEvent, SessionRepository, SessionRepositoryExt,
        };
        let (_dir, repo, session) = one_reader_store().await?;
        for batch in 0..50 {
            let events = (0..100)
                .map(|i| SessionEvent::new(Message::user(format!("turn {batch} {i}"))))
                .collect();
            repo.append(&session.id, events).await?;
        }
        let all = repo.all_events(&session.id, EventView::Context).await?;
        assert_eq!(all.len(), 5000);
        let conn = repo.inner.reader();
        let first = conn
            .prepare_cached(&format!(
                "SELECT seq, CAST(body AS BLOB) FROM events WHERE session_id = ?1 AND {} \
                 ORDER BY ctx_pos LIMIT 1001 OFFSET 0",
                crate::events::IN_CONTEXT
            ))
            .map_err(map_err)?;
        let after = conn
            .prepare_cached(
                "SELECT seq, CAST(body AS BLOB) FROM events WHERE session_id = ?1 \
                 AND ctx_pos IS NOT NULL AND ctx_pos > \
                 MAX(?2, (SELECT ctx_base FROM sessions WHERE id = ?1) - 1) \
                 ORDER BY ctx_pos LIMIT 1001 OFFSET 0",
            )
            .map_err(map_err)?;
        assert_eq!(
            first.get_status(Run),
            1,
            "the first page ran this statement"
        );
        let pages = after.get_status(Run);
        assert_eq!(pages, 4, "the pages after the first ran this statement");
        let per_page = after.get_status(VmStep) / pages;
        let first_page = first.get_status(VmStep);
        assert!(
            per_page <= first_page * 3 / 2,
            "a page after a cursor took {per_page} steps, the first {first_page}"
        );
        Ok(())
    }
}
