//! Search: the FTS5 trigram index kept in batches, literal and ranked queries.

use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, Utc};
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, params_from_iter, Connection, Transaction};
use session_core::{
    fold_case, Page, SearchHit, SearchMode, SearchQuery, SearchScope, SessionError, SessionEvent,
    SessionId,
};

use crate::error::{Result, SqlResult};
use crate::events::decode_event;
use crate::sessions::{ensure_live, micros, sql_offset};
use crate::BACKEND;

/// The text the trigram index holds for an event. NUL is indexed as a
/// space: the index only proposes candidates, every hit is checked on the real text.
fn index_text(e: &SessionEvent) -> String {
    e.message.search_text().replace('\0', " ")
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
    pub(crate) fn after_insert(&self, tx: &Transaction<'_>) -> Result<()> {
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

/// One page of hits for `q`, read in one snapshot.
pub(crate) fn search(
    conn: &Connection,
    q: &SearchQuery,
    now: DateTime<Utc>,
) -> Result<Page<SearchHit>> {
    let mut values: Vec<SqlValue> = Vec::new();
    let (scope_sql, multi) = match &q.scope {
        SearchScope::Session(id) => {
            ensure_live(conn, &id.parse::<SessionId>()?, now)?;
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
    let Some(offset) = sql_offset(q.page, q.page_size) else {
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

#[cfg(test)]
mod tests {
    use super::*;

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
