//! Search: every term a `LIKE` over folded text (one `pg_trgm` index),
//! checked with the reference matcher; chronological or by `ts_rank`.

use chrono::{DateTime, Utc};
use deadpool_postgres::Client;
use session_core::search::COUNT_PAST_PAGE;
use session_core::{
    MatchTerms, Page, ParsedQuery, SearchHit, SearchMode, SearchQuery, SearchScope, SessionId,
    Total,
};
use tokio_postgres::Row;

use crate::error::R;
use crate::events::decode_event;
use crate::quiet::Quiet;
use crate::sessions;
use crate::sql::{like_pattern, micros, offset, Conditions};
use crate::tables::Tables;

fn hit(row: &Row, parsed: &ParsedQuery, score: Option<f64>) -> R<SearchHit> {
    let session_id: String = row.try_get(0)?;
    let event = decode_event(&session_id, row.try_get(1)?, row.try_get(2)?)?;
    Ok(SearchHit::new(event, parsed, score))
}

/// The `WHERE` of a search: scope, the `since` bound, one `LIKE` per
/// included term (AND-ed, or OR-ed in any-of mode) and one `NOT LIKE` per
/// excluded term on the folded text (exact, NUL aside); whether it spans
/// sessions.
async fn conditions(
    c: &Client,
    t: &Tables,
    q: &SearchQuery,
    parsed: &ParsedQuery,
    now: DateTime<Utc>,
    select: &str,
) -> R<(Conditions, bool)> {
    let mut w = Conditions::new(format!("SELECT {select} FROM {} e WHERE ", t.events));
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
    if let Some(since) = q.since_micros() {
        w.push("ts >=", since);
    }
    let likes: Vec<String> = parsed
        .index_terms()
        .map(|term| {
            let m = w.next_mark(like_pattern(&term));
            format!("search_text LIKE {m} ESCAPE '\\'")
        })
        .collect();
    let joiner = match parsed.match_terms() {
        MatchTerms::Any => " OR ",
        _ => " AND ",
    };
    w.sql.push_str(&format!(" AND ({})", likes.join(joiner)));
    for term in parsed.exclude() {
        if !term.contains('\0') {
            let m = w.next_mark(like_pattern(term));
            w.sql
                .push_str(&format!(" AND search_text NOT LIKE {m} ESCAPE '\\'"));
        }
    }
    Ok((w, multi))
}

/// A page of hits for a checked query. Where no term holds NUL (stored as
/// a space) the SQL filter is exact and the page is cut in SQL; otherwise
/// every candidate is checked in process.
pub(crate) async fn search(
    c: &Client,
    t: &Tables,
    q: &SearchQuery,
    now: DateTime<Utc>,
) -> R<Page<SearchHit>> {
    let parsed = q.parsed()?;
    let ranked = q.mode == SearchMode::Ranked;
    let select = if ranked {
        "session_id, seq, body, ts_rank(to_tsvector('simple', left(search_text, 100000)), \
         to_tsquery('simple', __TSQUERY__))::float8 AS rank"
    } else {
        "session_id, seq, body"
    };
    let (mut w, multi) = conditions(c, t, q, &parsed, now, select).await?;
    if ranked {
        let m = w.next_mark(ts_query(&parsed));
        w.sql = w.sql.replacen("__TSQUERY__", &m, 1);
    }
    let order = match (ranked, multi) {
        (true, _) => "rank DESC, ts, session_id, seq",
        (false, true) => "ts, session_id, seq",
        (false, false) => "seq",
    };
    let exact = !parsed
        .include()
        .iter()
        .chain(parsed.exclude())
        .any(|t| t.contains('\0'));
    if !exact {
        w.sql.push_str(&format!(" ORDER BY {order}"));
        let rows = c.fetch(&w.sql, &w.params()).await?;
        let mut matches = Vec::new();
        for row in rows {
            let score = if ranked { Some(row.try_get(3)?) } else { None };
            let hit = hit(&row, &parsed, score)?;
            if parsed.matches(&hit.event.message.search_text()) {
                matches.push(hit);
            }
        }
        let total = Total::exact(matches.len());
        let mut page = Page::paginate(matches, q.page, q.page_size);
        page.total = Some(total);
        return Ok(page);
    }
    let Some(skip) = offset(q.page, q.page_size) else {
        return Ok(Page::empty(q.page, q.page_size));
    };
    let filter_sql = w.sql.clone();
    w.sql.push_str(&format!(
        " ORDER BY {order} LIMIT {} OFFSET {skip}",
        q.page_size + 1
    ));
    let rows = c.fetch(&w.sql, &w.params()).await?;
    let mut items = Vec::with_capacity(rows.len());
    for row in rows {
        let score = if ranked { Some(row.try_get(3)?) } else { None };
        items.push(hit(&row, &parsed, score)?);
    }
    let mut page = Page::from_overfetch(items, q.page, q.page_size);
    let before = q.page.saturating_mul(q.page_size);
    page.total = Some(if !page.has_more && !page.items.is_empty() {
        Total::exact(before.saturating_add(page.items.len()))
    } else {
        // Count, but no further than a bounded distance past the page.
        let largest = usize::try_from(i64::MAX - 1).unwrap_or(usize::MAX);
        let cap = before
            .saturating_add(q.page_size)
            .saturating_add(COUNT_PAST_PAGE)
            .min(largest);
        // The filter without its select list (nor the rank's parameter, the last one).
        let from = filter_sql.find(" FROM ").unwrap_or(0);
        let sql = format!(
            "SELECT count(*) FROM (SELECT 1{} LIMIT {}) AS m",
            &filter_sql[from..],
            cap.saturating_add(1)
        );
        let params = w.params();
        let used = params.len().saturating_sub(usize::from(ranked));
        let n: i64 = c.fetch_one(&sql, &params[..used]).await?.try_get(0)?;
        let n = usize::try_from(n).unwrap_or(0);
        if n > cap {
            Total::at_least(cap)
        } else {
            Total::exact(n)
        }
    });
    Ok(page)
}

/// The terms for `ts_rank`: each word of each required term as a prefix
/// match, OR-ed (ranking only; matching is the `LIKE`s).
fn ts_query(parsed: &ParsedQuery) -> String {
    let words: Vec<String> = parsed
        .include()
        .iter()
        .flat_map(|t| t.split(|c: char| !c.is_alphanumeric()))
        .filter(|w| !w.is_empty())
        .map(|w| format!("'{}':*", w.replace('\'', "''")))
        .collect();
    words.join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_terms_are_prefix_words_or_ed() {
        let q = ParsedQuery::parse("Locker \"gate b\" 4711 -x").unwrap();
        assert_eq!(ts_query(&q), "'locker':* | 'gate':* | 'b':* | '4711':*");
        assert_eq!(ts_query(&ParsedQuery::parse("%%").unwrap()), "");
    }
}
