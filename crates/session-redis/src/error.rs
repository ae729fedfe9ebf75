//! Redis errors onto the contract's kinds, in one place.

use redis::RedisError;
use session_core::{BoxError, SessionError};

/// The backend's name in errors and capabilities.
pub(crate) const BACKEND: &str = "redis";

/// A driver error: connection loss, timeouts and cluster reconfiguration
/// are `Unavailable` (retry later); anything else is `Backend`. The Redis
/// error stays the source, so its kind and code remain reachable.
pub(crate) fn map_err(e: RedisError) -> SessionError {
    if e.is_io_error()
        || e.is_connection_dropped()
        || e.is_timeout()
        || e.is_connection_refusal()
        || e.is_cluster_error()
    {
        SessionError::unavailable(BACKEND, e)
    } else {
        SessionError::backend(BACKEND, e)
    }
}

/// A reply of a script or command that does not have the expected shape.
pub(crate) fn bad_reply(what: &str, e: impl Into<BoxError>) -> SessionError {
    SessionError::serialization(format!("redis reply to {what}"), e)
}

/// A stored field of session `id` that does not decode.
pub(crate) fn corrupt(id: &str, field: &str, source: impl Into<BoxError>) -> SessionError {
    SessionError::serialization(format!("session {id} {field}"), source)
}

/// A URL or node list the driver refuses.
pub(crate) fn bad_url(e: RedisError) -> SessionError {
    let reason = match e.detail() {
        Some(detail) => format!("not a Redis URL ({detail})"),
        None => "not a Redis URL".to_owned(),
    };
    SessionError::invalid_because("store URL", reason, e)
}

/// A write that lost the compare-and-swap on every attempt.
pub(crate) fn too_contended(id: &str, attempts: usize) -> SessionError {
    SessionError::unavailable(
        BACKEND,
        format!("session {id} is too contended: its head moved during each of {attempts} attempts to write"),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn a_bad_url_is_invalid_input_that_keeps_the_client_error() {
        let err = redis::Client::open("http://not-redis")
            .map(|_| ())
            .map_err(bad_url);
        let err = err.unwrap_err();
        assert_eq!(err.kind(), session_core::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("not a Redis URL"), "{err}");
        assert!(
            err.source().is_some(),
            "the client's error is kept as the cause"
        );
    }
}
