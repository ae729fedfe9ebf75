//! The lock stripes part ([`LockStripes`]): how writers of one session take
//! turns. In one process they queue on a lock; between processes the
//! compare-and-swap decides, with a [`backoff`] between rounds.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use crate::head::Head;

/// Writers of one session in one process queue on one of these locks, so
/// compare-and-swap conflicts only happen between processes.
const LOCK_STRIPES: usize = 64;

/// What a lock stripe remembers: the last pending batch this process indexed
/// (session, incarnation, highest seq), so its next write need not index it again.
#[derive(Debug, Default)]
pub(crate) struct Memo(Option<(String, String, u64)>);

impl Memo {
    /// The memo of `head`'s pending batch (`None` when it has none).
    fn key(head: &Head) -> Option<(String, String, u64)> {
        head.pending
            .iter()
            .map(|p| p.seq)
            .max()
            .map(|seq| (head.session.id.to_string(), head.inc.clone(), seq))
    }

    /// Whether `head`'s pending batch is the one this process last indexed.
    pub(crate) fn indexed(&self, head: &Head) -> bool {
        self.0 == Self::key(head)
    }

    /// Remembers `head`'s pending batch as indexed.
    pub(crate) fn remember(&mut self, head: &Head) {
        self.0 = Self::key(head);
    }
}

/// The per-session write locks of this process (shared by clones of a
/// repository), each with its [`Memo`].
#[derive(Clone)]
pub(crate) struct LockStripes {
    stripes: Arc<[tokio::sync::Mutex<Memo>]>,
}

impl LockStripes {
    /// Fresh stripes, nothing remembered.
    pub(crate) fn new() -> Self {
        Self {
            stripes: (0..LOCK_STRIPES)
                .map(|_| tokio::sync::Mutex::new(Memo::default()))
                .collect(),
        }
    }

    /// Serializes this process's writers of one session (other processes are kept out by the CAS).
    pub(crate) async fn lock(&self, id: &str) -> tokio::sync::MutexGuard<'_, Memo> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        id.hash(&mut h);
        let i = usize::try_from(h.finish() % LOCK_STRIPES as u64).unwrap_or(0);
        self.stripes[i].lock().await
    }
}

/// Called at the top of every compare-and-swap loop: sleeps (with jitter) from the second round on.
pub(crate) async fn backoff(attempt: &mut u32) {
    if *attempt > 0 {
        let jitter = u64::try_from(uuid::Uuid::new_v4().as_u128() % 1000).unwrap_or(0);
        let micros = (250u64 << *attempt) + jitter * u64::from(*attempt);
        tokio::time::sleep(Duration::from_micros(micros)).await;
    }
    *attempt = (*attempt + 1).min(8);
}
