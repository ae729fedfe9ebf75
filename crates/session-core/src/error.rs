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
    },
    /// The storage engine failed in a way retrying will not fix.
    #[error("{backend} backend error: {source}")]
    Backend {
        /// Which backend ("sqlite", "redis", ...).
        backend: &'static str,
        /// The engine's error.
        #[source]
        source: BoxError,
    },
    /// Data could not be encoded, or stored data could not be decoded.
    #[error("serialization error in {context}: {source}")]
    Serialization {
        /// Where: which session, seq or field.
        context: String,
        /// The decoder's or encoder's error.
        #[source]
        source: BoxError,
    },
    /// The engine is unreachable, overloaded or out of disk space; the same
    /// call may succeed later.
    #[error("{backend} backend unavailable: {source}")]
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
    /// See [`SessionError::Conflict`].
    Conflict,
    /// See [`SessionError::InvalidInput`].
    InvalidInput,
    /// See [`SessionError::Backend`].
    Backend,
    /// See [`SessionError::Serialization`].
    Serialization,
    /// See [`SessionError::Unavailable`].
    Unavailable,
}

impl SessionError {
    /// The kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::NotFound { .. } => ErrorKind::NotFound,
            Self::AlreadyExists { .. } => ErrorKind::AlreadyExists,
            Self::Expired { .. } => ErrorKind::Expired,
            Self::Conflict { .. } => ErrorKind::Conflict,
            Self::InvalidInput { .. } => ErrorKind::InvalidInput,
            Self::Backend { .. } => ErrorKind::Backend,
            Self::Serialization { .. } => ErrorKind::Serialization,
            Self::Unavailable { .. } => ErrorKind::Unavailable,
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

    /// A retryable engine failure.
    pub fn unavailable(backend: &'static str, source: impl Into<BoxError>) -> Self {
        Self::Unavailable {
            backend,
            source: source.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
