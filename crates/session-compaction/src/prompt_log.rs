//! What `SessionMemory` remembers between preparing a prompt and recording
//! its answer: the estimate of the prompt prepared last, per session, and
//! which sessions' stored usage the calibration has loaded.

use std::collections::{HashMap, HashSet};

use session_core::SessionId;

use crate::calibration::MAX_SESSIONS;

/// Per-session prompt estimates and calibration loads, bounded like the
/// calibration: past [`MAX_SESSIONS`] sessions, it starts over.
#[derive(Debug, Default)]
pub(crate) struct PromptLog {
    /// Session → the estimate of the prompt prepared last.
    last_estimate: HashMap<String, u64>,
    /// Sessions whose stored usage records were loaded into the calibration.
    loaded: HashSet<String>,
}

impl PromptLog {
    /// Remembers `estimated` as the last prompt prepared for `session_id`.
    pub(crate) fn remember(&mut self, session_id: &SessionId, estimated: u64) {
        if self.last_estimate.len() >= MAX_SESSIONS {
            self.last_estimate.clear();
            self.loaded.clear();
        }
        self.last_estimate.insert(session_id.to_string(), estimated);
    }

    /// The estimate of the prompt prepared last for `session_id`.
    pub(crate) fn last_estimate(&self, session_id: &SessionId) -> Option<u64> {
        self.last_estimate.get(session_id.as_str()).copied()
    }

    /// Marks `session_id`'s stored usage as loaded: `true` the first time.
    pub(crate) fn first_load(&mut self, session_id: &SessionId) -> bool {
        if self.loaded.len() >= MAX_SESSIONS {
            self.loaded.clear();
        }
        self.loaded.insert(session_id.to_string())
    }
}
