//! The files: layout, atomic rewrites, the JSON Lines log and its recovery.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use session_core::{Session, SessionError, SessionEvent, SharedState, StateMap};

use crate::BACKEND;

pub(crate) type Result<T> = session_core::Result<T>;

#[allow(clippy::needless_pass_by_value)] // used as `map_err(|e| io_err(path, e))`
pub(crate) fn io_err(what: impl std::fmt::Display, e: std::io::Error) -> SessionError {
    use std::io::ErrorKind as K;
    let msg = format!("{what}: {e}");
    match e.kind() {
        K::WouldBlock | K::Interrupted | K::TimedOut => SessionError::unavailable(BACKEND, msg),
        // The commit point was not moved, so nothing is half-written; the
        // same call succeeds once there is room again.
        K::StorageFull | K::QuotaExceeded => SessionError::unavailable(
            BACKEND,
            format!("the disk is full; free space, then retry ({msg})"),
        ),
        _ => SessionError::backend(BACKEND, msg),
    }
}

/// The session file: `sessions/<id>/session.json`, pretty-printed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SessionFile {
    /// The session, counters, version and session-scope state included.
    pub(crate) session: Session,
    /// The state it was created with (rewind replays from it).
    pub(crate) initial_state: StateMap,
    /// The highest seq ever assigned.
    pub(crate) last_seq: u64,
    /// Bytes of `events.jsonl` that hold acknowledged events; anything past
    /// it is an unacknowledged or torn write and is moved aside.
    pub(crate) log_bytes: u64,
    /// The context: these seqs in this order, then every event with a seq above `through`.
    pub(crate) context: ContextFile,
}

/// The context of a session, compactly.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct ContextFile {
    /// Seqs set by the last replace, in context order.
    pub(crate) seqs: Vec<u64>,
    /// Events with a seq above this joined the context by append.
    pub(crate) through: u64,
}

impl ContextFile {
    /// The context's seqs, given the archive's seqs in order.
    pub(crate) fn resolve(&self, archive: &[u64]) -> Vec<u64> {
        let mut out = self.seqs.clone();
        out.extend(archive.iter().copied().filter(|s| *s > self.through));
        out
    }
}

/// Paths under the root. Ids are validated in core (no separators, no
/// `.`/`..`); every path is still built from one checked component and
/// checked to stay under the root, and symlinks are refused.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub(crate) root: PathBuf,
}

impl Layout {
    pub(crate) fn new(root: &Path) -> Result<Self> {
        fs::create_dir_all(root.join("sessions")).map_err(|e| io_err(root.display(), e))?;
        fs::create_dir_all(root.join("shared").join("app"))
            .map_err(|e| io_err(root.display(), e))?;
        fs::create_dir_all(root.join("shared").join("user"))
            .map_err(|e| io_err(root.display(), e))?;
        let root = root.canonicalize().map_err(|e| io_err(root.display(), e))?;
        Ok(Self { root })
    }

    /// One path component from an id, refusing anything that could leave the directory.
    fn component(id: &str) -> Result<&str> {
        if id.is_empty()
            || id == "."
            || id == ".."
            || id.contains(['/', '\\', '\0'])
            || Path::new(id).is_absolute()
        {
            return Err(SessionError::invalid(
                "id",
                format!("{id:?} cannot name a file"),
            ));
        }
        Ok(id)
    }

    /// A path under the root that must not be (or pass through) a symlink.
    fn confined(&self, path: PathBuf) -> Result<PathBuf> {
        let mut probe = self.root.clone();
        let rel = path
            .strip_prefix(&self.root)
            .map_err(|_| SessionError::invalid("path", "outside the store root"))?
            .to_path_buf();
        for part in rel.components() {
            probe.push(part);
            if let Ok(meta) = fs::symlink_metadata(&probe) {
                if meta.file_type().is_symlink() {
                    return Err(SessionError::invalid(
                        "path",
                        format!(
                            "{} is a symlink; the file store does not follow links",
                            probe.display()
                        ),
                    ));
                }
            }
        }
        Ok(path)
    }

    /// One path component from a user id or app name: every byte outside
    /// `[A-Za-z0-9._:-]` becomes `%XX`, so `slack/T1`, `ada@example.com` or
    /// `../x` stay one file name inside the root. Names made only of the
    /// old id characters keep their old file names (stores written before
    /// the wider alphabet read unchanged); `%` never occurs in a valid name,
    /// so the encoding is one to one.
    fn name_component(name: &str) -> Result<String> {
        let mut out = String::with_capacity(name.len());
        for b in name.bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-') {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        Self::component(&out)?;
        Ok(out)
    }

    pub(crate) fn session_dir(&self, id: &str) -> Result<PathBuf> {
        let dir = self.root.join("sessions").join(Self::component(id)?);
        self.confined(dir)
    }

    pub(crate) fn sessions_dir(&self) -> PathBuf {
        self.root.join("sessions")
    }

    pub(crate) fn app_state(&self, app: &str) -> Result<PathBuf> {
        let p = self
            .root
            .join("shared")
            .join("app")
            .join(format!("{}.json", Self::name_component(app)?));
        self.confined(p)
    }

    pub(crate) fn user_state(&self, app: &str, user: &str) -> Result<PathBuf> {
        let user = if user == session_core::GROUP_USER {
            "_group".to_owned()
        } else {
            Self::name_component(user)?
        };
        let dir = self
            .root
            .join("shared")
            .join("user")
            .join(Self::name_component(app)?);
        let p = dir.join(format!("{user}.json"));
        self.confined(p)
    }

    pub(crate) fn shared_lock(&self) -> PathBuf {
        self.root.join("shared").join(".lock")
    }
}

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
        let mut f = File::create(&tmp).map_err(|e| io_err(tmp.display(), e))?;
        f.write_all(bytes).map_err(|e| io_err(tmp.display(), e))?;
        if sync {
            f.sync_all().map_err(|e| io_err(tmp.display(), e))?;
        }
    }
    fs::rename(&tmp, path).map_err(|e| io_err(path.display(), e))?;
    if sync {
        sync_dir(dir)?;
    }
    Ok(())
}

pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_err(dir.display(), e))
}

pub(crate) fn read_json<T: for<'de> Deserialize<'de>>(
    path: &Path,
    what: &str,
) -> Result<Option<T>> {
    match fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| SessionError::serialization(format!("{what} ({})", path.display()), e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(path.display(), e)),
    }
}

/// An advisory lock on a file, released on drop.
pub(crate) struct Lock(File);

impl Lock {
    pub(crate) fn exclusive(path: &Path) -> Result<Self> {
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| io_err(path.display(), e))?;
        f.lock().map_err(|e| io_err(path.display(), e))?;
        Ok(Self(f))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// One read of a log: the complete, parseable records up to a byte limit.
pub(crate) struct LogScan {
    pub(crate) events: Vec<SessionEvent>,
    /// Bytes of valid records.
    pub(crate) valid_bytes: u64,
    /// Whether something past the valid records (a torn or unreadable tail) was found.
    pub(crate) fragment: bool,
}

/// Reads `events.jsonl` record by record, up to `limit` bytes, stopping at
/// the first incomplete or unreadable line (a torn tail). Streaming: one
/// line in memory at a time besides the decoded events kept by `keep`.
pub(crate) fn scan_log(
    path: &Path,
    limit: u64,
    session_id: &str,
    mut keep: impl FnMut(SessionEvent) -> Option<SessionEvent>,
) -> Result<LogScan> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(LogScan {
                events: Vec::new(),
                valid_bytes: 0,
                fragment: false,
            })
        }
        Err(e) => return Err(io_err(path.display(), e)),
    };
    let mut reader = BufReader::new(file.take(limit));
    let mut line = Vec::new();
    let mut out = LogScan {
        events: Vec::new(),
        valid_bytes: 0,
        fragment: false,
    };
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| io_err(path.display(), e))?;
        if n == 0 {
            break;
        }
        if line.last() != Some(&b'\n') {
            out.fragment = true;
            break;
        }
        let Ok(mut e) = serde_json::from_slice::<SessionEvent>(&line[..line.len() - 1]) else {
            out.fragment = true;
            break;
        };
        session_id.clone_into(&mut e.session_id);
        out.valid_bytes = out
            .valid_bytes
            .saturating_add(u64::try_from(n).unwrap_or(u64::MAX));
        if let Some(e) = keep(e) {
            out.events.push(e);
        }
    }
    Ok(out)
}

/// Makes the log agree with its session file before a write: moves an
/// unacknowledged or torn tail aside (to `events.jsonl.torn`) and truncates
/// it, so a new append never lands after a fragment. Returns the session
/// file, corrected if acknowledged records were lost to outside damage.
pub(crate) fn recover(dir: &Path, mut file: SessionFile, sync: bool) -> Result<SessionFile> {
    let log = dir.join("events.jsonl");
    let len = fs::metadata(&log).map_or(0, |m| m.len());
    if len == file.log_bytes {
        return Ok(file);
    }
    let id = file.session.id.clone();
    let keep_to = if len > file.log_bytes {
        file.log_bytes
    } else {
        // Acknowledged records are missing (the file was cut from outside): keep what is whole.
        let scan = scan_log(&log, len, &id, |_| None)?;
        tracing::warn!(backend = BACKEND, session_id = %id, "event log shorter than recorded; keeping its complete records");
        scan.valid_bytes
    };
    if len > keep_to {
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&log)
            .map_err(|e| io_err(log.display(), e))?;
        let mut tail = Vec::new();
        f.seek(SeekFrom::Start(keep_to))
            .map_err(|e| io_err(log.display(), e))?;
        f.read_to_end(&mut tail)
            .map_err(|e| io_err(log.display(), e))?;
        let aside = dir.join("events.jsonl.torn");
        let mut a = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&aside)
            .map_err(|e| io_err(aside.display(), e))?;
        a.write_all(&tail).map_err(|e| io_err(aside.display(), e))?;
        a.write_all(b"\n").map_err(|e| io_err(aside.display(), e))?;
        f.set_len(keep_to).map_err(|e| io_err(log.display(), e))?;
        if sync {
            f.sync_all().map_err(|e| io_err(log.display(), e))?;
        }
        tracing::warn!(backend = BACKEND, session_id = %id, bytes = tail.len(), "moved an unacknowledged or torn log tail aside");
    }
    if keep_to != file.log_bytes {
        // Recount from what survived.
        let scan = scan_log(&log, keep_to, &id, Some)?;
        file.log_bytes = keep_to;
        file.session.event_count = u64::try_from(scan.events.len()).unwrap_or(u64::MAX);
        let seqs: Vec<u64> = scan.events.iter().map(|e| e.seq).collect();
        let ctx: HashSet<u64> = file.context.resolve(&seqs).into_iter().collect();
        file.context.seqs.retain(|s| seqs.contains(s));
        file.session.context_tokens = scan
            .events
            .iter()
            .filter(|e| ctx.contains(&e.seq))
            .map(|e| u64::from(e.token_estimate))
            .sum();
        write_atomic(&dir.join("session.json"), &to_pretty(&file)?, sync)?;
    }
    Ok(file)
}

pub(crate) fn to_pretty<T: Serialize>(v: &T) -> Result<Vec<u8>> {
    let mut out =
        serde_json::to_vec_pretty(v).map_err(|e| SessionError::serialization("session file", e))?;
    out.push(b'\n');
    Ok(out)
}

/// The two fields of a log record the id cache needs.
#[derive(Deserialize)]
struct IdOnly {
    id: String,
    seq: u64,
}

/// The event ids a session holds, cached per session and extended
/// incrementally as its log grows (other processes' appends included).
#[derive(Default)]
pub(crate) struct IdCache {
    sessions: HashMap<String, (u64, HashMap<String, u64>)>,
}

impl IdCache {
    /// The id → seq map for a log of `log_bytes` bytes.
    pub(crate) fn ids(
        &mut self,
        dir: &Path,
        id: &str,
        log_bytes: u64,
    ) -> Result<&mut HashMap<String, u64>> {
        let log = dir.join("events.jsonl");
        let (cached_bytes, ids) = self.sessions.entry(id.to_owned()).or_default();
        if *cached_bytes > log_bytes {
            *cached_bytes = 0;
            ids.clear();
        }
        if *cached_bytes < log_bytes {
            let mut f = File::open(&log).map_err(|e| io_err(log.display(), e))?;
            f.seek(SeekFrom::Start(*cached_bytes))
                .map_err(|e| io_err(log.display(), e))?;
            let mut reader = BufReader::new(f.take(log_bytes - *cached_bytes));
            let mut line = Vec::new();
            loop {
                line.clear();
                if reader
                    .read_until(b'\n', &mut line)
                    .map_err(|e| io_err(log.display(), e))?
                    == 0
                {
                    break;
                }
                if let Ok(r) = serde_json::from_slice::<IdOnly>(&line) {
                    ids.insert(r.id, r.seq);
                }
            }
            *cached_bytes = log_bytes;
        }
        Ok(ids)
    }

    /// Records that a session's log now ends at `log_bytes` with these new ids.
    pub(crate) fn extend(
        &mut self,
        id: &str,
        log_bytes: u64,
        new: impl IntoIterator<Item = (String, u64)>,
    ) {
        let entry = self.sessions.entry(id.to_owned()).or_default();
        entry.1.extend(new);
        entry.0 = log_bytes;
    }

    pub(crate) fn forget(&mut self, id: &str) {
        self.sessions.remove(id);
    }
}

/// Reads a shared-state file.
pub(crate) fn read_shared(path: &Path) -> Result<StateMap> {
    Ok(read_json::<StateMap>(path, "shared state")?.unwrap_or_default())
}

/// The shared scopes of one (app, user).
pub(crate) fn shared_state(layout: &Layout, app: &str, user: &str) -> Result<SharedState> {
    Ok(SharedState {
        app: read_shared(&layout.app_state(app)?)?,
        user: read_shared(&layout.user_state(app, user)?)?,
    })
}
