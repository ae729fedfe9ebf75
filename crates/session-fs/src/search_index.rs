//! The search index of a session: a trigram index of its log, kept in
//! process, caught up from the log as it grows, and saved beside the log
//! (`search.idx`) so a new process does not re-read the whole log.
//!
//! The saved file records how many log bytes it covers and the last bytes
//! of that stretch: a log that was rewritten since (a rewind, a repair, a
//! file cut from outside) no longer ends that way there, and the index is
//! rebuilt from the log. A missing, damaged or foreign file is rebuilt too.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use session_core::search::{push_varint, read_varint, trigrams_of};
use session_core::{SessionEvent, SessionId, TrigramIndex};

use crate::error::{io_err, Result, BACKEND};
use crate::files::write_atomic;
use crate::format::count;
use crate::log;

/// The file beside the log.
fn path(dir: &Path) -> PathBuf {
    dir.join("search.idx")
}

/// Deletes the saved index of the session in `dir`, if there is one.
pub(crate) fn discard(dir: &Path) -> Result<()> {
    let file = path(dir);
    match std::fs::remove_file(&file) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_err(&file, e)),
        _ => Ok(()),
    }
}

const MAGIC: &[u8; 8] = b"ASIDX01\n";
/// Log bytes before the covered end that the file keeps to recognise the log.
const TAIL: usize = 64;
/// The file is rewritten once this many events were indexed since it was last saved.
const SAVE_EVERY: usize = 1000;
/// Sessions whose index stays in memory at once.
const CACHED_SESSIONS: usize = 64;

/// One session's index and where each indexed event starts in the log.
#[derive(Debug, Default)]
pub(crate) struct LogIndex {
    pub(crate) trigrams: TrigramIndex,
    /// (seq, byte offset of its line), ascending.
    offsets: Vec<(u64, u64)>,
    /// Log bytes indexed.
    covered: u64,
    /// The last log bytes before `covered`.
    tail: Vec<u8>,
    /// Events indexed since the file was saved.
    unsaved: usize,
    last_use: u64,
}

impl LogIndex {
    /// Where event `seq`'s line starts.
    pub(crate) fn offset_of(&self, seq: u64) -> Option<u64> {
        self.offsets
            .binary_search_by_key(&seq, |(s, _)| *s)
            .ok()
            .and_then(|i| self.offsets.get(i))
            .map(|(_, o)| *o)
    }

    /// Events indexed.
    pub(crate) fn len(&self) -> usize {
        self.offsets.len()
    }

    /// Whether the log (of `log_bytes` acknowledged bytes) still holds what this index covers.
    fn fits(&self, log_path: &Path, log_bytes: u64) -> Result<bool> {
        if self.covered > log_bytes {
            return Ok(false);
        }
        Ok(read_tail(log_path, self.covered)? == self.tail)
    }

    /// Indexes the log from `covered` up to `log_bytes`.
    fn catch_up(&mut self, log_path: &Path, id: &SessionId, log_bytes: u64) -> Result<()> {
        if self.covered >= log_bytes {
            return Ok(());
        }
        let mut f = File::open(log_path).map_err(|e| io_err(log_path, e))?;
        f.seek(SeekFrom::Start(self.covered))
            .map_err(|e| io_err(log_path, e))?;
        let mut reader = BufReader::new(f.take(log_bytes - self.covered));
        let mut line = Vec::new();
        let mut at = self.covered;
        loop {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| io_err(log_path, e))?;
            if n == 0 || line.last() != Some(&b'\n') {
                break;
            }
            match serde_json::from_slice::<SessionEvent>(&line) {
                Ok(e) => {
                    self.trigrams
                        .add_trigrams(e.seq, &trigrams_of(&e.message.search_text()));
                    self.offsets.push((e.seq, at));
                    self.unsaved += 1;
                }
                Err(err) => {
                    tracing::warn!(backend = BACKEND, session_id = %id, offset = at, error = %err, "unreadable log line left out of the search index");
                }
            }
            at = at.saturating_add(count(n));
        }
        self.offsets.sort_unstable();
        self.covered = at;
        self.tail = read_tail(log_path, at)?;
        Ok(())
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.offsets.len() * 64);
        out.extend_from_slice(MAGIC);
        push_varint(&mut out, self.covered);
        push_varint(&mut out, count(self.tail.len()));
        out.extend_from_slice(&self.tail);
        push_varint(&mut out, count(self.offsets.len()));
        let mut prev = 0;
        for (seq, off) in &self.offsets {
            push_varint(&mut out, seq.wrapping_sub(prev));
            push_varint(&mut out, *off);
            prev = *seq;
        }
        let lists: Vec<(u64, &[u64])> = self.trigrams.postings().collect();
        push_varint(&mut out, count(lists.len()));
        for (t, list) in lists {
            push_varint(&mut out, t);
            push_varint(&mut out, count(list.len()));
            let mut prev = 0;
            for s in list {
                push_varint(&mut out, s.wrapping_sub(prev));
                prev = *s;
            }
        }
        out
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let mut r = Reader(bytes.strip_prefix(MAGIC)?);
        let covered = r.next()?;
        let tail_len = usize::try_from(r.next()?).ok()?;
        let tail = r.take(tail_len)?.to_vec();
        let n = r.len()?;
        let mut offsets = Vec::with_capacity(n);
        let mut seq = 0u64;
        for _ in 0..n {
            seq = seq.wrapping_add(r.next()?);
            offsets.push((seq, r.next()?));
        }
        let lists = r.len()?;
        let mut postings = Vec::with_capacity(lists);
        for _ in 0..lists {
            let t = r.next()?;
            let len = r.len()?;
            let mut list = Vec::with_capacity(len);
            let mut s = 0u64;
            for _ in 0..len {
                s = s.wrapping_add(r.next()?);
                list.push(s);
            }
            postings.push((t, list));
        }
        offsets.sort_unstable();
        Some(Self {
            trigrams: TrigramIndex::from_postings(postings),
            offsets,
            covered,
            tail,
            unsaved: 0,
            last_use: 0,
        })
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn next(&mut self) -> Option<u64> {
        read_varint(&mut self.0)
    }

    /// A count, refused when it could not fit in what is left (a damaged file).
    fn len(&mut self) -> Option<usize> {
        let n = usize::try_from(self.next()?).ok()?;
        (n <= self.0.len()).then_some(n)
    }

    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }
}

/// The up to [`TAIL`] log bytes before `end`.
fn read_tail(log_path: &Path, end: u64) -> Result<Vec<u8>> {
    let start = end.saturating_sub(count(TAIL));
    let mut buf = Vec::new();
    if end == 0 {
        return Ok(buf);
    }
    let mut f = match File::open(log_path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(buf),
        Err(e) => return Err(io_err(log_path, e)),
    };
    f.seek(SeekFrom::Start(start))
        .map_err(|e| io_err(log_path, e))?;
    f.take(end - start)
        .read_to_end(&mut buf)
        .map_err(|e| io_err(log_path, e))?;
    Ok(buf)
}

/// The indexes of the sessions searched lately, by session id.
#[derive(Default)]
pub(crate) struct SearchIndexes {
    sessions: HashMap<String, LogIndex>,
    clock: u64,
}

impl SearchIndexes {
    /// The index of the session in `dir`, up to date with its `log_bytes`
    /// acknowledged log bytes: from memory, else the saved file, else the
    /// log; caught up from the log and saved when enough is new.
    pub(crate) fn get(
        &mut self,
        dir: &Path,
        id: &SessionId,
        log_bytes: u64,
        sync: bool,
    ) -> Result<&LogIndex> {
        let log_path = log::path(dir);
        self.clock += 1;
        let mut entry = match self.sessions.remove(id.as_str()) {
            Some(ix) if ix.fits(&log_path, log_bytes)? => ix,
            _ => match std::fs::read(path(dir)) {
                Ok(bytes) => match LogIndex::decode(&bytes) {
                    Some(ix) if ix.fits(&log_path, log_bytes)? => ix,
                    _ => LogIndex::default(),
                },
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => LogIndex::default(),
                Err(e) => return Err(io_err(&path(dir), e)),
            },
        };
        entry.catch_up(&log_path, id, log_bytes)?;
        if entry.unsaved >= SAVE_EVERY {
            // Saving only spares a later process the log read: a full disk
            // or a read-only store must not fail the search.
            // It is tried again after as many new events.
            if let Err(e) = write_atomic(&path(dir), &entry.encode(), sync) {
                tracing::warn!(backend = BACKEND, session_id = %id, error = %e, "search index not saved");
            }
            entry.unsaved = 0;
        }
        entry.last_use = self.clock;
        if self.sessions.len() >= CACHED_SESSIONS {
            if let Some(oldest) = self
                .sessions
                .iter()
                .min_by_key(|(_, ix)| ix.last_use)
                .map(|(k, _)| k.clone())
            {
                self.sessions.remove(&oldest);
            }
        }
        Ok(self.sessions.entry(String::from(id)).or_insert(entry))
    }

    /// Drops a session's index from memory (its log was rewritten or removed).
    pub(crate) fn forget(&mut self, id: &SessionId) {
        self.sessions.remove(id.as_str());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips_and_damage_is_refused() {
        let mut ix = LogIndex::default();
        ix.trigrams.add(3, "my locker is 4711");
        ix.trigrams.add(9, "locker room");
        ix.offsets = vec![(3, 0), (9, 120)];
        ix.covered = 200;
        ix.tail = b"end of log\n".to_vec();
        let bytes = ix.encode();
        let back = LogIndex::decode(&bytes).unwrap();
        assert_eq!(back.offsets, ix.offsets);
        assert_eq!(back.covered, 200);
        assert_eq!(back.tail, ix.tail);
        let q = session_core::ParsedQuery::parse("locker 4711").unwrap();
        assert_eq!(back.trigrams.candidates(&q), Some(vec![3]));
        for cut in [0, 5, 12, bytes.len() / 2, bytes.len() - 1] {
            assert!(LogIndex::decode(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        let mut foreign = bytes.clone();
        foreign[0] = b'X';
        assert!(LogIndex::decode(&foreign).is_none());
    }
}
