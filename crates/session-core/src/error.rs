//! The one error type of agent-session.

use std::error::Error as StdError;

/// A boxed error kept as the source of a [`SessionError`].
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// Result alias used throughout agent-session.
pub type Result<T, E = SessionError> = std::result::Result<T, E>;

/// Every failure a repository or service reports.
///
/// Match on [`SessionError::kind`] to decide what to do; the variants carry
/// the context (which id, which field, which backend) and keep their source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The thing does not exist, has expired for reads, or belongs to another owner.
    #[error("{what} not found: {id}")]
    NotFound {
        /// What was looked up ("session", "invocation", ...).
        what: &'static str,
        /// The id that was looked up.
        id: String,
    },
    /// A create named an id that is already taken.
    #[error("{what} already exists: {id}")]
    AlreadyExists {
        /// What was created.
        what: &'static str,
        /// The id that is taken.
        id: String,
    },
    /// A write targeted a session whose expiry has passed.
    #[error("session {id} has expired; create or resolve a new session")]
    Expired {
        /// The expired session.
        id: String,
    },
    /// A write targeted a session that was ended (archived); `reopen` it first.
    #[error("session {id} has ended; reopen it to write to it, or resolve a new session")]
    SessionEnded {
        /// The ended session.
        id: String,
    },
    /// A write would take a session or a user past a quota the store enforces; nothing was written.
    #[error("quota exceeded on {id}: {requested} {quota} is over the limit of {limit}")]
    QuotaExceeded {
        /// The session (or the user) the quota is counted on.
        id: String,
        /// Which quota ("events per session", "sessions per user").
        quota: &'static str,
        /// The limit.
        limit: u64,
        /// What the write would have made it.
        requested: u64,
    },
    /// An optimistic version check failed: someone else wrote in between.
    #[error("version conflict on session {id}: expected {expected}, found {actual}")]
    Conflict {
        /// The session.
        id: String,
        /// The version the caller expected.
        expected: u64,
        /// The version the store holds.
        actual: u64,
    },
    /// The caller passed something the library will not store or run.
    #[error("invalid {field}: {reason}")]
    InvalidInput {
        /// The offending field or argument.
        field: String,
        /// Why it was rejected.
        reason: String,
        /// The parser's error, when a library refused the value.
        #[source]
        source: Option<BoxError>,
    },
    /// The backend does not support this operation (see [`crate::Capabilities`]).
    #[error("{backend} backend does not support {operation}")]
    Unsupported {
        /// Which backend.
        backend: &'static str,
        /// What was asked for ("ranked search", ...).
        operation: &'static str,
    },
    /// The storage engine failed in a way retrying will not fix.
    #[error("{backend} backend error")]
    Backend {
        /// Which backend ("sqlite", "redis", ...).
        backend: &'static str,
        /// The engine's error.
        #[source]
        source: BoxError,
    },
    /// Data could not be encoded, or stored data could not be decoded.
    #[error("serialization error in {context}")]
    Serialization {
        /// Where: which session, seq or field.
        context: String,
        /// The decoder's or encoder's error.
        #[source]
        source: BoxError,
    },
    /// Encrypted data could not be opened: the key it names is not in the
    /// keyring, or the ciphertext does not open with it (a wrong key, or
    /// damaged data). Nothing is returned in its place.
    #[error("cannot decrypt {context}: {reason}")]
    Encryption {
        /// What was being opened: which session, field or key.
        context: String,
        /// Why it did not open.
        reason: String,
    },
    /// A served store refused the caller: no API key, or one it does not
    /// hold. (A key that may not see a session gets `NotFound`, as for a
    /// session that does not exist.)
    #[error("unauthorized: {reason}")]
    Unauthorized {
        /// Why the server refused.
        reason: String,
    },
    /// The engine is unreachable, overloaded or out of disk space; the same
    /// call may succeed later.
    #[error("{backend} backend unavailable")]
    Unavailable {
        /// Which backend.
        backend: &'static str,
        /// The connection or overload error.
        #[source]
        source: BoxError,
    },
}

/// The kind of a [`SessionError`], for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// See [`SessionError::NotFound`].
    NotFound,
    /// See [`SessionError::AlreadyExists`].
    AlreadyExists,
    /// See [`SessionError::Expired`].
    Expired,
    /// See [`SessionError::SessionEnded`].
    SessionEnded,
    /// See [`SessionError::QuotaExceeded`].
    QuotaExceeded,
    /// See [`SessionError::Conflict`].
    Conflict,
    /// See [`SessionError::InvalidInput`].
    InvalidInput,
    /// See [`SessionError::Unsupported`].
    Unsupported,
    /// See [`SessionError::Backend`].
    Backend,
    /// See [`SessionError::Serialization`].
    Serialization,
    /// See [`SessionError::Unavailable`].
    Unavailable,
    /// See [`SessionError::Encryption`].
    Encryption,
    /// See [`SessionError::Unauthorized`].
    Unauthorized,
}

/// Every kind with its wire name.
const KIND_NAMES: [(ErrorKind, &str); 13] = [
    (ErrorKind::NotFound, "not_found"),
    (ErrorKind::AlreadyExists, "already_exists"),
    (ErrorKind::Expired, "expired"),
    (ErrorKind::SessionEnded, "session_ended"),
    (ErrorKind::QuotaExceeded, "quota_exceeded"),
    (ErrorKind::Conflict, "conflict"),
    (ErrorKind::InvalidInput, "invalid_input"),
    (ErrorKind::Unsupported, "unsupported"),
    (ErrorKind::Backend, "backend"),
    (ErrorKind::Serialization, "serialization"),
    (ErrorKind::Unavailable, "unavailable"),
    (ErrorKind::Encryption, "encryption"),
    (ErrorKind::Unauthorized, "unauthorized"),
];

impl ErrorKind {
    /// The kind's wire name (`not_found`, `conflict`, ...).
    pub fn as_str(self) -> &'static str {
        KIND_NAMES
            .iter()
            .find(|(k, _)| *k == self)
            .map_or("backend", |(_, name)| name)
    }

    /// The kind a wire name names, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        KIND_NAMES.iter().find(|(_, n)| *n == name).map(|(k, _)| *k)
    }
}

impl From<std::convert::Infallible> for SessionError {
    fn from(never: std::convert::Infallible) -> Self {
        match never {}
    }
}

impl SessionError {
    /// The kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::NotFound { .. } => ErrorKind::NotFound,
            Self::AlreadyExists { .. } => ErrorKind::AlreadyExists,
            Self::Expired { .. } => ErrorKind::Expired,
            Self::SessionEnded { .. } => ErrorKind::SessionEnded,
            Self::QuotaExceeded { .. } => ErrorKind::QuotaExceeded,
            Self::Conflict { .. } => ErrorKind::Conflict,
            Self::InvalidInput { .. } => ErrorKind::InvalidInput,
            Self::Unsupported { .. } => ErrorKind::Unsupported,
            Self::Backend { .. } => ErrorKind::Backend,
            Self::Serialization { .. } => ErrorKind::Serialization,
            Self::Unavailable { .. } => ErrorKind::Unavailable,
            Self::Encryption { .. } => ErrorKind::Encryption,
            Self::Unauthorized { .. } => ErrorKind::Unauthorized,
        }
    }

    /// Whether the same call may succeed if retried (connection loss, overload).
    ///
    /// Appends are idempotent by event id, so retrying an append with the same
    /// events is always safe.
    pub fn is_retryable(&self) -> bool {
        matches!(self.kind(), ErrorKind::Unavailable)
    }

    /// A session that does not exist (or is hidden from this caller).
    pub fn session_not_found(id: impl Into<String>) -> Self {
        Self::NotFound {
            what: "session",
            id: id.into(),
        }
    }

    /// Bad input in `field` because of `reason`.
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::InvalidInput {
            field: field.into(),
            reason: reason.into(),
            source: None,
        }
    }

    /// Bad input in `field` because of `reason`, as `source` (a parser's
    /// error) found; the source's text stays in the cause chain, not in `reason`.
    pub fn invalid_because(
        field: impl Into<String>,
        reason: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        Self::InvalidInput {
            field: field.into(),
            reason: reason.into(),
            source: Some(source.into()),
        }
    }

    /// Stored or sent data that failed to encode or decode.
    pub fn serialization(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Serialization {
            context: context.into(),
            source: source.into(),
        }
    }

    /// A non-retryable engine failure.
    pub fn backend(backend: &'static str, source: impl Into<BoxError>) -> Self {
        Self::Backend {
            backend,
            source: source.into(),
        }
    }

    /// An operation `backend` does not support.
    pub fn unsupported(backend: &'static str, operation: &'static str) -> Self {
        Self::Unsupported { backend, operation }
    }

    /// This error and each distinct cause, one per line (see [`ErrorReport`]).
    pub fn report(&self) -> ErrorReport<'_> {
        ErrorReport(self)
    }

    /// A retryable engine failure.
    pub fn unavailable(backend: &'static str, source: impl Into<BoxError>) -> Self {
        Self::Unavailable {
            backend,
            source: source.into(),
        }
    }
}

/// Prints an error and its causes once each: the error's own message, then
/// each cause of its `source()` chain on its own line, skipping a cause
/// whose text the line before already holds (drivers often repeat their
/// inner error in their own message).
///
/// ```
/// use session_core::SessionError;
/// let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
/// let e = SessionError::unavailable("postgres", io);
/// assert_eq!(e.report().to_string(), "postgres backend unavailable\n  caused by: connection refused");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ErrorReport<'a>(pub &'a (dyn StdError + 'static));

impl std::fmt::Display for ErrorReport<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut previous = self.0.to_string();
        f.write_str(&previous)?;
        let mut cause = self.0.source();
        while let Some(c) = cause {
            let text = c.to_string();
            if !text.is_empty() && !previous.contains(&text) {
                write!(f, "\n  caused by: {text}")?;
            }
            previous = text;
            cause = c.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_never_repeats_its_source_and_the_report_prints_each_cause_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("error connecting to server: {0}")]
        struct Driver(#[source] std::io::Error);
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let e = SessionError::unavailable("postgres", Driver(io));
        assert_eq!(e.to_string(), "postgres backend unavailable");
        assert_eq!(
            e.report().to_string(),
            "postgres backend unavailable\n  caused by: error connecting to server: Connection refused"
        );
        assert!(
            std::error::Error::source(&e).is_some(),
            "the cause stays reachable"
        );
    }

    #[test]
    fn unsupported_is_its_own_kind() {
        let e = SessionError::unsupported("memory", "ranked search");
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert_eq!(
            e.to_string(),
            "memory backend does not support ranked search"
        );
    }

    #[test]
    fn only_unavailable_is_retryable() {
        assert!(SessionError::unavailable("redis", "connection reset").is_retryable());
        assert!(!SessionError::backend("redis", "WRONGTYPE").is_retryable());
        assert!(!SessionError::session_not_found("s1").is_retryable());
        assert!(!SessionError::invalid("id", "empty").is_retryable());
    }

    #[test]
    fn messages_name_the_field_and_id() {
        let e = SessionError::invalid("session id", "must not be empty");
        assert_eq!(e.to_string(), "invalid session id: must not be empty");
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        let e = SessionError::Conflict {
            id: "s1".into(),
            expected: 3,
            actual: 4,
        };
        assert_eq!(
            e.to_string(),
            "version conflict on session s1: expected 3, found 4"
        );
    }
}
