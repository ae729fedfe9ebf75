//! SQL building blocks: numbered placeholders, stored-value conversions, `LIKE` patterns.

use chrono::{DateTime, Utc};
use session_core::SessionError;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use crate::error::R;

/// A time as stored: microseconds since the Unix epoch.
pub(crate) fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

/// A stored time; `what` names it if it is out of range (a corrupt row).
pub(crate) fn from_micros(
    us: i64,
    what: impl FnOnce() -> String,
) -> Result<DateTime<Utc>, SessionError> {
    DateTime::from_timestamp_micros(us).ok_or_else(|| {
        SessionError::serialization(what(), format!("timestamp {us} is out of range"))
    })
}

/// The expiry in column `idx` of a session row.
pub(crate) fn expiry(row: &Row, idx: usize, id: &str) -> R<Option<DateTime<Utc>>> {
    let at: Option<i64> = row.try_get(idx)?;
    Ok(at
        .map(|t| from_micros(t, || format!("session {id} expires_at")))
        .transpose()?)
}

/// The assignments that move a session's activity time to at least the
/// micros in parameter `param`: `updated_at`, and `active_at`, its whole
/// seconds, which the activity indexes hold (schema 7), computed from the
/// same value so the two never disagree.
pub(crate) fn touch_sql(param: &str) -> String {
    format!(
        "updated_at = GREATEST(updated_at, {param}), \
         active_at = GREATEST(updated_at, {param}) / 1000000"
    )
}

/// A stored count (never negative when written).
pub(crate) fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// A seq, version or token count as PostgreSQL stores it; seqs and
/// versions are bounded by `MAX_SEQ`/`MAX_VERSION`, far inside `BIGINT`.
pub(crate) fn sql_int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A count of rows as a `BIGINT`.
pub(crate) fn sql_len(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Builds `WHERE` conditions with numbered placeholders.
pub(crate) struct Conditions {
    pub(crate) sql: String,
    values: Vec<Box<dyn ToSql + Sync + Send>>,
}

impl Conditions {
    pub(crate) fn new(sql: String) -> Self {
        Self {
            sql,
            values: Vec::new(),
        }
    }

    /// Appends ` AND {cond} $n` with `v` as `$n`.
    pub(crate) fn push(&mut self, cond: &str, v: impl ToSql + Sync + Send + 'static) {
        let m = self.next_mark(v);
        self.sql.push_str(&format!(" AND {cond} {m}"));
    }

    /// Binds `v` to the next placeholder and returns its mark (`$n`).
    pub(crate) fn next_mark(&mut self, v: impl ToSql + Sync + Send + 'static) -> String {
        self.values.push(Box::new(v));
        format!("${}", self.values.len())
    }

    pub(crate) fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.values
            .iter()
            .map(|v| -> &(dyn ToSql + Sync) { v.as_ref() })
            .collect()
    }
}

/// The row offset of a page, or `None` when it is past anything storable.
pub(crate) fn offset(page: usize, page_size: usize) -> Option<i64> {
    page.checked_mul(page_size)
        .and_then(|o| i64::try_from(o).ok())
}

/// A `LIKE` pattern matching `text` literally anywhere (`\` escapes).
pub(crate) fn like_pattern(text: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_pattern_escapes_wildcards_and_backslash() {
        assert_eq!(like_pattern("100%_a\\b"), "%100\\%\\_a\\\\b%");
    }
}
