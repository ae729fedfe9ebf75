//! Opening the store the command line names.

use std::sync::Arc;

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

/// Opens a store by URL.
pub(crate) async fn open(url: &str) -> Result<Arc<dyn SessionRepository>> {
    agent_session::open(url)
        .await
        .with_context(|| format!("cannot open store {}", redact(url)))
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
