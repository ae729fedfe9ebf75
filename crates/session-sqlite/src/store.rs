//! The blocking SQL behind `SqliteRepository`: one function per operation,
//! each running on a connection the caller holds (inside a transaction for writes).

use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, Utc};
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, Row, Transaction};
use session_core::state::{apply_delta, replay_deltas, LazyState, ScopedDelta, SharedDelta};
use session_core::{
    fold_case, visible_branches, AppendOutcome, EventFilter, EventView, ImportOutcome, NewSession,
    Page, RewindOutcome, SearchHit, SearchMode, SearchQuery, SearchScope, Session, SessionDump,
    SessionError, SessionEvent, SessionQuery, SessionStatus, SessionUpdate, SharedState, StateMap,
    SyntheticFilter,
};
use session_core::{next_seq, next_version, stored_counter, MAX_SEQ, MAX_VERSION};

use crate::BACKEND;

type Result<T> = session_core::Result<T>;

/// Maps a rusqlite error onto the error kinds callers act on.
pub(crate) fn map_err(e: rusqlite::Error) -> SessionError {
    use rusqlite::ErrorCode;
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) =>
        {
            SessionError::unavailable(BACKEND, e)
        }
        // Nothing was written (the transaction rolled back); the same call
        // succeeds once there is room again.
        rusqlite::Error::SqliteFailure(f, _) if f.code == ErrorCode::DiskFull => {
            SessionError::unavailable(
                BACKEND,
                format!("the disk is full; free space, then retry ({e})"),
            )
        }
        _ => SessionError::backend(BACKEND, e),
    }
}

trait SqlResult<T> {
    fn sql(self) -> Result<T>;
}

impl<T> SqlResult<T> for rusqlite::Result<T> {
    fn sql(self) -> Result<T> {
        self.map_err(map_err)
    }
}

/// A seq or version as SQLite stores it; values are bounded by
/// `MAX_SEQ`/`MAX_VERSION`, far inside `i64`.
fn sql_int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The context position after `pos`, or a typed error instead of SQLite's
/// silent switch to floating point past `i64::MAX`.
fn next_position(pos: i64) -> Result<i64> {
    pos.checked_add(1).ok_or_else(|| {
        SessionError::invalid("context", "the context position counter is exhausted")
    })
}

/// A head read that failed on a column of the wrong type is corruption of
/// that session (`Serialization`), anything else an engine error.
fn corrupt_or(id: &str, e: rusqlite::Error) -> SessionError {
    match e {
        rusqlite::Error::InvalidColumnType(..) | rusqlite::Error::FromSqlConversionFailure(..) => {
            SessionError::serialization(format!("session {id} row"), e)
        }
        other => map_err(other),
    }
}

fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

fn from_micros(us: i64, what: &str) -> Result<DateTime<Utc>> {
    DateTime::from_timestamp_micros(us).ok_or_else(|| {
        SessionError::serialization(what.to_owned(), format!("timestamp {us} is out of range"))
    })
}

use session_core::state::{decode_state as parse_map, encode_state as to_json};

const SESSION_COLUMNS: &str = "id, app, user_id, key, status, created_at, updated_at, expires_at, \
     metadata, state, event_count, context_tokens, version";

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
        })
    })()
    .map_err(|e: rusqlite::Error| SessionError::serialization(format!("session {id} row"), e));
    Ok((id, rest))
}

fn decode_session(r: RawSession) -> Result<Session> {
    let ctx = |field: &str| format!("session {} {field}", r.id);
    let status = match r.status.as_str() {
        "active" => SessionStatus::Active,
        "archived" => SessionStatus::Archived,
        other => {
            return Err(SessionError::serialization(
                ctx("status"),
                format!("unknown status {other:?}"),
            ))
        }
    };
    Ok(Session {
        status,
        created_at: from_micros(r.created_at, &ctx("created_at"))?,
        updated_at: from_micros(r.updated_at, &ctx("updated_at"))?,
        expires_at: r
            .expires_at
            .map(|t| from_micros(t, &ctx("expires_at")))
            .transpose()?,
        metadata: parse_map(&r.metadata, || ctx("metadata"))?,
        state: parse_map(&r.state, || ctx("state"))?,
        event_count: stored_counter(r.event_count, u64::MAX, || ctx("event_count"))?,
        context_tokens: stored_counter(r.context_tokens, u64::MAX, || ctx("context_tokens"))?,
        version: stored_counter(r.version, MAX_VERSION, || ctx("version"))?,
        id: r.id,
        app: r.app,
        user_id: r.user_id,
        key: r.key,
    })
}

fn expired(expires_at: Option<i64>, now: DateTime<Utc>) -> bool {
    expires_at.is_some_and(|t| t <= micros(now))
}

/// Reads a live session, or `NotFound` (absent or expired).
pub(crate) fn get(conn: &Connection, id: &str, now: DateTime<Utc>) -> Result<Session> {
    let raw = conn
        .prepare_cached(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?1"
        ))
        .sql()?
        .query_row([id], raw_session)
        .optional()
        .sql()?;
    match raw {
        Some((_, Ok(r))) if !expired(r.expires_at, now) => decode_session(r),
        Some((_, Err(e))) => Err(e),
        _ => Err(SessionError::session_not_found(id)),
    }
}

fn ensure_live(conn: &Connection, id: &str, now: DateTime<Utc>) -> Result<()> {
    let exp: Option<Option<i64>> = conn
        .prepare_cached("SELECT expires_at FROM sessions WHERE id = ?1")
        .sql()?
        .query_row([id], |r| r.get(0))
        .optional()
        .sql()?;
    match exp {
        Some(e) if !expired(e, now) => Ok(()),
        _ => Err(SessionError::session_not_found(id)),
    }
}

/// The mutable head of a session, read at the start of every write.
struct Head {
    app: String,
    user_id: String,
    /// The session-scope state, parsed only if a delta touches it.
    state: LazyState,
    /// Checked to be within `0..=MAX_VERSION` when read.
    version: u64,
    /// Checked to be within `0..=MAX_SEQ` when read.
    last_seq: u64,
    next_ctx_pos: i64,
}

fn head(tx: &Transaction<'_>, id: &str, now: DateTime<Utc>) -> Result<Head> {
    let row = tx
        .prepare_cached(
            "SELECT app, user_id, expires_at, state, version, last_seq, next_ctx_pos \
             FROM sessions WHERE id = ?1",
        )
        .sql()?
        .query_row([id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<i64>>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, i64>(5)?,
                r.get::<_, i64>(6)?,
            ))
        })
        .optional()
        .map_err(|e| corrupt_or(id, e))?;
    let Some((app, user_id, expires_at, state, version, last_seq, next_ctx_pos)) = row else {
        return Err(SessionError::session_not_found(id));
    };
    if expired(expires_at, now) {
        return Err(SessionError::Expired { id: id.to_owned() });
    }
    let what = |field: &str| format!("session {id} {field}");
    Ok(Head {
        app,
        user_id,
        state: LazyState::new(state, id),
        version: stored_counter(version, MAX_VERSION, || what("version"))?,
        last_seq: stored_counter(last_seq, MAX_SEQ, || what("last_seq"))?,
        next_ctx_pos,
    })
}

/// Writes shared-scope changes (or, for imports, whole maps) to their tables.
struct SharedWrite<'a>(&'a SharedDelta);

impl SharedWrite<'_> {
    /// Sets the shared scopes to exactly these maps (for imports); empty maps leave a scope alone.
    fn replace(&self, tx: &Transaction<'_>, app: &str, user_id: &str) -> Result<()> {
        if !self.0.app.is_empty() {
            tx.prepare_cached(
                "INSERT INTO app_state (app, state) VALUES (?1, ?2) \
                 ON CONFLICT (app) DO UPDATE SET state = excluded.state",
            )
            .sql()?
            .execute(params![app, to_json(&self.0.app, "app state")?])
            .sql()?;
        }
        if !self.0.user.is_empty() {
            tx.prepare_cached(
                "INSERT INTO user_state (app, user_id, state) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (app, user_id) DO UPDATE SET state = excluded.state",
            )
            .sql()?
            .execute(params![app, user_id, to_json(&self.0.user, "user state")?])
            .sql()?;
        }
        Ok(())
    }

    fn write(&self, tx: &Transaction<'_>, app: &str, user_id: &str) -> Result<()> {
        if !self.0.app.is_empty() {
            let current: Option<String> = tx
                .prepare_cached("SELECT state FROM app_state WHERE app = ?1")
                .sql()?
                .query_row([app], |r| r.get(0))
                .optional()
                .sql()?;
            let mut state = match current {
                Some(s) => parse_map(&s, || format!("app {app} state"))?,
                None => StateMap::new(),
            };
            apply_delta(&mut state, &self.0.app);
            tx.prepare_cached(
                "INSERT INTO app_state (app, state) VALUES (?1, ?2) \
                 ON CONFLICT (app) DO UPDATE SET state = excluded.state",
            )
            .sql()?
            .execute(params![app, to_json(&state, "app state")?])
            .sql()?;
        }
        if !self.0.user.is_empty() {
            let current: Option<String> = tx
                .prepare_cached("SELECT state FROM user_state WHERE app = ?1 AND user_id = ?2")
                .sql()?
                .query_row([app, user_id], |r| r.get(0))
                .optional()
                .sql()?;
            let mut state = match current {
                Some(s) => parse_map(&s, || format!("user {user_id} state in app {app}"))?,
                None => StateMap::new(),
            };
            apply_delta(&mut state, &self.0.user);
            tx.prepare_cached(
                "INSERT INTO user_state (app, user_id, state) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (app, user_id) DO UPDATE SET state = excluded.state",
            )
            .sql()?
            .execute(params![app, user_id, to_json(&state, "user state")?])
            .sql()?;
        }
        Ok(())
    }
}

/// The text the trigram index holds for an event. NUL is indexed as a
/// space: the index only proposes candidates, every hit is checked on the real text.
fn index_text(e: &SessionEvent) -> String {
    e.message.search_text().replace('\0', " ")
}

/// Writes one new event at `seq` (and `ctx_pos`, if it joins the context)
/// unless the session already holds its id; returns whether it was written.
/// `body` is the event's JSON from `prepare_events`.
fn insert_event(
    tx: &Transaction<'_>,
    session_id: &str,
    seq: i64,
    ctx_pos: Option<i64>,
    event: &SessionEvent,
    body: &str,
) -> Result<bool> {
    let delta = event
        .state_delta
        .as_ref()
        .map(|d| to_json(d, "state delta"))
        .transpose()?;
    let n = tx
        .prepare_cached(
            "INSERT INTO events (session_id, seq, id, ctx_pos, timestamp, role, branch, invocation_id, \
             synthetic, token_estimate, state_delta, body) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) \
             ON CONFLICT (session_id, id) DO NOTHING",
        )
        .sql()?
        .execute(params![
            session_id,
            seq,
            event.id,
            ctx_pos,
            micros(event.timestamp),
            event.role().as_str(),
            event.branch,
            event.invocation_id,
            event.is_synthetic(),
            event.token_estimate,
            delta,
            body,
        ])
        .sql()?;
    Ok(n == 1)
}

/// How appends keep the search index up to date: in batches of `batch`,
/// with `mark_hint` (never above the stored watermark, except after a
/// rolled-back commit) saving the watermark read on most appends.
pub(crate) struct Indexing<'a> {
    pub(crate) batch: i64,
    pub(crate) mark_hint: &'a AtomicI64,
}

impl Indexing<'_> {
    /// Indexes the pending events if a batch is full, judged by the rowid just written.
    fn after_insert(&self, tx: &Transaction<'_>) -> Result<()> {
        if tx.last_insert_rowid() - self.mark_hint.load(Ordering::Relaxed) < self.batch {
            return Ok(());
        }
        let mark = index_pending(tx, self.batch)?;
        self.mark_hint.fetch_max(mark, Ordering::Relaxed);
        Ok(())
    }
}

/// Adds every event above the index watermark to the trigram index, when at
/// least `min_pending` are waiting; returns the watermark after.
pub(crate) fn index_pending(tx: &Transaction<'_>, min_pending: i64) -> Result<i64> {
    let (mark, max): (i64, i64) = tx
        .prepare_cached(
            "SELECT indexed_through, (SELECT COALESCE(MAX(rowid), 0) FROM events) FROM fts_state",
        )
        .sql()?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
        .sql()?;
    if max <= mark || max - mark < min_pending {
        return Ok(mark);
    }
    let mut rows = Vec::new();
    {
        let mut stmt = tx
            .prepare_cached(
                "SELECT rowid, session_id, seq, body FROM events WHERE rowid > ?1 ORDER BY rowid",
            )
            .sql()?;
        let mut q = stmt.query([mark]).sql()?;
        while let Some(row) = q.next().sql()? {
            let rowid: i64 = row.get(0).sql()?;
            let body: String = row.get(3).sql()?;
            let text = if let Ok(e) = serde_json::from_str::<SessionEvent>(&body) {
                index_text(&e)
            } else {
                // Reads of this row report it; the index just leaves it out.
                let session: String = row.get(1).sql()?;
                let seq: i64 = row.get(2).sql()?;
                tracing::warn!(backend = BACKEND, session_id = %session, seq, "corrupt event left out of the search index");
                String::new()
            };
            rows.push((rowid, text));
        }
    }
    let mut insert = tx
        .prepare_cached("INSERT INTO events_fts (rowid, text) VALUES (?1, ?2)")
        .sql()?;
    for (rowid, text) in &rows {
        insert.execute(params![rowid, text]).sql()?;
    }
    tx.prepare_cached("UPDATE fts_state SET indexed_through = ?1")
        .sql()?
        .execute([max])
        .sql()?;
    tracing::debug!(
        backend = BACKEND,
        events = rows.len(),
        "indexed a batch for search"
    );
    Ok(max)
}

fn existing_seq(tx: &Transaction<'_>, session_id: &str, event_id: &str) -> Result<Option<i64>> {
    tx.prepare_cached("SELECT seq FROM events WHERE session_id = ?1 AND id = ?2")
        .sql()?
        .query_row([session_id, event_id], |r| r.get(0))
        .optional()
        .sql()
}

/// Deletes a session's events and index entries (and optionally the session row).
fn purge_session(tx: &Transaction<'_>, id: &str) -> Result<usize> {
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
    tx.prepare_cached("DELETE FROM sessions WHERE id = ?1")
        .sql()?
        .execute([id])
        .sql()
}

pub(crate) fn create(tx: &Transaction<'_>, new: NewSession, now: DateTime<Utc>) -> Result<Session> {
    let existing: Option<Option<i64>> = tx
        .prepare_cached("SELECT expires_at FROM sessions WHERE id = ?1")
        .sql()?
        .query_row([&new.id], |r| r.get(0))
        .optional()
        .sql()?;
    match existing {
        Some(exp) if !expired(exp, now) => {
            return Err(SessionError::AlreadyExists {
                what: "session",
                id: new.id,
            })
        }
        Some(_) => {
            purge_session(tx, &new.id)?;
        }
        None => {}
    }
    let split = ScopedDelta::split(&new.state);
    let updated_at = now.max(new.created_at);
    tx.prepare_cached(
        "INSERT INTO sessions (id, app, user_id, key, status, created_at, updated_at, expires_at, \
         metadata, state, initial_state, event_count, context_tokens, version, last_seq, next_ctx_pos) \
         VALUES (?1, ?2, ?3, ?4, 'active', ?5, ?6, ?7, ?8, ?9, ?10, 0, 0, 0, 0, 1)",
    )
    .sql()?
    .execute(params![
        new.id,
        new.app,
        new.user_id,
        new.key,
        micros(new.created_at),
        micros(updated_at),
        new.expires_at.map(micros),
        to_json(&new.metadata, "metadata")?,
        to_json(&split.session, "state")?,
        to_json(&new.state, "initial state")?,
    ])
    .sql()?;
    let mut shared = SharedDelta::default();
    shared.add(&split);
    SharedWrite(&shared).write(tx, &new.app, &new.user_id)?;
    Ok(new.to_session(now))
}

pub(crate) fn update(
    tx: &Transaction<'_>,
    id: &str,
    update: &SessionUpdate,
    now: DateTime<Utc>,
) -> Result<Session> {
    let h = head(tx, id, now)?;
    next_version(h.version)?;
    if let Some(expected) = update.expected_version {
        let actual = h.version;
        if actual != expected {
            return Err(SessionError::Conflict {
                id: id.to_owned(),
                expected,
                actual,
            });
        }
    }
    let mut sets = vec!["version = version + 1", "updated_at = MAX(updated_at, ?2)"];
    let mut values: Vec<SqlValue> = vec![id.to_owned().into(), micros(now).into()];
    let mut push = |col: &'static str, v: SqlValue| {
        values.push(v);
        sets.push(col);
    };
    if let Some(m) = &update.metadata {
        push("metadata = ?", to_json(m, "metadata")?.into());
    }
    if let Some(s) = &update.state {
        push("state = ?", to_json(s, "state")?.into());
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
    // Number the placeholders after ?1 (id) and ?2 (now).
    let mut n = 2;
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
    get(tx, id, now)
}

pub(crate) fn delete(tx: &Transaction<'_>, id: &str) -> Result<bool> {
    Ok(purge_session(tx, id)? > 0)
}

pub(crate) fn purge_expired(tx: &Transaction<'_>, now: DateTime<Utc>) -> Result<u64> {
    let ids: Vec<String> = tx
        .prepare_cached("SELECT id FROM sessions WHERE expires_at IS NOT NULL AND expires_at <= ?1")
        .sql()?
        .query_map([micros(now)], |r| r.get(0))
        .sql()?
        .collect::<rusqlite::Result<_>>()
        .sql()?;
    for id in &ids {
        purge_session(tx, id)?;
    }
    Ok(ids.len() as u64)
}

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
    if let Some(t) = q.active_from {
        cond("updated_at >=", micros(t).into());
    }
    if let Some(t) = q.active_to {
        cond("updated_at <", micros(t).into());
    }
    let Some(offset) = q
        .page
        .checked_mul(q.page_size)
        .and_then(|o| i64::try_from(o).ok())
    else {
        return Ok(Page::empty(q.page, q.page_size));
    };
    sql.push_str(&format!(
        " ORDER BY updated_at DESC, id LIMIT {} OFFSET {offset}",
        q.page_size + 1
    ));
    let mut stmt = conn.prepare(&sql).sql()?;
    let rows: Vec<(String, Result<Session>)> = stmt
        .query_map(params_from_iter(values), raw_session)
        .sql()?
        .map(|row| row.map(|(id, raw)| (id, raw.and_then(decode_session))))
        .collect::<rusqlite::Result<_>>()
        .sql()?;
    Ok(Page::from_overfetch_decoded(rows, q.page, q.page_size))
}

pub(crate) fn append(
    tx: &Transaction<'_>,
    id: &str,
    events: &[SessionEvent],
    bodies: &[String],
    now: DateTime<Utc>,
    indexing: &Indexing<'_>,
) -> Result<AppendOutcome> {
    let mut h = head(tx, id, now)?;
    let mut seqs = Vec::with_capacity(events.len());
    let mut shared = SharedDelta::default();
    let mut tokens = 0i64;
    let mut written = 0i64;
    for (e, body) in events.iter().zip(bodies) {
        let candidate = h.last_seq.saturating_add(1);
        if !insert_event(tx, id, sql_int(candidate), Some(h.next_ctx_pos), e, body)? {
            let existing = existing_seq(tx, id, &e.id)?.unwrap_or(0);
            seqs.push(stored_counter(existing, MAX_SEQ, || {
                format!("session {id} event {} seq", e.id)
            })?);
            continue;
        }
        // Past the maximum: the error rolls the whole batch back with the transaction.
        let seq = next_seq(h.last_seq)?;
        h.last_seq = seq;
        h.next_ctx_pos = next_position(h.next_ctx_pos)?;
        if let Some(d) = &e.state_delta {
            shared.apply_event(h.state.get_mut()?, d);
        }
        tokens = tokens.saturating_add(i64::from(e.token_estimate));
        written += 1;
        seqs.push(seq);
    }
    if written > 0 {
        let version = next_version(h.version)?;
        tx.prepare_cached(
            "UPDATE sessions SET state = COALESCE(?2, state), version = version + 1, last_seq = ?3, \
             next_ctx_pos = ?4, event_count = event_count + ?5, context_tokens = context_tokens + ?6, \
             updated_at = MAX(updated_at, ?7) WHERE id = ?1",
        )
        .sql()?
        .execute(params![
            id,
            h.state.changed()?,
            sql_int(h.last_seq),
            h.next_ctx_pos,
            written,
            tokens,
            micros(now)
        ])
        .sql()?;
        SharedWrite(&shared).write(tx, &h.app, &h.user_id)?;
        indexing.after_insert(tx)?;
        h.version = version;
    }
    Ok(AppendOutcome {
        version: h.version,
        seqs,
        written: usize::try_from(written).unwrap_or(0),
    })
}

pub(crate) fn event_version(conn: &Connection, id: &str, now: DateTime<Utc>) -> Result<u64> {
    let row: Option<(i64, Option<i64>)> = conn
        .prepare_cached("SELECT version, expires_at FROM sessions WHERE id = ?1")
        .sql()?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .sql()?;
    match row {
        Some((v, exp)) if !expired(exp, now) => {
            stored_counter(v, MAX_VERSION, || format!("session {id} version"))
        }
        _ => Err(SessionError::session_not_found(id)),
    }
}

pub(crate) fn replace_context(
    tx: &Transaction<'_>,
    id: &str,
    events: &[SessionEvent],
    bodies: &[String],
    expected_version: u64,
    now: DateTime<Utc>,
    indexing: &Indexing<'_>,
) -> Result<bool> {
    let mut h = head(tx, id, now)?;
    if h.version != expected_version {
        return Ok(false);
    }
    next_version(h.version)?;
    tx.prepare_cached(
        "UPDATE events SET ctx_pos = NULL WHERE session_id = ?1 AND ctx_pos IS NOT NULL",
    )
    .sql()?
    .execute([id])
    .sql()?;
    let mut shared = SharedDelta::default();
    let mut added = 0i64;
    for (e, body) in events.iter().zip(bodies) {
        let pos = h.next_ctx_pos;
        h.next_ctx_pos = next_position(h.next_ctx_pos)?;
        let moved = tx
            .prepare_cached("UPDATE events SET ctx_pos = ?3 WHERE session_id = ?1 AND id = ?2")
            .sql()?
            .execute(params![id, e.id, pos])
            .sql()?;
        if moved == 0 {
            h.last_seq = next_seq(h.last_seq)?;
            insert_event(tx, id, sql_int(h.last_seq), Some(pos), e, body)?;
            if let Some(d) = &e.state_delta {
                shared.apply_event(h.state.get_mut()?, d);
            }
            added += 1;
        }
    }
    tx.prepare_cached(
        "UPDATE sessions SET state = COALESCE(?2, state), version = version + 1, last_seq = ?3, \
         next_ctx_pos = ?4, event_count = event_count + ?5, \
         context_tokens = (SELECT COALESCE(SUM(token_estimate), 0) FROM events \
                           WHERE session_id = ?1 AND ctx_pos IS NOT NULL), \
         updated_at = MAX(updated_at, ?6) WHERE id = ?1",
    )
    .sql()?
    .execute(params![
        id,
        h.state.changed()?,
        sql_int(h.last_seq),
        h.next_ctx_pos,
        added,
        micros(now)
    ])
    .sql()?;
    SharedWrite(&shared).write(tx, &h.app, &h.user_id)?;
    if added > 0 {
        indexing.after_insert(tx)?;
    }
    Ok(true)
}

pub(crate) fn rewind(
    tx: &Transaction<'_>,
    id: &str,
    invocation: &str,
    now: DateTime<Utc>,
) -> Result<RewindOutcome> {
    let h = head(tx, id, now)?;
    let version = next_version(h.version)?;
    let from: Option<i64> = tx
        .prepare_cached("SELECT MIN(seq) FROM events WHERE session_id = ?1 AND invocation_id = ?2")
        .sql()?
        .query_row([id, invocation], |r| r.get(0))
        .sql()?;
    let Some(from) = from else {
        return Err(SessionError::NotFound {
            what: "invocation",
            id: invocation.to_owned(),
        });
    };
    tx.prepare_cached(
        "DELETE FROM events_fts WHERE rowid IN (SELECT rowid FROM events WHERE session_id = ?1 \
         AND seq >= ?2 AND rowid <= (SELECT indexed_through FROM fts_state))",
    )
    .sql()?
    .execute(params![id, from])
    .sql()?;
    let removed = tx
        .prepare_cached("DELETE FROM events WHERE session_id = ?1 AND seq >= ?2")
        .sql()?
        .execute(params![id, from])
        .sql()?;
    let initial: String = tx
        .prepare_cached("SELECT initial_state FROM sessions WHERE id = ?1")
        .sql()?
        .query_row([id], |r| r.get(0))
        .sql()?;
    let initial = parse_map(&initial, || format!("session {id} initial state"))?;
    let mut deltas = Vec::new();
    {
        let mut stmt = tx
            .prepare_cached(
                "SELECT seq, state_delta FROM events WHERE session_id = ?1 \
                 AND state_delta IS NOT NULL ORDER BY seq",
            )
            .sql()?;
        let rows = stmt
            .query_map([id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
            .sql()?;
        for row in rows {
            let (seq, text) = row.sql()?;
            deltas.push(parse_map(&text, || {
                format!("session {id} seq {seq} state delta")
            })?);
        }
    }
    let state = replay_deltas(&initial, &deltas);
    tx.prepare_cached(
        "UPDATE sessions SET state = ?2, version = version + 1, \
         event_count = (SELECT COUNT(*) FROM events WHERE session_id = ?1), \
         context_tokens = (SELECT COALESCE(SUM(token_estimate), 0) FROM events \
                           WHERE session_id = ?1 AND ctx_pos IS NOT NULL), \
         updated_at = MAX(updated_at, ?3) WHERE id = ?1",
    )
    .sql()?
    .execute(params![id, to_json(&state, "state")?, micros(now)])
    .sql()?;
    Ok(RewindOutcome { version, removed })
}

fn decode_event(session_id: &str, seq: i64, body: &str) -> Result<SessionEvent> {
    SessionEvent::decode_stored(session_id, u64::try_from(seq).unwrap_or(0), body)
}

pub(crate) fn events(
    conn: &Connection,
    id: &str,
    filter: &EventFilter,
    now: DateTime<Utc>,
) -> Result<Page<SessionEvent>> {
    ensure_live(conn, id, now)?;
    let order = match filter.view {
        EventView::Context => "ctx_pos",
        EventView::Archive => "seq",
    };
    let mut sql = String::from("SELECT seq, body FROM events WHERE session_id = ?1");
    let mut values: Vec<SqlValue> = vec![id.to_owned().into()];
    if filter.view == EventView::Context {
        sql.push_str(" AND ctx_pos IS NOT NULL");
    }
    let mut cond = |c: &str, v: SqlValue| {
        values.push(v);
        sql.push_str(&format!(" AND {c} ?{}", values.len()));
    };
    if let Some(t) = filter.from {
        cond("timestamp >=", micros(t).into());
    }
    if let Some(t) = filter.to {
        cond("timestamp <", micros(t).into());
    }
    if let Some(i) = &filter.invocation_id {
        cond("invocation_id =", i.clone().into());
    }
    match filter.synthetic {
        SyntheticFilter::Include => {}
        SyntheticFilter::Exclude => sql.push_str(" AND synthetic = 0"),
        SyntheticFilter::Only => sql.push_str(" AND synthetic = 1"),
    }
    let mut in_list = |col: &str, items: Vec<SqlValue>, or_null: bool| {
        let start = values.len() + 1;
        let marks: Vec<String> = (start..start + items.len())
            .map(|n| format!("?{n}"))
            .collect();
        values.extend(items);
        let list = format!("{col} IN ({})", marks.join(", "));
        if or_null {
            sql.push_str(&format!(" AND ({col} IS NULL OR {list})"));
        } else {
            sql.push_str(&format!(" AND {list}"));
        }
    };
    if !filter.roles.is_empty() {
        in_list(
            "role",
            filter
                .roles
                .iter()
                .map(|r| SqlValue::from(r.as_str().to_owned()))
                .collect(),
            false,
        );
    }
    if let Some(b) = &filter.branch {
        in_list(
            "branch",
            visible_branches(b)
                .into_iter()
                .map(SqlValue::from)
                .collect(),
            true,
        );
    }
    let checked_in_rust = filter.keyword.is_some();
    let matcher = filter.matcher();
    let decode_all = |stmt: &mut rusqlite::Statement<'_>,
                      values: Vec<SqlValue>,
                      limit: Option<usize>,
                      skip: usize|
     -> Result<(Vec<SessionEvent>, bool)> {
        let mut rows = stmt.query(params_from_iter(values)).sql()?;
        let mut out = Vec::new();
        let mut skipped = 0;
        let mut more = false;
        while let Some(row) = rows.next().sql()? {
            let seq: i64 = row.get(0).sql()?;
            let body: String = row.get(1).sql()?;
            let e = decode_event(id, seq, &body)?;
            if !matcher.matches(&e) {
                continue;
            }
            if skipped < skip {
                skipped += 1;
                continue;
            }
            if limit.is_some_and(|l| out.len() == l) {
                more = true;
                break;
            }
            out.push(e);
        }
        Ok((out, more))
    };
    if let Some(n) = filter.last_n {
        sql.push_str(&format!(" ORDER BY {order} DESC"));
        if !checked_in_rust {
            sql.push_str(&format!(" LIMIT {n}"));
        }
        let mut stmt = conn.prepare_cached(&sql).sql()?;
        let (mut recent, _) = decode_all(&mut stmt, values, Some(n), 0)?;
        recent.reverse();
        return Ok(Page::paginate(recent, filter.page, filter.page_size));
    }
    let Some(offset) = filter.page.checked_mul(filter.page_size) else {
        return Ok(Page::empty(filter.page, filter.page_size));
    };
    sql.push_str(&format!(" ORDER BY {order}"));
    let skip = if checked_in_rust {
        offset
    } else {
        let Ok(off) = i64::try_from(offset) else {
            return Ok(Page::empty(filter.page, filter.page_size));
        };
        sql.push_str(&format!(" LIMIT {} OFFSET {off}", filter.page_size + 1));
        0
    };
    let mut stmt = conn.prepare_cached(&sql).sql()?;
    let (items, has_more) = decode_all(&mut stmt, values, Some(filter.page_size), skip)?;
    let mut page = Page::from_overfetch(items, filter.page, filter.page_size);
    page.has_more = has_more;
    Ok(page)
}

/// Whether a LIKE on the stored JSON body can pre-filter for `text`: ASCII
/// only (LIKE folds ASCII case only) and nothing JSON escapes.
fn like_safe(text: &str) -> bool {
    text.chars()
        .all(|c| c.is_ascii() && !c.is_ascii_control() && c != '"' && c != '\\')
}

fn like_pattern(text: &str) -> String {
    let mut p = String::with_capacity(text.len() + 2);
    p.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '^') {
            p.push('^');
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// An FTS5 query for a literal phrase: one quoted string, quotes doubled.
fn fts_phrase(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

pub(crate) fn search(
    conn: &Connection,
    q: &SearchQuery,
    now: DateTime<Utc>,
) -> Result<Page<SearchHit>> {
    let mut values: Vec<SqlValue> = Vec::new();
    let (scope_sql, multi) = match &q.scope {
        SearchScope::Session(id) => {
            ensure_live(conn, id, now)?;
            values.push(id.clone().into());
            ("e.session_id = ?1".to_owned(), false)
        }
        SearchScope::User { app, user_id } => {
            values.push(app.clone().into());
            values.push(user_id.clone().into());
            values.push(micros(now).into());
            (
                "e.session_id IN (SELECT id FROM sessions WHERE app = ?1 AND user_id = ?2 \
                 AND (expires_at IS NULL OR expires_at > ?3))"
                    .to_owned(),
                true,
            )
        }
    };
    let order = if multi {
        "e.timestamp, e.session_id, e.seq"
    } else {
        "e.seq"
    };
    if q.mode == SearchMode::Ranked {
        return ranked_search(conn, q, &scope_sql, values);
    }
    let needle = fold_case(&q.text);
    let sql = if q.text.chars().count() >= 3 && !q.text.contains('\0') {
        // Indexed events through the trigram index, plus the not-yet-indexed
        // tail (at most one index batch), read in the same snapshot.
        values.push(fts_phrase(&q.text).into());
        let order = order.replace("e.", "");
        format!(
            "SELECT session_id, seq, body FROM ( \
               SELECT e.session_id, e.seq, e.body, e.timestamp FROM events e WHERE {scope_sql} \
                 AND e.rowid IN (SELECT rowid FROM events_fts WHERE events_fts MATCH ?{n}) \
               UNION ALL \
               SELECT e.session_id, e.seq, e.body, e.timestamp FROM events e WHERE {tail_scope} \
                 AND e.rowid > (SELECT indexed_through FROM fts_state) \
             ) ORDER BY {order}",
            n = values.len(),
            // `+` keeps the planner on the rowid range (the short tail) instead of the session index.
            tail_scope = scope_sql.replacen("e.session_id", "+e.session_id", 1),
        )
    } else if like_safe(&q.text) {
        values.push(like_pattern(&q.text).into());
        format!(
            "SELECT e.session_id, e.seq, e.body FROM events e \
             WHERE {scope_sql} AND e.body LIKE ?{} ESCAPE '^' ORDER BY {order}",
            values.len()
        )
    } else {
        format!(
            "SELECT e.session_id, e.seq, e.body FROM events e WHERE {scope_sql} ORDER BY {order}"
        )
    };
    let Some(skip) = q.page.checked_mul(q.page_size) else {
        return Ok(Page::empty(q.page, q.page_size));
    };
    let mut stmt = conn.prepare_cached(&sql).sql()?;
    let mut rows = stmt.query(params_from_iter(values)).sql()?;
    let mut items = Vec::new();
    let mut seen = 0usize;
    let mut has_more = false;
    while let Some(row) = rows.next().sql()? {
        let session_id: String = row.get(0).sql()?;
        let seq: i64 = row.get(1).sql()?;
        let body: String = row.get(2).sql()?;
        let e = decode_event(&session_id, seq, &body)?;
        if !session_core::contains_folded(&e.message.search_text(), &needle) {
            continue;
        }
        seen += 1;
        if seen <= skip {
            continue;
        }
        if items.len() == q.page_size {
            has_more = true;
            break;
        }
        items.push(SearchHit {
            session_id,
            event: e,
            score: None,
        });
    }
    let mut page = Page::from_overfetch(items, q.page, q.page_size);
    page.has_more = has_more;
    Ok(page)
}

fn ranked_search(
    conn: &Connection,
    q: &SearchQuery,
    scope_sql: &str,
    mut values: Vec<SqlValue>,
) -> Result<Page<SearchHit>> {
    let terms: Vec<String> = q
        .text
        .split_whitespace()
        .filter(|w| w.chars().count() >= 3)
        .map(|w| fts_phrase(&w.replace('\0', " ")))
        .collect();
    if terms.is_empty() {
        return Err(SessionError::invalid(
            "query",
            "ranked search needs at least one word of three or more characters",
        ));
    }
    values.push(terms.join(" OR ").into());
    let Some(offset) = q
        .page
        .checked_mul(q.page_size)
        .and_then(|o| i64::try_from(o).ok())
    else {
        return Ok(Page::empty(q.page, q.page_size));
    };
    let sql = format!(
        "SELECT e.session_id, e.seq, e.body, f.rank FROM events_fts f JOIN events e ON e.rowid = f.rowid \
         WHERE {scope_sql} AND events_fts MATCH ?{} ORDER BY f.rank, e.seq LIMIT {} OFFSET {offset}",
        values.len(),
        q.page_size + 1
    );
    let mut stmt = conn.prepare_cached(&sql).sql()?;
    let mut rows = stmt.query(params_from_iter(values)).sql()?;
    let mut items = Vec::new();
    while let Some(row) = rows.next().sql()? {
        let session_id: String = row.get(0).sql()?;
        let seq: i64 = row.get(1).sql()?;
        let body: String = row.get(2).sql()?;
        let rank: f64 = row.get(3).sql()?;
        let event = decode_event(&session_id, seq, &body)?;
        items.push(SearchHit {
            session_id,
            event,
            score: Some(-rank),
        });
    }
    Ok(Page::from_overfetch(items, q.page, q.page_size))
}

pub(crate) fn shared_state(conn: &Connection, app: &str, user_id: &str) -> Result<SharedState> {
    let app_state: Option<String> = conn
        .prepare_cached("SELECT state FROM app_state WHERE app = ?1")
        .sql()?
        .query_row([app], |r| r.get(0))
        .optional()
        .sql()?;
    let user_state: Option<String> = conn
        .prepare_cached("SELECT state FROM user_state WHERE app = ?1 AND user_id = ?2")
        .sql()?
        .query_row([app, user_id], |r| r.get(0))
        .optional()
        .sql()?;
    Ok(SharedState {
        app: app_state
            .map(|s| parse_map(&s, || format!("app {app} state")))
            .transpose()?
            .unwrap_or_default(),
        user: user_state
            .map(|s| parse_map(&s, || format!("user {user_id} state in app {app}")))
            .transpose()?
            .unwrap_or_default(),
    })
}

/// Everything about one session, read in one snapshot.
pub(crate) fn export_session(
    conn: &Connection,
    id: &str,
    now: DateTime<Utc>,
) -> Result<SessionDump> {
    let session = get(conn, id, now)?;
    let (initial, last_seq): (String, i64) = conn
        .prepare_cached("SELECT initial_state, last_seq FROM sessions WHERE id = ?1")
        .sql()?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
        .sql()?;
    let mut events = Vec::new();
    let mut context: Vec<(i64, u64)> = Vec::new();
    {
        let mut stmt = conn
            .prepare_cached(
                "SELECT seq, body, ctx_pos FROM events WHERE session_id = ?1 ORDER BY seq",
            )
            .sql()?;
        let mut rows = stmt.query([id]).sql()?;
        while let Some(row) = rows.next().sql()? {
            let seq: i64 = row.get(0).sql()?;
            let body: String = row.get(1).sql()?;
            let pos: Option<i64> = row.get(2).sql()?;
            let e = decode_event(id, seq, &body)?;
            if let Some(p) = pos {
                context.push((p, e.seq));
            }
            events.push(e);
        }
    }
    context.sort_unstable();
    let shared = shared_state(conn, &session.app, &session.user_id)?;
    Ok(SessionDump {
        initial_state: parse_map(&initial, || format!("session {id} initial state"))?,
        last_seq: u64::try_from(last_seq).unwrap_or(0),
        events,
        context: context.into_iter().map(|(_, seq)| seq).collect(),
        shared,
        session,
    })
}

/// Writes a dump exactly, replacing an older copy of the session.
pub(crate) fn import_session(
    tx: &Transaction<'_>,
    dump: &SessionDump,
    bodies: &[String],
    now: DateTime<Utc>,
) -> Result<ImportOutcome> {
    let s = &dump.session;
    let existing: Option<(i64, Option<i64>)> = tx
        .prepare_cached("SELECT version, expires_at FROM sessions WHERE id = ?1")
        .sql()?
        .query_row([&s.id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .sql()?;
    if let Some((version, exp)) = existing {
        // A corrupt stored version (negative, past the maximum) is replaced
        // by a valid dump rather than blocking the restore.
        let stored = stored_counter(version, MAX_VERSION, String::new).ok();
        if !expired(exp, now) && stored.is_some_and(|v| v >= s.version) {
            return Ok(ImportOutcome::Unchanged);
        }
        purge_session(tx, &s.id)?;
    }
    let position = dump.context_positions();
    let context_tokens = dump.context_tokens();
    let as_i64 = sql_int;
    tx.prepare_cached(
        "INSERT INTO sessions (id, app, user_id, key, status, created_at, updated_at, expires_at, \
         metadata, state, initial_state, event_count, context_tokens, version, last_seq, next_ctx_pos) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
    )
    .sql()?
    .execute(params![
        s.id,
        s.app,
        s.user_id,
        s.key,
        s.status.as_str(),
        micros(s.created_at),
        micros(s.updated_at),
        s.expires_at.map(micros),
        to_json(&s.metadata, "metadata")?,
        to_json(&s.state, "state")?,
        to_json(&dump.initial_state, "initial state")?,
        i64::try_from(dump.events.len()).unwrap_or(i64::MAX),
        as_i64(context_tokens),
        as_i64(s.version),
        as_i64(dump.last_seq),
        i64::try_from(dump.context.len())
            .unwrap_or(i64::MAX)
            .saturating_add(1),
    ])
    .sql()?;
    for (e, body) in dump.events.iter().zip(bodies) {
        insert_event(
            tx,
            &s.id,
            as_i64(e.seq),
            position.get(&e.seq).copied(),
            e,
            body,
        )?;
    }
    let mut shared = SharedDelta::default();
    shared.app.clone_from(&dump.shared.app);
    shared.user.clone_from(&dump.shared.user);
    SharedWrite(&shared).replace(tx, &s.app, &s.user_id)?;
    Ok(ImportOutcome::Imported)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branches_visible_to_a_viewer() {
        assert_eq!(
            visible_branches("orch.researcher"),
            ["orch", "orch.researcher"]
        );
        assert_eq!(visible_branches("a"), ["a"]);
    }

    #[test]
    fn like_pattern_escapes_wildcards() {
        assert_eq!(like_pattern("a%b_c^"), "%a^%b^_c^^%");
        assert!(like_safe("ab"));
        assert!(!like_safe("a\"b"));
        assert!(!like_safe("é"));
    }

    #[test]
    fn fts_phrase_doubles_quotes() {
        assert_eq!(fts_phrase("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
