//! File-system errors mapped onto [`SessionError`], in one place.

use std::fmt;
use std::path::{Path, PathBuf};

use session_core::SessionError;

/// The backend's name in errors and capabilities.
pub(crate) const BACKEND: &str = "fs";

/// What the store's operations return.
pub(crate) type Result<T> = session_core::Result<T>;

/// An I/O failure on one file: the path, with the OS error kept as the source.
#[derive(Debug)]
pub(crate) struct FileError {
    path: PathBuf,
    disk_full: bool,
    source: std::io::Error,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.disk_full {
            // The commit point was not moved, so nothing is half-written; the
            // same call succeeds once there is room again.
            write!(
                f,
                "the disk is full at {}; free space, then retry",
                self.path.display()
            )
        } else {
            write!(f, "I/O on {}", self.path.display())
        }
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Maps an I/O error on `path`: interruptions, time-outs and a full disk are
/// `Unavailable` (retrying may succeed), anything else is `Backend`.
pub(crate) fn io_err(path: &Path, e: std::io::Error) -> SessionError {
    use std::io::ErrorKind as K;
    let kind = e.kind();
    let disk_full = matches!(kind, K::StorageFull | K::QuotaExceeded);
    let err = FileError {
        path: path.to_path_buf(),
        disk_full,
        source: e,
    };
    if disk_full || matches!(kind, K::WouldBlock | K::Interrupted | K::TimedOut) {
        SessionError::unavailable(BACKEND, err)
    } else {
        SessionError::backend(BACKEND, err)
    }
}

/// A blocking task that panicked or was cancelled.
pub(crate) fn join_err(e: tokio::task::JoinError) -> SessionError {
    SessionError::backend(BACKEND, e)
}
