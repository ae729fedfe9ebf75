//! [`FsRepository`]: the store's state shared by its clones, its options
//! ([`FsRepositoryBuilder`]) and how it opens.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use session_core::{system_clock, Limits, SessionError, SharedClock};

use crate::error::{join_err, BACKEND};
use crate::layout::Layout;
use crate::log::IdCache;
use crate::search_index::SearchIndexes;

/// A [`SessionRepository`](session_core::SessionRepository) in plain files under one directory:
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
    pub(crate) inner: Arc<Inner>,
}

/// The store's state, shared by the clones of one [`FsRepository`].
pub(crate) struct Inner {
    pub(crate) layout: Layout,
    pub(crate) sync: bool,
    pub(crate) clock: SharedClock,
    pub(crate) limits: Limits,
    pub(crate) ids: Mutex<IdCache>,
    /// The trigram indexes of the sessions searched lately.
    pub(crate) search_indexes: Mutex<SearchIndexes>,
}

impl Inner {
    /// The time now, by the store's clock.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }
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
                    search_indexes: Mutex::new(SearchIndexes::default()),
                }),
            })
        })
        .await
        .map_err(join_err)?
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
        Self::from_url_with_limits(url, Limits::default()).await
    }

    /// [`Self::from_url`] with `limits` (the facade passes a URL's quota settings).
    pub async fn from_url_with_limits(url: &str, limits: Limits) -> session_core::Result<Self> {
        let not_a_store =
            || SessionError::invalid("store URL", format!("{url:?} is not fs://<directory>"));
        let path = url
            .strip_prefix("fs://")
            .or_else(|| url.strip_prefix("file://"))
            .ok_or_else(not_a_store)?;
        let (path, _) = session_core::split_url_query(path, "fs", &[])?;
        if path.is_empty() {
            return Err(not_a_store());
        }
        Self::builder(path).limits(limits).open().await
    }

    /// Runs `f`, which blocks on the file system, without stalling other
    /// tasks ([`session_core::run_blocking`]).
    pub(crate) async fn blocking<T, F>(&self, f: F) -> session_core::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> session_core::Result<T> + Send + 'static,
    {
        let inner = self.inner.clone();
        session_core::run_blocking(BACKEND, move || f(&inner)).await
    }
}
