//! Writing a batch: per-session locks, the ids a session already holds, commit and indexing.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

use serde_json::{json, Value};
use session_core::plan::Stored;
use session_core::state::SharedDelta;

use crate::body;
use crate::error::BACKEND;
use crate::events::u64_field;
use crate::head::{Head, Loaded};
use crate::repository::{EsRepository, Memo, LOCK_STRIPES};

/// The memo of `head`'s pending batch (`None` when it has none).
fn batch_key(head: &Head) -> Option<(String, String, u64)> {
    head.pending
        .iter()
        .map(|p| p.seq)
        .max()
        .map(|seq| (head.session.id.to_string(), head.inc.clone(), seq))
}

impl EsRepository {
    /// Serializes this process's writers of one session (other processes are kept out by the CAS).
    pub(crate) async fn lock(&self, id: &str) -> tokio::sync::MutexGuard<'_, Memo> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        id.hash(&mut h);
        let i = usize::try_from(h.finish() % LOCK_STRIPES as u64).unwrap_or(0);
        self.locks[i].lock().await
    }

    /// Commits `new` over `old`: first makes sure `old`'s pending batch is
    /// indexed (it is about to leave the head), then swaps.
    pub(crate) async fn commit(
        &self,
        memo: &Memo,
        old: &Loaded,
        new: &Head,
    ) -> session_core::Result<bool> {
        if !old.head.pending.is_empty() && *memo != batch_key(&old.head) {
            self.index_pending(&old.head).await?;
        }
        self.heads().put(Some(old), new).await
    }

    /// After a commit: the shared scopes, then the batch's event documents.
    /// The write is already durable; a failure here is repaired by the next
    /// write (documents) or reported (shared scopes).
    pub(crate) async fn after_commit(
        &self,
        memo: &mut Memo,
        head: &Head,
        shared: &SharedDelta,
    ) -> session_core::Result<()> {
        self.apply_shared(&head.session.app, &head.session.user_id, shared)
            .await?;
        match self.index_pending(head).await {
            Ok(()) => *memo = batch_key(head),
            Err(e) => {
                tracing::warn!(
                    backend = BACKEND,
                    session_id = %head.session.id,
                    error = %e,
                    "committed batch not indexed yet; the next write of the session indexes it"
                );
            }
        }
        Ok(())
    }

    /// Which of `ids` (distinct) the session already holds, for the
    /// planner: the live pending batch from the head, the rest by one
    /// `terms` search of the session's indexed events.
    pub(crate) async fn held(
        &self,
        head: &Head,
        ids: &[&str],
    ) -> session_core::Result<HashMap<String, Stored>> {
        let wanted: HashSet<&str> = ids.iter().copied().collect();
        let mut held = HashMap::new();
        for p in &head.pending {
            if !head.is_dead(p.seq) && wanted.contains(p.id.as_str()) {
                let stored = Stored {
                    seq: p.seq,
                    tokens: p.tokens,
                };
                held.insert(p.id.clone(), stored);
            }
        }
        let wanted: Vec<&str> = ids
            .iter()
            .copied()
            .filter(|i| !held.contains_key(*i))
            .collect();
        if wanted.is_empty() || head.indexed_max() == 0 {
            return Ok(held);
        }
        let mut hits = Vec::new();
        for (filter, must_not) in body::session_events(
            &head.session.id,
            &head.inc,
            0,
            head.indexed_max(),
            &head.dead,
        ) {
            for chunk in wanted.chunks(body::MAX_TERMS) {
                let mut filter = filter.clone();
                filter.push(json!({"terms": {"event_id": chunk}}));
                hits.extend(
                    self.collect(
                        "events",
                        &body::bool_query(filter, must_not.clone()),
                        &json!([{"seq": "asc"}]),
                        &json!(["seq", "event_id", "tokens"]),
                        0,
                        chunk.len(),
                        &mut |_| true,
                        &head.session.id,
                    )
                    .await?,
                );
            }
        }
        for h in hits {
            let what = format!("session {} event", head.session.id);
            let seq = u64_field(&h.source, "seq", &what)?;
            let tokens = u32::try_from(u64_field(&h.source, "tokens", &what)?).unwrap_or(u32::MAX);
            let eid = h
                .source
                .get("event_id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            held.insert(eid, Stored { seq, tokens });
        }
        Ok(held)
    }
}
