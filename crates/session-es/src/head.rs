//! The head document of a session: what it holds and how a planned write
//! changes it (`heads.rs` reads and writes it by compare-and-swap).
//!
//! One head document per session (index `{prefix}-sessions`) is the commit
//! point: every write is a compare-and-swap of it (`if_seq_no` /
//! `if_primary_term`). The head holds the version, counters, state, the
//! context layout and the *pending batch*: the events of the last committed
//! write, verbatim. Event documents (`{prefix}-events`, id
//! `session|incarnation|seq`, written with `op_type=create`) are an index of
//! committed batches: the writer indexes its batch right after the commit,
//! and any later writer first re-indexes the pending batch it finds (create
//! is idempotent) before replacing it. Readers take the pending batch from
//! the head, so they never miss a committed event, crash or not.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use session_core::plan::{self, EventBatch, NewEvent, RewindPlan};
use session_core::state::apply_delta;
use session_core::{Session, SessionError, SessionEvent, StateMap};

use crate::body::{micros, DocOwner};

/// One event of the pending batch, as committed in the head.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Pending {
    pub(crate) seq: u64,
    pub(crate) id: String,
    pub(crate) tokens: u32,
    pub(crate) body: String,
}

/// The head document's unindexed part: everything about a session but its events.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Head {
    pub(crate) session: Session,
    pub(crate) initial_state: StateMap,
    /// The incarnation: a fresh id per create or import, carried by every event document.
    pub(crate) inc: String,
    pub(crate) last_seq: u64,
    /// Rewound seq ranges (inclusive): their documents may linger until cleaned up.
    #[serde(default)]
    pub(crate) dead: Vec<[u64; 2]>,
    /// The context set by the last replace: `[seq, tokens]` in context order.
    #[serde(default)]
    pub(crate) base: Vec<[u64; 2]>,
    /// The context is `base` followed by every live event with a seq above `mark`.
    #[serde(default)]
    pub(crate) mark: u64,
    /// The last committed batch (its event documents may not be indexed yet).
    #[serde(default)]
    pub(crate) pending: Vec<Pending>,
    /// The context's history: one record per context replace, oldest first
    /// (what tells archive reads when each event left the context).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) changes: Vec<session_core::ContextChange>,
}

impl Head {
    /// A head for a new incarnation: a fresh `inc`, no events, no context.
    pub(crate) fn new(session: Session, initial_state: StateMap) -> Self {
        Self {
            session,
            initial_state,
            inc: uuid::Uuid::new_v4().simple().to_string(),
            last_seq: 0,
            dead: Vec::new(),
            base: Vec::new(),
            mark: 0,
            pending: Vec::new(),
            changes: Vec::new(),
        }
    }

    /// The highest seq whose event document is guaranteed indexed and visible to search.
    pub(crate) fn indexed_max(&self) -> u64 {
        self.pending
            .iter()
            .map(|p| p.seq)
            .min()
            .map_or(self.last_seq, |s| s - 1)
    }

    /// Whether `seq` lies in a rewound range.
    pub(crate) fn is_dead(&self, seq: u64) -> bool {
        self.dead.iter().any(|[a, b]| (*a..=*b).contains(&seq))
    }

    /// The owner and incarnation the head's event documents carry.
    pub(crate) fn owner(&self) -> DocOwner<'_> {
        DocOwner {
            session_id: &self.session.id,
            inc: &self.inc,
            app: &self.session.app,
            user_id: &self.session.user_id,
        }
    }

    /// The pending events that are live, decoded.
    pub(crate) fn pending_events(&self) -> session_core::Result<Vec<SessionEvent>> {
        self.pending
            .iter()
            .filter(|p| !self.is_dead(p.seq))
            .map(|p| SessionEvent::decode_stored(&self.session.id, p.seq, &p.body))
            .collect()
    }

    /// The sessions-index document.
    pub(crate) fn doc(&self) -> session_core::Result<Value> {
        let s = &self.session;
        let head = serde_json::to_string(self)
            .map_err(|e| SessionError::serialization(format!("session {} head", s.id), e))?;
        let mut doc = json!({
            "sid": s.id,
            "app": s.app,
            "user_id": s.user_id,
            "status": s.status.as_str(),
            "inc": self.inc,
            "updated_us": micros(s.updated_at),
            "head": head,
        });
        if let Some(map) = doc.as_object_mut() {
            if let Some(k) = &s.key {
                map.insert("key".into(), json!(k));
            }
            if let Some(t) = s.expires_at {
                map.insert("expires_us".into(), json!(micros(t)));
            }
        }
        Ok(doc)
    }

    /// Reads a head from a sessions-index `_source`.
    pub(crate) fn from_source(id: &str, source: &Value) -> session_core::Result<Self> {
        let text = source
            .get("head")
            .and_then(Value::as_str)
            .ok_or_else(|| SessionError::serialization(format!("session {id}"), "no head"))?;
        serde_json::from_str(text)
            .map_err(|e| SessionError::serialization(format!("session {id} head"), e))
    }

    /// What the planner needs to know of this head.
    pub(crate) fn plan(&self) -> plan::Head {
        plan::Head::new(
            self.session.id.clone(),
            self.last_seq,
            self.session.version,
            self.session.status,
        )
        .with_event_count(self.session.event_count)
        .with_event_bytes(self.session.event_bytes)
    }

    /// The version a write planned and its activity time.
    pub(crate) fn stamp(&mut self, version: u64, now: DateTime<Utc>) {
        self.session.version = version;
        self.session.updated_at = self.session.updated_at.max(now);
    }

    /// Records the planned new events of `batch` as the pending batch, with
    /// the highest seq after them and the session-scope state they change.
    pub(crate) fn add_events(
        &mut self,
        batch: &EventBatch,
        new: &[NewEvent],
        last_seq: u64,
        state: &StateMap,
    ) {
        self.pending = new
            .iter()
            .map(|n| {
                let e = &batch.events[n.index];
                Pending {
                    seq: n.seq,
                    id: e.id.clone(),
                    tokens: e.token_estimate,
                    body: batch.bodies[n.index].clone(),
                }
            })
            .collect();
        self.last_seq = last_seq;
        let added = u64::try_from(new.len()).unwrap_or(u64::MAX);
        self.session.event_count = self.session.event_count.saturating_add(added);
        self.session.event_bytes = self
            .session
            .event_bytes
            .saturating_add(batch.added_bytes(new));
        apply_delta(&mut self.session.state, state);
    }

    /// Makes `context` (`[seq, tokens]` in context order, `total` tokens) the context, above every seq so far.
    pub(crate) fn set_context(&mut self, context: Vec<[u64; 2]>, total: u64) {
        self.base = context;
        self.mark = self.last_seq;
        self.session.context_tokens = total;
    }

    /// Drops every event from seq `from` on: state replayed over `kept` (the
    /// live events before it), counters recomputed, the range marked dead.
    pub(crate) fn rewind_to(
        &mut self,
        from: u64,
        kept: &[&SessionEvent],
    ) -> session_core::Result<()> {
        self.session.event_bytes = SessionEvent::stored_bytes_of(kept.iter().copied())?;
        self.session.state = RewindPlan::state(
            &self.initial_state,
            kept.iter().filter_map(|e| e.state_delta.as_ref()),
        );
        self.session.event_count = u64::try_from(kept.len()).unwrap_or(u64::MAX);
        self.base.retain(|[s, _]| *s < from);
        let tail_tokens: u64 = kept
            .iter()
            .filter(|e| e.seq > self.mark)
            .map(|e| u64::from(e.token_estimate))
            .sum();
        self.session.context_tokens = self.base.iter().map(|[_, t]| *t).sum::<u64>() + tail_tokens;
        self.dead.push([from, self.last_seq]);
        self.dead = crate::body::merge_ranges(&self.dead);
        self.pending.clear();
        Ok(())
    }

    /// Drops the live events at `gone` (an archive prune) that took
    /// `bytes` as stored: their seqs marked dead, the counters lowered;
    /// context and state stay.
    pub(crate) fn prune(&mut self, gone: &[u64], bytes: u64) {
        self.session.event_bytes = self.session.event_bytes.saturating_sub(bytes);
        let removed = u64::try_from(gone.len()).unwrap_or(u64::MAX);
        self.session.event_count = self.session.event_count.saturating_sub(removed);
        self.dead.extend(gone.iter().map(|s| [*s, *s]));
        self.dead = crate::body::merge_ranges(&self.dead);
        self.pending.retain(|p| !gone.contains(&p.seq));
    }

    /// The context's seqs in order, given every live event of the session.
    pub(crate) fn context_seqs(&self, events: &[SessionEvent]) -> Vec<u64> {
        let mut context: Vec<u64> = self.base.iter().map(|[s, _]| *s).collect();
        context.extend(events.iter().map(|e| e.seq).filter(|s| *s > self.mark));
        context
    }
}

/// A head as read, with the coordinates a compare-and-swap needs.
#[derive(Debug, Clone)]
pub(crate) struct Loaded {
    pub(crate) head: Head,
    pub(crate) seq_no: i64,
    pub(crate) primary_term: i64,
}

impl Loaded {
    /// The head with its expiry, as the planner's `readable`/`writable` take it.
    pub(crate) fn with_expiry(self) -> (Self, Option<DateTime<Utc>>) {
        let expires = self.head.session.expires_at;
        (self, expires)
    }

    /// Reads a GET answer: the head in `_source`, with its `_seq_no` and `_primary_term`.
    pub(crate) fn from_get(id: &str, doc: &Value) -> session_core::Result<Self> {
        let what = format!("session {id}");
        let seq_no = doc
            .get("_seq_no")
            .and_then(Value::as_i64)
            .ok_or_else(|| SessionError::serialization(what.clone(), "no _seq_no"))?;
        let primary_term = doc
            .get("_primary_term")
            .and_then(Value::as_i64)
            .ok_or_else(|| SessionError::serialization(what.clone(), "no _primary_term"))?;
        let head = Head::from_source(id, doc.get("_source").unwrap_or(&Value::Null))?;
        Ok(Self {
            head,
            seq_no,
            primary_term,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use session_core::NewSession;

    /// The head of a new session with nothing appended.
    fn fresh_head(session: session_core::Session) -> Head {
        Head {
            session,
            initial_state: StateMap::new(),
            inc: "i".into(),
            last_seq: 0,
            dead: Vec::new(),
            base: Vec::new(),
            mark: 0,
            pending: Vec::new(),
            changes: Vec::new(),
        }
    }

    fn fixture(name: &str) -> Value {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// Every field a head document can carry (key and expiry set) is in the
    /// sessions mapping: a strict mapping would refuse the document.
    #[test]
    fn every_head_document_field_is_mapped() {
        let s = NewSession::new("a", "u", Utc::now())
            .unwrap()
            .with_key("k")
            .unwrap()
            .to_session(Utc::now());
        assert!(s.expires_at.is_some() && s.key.is_some());
        let head = fresh_head(s);
        let doc = head.doc().unwrap();
        let mapping = crate::body::sessions_mapping();
        let props = mapping["mappings"]["properties"].as_object().unwrap();
        for key in doc.as_object().unwrap().keys() {
            assert!(
                props.contains_key(key),
                "{key} is not in the sessions mapping"
            );
        }
        assert!(doc.get("key").is_some() && doc.get("expires_us").is_some());
    }

    #[test]
    fn a_get_answer_gives_the_compare_and_swap_coordinates() {
        let s = NewSession::new("a", "u", Utc::now())
            .unwrap()
            .to_session(Utc::now());
        let head = fresh_head(s);
        // The documented GET answer, with our head document as its source.
        let mut doc = fixture("get_found.json");
        doc["_source"] = head.doc().unwrap();
        let l = Loaded::from_get("s", &doc).unwrap();
        assert_eq!(l.seq_no, doc["_seq_no"].as_i64().unwrap());
        assert_eq!(l.primary_term, doc["_primary_term"].as_i64().unwrap());
        // The documented answer as is: not a head; reported, not panicked on.
        let err = Loaded::from_get("s", &fixture("get_found.json")).unwrap_err();
        assert_eq!(err.kind(), session_core::ErrorKind::Serialization);
        assert!(err.to_string().contains("session s"), "{err}");
    }

    #[test]
    fn indexed_max_stops_below_the_pending_batch() {
        let s = NewSession::new("a", "u", Utc::now())
            .unwrap()
            .to_session(Utc::now());
        let mut h = Head {
            session: s,
            initial_state: StateMap::new(),
            inc: "i".into(),
            last_seq: 9,
            dead: vec![[3, 4]],
            base: Vec::new(),
            mark: 0,
            pending: Vec::new(),
            changes: Vec::new(),
        };
        assert_eq!(h.indexed_max(), 9);
        h.pending = vec![
            Pending {
                seq: 8,
                id: "a".into(),
                tokens: 1,
                body: "{}".into(),
            },
            Pending {
                seq: 9,
                id: "b".into(),
                tokens: 1,
                body: "{}".into(),
            },
        ];
        assert_eq!(h.indexed_max(), 7);
        assert!(h.is_dead(3) && h.is_dead(4) && !h.is_dead(5));
        let doc = h.doc().unwrap();
        let back = Head::from_source("x", &doc).unwrap();
        assert_eq!(back.pending.len(), 2);
        assert_eq!(back.dead, vec![[3, 4]]);
        assert_eq!(doc["expires_us"], micros(h.session.expires_at.unwrap()));
    }

    #[test]
    fn a_planned_append_becomes_the_pending_batch() {
        use session_core::plan::AppendPlan;
        use session_core::{Limits, Message};
        let s = NewSession::new("a", "u", Utc::now())
            .unwrap()
            .to_session(Utc::now());
        let mut h = Head::new(s, StateMap::new());
        let mut e = SessionEvent::new(Message::user("hi"));
        e.state_delta = serde_json::json!({"k": 1, "user:x": 2})
            .as_object()
            .cloned();
        let batch = EventBatch::new(vec![e.clone(), e], &Limits::default()).unwrap();
        let plan = AppendPlan::new(&h.plan(), &batch, &std::collections::HashMap::new()).unwrap();
        h.add_events(&batch, &plan.new, plan.last_seq, &plan.state.session);
        h.stamp(plan.version, Utc::now());
        assert_eq!(h.pending.len(), 1, "a repeated id is written once");
        assert_eq!(
            (h.last_seq, h.session.event_count, h.session.version),
            (1, 1, 1)
        );
        assert_eq!(h.pending[0].body, batch.bodies[0]);
        assert_eq!(h.session.state.get("k"), Some(&serde_json::json!(1)));
        assert!(
            h.session.state.get("user:x").is_none(),
            "shared keys live in their scope documents"
        );
    }
}
