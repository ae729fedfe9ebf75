//! Input validation done once, in core, before any backend sees the input.

use crate::error::{Result, SessionError};

/// The longest id accepted, in bytes.
pub const MAX_ID_LEN: usize = 128;

/// Checks an identifier: 1..=128 bytes of `[A-Za-z0-9._:-]`, and not `.` or `..`.
///
/// Session ids, app names, user ids, resolution keys, event ids and
/// invocation ids all follow this rule, so no backend ever has to store a
/// path separator, a glob character or a quote inside an id.
///
/// ```
/// use session_core::validate_id;
/// assert!(validate_id("session id", "telegram:chat-123").is_ok());
/// assert!(validate_id("session id", "../etc").is_err());
/// ```
pub fn validate_id(field: &str, id: &str) -> Result<()> {
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
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
    {
        return Err(SessionError::invalid(
            field,
            format!("contains {bad:?}; only ASCII letters, digits and `.` `_` `:` `-` are allowed"),
        ));
    }
    Ok(())
}

/// Checks an (app, user) pair; the group owner [`crate::GROUP_USER`] is accepted.
pub fn validate_owner(app: &str, user_id: &str) -> Result<()> {
    validate_id("app", app)?;
    if user_id == crate::session::GROUP_USER {
        Ok(())
    } else {
        validate_id("user id", user_id)
    }
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

/// Size limits every repository enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Largest serialized event accepted, in bytes (default 4 MiB).
    pub max_event_bytes: usize,
    /// Largest page size accepted (default 1000).
    pub max_page_size: usize,
    /// Most events accepted in one append batch (default 10,000).
    pub max_batch_events: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_event_bytes: 4 * 1024 * 1024,
            max_page_size: 1000,
            max_batch_events: 10_000,
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

    /// No size limits: for re-writing data a store already accepted (imports, migrations).
    pub fn unlimited() -> Self {
        Self {
            max_event_bytes: usize::MAX,
            max_page_size: 1000,
            max_batch_events: usize::MAX,
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
