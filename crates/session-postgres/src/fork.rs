//! Native fork: the source read in outline (never its bodies) under a
//! share lock, the plan made in core, the event rows copied as they are
//! stored with one `INSERT … SELECT`.

use chrono::{DateTime, Utc};
use deadpool_postgres::Transaction;
use session_core::plan;
use session_core::state::decode_state;
use session_core::{
    fork_target, ContextChange, EventOutline, ForkAt, ForkPlan, ForkSource, Limits, Session,
    SessionError, SessionId, StateMap,
};

use crate::error::R;
use crate::events::in_context_base;
use crate::quiet::Quiet;
use crate::sessions::{self, SESSION_COLUMNS};
use crate::sql::{count, sql_int, sql_len};
use crate::tables::Tables;

/// Where and when a fork is made.
pub(crate) struct ForkTo<'a> {
    /// The new session's id.
    pub(crate) id: &'a SessionId,
    /// Its creation time.
    pub(crate) created: DateTime<Utc>,
    /// The store's clock, for expiry.
    pub(crate) now: DateTime<Utc>,
}

/// The session stored under `id` (expired or not), its row locked.
async fn target(tx: &Transaction<'_>, t: &Tables, id: &SessionId) -> R<Option<Session>> {
    let sql = format!(
        "SELECT {SESSION_COLUMNS} FROM {} WHERE id = $1 FOR UPDATE",
        t.sessions
    );
    match tx.fetch_opt(&sql, &[&id.as_str()]).await? {
        Some(row) => Ok(Some(sessions::decode_session(&row)?)),
        None => Ok(None),
    }
}

/// The live source session, its initial state and last seq, its row share
/// locked so no write to it lands while the fork reads and copies.
async fn source_row(
    tx: &Transaction<'_>,
    t: &Tables,
    id: &SessionId,
    now: DateTime<Utc>,
) -> R<(Session, StateMap, u64)> {
    let sql = format!(
        "SELECT {SESSION_COLUMNS}, initial_state, last_seq FROM {} WHERE id = $1 FOR SHARE",
        t.sessions
    );
    let row = tx.fetch_opt(&sql, &[&id.as_str()]).await?;
    let row = plan::readable(sessions::with_expiry(row, 7, id)?, id, now)?;
    let session = sessions::decode_session(&row)?;
    let initial = decode_state(row.try_get(14)?, || format!("session {id} initial state"))?;
    Ok((session, initial, count(row.try_get(15)?)))
}

/// The source's events in outline (a summary's `replaces` read out of its
/// stored body), and its context as seqs in context order.
async fn outlines(
    tx: &Transaction<'_>,
    t: &Tables,
    id: &SessionId,
) -> R<(Vec<EventOutline>, Vec<u64>)> {
    let sql = format!(
        "SELECT seq, invocation_id, synthetic, state_delta, token_estimate, \
         CASE WHEN synthetic THEN body::jsonb #>> '{{metadata,replaces}}' END, \
         CASE WHEN ctx_pos >= ({base}) THEN ctx_pos END, \
         role = 'system' AND NOT synthetic \
         FROM {} WHERE session_id = $1 ORDER BY seq",
        t.events,
        base = in_context_base(t)
    );
    let mut out = Vec::new();
    let mut context: Vec<(i64, u64)> = Vec::new();
    for row in tx.fetch(&sql, &[&id.as_str()]).await? {
        let seq: i64 = row.try_get(0)?;
        let what = || format!("session {id} seq {seq}");
        let seq = u64::try_from(seq).map_err(|e| SessionError::serialization(what(), e))?;
        let delta: Option<&str> = row.try_get(3)?;
        let state_delta = delta.map(|d| decode_state(d, what)).transpose()?;
        let tokens: i64 = row.try_get(4)?;
        if let Some(pos) = row.try_get::<_, Option<i64>>(6)? {
            context.push((pos, seq));
        }
        out.push(EventOutline {
            seq,
            invocation_id: row.try_get(1)?,
            synthetic: row.try_get(2)?,
            system: row.try_get(7)?,
            replaces: EventOutline::parse_replaces(row.try_get(5)?)?,
            state_delta,
            token_estimate: u32::try_from(tokens).unwrap_or(u32::MAX),
        });
    }
    context.sort_unstable();
    Ok((out, context.into_iter().map(|(_, seq)| seq).collect()))
}

/// The source's context history.
async fn history(tx: &Transaction<'_>, t: &Tables, id: &SessionId) -> R<Vec<ContextChange>> {
    let sql = format!(
        "SELECT body FROM {} WHERE session_id = $1 ORDER BY version",
        t.context_changes
    );
    let mut changes = Vec::new();
    for row in tx.fetch(&sql, &[&id.as_str()]).await? {
        changes.push(ContextChange::decode(id.as_str(), row.try_get(0)?)?);
    }
    Ok(changes)
}

/// Forks `source` at `at` into a new session in `tx`; the sessions-per-user
/// quota of `limits` is checked before anything is written.
pub(crate) async fn fork(
    tx: &Transaction<'_>,
    t: &Tables,
    limits: &Limits,
    source: &SessionId,
    at: &ForkAt,
    to: ForkTo<'_>,
) -> R<Session> {
    let (id, now) = (to.id, to.now);
    // Forks into one id queue here (as imports do): the row may not exist yet.
    let lock = "SELECT pg_advisory_xact_lock(hashtext('agent-session import ' || $1))";
    tx.run(lock, &[&id.as_str()]).await?;
    let found = target(tx, t, id).await?;
    let expired = found.is_some();
    if let Some(held) = fork_target(found, source, id, now)? {
        return Ok(held);
    }
    let (session, initial_state, last_seq) = source_row(tx, t, source, now).await?;
    let (events, context) = outlines(tx, t, source).await?;
    let context_log = history(tx, t, source).await?;
    let plan = ForkPlan::new(
        ForkSource {
            session,
            initial_state,
            last_seq,
            events,
            context,
            context_log,
        },
        at,
        id.clone(),
        to.created,
    )?;
    sessions::check_owner_quota(tx, t, limits, &plan.session, now).await?;
    if expired {
        sessions::delete(tx, t, id).await?;
    }
    let next_ctx_pos = sql_len(plan.context.len()).saturating_add(1);
    sessions::insert(
        tx,
        t,
        &plan.session,
        &plan.initial_state,
        plan.last_seq,
        next_ctx_pos,
    )
    .await?;
    // The context positions join the copy (position = index + 1), so no
    // copied row is written twice.
    let seqs: Vec<i64> = plan.context.iter().map(|s| sql_int(*s)).collect();
    let positions: Vec<i64> = (1..=sql_len(seqs.len())).collect();
    let copy = format!(
        "INSERT INTO {e} (session_id, seq, id, ctx_pos, ts, role, branch, invocation_id, \
         synthetic, token_estimate, state_delta, search_text, body) \
         SELECT $2, e.seq, e.id, p.pos, e.ts, e.role, e.branch, e.invocation_id, e.synthetic, \
         e.token_estimate, e.state_delta, e.search_text, e.body FROM {e} e \
         LEFT JOIN UNNEST($4::int8[], $5::int8[]) AS p(seq, pos) ON p.seq = e.seq \
         WHERE e.session_id = $1 AND e.seq <= $3",
        e = t.events
    );
    tx.run(
        &copy,
        &[
            &source.as_str(),
            &id.as_str(),
            &sql_int(plan.last_seq),
            &seqs,
            &positions,
        ],
    )
    .await?;
    sessions::recount(tx, t, id).await?;
    crate::history::record(tx, t, id, &plan.context_log).await?;
    let sql = format!("SELECT {SESSION_COLUMNS} FROM {} WHERE id = $1", t.sessions);
    sessions::decode_session(&tx.fetch_one(&sql, &[&id.as_str()]).await?)
}
