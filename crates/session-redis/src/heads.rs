//! Session heads: each session's head hash and state, the reads a write
//! plans from, the sessions reads return, and the heads this repository's
//! own appends left.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use session_core::plan::{RememberedHeads, Stored};
use session_core::{
    ErrorKind, Page, Session, SessionEvent, SessionId, SessionQuery, SharedClock, StateMap,
};

use crate::conn::Conn;
use crate::decode::{decode_session, decode_state};
use crate::error::{corrupt, map_err};
use crate::head_fields::{HeadFields, HEAD_FIELDS};
use crate::keys::{KeySpace, ARCHIVE, CONTEXT, DELTAS, EVENTS, HEAD, INITIAL, INVOCATIONS, STATE};
use crate::scripts::{Call, Scripts};

/// The session heads: reads of each session's head hash (with what a
/// write plans from), and the heads this repository's appends left.
#[derive(Clone)]
pub(crate) struct Heads {
    conn: Conn,
    keys: KeySpace,
    scripts: Arc<Scripts>,
    clock: SharedClock,
    remembered: Arc<RememberedHeads<HeadFields>>,
}

/// What a write read: the head fields and which ids of its batch the session holds.
#[derive(Debug)]
pub(crate) struct WriteRead {
    /// The head fields.
    pub(crate) fields: HeadFields,
    /// The held ids of the batch.
    pub(crate) stored: HashMap<String, Stored>,
}

/// What a rewind read: the head fields, the first seq of the invocation,
/// the initial state and each event's session-scope delta by seq.
#[derive(Debug)]
pub(crate) struct RewindRead {
    /// The head fields.
    pub(crate) fields: HeadFields,
    /// The first seq of the invocation, if the archive holds it.
    pub(crate) first_seq: Option<u64>,
    /// The initial state.
    pub(crate) initial: StateMap,
    /// Stored deltas by seq.
    pub(crate) deltas: HashMap<u64, String>,
}

/// What a prune read: the head fields, and where each seq it names stands.
#[derive(Debug)]
pub(crate) struct PruneRead {
    /// The head fields.
    pub(crate) fields: HeadFields,
    /// Seq → (whether it is in the context, whether rewind replays it),
    /// for the seqs the archive holds.
    pub(crate) standing: HashMap<u64, (bool, bool)>,
    /// Whether the head's version changed while the seqs were read: the
    /// standing may then belong to a later version than the fields.
    pub(crate) moved: bool,
}

/// A stored session with its head hash, and its expiry.
pub(crate) type Found = ((HashMap<String, String>, Session), Option<DateTime<Utc>>);

/// The replies of a rewind's read: head fields, first seq, initial state, deltas.
type RewindReply = (
    Vec<Option<String>>,
    Option<String>,
    HashMap<String, String>,
    HashMap<u64, String>,
);

impl Heads {
    /// The heads part over `conn`, under `keys`, reading with `scripts`,
    /// expiring by `clock`, remembering up to `remembered` sessions' heads.
    pub(crate) fn new(
        conn: Conn,
        keys: KeySpace,
        scripts: Arc<Scripts>,
        clock: SharedClock,
        remembered: usize,
    ) -> Self {
        Self {
            conn,
            keys,
            scripts,
            clock,
            remembered: Arc::new(RememberedHeads::with_capacity(remembered)),
        }
    }

    /// The key prefix.
    pub(crate) fn prefix(&self) -> &str {
        self.keys.prefix()
    }

    /// The head this repository's last append to `id` left, forgotten as it is handed out.
    pub(crate) fn take_remembered(&self, id: &str) -> Option<HeadFields> {
        self.remembered.take(id)
    }

    /// Remembers the head a write of this repository left.
    pub(crate) fn remember(&self, id: &str, fields: HeadFields) {
        self.remembered.remember(id, fields);
    }

    /// Forgets a session's remembered head (another kind of write changes it).
    pub(crate) fn forget(&self, id: &str) {
        self.remembered.forget(id);
    }

    /// What a rewind of session `id` to before `invocation` depends on, in one round trip.
    pub(crate) async fn read_for_rewind(
        &self,
        id: &str,
        invocation: &str,
    ) -> session_core::Result<RewindRead> {
        let keys = self.keys.session(id);
        let mut c = self.conn.clone();
        let (head, first_seq, initial, deltas): RewindReply = redis::pipe()
            .cmd("HMGET")
            .arg(keys.get(HEAD))
            .arg(&HEAD_FIELDS[..])
            .cmd("HGET")
            .arg(keys.get(INVOCATIONS))
            .arg(invocation)
            .cmd("HGETALL")
            .arg(keys.get(INITIAL))
            .cmd("HGETALL")
            .arg(keys.get(DELTAS))
            .query_async(&mut c)
            .await
            .map_err(map_err)?;
        let first_seq = first_seq
            .map(|s| s.parse::<u64>())
            .transpose()
            .map_err(|e| corrupt(id, &format!("first seq of invocation {invocation}"), e))?;
        Ok(RewindRead {
            fields: HeadFields::from_values(head),
            first_seq,
            initial: decode_state(initial, &format!("session {id} initial state"))?,
            deltas,
        })
    }

    /// What a prune of `seqs` from session `id` plans from, in one round
    /// trip: the head fields, each seq's place in the archive and the
    /// context, and the version again (so a write in between is seen).
    pub(crate) async fn read_for_prune(
        &self,
        id: &str,
        seqs: &[u64],
    ) -> session_core::Result<PruneRead> {
        let keys = self.keys.session(id);
        let mut pipe = redis::pipe();
        pipe.cmd("HMGET").arg(keys.get(HEAD)).arg(&HEAD_FIELDS[..]);
        for seq in seqs {
            pipe.cmd("ZSCORE").arg(keys.get(ARCHIVE)).arg(*seq);
            pipe.cmd("ZSCORE").arg(keys.get(CONTEXT)).arg(*seq);
            pipe.cmd("HGET").arg(keys.get(EVENTS)).arg(*seq);
            pipe.cmd("HEXISTS").arg(keys.get(DELTAS)).arg(*seq);
        }
        pipe.cmd("HGET").arg(keys.get(HEAD)).arg("version");
        let mut c = self.conn.clone();
        let replies: Vec<redis::Value> = pipe.query_async(&mut c).await.map_err(map_err)?;
        let mut replies = replies.into_iter();
        let head: Vec<Option<String>> = replies
            .next()
            .map(redis::from_redis_value)
            .transpose()
            .map_err(|e| corrupt(id, "head", e))?
            .unwrap_or_default();
        let mut standing = HashMap::with_capacity(seqs.len());
        for seq in seqs {
            let archived = !matches!(replies.next(), None | Some(redis::Value::Nil));
            let in_context = !matches!(replies.next(), None | Some(redis::Value::Nil));
            let body: Option<String> = replies
                .next()
                .map(redis::from_redis_value)
                .transpose()
                .map_err(|e| corrupt(id, "event", e))?
                .flatten();
            let has_delta: bool = replies
                .next()
                .map(redis::from_redis_value)
                .transpose()
                .map_err(|e| corrupt(id, "state delta", e))?
                .unwrap_or(false);
            if archived {
                let replayed = match body {
                    Some(body) => {
                        has_delta
                            || session_core::retention::replayed(&SessionEvent::decode_stored(
                                id, *seq, &body,
                            )?)
                    }
                    None => has_delta,
                };
                standing.insert(*seq, (in_context, replayed));
            }
        }
        let version: Option<String> = replies
            .next()
            .map(redis::from_redis_value)
            .transpose()
            .map_err(|e| corrupt(id, "version", e))?
            .flatten();
        let fields = HeadFields::from_values(head);
        let moved = fields.get("version") != version.as_deref();
        Ok(PruneRead {
            fields,
            standing,
            moved,
        })
    }

    /// The head fields of session `id` and which of `ids` it holds (with
    /// their token estimates when `tokens`), in one round trip.
    pub(crate) async fn read_for_write(
        &self,
        id: &str,
        ids: &[&str],
        tokens: bool,
    ) -> session_core::Result<WriteRead> {
        let keys = self.keys.session(id);
        let mut call = Call::new(&self.scripts.read, &keys);
        call.list(&HEAD_FIELDS).arg(if tokens { "1" } else { "0" });
        for i in ids {
            call.arg(*i);
        }
        let (head, seqs, held_tokens): (Vec<Option<String>>, Vec<Option<String>>, Vec<i64>) =
            call.run(&self.conn, "the head read").await?;
        let mut stored = HashMap::new();
        for (n, (event, seq)) in ids.iter().zip(seqs).enumerate() {
            let Some(seq) = seq else { continue };
            let seq = seq
                .parse::<u64>()
                .map_err(|e| corrupt(id, &format!("seq of event {event}"), e))?;
            let tokens = held_tokens
                .get(n)
                .and_then(|t| u32::try_from(*t).ok())
                .unwrap_or(0);
            stored.insert((*event).to_owned(), Stored { seq, tokens });
        }
        Ok(WriteRead {
            fields: HeadFields::from_values(head),
            stored,
        })
    }

    /// The head hash and the decoded state of session `id`, if it is stored.
    async fn raw_session(
        &self,
        id: &str,
    ) -> session_core::Result<Option<(HashMap<String, String>, StateMap)>> {
        let keys = self.keys.session(id);
        let mut c = self.conn.clone();
        let (fields, state): (HashMap<String, String>, HashMap<String, String>) = redis::pipe()
            .cmd("HGETALL")
            .arg(keys.get(HEAD))
            .cmd("HGETALL")
            .arg(keys.get(STATE))
            .query_async(&mut c)
            .await
            .map_err(map_err)?;
        if fields.is_empty() {
            return Ok(None);
        }
        let state = decode_state(state, &format!("session {id} state"))?;
        Ok(Some((fields, state)))
    }

    /// Session `id` with its head hash, and its expiry, if it is stored
    /// (what `plan::readable` and `plan::writable` decide on).
    pub(crate) async fn find_session(&self, id: &str) -> session_core::Result<Option<Found>> {
        let Some((fields, state)) = self.raw_session(id).await? else {
            return Ok(None);
        };
        let s = decode_session(id, &fields, state)?;
        let expires = s.expires_at;
        Ok(Some(((fields, s), expires)))
    }

    /// A live session with its head hash; `NotFound` when absent or expired.
    pub(crate) async fn live(
        &self,
        id: &SessionId,
    ) -> session_core::Result<(HashMap<String, String>, Session)> {
        session_core::plan::readable(self.find_session(id).await?, id, self.clock.now())
    }

    /// The live sessions of `ids` (an owner index) that `app`/`user` own,
    /// with their event counts: the index is a hint, the session itself
    /// says who owns it.
    pub(crate) async fn owned_by(
        &self,
        ids: Vec<String>,
        app: &str,
        user_id: &str,
        now: DateTime<Utc>,
    ) -> session_core::Result<Vec<(String, u64)>> {
        let mut out = Vec::new();
        for id in ids {
            if let Some((f, st)) = self.raw_session(&id).await? {
                let s = decode_session(&id, &f, st)?;
                if !s.is_expired_at(now) && s.app == *app && s.user_id == *user_id {
                    out.push((id, s.event_count));
                }
            }
        }
        Ok(out)
    }

    /// The page of the live sessions of `ids` (an activity index) matching
    /// `query`, most recently active first; the ids of unreadable sessions
    /// are named only on an owner's or an operator's first page.
    pub(crate) async fn list(
        &self,
        ids: Vec<String>,
        query: &SessionQuery,
        now: DateTime<Utc>,
    ) -> session_core::Result<Page<Session>> {
        let mut found = Vec::new();
        let mut unreadable = Vec::new();
        for id in ids {
            let read = match self.raw_session(&id).await {
                Ok(None) => continue,
                Ok(Some((f, st))) => decode_session(&id, &f, st),
                Err(e) if e.kind() == ErrorKind::Serialization => Err(e),
                Err(e) => return Err(e),
            };
            match read {
                Ok(s) if !s.is_expired_at(now) && query.matches(&s) => found.push(s),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(id = %id, kind = ?e.kind(), "unreadable session left out of the list");
                    unreadable.push(id);
                }
            }
        }
        found.sort_by(|a, b| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        let mut page = Page::paginate(found, query.page, query.page_size);
        // Named only where the index read is the asker's own (owner index) or
        // an operator's unfiltered listing, so no owner sees another's ids.
        let own_index = query.app.is_some() && query.user_id.is_some();
        if query.page == 0 && (own_index || query.is_unfiltered()) {
            page.unreadable = unreadable;
        }
        Ok(page)
    }
}
