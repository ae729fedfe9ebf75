//! The sessions table: decoding rows, the locked head of a write, and the session-row statements.

use chrono::{DateTime, Utc};
use deadpool_postgres::{Client, Transaction};
use session_core::plan::{self, ContextTokens, Head, HeadChange, OwnerQuota};
use session_core::state::{apply_delta, decode_state, encode_state, LazyState};
use session_core::{
    stored_counter, stored_id, Erased, Limits, Owner, Page, Session, SessionError, SessionId,
    SessionQuery, SessionStatus, SessionUpdate, StateMap, MAX_SEQ, MAX_VERSION,
};
use tokio_postgres::{Row, Statement};

use crate::error::{StoreError, R};
use crate::quiet::Quiet;
use crate::sql::{
    count, expiry, from_micros, micros, offset, sql_int, sql_len, touch_sql, Conditions,
};
use crate::tables::Tables;

pub(crate) const SESSION_COLUMNS: &str =
    "id, app, user_id, key, status, created_at, updated_at, expires_at, \
     metadata, state, event_count, context_tokens, version, event_bytes";

pub(crate) fn decode_session(row: &Row) -> R<Session> {
    let id: String = row.try_get(0)?;
    let ctx = |field: &str| format!("session {id} {field}");
    let status: String = row.try_get(4)?;
    let status = SessionStatus::stored(&status, || ctx("status"))?;
    let key: Option<String> = row.try_get(3)?;
    Ok(Session {
        app: stored_id(row.try_get(1)?, || ctx("app"))?,
        user_id: stored_id(row.try_get(2)?, || ctx("user_id"))?,
        key: key.map(|k| stored_id(&k, || ctx("key"))).transpose()?,
        status,
        created_at: from_micros(row.try_get(5)?, || ctx("created_at"))?,
        updated_at: from_micros(row.try_get(6)?, || ctx("updated_at"))?,
        expires_at: expiry(row, 7, &id)?,
        metadata: decode_state(row.try_get(8)?, || ctx("metadata"))?,
        state: decode_state(row.try_get(9)?, || ctx("state"))?,
        event_count: count(row.try_get(10)?),
        event_bytes: count(row.try_get(13)?),
        context_tokens: count(row.try_get(11)?),
        version: stored_counter(row.try_get(12)?, MAX_VERSION, || ctx("version"))?,
        id: stored_id(&id, || ctx("id"))?,
    })
}

/// A row with the expiry in its column `idx`, as the planner's checks take it.
pub(crate) fn with_expiry(
    row: Option<Row>,
    idx: usize,
    id: &str,
) -> R<Option<(Row, Option<DateTime<Utc>>)>> {
    row.map(|row| {
        let at = expiry(&row, idx, id)?;
        Ok((row, at))
    })
    .transpose()
}

/// A live session, or `NotFound` for a missing or expired one.
pub(crate) async fn get(c: &Client, t: &Tables, id: &SessionId, now: DateTime<Utc>) -> R<Session> {
    let stmt = c
        .prepare_cached(&format!(
            "SELECT {SESSION_COLUMNS} FROM {} WHERE id = $1",
            t.sessions
        ))
        .await?;
    let row = c.fetch_opt(&stmt, &[&id.as_str()]).await?;
    decode_session(&plan::readable(with_expiry(row, 7, id)?, id, now)?)
}

/// The head of a live session (`NotFound` for a missing or expired one),
/// for [`live_version`] and [`live_export`].
pub(crate) async fn live(c: &Client, t: &Tables, id: &SessionId, now: DateTime<Utc>) -> R<Row> {
    let stmt = c
        .prepare_cached(&format!(
            "SELECT expires_at, version, last_seq, initial_state FROM {} WHERE id = $1",
            t.sessions
        ))
        .await?;
    let row = c.fetch_opt(&stmt, &[&id.as_str()]).await?;
    Ok(plan::readable(with_expiry(row, 0, id)?, id, now)?)
}

/// The version of a row read by [`live`].
pub(crate) fn live_version(row: &Row, id: &SessionId) -> R<u64> {
    Ok(stored_counter(row.try_get(1)?, MAX_VERSION, || {
        format!("session {id} version")
    })?)
}

/// The seq counter and initial state of a row read by [`live`].
pub(crate) fn live_export(row: &Row, id: &SessionId) -> R<(u64, StateMap)> {
    let last_seq = count(row.try_get(2)?);
    let initial = decode_state(row.try_get(3)?, || format!("session {id} initial state"))?;
    Ok((last_seq, initial))
}

/// A session row locked for the rest of a write's transaction.
pub(crate) struct Locked {
    /// What the planner needs.
    pub(crate) head: Head,
    /// The owner, for the shared scopes.
    pub(crate) app: String,
    pub(crate) user_id: String,
    /// The session-scope state, parsed only if the plan changes it.
    pub(crate) state: LazyState,
    /// The context position the next event placed in the context gets.
    pub(crate) next_ctx_pos: i64,
}

impl Locked {
    /// The state JSON to write after `changes`, or `None` when they leave it alone.
    pub(crate) fn changed_state(&mut self, changes: &StateMap) -> R<Option<String>> {
        if changes.is_empty() {
            return Ok(None);
        }
        apply_delta(self.state.get_mut()?, changes);
        Ok(self.state.changed()?)
    }

    /// The session's owner.
    pub(crate) fn owner(&self, id: &SessionId) -> R<Owner> {
        let what = |field: &str| format!("session {id} {field}");
        Ok(Owner::new(
            stored_id(&self.app, || what("app"))?,
            stored_id(&self.user_id, || what("user_id"))?,
        ))
    }

    /// `n` context positions from the next one on: the first, and the next after them.
    pub(crate) fn positions(&self, n: usize) -> R<(i64, i64)> {
        context_positions(self.next_ctx_pos, n)
    }
}

/// `n` context positions from `next` on: the first, and the next after them.
pub(crate) fn context_positions(next: i64, n: usize) -> R<(i64, i64)> {
    let after = next.checked_add(sql_len(n)).ok_or_else(|| {
        SessionError::invalid("context", "the context position counter is exhausted")
    })?;
    Ok((next, after))
}

/// The statement [`lock_with`] runs.
pub(crate) async fn lock_statement(tx: &Transaction<'_>, t: &Tables) -> R<Statement> {
    Ok(tx
        .prepare_cached(&format!(
            "SELECT app, user_id, expires_at, state, version, last_seq, next_ctx_pos, status, \
             event_count, event_bytes FROM {} WHERE id = $1 FOR UPDATE",
            t.sessions
        ))
        .await?)
}

/// Locks the session row (`SELECT … FOR UPDATE`) and reads its head:
/// `NotFound` for a missing session, `Expired` for an expired one.
pub(crate) async fn lock(
    tx: &Transaction<'_>,
    t: &Tables,
    id: &SessionId,
    now: DateTime<Utc>,
) -> R<Locked> {
    lock_with(tx, &lock_statement(tx, t).await?, id, now).await
}

/// [`lock`] with its statement prepared: the query is sent when the
/// future is first polled, so a statement polled after it runs after it.
pub(crate) async fn lock_with(
    tx: &Transaction<'_>,
    stmt: &Statement,
    id: &SessionId,
    now: DateTime<Utc>,
) -> R<Locked> {
    let row = tx.fetch_opt(stmt, &[&id.as_str()]).await?;
    let row = plan::writable(with_expiry(row, 2, id)?, id, now)?;
    let version = stored_counter(row.try_get(4)?, MAX_VERSION, || {
        format!("session {id} version")
    })?;
    let last_seq = stored_counter(row.try_get(5)?, MAX_SEQ, || {
        format!("session {id} last_seq")
    })?;
    let status: String = row.try_get(7)?;
    let status = SessionStatus::stored(&status, || format!("session {id} status"))?;
    let events = stored_counter(row.try_get(8)?, MAX_SEQ, || {
        format!("session {id} event_count")
    })?;
    let bytes = stored_counter(row.try_get(9)?, u64::MAX, || {
        format!("session {id} event_bytes")
    })?;
    Ok(Locked {
        head: Head::new(id.clone(), last_seq, version, status)
            .with_event_count(events)
            .with_event_bytes(bytes),
        app: row.try_get(0)?,
        user_id: row.try_get(1)?,
        state: LazyState::new(row.try_get(3)?, id),
        next_ctx_pos: row.try_get(6)?,
    })
}

/// The expiry of a session stored under `id`, locking its row (`Some(None)`: one that never expires).
pub(crate) async fn lock_existing(
    tx: &Transaction<'_>,
    t: &Tables,
    id: &SessionId,
) -> R<Option<Option<DateTime<Utc>>>> {
    let stmt = tx
        .prepare_cached(&format!(
            "SELECT expires_at FROM {} WHERE id = $1 FOR UPDATE",
            t.sessions
        ))
        .await?;
    match tx.fetch_opt(&stmt, &[&id.as_str()]).await? {
        Some(row) => Ok(Some(expiry(&row, 0, id)?)),
        None => Ok(None),
    }
}

/// Locks the row of a session stored under `id`: `None` when there is
/// none, else the version of a live one (`None` inside when it has expired
/// or its stored version is corrupt: a valid dump replaces it).
pub(crate) async fn lock_for_import(
    tx: &Transaction<'_>,
    t: &Tables,
    id: &SessionId,
    now: DateTime<Utc>,
) -> R<Option<Option<u64>>> {
    let stmt = tx
        .prepare_cached(&format!(
            "SELECT version, expires_at FROM {} WHERE id = $1 FOR UPDATE",
            t.sessions
        ))
        .await?;
    let Some(row) = tx.fetch_opt(&stmt, &[&id.as_str()]).await? else {
        return Ok(None);
    };
    let version = stored_counter(row.try_get(0)?, MAX_VERSION, String::new).ok();
    let live = plan::readable(with_expiry(Some(row), 1, id)?, id, now).is_ok();
    Ok(Some(version.filter(|_| live)))
}

/// Deletes a session and (by cascade) its events; whether there was one.
pub(crate) async fn delete(tx: &Transaction<'_>, t: &Tables, id: &str) -> R<bool> {
    let stmt = tx
        .prepare_cached(&format!("DELETE FROM {} WHERE id = $1", t.sessions))
        .await?;
    Ok(tx.run(&stmt, &[&id]).await? > 0)
}

/// Erases every session of (`app`, `user_id`), expired ones included (their
/// events and context history go with them), and the user's state.
pub(crate) async fn erase_user(
    tx: &Transaction<'_>,
    t: &Tables,
    app: &str,
    user_id: &str,
) -> R<Erased> {
    let stmt = tx
        .prepare_cached(&format!(
            "WITH gone AS (DELETE FROM {} WHERE app = $1 AND user_id = $2 RETURNING event_count) \
             SELECT count(*)::BIGINT, COALESCE(sum(event_count), 0)::BIGINT FROM gone",
            t.sessions
        ))
        .await?;
    let row = tx.fetch_one(&stmt, &[&app, &user_id]).await?;
    let sessions: i64 = row.try_get(0)?;
    let events: i64 = row.try_get(1)?;
    let stmt = tx
        .prepare_cached(&format!(
            "DELETE FROM {} WHERE app = $1 AND user_id = $2",
            t.user_state
        ))
        .await?;
    let user_state = tx.run(&stmt, &[&app, &user_id]).await? > 0;
    Ok(Erased {
        sessions: u64::try_from(sessions).unwrap_or(0),
        events: u64::try_from(events).unwrap_or(0),
        user_state,
    })
}

/// How many live (unexpired) sessions `user_id` holds in `app`, after
/// taking the owner's advisory lock, so that creates of one owner count
/// one after another (the sessions-per-user quota).
pub(crate) async fn lock_owner_and_count(
    tx: &Transaction<'_>,
    t: &Tables,
    app: &str,
    user_id: &str,
    now: DateTime<Utc>,
) -> R<u64> {
    let lock = tx
        .prepare_cached(
            "SELECT pg_advisory_xact_lock(hashtext('agent-session owner ' || $1 || '/' || $2))",
        )
        .await?;
    tx.run(&lock, &[&app, &user_id]).await?;
    let count = tx
        .prepare_cached(&format!(
            "SELECT COUNT(*) FROM {} WHERE app = $1 AND user_id = $2 \
             AND (expires_at IS NULL OR expires_at > $3)",
            t.sessions
        ))
        .await?;
    let row = tx
        .fetch_one(&count, &[&app, &user_id, &micros(now)])
        .await?;
    let n: i64 = row.try_get(0)?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Deletes every session expired at `now`; how many.
pub(crate) async fn purge_expired(tx: &Transaction<'_>, t: &Tables, now: DateTime<Utc>) -> R<u64> {
    let stmt = tx
        .prepare_cached(&format!(
            "DELETE FROM {} WHERE expires_at IS NOT NULL AND expires_at <= $1",
            t.sessions
        ))
        .await?;
    tx.run(&stmt, &[&micros(now)]).await
}

/// Inserts a session row with its counters.
pub(crate) async fn insert(
    tx: &Transaction<'_>,
    t: &Tables,
    s: &Session,
    initial_state: &StateMap,
    last_seq: u64,
    next_ctx_pos: i64,
) -> R<()> {
    let stmt = tx
        .prepare_cached(&format!(
            "INSERT INTO {} (id, app, user_id, key, status, created_at, updated_at, expires_at, metadata, \
             state, initial_state, event_count, context_tokens, version, last_seq, next_ctx_pos, \
             event_bytes, active_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
             $7::int8 / 1000000)",
            t.sessions
        ))
        .await?;
    tx.run(
        &stmt,
        &[
            &s.id.as_str(),
            &s.app.as_str(),
            &s.user_id.as_str(),
            &s.key.as_deref(),
            &s.status.as_str(),
            &micros(s.created_at),
            &micros(s.updated_at),
            &s.expires_at.map(micros),
            &encode_state(&s.metadata, "metadata")?,
            &encode_state(&s.state, "state")?,
            &encode_state(initial_state, "initial state")?,
            &sql_int(s.event_count),
            &sql_int(s.context_tokens),
            &sql_int(s.version),
            &sql_int(last_seq),
            &next_ctx_pos,
            &sql_int(s.event_bytes),
        ],
    )
    .await?;
    Ok(())
}

/// Writes an update at `version`; returns the session as stored.
pub(crate) async fn update(
    tx: &Transaction<'_>,
    t: &Tables,
    id: &SessionId,
    update: &SessionUpdate,
    version: u64,
    now: DateTime<Utc>,
) -> R<Session> {
    let metadata = update
        .metadata
        .as_ref()
        .map(|m| encode_state(m, "metadata"))
        .transpose()?;
    let state = update
        .state
        .as_ref()
        .map(|s| encode_state(s, "state"))
        .transpose()?;
    let status = update.status.map(SessionStatus::as_str);
    let set_expiry = update.expires_at.is_some();
    let expires_at = update.expires_at.flatten().map(micros);
    let stmt = tx
        .prepare_cached(&format!(
            "UPDATE {} SET version = $8, {}, \
             metadata = COALESCE($3, metadata), state = COALESCE($4, state), \
             status = COALESCE($5, status), \
             expires_at = CASE WHEN $6 THEN $7 ELSE expires_at END \
             WHERE id = $1 RETURNING {SESSION_COLUMNS}",
            t.sessions,
            touch_sql("$2")
        ))
        .await?;
    let row = tx
        .fetch_one(
            &stmt,
            &[
                &id.as_str(),
                &micros(now),
                &metadata,
                &state,
                &status,
                &set_expiry,
                &expires_at,
                &sql_int(version),
            ],
        )
        .await?;
    decode_session(&row)
}

/// Moves the locked session row forward after an append or context
/// replace: `state` is the new session-scope state JSON, if it changed, and
/// `next_ctx_pos` the next free context position.
pub(crate) async fn advance(
    tx: &Transaction<'_>,
    t: &Tables,
    id: &SessionId,
    state: Option<&str>,
    a: &HeadChange<'_>,
    next_ctx_pos: i64,
    now: DateTime<Utc>,
) -> R<()> {
    let (tokens_sql, tokens) = match a.context_tokens {
        ContextTokens::Add(n) => ("context_tokens + $6", n),
        ContextTokens::Set(n) => ("$6", n),
    };
    let stmt = tx
        .prepare_cached(&format!(
            "UPDATE {} SET state = COALESCE($2, state), version = $3, last_seq = $4, \
             next_ctx_pos = $5, event_count = event_count + $7, context_tokens = {tokens_sql}, \
             {}, event_bytes = event_bytes + $9 WHERE id = $1",
            t.sessions,
            touch_sql("$8")
        ))
        .await?;
    tx.run(
        &stmt,
        &[
            &id.as_str(),
            &state,
            &sql_int(a.version),
            &sql_int(a.last_seq),
            &next_ctx_pos,
            &sql_int(tokens),
            &sql_len(a.added()),
            &micros(now),
            &sql_int(a.added_bytes),
        ],
    )
    .await?;
    Ok(())
}

/// The initial state of a locked session (what a rewind replays from).
pub(crate) async fn initial_state(tx: &Transaction<'_>, t: &Tables, id: &SessionId) -> R<StateMap> {
    let stmt = tx
        .prepare_cached(&format!(
            "SELECT initial_state FROM {} WHERE id = $1",
            t.sessions
        ))
        .await?;
    let text: String = tx.fetch_one(&stmt, &[&id.as_str()]).await?.try_get(0)?;
    Ok(decode_state(&text, || {
        format!("session {id} initial state")
    })?)
}

/// The archive's counters of session `$1`, recounted from the rows left
/// (`e` names the events table).
fn recount_sql(e: &str) -> String {
    format!(
        "event_count = (SELECT COUNT(*) FROM {e} WHERE session_id = $1), \
         event_bytes = (SELECT COALESCE(SUM(octet_length(body)), 0) FROM {e} WHERE session_id = $1)"
    )
}

/// Recounts the archive's counters of session `id` from its rows.
pub(crate) async fn recount(tx: &Transaction<'_>, t: &Tables, id: &SessionId) -> R<()> {
    let sql = format!(
        "UPDATE {} SET {} WHERE id = $1",
        t.sessions,
        recount_sql(&t.events)
    );
    tx.run(&sql, &[&id.as_str()]).await?;
    Ok(())
}

/// Records an archive prune: the new version and the archive's counters;
/// the activity time stays.
pub(crate) async fn pruned(
    tx: &Transaction<'_>,
    t: &Tables,
    id: &SessionId,
    version: u64,
) -> R<()> {
    let stmt = tx
        .prepare_cached(&format!(
            "UPDATE {s} SET version = $2, {counters} WHERE id = $1",
            s = t.sessions,
            counters = recount_sql(&t.events)
        ))
        .await?;
    tx.run(&stmt, &[&id.as_str(), &sql_int(version)]).await?;
    Ok(())
}

/// Writes the session row after a rewind: the replayed state, the new
/// version, and the counters recounted from the remaining events.
pub(crate) async fn rewound(
    tx: &Transaction<'_>,
    t: &Tables,
    id: &SessionId,
    state: &StateMap,
    version: u64,
    now: DateTime<Utc>,
) -> R<()> {
    let stmt = tx
        .prepare_cached(&format!(
            "UPDATE {s} SET state = $2, version = $4, {counters}, \
             context_tokens = (SELECT COALESCE(SUM(token_estimate), 0) FROM {e} \
                               WHERE session_id = $1 AND ctx_pos >= {s}.ctx_base), \
             {touch} WHERE id = $1",
            s = t.sessions,
            e = t.events,
            counters = recount_sql(&t.events),
            touch = touch_sql("$3")
        ))
        .await?;
    tx.run(
        &stmt,
        &[
            &id.as_str(),
            &encode_state(state, "state")?,
            &micros(now),
            &sql_int(version),
        ],
    )
    .await?;
    Ok(())
}

/// A page of live sessions, newest activity first; an undecodable row is
/// named in the page's `unreadable` list instead of failing the listing.
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
    w.next_mark(micros(now));
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
    // The activity indexes hold whole seconds (`active_at`, truncated as
    // PostgreSQL divides): the bounds on them narrow the index walk, those
    // on `updated_at` are exact.
    if let Some(t) = q.active_from {
        w.push("active_at >=", micros(t) / 1_000_000);
        w.push("updated_at >=", micros(t));
    }
    if let Some(t) = q.active_to {
        w.push("active_at <=", micros(t) / 1_000_000);
        w.push("updated_at <", micros(t));
    }
    for (key, value) in &q.metadata {
        // Containment, served by the `sessions_by_metadata` GIN index.
        let entry = serde_json::json!({ key: value });
        let m = w.next_mark(entry.to_string());
        w.sql
            .push_str(&format!(" AND metadata::jsonb @> ({m}::text)::jsonb"));
    }
    let Some(offset) = offset(q.page, q.page_size) else {
        return Ok(Page::empty(q.page, q.page_size));
    };
    w.sql.push_str(&format!(
        // `active_at` (whole seconds) is what the activity indexes hold.
        " ORDER BY active_at DESC, updated_at DESC, id LIMIT {} OFFSET {offset}",
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

/// The sessions-per-user quota for a new session `s`, counted under the
/// owner's advisory lock.
pub(crate) async fn check_owner_quota(
    tx: &Transaction<'_>,
    t: &Tables,
    limits: &Limits,
    s: &Session,
    now: DateTime<Utc>,
) -> R<()> {
    if let Some(quota) = OwnerQuota::of(limits) {
        let live = lock_owner_and_count(tx, t, &s.app, &s.user_id, now).await?;
        quota.check(s, live)?;
    }
    Ok(())
}
