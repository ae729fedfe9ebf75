//! The `sessions` table: reading heads and sessions, writing planned rows.

use chrono::{DateTime, Utc};
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, Row, Transaction};
use session_core::plan::{self, ContextTokens, Head, HeadChange};
use session_core::state::{apply_delta, decode_state, encode_state, LazyState};
use session_core::{
    stored_counter, stored_id, Erased, Owner, Page, Session, SessionError, SessionId, SessionQuery,
    SessionStatus, SessionUpdate, StateMap, MAX_SEQ, MAX_VERSION,
};

use crate::error::{corrupt_or, Result, SqlResult};
use crate::sql::{from_micros, micros, sql_int, sql_offset};

/// A stored expiry of session `id`.
fn expiry(us: Option<i64>, id: &str) -> Result<Option<DateTime<Utc>>> {
    us.map(|t| from_micros(t, &format!("session {id} expires_at")))
        .transpose()
}

/// A row read for the planner's `writable`/`readable`: its stored expiry decoded.
fn with_expiry<T>(
    row: Option<(T, Option<i64>)>,
    id: &str,
) -> Result<Option<(T, Option<DateTime<Utc>>)>> {
    row.map(|(r, exp)| Ok((r, expiry(exp, id)?))).transpose()
}

const SESSION_COLUMNS: &str = "id, app, user_id, key, status, created_at, updated_at, expires_at, \
     metadata, state, event_count, context_tokens, version, event_bytes";

struct RawSession {
    id: String,
    app: String,
    user_id: String,
    key: Option<String>,
    status: String,
    created_at: i64,
    updated_at: i64,
    expires_at: Option<i64>,
    metadata: String,
    state: String,
    event_count: i64,
    context_tokens: i64,
    version: i64,
    event_bytes: i64,
}

/// Reads one session row: the id, and the rest or the reason it could not
/// be read (a column of the wrong type), so one corrupt row is reported for
/// its session and never fails a whole listing.
fn raw_session(row: &Row<'_>) -> rusqlite::Result<(String, Result<RawSession>)> {
    let id: String = row.get(0)?;
    let rest = (|| {
        Ok(RawSession {
            id: id.clone(),
            app: row.get(1)?,
            user_id: row.get(2)?,
            key: row.get(3)?,
            status: row.get(4)?,
            created_at: row.get(5)?,
            updated_at: row.get(6)?,
            expires_at: row.get(7)?,
            metadata: row.get(8)?,
            state: row.get(9)?,
            event_count: row.get(10)?,
            context_tokens: row.get(11)?,
            version: row.get(12)?,
            event_bytes: row.get(13)?,
        })
    })()
    .map_err(|e: rusqlite::Error| SessionError::serialization(format!("session {id} row"), e));
    Ok((id, rest))
}

fn decode_session(r: &RawSession) -> Result<Session> {
    let ctx = |field: &str| format!("session {} {field}", r.id);
    let status = SessionStatus::stored(&r.status, || ctx("status"))?;
    Ok(Session {
        status,
        created_at: from_micros(r.created_at, &ctx("created_at"))?,
        updated_at: from_micros(r.updated_at, &ctx("updated_at"))?,
        expires_at: expiry(r.expires_at, &r.id)?,
        metadata: decode_state(&r.metadata, || ctx("metadata"))?,
        state: decode_state(&r.state, || ctx("state"))?,
        event_count: stored_counter(r.event_count, u64::MAX, || ctx("event_count"))?,
        event_bytes: stored_counter(r.event_bytes, u64::MAX, || ctx("event_bytes"))?,
        context_tokens: stored_counter(r.context_tokens, u64::MAX, || ctx("context_tokens"))?,
        version: stored_counter(r.version, MAX_VERSION, || ctx("version"))?,
        app: stored_id(&r.app, || ctx("app"))?,
        user_id: stored_id(&r.user_id, || ctx("user_id"))?,
        key: r
            .key
            .as_deref()
            .map(|k| stored_id(k, || ctx("key")))
            .transpose()?,
        id: stored_id(&r.id, || ctx("id"))?,
    })
}

fn raw_row(conn: &Connection, id: &str) -> Result<Option<(String, Result<RawSession>)>> {
    conn.prepare_cached(&format!(
        "SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?1"
    ))
    .sql()?
    .query_row([id], raw_session)
    .optional()
    .sql()
}

/// The session stored under `id`, expired or not (`None`: no row).
pub(crate) fn stored(conn: &Connection, id: &SessionId) -> Result<Option<Session>> {
    match raw_row(conn, id)? {
        Some((_, Err(e))) => Err(e),
        Some((_, Ok(r))) => decode_session(&r).map(Some),
        None => Ok(None),
    }
}

/// Reads a live session, or `NotFound` (absent or expired).
pub(crate) fn get(conn: &Connection, id: &SessionId, now: DateTime<Utc>) -> Result<Session> {
    let raw = raw_row(conn, id)?;
    let found = match raw {
        Some((_, Err(e))) => return Err(e),
        Some((_, Ok(r))) => {
            let expires = expiry(r.expires_at, id)?;
            Some((r, expires))
        }
        None => None,
    };
    plan::readable(found, id, now).and_then(|r| decode_session(&r))
}

/// The owner of a live session, or `NotFound` (absent or expired): the
/// two columns alone, for the service's owner check.
pub(crate) fn owner_of(conn: &Connection, id: &SessionId, now: DateTime<Utc>) -> Result<Owner> {
    let row: Option<((String, String), Option<i64>)> = conn
        .prepare_cached("SELECT app, user_id, expires_at FROM sessions WHERE id = ?1")
        .sql()?
        .query_row([id.as_str()], |r| Ok(((r.get(0)?, r.get(1)?), r.get(2)?)))
        .optional()
        .sql()?;
    let (app, user) = plan::readable(with_expiry(row, id)?, id, now)?;
    let ctx = |field: &str| format!("session {id} {field}");
    Ok(Owner::new(
        stored_id(&app, || ctx("app"))?,
        stored_id(&user, || ctx("user_id"))?,
    ))
}

/// The version and expiry of session `id`, if there is a row.
fn version_row(conn: &Connection, id: &str) -> Result<Option<(i64, Option<DateTime<Utc>>)>> {
    let row: Option<(i64, Option<i64>)> = conn
        .prepare_cached("SELECT version, expires_at FROM sessions WHERE id = ?1")
        .sql()?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .sql()?;
    with_expiry(row, id)
}

/// The version of a live session, or `NotFound` (absent or expired).
pub(crate) fn event_version(conn: &Connection, id: &SessionId, now: DateTime<Utc>) -> Result<u64> {
    let raw = plan::readable(version_row(conn, id)?, id, now)?;
    stored_counter(raw, MAX_VERSION, || format!("session {id} version"))
}

/// `NotFound` unless session `id` is live.
pub(crate) fn ensure_live(conn: &Connection, id: &SessionId, now: DateTime<Utc>) -> Result<()> {
    let exp: Option<Option<i64>> = conn
        .prepare_cached("SELECT expires_at FROM sessions WHERE id = ?1")
        .sql()?
        .query_row([id.as_str()], |r| r.get(0))
        .optional()
        .sql()?;
    plan::readable(with_expiry(exp.map(|e| ((), e)), id)?, id, now)
}

/// The expiry of a session stored under `id` (`Some(None)`: one that never
/// expires), for the create planner.
#[allow(clippy::option_option)] // the create planner's own shape
pub(crate) fn existing(tx: &Transaction<'_>, id: &str) -> Result<Option<Option<DateTime<Utc>>>> {
    let exp: Option<Option<i64>> = tx
        .prepare_cached("SELECT expires_at FROM sessions WHERE id = ?1")
        .sql()?
        .query_row([id], |r| r.get(0))
        .optional()
        .sql()?;
    exp.map(|e| expiry(e, id)).transpose()
}

/// How many live (unexpired) sessions `user_id` holds in `app` (the
/// sessions-per-user quota; the writer's transaction makes it atomic with
/// the insert).
pub(crate) fn live_of_owner(
    tx: &Transaction<'_>,
    app: &str,
    user_id: &str,
    now: DateTime<Utc>,
) -> Result<u64> {
    let n: i64 = tx
        .prepare_cached(
            "SELECT COUNT(*) FROM sessions WHERE app = ?1 AND user_id = ?2 \
             AND (expires_at IS NULL OR expires_at > ?3)",
        )
        .sql()?
        .query_row(params![app, user_id, micros(now)], |r| r.get(0))
        .sql()?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Whether a row is stored under `id`, and the version of the live session
/// there, for the import planner. A corrupt stored version (negative, past
/// the maximum) counts as none, so that a valid dump replaces it rather
/// than a damaged row blocking the restore.
pub(crate) fn live_version(
    tx: &Transaction<'_>,
    id: &SessionId,
    now: DateTime<Utc>,
) -> Result<(bool, Option<u64>)> {
    let row = version_row(tx, id)?;
    let stored = row.is_some();
    let live = plan::readable(row, id, now).ok();
    Ok((
        stored,
        live.and_then(|v| stored_counter(v, MAX_VERSION, String::new).ok()),
    ))
}

/// What a write reads of a session first: the planner's [`Head`] and the
/// engine's own columns.
pub(crate) struct SessionHead {
    /// Seq and version, for the planner.
    pub(crate) head: Head,
    /// The owner's app, for shared-state writes.
    pub(crate) app: String,
    /// The owner, for shared-state writes.
    pub(crate) user_id: String,
    /// The session-scope state, parsed only if a change touches it.
    state: LazyState,
    /// The context position the next context event takes.
    pub(crate) next_ctx_pos: i64,
}

impl SessionHead {
    /// The state JSON after `changes`, or `None` when there are none
    /// (the stored state is then neither parsed nor rewritten).
    pub(crate) fn state_after(&mut self, changes: &StateMap) -> Result<Option<String>> {
        if changes.is_empty() {
            return Ok(None);
        }
        apply_delta(self.state.get_mut()?, changes);
        self.state.changed()
    }
}

/// Reads the head of a session about to be written: `NotFound` or
/// `Expired` (from the planner) if it may not be.
pub(crate) fn head(
    tx: &Transaction<'_>,
    id: &SessionId,
    now: DateTime<Utc>,
) -> Result<SessionHead> {
    type HeadRow = (
        String,
        String,
        Option<i64>,
        String,
        i64,
        i64,
        i64,
        String,
        i64,
        i64,
    );
    let row: Option<HeadRow> = tx
        .prepare_cached(
            "SELECT app, user_id, expires_at, state, version, last_seq, next_ctx_pos, status, \
             event_count, event_bytes FROM sessions WHERE id = ?1",
        )
        .sql()?
        .query_row([id.as_str()], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
                r.get(9)?,
            ))
        })
        .optional()
        .map_err(|e| corrupt_or(id, e))?;
    let row = row.map(
        |(app, user, exp, state, version, last_seq, next_ctx_pos, status, events, bytes)| {
            (
                (
                    app,
                    user,
                    state,
                    version,
                    last_seq,
                    next_ctx_pos,
                    status,
                    (events, bytes),
                ),
                exp,
            )
        },
    );
    let (app, user_id, state, version, last_seq, next_ctx_pos, status, (events, bytes)) =
        plan::writable(with_expiry(row, id)?, id, now)?;
    let what = |field: &str| format!("session {id} {field}");
    Ok(SessionHead {
        head: Head::new(
            id.clone(),
            stored_counter(last_seq, MAX_SEQ, || what("last_seq"))?,
            stored_counter(version, MAX_VERSION, || what("version"))?,
            SessionStatus::stored(&status, || what("status"))?,
        )
        .with_event_count(stored_counter(events, MAX_SEQ, || what("event_count"))?)
        .with_event_bytes(stored_counter(bytes, u64::MAX, || what("event_bytes"))?),
        app,
        user_id,
        state: LazyState::new(state, id),
        next_ctx_pos,
    })
}

/// The initial state a rewind replays from.
pub(crate) fn initial_state(tx: &Transaction<'_>, id: &str) -> Result<StateMap> {
    let initial: String = tx
        .prepare_cached("SELECT initial_state FROM sessions WHERE id = ?1")
        .sql()?
        .query_row([id], |r| r.get(0))
        .sql()?;
    decode_state(&initial, || format!("session {id} initial state"))
}

/// The initial state and last seq an export carries.
pub(crate) fn export_extras(conn: &Connection, id: &str) -> Result<(StateMap, u64)> {
    let (initial, last_seq): (String, i64) = conn
        .prepare_cached("SELECT initial_state, last_seq FROM sessions WHERE id = ?1")
        .sql()?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
        .sql()?;
    Ok((
        decode_state(&initial, || format!("session {id} initial state"))?,
        u64::try_from(last_seq).unwrap_or(0),
    ))
}

/// Writes a new session row: `session` as planned (created or imported).
pub(crate) fn insert(
    tx: &Transaction<'_>,
    s: &Session,
    initial_state: &StateMap,
    last_seq: u64,
    next_ctx_pos: i64,
) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO sessions (id, app, user_id, key, status, created_at, updated_at, expires_at, \
         metadata, state, initial_state, event_count, context_tokens, version, last_seq, next_ctx_pos, \
         event_bytes, active_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, \
         ?15, ?16, ?17, ?7 / 1000000)",
    )
    .sql()?
    .execute(params![
        s.id.as_str(),
        s.app.as_str(),
        s.user_id.as_str(),
        s.key.as_deref(),
        s.status.as_str(),
        micros(s.created_at),
        micros(s.updated_at),
        s.expires_at.map(micros),
        encode_state(&s.metadata, "metadata")?,
        encode_state(&s.state, "state")?,
        encode_state(initial_state, "initial state")?,
        sql_int(s.event_count),
        sql_int(s.context_tokens),
        sql_int(s.version),
        sql_int(last_seq),
        next_ctx_pos,
        sql_int(s.event_bytes),
    ])
    .sql()?;
    Ok(())
}

/// Writes the head of a session after an append or a context replace;
/// `state` is the new session-state JSON, if it changed, and
/// `next_ctx_pos` the next free context position.
pub(crate) fn advance(
    tx: &Transaction<'_>,
    id: &str,
    state: Option<&str>,
    a: &HeadChange<'_>,
    next_ctx_pos: i64,
    now: DateTime<Utc>,
) -> Result<()> {
    let (sql, tokens) = match a.context_tokens {
        ContextTokens::Add(n) => (
            "UPDATE sessions SET state = COALESCE(?2, state), version = ?3, last_seq = ?4, \
             next_ctx_pos = ?5, event_count = event_count + ?6, context_tokens = context_tokens + ?7, \
             updated_at = MAX(updated_at, ?8), event_bytes = event_bytes + ?9 WHERE id = ?1",
            n,
        ),
        ContextTokens::Set(n) => (
            "UPDATE sessions SET state = COALESCE(?2, state), version = ?3, last_seq = ?4, \
             next_ctx_pos = ?5, event_count = event_count + ?6, context_tokens = ?7, \
             updated_at = MAX(updated_at, ?8), event_bytes = event_bytes + ?9 WHERE id = ?1",
            n,
        ),
    };
    tx.prepare_cached(sql)
        .sql()?
        .execute(params![
            id,
            state,
            sql_int(a.version),
            sql_int(a.last_seq),
            next_ctx_pos,
            i64::try_from(a.added()).unwrap_or(i64::MAX),
            sql_int(tokens),
            micros(now),
            sql_int(a.added_bytes),
        ])
        .sql()?;
    Ok(())
}

/// The counters of the archive, recounted from the rows left (`?1` is the session).
const RECOUNT: &str = "event_count = (SELECT COUNT(*) FROM events WHERE session_id = ?1), \
     event_bytes = (SELECT COALESCE(SUM(length(CAST(body AS BLOB))), 0) FROM events \
                    WHERE session_id = ?1)";

/// Recounts the archive's counters of session `id` from its rows.
pub(crate) fn recount(tx: &Transaction<'_>, id: &str) -> Result<()> {
    tx.prepare_cached(&format!("UPDATE sessions SET {RECOUNT} WHERE id = ?1"))
        .sql()?
        .execute([id])
        .sql()?;
    Ok(())
}

/// Records an archive prune: the new version and the archive's counters;
/// the activity time stays.
pub(crate) fn pruned(tx: &Transaction<'_>, id: &str, version: u64) -> Result<()> {
    tx.prepare_cached(&format!(
        "UPDATE sessions SET version = ?2, {RECOUNT} WHERE id = ?1"
    ))
    .sql()?
    .execute(params![id, sql_int(version)])
    .sql()?;
    Ok(())
}

/// Writes the head of a session after a rewind: the replayed state, the
/// planned version, and the counters recounted from what is left.
pub(crate) fn rewound(
    tx: &Transaction<'_>,
    id: &str,
    state: &StateMap,
    version: u64,
    now: DateTime<Utc>,
) -> Result<()> {
    tx.prepare_cached(&format!(
        "UPDATE sessions SET state = ?2, version = ?3, {RECOUNT}, \
         context_tokens = (SELECT COALESCE(SUM(token_estimate), 0) FROM events \
                           WHERE session_id = ?1 AND {}), \
         updated_at = MAX(updated_at, ?4) WHERE id = ?1",
        crate::events::IN_CONTEXT
    ))
    .sql()?
    .execute(params![
        id,
        encode_state(state, "state")?,
        sql_int(version),
        micros(now)
    ])
    .sql()?;
    Ok(())
}

/// Writes the fields an update sets, at the planned `version`.
pub(crate) fn update(
    tx: &Transaction<'_>,
    id: &str,
    update: &SessionUpdate,
    version: u64,
    now: DateTime<Utc>,
) -> Result<()> {
    let mut sets = vec!["version = ?3", "updated_at = MAX(updated_at, ?2)"];
    let mut values: Vec<SqlValue> = vec![
        id.to_owned().into(),
        micros(now).into(),
        sql_int(version).into(),
    ];
    let mut push = |col: &'static str, v: SqlValue| {
        values.push(v);
        sets.push(col);
    };
    if let Some(m) = &update.metadata {
        push("metadata = ?", encode_state(m, "metadata")?.into());
    }
    if let Some(s) = &update.state {
        push("state = ?", encode_state(s, "state")?.into());
    }
    if let Some(status) = update.status {
        push("status = ?", status.as_str().to_owned().into());
    }
    if let Some(exp) = update.expires_at {
        push(
            "expires_at = ?",
            exp.map(micros).map_or(SqlValue::Null, SqlValue::Integer),
        );
    }
    // Number the placeholders after ?1 (id), ?2 (now) and ?3 (version).
    let mut n = 3;
    let sets: Vec<String> = sets
        .into_iter()
        .map(|s| {
            if s.ends_with('?') {
                n += 1;
                format!("{s}{n}")
            } else {
                s.to_owned()
            }
        })
        .collect();
    let sql = format!("UPDATE sessions SET {} WHERE id = ?1", sets.join(", "));
    tx.execute(&sql, params_from_iter(values)).sql()?;
    Ok(())
}

/// Deletes a session's events, index entries and row; returns whether there was a row.
pub(crate) fn purge(tx: &Transaction<'_>, id: &str) -> Result<bool> {
    tx.prepare_cached(
        "DELETE FROM events_fts WHERE rowid IN (SELECT rowid FROM events WHERE session_id = ?1 \
         AND rowid <= (SELECT indexed_through FROM fts_state))",
    )
    .sql()?
    .execute([id])
    .sql()?;
    tx.prepare_cached("DELETE FROM events WHERE session_id = ?1")
        .sql()?
        .execute([id])
        .sql()?;
    crate::history::purge(tx, id)?;
    let n = tx
        .prepare_cached("DELETE FROM sessions WHERE id = ?1")
        .sql()?
        .execute([id])
        .sql()?;
    Ok(n > 0)
}

/// Erases every session of (`app`, `user_id`), expired ones included, with
/// their events, index rows and context history, and the user's state.
pub(crate) fn erase_user(tx: &Transaction<'_>, app: &str, user_id: &str) -> Result<Erased> {
    let sessions: Vec<(String, i64)> = tx
        .prepare_cached(
            "SELECT id, (SELECT count(*) FROM events WHERE session_id = sessions.id) \
             FROM sessions WHERE app = ?1 AND user_id = ?2",
        )
        .sql()?
        .query_map([app, user_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .sql()?
        .collect::<rusqlite::Result<_>>()
        .sql()?;
    let mut erased = Erased::default();
    for (id, events) in &sessions {
        if purge(tx, id)? {
            erased.sessions = erased.sessions.saturating_add(1);
            erased.events = erased
                .events
                .saturating_add(u64::try_from(*events).unwrap_or(0));
        }
    }
    erased.user_state = tx
        .prepare_cached("DELETE FROM user_state WHERE app = ?1 AND user_id = ?2")
        .sql()?
        .execute([app, user_id])
        .sql()?
        > 0;
    Ok(erased)
}

/// Purges every session whose expiry is at or before `now`; returns how many.
pub(crate) fn purge_expired(tx: &Transaction<'_>, now: DateTime<Utc>) -> Result<u64> {
    let ids: Vec<String> = tx
        .prepare_cached("SELECT id FROM sessions WHERE expires_at IS NOT NULL AND expires_at <= ?1")
        .sql()?
        .query_map([micros(now)], |r| r.get(0))
        .sql()?
        .collect::<rusqlite::Result<_>>()
        .sql()?;
    for id in &ids {
        purge(tx, id)?;
    }
    Ok(u64::try_from(ids.len()).unwrap_or(u64::MAX))
}

/// A metadata filter value as `session_metadata` holds it: its JSON type
/// (as `json_each` names it) and its atom (`None` for booleans, whose type says all).
fn metadata_value(v: &serde_json::Value) -> (&'static str, Option<SqlValue>) {
    match v {
        serde_json::Value::Bool(true) => ("true", None),
        serde_json::Value::Bool(false) => ("false", None),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => ("integer", Some(SqlValue::Integer(i))),
            None => ("real", n.as_f64().map(SqlValue::Real)),
        },
        serde_json::Value::String(s) => ("text", Some(SqlValue::Text(s.clone()))),
        // Refused by the query's check.
        _ => ("null", None),
    }
}

/// One page of live sessions matching `q`, newest activity first; metadata
/// filters go through the `session_metadata` index.
pub(crate) fn list(
    conn: &Connection,
    q: &SessionQuery,
    now: DateTime<Utc>,
) -> Result<Page<Session>> {
    let mut sql = format!(
        "SELECT {SESSION_COLUMNS} FROM sessions WHERE (expires_at IS NULL OR expires_at > ?1)"
    );
    let mut values: Vec<SqlValue> = vec![micros(now).into()];
    let mut cond = |c: &str, v: SqlValue| {
        values.push(v);
        sql.push_str(&format!(" AND {c} ?{}", values.len()));
    };
    if let Some(a) = &q.app {
        cond("app =", a.clone().into());
    }
    if let Some(u) = &q.user_id {
        cond("user_id =", u.clone().into());
    }
    if let Some(k) = &q.key {
        cond("key =", k.clone().into());
    }
    if let Some(s) = q.status {
        cond("status =", s.as_str().to_owned().into());
    }
    // The activity indexes hold whole seconds (`active_at`, truncated as
    // SQLite divides): the bounds on them narrow the index walk, those on
    // `updated_at` are exact.
    if let Some(t) = q.active_from {
        cond("active_at >=", (micros(t) / 1_000_000).into());
        cond("updated_at >=", micros(t).into());
    }
    if let Some(t) = q.active_to {
        cond("active_at <=", (micros(t) / 1_000_000).into());
        cond("updated_at <", micros(t).into());
    }
    for (key, value) in &q.metadata {
        let (kind, v) = metadata_value(value);
        values.push(key.clone().into());
        values.push(kind.to_owned().into());
        let n = values.len();
        let value_cond = v.map_or(String::new(), |v| {
            values.push(v);
            format!(" AND m.value = ?{}", n + 1)
        });
        sql.push_str(&format!(
            " AND id IN (SELECT m.session_id FROM session_metadata m \
               WHERE m.key = ?{} AND m.type = ?{n}{value_cond})",
            n - 1
        ));
    }
    let Some(offset) = sql_offset(q.page, q.page_size) else {
        return Ok(Page::empty(q.page, q.page_size));
    };
    sql.push_str(&format!(
        // `active_at` (whole seconds) is what the activity indexes hold.
        " ORDER BY active_at DESC, updated_at DESC, id LIMIT {} OFFSET {offset}",
        q.page_size + 1
    ));
    let mut stmt = conn.prepare(&sql).sql()?;
    let rows: Vec<(String, Result<Session>)> = stmt
        .query_map(params_from_iter(values), raw_session)
        .sql()?
        .map(|row| row.map(|(id, raw)| (id, raw.and_then(|r| decode_session(&r)))))
        .collect::<rusqlite::Result<_>>()
        .sql()?;
    Ok(Page::from_overfetch_decoded(rows, q.page, q.page_size))
}
