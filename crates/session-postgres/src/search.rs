//! Search: a literal `LIKE` over case-folded text (a `pg_trgm` index) and ranked `tsvector` search.

use chrono::{DateTime, Utc};
use deadpool_postgres::Client;
use session_core::{
    contains_folded, fold_case, Page, SearchHit, SearchMode, SearchQuery, SearchScope, SessionId,
};
use tokio_postgres::Row;

use crate::error::R;
use crate::events::decode_event;
use crate::quiet::Quiet;
use crate::schema::Tables;
use crate::sessions;
use crate::sql::{like_pattern, micros, offset, Conditions};

fn hit(row: &Row, score: Option<f64>) -> R<SearchHit> {
    let session_id: String = row.try_get(0)?;
    let event = decode_event(&session_id, row.try_get(1)?, row.try_get(2)?)?;
    Ok(SearchHit {
        session_id,
        event,
        score,
    })
}

/// A page of hits for a checked query.
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
            // The query's check validated the id; a missing or expired session is NotFound.
            let id = SessionId::new(id.as_str())?;
            sessions::live(c, t, &id, now).await?;
            let m = w.next_mark(id.into_string());
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
    let Some(offset) = offset(q.page, q.page_size) else {
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
            items.push(hit(&row, Some(row.try_get(3)?))?);
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
        let hit = hit(&row, None)?;
        if exact || contains_folded(&hit.event.message.search_text(), &needle) {
            hits.push(hit);
        }
    }
    if exact {
        Ok(Page::from_overfetch(hits, q.page, q.page_size))
    } else {
        Ok(Page::paginate(hits, q.page, q.page_size))
    }
}
