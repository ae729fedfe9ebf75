//! [`SessionDump`]: everything a store holds about one session, as
//! export, import, fork and migration move it.

use serde::{Deserialize, Serialize};

use crate::context_log::ContextChange;
use crate::error::{Result, SessionError};
use crate::event::{check_unique_ids, SessionEvent};
use crate::session::Session;
use crate::state::{SharedState, StateMap};
use crate::validate::{MAX_SEQ, MAX_VERSION};

/// Everything a store holds about one session, for export, import and
/// migration between backends: reproduces ids, seqs, timestamps, the
/// version, the context and the state exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionDump {
    /// The session, counters and version included (state: session scope).
    pub session: Session,
    /// The state the session was created with (what rewind replays from).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub initial_state: StateMap,
    /// The highest seq ever assigned (seqs are never reused, even after a rewind).
    pub last_seq: u64,
    /// The archive, in seq order.
    pub events: Vec<SessionEvent>,
    /// The context, as seqs in context order.
    pub context: Vec<u64>,
    /// The owner's `app:` and `user:` scopes at export time.
    pub shared: SharedState,
    /// The context's history: one change per context replace, oldest
    /// first (what tells when each archived event left the context).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context_log: Vec<ContextChange>,
}

impl SessionDump {
    /// Each context seq's 1-based position in the context.
    pub fn context_positions(&self) -> std::collections::HashMap<u64, i64> {
        self.context
            .iter()
            .zip(1i64..)
            .map(|(seq, pos)| (*seq, pos))
            .collect()
    }

    /// The token estimate of the context.
    pub fn context_tokens(&self) -> u64 {
        let positions = self.context_positions();
        self.events
            .iter()
            .filter(|e| positions.contains_key(&e.seq))
            .map(|e| u64::from(e.token_estimate))
            .sum()
    }

    /// Checks the dump is self-consistent before a backend writes it.
    pub fn validate(&self) -> Result<()> {
        let s = &self.session;
        if self.last_seq > MAX_SEQ {
            return Err(SessionError::invalid(
                "dump",
                format!(
                    "last_seq {} is over the maximum of {MAX_SEQ}",
                    self.last_seq
                ),
            ));
        }
        if s.version > MAX_VERSION {
            return Err(SessionError::invalid(
                "dump",
                format!("version {} is over the maximum of {MAX_VERSION}", s.version),
            ));
        }
        let mut seqs = std::collections::HashSet::new();
        let mut last = 0;
        for e in &self.events {
            e.validate()?;
            if e.seq <= last || e.seq > self.last_seq {
                return Err(SessionError::invalid(
                    "dump",
                    format!(
                        "event seqs must increase and stay within last_seq ({})",
                        self.last_seq
                    ),
                ));
            }
            last = e.seq;
            seqs.insert(e.seq);
        }
        check_unique_ids(&self.events)?;
        if let Some(missing) = self.context.iter().find(|s| !seqs.contains(s)) {
            return Err(SessionError::invalid(
                "dump",
                format!("context names seq {missing}, which is not in the archive"),
            ));
        }
        let mut versions = 0;
        for c in &self.context_log {
            c.validate()?;
            if c.version <= versions || c.version > s.version || c.before_seq > self.last_seq {
                return Err(SessionError::invalid(
                    "dump",
                    "context changes must have increasing versions up to the session's \
                     and seqs within last_seq",
                ));
            }
            versions = c.version;
        }
        let mut in_context = std::collections::HashSet::new();
        if let Some(twice) = self.context.iter().find(|s| !in_context.insert(**s)) {
            return Err(SessionError::invalid(
                "dump",
                format!("context names seq {twice} twice"),
            ));
        }
        Ok(())
    }
}
