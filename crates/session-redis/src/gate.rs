//! Contention: per-session write turns inside one repository, and the paced retries of a moved head.
//!
//! A write reads the head, plans, and persists only if the head did not
//! move (compare-and-swap). Writers of one repository (the tasks of one
//! process) take turns per session, so they never make each other retry;
//! writers of other processes still can, and a write that lost retries
//! after a short random pause, at most [`ATTEMPTS`] times.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// How many times a write reads and re-plans when its head keeps moving.
pub(crate) const ATTEMPTS: usize = 64;

/// The sessions being written by this repository, each with its turn lock.
#[derive(Debug, Default)]
pub(crate) struct Gates {
    busy: Mutex<HashMap<String, Arc<AsyncMutex<()>>>>,
}

/// A write's turn on one session; the next writer's turn comes when it drops.
pub(crate) struct Turn<'a> {
    gates: &'a Gates,
    id: String,
    _held: OwnedMutexGuard<()>,
}

impl Gates {
    /// Waits for the turn to write session `id`.
    pub(crate) async fn enter(&self, id: &str) -> Turn<'_> {
        let lock = self
            .busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(id.to_owned())
            .or_default()
            .clone();
        Turn {
            gates: self,
            id: id.to_owned(),
            _held: lock.lock_owned().await,
        }
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut busy = self
            .gates
            .busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Held by the map and this turn only: nobody waits, forget the session.
        if busy
            .get(&self.id)
            .is_some_and(|lock| Arc::strong_count(lock) <= 2)
        {
            busy.remove(&self.id);
        }
    }
}

/// The attempts of one write: the first at once, each retry after a random
/// pause that grows with the attempts made (up to about 13 ms).
#[derive(Debug, Default)]
pub(crate) struct Attempts {
    made: usize,
}

impl Attempts {
    /// Waits before the next attempt; `false` once [`ATTEMPTS`] were made.
    pub(crate) async fn next(&mut self) -> bool {
        if self.made >= ATTEMPTS {
            return false;
        }
        if self.made > 0 {
            let cap = 100u64 << self.made.min(7);
            let pause = std::collections::hash_map::RandomState::new().hash_one(self.made) % cap;
            tokio::time::sleep(Duration::from_micros(pause)).await;
        }
        self.made += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_session_is_forgotten_when_its_last_writer_leaves() {
        let gates = Gates::default();
        {
            let _a = gates.enter("s1").await;
            let _b = gates.enter("s2").await;
            assert_eq!(
                gates
                    .busy
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .len(),
                2
            );
        }
        assert!(gates
            .busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty());
    }

    #[tokio::test]
    async fn attempts_are_bounded() {
        let mut attempts = Attempts { made: ATTEMPTS - 1 };
        assert!(attempts.next().await);
        assert!(!attempts.next().await);
    }
}
