//! Reads: a session's hashes, the head a write plans from, events by seq, state hashes and indexes.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use session_core::plan::Stored;
use session_core::{
    stored_counter, stored_id, ContextChange, ContextLog, EventView, Session, SessionError,
    SessionEvent, SessionId, StateMap, MAX_VERSION,
};

use crate::error::{corrupt, map_err};
use crate::head_fields::{time, HeadFields, HEAD_FIELDS};
use crate::keys::{
    ARCHIVE, CONTEXT, CONTEXT_CHANGES, DELTAS, EVENTS, HEAD, INITIAL, INVOCATIONS, STATE,
};
use crate::scripts::Call;
use crate::RedisRepository;

/// Events fetched per round trip when a read scans a session.
pub(crate) const CHUNK: usize = 500;

/// A session decoded from its head hash and state.
pub(crate) fn decode_session(
    id: &str,
    f: &HashMap<String, String>,
    state: StateMap,
) -> session_core::Result<Session> {
    let get = |k: &str| f.get(k).map(String::as_str).unwrap_or_default();
    let int = |k: &str| get(k).parse::<i64>().map_err(|e| corrupt(id, k, e));
    let at = |k: &str| time(id, k, int(k)?);
    let counter = |k: &str, max: u64| stored_counter(int(k)?, max, || format!("session {id} {k}"));
    Ok(Session {
        id: stored_id(id, || format!("session {id} id"))?,
        app: stored_id(get("app"), || format!("session {id} app"))?,
        user_id: stored_id(get("user_id"), || format!("session {id} user_id"))?,
        key: match get("key") {
            "" => None,
            k => Some(stored_id(k, || format!("session {id} key"))?),
        },
        status: get("status")
            .parse()
            .map_err(|e: SessionError| corrupt(id, "status", e))?,
        created_at: at("created_at")?,
        updated_at: at("updated_at")?,
        expires_at: if get("expires_at").is_empty() {
            None
        } else {
            Some(at("expires_at")?)
        },
        metadata: serde_json::from_str(get("metadata")).map_err(|e| corrupt(id, "metadata", e))?,
        state,
        event_count: counter("event_count", u64::MAX)?,
        event_bytes: match get("event_bytes") {
            "" => 0,
            _ => counter("event_bytes", u64::MAX)?,
        },
        context_tokens: counter("context_tokens", u64::MAX)?,
        version: counter("version", MAX_VERSION)?,
    })
}

/// A hash of JSON values as a state map; `what` names it in errors.
pub(crate) fn decode_state(
    raw: HashMap<String, String>,
    what: &str,
) -> session_core::Result<StateMap> {
    let mut map = StateMap::new();
    for (k, v) in raw {
        let value = serde_json::from_str(&v)
            .map_err(|e| SessionError::serialization(format!("{what} key {k}"), e))?;
        map.insert(k, value);
    }
    Ok(map)
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

impl RedisRepository {
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
    pub(crate) async fn raw_session(
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
        session_core::plan::readable(self.find_session(id).await?, id, self.now())
    }

    /// The stored bodies of the events at `seqs` (`None` where absent), in bounded chunks.
    pub(crate) async fn bodies(
        &self,
        id: &str,
        seqs: &[u64],
    ) -> session_core::Result<Vec<Option<String>>> {
        let keys = self.keys.session(id);
        let mut c = self.conn.clone();
        let mut out = Vec::with_capacity(seqs.len());
        for chunk in seqs.chunks(CHUNK) {
            let bodies: Vec<Option<String>> = redis::cmd("HMGET")
                .arg(keys.get(EVENTS))
                .arg(chunk)
                .query_async(&mut c)
                .await
                .map_err(map_err)?;
            out.extend(bodies);
        }
        Ok(out)
    }

    /// Events by seq, fetched in bounded chunks; a missing body is corrupt data.
    pub(crate) async fn fetch(
        &self,
        id: &str,
        seqs: &[u64],
    ) -> session_core::Result<Vec<SessionEvent>> {
        let bodies = self.bodies(id, seqs).await?;
        let mut out = Vec::with_capacity(seqs.len());
        for (seq, body) in seqs.iter().zip(bodies) {
            let body = body
                .ok_or_else(|| corrupt(id, &format!("seq {seq}"), "the event body is missing"))?;
            out.push(SessionEvent::decode_stored(id, *seq, &body)?);
        }
        Ok(out)
    }

    /// The sorted set of a view.
    pub(crate) fn view_key(&self, id: &str, view: EventView) -> String {
        let keys = self.keys.session(id);
        match view {
            EventView::Archive => keys.get(ARCHIVE).to_owned(),
            EventView::Context => keys.get(CONTEXT).to_owned(),
        }
    }

    /// Every seq of a view, in view order.
    pub(crate) async fn seqs(&self, id: &str, view: EventView) -> session_core::Result<Vec<u64>> {
        self.range(&self.view_key(id, view), 0, -1).await
    }

    /// `ZRANGE key start stop`.
    pub(crate) async fn range<T: redis::FromRedisValue>(
        &self,
        key: &str,
        start: i64,
        stop: i64,
    ) -> session_core::Result<Vec<T>> {
        let mut c = self.conn.clone();
        redis::cmd("ZRANGE")
            .arg(key)
            .arg(start)
            .arg(stop)
            .query_async(&mut c)
            .await
            .map_err(map_err)
    }

    /// A hash of JSON values (a state scope).
    pub(crate) async fn read_state(&self, key: &str) -> session_core::Result<StateMap> {
        decode_state(self.hash(key).await?, key)
    }

    /// `HGETALL key`.
    pub(crate) async fn hash(&self, key: &str) -> session_core::Result<HashMap<String, String>> {
        let mut c = self.conn.clone();
        redis::cmd("HGETALL")
            .arg(key)
            .query_async(&mut c)
            .await
            .map_err(map_err)
    }

    /// The context's history of session `id`: a corrupt entry is a
    /// `Serialization` error naming the session.
    pub(crate) async fn context_log(&self, id: &SessionId) -> session_core::Result<ContextLog> {
        let mut c = self.conn.clone();
        let entries: Vec<String> = redis::cmd("LRANGE")
            .arg(self.keys.session(id).get(CONTEXT_CHANGES))
            .arg(0)
            .arg(-1)
            .query_async(&mut c)
            .await
            .map_err(map_err)?;
        let changes = entries
            .iter()
            .map(|json| ContextChange::decode(id, json))
            .collect::<session_core::Result<_>>()?;
        Ok(ContextLog::new(changes))
    }

    /// The ids in an index, in index order.
    pub(crate) async fn ids_in(&self, index: &str) -> session_core::Result<Vec<String>> {
        self.range(index, 0, -1).await
    }
}
