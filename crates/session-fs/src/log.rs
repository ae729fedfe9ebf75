//! The JSON Lines event log (`events.jsonl`): appends, scans, recovery and the id index.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use session_core::plan::{EventBatch, Stored};
use session_core::{SessionError, SessionEvent, SessionId};

use crate::error::{io_err, Result, BACKEND};
use crate::files::{to_pretty, write_atomic};
use crate::format::{count, SessionFile};

/// The log of the session in `dir`.
pub(crate) fn path(dir: &Path) -> PathBuf {
    dir.join("events.jsonl")
}

/// Events as log lines: one JSON object per line, with its seq and without
/// its session id (the directory names the session).
pub(crate) fn encode<'a>(events: impl IntoIterator<Item = &'a SessionEvent>) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    for e in events {
        let written = if e.session_id.is_empty() {
            serde_json::to_writer(&mut buf, e)
        } else {
            let mut stored = e.clone();
            stored.session_id.clear();
            serde_json::to_writer(&mut buf, &stored)
        };
        written.map_err(|err| SessionError::serialization(format!("event {}", e.id), err))?;
        buf.push(b'\n');
    }
    Ok(buf)
}

/// Appends encoded lines to the log of the session in `dir` (fsynced if
/// `sync`); returns the bytes written.
pub(crate) fn append(dir: &Path, lines: &[u8], sync: bool) -> Result<u64> {
    if lines.is_empty() {
        return Ok(0);
    }
    let log = path(dir);
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .map_err(|e| io_err(&log, e))?;
    f.write_all(lines).map_err(|e| io_err(&log, e))?;
    if sync {
        f.sync_data().map_err(|e| io_err(&log, e))?;
    }
    Ok(count(lines.len()))
}

/// [`append`] for lines that commit themselves: when the write or its
/// fsync fails, the log is cut back to `before` bytes (best effort), so an
/// append reported as failed is not committed by its line later.
pub(crate) fn append_or_undo(dir: &Path, lines: &[u8], sync: bool, before: u64) -> Result<u64> {
    append(dir, lines, sync).inspect_err(|_| {
        let log = path(dir);
        let undone = OpenOptions::new()
            .write(true)
            .open(&log)
            .and_then(|f| f.set_len(before).and_then(|()| f.sync_all()));
        if let Err(e) = undone {
            tracing::warn!(backend = BACKEND, path = %log.display(), error = %e, "a failed append could not be cut from the log; the next writer takes it as committed");
        }
    })
}

/// Every acknowledged event of a session, in seq order.
pub(crate) fn archive(dir: &Path, file: &SessionFile) -> Result<Vec<SessionEvent>> {
    Ok(scan(&path(dir), file.log_bytes, &file.session.id, Some)?.events)
}

/// The events of `batch` the session already holds, read from its whole log.
pub(crate) fn stored(
    dir: &Path,
    file: &SessionFile,
    batch: &EventBatch,
) -> Result<HashMap<String, Stored>> {
    let wanted: HashSet<&str> = batch.ids().into_iter().collect();
    let mut found = HashMap::new();
    scan(&path(dir), file.log_bytes, &file.session.id, |e| {
        if wanted.contains(e.id.as_str()) {
            let held = Stored {
                seq: e.seq,
                tokens: e.token_estimate,
            };
            found.insert(e.id, held);
        }
        None
    })?;
    Ok(found)
}

/// One read of a log: the complete, parseable records up to a byte limit.
pub(crate) struct LogScan {
    pub(crate) events: Vec<SessionEvent>,
    /// Bytes of valid records.
    pub(crate) valid_bytes: u64,
}

/// Reads `events.jsonl` record by record, up to `limit` bytes, stopping at
/// the first incomplete or unreadable line (a torn tail). Streaming: one
/// line in memory at a time besides the decoded events kept by `keep`.
pub(crate) fn scan(
    path: &Path,
    limit: u64,
    session_id: &SessionId,
    mut keep: impl FnMut(SessionEvent) -> Option<SessionEvent>,
) -> Result<LogScan> {
    let mut out = LogScan {
        events: Vec::new(),
        valid_bytes: 0,
    };
    crate::log_read::forwards(path, 0, limit, session_id, |e, bytes| {
        out.valid_bytes = out.valid_bytes.saturating_add(bytes);
        if let Some(e) = keep(e) {
            out.events.push(e);
        }
        std::ops::ControlFlow::Continue(())
    })?;
    Ok(out)
}

/// Makes the log agree with its session file before a write: moves an
/// unacknowledged or torn tail aside (to `events.jsonl.torn`) and truncates
/// it, so a new append never lands after a fragment. Returns the session
/// file, corrected if acknowledged records were lost to outside damage.
pub(crate) fn recover(dir: &Path, mut file: SessionFile, sync: bool) -> Result<SessionFile> {
    let log = path(dir);
    let len = fs::metadata(&log).map_or(0, |m| m.len());
    if len == file.log_bytes {
        return Ok(file);
    }
    let id = file.session.id.clone();
    let keep_to = if len > file.log_bytes {
        file.log_bytes
    } else {
        // Acknowledged records are missing (the file was cut from outside): keep what is whole.
        let scan = scan(&log, len, &id, |_| None)?;
        tracing::warn!(backend = BACKEND, session_id = %id, "event log shorter than recorded; keeping its complete records");
        scan.valid_bytes
    };
    if len > keep_to {
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&log)
            .map_err(|e| io_err(&log, e))?;
        let mut tail = Vec::new();
        f.seek(SeekFrom::Start(keep_to))
            .map_err(|e| io_err(&log, e))?;
        f.read_to_end(&mut tail).map_err(|e| io_err(&log, e))?;
        let aside = dir.join("events.jsonl.torn");
        let mut a = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&aside)
            .map_err(|e| io_err(&aside, e))?;
        a.write_all(&tail).map_err(|e| io_err(&aside, e))?;
        a.write_all(b"\n").map_err(|e| io_err(&aside, e))?;
        f.set_len(keep_to).map_err(|e| io_err(&log, e))?;
        if sync {
            f.sync_all().map_err(|e| io_err(&log, e))?;
        }
        tracing::warn!(backend = BACKEND, session_id = %id, bytes = tail.len(), "moved an unacknowledged or torn log tail aside");
    }
    if keep_to != file.log_bytes {
        // Recount from what survived, as a log of its own: a process that
        // remembers the ids of the old one up to some length reads them
        // again (the bytes may now hold other records, e.g. a rewind's
        // rewritten log that a crash kept the session file from recording).
        let scan = scan(&log, keep_to, &id, Some)?;
        file.log_bytes = keep_to;
        file.log_generation = crate::format::fresh_generation();
        file.session.event_count = count(scan.events.len());
        file.session.event_bytes = SessionEvent::stored_bytes_of(&scan.events)?;
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

/// The fields of a log record the id index needs.
#[derive(Deserialize)]
struct IdOnly {
    id: String,
    seq: u64,
    #[serde(default)]
    token_estimate: u32,
}

/// The event ids a session holds, cached per session and extended
/// incrementally as its log grows (other processes' appends included).
#[derive(Default)]
pub(crate) struct IdCache {
    sessions: HashMap<String, (Extent, HashMap<String, Stored>)>,
}

/// How far a session's log is known: its generation and acknowledged bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Extent {
    /// [`SessionFile::log_generation`].
    pub(crate) generation: u64,
    /// [`SessionFile::log_bytes`].
    pub(crate) bytes: u64,
}

impl Extent {
    /// The extent of the log `file` describes.
    pub(crate) fn of(file: &SessionFile) -> Self {
        Self {
            generation: file.log_generation,
            bytes: file.log_bytes,
        }
    }
}

impl IdCache {
    /// The events of `batch` the session in `dir`, whose log stands at
    /// `extent`, already holds.
    pub(crate) fn stored(
        &mut self,
        dir: &Path,
        id: &SessionId,
        extent: Extent,
        batch: &EventBatch,
    ) -> Result<HashMap<String, Stored>> {
        let held = self.ids(dir, id, extent)?;
        Ok(batch
            .ids()
            .into_iter()
            .filter_map(|i| held.get(i).map(|s| (i.to_owned(), *s)))
            .collect())
    }

    /// The id → (seq, tokens) map for the log at `extent`: what is
    /// remembered, extended by the bytes appended since, or read again
    /// whole when the log was rewritten since (another generation) or is
    /// shorter than remembered.
    fn ids(
        &mut self,
        dir: &Path,
        id: &SessionId,
        extent: Extent,
    ) -> Result<&HashMap<String, Stored>> {
        let log = path(dir);
        let (known, ids) = self.sessions.entry(String::from(id)).or_default();
        if known.generation != extent.generation || known.bytes > extent.bytes {
            *known = Extent {
                generation: extent.generation,
                bytes: 0,
            };
            ids.clear();
        }
        let log_bytes = extent.bytes;
        if known.bytes < log_bytes {
            let mut f = File::open(&log).map_err(|e| io_err(&log, e))?;
            f.seek(SeekFrom::Start(known.bytes))
                .map_err(|e| io_err(&log, e))?;
            let mut reader = BufReader::new(f.take(log_bytes - known.bytes));
            let mut line = Vec::new();
            loop {
                line.clear();
                if reader
                    .read_until(b'\n', &mut line)
                    .map_err(|e| io_err(&log, e))?
                    == 0
                {
                    break;
                }
                if let Ok(r) = serde_json::from_slice::<IdOnly>(&line) {
                    let held = Stored {
                        seq: r.seq,
                        tokens: r.token_estimate,
                    };
                    ids.insert(r.id, held);
                }
            }
            known.bytes = log_bytes;
        }
        Ok(ids)
    }

    /// Records that a session's log now ends at `log_bytes` with these new
    /// events (the caller read the index up to the old end first).
    pub(crate) fn extend(
        &mut self,
        id: &SessionId,
        extent: Extent,
        new: impl IntoIterator<Item = (String, Stored)>,
    ) {
        let entry = self.sessions.entry(String::from(id)).or_default();
        entry.1.extend(new);
        entry.0 = extent;
    }

    /// Drops a session's index (its log was rewritten or removed).
    pub(crate) fn forget(&mut self, id: &SessionId) {
        self.sessions.remove(id.as_str());
    }
}
