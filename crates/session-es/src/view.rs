//! The views part ([`Views`]): reads of one session's events, the parts in
//! hand and searched, and the window a filter cuts.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{json, Value};
use session_core::{EventFilter, EventView, Page, SessionError, SessionEvent};

use crate::body;
use crate::engine::TextFieldCell;
use crate::events::decode_event;
use crate::head::Head;
use crate::index::{Index, CHUNK};

/// A view segment whose events come from searches: one query per
/// consecutive seq window (see [`body::session_events`]), in seq order.
struct Remote {
    queries: Vec<Value>,
}

/// The parts of a view, in order: events already in hand, then searched ones, then in hand.
struct Parts {
    before: Vec<SessionEvent>,
    remote: Remote,
    after: Vec<SessionEvent>,
}

/// Reads of one session's events from the events index, merged with what
/// its head holds (the pending batch, the context layout).
#[derive(Clone)]
pub(crate) struct Views {
    index: Index,
    /// The field type of the literal search text, as the events index has it.
    text_field: Arc<TextFieldCell>,
}

impl Views {
    /// The views of the events index `index`.
    pub(crate) fn new(index: Index, text_field: Arc<TextFieldCell>) -> Self {
        Self { index, text_field }
    }

    /// Events of one session's view part, `skip` then `take`, in seq order (or reversed).
    async fn remote_events(
        &self,
        head: &Head,
        remote: &Remote,
        reverse: bool,
        mut skip: usize,
        take: usize,
    ) -> session_core::Result<Vec<SessionEvent>> {
        let sort = if reverse {
            json!([{"seq": "desc"}])
        } else {
            json!([{"seq": "asc"}])
        };
        let id = &head.session.id;
        let mut queries: Vec<&Value> = remote.queries.iter().collect();
        if reverse {
            queries.reverse();
        }
        let several = queries.len() > 1;
        let mut out = Vec::new();
        for query in queries {
            let want = take.saturating_sub(out.len());
            if want == 0 {
                break;
            }
            if several && skip > 0 {
                // Skip whole windows by their count.
                let n = self.index.count(query, id).await?;
                if n <= skip {
                    skip -= n;
                    continue;
                }
            }
            let hits = self
                .index
                .collect(
                    query,
                    &sort,
                    &json!(["seq", "body"]),
                    skip,
                    want,
                    &mut |_| true,
                    id,
                )
                .await?;
            skip = 0;
            for h in &hits {
                out.push(decode_event(id, &h.source)?);
            }
        }
        Ok(out)
    }

    /// How many events the searched part of a view holds.
    async fn count_remote(&self, head: &Head, remote: &Remote) -> session_core::Result<usize> {
        let mut total = 0usize;
        for q in &remote.queries {
            total = total.saturating_add(self.index.count(q, &head.session.id).await?);
        }
        Ok(total)
    }

    /// Cuts the window a filter asks for out of `parts`.
    async fn window(
        &self,
        head: &Head,
        parts: Parts,
        filter: &EventFilter,
    ) -> session_core::Result<Page<SessionEvent>> {
        let m = filter.matcher();
        let before: Vec<SessionEvent> = parts.before.into_iter().filter(|e| m.matches(e)).collect();
        let after: Vec<SessionEvent> = parts.after.into_iter().filter(|e| m.matches(e)).collect();
        if let Some(n) = filter.last_n {
            // The newest n: walk the parts backwards.
            let mut newest: Vec<SessionEvent> = after.iter().rev().take(n).cloned().collect();
            let want = n - newest.len();
            let remote = self
                .remote_events(head, &parts.remote, true, 0, want)
                .await?;
            newest.extend(remote);
            let want = n.saturating_sub(newest.len());
            newest.extend(before.iter().rev().take(want).cloned());
            newest.reverse();
            return Ok(Page::paginate(newest, filter.page, filter.page_size));
        }
        let Some(offset) = filter.page.checked_mul(filter.page_size) else {
            return Ok(Page::empty(filter.page, filter.page_size));
        };
        let take = filter.page_size.saturating_add(1);
        let mut items: Vec<SessionEvent> = before.iter().skip(offset).take(take).cloned().collect();
        let mut skip = offset.saturating_sub(before.len());
        if items.len() < take {
            let remote = self
                .remote_events(head, &parts.remote, false, skip, take - items.len())
                .await?;
            if remote.is_empty() && skip > 0 {
                // Everything remote was skipped (or there was nothing): count it to skip into `after`.
                let counted = self.count_remote(head, &parts.remote).await?;
                skip = skip.saturating_sub(counted);
            } else {
                skip = 0;
            }
            items.extend(remote);
        }
        if items.len() < take {
            items.extend(after.iter().skip(skip).take(take - items.len()).cloned());
        }
        Ok(Page::from_overfetch(items, filter.page, filter.page_size))
    }

    /// The parts of a view of one session, with the filter's criteria in the remote query.
    async fn view_parts(
        &self,
        head: &Head,
        view: EventView,
        filter: &EventFilter,
    ) -> session_core::Result<Parts> {
        let pending = head.pending_events()?;
        // The view past the cursor: the base entries after it, and the seq
        // after which appended events belong to it.
        let (base, after_seq): (&[[u64; 2]], u64) = match (view, filter.after) {
            (EventView::Archive, after) => (&[], after.unwrap_or(0)),
            (EventView::Context, None) => (&head.base, head.mark),
            (EventView::Context, Some(a)) => match head.base.iter().position(|[s, _]| *s == a) {
                Some(i) => (
                    head.base.get(i.saturating_add(1)..).unwrap_or_default(),
                    head.mark,
                ),
                None if a > head.mark => (&[], a),
                None => return Err(filter.cursor_left_context()),
            },
        };
        let pending: Vec<SessionEvent> = pending
            .into_iter()
            .filter(|e| e.seq > after_seq || base.iter().any(|[s, _]| *s == e.seq))
            .collect();
        let criteria = body::filter_clauses(filter, self.text_field.get())?;
        let queries = body::session_events(
            &head.session.id,
            &head.inc,
            after_seq,
            head.indexed_max(),
            &head.dead,
        )
        .into_iter()
        .map(|(mut clauses, must_not)| {
            clauses.extend(criteria.iter().cloned());
            body::bool_query(clauses, must_not)
        })
        .collect();
        let remote = Remote { queries };
        let (before, after) = match view {
            EventView::Archive => (Vec::new(), pending),
            EventView::Context => {
                let mut by_seq: HashMap<u64, SessionEvent> =
                    pending.into_iter().map(|e| (e.seq, e)).collect();
                let wanted: Vec<u64> = base
                    .iter()
                    .map(|[s, _]| *s)
                    .filter(|s| !by_seq.contains_key(s))
                    .collect();
                for e in self.by_seq(head, &wanted).await? {
                    by_seq.insert(e.seq, e);
                }
                let before = base
                    .iter()
                    .filter_map(|[s, _]| by_seq.get(s).cloned())
                    .collect();
                let mut after: Vec<SessionEvent> =
                    by_seq.into_values().filter(|e| e.seq > after_seq).collect();
                after.sort_by_key(|e| e.seq);
                (before, after)
            }
        };
        Ok(Parts {
            before,
            remote,
            after,
        })
    }

    /// The page of a session's events a filter asks for.
    pub(crate) async fn page(
        &self,
        head: &Head,
        filter: &EventFilter,
    ) -> session_core::Result<Page<SessionEvent>> {
        let parts = self.view_parts(head, filter.view, filter).await?;
        self.window(head, parts, filter).await
    }

    /// Every live event of a session, in seq order.
    pub(crate) async fn all(&self, head: &Head) -> session_core::Result<Vec<SessionEvent>> {
        let parts = self
            .view_parts(head, EventView::Archive, &EventFilter::archive())
            .await?;
        let mut out = self
            .remote_events(head, &parts.remote, false, 0, usize::MAX)
            .await?;
        out.extend(parts.after);
        Ok(out)
    }

    /// Reads event documents by seq (realtime `_mget`), in the given order; missing ones are an error.
    async fn by_seq(&self, head: &Head, seqs: &[u64]) -> session_core::Result<Vec<SessionEvent>> {
        let id = &head.session.id;
        let mut out = Vec::with_capacity(seqs.len());
        for chunk in seqs.chunks(CHUNK) {
            let ids: Vec<String> = chunk
                .iter()
                .map(|s| body::event_doc_id(id, &head.inc, *s))
                .collect();
            let reply = self
                .index
                .post("_mget", Some(json!({ "ids": ids }).to_string()))
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
