//! The SQL behind `PostgresRepository`, one async function per operation.

use chrono::{DateTime, Utc};
use deadpool_postgres::{Client, Transaction};
use session_core::state::{apply_delta, replay_deltas, LazyState, ScopedDelta, SharedDelta};
use session_core::{
    contains_folded, fold_case, visible_branches, AppendOutcome, EventFilter, EventView,
    ImportOutcome, NewSession, Page, RewindOutcome, SearchHit, SearchMode, SearchQuery,
    SearchScope, Session, SessionDump, SessionError, SessionEvent, SessionQuery, SessionStatus,
    SessionUpdate, SharedState, StateMap, SyntheticFilter,
};
use session_core::{next_seq, next_version, stored_counter, MAX_SEQ, MAX_VERSION};
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use crate::quiet::Quiet;

/// A failure inside a store function: an engine error (kept whole, so the
/// caller can retry serialization failures) or an already-typed error.
#[derive(Debug)]
pub(crate) enum StoreError {
    Pg(tokio_postgres::Error),
    Session(SessionError),
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        Self::Pg(e)
    }
}

impl From<SessionError> for StoreError {
    fn from(e: SessionError) -> Self {
        Self::Session(e)
    }
}

type R<T> = Result<T, StoreError>;

/// The qualified table names of one schema.
#[derive(Debug, Clone)]
pub(crate) struct Tables {
    pub(crate) sessions: String,
    pub(crate) events: String,
    pub(crate) app_state: String,
    pub(crate) user_state: String,
}

impl Tables {
    pub(crate) fn new(schema: &str) -> Self {
        let q = |t: &str| format!("\"{schema}\".{t}");
        Self {
            sessions: q("sessions"),
            events: q("events"),
            app_state: q("app_state"),
            user_state: q("user_state"),
        }
    }
}

fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

fn from_micros(us: i64, what: &str) -> Result<DateTime<Utc>, SessionError> {
    DateTime::from_timestamp_micros(us).ok_or_else(|| {
        SessionError::serialization(what.to_owned(), format!("timestamp {us} is out of range"))
    })
}

use session_core::state::{decode_state as parse_map, encode_state as to_json};

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// A seq or version as PostgreSQL stores it; values are bounded by
/// `MAX_SEQ`/`MAX_VERSION`, far inside `BIGINT`.
fn sql_int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The context position after `pos`, or a typed error instead of an overflow.
fn next_position(pos: i64) -> Result<i64, SessionError> {
    pos.checked_add(1).ok_or_else(|| {
        SessionError::invalid("context", "the context position counter is exhausted")
    })
}

const SESSION_COLUMNS: &str = "id, app, user_id, key, status, created_at, updated_at, expires_at, \
     metadata, state, event_count, context_tokens, version";

fn decode_session(row: &Row) -> R<Session> {
    let id: String = row.try_get(0)?;
    let ctx = |field: &str| format!("session {id} {field}");
    let status: String = row.try_get(4)?;
    let status = match status.as_str() {
        "active" => SessionStatus::Active,
        "archived" => SessionStatus::Archived,
        other => {
            return Err(SessionError::serialization(
                ctx("status"),
                format!("unknown status {other:?}"),
            )
            .into())
        }
    };
    let expires_at: Option<i64> = row.try_get(7)?;
    Ok(Session {
        app: row.try_get(1)?,
        user_id: row.try_get(2)?,
        key: row.try_get(3)?,
        status,
        created_at: from_micros(row.try_get(5)?, &ctx("created_at"))?,
        updated_at: from_micros(row.try_get(6)?, &ctx("updated_at"))?,
        expires_at: expires_at
            .map(|t| from_micros(t, &ctx("expires_at")))
            .transpose()?,
        metadata: parse_map(&row.try_get::<_, String>(8)?, || ctx("metadata"))?,
        state: parse_map(&row.try_get::<_, String>(9)?, || ctx("state"))?,
        event_count: count(row.try_get(10)?),
        context_tokens: count(row.try_get(11)?),
        version: stored_counter(row.try_get(12)?, MAX_VERSION, || ctx("version"))?,
        id: id.clone(),
    })
}

fn expired(expires_at: Option<i64>, now: DateTime<Utc>) -> bool {
    expires_at.is_some_and(|t| t <= micros(now))
}

pub(crate) async fn get(c: &Client, t: &Tables, id: &str, now: DateTime<Utc>) -> R<Session> {
    let stmt = c
        .prepare_cached(&format!(
            "SELECT {SESSION_COLUMNS} FROM {} WHERE id = $1",
            t.sessions
        ))
        .await?;
    match c.fetch_opt(&stmt, &[&id]).await? {
        Some(row) if !expired(row.try_get(7)?, now) => decode_session(&row),
        _ => Err(SessionError::session_not_found(id).into()),
    }
}

async fn ensure_live(c: &Client, t: &Tables, id: &str, now: DateTime<Utc>) -> R<()> {
    let stmt = c
        .prepare_cached(&format!(
            "SELECT expires_at FROM {} WHERE id = $1",
            t.sessions
        ))
        .await?;
    match c.fetch_opt(&stmt, &[&id]).await? {
        Some(row) if !expired(row.try_get(0)?, now) => Ok(()),
        _ => Err(SessionError::session_not_found(id).into()),
    }
}

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

/// Locks the session row for the rest of the transaction and reads its head.
async fn head(tx: &Transaction<'_>, t: &Tables, id: &str, now: DateTime<Utc>) -> R<Head> {
    let stmt = tx
        .prepare_cached(&format!(
            "SELECT app, user_id, expires_at, state, version, last_seq, next_ctx_pos \
             FROM {} WHERE id = $1 FOR UPDATE",
            t.sessions
        ))
        .await?;
    let Some(row) = tx.fetch_opt(&stmt, &[&id]).await? else {
        return Err(SessionError::session_not_found(id).into());
    };
    if expired(row.try_get(2)?, now) {
        return Err(SessionError::Expired { id: id.to_owned() }.into());
    }
    Ok(Head {
        app: row.try_get(0)?,
        user_id: row.try_get(1)?,
        state: LazyState::new(row.try_get(3)?, id),
        version: stored_counter(row.try_get(4)?, MAX_VERSION, || {
            format!("session {id} version")
        })?,
        last_seq: stored_counter(row.try_get(5)?, MAX_SEQ, || {
            format!("session {id} last_seq")
        })?,
        next_ctx_pos: row.try_get(6)?,
    })
}

/// Writes shared-scope changes under row locks (app, then user).
struct SharedWrite<'a>(&'a SharedDelta);

impl SharedWrite<'_> {
    /// Read-modify-write of the shared scopes under row locks (app, then user).
    async fn write(&self, tx: &Transaction<'_>, t: &Tables, app: &str, user_id: &str) -> R<()> {
        if !self.0.app.is_empty() {
            let key: [&(dyn ToSql + Sync); 1] = [&app];
            update_shared(tx, &t.app_state, "app = $1", &key, &self.0.app, || {
                format!("app {app} state")
            })
            .await?;
        }
        if !self.0.user.is_empty() {
            let key: [&(dyn ToSql + Sync); 2] = [&app, &user_id];
            update_shared(
                tx,
                &t.user_state,
                "app = $1 AND user_id = $2",
                &key,
                &self.0.user,
                || format!("user {user_id} state in app {app}"),
            )
            .await?;
        }
        Ok(())
    }
}

async fn update_shared(
    tx: &Transaction<'_>,
    table: &str,
    cond: &str,
    key: &[&(dyn ToSql + Sync)],
    delta: &StateMap,
    what: impl Fn() -> String,
) -> R<()> {
    let cols = if key.len() == 1 {
        "app"
    } else {
        "app, user_id"
    };
    let marks = if key.len() == 1 { "$1" } else { "$1, $2" };
    let insert = tx
        .prepare_cached(&format!(
            "INSERT INTO {table} ({cols}, state) VALUES ({marks}, '{{}}') ON CONFLICT DO NOTHING"
        ))
        .await?;
    tx.run(&insert, key).await?;
    let select = tx
        .prepare_cached(&format!(
            "SELECT state FROM {table} WHERE {cond} FOR UPDATE"
        ))
        .await?;
    let row = tx.fetch_one(&select, key).await?;
    let mut state = parse_map(&row.try_get::<_, String>(0)?, &what)?;
    apply_delta(&mut state, delta);
    let json = to_json(&state, &what())?;
    let n = key.len() + 1;
    let update = tx
        .prepare_cached(&format!("UPDATE {table} SET state = ${n} WHERE {cond}"))
        .await?;
    let mut params: Vec<&(dyn ToSql + Sync)> = key.to_vec();
    params.push(&json);
    tx.run(&update, &params).await?;
    Ok(())
}

/// The text the trigram and full-text indexes hold: the search text,
/// case-folded in Rust (so matching does not depend on the database's
/// locale), with NUL (which PostgreSQL text cannot hold) as a space.
fn index_text(e: &SessionEvent) -> String {
    fold_case(&e.message.search_text()).replace('\0', " ")
}

/// Inserts one event unless the session holds its id; returns whether it was written.
async fn insert_event(
    tx: &Transaction<'_>,
    t: &Tables,
    session_id: &str,
    seq: i64,
    ctx_pos: Option<i64>,
    e: &SessionEvent,
    body: &str,
) -> R<bool> {
    let stmt = tx
        .prepare_cached(&format!(
            "INSERT INTO {} (session_id, seq, id, ctx_pos, ts, role, branch, invocation_id, synthetic, \
             token_estimate, state_delta, search_text, body) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
             ON CONFLICT (session_id, id) DO NOTHING",
            t.events
        ))
        .await?;
    let delta = e
        .state_delta
        .as_ref()
        .map(|d| to_json(d, "state delta"))
        .transpose()?;
    let n = tx
        .run(
            &stmt,
            &[
                &session_id,
                &seq,
                &e.id,
                &ctx_pos,
                &micros(e.timestamp),
                &e.role().as_str(),
                &e.branch,
                &e.invocation_id,
                &e.is_synthetic(),
                &i64::from(e.token_estimate),
                &delta,
                &index_text(e),
                &body,
            ],
        )
        .await?;
    Ok(n == 1)
}

async fn existing_seq(
    tx: &Transaction<'_>,
    t: &Tables,
    session_id: &str,
    event_id: &str,
) -> R<i64> {
    let stmt = tx
        .prepare_cached(&format!(
            "SELECT seq FROM {} WHERE session_id = $1 AND id = $2",
            t.events
        ))
        .await?;
    Ok(tx
        .fetch_one(&stmt, &[&session_id, &event_id])
        .await?
        .try_get(0)?)
}

pub(crate) async fn create(
    tx: &Transaction<'_>,
    t: &Tables,
    new: &NewSession,
    now: DateTime<Utc>,
) -> R<Session> {
    let existing = tx
        .prepare_cached(&format!(
            "SELECT expires_at FROM {} WHERE id = $1 FOR UPDATE",
            t.sessions
        ))
        .await?;
    if let Some(row) = tx.fetch_opt(&existing, &[&new.id]).await? {
        if !expired(row.try_get(0)?, now) {
            return Err(SessionError::AlreadyExists {
                what: "session",
                id: new.id.clone(),
            }
            .into());
        }
        let del = tx
            .prepare_cached(&format!("DELETE FROM {} WHERE id = $1", t.sessions))
            .await?;
        tx.run(&del, &[&new.id]).await?;
    }
    let split = ScopedDelta::split(&new.state);
    let updated_at = now.max(new.created_at);
    let stmt = tx
        .prepare_cached(&format!(
            "INSERT INTO {} (id, app, user_id, key, status, created_at, updated_at, expires_at, metadata, \
             state, initial_state, event_count, context_tokens, version, last_seq, next_ctx_pos) \
             VALUES ($1, $2, $3, $4, 'active', $5, $6, $7, $8, $9, $10, 0, 0, 0, 0, 1)",
            t.sessions
        ))
        .await?;
    tx.run(
        &stmt,
        &[
            &new.id,
            &new.app,
            &new.user_id,
            &new.key,
            &micros(new.created_at),
            &micros(updated_at),
            &new.expires_at.map(micros),
            &to_json(&new.metadata, "metadata")?,
            &to_json(&split.session, "state")?,
            &to_json(&new.state, "initial state")?,
        ],
    )
    .await?;
    let mut shared = SharedDelta::default();
    shared.add(&split);
    SharedWrite(&shared)
        .write(tx, t, &new.app, &new.user_id)
        .await?;
    Ok(new.to_session(now))
}

pub(crate) async fn update(
    tx: &Transaction<'_>,
    t: &Tables,
    id: &str,
    update: &SessionUpdate,
    now: DateTime<Utc>,
) -> R<Session> {
    let h = head(tx, t, id, now).await?;
    next_version(h.version)?;
    if let Some(expected) = update.expected_version {
        let actual = h.version;
        if actual != expected {
            return Err(SessionError::Conflict {
                id: id.to_owned(),
                expected,
                actual,
            }
            .into());
        }
    }
    let metadata = update
        .metadata
        .as_ref()
        .map(|m| to_json(m, "metadata"))
        .transpose()?;
    let state = update
        .state
        .as_ref()
        .map(|s| to_json(s, "state"))
        .transpose()?;
    let status = update.status.map(SessionStatus::as_str);
    let set_expiry = update.expires_at.is_some();
    let expires_at = update.expires_at.flatten().map(micros);
    let stmt = tx
        .prepare_cached(&format!(
            "UPDATE {} SET version = version + 1, updated_at = GREATEST(updated_at, $2), \
             metadata = COALESCE($3, metadata), state = COALESCE($4, state), \
             status = COALESCE($5, status), \
             expires_at = CASE WHEN $6 THEN $7 ELSE expires_at END \
             WHERE id = $1 RETURNING {SESSION_COLUMNS}",
            t.sessions
        ))
        .await?;
    let row = tx
        .fetch_one(
            &stmt,
            &[
                &id,
                &micros(now),
                &metadata,
                &state,
                &status,
                &set_expiry,
                &expires_at,
            ],
        )
        .await?;
    decode_session(&row)
}

pub(crate) async fn delete(tx: &Transaction<'_>, t: &Tables, id: &str) -> R<bool> {
    let stmt = tx
        .prepare_cached(&format!("DELETE FROM {} WHERE id = $1", t.sessions))
        .await?;
    Ok(tx.run(&stmt, &[&id]).await? > 0)
}

pub(crate) async fn purge_expired(tx: &Transaction<'_>, t: &Tables, now: DateTime<Utc>) -> R<u64> {
    let stmt = tx
        .prepare_cached(&format!(
            "DELETE FROM {} WHERE expires_at IS NOT NULL AND expires_at <= $1",
            t.sessions
        ))
        .await?;
    tx.run(&stmt, &[&micros(now)]).await
}

/// Builds `WHERE` conditions with numbered placeholders.
struct Conditions {
    sql: String,
    values: Vec<Box<dyn ToSql + Sync + Send>>,
}

impl Conditions {
    fn new(sql: String) -> Self {
        Self {
            sql,
            values: Vec::new(),
        }
    }

    fn push(&mut self, cond: &str, v: impl ToSql + Sync + Send + 'static) {
        self.values.push(Box::new(v));
        self.sql
            .push_str(&format!(" AND {cond} ${}", self.values.len()));
    }

    fn next_mark(&mut self, v: impl ToSql + Sync + Send + 'static) -> String {
        self.values.push(Box::new(v));
        format!("${}", self.values.len())
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.values
            .iter()
            .map(|v| -> &(dyn ToSql + Sync) { v.as_ref() })
            .collect()
    }
}

pub(crate) async fn list(
    c: &Client,
    t: &Tables,
    q: &SessionQuery,
    now: DateTime<Utc>,
) -> R<Page<Session>> {
    let mut w = Conditions::new(format!(
        "SELECT {SESSION_COLUMNS} FROM {} WHERE (expires_at IS NULL OR expires_at > $1)",
        t.sessions
    ));
    w.values.push(Box::new(micros(now)));
    if let Some(a) = &q.app {
        w.push("app =", a.clone());
    }
    if let Some(u) = &q.user_id {
        w.push("user_id =", u.clone());
    }
    if let Some(k) = &q.key {
        w.push("key =", k.clone());
    }
    if let Some(s) = q.status {
        w.push("status =", s.as_str().to_owned());
    }
    if let Some(t) = q.active_from {
        w.push("updated_at >=", micros(t));
    }
    if let Some(t) = q.active_to {
        w.push("updated_at <", micros(t));
    }
    let Some(offset) = q
        .page
        .checked_mul(q.page_size)
        .and_then(|o| i64::try_from(o).ok())
    else {
        return Ok(Page::empty(q.page, q.page_size));
    };
    w.sql.push_str(&format!(
        " ORDER BY updated_at DESC, id LIMIT {} OFFSET {offset}",
        q.page_size + 1
    ));
    let rows = c.fetch(&w.sql, &w.params()).await?;
    let mut decoded = Vec::with_capacity(rows.len());
    for row in &rows {
        let id: String = row.try_get(0)?;
        let session = match decode_session(row) {
            Ok(s) => Ok(s),
            Err(StoreError::Session(e)) => Err(e),
            Err(StoreError::Pg(e)) => Err(SessionError::serialization(format!("session {id}"), e)),
        };
        decoded.push((id, session));
    }
    Ok(Page::from_overfetch_decoded(decoded, q.page, q.page_size))
}

pub(crate) async fn append(
    tx: &Transaction<'_>,
    t: &Tables,
    id: &str,
    events: &[SessionEvent],
    bodies: &[String],
    now: DateTime<Utc>,
) -> R<AppendOutcome> {
    let mut h = head(tx, t, id, now).await?;
    let mut seqs = Vec::with_capacity(events.len());
    let mut shared = SharedDelta::default();
    let mut tokens = 0i64;
    let mut written = 0i64;
    for (e, body) in events.iter().zip(bodies) {
        let candidate = h.last_seq.saturating_add(1);
        if !insert_event(tx, t, id, sql_int(candidate), Some(h.next_ctx_pos), e, body).await? {
            seqs.push(count(existing_seq(tx, t, id, &e.id).await?));
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
        let stmt = tx
            .prepare_cached(&format!(
                "UPDATE {} SET state = COALESCE($2, state), version = version + 1, last_seq = $3, \
                 next_ctx_pos = $4, event_count = event_count + $5, context_tokens = context_tokens + $6, \
                 updated_at = GREATEST(updated_at, $7) WHERE id = $1 AND version = $8",
                t.sessions
            ))
            .await?;
        let n = tx
            .run(
                &stmt,
                &[
                    &id,
                    &h.state.changed()?,
                    &sql_int(h.last_seq),
                    &h.next_ctx_pos,
                    &written,
                    &tokens,
                    &micros(now),
                    &sql_int(h.version),
                ],
            )
            .await?;
        if n != 1 {
            return Err(SessionError::backend(
                crate::BACKEND,
                format!("session {id} changed under its row lock"),
            )
            .into());
        }
        SharedWrite(&shared)
            .write(tx, t, &h.app, &h.user_id)
            .await?;
        h.version = version;
    }
    Ok(AppendOutcome {
        version: h.version,
        seqs,
        written: usize::try_from(written).unwrap_or(0),
    })
}

pub(crate) async fn event_version(c: &Client, t: &Tables, id: &str, now: DateTime<Utc>) -> R<u64> {
    let stmt = c
        .prepare_cached(&format!(
            "SELECT version, expires_at FROM {} WHERE id = $1",
            t.sessions
        ))
        .await?;
    match c.fetch_opt(&stmt, &[&id]).await? {
        Some(row) if !expired(row.try_get(1)?, now) => {
            Ok(stored_counter(row.try_get(0)?, MAX_VERSION, || {
                format!("session {id} version")
            })?)
        }
        _ => Err(SessionError::session_not_found(id).into()),
    }
}

pub(crate) async fn replace_context(
    tx: &Transaction<'_>,
    t: &Tables,
    id: &str,
    events: &[SessionEvent],
    bodies: &[String],
    expected_version: u64,
    now: DateTime<Utc>,
) -> R<bool> {
    let mut h = head(tx, t, id, now).await?;
    if h.version != expected_version {
        return Ok(false);
    }
    next_version(h.version)?;
    let clear = tx
        .prepare_cached(&format!(
            "UPDATE {} SET ctx_pos = NULL WHERE session_id = $1 AND ctx_pos IS NOT NULL",
            t.events
        ))
        .await?;
    tx.run(&clear, &[&id]).await?;
    let place = tx
        .prepare_cached(&format!(
            "UPDATE {} SET ctx_pos = $3 WHERE session_id = $1 AND id = $2",
            t.events
        ))
        .await?;
    let mut shared = SharedDelta::default();
    let mut added = 0i64;
    for (e, body) in events.iter().zip(bodies) {
        let pos = h.next_ctx_pos;
        h.next_ctx_pos = next_position(h.next_ctx_pos)?;
        if tx.run(&place, &[&id, &e.id, &pos]).await? == 0 {
            h.last_seq = next_seq(h.last_seq)?;
            insert_event(tx, t, id, sql_int(h.last_seq), Some(pos), e, body).await?;
            if let Some(d) = &e.state_delta {
                shared.apply_event(h.state.get_mut()?, d);
            }
            added += 1;
        }
    }
    let stmt = tx
        .prepare_cached(&format!(
            "UPDATE {s} SET state = COALESCE($2, state), version = version + 1, last_seq = $3, \
             next_ctx_pos = $4, event_count = event_count + $5, \
             context_tokens = (SELECT COALESCE(SUM(token_estimate), 0) FROM {e} \
                               WHERE session_id = $1 AND ctx_pos IS NOT NULL), \
             updated_at = GREATEST(updated_at, $6) WHERE id = $1",
            s = t.sessions,
            e = t.events
        ))
        .await?;
    tx.run(
        &stmt,
        &[
            &id,
            &h.state.changed()?,
            &sql_int(h.last_seq),
            &h.next_ctx_pos,
            &added,
            &micros(now),
        ],
    )
    .await?;
    SharedWrite(&shared)
        .write(tx, t, &h.app, &h.user_id)
        .await?;
    Ok(true)
}

pub(crate) async fn rewind(
    tx: &Transaction<'_>,
    t: &Tables,
    id: &str,
    invocation: &str,
    now: DateTime<Utc>,
) -> R<RewindOutcome> {
    let h = head(tx, t, id, now).await?;
    let version = next_version(h.version)?;
    let first = tx
        .prepare_cached(&format!(
            "SELECT MIN(seq) FROM {} WHERE session_id = $1 AND invocation_id = $2",
            t.events
        ))
        .await?;
    let from: Option<i64> = tx
        .fetch_one(&first, &[&id, &invocation])
        .await?
        .try_get(0)?;
    let Some(from) = from else {
        return Err(SessionError::NotFound {
            what: "invocation",
            id: invocation.to_owned(),
        }
        .into());
    };
    let del = tx
        .prepare_cached(&format!(
            "DELETE FROM {} WHERE session_id = $1 AND seq >= $2",
            t.events
        ))
        .await?;
    let removed = tx.run(&del, &[&id, &from]).await?;
    let initial = tx
        .prepare_cached(&format!(
            "SELECT initial_state FROM {} WHERE id = $1",
            t.sessions
        ))
        .await?;
    let initial: String = tx.fetch_one(&initial, &[&id]).await?.try_get(0)?;
    let initial = parse_map(&initial, || format!("session {id} initial state"))?;
    let deltas_stmt = tx
        .prepare_cached(&format!(
            "SELECT seq, state_delta FROM {} WHERE session_id = $1 AND state_delta IS NOT NULL ORDER BY seq",
            t.events
        ))
        .await?;
    let mut deltas = Vec::new();
    for row in tx.fetch(&deltas_stmt, &[&id]).await? {
        let seq: i64 = row.try_get(0)?;
        let text: String = row.try_get(1)?;
        deltas.push(parse_map(&text, || {
            format!("session {id} seq {seq} state delta")
        })?);
    }
    let state = replay_deltas(&initial, &deltas);
    let stmt = tx
        .prepare_cached(&format!(
            "UPDATE {s} SET state = $2, version = version + 1, \
             event_count = (SELECT COUNT(*) FROM {e} WHERE session_id = $1), \
             context_tokens = (SELECT COALESCE(SUM(token_estimate), 0) FROM {e} \
                               WHERE session_id = $1 AND ctx_pos IS NOT NULL), \
             updated_at = GREATEST(updated_at, $3) WHERE id = $1",
            s = t.sessions,
            e = t.events
        ))
        .await?;
    tx.run(&stmt, &[&id, &to_json(&state, "state")?, &micros(now)])
        .await?;
    Ok(RewindOutcome {
        version,
        removed: usize::try_from(removed).unwrap_or(0),
    })
}

fn decode_event(session_id: &str, seq: i64, body: &str) -> R<SessionEvent> {
    Ok(SessionEvent::decode_stored(session_id, count(seq), body)?)
}

pub(crate) async fn events(
    c: &Client,
    t: &Tables,
    id: &str,
    filter: &EventFilter,
    now: DateTime<Utc>,
) -> R<Page<SessionEvent>> {
    ensure_live(c, t, id, now).await?;
    let order = match filter.view {
        EventView::Context => "ctx_pos",
        EventView::Archive => "seq",
    };
    let mut w = Conditions::new(format!(
        "SELECT seq, body FROM {} WHERE session_id = $1",
        t.events
    ));
    w.values.push(Box::new(id.to_owned()));
    if filter.view == EventView::Context {
        w.sql.push_str(" AND ctx_pos IS NOT NULL");
    }
    if let Some(ts) = filter.from {
        w.push("ts >=", micros(ts));
    }
    if let Some(ts) = filter.to {
        w.push("ts <", micros(ts));
    }
    if let Some(i) = &filter.invocation_id {
        w.push("invocation_id =", i.clone());
    }
    match filter.synthetic {
        SyntheticFilter::Include => {}
        SyntheticFilter::Exclude => w.sql.push_str(" AND NOT synthetic"),
        SyntheticFilter::Only => w.sql.push_str(" AND synthetic"),
    }
    if !filter.roles.is_empty() {
        let roles: Vec<String> = filter.roles.iter().map(|r| r.as_str().to_owned()).collect();
        let m = w.next_mark(roles);
        w.sql.push_str(&format!(" AND role = ANY({m})"));
    }
    if let Some(b) = &filter.branch {
        let m = w.next_mark(visible_branches(b));
        w.sql
            .push_str(&format!(" AND (branch IS NULL OR branch = ANY({m}))"));
    }
    if let Some(k) = &filter.keyword {
        let m = w.next_mark(like_pattern(&fold_case(k)));
        w.sql
            .push_str(&format!(" AND search_text LIKE {m} ESCAPE '\\'"));
    }
    let matcher = filter.matcher();
    let decode = |rows: Vec<Row>| -> R<Vec<SessionEvent>> {
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let e = decode_event(id, row.try_get(0)?, &row.try_get::<_, String>(1)?)?;
            if matcher.matches(&e) {
                out.push(e);
            }
        }
        Ok(out)
    };
    // SQL filters exactly, except a keyword holding NUL (indexed as a space):
    // then Rust re-checks every row and SQL must not cut the result short.
    let exact = filter.keyword.as_ref().is_none_or(|k| !k.contains('\0'));
    if let Some(n) = filter.last_n {
        w.sql.push_str(&format!(" ORDER BY {order} DESC"));
        if exact {
            w.sql.push_str(&format!(" LIMIT {n}"));
        }
        let mut recent = decode(c.fetch(&w.sql, &w.params()).await?)?;
        recent.truncate(n);
        recent.reverse();
        return Ok(Page::paginate(recent, filter.page, filter.page_size));
    }
    if !exact {
        w.sql.push_str(&format!(" ORDER BY {order}"));
        let all = decode(c.fetch(&w.sql, &w.params()).await?)?;
        return Ok(Page::paginate(all, filter.page, filter.page_size));
    }
    let Some(offset) = filter
        .page
        .checked_mul(filter.page_size)
        .and_then(|o| i64::try_from(o).ok())
    else {
        return Ok(Page::empty(filter.page, filter.page_size));
    };
    w.sql.push_str(&format!(
        " ORDER BY {order} LIMIT {} OFFSET {offset}",
        filter.page_size + 1
    ));
    let items = decode(c.fetch(&w.sql, &w.params()).await?)?;
    Ok(Page::from_overfetch(items, filter.page, filter.page_size))
}

/// A `LIKE` pattern matching `text` literally anywhere (`\` escapes).
fn like_pattern(text: &str) -> String {
    let mut p = String::with_capacity(text.len() + 2);
    p.push('%');
    for c in text.replace('\0', " ").chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

pub(crate) async fn search(
    c: &Client,
    t: &Tables,
    q: &SearchQuery,
    now: DateTime<Utc>,
) -> R<Page<SearchHit>> {
    let mut w = Conditions::new(format!(
        "SELECT session_id, seq, body FROM {} e WHERE ",
        t.events
    ));
    let multi = match &q.scope {
        SearchScope::Session(id) => {
            ensure_live(c, t, id, now).await?;
            let m = w.next_mark(id.clone());
            w.sql.push_str(&format!("session_id = {m}"));
            false
        }
        SearchScope::User { app, user_id } => {
            let a = w.next_mark(app.clone());
            let u = w.next_mark(user_id.clone());
            let n = w.next_mark(micros(now));
            w.sql.push_str(&format!(
                "session_id IN (SELECT id FROM {} WHERE app = {a} AND user_id = {u} \
                 AND (expires_at IS NULL OR expires_at > {n}))",
                t.sessions
            ));
            true
        }
    };
    let Some(offset) = q
        .page
        .checked_mul(q.page_size)
        .and_then(|o| i64::try_from(o).ok())
    else {
        return Ok(Page::empty(q.page, q.page_size));
    };
    if q.mode == SearchMode::Ranked {
        let m = w.next_mark(fold_case(&q.text).replace('\0', " "));
        let sql = w.sql.replacen(
            "SELECT session_id, seq, body",
            &format!(
                "SELECT session_id, seq, body, ts_rank(to_tsvector('simple', search_text), plainto_tsquery('simple', {m}))::float8 AS rank"
            ),
            1,
        );
        let sql = format!(
            "{sql} AND to_tsvector('simple', search_text) @@ plainto_tsquery('simple', {m}) \
             ORDER BY rank DESC, seq LIMIT {} OFFSET {offset}",
            q.page_size + 1
        );
        let rows = c.fetch(&sql, &w.params()).await?;
        let mut items = Vec::with_capacity(rows.len());
        for row in rows {
            let session_id: String = row.try_get(0)?;
            let event = decode_event(&session_id, row.try_get(1)?, &row.try_get::<_, String>(2)?)?;
            items.push(SearchHit {
                session_id,
                event,
                score: Some(row.try_get(3)?),
            });
        }
        return Ok(Page::from_overfetch(items, q.page, q.page_size));
    }
    let needle = fold_case(&q.text);
    let m = w.next_mark(like_pattern(&needle));
    w.sql
        .push_str(&format!(" AND search_text LIKE {m} ESCAPE '\\'"));
    let order = if multi { "ts, session_id, seq" } else { "seq" };
    // The folded LIKE is exact except where NUL was indexed as a space: re-check in Rust.
    let exact = !q.text.contains('\0');
    if exact {
        w.sql.push_str(&format!(
            " ORDER BY {order} LIMIT {} OFFSET {offset}",
            q.page_size + 1
        ));
    } else {
        w.sql.push_str(&format!(" ORDER BY {order}"));
    }
    let rows = c.fetch(&w.sql, &w.params()).await?;
    let mut hits = Vec::new();
    for row in rows {
        let session_id: String = row.try_get(0)?;
        let event = decode_event(&session_id, row.try_get(1)?, &row.try_get::<_, String>(2)?)?;
        if exact || contains_folded(&event.message.search_text(), &needle) {
            hits.push(SearchHit {
                session_id,
                event,
                score: None,
            });
        }
    }
    if exact {
        Ok(Page::from_overfetch(hits, q.page, q.page_size))
    } else {
        Ok(Page::paginate(hits, q.page, q.page_size))
    }
}

pub(crate) async fn shared_state(
    c: &Client,
    t: &Tables,
    app: &str,
    user_id: &str,
) -> R<SharedState> {
    let a = c
        .prepare_cached(&format!("SELECT state FROM {} WHERE app = $1", t.app_state))
        .await?;
    let u = c
        .prepare_cached(&format!(
            "SELECT state FROM {} WHERE app = $1 AND user_id = $2",
            t.user_state
        ))
        .await?;
    let app_state = match c.fetch_opt(&a, &[&app]).await? {
        Some(row) => parse_map(&row.try_get::<_, String>(0)?, || format!("app {app} state"))?,
        None => StateMap::new(),
    };
    let user_state = match c.fetch_opt(&u, &[&app, &user_id]).await? {
        Some(row) => parse_map(&row.try_get::<_, String>(0)?, || {
            format!("user {user_id} state in app {app}")
        })?,
        None => StateMap::new(),
    };
    Ok(SharedState {
        app: app_state,
        user: user_state,
    })
}

pub(crate) async fn export_session(
    c: &Client,
    t: &Tables,
    id: &str,
    now: DateTime<Utc>,
) -> R<SessionDump> {
    let session = get(c, t, id, now).await?;
    let head = c
        .prepare_cached(&format!(
            "SELECT initial_state, last_seq FROM {} WHERE id = $1",
            t.sessions
        ))
        .await?;
    let row = c.fetch_one(&head, &[&id]).await?;
    let initial: String = row.try_get(0)?;
    let last_seq: i64 = row.try_get(1)?;
    let stmt = c
        .prepare_cached(&format!(
            "SELECT seq, body, ctx_pos FROM {} WHERE session_id = $1 ORDER BY seq",
            t.events
        ))
        .await?;
    let mut events = Vec::new();
    let mut context: Vec<(i64, u64)> = Vec::new();
    for row in c.fetch(&stmt, &[&id]).await? {
        let e = decode_event(id, row.try_get(0)?, &row.try_get::<_, String>(1)?)?;
        if let Some(pos) = row.try_get::<_, Option<i64>>(2)? {
            context.push((pos, e.seq));
        }
        events.push(e);
    }
    context.sort_unstable();
    let shared = shared_state(c, t, &session.app, &session.user_id).await?;
    Ok(SessionDump {
        initial_state: parse_map(&initial, || format!("session {id} initial state"))?,
        last_seq: count(last_seq),
        events,
        context: context.into_iter().map(|(_, seq)| seq).collect(),
        shared,
        session,
    })
}

pub(crate) async fn import_session(
    tx: &Transaction<'_>,
    t: &Tables,
    dump: &SessionDump,
    bodies: &[String],
    now: DateTime<Utc>,
) -> R<ImportOutcome> {
    let s = &dump.session;
    // Concurrent imports of one id queue here, so the later ones (each
    // statement reads what committed before it, at READ COMMITTED) find
    // the session written and change nothing, instead of failing on the
    // primary key. Row locks cannot do this: the row does not exist yet.
    let lock = tx
        .prepare_cached("SELECT pg_advisory_xact_lock(hashtext('agent-session import ' || $1))")
        .await?;
    tx.run(&lock, &[&s.id]).await?;
    let existing = tx
        .prepare_cached(&format!(
            "SELECT version, expires_at FROM {} WHERE id = $1 FOR UPDATE",
            t.sessions
        ))
        .await?;
    if let Some(row) = tx.fetch_opt(&existing, &[&s.id]).await? {
        // A corrupt stored version (negative) is replaced by a valid dump.
        let stored = stored_counter(row.try_get(0)?, MAX_VERSION, String::new).ok();
        if !expired(row.try_get(1)?, now) && stored.is_some_and(|v| v >= s.version) {
            return Ok(ImportOutcome::Unchanged);
        }
        let del = tx
            .prepare_cached(&format!("DELETE FROM {} WHERE id = $1", t.sessions))
            .await?;
        tx.run(&del, &[&s.id]).await?;
    }
    let position = dump.context_positions();
    let context_tokens = dump.context_tokens();
    let as_i64 = sql_int;
    let insert = tx
        .prepare_cached(&format!(
            "INSERT INTO {} (id, app, user_id, key, status, created_at, updated_at, expires_at, metadata, \
             state, initial_state, event_count, context_tokens, version, last_seq, next_ctx_pos) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
            t.sessions
        ))
        .await?;
    tx.run(
        &insert,
        &[
            &s.id,
            &s.app,
            &s.user_id,
            &s.key,
            &s.status.as_str(),
            &micros(s.created_at),
            &micros(s.updated_at),
            &s.expires_at.map(micros),
            &to_json(&s.metadata, "metadata")?,
            &to_json(&s.state, "state")?,
            &to_json(&dump.initial_state, "initial state")?,
            &i64::try_from(dump.events.len()).unwrap_or(i64::MAX),
            &as_i64(context_tokens),
            &as_i64(s.version),
            &as_i64(dump.last_seq),
            &i64::try_from(dump.context.len())
                .unwrap_or(i64::MAX)
                .saturating_add(1),
        ],
    )
    .await?;
    for (e, body) in dump.events.iter().zip(bodies) {
        insert_event(
            tx,
            t,
            &s.id,
            as_i64(e.seq),
            position.get(&e.seq).copied(),
            e,
            body,
        )
        .await?;
    }
    for (table, cols, marks, key, state) in [
        (
            &t.app_state,
            "app",
            "$1",
            vec![s.app.clone()],
            &dump.shared.app,
        ),
        (
            &t.user_state,
            "app, user_id",
            "$1, $2",
            vec![s.app.clone(), s.user_id.clone()],
            &dump.shared.user,
        ),
    ] {
        if state.is_empty() {
            continue;
        }
        let n = key.len() + 1;
        let stmt = tx
            .prepare_cached(&format!(
                "INSERT INTO {table} ({cols}, state) VALUES ({marks}, ${n}) \
                 ON CONFLICT ({cols}) DO UPDATE SET state = EXCLUDED.state"
            ))
            .await?;
        let json = to_json(state, "shared state")?;
        let mut params: Vec<&(dyn ToSql + Sync)> =
            key.iter().map(|k| k as &(dyn ToSql + Sync)).collect();
        params.push(&json);
        tx.run(&stmt, &params).await?;
    }
    Ok(ImportOutcome::Imported)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_pattern_escapes_wildcards_and_backslash() {
        assert_eq!(like_pattern("100%_a\\b"), "%100\\%\\_a\\\\b%");
    }
}
