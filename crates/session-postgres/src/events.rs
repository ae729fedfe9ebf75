//! The events table: batched inserts, the held ids of a batch, context positions, reads and rewind.

use std::collections::HashMap;

use deadpool_postgres::{Client, Transaction};
use session_core::plan::{EventBatch, NewEvent, ReadWindow, Stored};
use session_core::state::{decode_state, encode_state};
use session_core::{
    fold_case, stored_counter, visible_branches, EventFilter, EventView, Page, SessionError,
    SessionEvent, SessionId, StateMap, SyntheticFilter, MAX_SEQ,
};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Row, Statement};

use crate::error::{BACKEND, R};
use crate::quiet::Quiet;
use crate::sql::{count, like_pattern, micros, sql_int, Conditions};
use crate::tables::Tables;

/// The text the trigram and full-text indexes hold: the search text,
/// case-folded in Rust (so matching does not depend on the database's
/// locale), with NUL (which PostgreSQL text cannot hold) as a space.
pub(crate) fn index_text(e: &SessionEvent) -> String {
    fold_case(&e.message.search_text()).replace('\0', " ")
}

/// A stored event body decoded with the seq and session the row holds.
pub(crate) fn decode_event(session_id: &str, seq: i64, body: &str) -> R<SessionEvent> {
    Ok(SessionEvent::decode_stored(session_id, count(seq), body)?)
}

/// One event to insert: its seq, its context position (`None`: not in the
/// context), the event and its stored JSON body.
pub(crate) struct NewRow<'a> {
    pub(crate) seq: u64,
    pub(crate) ctx_pos: Option<i64>,
    pub(crate) event: &'a SessionEvent,
    pub(crate) body: &'a str,
}

/// The planned new events of `batch` as rows, at context positions from `first` on
/// (`None`: they join the archive only, placed by the caller).
pub(crate) fn new_rows<'a>(
    batch: &'a EventBatch,
    new: &[NewEvent],
    first: Option<i64>,
) -> Vec<NewRow<'a>> {
    new.iter()
        .zip(0i64..)
        .filter_map(|(n, k)| {
            Some(NewRow {
                seq: n.seq,
                ctx_pos: first.map(|p| p + k),
                event: batch.events.get(n.index)?,
                body: batch.bodies.get(n.index)?,
            })
        })
        .collect()
}

/// The columns of an insert of new rows after `session_id`: one array
/// per column, which `UNNEST` zips back into rows (see [`INSERT_COLUMNS`]).
pub(crate) struct EventColumns<'a> {
    seq: Vec<i64>,
    id: Vec<&'a str>,
    ctx_pos: Vec<Option<i64>>,
    ts: Vec<i64>,
    role: Vec<&'static str>,
    branch: Vec<Option<&'a str>>,
    invocation: Vec<Option<&'a str>>,
    synthetic: Vec<bool>,
    tokens: Vec<i64>,
    delta: Vec<Option<String>>,
    search: Vec<String>,
    body: Vec<&'a str>,
}

/// The events table's columns an insert writes, and the `UNNEST` of
/// parameters `$k..$k+11` that yields them after the session id.
pub(crate) fn insert_columns(first_param: usize) -> (&'static str, String) {
    const TYPES: [&str; 12] = [
        "int8", "text", "int8", "int8", "text", "text", "text", "bool", "int8", "text", "text",
        "text",
    ];
    let arrays: Vec<String> = TYPES
        .iter()
        .zip(first_param..)
        .map(|(ty, k)| format!("${k}::{ty}[]"))
        .collect();
    (
        "session_id, seq, id, ctx_pos, ts, role, branch, invocation_id, synthetic, \
         token_estimate, state_delta, search_text, body",
        format!("UNNEST({})", arrays.join(", ")),
    )
}

impl<'a> EventColumns<'a> {
    /// The columns of `rows`.
    pub(crate) fn new(rows: &[NewRow<'a>]) -> R<Self> {
        let n = rows.len();
        let mut c = Self {
            seq: Vec::with_capacity(n),
            id: Vec::with_capacity(n),
            ctx_pos: Vec::with_capacity(n),
            ts: Vec::with_capacity(n),
            role: Vec::with_capacity(n),
            branch: Vec::with_capacity(n),
            invocation: Vec::with_capacity(n),
            synthetic: Vec::with_capacity(n),
            tokens: Vec::with_capacity(n),
            delta: Vec::with_capacity(n),
            search: Vec::with_capacity(n),
            body: Vec::with_capacity(n),
        };
        for r in rows {
            let e = r.event;
            c.seq.push(sql_int(r.seq));
            c.id.push(e.id.as_str());
            c.ctx_pos.push(r.ctx_pos);
            c.ts.push(micros(e.timestamp));
            c.role.push(e.role().as_str());
            c.branch.push(e.branch.as_deref());
            c.invocation.push(e.invocation_id.as_deref());
            c.synthetic.push(e.is_synthetic());
            c.tokens.push(i64::from(e.token_estimate));
            c.delta.push(
                e.state_delta
                    .as_ref()
                    .map(|d| encode_state(d, "state delta"))
                    .transpose()?,
            );
            c.search.push(index_text(e));
            c.body.push(r.body);
        }
        Ok(c)
    }

    /// The twelve arrays, in the order of [`insert_columns`].
    pub(crate) fn params(&self) -> [&(dyn ToSql + Sync); 12] {
        [
            &self.seq,
            &self.id,
            &self.ctx_pos,
            &self.ts,
            &self.role,
            &self.branch,
            &self.invocation,
            &self.synthetic,
            &self.tokens,
            &self.delta,
            &self.search,
            &self.body,
        ]
    }
}

/// Inserts `rows` into the archive of `session_id` in one statement (one
/// array per column, zipped by `UNNEST`).
pub(crate) async fn insert(
    tx: &Transaction<'_>,
    t: &Tables,
    session_id: &str,
    rows: &[NewRow<'_>],
) -> R<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let n = rows.len();
    let columns = EventColumns::new(rows)?;
    let (names, unnest) = insert_columns(2);
    let stmt = tx
        .prepare_cached(&format!(
            "INSERT INTO {} ({names}) SELECT $1::text, * FROM {unnest}",
            t.events
        ))
        .await?;
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&session_id];
    params.extend(columns.params());
    let written = tx.run(&stmt, &params).await?;
    if u64::try_from(n).ok() != Some(written) {
        return Err(SessionError::backend(
            BACKEND,
            format!("inserting {n} events into session {session_id} wrote {written} rows"),
        )
        .into());
    }
    Ok(())
}

/// The statement [`held_with`] runs.
pub(crate) async fn held_statement(tx: &Transaction<'_>, t: &Tables) -> R<Statement> {
    Ok(tx
        .prepare_cached(&format!(
            "SELECT id, seq, token_estimate FROM {} WHERE session_id = $1 AND id = ANY($2)",
            t.events
        ))
        .await?)
}

/// Which of `ids` the session already holds, with their seqs and token
/// estimates. The query is sent when the future is first polled.
pub(crate) async fn held_with(
    tx: &Transaction<'_>,
    stmt: &Statement,
    session_id: &SessionId,
    ids: &[&str],
) -> R<HashMap<String, Stored>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let mut out = HashMap::new();
    for row in tx.fetch(stmt, &[&session_id.as_str(), &ids]).await? {
        let id: String = row.try_get(0)?;
        let what = || format!("session {session_id} event {id}");
        let seq = stored_counter(row.try_get(1)?, MAX_SEQ, || format!("{} seq", what()))?;
        let tokens = u32::try_from(row.try_get::<_, i64>(2)?)
            .map_err(|e| SessionError::serialization(format!("{} token_estimate", what()), e))?;
        out.insert(id, Stored { seq, tokens });
    }
    Ok(out)
}

/// Makes the context exactly the events at `seqs`, in order, at positions
/// `first..` (above every earlier position): the session's context base
/// moves to `first`, so every other event leaves the context without its
/// row being written. Events not stored yet are inserted afterwards with
/// their positions.
pub(crate) async fn place_context(
    tx: &Transaction<'_>,
    t: &Tables,
    session_id: &SessionId,
    seqs: &[i64],
    positions: &[i64],
    first: i64,
) -> R<()> {
    let base = tx
        .prepare_cached(&format!(
            "UPDATE {} SET ctx_base = $2 WHERE id = $1",
            t.sessions
        ))
        .await?;
    tx.run(&base, &[&session_id.as_str(), &first]).await?;
    if seqs.is_empty() {
        return Ok(());
    }
    let place = tx
        .prepare_cached(&format!(
            "UPDATE {} e SET ctx_pos = u.pos FROM UNNEST($2::int8[], $3::int8[]) AS u(seq, pos) \
             WHERE e.session_id = $1 AND e.seq = u.seq",
            t.events
        ))
        .await?;
    tx.run(&place, &[&session_id.as_str(), &seqs, &positions])
        .await?;
    Ok(())
}

/// The first archived seq of an invocation, if the archive holds it.
pub(crate) async fn first_seq_of(
    tx: &Transaction<'_>,
    t: &Tables,
    session_id: &SessionId,
    invocation: &str,
) -> R<Option<u64>> {
    let stmt = tx
        .prepare_cached(&format!(
            "SELECT MIN(seq) FROM {} WHERE session_id = $1 AND invocation_id = $2",
            t.events
        ))
        .await?;
    let first: Option<i64> = tx
        .fetch_one(&stmt, &[&session_id.as_str(), &invocation])
        .await?
        .try_get(0)?;
    Ok(first.map(count))
}

/// Removes every event at or after `from_seq`; how many.
pub(crate) async fn remove_from(
    tx: &Transaction<'_>,
    t: &Tables,
    session_id: &SessionId,
    from_seq: u64,
) -> R<u64> {
    let stmt = tx
        .prepare_cached(&format!(
            "DELETE FROM {} WHERE session_id = $1 AND seq >= $2",
            t.events
        ))
        .await?;
    tx.run(&stmt, &[&session_id.as_str(), &sql_int(from_seq)])
        .await
}

/// Removes the events at `seqs` (an archive prune; the search index lives
/// in the rows); returns how many the archive held.
pub(crate) async fn remove_seqs(
    tx: &Transaction<'_>,
    t: &Tables,
    session_id: &SessionId,
    seqs: &[u64],
) -> R<u64> {
    let stmt = tx
        .prepare_cached(&format!(
            "DELETE FROM {} WHERE session_id = $1 AND seq = ANY($2)",
            t.events
        ))
        .await?;
    let seqs: Vec<i64> = seqs.iter().map(|s| sql_int(*s)).collect();
    tx.run(&stmt, &[&session_id.as_str(), &seqs]).await
}

/// Where each of `seqs` stands in session `session_id`, for a prune: seq
/// → (whether it is in the context, whether rewind replays it), for the
/// seqs the archive holds.
pub(crate) async fn standing(
    tx: &Transaction<'_>,
    t: &Tables,
    session_id: &SessionId,
    seqs: &[u64],
) -> R<HashMap<u64, (bool, bool)>> {
    let stmt = tx
        .prepare_cached(&format!(
            "SELECT seq, COALESCE(ctx_pos >= ({base}), false), \
             (role = 'system' AND NOT synthetic) \
             OR (state_delta IS NOT NULL AND state_delta NOT IN ('{{}}', 'null')) \
             FROM {} WHERE session_id = $1 AND seq = ANY($2)",
            t.events,
            base = in_context_base(t)
        ))
        .await?;
    let keys: Vec<i64> = seqs.iter().filter_map(|s| i64::try_from(*s).ok()).collect();
    let mut out = HashMap::with_capacity(keys.len());
    for row in tx.fetch(&stmt, &[&session_id.as_str(), &keys]).await? {
        let standing = (row.try_get::<_, bool>(1)?, row.try_get::<_, bool>(2)?);
        out.insert(count(row.try_get(0)?), standing);
    }
    Ok(out)
}

/// The state deltas of the archive, in seq order.
pub(crate) async fn deltas(
    tx: &Transaction<'_>,
    t: &Tables,
    session_id: &SessionId,
) -> R<Vec<StateMap>> {
    let stmt = tx
        .prepare_cached(&format!(
            "SELECT seq, state_delta FROM {} WHERE session_id = $1 AND state_delta IS NOT NULL ORDER BY seq",
            t.events
        ))
        .await?;
    let mut out = Vec::new();
    for row in tx.fetch(&stmt, &[&session_id.as_str()]).await? {
        let seq: i64 = row.try_get(0)?;
        out.push(decode_state(row.try_get(1)?, || {
            format!("session {session_id} seq {seq} state delta")
        })?);
    }
    Ok(out)
}

/// The whole archive in seq order, and the context as seqs in context order.
pub(crate) async fn archive(
    c: &Client,
    t: &Tables,
    session_id: &SessionId,
) -> R<(Vec<SessionEvent>, Vec<u64>)> {
    let stmt = c
        .prepare_cached(&format!(
            "SELECT seq, body, CASE WHEN ctx_pos >= ({base}) THEN ctx_pos END \
             FROM {} WHERE session_id = $1 ORDER BY seq",
            t.events,
            base = in_context_base(t)
        ))
        .await?;
    let mut events = Vec::new();
    let mut context: Vec<(i64, u64)> = Vec::new();
    for row in c.fetch(&stmt, &[&session_id.as_str()]).await? {
        let e = decode_event(session_id, row.try_get(0)?, row.try_get(1)?)?;
        if let Some(pos) = row.try_get::<_, Option<i64>>(2)? {
            context.push((pos, e.seq));
        }
        events.push(e);
    }
    context.sort_unstable();
    Ok((events, context.into_iter().map(|(_, seq)| seq).collect()))
}

/// The subquery of a session's context base (`$1` is the session id): an
/// event is in the context when its `ctx_pos` is at least this.
pub(crate) fn in_context_base(t: &Tables) -> String {
    format!("SELECT ctx_base FROM {} WHERE id = $1", t.sessions)
}

/// The context position of the event `seq`, if it is in the context: a
/// lookup by primary key alone, the context base compared here (with the
/// base in the SQL, PostgreSQL could pick the context index and scan a
/// session's whole context for one row). The base is a scalar subquery,
/// not a join: two lookups by primary key leave the planner no choice,
/// where the join took 70 ms a page (the server log) in two whole reads
/// of a 100,000-event session on a store the bench had just filled.
async fn context_position(c: &Client, t: &Tables, id: &SessionId, seq: i64) -> R<Option<i64>> {
    let sql = format!(
        "SELECT ctx_pos, ({}) FROM {} WHERE session_id = $1 AND seq = $2",
        in_context_base(t),
        t.events
    );
    let Some(row) = c.fetch_opt(&sql, &[&id.as_str(), &seq]).await? else {
        return Ok(None);
    };
    let (pos, base): (Option<i64>, i64) = (row.try_get(0)?, row.try_get(1)?);
    Ok(pos.filter(|p| *p >= base))
}

/// The page after a cursor when nothing else filters it, read within the
/// range of keys it can span: the `limit` events after key `after` (a seq
/// in the archive, a context position in the context) are those keyed
/// `after + 1 ..= after + limit` when no key is missing. The range bounds
/// the index scan whatever plan PostgreSQL picks: without statistics for
/// the table (a new one, before autovacuum analyzes it) it estimated a
/// few hundred rows for any session and chose a bitmap scan of every
/// event past the cursor, sorted, for each page, which made a whole read
/// of a long session quadratic (`EXPLAIN ANALYZE`: 35 ms for a page
/// 1,000 events into 100,000, 0.3 ms bounded).
/// `None` when the range holds fewer (pruned seqs, a compacted context,
/// the view's end): the caller reads without the bound.
async fn page_in_key_range(
    c: &Client,
    t: &Tables,
    id: &SessionId,
    filter: &EventFilter,
    after: i64,
) -> R<Option<Page<SessionEvent>>> {
    let ReadWindow::Page { offset: 0, limit } = ReadWindow::of(filter) else {
        return Ok(None);
    };
    let Some(last) = i64::try_from(limit).ok().and_then(|n| after.checked_add(n)) else {
        return Ok(None);
    };
    if !filter.selects_by_position() {
        return Ok(None);
    }
    let sql = match filter.view {
        EventView::Archive => format!(
            "SELECT seq, body FROM {} WHERE session_id = $1 AND seq > $2 AND seq <= $3 \
             ORDER BY seq LIMIT {limit}",
            t.events
        ),
        EventView::Context => format!(
            "SELECT seq, body FROM {} WHERE session_id = $1 AND ctx_pos > $2 AND ctx_pos <= $3 \
             AND ctx_pos >= ({}) ORDER BY ctx_pos LIMIT {limit}",
            t.events,
            in_context_base(t)
        ),
    };
    let rows = c.fetch(&sql, &[&id.as_str(), &after, &last]).await?;
    if rows.len() < limit {
        return Ok(None);
    }
    let mut items = Vec::with_capacity(rows.len());
    for row in rows {
        items.push(decode_event(id, row.try_get(0)?, row.try_get(1)?)?);
    }
    Ok(Some(Page::from_overfetch(
        items,
        filter.page,
        filter.page_size,
    )))
}

/// A page of one view of a live session's events through `filter`.
pub(crate) async fn read(
    c: &Client,
    t: &Tables,
    id: &SessionId,
    filter: &EventFilter,
) -> R<Page<SessionEvent>> {
    let order = match filter.view {
        EventView::Context => "ctx_pos",
        EventView::Archive => "seq",
    };
    let mut w = Conditions::new(format!(
        "SELECT seq, body FROM {} WHERE session_id = $1",
        t.events
    ));
    w.next_mark(id.as_str().to_owned());
    if filter.view == EventView::Context {
        w.sql.push_str(&format!(
            " AND ctx_pos IS NOT NULL AND ctx_pos >= ({})",
            in_context_base(t)
        ));
    }
    if let Some(after) = filter.after {
        let Ok(seq) = i64::try_from(after) else {
            return Ok(Page::empty(filter.page, filter.page_size));
        };
        let key = match filter.view {
            EventView::Archive => seq,
            EventView::Context => context_position(c, t, id, seq)
                .await?
                .ok_or_else(|| filter.cursor_left_context())?,
        };
        if let Some(page) = page_in_key_range(c, t, id, filter, key).await? {
            return Ok(page);
        }
        w.push(&format!("{order} >"), key);
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
            let e = decode_event(id, row.try_get(0)?, row.try_get(1)?)?;
            if matcher.matches(&e) {
                out.push(e);
            }
        }
        Ok(out)
    };
    // SQL filters exactly, except a keyword holding NUL (indexed as a space):
    // then Rust re-checks every row and SQL must not cut the result short.
    let exact = filter.keyword.as_ref().is_none_or(|k| !k.contains('\0'));
    let (offset, limit) = match ReadWindow::of(filter) {
        ReadWindow::Empty => return Ok(ReadWindow::empty_page(filter)),
        ReadWindow::Last(n) => {
            w.sql.push_str(&format!(" ORDER BY {order} DESC"));
            if exact {
                w.sql.push_str(&format!(" LIMIT {n}"));
            }
            let mut recent = decode(c.fetch(&w.sql, &w.params()).await?)?;
            recent.truncate(n);
            recent.reverse();
            return Ok(Page::paginate(recent, filter.page, filter.page_size));
        }
        ReadWindow::Page { offset, limit } => (offset, limit),
    };
    if !exact {
        w.sql.push_str(&format!(" ORDER BY {order}"));
        let all = decode(c.fetch(&w.sql, &w.params()).await?)?;
        return Ok(Page::paginate(all, filter.page, filter.page_size));
    }
    w.sql
        .push_str(&format!(" ORDER BY {order} LIMIT {limit} OFFSET {offset}"));
    let items = decode(c.fetch(&w.sql, &w.params()).await?)?;
    Ok(Page::from_overfetch(items, filter.page, filter.page_size))
}
