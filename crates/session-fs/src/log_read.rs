//! Reading part of a log: from a seq forwards, and from the end backwards.
//!
//! The log holds one record per line in seq order, so the record after a
//! seq is found by bisecting the file's bytes (O(log n) short reads) and
//! the newest records by reading blocks from the end: a page or a tail
//! costs the same in a session of 1,000 events as in one of 100,000.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::ops::ControlFlow;
use std::path::Path;

use serde::Deserialize;
use session_core::{SessionEvent, SessionId};

use crate::error::{io_err, Result};
use crate::format::count;

/// Bytes read per step when reading backwards.
const BLOCK: u64 = 64 * 1024;

/// The one field of a record bisection needs.
#[derive(Deserialize)]
struct SeqOnly {
    seq: u64,
}

/// Opens a log, or `None` when it does not exist (a session without events).
fn open(path: &Path) -> Result<Option<File>> {
    match File::open(path) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(path, e)),
    }
}

/// The record starting at or after byte `pos` (below `limit`): its start,
/// its end and its seq (`None` when the line does not parse); `None` past
/// the last record.
fn record_at_or_after(
    path: &Path,
    f: &mut File,
    pos: u64,
    limit: u64,
) -> Result<Option<(u64, u64, Option<u64>)>> {
    let mut start = pos;
    f.seek(SeekFrom::Start(pos.saturating_sub(1)))
        .map_err(|e| io_err(path, e))?;
    let mut reader = BufReader::new(f.take(limit.saturating_sub(pos.saturating_sub(1))));
    let mut line = Vec::new();
    if pos > 0 {
        // Skip to the end of the line holding byte pos - 1.
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| io_err(path, e))?;
        start = pos.saturating_sub(1).saturating_add(count(n));
        line.clear();
    }
    if start >= limit {
        return Ok(None);
    }
    let n = reader
        .read_until(b'\n', &mut line)
        .map_err(|e| io_err(path, e))?;
    let seq = serde_json::from_slice::<SeqOnly>(&line).ok().map(|r| r.seq);
    Ok(Some((start, start.saturating_add(count(n)), seq)))
}

/// The byte offset of the first record with a seq above `seq` in the first
/// `limit` bytes of the log (`limit` when there is none). A line that does
/// not parse makes it fall back to 0: the caller then reads from the start
/// and skips by seq, which is always right.
pub(crate) fn offset_after(path: &Path, limit: u64, seq: u64) -> Result<u64> {
    let Some(mut f) = open(path)? else {
        return Ok(0);
    };
    let (mut lo, mut hi) = (0u64, limit);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match record_at_or_after(path, &mut f, mid, limit)? {
            None => hi = mid,
            Some((_, _, None)) => return Ok(0),
            Some((_, _, Some(s))) if s > seq => hi = mid,
            Some((_, end, Some(_))) => lo = end,
        }
    }
    Ok(record_at_or_after(path, &mut f, lo, limit)?.map_or(limit, |(start, _, _)| start))
}

/// Visits the records from byte `from` (a record's start) up to `limit`, in
/// seq order, each with its length in bytes, until `visit` breaks; stops at
/// the first incomplete line or line that does not parse (a torn tail).
pub(crate) fn forwards(
    path: &Path,
    from: u64,
    limit: u64,
    session_id: &SessionId,
    mut visit: impl FnMut(SessionEvent, u64) -> ControlFlow<()>,
) -> Result<()> {
    let Some(mut f) = open(path)? else {
        return Ok(());
    };
    f.seek(SeekFrom::Start(from)).map_err(|e| io_err(path, e))?;
    let mut reader = BufReader::new(f.take(limit.saturating_sub(from)));
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| io_err(path, e))?;
        if n == 0 || line.last() != Some(&b'\n') {
            return Ok(());
        }
        let Ok(mut e) = serde_json::from_slice::<SessionEvent>(&line[..n - 1]) else {
            return Ok(());
        };
        session_id.as_str().clone_into(&mut e.session_id);
        if visit(e, count(n)).is_break() {
            return Ok(());
        }
    }
}

/// Visits the records of the first `limit` bytes newest first, reading
/// blocks from the end, until `visit` breaks or a line does not parse.
pub(crate) fn backwards(
    path: &Path,
    limit: u64,
    session_id: &SessionId,
    mut visit: impl FnMut(SessionEvent) -> ControlFlow<()>,
) -> Result<()> {
    lines_backwards(path, 0, limit, BLOCK, |_, line| {
        let Ok(mut e) = serde_json::from_slice::<SessionEvent>(line) else {
            return ControlFlow::Break(());
        };
        session_id.as_str().clone_into(&mut e.session_id);
        visit(e)
    })
}

/// Visits the complete lines between byte `floor` (a line's start) and
/// `limit` newest first, each without its newline and with the offset just
/// past it, reading blocks from the end (the first of `first_block` bytes,
/// each next one twice as large, up to 64 KiB), until `visit` breaks.
/// Bytes after the last newline before `limit` (a line being written or
/// torn) are not visited.
pub(crate) fn lines_backwards(
    path: &Path,
    floor: u64,
    limit: u64,
    first_block: u64,
    mut visit: impl FnMut(u64, &[u8]) -> ControlFlow<()>,
) -> Result<()> {
    let Some(mut f) = open(path)? else {
        return Ok(());
    };
    let mut end = limit;
    // The unvisited bytes from `end` up to the last unvisited line's newline.
    let mut pending: Vec<u8> = Vec::new();
    let mut at_line_end = false;
    let mut block_len = first_block.clamp(1, BLOCK);
    while end > floor {
        let start = end.saturating_sub(block_len).max(floor);
        block_len = block_len.saturating_mul(2).min(BLOCK);
        let mut block = Vec::new();
        f.seek(SeekFrom::Start(start))
            .map_err(|e| io_err(path, e))?;
        (&mut f)
            .take(end.saturating_sub(start))
            .read_to_end(&mut block)
            .map_err(|e| io_err(path, e))?;
        block.extend_from_slice(&pending);
        pending = block;
        end = start;
        if !at_line_end {
            // Drop a fragment after the last newline.
            let Some(i) = pending.iter().rposition(|b| *b == b'\n') else {
                pending.clear();
                continue;
            };
            pending.truncate(i.saturating_add(1));
            at_line_end = true;
        }
        // Visit every whole line; the first one is whole only at the floor.
        while let Some(body_end) = pending.len().checked_sub(1) {
            let line_start = match pending[..body_end].iter().rposition(|b| *b == b'\n') {
                Some(i) => i + 1,
                None if end == floor => 0,
                None => break,
            };
            let line_end = end.saturating_add(count(pending.len()));
            if visit(line_end, &pending[line_start..body_end]).is_break() {
                return Ok(());
            }
            pending.truncate(line_start);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use session_core::Message;

    fn log_of(n: u64) -> (tempfile::TempDir, std::path::PathBuf, u64) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let events: Vec<SessionEvent> = (1..=n)
            .map(|seq| {
                let mut e = SessionEvent::new(Message::user(format!(
                    "event {seq} {}",
                    "x".repeat(usize::try_from(seq % 97).unwrap())
                )));
                e.seq = seq * 2;
                e
            })
            .collect();
        let bytes = crate::log::encode(&events).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        (dir, path, count(bytes.len()))
    }

    fn seqs_forwards(path: &Path, from: u64, limit: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let id = SessionId::new("s").unwrap();
        forwards(path, from, limit, &id, |e, _| {
            out.push(e.seq);
            ControlFlow::Continue(())
        })
        .unwrap();
        out
    }

    #[test]
    fn offset_after_finds_the_first_larger_seq_by_bisection() {
        let (_d, path, len) = log_of(3000);
        for seq in [0, 1, 2, 3, 1999, 2000, 4000, 5999, 6000, 7000] {
            let from = offset_after(&path, len, seq).unwrap();
            let got = seqs_forwards(&path, from, len);
            let want: Vec<u64> = (1..=3000).map(|s| s * 2).filter(|s| *s > seq).collect();
            assert_eq!(got, want, "after {seq}");
        }
    }

    #[test]
    fn backwards_visits_every_record_newest_first_across_blocks() {
        let (_d, path, len) = log_of(3000);
        let id = SessionId::new("s").unwrap();
        let mut got = Vec::new();
        backwards(&path, len, &id, |e| {
            got.push(e.seq);
            ControlFlow::Continue(())
        })
        .unwrap();
        let want: Vec<u64> = (1..=3000).rev().map(|s| s * 2).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn lines_backwards_from_small_blocks_gives_every_line_once_and_skips_a_fragment() {
        let (_d, path, len) = log_of(500);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(b"{\"fragment");
        std::fs::write(&path, &bytes).unwrap();
        let whole = std::fs::read(&path).unwrap();
        let floor = offset_after(&path, len, 200).unwrap();
        for first_block in [1, 7, 4096, BLOCK] {
            let mut got = Vec::new();
            lines_backwards(
                &path,
                floor,
                count(bytes.len()),
                first_block,
                |end, line| {
                    let end = usize::try_from(end).unwrap();
                    assert_eq!(&whole[end - 1 - line.len()..end - 1], line);
                    got.push(serde_json::from_slice::<SeqOnly>(line).unwrap().seq);
                    ControlFlow::Continue(())
                },
            )
            .unwrap();
            let want: Vec<u64> = (101..=500).rev().map(|s| s * 2).collect();
            assert_eq!(got, want, "first block {first_block}");
        }
    }

    #[test]
    fn readers_stop_at_an_unparsable_line_and_within_the_limit() {
        let (_d, path, len) = log_of(10);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(b"{\"torn\n");
        std::fs::write(&path, &bytes).unwrap();
        // Bytes past the acknowledged length are never read.
        assert_eq!(seqs_forwards(&path, 0, len).len(), 10);
        let id = SessionId::new("s").unwrap();
        let mut got = 0;
        backwards(&path, count(bytes.len()), &id, |_| {
            got += 1;
            ControlFlow::Continue(())
        })
        .unwrap();
        assert_eq!(
            got, 0,
            "a backward read starting at a torn line stops there"
        );
    }
}
