//! The on-disk format of `session.json`; stores written by earlier versions must keep reading.

use serde::{Deserialize, Serialize};
use session_core::plan::Head;
use session_core::{Session, StateMap};

/// The session file: `sessions/<id>/session.json`, pretty-printed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SessionFile {
    /// The session, counters, version and session-scope state included.
    pub(crate) session: Session,
    /// The state it was created with (rewind replays from it).
    pub(crate) initial_state: StateMap,
    /// The highest seq ever assigned.
    pub(crate) last_seq: u64,
    /// Bytes of `events.jsonl` that hold acknowledged events. As stored, the
    /// log as of this file's last rewrite; appends committed since carry
    /// their head on their last line (see `commit`), and a file read from
    /// disk is settled up to the last of them. Anything past that is an
    /// append in flight or a torn write, and a writer moves it aside.
    pub(crate) log_bytes: u64,
    /// `log_bytes` as the file on disk records it (how far the log has
    /// grown past it tells an append when to rewrite the file); not stored.
    #[serde(skip)]
    pub(crate) checkpoint: u64,
    /// The context: these seqs in this order, then every event with a seq above `through`.
    pub(crate) context: ContextFile,
    /// The context's history: one record per context replace, oldest first
    /// (what tells archive reads when each event left the context).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) context_changes: Vec<session_core::ContextChange>,
    /// A random number drawn whenever `events.jsonl` starts anew (create,
    /// import) or is rewritten (rewind, prune); 0 in files written before
    /// it existed. A process that remembers the ids of a log up to some
    /// length reads them again when the generation changed under it.
    #[serde(default)]
    pub(crate) log_generation: u64,
}

/// A fresh log generation: random, never 0, below 2^53 (exact in every
/// JSON reader).
pub(crate) fn fresh_generation() -> u64 {
    let (high, low) = uuid::Uuid::new_v4().as_u64_pair();
    ((high ^ low) & ((1 << 53) - 1)).max(1)
}

impl SessionFile {
    /// What the write planner needs to know about the session.
    pub(crate) fn head(&self) -> Head {
        Head::new(
            self.session.id.clone(),
            self.last_seq,
            self.session.version,
            self.session.status,
        )
        .with_event_count(self.session.event_count)
        .with_event_bytes(self.session.event_bytes)
    }

    /// The file with its session's expiry, as [`session_core::plan`] takes it.
    pub(crate) fn with_expiry(self) -> (Self, Option<chrono::DateTime<chrono::Utc>>) {
        let at = self.session.expires_at;
        (self, at)
    }
}

/// The context of a session, compactly.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct ContextFile {
    /// Seqs set by the last replace, in context order.
    pub(crate) seqs: Vec<u64>,
    /// Events with a seq above this joined the context by append.
    pub(crate) through: u64,
}

impl ContextFile {
    /// The context's seqs, given the archive's seqs in order.
    pub(crate) fn resolve(&self, archive: &[u64]) -> Vec<u64> {
        let mut out = self.seqs.clone();
        out.extend(archive.iter().copied().filter(|s| *s > self.through));
        out
    }
}

/// A length as a stored counter.
pub(crate) fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}
