//! The [`Scratch`] sessions a run creates and removes, which every
//! workload shares. The workloads import it; it imports none of them.

use std::sync::Arc;

use agent_session::{NewSession, SessionId, SessionRepository};
use anyhow::Result;

use super::raw::Raw;

/// Sessions and raw sessions a run created, removed at its end.
pub(crate) struct Scratch {
    pub(crate) repo: Arc<dyn SessionRepository>,
    pub(crate) raw: Option<Arc<Raw>>,
    created: Vec<SessionId>,
}

impl Scratch {
    /// No sessions yet, on `repo` and, with a baseline, `raw`.
    pub(crate) fn new(repo: Arc<dyn SessionRepository>, raw: Option<Arc<Raw>>) -> Self {
        Self {
            repo,
            raw,
            created: Vec::new(),
        }
    }

    /// A new session in the store and, with a baseline, its raw twin (same id).
    pub(crate) async fn session(&mut self) -> Result<SessionId> {
        let id = self
            .repo
            .create(NewSession::new("bench", "bench", chrono::Utc::now())?)
            .await?
            .id;
        self.created.push(id.clone());
        if let Some(raw) = &self.raw {
            raw.session(id.as_str()).await?;
        }
        Ok(id)
    }

    /// Removes a session at once (a large one, when the run goes on).
    pub(crate) async fn drop_session(&mut self, id: &SessionId) -> Result<()> {
        self.repo.delete(id).await?;
        self.created.retain(|c| c != id);
        Ok(())
    }

    /// Removes every session the run created and still holds (best effort).
    pub(crate) async fn remove_sessions(&mut self) {
        for id in std::mem::take(&mut self.created) {
            let _ = self.repo.delete(&id).await;
        }
    }
}
