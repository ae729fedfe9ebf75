//! Stored-value conversions: times as microseconds, counters and offsets as
//! SQLite integers.

use chrono::{DateTime, Utc};
use session_core::SessionError;

use crate::error::Result;

/// A time as the schema stores it: microseconds since the Unix epoch.
pub(crate) fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

/// A stored time, or a `Serialization` error naming `what`.
pub(crate) fn from_micros(us: i64, what: &str) -> Result<DateTime<Utc>> {
    DateTime::from_timestamp_micros(us).ok_or_else(|| {
        SessionError::serialization(what.to_owned(), format!("timestamp {us} is out of range"))
    })
}

/// A seq, version or token count as SQLite stores it; values are bounded
/// by `MAX_SEQ`/`MAX_VERSION`, far inside `i64`.
pub(crate) fn sql_int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The SQL `OFFSET` of page `page` of `size` rows; `None` past `i64`.
pub(crate) fn sql_offset(page: usize, size: usize) -> Option<i64> {
    page.checked_mul(size).and_then(|o| i64::try_from(o).ok())
}

/// The context position after `pos`, or a typed error instead of SQLite's
/// silent switch to floating point past `i64::MAX`.
pub(crate) fn next_position(pos: i64) -> Result<i64> {
    pos.checked_add(1).ok_or_else(|| {
        SessionError::invalid("context", "the context position counter is exhausted")
    })
}
