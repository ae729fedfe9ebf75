//! The event documents part ([`EventDocs`]): decoding, bulk creation of
//! committed batches, the event ids a session already holds, and cleanup.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{json, Value};
use session_core::plan::Stored;
use session_core::{SessionError, SessionEvent};

use crate::body;
use crate::client::{bulk_items, ItemResult};
use crate::engine::TextFieldCell;
use crate::error::BACKEND;
use crate::head::Head;
use crate::index::{Index, Refresh};

/// Largest `_bulk` body sent at once (well under the default 100 MB `http.max_content_length`).
const BULK_BYTES: usize = 16 * 1024 * 1024;

/// A required unsigned field of a `_source`; `what` names the document in the error.
pub(crate) fn u64_field(source: &Value, field: &str, what: &str) -> session_core::Result<u64> {
    source
        .get(field)
        .and_then(Value::as_u64)
        .ok_or_else(|| SessionError::serialization(what.to_owned(), format!("no `{field}`")))
}

/// Decodes an event document's `_source`.
pub(crate) fn decode_event(session_id: &str, source: &Value) -> session_core::Result<SessionEvent> {
    let seq = u64_field(source, "seq", &format!("session {session_id} event"))?;
    let body = source.get("body").and_then(Value::as_str).ok_or_else(|| {
        SessionError::serialization(format!("session {session_id} seq {seq}"), "no body")
    })?;
    SessionEvent::decode_stored(session_id, seq, body)
}

/// The event documents (`{prefix}-events`, id `session|incarnation|seq`):
/// an index of committed batches, written with `op_type=create`.
#[derive(Clone)]
pub(crate) struct EventDocs {
    index: Index,
    refresh: Refresh,
    /// The field type of the literal search text, as the events index has it.
    text_field: Arc<TextFieldCell>,
}

impl EventDocs {
    /// The event documents of the events index `index`, written with `refresh`.
    pub(crate) fn new(index: Index, refresh: Refresh, text_field: Arc<TextFieldCell>) -> Self {
        Self {
            index,
            refresh,
            text_field,
        }
    }

    /// The document of event `e` (stored as `body`) at `seq` of `head`'s incarnation.
    pub(crate) fn doc(
        &self,
        head: &Head,
        seq: u64,
        e: &SessionEvent,
        body: &str,
    ) -> session_core::Result<Value> {
        body::event_doc(head.owner(), seq, e, body, self.text_field.get())
    }

    /// Indexes the pending batch of `head` (create: documents already there are kept).
    pub(crate) async fn index_pending(&self, head: &Head) -> session_core::Result<()> {
        let mut docs = Vec::with_capacity(head.pending.len());
        for p in &head.pending {
            let e = SessionEvent::decode_stored(&head.session.id, p.seq, &p.body)?;
            docs.push((p.seq, self.doc(head, p.seq, &e, &p.body)?));
        }
        self.create(head, docs).await
    }

    /// Creates event documents (`(seq, document)`) in `_bulk` requests of bounded size.
    pub(crate) async fn create(
        &self,
        head: &Head,
        docs: Vec<(u64, Value)>,
    ) -> session_core::Result<()> {
        let mut existed = false;
        let mut body = String::new();
        let flush = |body: &mut String| std::mem::take(body);
        let mut batches = Vec::new();
        for (seq, doc) in docs {
            let id = body::event_doc_id(&head.session.id, &head.inc, seq);
            body::bulk_line(&mut body, "create", self.index.name(), &id, Some(&doc));
            if body.len() >= BULK_BYTES {
                batches.push(flush(&mut body));
            }
        }
        if !body.is_empty() {
            batches.push(flush(&mut body));
        }
        for b in batches {
            let items = self.bulk(b, &head.session.id).await?;
            for item in items {
                match item {
                    ItemResult::Done => {}
                    ItemResult::Exists => existed = true,
                    ItemResult::Failed(e) => return Err(e.into_session_error(&head.session.id)),
                }
            }
        }
        if existed {
            // Another writer created them: make sure its documents are searchable before we go on.
            self.index.refresh(&head.session.id).await?;
        }
        Ok(())
    }

    /// Sends one `_bulk` body and reads every item's outcome.
    async fn bulk(&self, body: String, session_id: &str) -> session_core::Result<Vec<ItemResult>> {
        let reply = self.index.bulk(&[self.refresh.query()], body).await?;
        let body = reply.success(session_id)?;
        bulk_items(&body)
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
                    self.index
                        .collect(
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

    /// Removes the event documents of an incarnation (after a delete or a
    /// re-create): the ids searched, then deleted (best effort).
    pub(crate) async fn drop_incarnation(&self, session_id: &str, inc: &str) {
        let query = json!({"bool": {"filter": [
            {"term": {"session_id": session_id}},
            {"term": {"inc": inc}}
        ]}});
        self.index.delete_matching_quietly(&query, session_id).await;
    }

    /// Removes the event documents of an incarnation at `seqs` (after an
    /// archive prune; the head already marks them dead), by their ids.
    pub(crate) async fn drop_pruned(&self, session_id: &str, inc: &str, seqs: &[u64]) {
        let ids: Vec<String> = seqs
            .iter()
            .map(|s| body::event_doc_id(session_id, inc, *s))
            .collect();
        if let Err(e) = self.index.delete_ids(&ids, session_id).await {
            tracing::warn!(backend = BACKEND, error = %e, "cleanup of pruned documents failed; they stay hidden");
        }
    }

    /// Removes the event documents of an incarnation from seq `from` on (after a rewind).
    pub(crate) async fn drop_rewound(&self, session_id: &str, inc: &str, from: u64) {
        let query = json!({"bool": {"filter": [
            {"term": {"session_id": session_id}},
            {"term": {"inc": inc}},
            {"range": {"seq": {"gte": from}}}
        ]}});
        self.index.delete_matching_quietly(&query, session_id).await;
    }

    /// Removes every event document of a session, whatever its incarnation,
    /// reporting a failure (an erasure checks every one is gone).
    pub(crate) async fn erase_session(&self, session_id: &str) -> session_core::Result<()> {
        self.index
            .delete_matching(&json!({"term": {"session_id": session_id}}), session_id)
            .await
    }
}
