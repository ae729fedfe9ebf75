//! The heads a repository's own writes left, so the next append to the
//! same session can plan without reading first.
//!
//! A remembered head is only a guess. The store's write checks every head
//! field the plan depends on against the stored head (version, last seq,
//! counters, status, expiry, owner), and that the session holds none of
//! the events the plan took for new (a plan from a remembered head has not
//! read the held ids). When a check fails the store writes nothing, and
//! the append reads the head and plans again, as it would have without the
//! guess. A guess is handed out once ([`RememberedHeads::take`]), so two
//! appends never plan from the same one.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Sessions a repository remembers heads of unless its builder says
/// otherwise; past its capacity the memory starts over.
pub const DEFAULT_REMEMBERED_HEADS: usize = 4096;

/// The heads (of a store's own type `H`) of recently appended-to sessions.
#[derive(Debug)]
pub struct RememberedHeads<H> {
    known: Mutex<HashMap<String, H>>,
    capacity: usize,
}

impl<H> Default for RememberedHeads<H> {
    fn default() -> Self {
        Self::with_capacity(DEFAULT_REMEMBERED_HEADS)
    }
}

impl<H> RememberedHeads<H> {
    /// A memory of at most `capacity` sessions' heads (0 remembers none:
    /// every append reads its head first).
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            known: Mutex::new(HashMap::new()),
            capacity,
        }
    }

    /// The remembered head of a session, forgotten as it is handed out.
    pub fn take(&self, id: &str) -> Option<H> {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id)
    }

    /// Remembers the head a write of this repository left.
    pub fn remember(&self, id: &str, head: H) {
        if self.capacity == 0 {
            return;
        }
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        if known.len() >= self.capacity && !known.contains_key(id) {
            known.clear();
        }
        known.insert(id.to_owned(), head);
    }

    /// Forgets a session's head (another kind of write changed it).
    pub fn forget(&self, id: &str) {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_head_is_handed_out_once() {
        let heads = RememberedHeads::default();
        heads.remember("s1", 7u64);
        assert_eq!(heads.take("s1"), Some(7));
        assert_eq!(heads.take("s1"), None);
    }

    #[test]
    fn forgetting_drops_the_guess_and_the_memory_stays_bounded() {
        let heads = RememberedHeads::default();
        heads.remember("s1", 1u64);
        heads.forget("s1");
        assert_eq!(heads.take("s1"), None);
        for n in 0..=DEFAULT_REMEMBERED_HEADS as u64 {
            heads.remember(&n.to_string(), n);
        }
        let known = heads.known.lock().unwrap_or_else(PoisonError::into_inner);
        assert!(
            known.len() <= DEFAULT_REMEMBERED_HEADS,
            "{} heads remembered",
            known.len()
        );
    }

    #[test]
    fn the_capacity_bounds_the_memory_and_zero_remembers_nothing() {
        let heads = RememberedHeads::with_capacity(3);
        for n in 0..3u64 {
            heads.remember(&n.to_string(), n);
        }
        assert_eq!(heads.take("2"), Some(2), "three fit");
        heads.remember("2", 2);
        heads.remember("3", 3);
        assert_eq!(heads.take("0"), None, "the fourth starts the memory over");
        assert_eq!(heads.take("3"), Some(3));

        let none = RememberedHeads::with_capacity(0);
        none.remember("s1", 1u64);
        assert_eq!(none.take("s1"), None);
    }
}
