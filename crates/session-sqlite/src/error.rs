//! rusqlite errors mapped onto `SessionError`, in one place.

use std::fmt;
use std::path::PathBuf;

use session_core::SessionError;

/// The backend's name in errors and capabilities.
pub(crate) const BACKEND: &str = "sqlite";

pub(crate) type Result<T> = session_core::Result<T>;

/// Maps a rusqlite error onto the error kinds callers act on; the rusqlite
/// error stays the source (its SQLite result code reachable through it).
pub(crate) fn map_err(e: rusqlite::Error) -> SessionError {
    use rusqlite::ErrorCode;
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) =>
        {
            SessionError::unavailable(BACKEND, e)
        }
        // Nothing was written (the transaction rolled back); the same call
        // succeeds once there is room again.
        rusqlite::Error::SqliteFailure(f, _) if f.code == ErrorCode::DiskFull => {
            SessionError::unavailable(BACKEND, DiskFull(e))
        }
        _ => SessionError::backend(BACKEND, e),
    }
}

/// A failed read of a session row: a column of the wrong type is
/// corruption of that session (`Serialization`), anything else an engine error.
pub(crate) fn corrupt_or(id: &str, e: rusqlite::Error) -> SessionError {
    match e {
        rusqlite::Error::InvalidColumnType(..) | rusqlite::Error::FromSqlConversionFailure(..) => {
            SessionError::serialization(format!("session {id} row"), e)
        }
        other => map_err(other),
    }
}

/// A database file that could not be opened: unavailable, naming the file.
pub(crate) fn open_failed(path: PathBuf, e: rusqlite::Error) -> SessionError {
    SessionError::unavailable(BACKEND, OpenFailed { path, source: e })
}

/// `.sql()`: a rusqlite result as a `session_core` result.
pub(crate) trait SqlResult<T> {
    /// Maps the error with [`map_err`].
    fn sql(self) -> Result<T>;
}

impl<T> SqlResult<T> for rusqlite::Result<T> {
    fn sql(self) -> Result<T> {
        self.map_err(map_err)
    }
}

/// The disk filled up during a write; the rusqlite error is the source.
#[derive(Debug)]
struct DiskFull(rusqlite::Error);

impl fmt::Display for DiskFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the disk is full; free space, then retry")
    }
}

impl std::error::Error for DiskFull {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// A database file that could not be opened; the rusqlite error is the source.
#[derive(Debug)]
struct OpenFailed {
    path: PathBuf,
    source: rusqlite::Error,
}

impl fmt::Display for OpenFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot open SQLite database {}", self.path.display())
    }
}

impl std::error::Error for OpenFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_full_keeps_the_sqlite_error_as_its_source() {
        let sqlite = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
            None,
        );
        let e = map_err(sqlite);
        assert!(e.is_retryable());
        let report = format!("{}", e.report());
        assert!(report.contains("the disk is full"), "{report}");
        let cause = std::error::Error::source(&e)
            .and_then(std::error::Error::source)
            .and_then(|c| c.downcast_ref::<rusqlite::Error>());
        assert_eq!(
            cause.and_then(rusqlite::Error::sqlite_error_code),
            Some(rusqlite::ErrorCode::DiskFull)
        );
    }
}
