//! Opening the store the command line names.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use agent_session::encryption::Keyring;
use agent_session::{SessionRepository, SharedClock};
use agent_session_cli::store_url::redact;
use anyhow::{Context, Result};

/// The store used when neither `--store` nor `AGENT_SESSION_STORE` is given.
pub(crate) const DEFAULT_STORE: &str = "sqlite://agent-sessions.db";

/// The URL in effect, saying on stderr when the default file is about to be created.
pub(crate) fn url(given: Option<&str>) -> String {
    if let Some(u) = given {
        return u.to_owned();
    }
    let path = DEFAULT_STORE.trim_start_matches("sqlite://");
    if !std::path::Path::new(path).exists() {
        crate::output::report(format_args!(
            "creating {path} in the current directory (use --store or AGENT_SESSION_STORE for another store)"
        ));
    }
    DEFAULT_STORE.to_owned()
}

/// The keyring file `--keys-file` named, set once before any store opens.
static KEYS_FILE: OnceLock<Option<PathBuf>> = OnceLock::new();

/// Records the `--keys-file` flag (or `AGENT_SESSION_KEYS_FILE`).
pub(crate) fn set_keys_file(path: Option<PathBuf>) {
    let _ = KEYS_FILE.set(path);
}

/// The keyring in effect: `--keys-file`, else `AGENT_SESSION_KEYS`; none
/// means the store is used as it is.
pub(crate) fn keyring() -> Result<Option<Keyring>> {
    if let Some(Some(path)) = KEYS_FILE.get() {
        return Ok(Some(Keyring::from_file(path)?));
    }
    Ok(Keyring::from_env()?)
}

/// Opens a store by URL, behind the encryption layer when a keyring is
/// given (without one, sealed sessions refuse their content).
pub(crate) async fn open(url: &str) -> Result<Arc<dyn SessionRepository>> {
    let opened: agent_session::Result<Arc<dyn SessionRepository>> = match keyring()? {
        Some(ring) => agent_session::open_encrypted(url, ring)
            .await
            .map(|r| Arc::new(r) as Arc<dyn SessionRepository>),
        None => agent_session::open(url).await,
    };
    opened.with_context(|| format!("cannot open store {}", redact(url)))
}

/// Opens an embedded store on `clock` (the demo moves time forward).
pub(crate) async fn open_embedded(
    url: &str,
    clock: SharedClock,
) -> Result<Arc<dyn SessionRepository>> {
    if url.starts_with("memory:") {
        return Ok(Arc::new(
            agent_session::InMemoryRepository::new().with_clock(clock),
        ));
    }
    let Some(rest) = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
    else {
        anyhow::bail!(
            "the demo runs on the embedded store: use a sqlite:// or memory:// store, not {}",
            redact(url)
        );
    };
    let builder = if rest == ":memory:" {
        agent_session::SqliteRepository::memory_builder()
    } else {
        agent_session::SqliteRepository::builder(rest)
    };
    let repo = builder
        .clock(clock)
        .open()
        .await
        .with_context(|| format!("cannot open store {}", redact(url)))?;
    Ok(Arc::new(repo))
}
