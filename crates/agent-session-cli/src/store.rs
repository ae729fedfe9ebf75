//! Opening the store the command line names.

use std::sync::Arc;

use agent_session::{SessionRepository, SharedClock};
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
        eprintln!("creating {path} in the current directory (use --store or AGENT_SESSION_STORE for another store)");
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
        .with_context(|| format!("cannot open store {url}"))?;
    Ok(Arc::new(repo))
}

/// A URL with any password replaced, for messages.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}://{user}:***@{}", &url[..s], &url[at + 1..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        assert_eq!(redact("postgres://u:secret@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("sqlite://x.db"), "sqlite://x.db");
    }
}
