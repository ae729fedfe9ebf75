//! Whole-file primitives: atomic rewrites, JSON files and advisory locks.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use session_core::SessionError;

use crate::error::{io_err, Result, BACKEND};

/// Writes `bytes` to `path` atomically: a temp file in the same directory,
/// fsync, rename over the target, fsync of the directory.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], sync: bool) -> Result<()> {
    let dir = path.parent().ok_or_else(|| {
        SessionError::backend(BACKEND, format!("{} has no parent", path.display()))
    })?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id()
    ));
    {
        let mut f = File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
        f.write_all(bytes).map_err(|e| io_err(&tmp, e))?;
        if sync {
            f.sync_all().map_err(|e| io_err(&tmp, e))?;
        }
    }
    fs::rename(&tmp, path).map_err(|e| io_err(path, e))?;
    if sync {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Fsyncs a directory, so renames and new entries in it survive a power loss.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_err(dir, e))
}

/// Reads a JSON file; `None` if there is none. A file that does not parse
/// is a `Serialization` error naming `what` and the path.
pub(crate) fn read_json<T: for<'de> Deserialize<'de>>(
    path: &Path,
    what: &str,
) -> Result<Option<T>> {
    match fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| SessionError::serialization(format!("{what} ({})", path.display()), e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(path, e)),
    }
}

/// `v` as pretty JSON with a final newline: how every JSON file of the store is written.
pub(crate) fn to_pretty<T: Serialize>(v: &T) -> Result<Vec<u8>> {
    let mut out =
        serde_json::to_vec_pretty(v).map_err(|e| SessionError::serialization("session file", e))?;
    out.push(b'\n');
    Ok(out)
}

/// An advisory lock on a file, released on drop.
pub(crate) struct Lock(File);

impl Lock {
    /// Takes the exclusive lock on `path` (created if needed), waiting for other holders.
    pub(crate) fn exclusive(path: &Path) -> Result<Self> {
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| io_err(path, e))?;
        f.lock().map_err(|e| io_err(path, e))?;
        Ok(Self(f))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}
