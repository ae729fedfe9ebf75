//! Event documents: decoding, bulk creation of committed batches, reads by seq, counts and cleanup.

use elasticsearch::http::Method;
use serde_json::{json, Value};
use session_core::{SessionError, SessionEvent};

use crate::body;
use crate::client::{bulk_items, ItemResult};
use crate::head::Head;
use crate::repository::EsRepository;

/// Hits fetched per `_search` round trip while collecting results.
pub(crate) const CHUNK: usize = 1000;

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

impl EsRepository {
    /// Indexes the pending batch of `head` (create: documents already there are kept).
    pub(crate) async fn index_pending(&self, head: &Head) -> session_core::Result<()> {
        let mut docs = Vec::with_capacity(head.pending.len());
        for p in &head.pending {
            let e = SessionEvent::decode_stored(&head.session.id, p.seq, &p.body)?;
            docs.push((
                p.seq,
                body::event_doc(head.owner(), p.seq, &e, &p.body, self.text_field.get())?,
            ));
        }
        self.create_events(head, docs).await
    }

    /// Creates event documents in `_bulk` requests of bounded size.
    pub(crate) async fn create_events(
        &self,
        head: &Head,
        docs: Vec<(u64, Value)>,
    ) -> session_core::Result<()> {
        let index = self.index("events");
        let mut existed = false;
        let mut body = String::new();
        let flush = |body: &mut String| std::mem::take(body);
        let mut batches = Vec::new();
        for (seq, doc) in docs {
            let id = body::event_doc_id(&head.session.id, &head.inc, seq);
            body::bulk_line(&mut body, "create", &index, &id, Some(&doc));
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
            self.client
                .send(Method::Post, &format!("{index}/_refresh"), &[], None)
                .await?
                .success(&head.session.id)?;
        }
        Ok(())
    }

    /// Sends one `_bulk` body and reads every item's outcome.
    async fn bulk(&self, body: String, session_id: &str) -> session_core::Result<Vec<ItemResult>> {
        let reply = self
            .client
            .send(Method::Post, "_bulk", &[self.refresh_param()], Some(body))
            .await?;
        let body = reply.success(session_id)?;
        bulk_items(&body)
    }

    /// Deletes a session's head by compare-and-swap if `still` holds for the
    /// current head (re-read after every lost race), then its documents.
    /// Whether this call deleted it.
    pub(crate) async fn delete_head(
        &self,
        id: &str,
        still: impl Fn(&Head) -> bool,
    ) -> session_core::Result<bool> {
        match self.heads().delete_if(id, still).await? {
            Some(gone) => {
                self.drop_incarnation(id, &gone.inc).await;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Removes the event documents of an incarnation (after a delete or a
    /// re-create): the ids searched, then deleted (best effort).
    pub(crate) async fn drop_incarnation(&self, session_id: &str, inc: &str) {
        let query = json!({"bool": {"filter": [
            {"term": {"session_id": session_id}},
            {"term": {"inc": inc}}
        ]}});
        self.delete_matching_quietly("events", &query, session_id)
            .await;
    }

    /// Removes the event documents of an incarnation at `seqs` (after an
    /// archive prune; the head already marks them dead), by their ids.
    pub(crate) async fn drop_pruned(&self, session_id: &str, inc: &str, seqs: &[u64]) {
        let ids: Vec<String> = seqs
            .iter()
            .map(|s| body::event_doc_id(session_id, inc, *s))
            .collect();
        if let Err(e) = self.delete_ids("events", &ids, session_id).await {
            tracing::warn!(backend = crate::error::BACKEND, error = %e, "cleanup of pruned documents failed; they stay hidden");
        }
    }

    /// Removes the event documents of an incarnation from seq `from` on (after a rewind).
    pub(crate) async fn drop_rewound(&self, session_id: &str, inc: &str, from: u64) {
        let query = json!({"bool": {"filter": [
            {"term": {"session_id": session_id}},
            {"term": {"inc": inc}},
            {"range": {"seq": {"gte": from}}}
        ]}});
        self.delete_matching_quietly("events", &query, session_id)
            .await;
    }

    /// How many event documents match `query`.
    pub(crate) async fn count_events(
        &self,
        query: &Value,
        session_id: &str,
    ) -> session_core::Result<usize> {
        let reply = self
            .client
            .send(
                Method::Post,
                &format!("{}/_count", self.index("events")),
                &[],
                Some(json!({ "query": query }).to_string()),
            )
            .await?;
        let body = reply.success(session_id)?;
        Ok(body
            .get("count")
            .and_then(Value::as_u64)
            .map_or(0, |c| usize::try_from(c).unwrap_or(usize::MAX)))
    }

    /// Reads event documents by seq (realtime `_mget`), in the given order; missing ones are an error.
    pub(crate) async fn events_by_seq(
        &self,
        head: &Head,
        seqs: &[u64],
    ) -> session_core::Result<Vec<SessionEvent>> {
        let id = &head.session.id;
        let mut out = Vec::with_capacity(seqs.len());
        for chunk in seqs.chunks(CHUNK) {
            let ids: Vec<String> = chunk
                .iter()
                .map(|s| body::event_doc_id(id, &head.inc, *s))
                .collect();
            let reply = self
                .client
                .send(
                    Method::Post,
                    &format!("{}/_mget", self.index("events")),
                    &[],
                    Some(json!({ "ids": ids }).to_string()),
                )
                .await?;
            let body = reply.success(id)?;
            let docs = body
                .get("docs")
                .and_then(Value::as_array)
                .ok_or_else(|| SessionError::serialization("mget response", "no docs array"))?;
            for (doc, seq) in docs.iter().zip(chunk) {
                if doc.get("found") != Some(&Value::Bool(true)) {
                    return Err(SessionError::serialization(
                        format!("session {id} seq {seq}"),
                        "the context names an event whose document is missing",
                    ));
                }
                out.push(decode_event(
                    id,
                    doc.get("_source").unwrap_or(&Value::Null),
                )?);
            }
        }
        Ok(out)
    }
}
