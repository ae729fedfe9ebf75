//! The heads this repository's own appends left, so the next append to the
//! same session can plan without reading first: one round trip instead of two.
//!
//! A remembered head is only a guess. The append script checks every head
//! field against it (version, last seq, counters, activity, expiry, owner),
//! so the guess holds exactly when nothing wrote the head since, and also
//! checks that the session holds none of the events the plan took for new
//! (a plan from a remembered head has not read the held ids). When either check fails the script writes nothing and the append
//! reads the head and plans again, as it would have without the guess.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::head_fields::HeadFields;

/// Sessions remembered at most; past it the memory starts over.
const CAPACITY: usize = 4096;

/// The head fields of recently appended-to sessions.
#[derive(Debug, Default)]
pub(crate) struct RememberedHeads {
    known: Mutex<HashMap<String, HeadFields>>,
}

impl RememberedHeads {
    /// The remembered head of a session, forgotten as it is handed out.
    pub(crate) fn take(&self, id: &str) -> Option<HeadFields> {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id)
    }

    /// Remembers the head a write of this repository left.
    pub(crate) fn remember(&self, id: &str, fields: HeadFields) {
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        if known.len() >= CAPACITY && !known.contains_key(id) {
            known.clear();
        }
        known.insert(id.to_owned(), fields);
    }

    /// Forgets a session's head (another kind of write changed it).
    pub(crate) fn forget(&self, id: &str) {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }
}
