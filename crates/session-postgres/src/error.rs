//! PostgreSQL and pool errors mapped onto [`SessionError`], in one place.
//!
//! The driver error stays the typed `source` of the `SessionError`, so a
//! caller reaches the SQLSTATE with
//! `e.source().and_then(|s| s.downcast_ref::<tokio_postgres::Error>())`.

use deadpool_postgres::PoolError;
use session_core::SessionError;
use tokio_postgres::error::SqlState;

/// The backend's name in errors and capabilities.
pub(crate) const BACKEND: &str = "postgres";

/// A failure inside an engine function: a driver error (kept whole, so the
/// transaction loop can retry serialization failures and drop broken
/// connections) or an already-typed error.
#[derive(Debug)]
pub(crate) enum StoreError {
    Pg(tokio_postgres::Error),
    Session(SessionError),
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        Self::Pg(e)
    }
}

impl From<SessionError> for StoreError {
    fn from(e: SessionError) -> Self {
        Self::Session(e)
    }
}

impl From<StoreError> for SessionError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Pg(e) => map_pg(e),
            StoreError::Session(e) => e,
        }
    }
}

/// The result of an engine function.
pub(crate) type R<T> = Result<T, StoreError>;

/// A lost race the same transaction may win when run again.
fn lost_race(code: &SqlState) -> bool {
    *code == SqlState::T_R_SERIALIZATION_FAILURE || *code == SqlState::T_R_DEADLOCK_DETECTED
}

/// Whether the same call may succeed later: a lost race (after the
/// transaction loop's own retries), a server shutting down or overloaded,
/// or a connection that failed without a server error.
fn transient(e: &tokio_postgres::Error) -> bool {
    match e.code() {
        Some(c) => {
            lost_race(c)
                || *c == SqlState::ADMIN_SHUTDOWN
                || *c == SqlState::CRASH_SHUTDOWN
                || *c == SqlState::CANNOT_CONNECT_NOW
                || *c == SqlState::TOO_MANY_CONNECTIONS
                || c.code().starts_with("08")
        }
        // No SQLSTATE and no server error: the connection itself failed.
        None => e.is_closed() || e.as_db_error().is_none(),
    }
}

/// Maps a driver error onto the kinds callers act on, keeping it as the source.
pub(crate) fn map_pg(e: tokio_postgres::Error) -> SessionError {
    if transient(&e) {
        SessionError::unavailable(BACKEND, e)
    } else {
        SessionError::backend(BACKEND, e)
    }
}

/// A connection the pool could not hand out (refused, timed out, TLS
/// refused, pool closed) is `Unavailable`; a driver error stays the
/// direct source.
pub(crate) fn map_pool(e: PoolError) -> SessionError {
    match e {
        PoolError::Backend(pg) => SessionError::unavailable(BACKEND, pg),
        other => SessionError::unavailable(BACKEND, other),
    }
}

/// Whether the transaction lost a serialization or deadlock race and may be run again.
pub(crate) fn retryable(e: &StoreError) -> bool {
    matches!(e, StoreError::Pg(pg) if pg.code().is_some_and(lost_race))
}

/// Whether the connection behind an error is unusable (closed, killed by the server).
fn connection_broken(e: &StoreError) -> bool {
    match e {
        StoreError::Pg(pg) => {
            pg.is_closed()
                || pg.as_db_error().is_none()
                || pg
                    .code()
                    .is_some_and(|c| *c == SqlState::ADMIN_SHUTDOWN || c.code().starts_with("08"))
        }
        StoreError::Session(_) => false,
    }
}

/// Finishes a pooled call: a connection the error shows broken leaves the pool.
pub(crate) fn settle<T>(client: deadpool_postgres::Client, result: R<T>) -> R<T> {
    if let Err(e) = &result {
        if connection_broken(e) {
            drop(deadpool_postgres::Object::take(client));
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use session_core::ErrorKind;

    /// Connecting to a port nobody listens on: `Unavailable`, the driver
    /// error reachable as the source, its text printed once by the report.
    #[tokio::test]
    async fn connection_refused_is_unavailable_with_the_driver_error_as_source() {
        let Err(e) = tokio_postgres::connect(
            "postgres://postgres@127.0.0.1:1/x?connect_timeout=2",
            tokio_postgres::NoTls,
        )
        .await
        else {
            panic!("port 1 accepted a PostgreSQL connection");
        };
        let text = e.to_string();
        let err = map_pg(e);
        assert_eq!(err.kind(), ErrorKind::Unavailable);
        assert!(err.is_retryable());
        assert_eq!(err.to_string(), "postgres backend unavailable");
        let source = std::error::Error::source(&err)
            .and_then(|s| s.downcast_ref::<tokio_postgres::Error>())
            .expect("the driver error is the source");
        assert!(source.code().is_none());
        assert!(err.report().to_string().contains(&text));
    }
}
