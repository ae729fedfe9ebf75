//! Search: the FTS5 trigram index of folded text kept in batches; candidates
//! from it, checked with the reference matcher; chronological and ranked pages.

use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, Utc};
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, params_from_iter, Connection, Transaction};
use session_core::search::COUNT_PAST_PAGE;
use session_core::{
    fold_case, page_of_matches, MatchTerms, Page, ParsedQuery, SearchHit, SearchMode, SearchQuery,
    SearchScope, SessionEvent, SessionId, Total,
};

use crate::error::{Result, SqlResult, BACKEND};
use crate::events::decode_event;
use crate::sessions::ensure_live;
use crate::sql::micros;

/// The text the trigram index holds for an event. NUL is indexed as a
/// space: the index only proposes candidates, every hit is checked on the real text.
fn index_text(e: &SessionEvent) -> String {
    fold_case(&e.message.search_text()).replace('\0', " ")
}

/// How appends keep the search index up to date: in batches of `batch`,
/// with `mark_hint` (the stored watermark when last read) saving the
/// watermark read on most appends.
pub(crate) struct Indexing<'a> {
    pub(crate) batch: i64,
    pub(crate) mark_hint: &'a AtomicI64,
}

impl Indexing<'_> {
    /// Indexes the pending events if a batch is full, judged by `rowid`,
    /// the last event row just written. A rowid at or below the hint means
    /// the newest rows were deleted since (by this process or another, or
    /// a commit rolled back) and the stored watermark came down with them:
    /// it is read again.
    pub(crate) fn after_insert(&self, tx: &Transaction<'_>, rowid: i64) -> Result<()> {
        let hint = self.mark_hint.load(Ordering::Relaxed);
        if rowid > hint && rowid - hint < self.batch {
            return Ok(());
        }
        let mark = index_pending(tx, self.batch)?;
        self.mark_hint.store(mark, Ordering::Relaxed);
        Ok(())
    }
}

/// The most not-yet-indexed events a search reads directly: with more
/// waiting, a search indexes them first ([`index_pending`]), so a search
/// scans a longer tail only when it cannot take the write lock, however
/// large the append batch.
pub(crate) const SEARCH_TAIL: i64 = 256;

/// How many events wait above the index watermark.
pub(crate) fn pending(conn: &Connection) -> Result<i64> {
    conn.prepare_cached(
        "SELECT (SELECT COALESCE(MAX(rowid), 0) FROM events) - indexed_through FROM fts_state",
    )
    .sql()?
    .query_row([], |r| r.get(0))
    .sql()
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

/// How many segments of one size the trigram index gathers before FTS5
/// merges them into one of the next size (FTS5's `automerge`, default 4).
/// Each merge rewrites every entry it takes, and an entry is rewritten
/// once per level it climbs: with 8, a session of 10,000 events has fewer
/// levels: over `bench --workload w1` (10,000 appends, `valgrind
/// --tool=callgrind`) merging fell from 33 % of the appends' instructions
/// to 24 %, and the appends' from 2.43 to 2.15 billion, while searches,
/// which read every segment, ran as fast (`--workload w4`).
pub(crate) const AUTOMERGE: i64 = 8;

/// Sets the index's merge policy ([`AUTOMERGE`]) where it differs. FTS5
/// keeps it in the database (`events_fts_config`), so every connection and
/// every earlier build writing the file follows it; no schema change.
pub(crate) fn configure_index(tx: &Transaction<'_>) -> Result<()> {
    let set: bool = tx
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM events_fts_config WHERE k = 'automerge' AND v = ?1)",
            [AUTOMERGE],
            |r| r.get(0),
        )
        .sql()?;
    if !set {
        tx.execute(
            "INSERT INTO events_fts (events_fts, rank) VALUES ('automerge', ?1)",
            [AUTOMERGE],
        )
        .sql()?;
    }
    Ok(())
}

/// An FTS5 query for a literal phrase: one quoted string, quotes doubled.
fn fts_phrase(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

/// The FTS5 expression that narrows `q` to candidates: every included
/// term of three or more characters as a phrase, AND-ed; `None` if no term
/// is that long (the trigram index cannot narrow shorter ones). In any-of
/// mode the phrases are OR-ed, and `None` if any term is shorter (an event
/// holding only that term is a match the index cannot propose).
fn fts_candidates(q: &ParsedQuery) -> Option<String> {
    let long = |t: &String| t.chars().count() >= 3;
    let terms: Vec<String> = q.index_terms().collect();
    let joiner = match q.match_terms() {
        MatchTerms::Any if !terms.iter().all(long) => return None,
        MatchTerms::Any => " OR ",
        _ => " AND ",
    };
    let phrases: Vec<String> = terms
        .iter()
        .filter(|t| long(t))
        .map(|t| fts_phrase(t))
        .collect();
    (!phrases.is_empty()).then(|| phrases.join(joiner))
}

/// The scope of a search as SQL over `events e` (with the query's `since`
/// bound), its parameters, and whether it spans sessions.
fn scope(
    conn: &Connection,
    q: &SearchQuery,
    now: DateTime<Utc>,
) -> Result<(String, Vec<SqlValue>, bool)> {
    let (mut sql, mut values, multi) = scope_of(conn, q, now)?;
    if let Some(since) = q.since_micros() {
        values.push(since.into());
        sql.push_str(&format!(" AND e.timestamp >= ?{}", values.len()));
    }
    Ok((sql, values, multi))
}

/// The scope of a search as SQL over `events e`, its parameters, and whether it spans sessions.
fn scope_of(
    conn: &Connection,
    q: &SearchQuery,
    now: DateTime<Utc>,
) -> Result<(String, Vec<SqlValue>, bool)> {
    Ok(match &q.scope {
        SearchScope::Session(id) => {
            ensure_live(conn, &id.parse::<SessionId>()?, now)?;
            (
                "e.session_id = ?1".to_owned(),
                vec![id.clone().into()],
                false,
            )
        }
        SearchScope::User { app, user_id } => (
            "e.session_id IN (SELECT id FROM sessions WHERE app = ?1 AND user_id = ?2 \
             AND (expires_at IS NULL OR expires_at > ?3))"
                .to_owned(),
            vec![
                app.clone().into(),
                user_id.clone().into(),
                micros(now).into(),
            ],
            true,
        ),
    })
}

/// Index candidates read before a search turns to reading the scope in
/// order instead (a term that occurs nearly everywhere).
const DENSE: usize = 2000;

/// The rowids the trigram index proposes for `expr`, or `None` when there
/// are more than [`DENSE`] (across the whole store).
fn index_candidates(conn: &Connection, expr: &str) -> Result<Option<Vec<i64>>> {
    let mut stmt = conn
        .prepare_cached("SELECT rowid FROM events_fts WHERE events_fts MATCH ?1 LIMIT ?2")
        .sql()?;
    let limit = i64::try_from(DENSE).unwrap_or(i64::MAX).saturating_add(1);
    let rowids: Vec<i64> = stmt
        .query_map(params![expr, limit], |r| r.get(0))
        .sql()?
        .collect::<rusqlite::Result<_>>()
        .sql()?;
    Ok((rowids.len() <= DENSE).then_some(rowids))
}

/// The candidate rows of `q` (session id, seq, body), in result order.
/// Selective queries: the index's candidates (looked up by rowid) plus the
/// not-yet-indexed tail (as a rule at most [`SEARCH_TAIL`] events), in one snapshot. A query
/// with no term long enough for the index, or one whose terms occur
/// nearly everywhere, reads the scope in order: the caller stops once it
/// has counted enough matches.
fn candidates_sql(
    conn: &Connection,
    scope_sql: &str,
    values: &mut Vec<SqlValue>,
    fts: Option<String>,
    order: &str,
) -> Result<String> {
    let Some(rowids) = fts
        .map(|expr| index_candidates(conn, &expr))
        .transpose()?
        .flatten()
    else {
        return Ok(format!(
            "SELECT e.session_id, e.seq, e.body FROM events e WHERE {scope_sql} ORDER BY {order}"
        ));
    };
    let list: Vec<String> = rowids.iter().map(i64::to_string).collect();
    values.push(format!("[{}]", list.join(",")).into());
    Ok(format!(
        "SELECT session_id, seq, body FROM ( \
           SELECT e.session_id, e.seq, e.body, e.timestamp FROM events e WHERE {tail_scope} \
             AND e.rowid IN (SELECT value FROM json_each(?{n})) \
           UNION ALL \
           SELECT e.session_id, e.seq, e.body, e.timestamp FROM events e WHERE {tail_scope} \
             AND e.rowid > (SELECT indexed_through FROM fts_state) \
         ) ORDER BY {order}",
        n = values.len(),
        order = order.replace("e.", ""),
        // `+` keeps the planner on the rowids (a short list, the short tail)
        // instead of walking the session's whole index.
        tail_scope = scope_sql.replacen("e.session_id", "+e.session_id", 1),
    ))
}

/// One page of hits for `q`, read in one snapshot. Chronological: the
/// candidates are checked in order, counted up to [`COUNT_PAST_PAGE`] past
/// the page (beyond that the total is a lower bound). Ranked: FTS5's BM25
/// order over the index (the caller indexed the tail first), every match counted.
pub(crate) fn search(
    conn: &Connection,
    q: &SearchQuery,
    now: DateTime<Utc>,
) -> Result<Page<SearchHit>> {
    let parsed = q.parsed()?;
    let (scope_sql, mut values, multi) = scope(conn, q, now)?;
    let fts = fts_candidates(&parsed);
    if q.mode == SearchMode::Ranked {
        if let Some(expr) = fts {
            return ranked_search(conn, q, &parsed, &scope_sql, values, expr);
        }
    }
    let order = if multi {
        "e.timestamp, e.session_id, e.seq"
    } else {
        "e.seq"
    };
    let sql = candidates_sql(conn, &scope_sql, &mut values, fts, order)?;
    let mut stmt = conn.prepare_cached(&sql).sql()?;
    let mut rows = stmt.query(params_from_iter(values)).sql()?;
    if q.mode == SearchMode::Ranked {
        // No term long enough for the index: rank the scanned matches in process.
        let mut matches = Vec::new();
        let mut unreadable = Vec::new();
        while let Some(row) = rows.next().sql()? {
            match checked_row(row, &parsed)? {
                Checked::Match(e) => matches.push(*e),
                Checked::Miss => {}
                Checked::Corrupt(id) => unreadable.push(id),
            }
        }
        let mut page = page_of_matches(q, &parsed, matches, None);
        page.unreadable = unreadable;
        return Ok(page);
    }
    let skip = q.page.saturating_mul(q.page_size);
    let stop_at = skip
        .saturating_add(q.page_size)
        .saturating_add(COUNT_PAST_PAGE);
    let mut page = Page::empty(q.page, q.page_size);
    let mut seen = 0usize;
    let mut exhausted = true;
    while let Some(row) = rows.next().sql()? {
        let e = match checked_row(row, &parsed)? {
            Checked::Match(e) => *e,
            Checked::Miss => continue,
            Checked::Corrupt(id) => {
                page.unreadable.push(id);
                continue;
            }
        };
        seen += 1;
        if seen > skip && page.items.len() < q.page_size {
            page.items.push(SearchHit::new(e, &parsed, None));
        } else if seen > skip {
            page.has_more = true;
        }
        if seen >= stop_at {
            exhausted = rows.next().sql()?.is_none();
            break;
        }
    }
    page.total = Some(if exhausted {
        Total::exact(seen)
    } else {
        Total::at_least(seen)
    });
    Ok(page)
}

/// A candidate row after the reference check.
enum Checked {
    Match(Box<SessionEvent>),
    Miss,
    /// A row that does not decode: named as `session/seq`.
    Corrupt(String),
}

fn checked_row(row: &rusqlite::Row<'_>, parsed: &ParsedQuery) -> Result<Checked> {
    let session_id: String = row.get(0).sql()?;
    let seq: i64 = row.get(1).sql()?;
    let body: String = row.get(2).sql()?;
    Ok(match decode_event(&session_id, seq, &body) {
        Ok(e) if parsed.matches(&e.message.search_text()) => Checked::Match(Box::new(e)),
        Ok(_) => Checked::Miss,
        Err(err) => {
            tracing::warn!(backend = BACKEND, session_id = %session_id, seq, kind = ?err.kind(), "unreadable event left out of search results");
            Checked::Corrupt(format!("{session_id}/{seq}"))
        }
    })
}

fn ranked_search(
    conn: &Connection,
    q: &SearchQuery,
    parsed: &ParsedQuery,
    scope_sql: &str,
    mut values: Vec<SqlValue>,
    expr: String,
) -> Result<Page<SearchHit>> {
    values.push(expr.into());
    let sql = format!(
        "SELECT e.session_id, e.seq, e.body, f.rank FROM events_fts f JOIN events e ON e.rowid = f.rowid \
         WHERE {scope_sql} AND events_fts MATCH ?{} ORDER BY f.rank, e.timestamp, e.session_id, e.seq",
        values.len(),
    );
    let mut stmt = conn.prepare_cached(&sql).sql()?;
    let mut rows = stmt.query(params_from_iter(values)).sql()?;
    let mut matches = Vec::new();
    let mut unreadable = Vec::new();
    while let Some(row) = rows.next().sql()? {
        let rank: f64 = row.get(3).sql()?;
        match checked_row(row, parsed)? {
            Checked::Match(e) => matches.push((-rank, *e)),
            Checked::Miss => {}
            Checked::Corrupt(id) => unreadable.push(id),
        }
    }
    let total = Total::exact(matches.len());
    let mut page = Page::paginate(matches, q.page, q.page_size)
        .map(|(score, e)| SearchHit::new(e, parsed, Some(score)));
    page.total = Some(total);
    page.unreadable = unreadable;
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_terms_of_three_characters_narrow() {
        let q = ParsedQuery::parse("my Locker \"4711\" -x").unwrap();
        assert_eq!(
            fts_candidates(&q).as_deref(),
            Some("\"locker\" AND \"4711\"")
        );
        assert_eq!(fts_candidates(&ParsedQuery::parse("ab c").unwrap()), None);
    }

    #[test]
    fn any_of_ors_the_phrases_when_every_term_narrows() {
        let any = |t: &str| ParsedQuery::parse(t).unwrap().matching(MatchTerms::Any);
        assert_eq!(
            fts_candidates(&any("Locker \"4711\" -x")).as_deref(),
            Some("\"locker\" OR \"4711\"")
        );
        assert_eq!(fts_candidates(&any("locker my")), None);
    }

    #[test]
    fn fts_phrase_doubles_quotes() {
        assert_eq!(fts_phrase("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
