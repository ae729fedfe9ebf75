//! Native fork: the source read in outline (never its bodies), the plan
//! made in core, the event rows copied as they are stored.

use chrono::{DateTime, Utc};
use rusqlite::{params, Transaction};
use session_core::state::decode_state;
use session_core::{
    fork_target, EventOutline, ForkAt, ForkPlan, ForkSource, Session, SessionError, SessionId,
    StateMap,
};

use crate::error::{Result, SqlResult};
use crate::events::IN_CONTEXT;
use crate::history;
use crate::sessions;
use crate::sql::sql_int;

/// The source's events in outline (a summary's `replaces` read out of its
/// stored body), and its context as seqs in context order.
fn outlines(tx: &Transaction<'_>, source: &str) -> Result<(Vec<EventOutline>, Vec<u64>)> {
    let mut stmt = tx
        .prepare_cached(&format!(
            "SELECT seq, invocation_id, synthetic, state_delta, token_estimate, \
             CASE WHEN synthetic THEN json_extract(body, '$.metadata.replaces') END, \
             CASE WHEN {IN_CONTEXT} THEN ctx_pos END, \
             role = 'system' AND NOT synthetic \
             FROM events WHERE session_id = ?1 ORDER BY seq"
        ))
        .sql()?;
    let mut rows = stmt.query([source]).sql()?;
    let mut out = Vec::new();
    let mut context: Vec<(i64, u64)> = Vec::new();
    while let Some(row) = rows.next().sql()? {
        let seq: i64 = row.get(0).sql()?;
        let what = || format!("session {source} seq {seq}");
        let seq = u64::try_from(seq).map_err(|e| SessionError::serialization(what(), e))?;
        let delta: Option<String> = row.get(3).sql()?;
        let state_delta: Option<StateMap> = delta.map(|d| decode_state(&d, what)).transpose()?;
        let replaces: Option<String> = row.get(5).sql()?;
        if let Some(pos) = row.get::<_, Option<i64>>(6).sql()? {
            context.push((pos, seq));
        }
        out.push(EventOutline {
            seq,
            invocation_id: row.get(1).sql()?,
            synthetic: row.get(2).sql()?,
            system: row.get(7).sql()?,
            replaces: EventOutline::parse_replaces(replaces.as_deref())?,
            state_delta,
            token_estimate: row.get(4).sql()?,
        });
    }
    context.sort_unstable();
    Ok((out, context.into_iter().map(|(_, seq)| seq).collect()))
}

/// Where and when a fork is made.
pub(crate) struct ForkTo<'a> {
    /// The new session's id.
    pub(crate) id: &'a SessionId,
    /// Its creation time.
    pub(crate) created: DateTime<Utc>,
    /// The store's clock, for expiry.
    pub(crate) now: DateTime<Utc>,
}

/// Forks `source` at `at` into a new session in the writer's transaction:
/// the rows of the events the fork holds are copied with `INSERT … SELECT`,
/// their bodies untouched; positions, counters and history follow the plan.
pub(crate) fn fork(
    tx: &Transaction<'_>,
    source: &SessionId,
    at: &ForkAt,
    to: &ForkTo<'_>,
    quota: impl FnOnce(&Session) -> Result<()>,
) -> Result<Session> {
    let (id, now) = (to.id, to.now);
    let found = sessions::stored(tx, id)?;
    let expired = found.is_some();
    if let Some(held) = fork_target(found, source, id, now)? {
        return Ok(held);
    }
    let session = sessions::get(tx, source, now)?;
    let (initial_state, last_seq) = sessions::export_extras(tx, source)?;
    let (events, context) = outlines(tx, source)?;
    let context_log = history::read(tx, source)?.into_changes();
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
    quota(&plan.session)?;
    if expired {
        sessions::purge(tx, id)?;
    }
    let next_ctx_pos = i64::try_from(plan.context.len())
        .unwrap_or(i64::MAX)
        .saturating_add(1);
    sessions::insert(
        tx,
        &plan.session,
        &plan.initial_state,
        plan.last_seq,
        next_ctx_pos,
    )?;
    // The context positions go to a keyed scratch table in one statement,
    // so the copy joins them by seq instead of updating row by row.
    let context = serde_json::to_string(&plan.context)
        .map_err(|e| SessionError::serialization(format!("fork {id} context"), e))?;
    tx.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS fork_positions \
         (seq INTEGER PRIMARY KEY, pos INTEGER NOT NULL); \
         DELETE FROM temp.fork_positions;",
    )
    .sql()?;
    tx.prepare_cached(
        "INSERT INTO temp.fork_positions (seq, pos) SELECT value, key + 1 FROM json_each(?1)",
    )
    .sql()?
    .execute([context])
    .sql()?;
    tx.prepare_cached(
        "INSERT INTO events (session_id, seq, id, ctx_pos, timestamp, role, branch, invocation_id, \
         synthetic, token_estimate, state_delta, body) \
         SELECT ?2, e.seq, e.id, p.pos, e.timestamp, e.role, e.branch, e.invocation_id, \
         e.synthetic, e.token_estimate, e.state_delta, e.body \
         FROM events e LEFT JOIN temp.fork_positions p ON p.seq = e.seq \
         WHERE e.session_id = ?1 AND e.seq <= ?3 ORDER BY e.seq",
    )
    .sql()?
    .execute(params![source.as_str(), id.as_str(), sql_int(plan.last_seq)])
    .sql()?;
    tx.execute_batch("DELETE FROM temp.fork_positions").sql()?;
    sessions::recount(tx, id)?;
    for change in &plan.context_log {
        history::record(tx, id, change)?;
    }
    sessions::get(tx, id, now)
}
