//! Input validation done once, in core, before any backend sees the input.

use crate::error::{Result, SessionError};

/// The longest id accepted, in bytes.
pub const MAX_ID_LEN: usize = 128;

/// The punctuation a session, event or invocation id may hold besides ASCII letters and digits.
const ID_PUNCTUATION: &[char] = &['.', '_', ':', '-'];

/// The punctuation a user id, app name or resolution key may hold besides
/// ASCII letters and digits: the id set plus what chat platforms and
/// identity providers use (`ada@example.com`, `slack/T123/C456`, `a+b`,
/// `team|bot`, `#general`).
const NAME_PUNCTUATION: &[char] = &['.', '_', ':', '-', '@', '+', '/', '|', '#'];

/// Checks an identifier: 1..=128 bytes of `[A-Za-z0-9._:-]`, and not `.` or `..`.
///
/// Session ids, event ids, invocation ids and branches follow this rule, so
/// no backend ever has to store a path separator, a glob character or a
/// quote inside one. User ids, app names and resolution keys take a wider
/// set: see [`validate_name`].
///
/// ```
/// use session_core::validate_id;
/// assert!(validate_id("session id", "telegram:chat-123").is_ok());
/// assert!(validate_id("session id", "../etc").is_err());
/// ```
pub fn validate_id(field: &str, id: &str) -> Result<()> {
    check_chars(field, id, ID_PUNCTUATION)
}

/// Checks a user id, app name or resolution key: 1..=128 bytes of ASCII
/// letters, digits and `. _ : - @ + / | #`, and not `.` or `..`.
///
/// Backends encode these (the file store escapes `/` and the other new
/// characters in file names; Redis and Elasticsearch escape their key
/// separators), so a name can never leave a store's root or act as a glob.
///
/// ```
/// use session_core::validate_name;
/// assert!(validate_name("user id", "ada@example.com").is_ok());
/// assert!(validate_name("key", "slack/T123/C456").is_ok());
/// assert!(validate_name("user id", "a*b").is_err());
/// ```
pub fn validate_name(field: &str, name: &str) -> Result<()> {
    check_chars(field, name, NAME_PUNCTUATION)
}

fn check_chars(field: &str, id: &str, punctuation: &[char]) -> Result<()> {
    if id.is_empty() {
        return Err(SessionError::invalid(field, "must not be empty"));
    }
    if id.len() > MAX_ID_LEN {
        return Err(SessionError::invalid(
            field,
            format!(
                "is {} bytes long; at most {MAX_ID_LEN} are allowed",
                id.len()
            ),
        ));
    }
    if id == "." || id == ".." {
        return Err(SessionError::invalid(field, "must not be `.` or `..`"));
    }
    if let Some(bad) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || punctuation.contains(c)))
    {
        let allowed: Vec<String> = punctuation.iter().map(|c| format!("`{c}`")).collect();
        return Err(SessionError::invalid(
            field,
            format!(
                "contains {bad:?}; only ASCII letters, digits and {} are allowed",
                allowed.join(" ")
            ),
        ));
    }
    Ok(())
}

/// Checks a branch path such as `orch.researcher`: dot-separated non-empty segments of id characters.
pub fn validate_branch(branch: &str) -> Result<()> {
    validate_id("branch", branch)?;
    if branch.split('.').any(str::is_empty) {
        return Err(SessionError::invalid(
            "branch",
            "must be dot-separated non-empty segments, like `orch.researcher`",
        ));
    }
    Ok(())
}

/// The highest seq a session can hold: 2^53 - 1.
///
/// Far inside `i64` (SQL `BIGINT`, Elasticsearch `long`) and exact as an
/// IEEE double (Redis Lua numbers, JSON readers in every language); at a
/// million appends a second it lasts 285 years. Imports past it are
/// refused, and an append that would pass it is `InvalidInput`.
pub const MAX_SEQ: u64 = (1 << 53) - 1;

/// The highest version a session can reach: 2^53 - 1, for the same reasons as [`MAX_SEQ`].
pub const MAX_VERSION: u64 = (1 << 53) - 1;

/// The seq after `last`, or `InvalidInput` once [`MAX_SEQ`] is reached.
///
/// ```
/// use session_core::{next_seq, MAX_SEQ};
/// assert_eq!(next_seq(0).unwrap(), 1);
/// assert!(next_seq(MAX_SEQ).is_err());
/// ```
pub fn next_seq(last: u64) -> Result<u64> {
    check_seq_room(last, 1)?;
    Ok(last.saturating_add(1))
}

/// Checks that `count` new events fit after seq `last` without passing
/// [`MAX_SEQ`]; a write checks this before it changes anything.
pub fn check_seq_room(last: u64, count: usize) -> Result<()> {
    let count = u64::try_from(count).unwrap_or(u64::MAX);
    match last.checked_add(count) {
        Some(end) if end <= MAX_SEQ => Ok(()),
        _ => Err(SessionError::invalid(
            "seq",
            format!("the session has used every seq up to the maximum of {MAX_SEQ}"),
        )),
    }
}

/// The version after `version`, or `InvalidInput` once [`MAX_VERSION`] is reached.
pub fn next_version(version: u64) -> Result<u64> {
    match version.checked_add(1) {
        Some(next) if next <= MAX_VERSION => Ok(next),
        _ => Err(SessionError::invalid(
            "version",
            format!("the session has reached the maximum version of {MAX_VERSION}"),
        )),
    }
}

/// Reads a seq or version a store kept as a signed integer (SQL `BIGINT`,
/// a Redis hash field): a negative value or one past `max` is a
/// `Serialization` error naming `what`, never a wrapped or clamped number.
pub fn stored_counter(raw: i64, max: u64, what: impl FnOnce() -> String) -> Result<u64> {
    match u64::try_from(raw) {
        Ok(n) if n <= max => Ok(n),
        _ => Err(SessionError::serialization(
            what(),
            format!("stored value {raw} is outside 0..={max}"),
        )),
    }
}

/// Size limits every repository enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Largest serialized event accepted, in bytes (default 4 MiB), by an
    /// append, a context replace and an import alike.
    pub max_event_bytes: usize,
    /// Largest page size accepted (default 1000).
    pub max_page_size: usize,
    /// Most events accepted in one append batch (default 10,000).
    pub max_batch_events: usize,
    /// Quota: most events one session may hold; an append past it is
    /// `QuotaExceeded` and writes nothing (default: none).
    pub max_session_events: Option<u64>,
    /// Quota: most bytes one session's events may take as stored (see
    /// `Session::event_bytes`); an append past it is `QuotaExceeded` and
    /// writes nothing (default: none).
    pub max_session_bytes: Option<u64>,
    /// Quota: most live sessions one user may hold in an app; a create or
    /// an import of a new session past it is `QuotaExceeded` (default: none).
    pub max_user_sessions: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_event_bytes: 4 * 1024 * 1024,
            max_page_size: 1000,
            max_batch_events: 10_000,
            max_session_events: None,
            max_session_bytes: None,
            max_user_sessions: None,
        }
    }
}

impl Limits {
    /// Sets the largest serialized event accepted.
    pub fn with_max_event_bytes(mut self, bytes: usize) -> Self {
        self.max_event_bytes = bytes;
        self
    }

    /// Sets the most events accepted in one append batch.
    pub fn with_max_batch_events(mut self, n: usize) -> Self {
        self.max_batch_events = n.max(1);
        self
    }

    /// Sets the quota of events per session (checked atomically with each
    /// append, and on each import's whole session; context replaces are
    /// not counted against it).
    pub fn with_max_session_events(mut self, n: u64) -> Self {
        self.max_session_events = Some(n);
        self
    }

    /// Sets the quota of bytes per session: the stored size of its events
    /// (checked atomically with each append, and on each import's whole
    /// session; context replaces are not counted against it, but what they
    /// write is counted).
    pub fn with_max_session_bytes(mut self, bytes: u64) -> Self {
        self.max_session_bytes = Some(bytes);
        self
    }

    /// Sets the quota of live sessions per user in an app (checked
    /// atomically with each create and each import of a new session).
    pub fn with_max_user_sessions(mut self, n: u64) -> Self {
        self.max_user_sessions = Some(n);
        self
    }

    /// No size limits: for re-writing data a store already accepted
    /// (encoding an import's bodies, migrations); an import is still held
    /// to the store's own limits by [`crate::plan::ImportPlan`].
    pub fn unlimited() -> Self {
        Self {
            max_event_bytes: usize::MAX,
            max_page_size: 1000,
            max_batch_events: usize::MAX,
            max_session_events: None,
            max_session_bytes: None,
            max_user_sessions: None,
        }
    }

    /// Sets the largest page size accepted.
    pub fn with_max_page_size(mut self, size: usize) -> Self {
        self.max_page_size = size.max(1);
        self
    }

    /// Checks a requested page size against `1..=max_page_size`.
    pub fn check_page_size(&self, size: usize) -> Result<()> {
        if size == 0 {
            return Err(SessionError::invalid("page_size", "must be at least 1"));
        }
        if size > self.max_page_size {
            return Err(SessionError::invalid(
                "page_size",
                format!("{size} is over the maximum of {}", self.max_page_size),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_hostile_ids() {
        let long = "a".repeat(129);
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "a\0b",
            "a b",
            "*",
            "é",
            long.as_str(),
        ] {
            let err = validate_id("session id", bad).expect_err(bad);
            assert_eq!(err.kind(), crate::ErrorKind::InvalidInput, "{bad:?}");
        }
        assert!(validate_id("session id", &"a".repeat(128)).is_ok());
        assert!(validate_id("session id", "A-z_0.9:x").is_ok());
    }

    #[test]
    fn names_take_what_chat_platforms_use_and_nothing_that_escapes() {
        for good in [
            "ada@example.com",
            "slack/T123/C456",
            "a+b",
            "team|bot",
            "#general",
        ] {
            assert!(validate_name("user id", good).is_ok(), "{good:?}");
            assert!(validate_id("session id", good).is_err(), "{good:?}");
        }
        for bad in [
            "", ".", "..", "a*b", "a?b", "a b", "a\\b", "a%b", "{a}", "a\0b", "é",
        ] {
            let err = validate_name("user id", bad).expect_err(bad);
            assert_eq!(err.kind(), crate::ErrorKind::InvalidInput, "{bad:?}");
        }
    }

    #[test]
    fn seq_and_version_stop_at_the_documented_maximum() {
        assert_eq!(next_seq(MAX_SEQ - 1).unwrap(), MAX_SEQ);
        for last in [MAX_SEQ, u64::MAX, i64::MAX as u64, 1 << 63] {
            assert_eq!(
                next_seq(last).unwrap_err().kind(),
                crate::ErrorKind::InvalidInput
            );
            assert_eq!(
                next_version(last).unwrap_err().kind(),
                crate::ErrorKind::InvalidInput
            );
        }
        assert!(i64::try_from(MAX_SEQ).is_ok());
    }

    #[test]
    fn branch_segments_must_be_non_empty() {
        assert!(validate_branch("orch.researcher").is_ok());
        assert!(validate_branch("orch..x").is_err());
        assert!(validate_branch(".orch").is_err());
    }

    #[test]
    fn page_size_bounds() {
        let l = Limits::default();
        assert!(l.check_page_size(0).is_err());
        assert!(l.check_page_size(1000).is_ok());
        assert!(l.check_page_size(1_000_000_000).is_err());
    }
}
