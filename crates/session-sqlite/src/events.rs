//! The `events` table: held-id lookups, planned inserts, context positions, rewinds, reads.

use std::collections::HashMap;

use rusqlite::types::{FromSqlError, Value as SqlValue};
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, Transaction};
use session_core::plan::{ReadWindow, Stored};
use session_core::state::{decode_state, encode_state};
use session_core::{
    stored_counter, visible_branches, EventFilter, EventView, KeyedItem, Page, SessionEvent,
    StateMap, SyntheticFilter, MAX_SEQ,
};

use crate::error::{Result, SqlResult};
use crate::sql::{micros, sql_int};

/// The most ids one held-id lookup binds; larger batches take several.
const HELD_CHUNK: usize = 256;

/// The held-id lookup for `width` ids (a power of two up to [`HELD_CHUNK`],
/// so that the statement cache holds a handful of shapes).
fn held_sql(width: usize) -> String {
    let marks = vec!["?"; width].join(", ");
    format!("SELECT id, seq, token_estimate FROM events WHERE session_id = ?1 AND id IN ({marks})")
}

/// Which of `ids` session `session_id` already holds, with their seqs and
/// token estimates: one indexed lookup per [`HELD_CHUNK`] ids.
pub(crate) fn held(
    tx: &Transaction<'_>,
    session_id: &str,
    ids: &[&str],
) -> Result<HashMap<String, Stored>> {
    let mut out = HashMap::new();
    for chunk in ids.chunks(HELD_CHUNK) {
        let Some(last) = chunk.last() else {
            continue;
        };
        let width = chunk.len().next_power_of_two();
        // Padding repeats the last id; IN ignores the repeats.
        let values = std::iter::once(session_id)
            .chain(chunk.iter().copied())
            .chain(std::iter::repeat_n(*last, width - chunk.len()));
        let mut stmt = tx.prepare_cached(&held_sql(width)).sql()?;
        let mut rows = stmt.query(params_from_iter(values)).sql()?;
        while let Some(row) = rows.next().sql()? {
            let id: String = row.get(0).sql()?;
            let seq: i64 = row.get(1).sql()?;
            let tokens: i64 = row.get(2).sql()?;
            let what = |field: &str| format!("session {session_id} event {id} {field}");
            let seq = stored_counter(seq, MAX_SEQ, || what("seq"))?;
            let tokens = stored_counter(tokens, u64::from(u32::MAX), || what("token_estimate"))?;
            let tokens = u32::try_from(tokens).unwrap_or(u32::MAX);
            out.insert(id, Stored { seq, tokens });
        }
    }
    Ok(out)
}

/// Writes one new event at `seq` (and `ctx_pos`, if it joins the context)
/// and answers its rowid. `body` is the event's JSON as `prepare_events`
/// encoded it.
pub(crate) fn insert(
    tx: &Transaction<'_>,
    session_id: &str,
    seq: u64,
    ctx_pos: Option<i64>,
    event: &SessionEvent,
    body: &str,
) -> Result<i64> {
    let delta = event
        .state_delta
        .as_ref()
        .map(|d| encode_state(d, "state delta"))
        .transpose()?;
    tx.prepare_cached(
        "INSERT INTO events (session_id, seq, id, ctx_pos, timestamp, role, branch, invocation_id, \
         synthetic, token_estimate, state_delta, body) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )
    .sql()?
    .execute(params![
        session_id,
        sql_int(seq),
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
    Ok(tx.last_insert_rowid())
}

/// The condition that an event row (of the session `?1`) is in the
/// context: a position at or above the session's `ctx_base`.
pub(crate) const IN_CONTEXT: &str =
    "ctx_pos IS NOT NULL AND ctx_pos >= (SELECT ctx_base FROM sessions WHERE id = ?1)";

/// Takes every event of the session out of the context at once: the
/// context starts at `base` (above every position so far), the rows that
/// leave it are not touched.
pub(crate) fn set_context_base(tx: &Transaction<'_>, session_id: &str, base: i64) -> Result<()> {
    tx.prepare_cached("UPDATE sessions SET ctx_base = ?2 WHERE id = ?1")
        .sql()?
        .execute(params![session_id, base])
        .sql()?;
    Ok(())
}

/// Puts the held event at `seq` into the context at `pos`.
pub(crate) fn set_position(
    tx: &Transaction<'_>,
    session_id: &str,
    seq: u64,
    pos: i64,
) -> Result<()> {
    tx.prepare_cached("UPDATE events SET ctx_pos = ?3 WHERE session_id = ?1 AND seq = ?2")
        .sql()?
        .execute(params![session_id, sql_int(seq), pos])
        .sql()?;
    Ok(())
}

/// The first archived seq of `invocation`, if it has any event.
pub(crate) fn first_of_invocation(
    tx: &Transaction<'_>,
    session_id: &str,
    invocation: &str,
) -> Result<Option<u64>> {
    let from: Option<i64> = tx
        .prepare_cached("SELECT MIN(seq) FROM events WHERE session_id = ?1 AND invocation_id = ?2")
        .sql()?
        .query_row([session_id, invocation], |r| r.get(0))
        .sql()?;
    from.map(|seq| {
        stored_counter(seq, MAX_SEQ, || {
            format!("session {session_id} invocation {invocation} seq")
        })
    })
    .transpose()
}

/// Deletes every event at or after `from_seq` (and its index entry); returns how many.
pub(crate) fn remove_from(tx: &Transaction<'_>, session_id: &str, from_seq: u64) -> Result<usize> {
    let from = sql_int(from_seq);
    tx.prepare_cached(
        "DELETE FROM events_fts WHERE rowid IN (SELECT rowid FROM events WHERE session_id = ?1 \
         AND seq >= ?2 AND rowid <= (SELECT indexed_through FROM fts_state))",
    )
    .sql()?
    .execute(params![session_id, from])
    .sql()?;
    tx.prepare_cached("DELETE FROM events WHERE session_id = ?1 AND seq >= ?2")
        .sql()?
        .execute(params![session_id, from])
        .sql()
}

/// Removes the events at `seqs` with their search index entries (an
/// archive prune); returns how many the archive held.
pub(crate) fn remove_seqs(tx: &Transaction<'_>, session_id: &str, seqs: &[u64]) -> Result<u64> {
    let mut index = tx
        .prepare_cached(
            "DELETE FROM events_fts WHERE rowid IN (SELECT rowid FROM events WHERE session_id = ?1 \
             AND seq = ?2 AND rowid <= (SELECT indexed_through FROM fts_state))",
        )
        .sql()?;
    let mut events = tx
        .prepare_cached("DELETE FROM events WHERE session_id = ?1 AND seq = ?2")
        .sql()?;
    let mut removed = 0_u64;
    for seq in seqs {
        let seq = sql_int(*seq);
        index.execute(params![session_id, seq]).sql()?;
        let n = events.execute(params![session_id, seq]).sql()?;
        removed = removed.saturating_add(u64::try_from(n).unwrap_or(u64::MAX));
    }
    Ok(removed)
}

/// Where each of `seqs` stands in session `session_id`, for a prune: seq
/// → (whether it is in the context, whether rewind replays it), for the
/// seqs the archive holds.
pub(crate) fn standing(
    tx: &Transaction<'_>,
    session_id: &str,
    seqs: &[u64],
) -> Result<HashMap<u64, (bool, bool)>> {
    let mut stmt = tx
        .prepare_cached(&format!(
            "SELECT CASE WHEN {IN_CONTEXT} THEN 1 ELSE 0 END, \
             (role = 'system' AND synthetic = 0) \
             OR (state_delta IS NOT NULL AND state_delta NOT IN ('{{}}', 'null')) \
             FROM events WHERE session_id = ?1 AND seq = ?2"
        ))
        .sql()?;
    let mut out = HashMap::with_capacity(seqs.len());
    for seq in seqs {
        let Ok(key) = i64::try_from(*seq) else {
            continue;
        };
        let found = stmt
            .query_row(params![session_id, key], |r| {
                Ok((r.get::<_, bool>(0)?, r.get::<_, bool>(1)?))
            })
            .optional()
            .sql()?;
        if let Some(standing) = found {
            out.insert(*seq, standing);
        }
    }
    Ok(out)
}

/// The state deltas of the session's events, in seq order.
pub(crate) fn state_deltas(tx: &Transaction<'_>, session_id: &str) -> Result<Vec<StateMap>> {
    let mut stmt = tx
        .prepare_cached(
            "SELECT seq, state_delta FROM events WHERE session_id = ?1 \
             AND state_delta IS NOT NULL ORDER BY seq",
        )
        .sql()?;
    let rows = stmt
        .query_map([session_id], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
        })
        .sql()?;
    let mut deltas = Vec::new();
    for row in rows {
        let (seq, text) = row.sql()?;
        deltas.push(decode_state(&text, || {
            format!("session {session_id} seq {seq} state delta")
        })?);
    }
    Ok(deltas)
}

/// Decodes a stored event body, with its session and seq from the row.
pub(crate) fn decode_event(session_id: &str, seq: i64, body: &str) -> Result<SessionEvent> {
    SessionEvent::decode_stored(session_id, u64::try_from(seq).unwrap_or(0), body)
}

/// The whole archive in seq order, and the context as seqs in context order.
pub(crate) fn archive_and_context(
    conn: &Connection,
    session_id: &str,
) -> Result<(Vec<SessionEvent>, Vec<u64>)> {
    let mut events = Vec::new();
    let mut context: Vec<(i64, u64)> = Vec::new();
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT seq, body, CASE WHEN {IN_CONTEXT} THEN ctx_pos END \
             FROM events WHERE session_id = ?1 ORDER BY seq"
        ))
        .sql()?;
    let mut rows = stmt.query([session_id]).sql()?;
    while let Some(row) = rows.next().sql()? {
        let seq: i64 = row.get(0).sql()?;
        let body: String = row.get(1).sql()?;
        let pos: Option<i64> = row.get(2).sql()?;
        let e = decode_event(session_id, seq, &body)?;
        if let Some(p) = pos {
            context.push((p, e.seq));
        }
        events.push(e);
    }
    context.sort_unstable();
    Ok((events, context.into_iter().map(|(_, seq)| seq).collect()))
}

/// Where a keyset cursor starts a read.
enum Cursor {
    /// Past this `seq` (archive) or `ctx_pos` (context), or from the start.
    From(Option<i64>),
    /// Past every seq a row can hold: nothing follows.
    PastTheEnd,
}

/// The order key the filter's cursor ([`EventFilter::after`]) stands at:
/// its seq in the archive, its context position in the context.
fn cursor(conn: &Connection, id: &str, filter: &EventFilter) -> Result<Cursor> {
    let Some(after) = filter.after else {
        return Ok(Cursor::From(None));
    };
    let Ok(seq) = i64::try_from(after) else {
        return Ok(Cursor::PastTheEnd);
    };
    if filter.view == EventView::Archive {
        return Ok(Cursor::From(Some(seq)));
    }
    let pos: Option<i64> = conn
        .prepare_cached(&format!(
            "SELECT ctx_pos FROM events WHERE session_id = ?1 AND seq = ?2 AND {IN_CONTEXT}"
        ))
        .sql()?
        .query_row(params![id, seq], |r| r.get(0))
        .optional()
        .sql()?;
    pos.map(|p| Cursor::From(Some(p)))
        .ok_or_else(|| filter.cursor_left_context())
}

/// One page of a session's events through `filter` (the session is known live).
pub(crate) fn read(
    conn: &Connection,
    id: &str,
    filter: &EventFilter,
) -> Result<Page<SessionEvent>> {
    let matcher = filter.matcher();
    read_rows(conn, id, filter, |seq, body| {
        let e = decode_event(id, seq, body)?;
        Ok(matcher.matches(&e).then_some(e))
    })
}

/// One page of a session's events through `filter` as the items under
/// metadata `key`, copied out of the stored bodies without decoding the
/// events; for a filter that selects by position only (no criteria an
/// event's fields decide; see [`EventFilter::selects_by_position`]).
pub(crate) fn read_items(
    conn: &Connection,
    id: &str,
    key: &str,
    filter: &EventFilter,
) -> Result<Page<KeyedItem>> {
    read_rows(conn, id, filter, |seq, body| {
        let seq = u64::try_from(seq).unwrap_or(0);
        KeyedItem::decode_stored(id, seq, body, key).map(Some)
    })
}

/// One page of `filter`'s rows, each decoded by `decode` from its seq and
/// body (`None`: the row does not match and is skipped).
fn read_rows<T>(
    conn: &Connection,
    id: &str,
    filter: &EventFilter,
    decode: impl Fn(i64, &str) -> Result<Option<T>>,
) -> Result<Page<T>> {
    let order = match filter.view {
        EventView::Context => "ctx_pos",
        EventView::Archive => "seq",
    };
    // The body as a BLOB: read as text, each body was copied once more on
    // its way out of SQLite (a whole read's copying fell by a third).
    let mut sql = String::from("SELECT seq, CAST(body AS BLOB) FROM events WHERE session_id = ?1");
    let mut values: Vec<SqlValue> = vec![id.to_owned().into()];
    let cursor = match cursor(conn, id, filter)? {
        Cursor::From(c) => c,
        Cursor::PastTheEnd => return Ok(Page::empty(filter.page, filter.page_size)),
    };
    match (filter.view, cursor) {
        (EventView::Context, None) => {
            sql.push_str(" AND ");
            sql.push_str(IN_CONTEXT);
        }
        // One lower bound, the higher of the cursor and the context's
        // base: given both, SQLite started the index range at the base
        // and filtered up to the cursor, so each page of a whole read
        // walked every row before it (100,000 events took 0.45 s, 10,000
        // took 11 ms).
        (EventView::Context, Some(c)) => {
            values.push(c.into());
            sql.push_str(&format!(
                " AND ctx_pos IS NOT NULL AND ctx_pos > \
                 MAX(?{}, (SELECT ctx_base FROM sessions WHERE id = ?1) - 1)",
                values.len()
            ));
        }
        (EventView::Archive, Some(c)) => {
            values.push(c.into());
            sql.push_str(&format!(" AND seq > ?{}", values.len()));
        }
        (EventView::Archive, None) => {}
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
    let decode_all = |stmt: &mut rusqlite::Statement<'_>,
                      values: Vec<SqlValue>,
                      limit: Option<usize>,
                      skip: usize|
     -> Result<(Vec<T>, bool)> {
        let mut rows = stmt.query(params_from_iter(values)).sql()?;
        let mut out = Vec::new();
        let mut skipped = 0;
        let mut more = false;
        while let Some(row) = rows.next().sql()? {
            let seq: i64 = row.get(0).sql()?;
            // Borrowed from the row: decoding copies what it keeps.
            let body = row.get_ref(1).sql()?;
            let body = body
                .as_bytes()
                .and_then(|b| std::str::from_utf8(b).map_err(|e| FromSqlError::Other(e.into())))
                .map_err(|e| {
                    rusqlite::Error::FromSqlConversionFailure(1, body.data_type(), e.into())
                })
                .sql()?;
            let Some(e) = decode(seq, body)? else {
                continue;
            };
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
    let (offset, limit) = match ReadWindow::of(filter) {
        ReadWindow::Empty => return Ok(ReadWindow::empty_page(filter)),
        ReadWindow::Last(n) => {
            sql.push_str(&format!(" ORDER BY {order} DESC"));
            if !checked_in_rust {
                sql.push_str(&format!(" LIMIT {n}"));
            }
            let mut stmt = conn.prepare_cached(&sql).sql()?;
            let (mut recent, _) = decode_all(&mut stmt, values, Some(n), 0)?;
            recent.reverse();
            return Ok(Page::paginate(recent, filter.page, filter.page_size));
        }
        ReadWindow::Page { offset, limit } => (offset, limit),
    };
    sql.push_str(&format!(" ORDER BY {order}"));
    let skip = if checked_in_rust {
        offset
    } else {
        sql.push_str(&format!(" LIMIT {limit} OFFSET {offset}"));
        0
    };
    let mut stmt = conn.prepare_cached(&sql).sql()?;
    let (items, has_more) = decode_all(&mut stmt, values, Some(filter.page_size), skip)?;
    let mut page = Page::from_overfetch(items, filter.page, filter.page_size);
    page.has_more = has_more;
    Ok(page)
}
