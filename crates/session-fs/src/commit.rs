//! Appends committed by their own log record.
//!
//! An append's events are written as lines at the end of `events.jsonl`,
//! and the last of them begins with a `"commit"` member: the session's head
//! after the append (version, last seq, counters, activity time). Once that
//! line is complete on disk (fsynced), the append is committed; the append
//! costs one fsync instead of three, and `session.json` is left as it was.
//!
//! `session.json` is then a checkpoint: its `log_bytes` is where it last
//! agreed with the log, and every reader settles it by reading the log
//! backwards from its end to the last complete commit line past that point
//! (normally the very last line: one short read). Lines past the last commit
//! line belong to an append in flight or torn by a crash; a writer moves them
//! aside as before. Writes other than plain appends — an append that
//! changes session-scope state, a context replace, a rewind, an update —
//! still rewrite `session.json` (fsynced, renamed) as their commit point, and
//! an append rewrites it too once the log has grown [`CHECKPOINT_BYTES`] past
//! it, so a person reading the file sees counters at most that far behind.

use std::fs;
use std::ops::ControlFlow;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use session_core::SessionError;

use crate::error::{io_err, Result};
use crate::format::SessionFile;
use crate::{log, log_read};

/// How far the log may grow past `session.json` before an append rewrites it.
pub(crate) const CHECKPOINT_BYTES: u64 = 1 << 20;

/// How a commit line begins.
const PREFIX: &[u8] = b"{\"commit\":";

/// The head of a session after an append, as its last log line carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Commit {
    /// [`session_core::Session::version`].
    version: u64,
    /// [`SessionFile::last_seq`].
    last_seq: u64,
    /// [`session_core::Session::event_count`].
    event_count: u64,
    /// [`session_core::Session::event_bytes`].
    event_bytes: u64,
    /// [`session_core::Session::context_tokens`].
    context_tokens: u64,
    /// [`session_core::Session::updated_at`].
    updated_at: DateTime<Utc>,
}

impl Commit {
    /// The head `file` holds.
    pub(crate) fn of(file: &SessionFile) -> Self {
        Self {
            version: file.session.version,
            last_seq: file.last_seq,
            event_count: file.session.event_count,
            event_bytes: file.session.event_bytes,
            context_tokens: file.session.context_tokens,
            updated_at: file.session.updated_at,
        }
    }

    /// Sets this head on `file`, whose log holds it up to `log_end`.
    fn apply(self, file: &mut SessionFile, log_end: u64) {
        file.log_bytes = log_end;
        file.last_seq = self.last_seq;
        let s = &mut file.session;
        s.version = self.version;
        s.event_count = self.event_count;
        s.event_bytes = self.event_bytes;
        s.context_tokens = self.context_tokens;
        s.updated_at = self.updated_at;
    }

    /// Encoded log lines with this commit put at the start of the last
    /// one: `{"id":…}` becomes `{"commit":{…},"id":…}`. Event readers
    /// ignore the member; the line stays one JSON object.
    pub(crate) fn seal(&self, mut lines: Vec<u8>) -> Result<Vec<u8>> {
        let body_end = lines.len().saturating_sub(1);
        let start = lines
            .get(..body_end)
            .and_then(|body| body.iter().rposition(|b| *b == b'\n'))
            .map_or(0, |i| i.saturating_add(1));
        if lines.get(start..start.saturating_add(2)) != Some(b"{\"".as_slice()) {
            return Err(SessionError::invalid(
                "event",
                "an event record must be a JSON object with members",
            ));
        }
        let mut head = PREFIX.to_vec();
        serde_json::to_writer(&mut head, self)
            .map_err(|e| SessionError::serialization("commit record", e))?;
        head.push(b',');
        lines.splice(start..=start, head);
        Ok(lines)
    }

    /// The commit a log line begins with, if the line is a whole record
    /// whose event is the commit's last seq.
    fn parse(line: &[u8]) -> Option<Self> {
        /// A sealed record: its commit and its event's seq.
        #[derive(Deserialize)]
        struct Sealed {
            commit: Commit,
            seq: u64,
        }
        if !line.starts_with(PREFIX) {
            return None;
        }
        let sealed: Sealed = serde_json::from_slice(line).ok()?;
        (sealed.seq == sealed.commit.last_seq).then_some(sealed.commit)
    }
}

/// Brings a session file read from `dir` up to the last complete commit
/// line of its log past the file's `log_bytes`; a file already at the end
/// of its log (or a session without a log) is left as it is.
pub(crate) fn settle(dir: &Path, file: &mut SessionFile) -> Result<()> {
    let path = log::path(dir);
    let len = match fs::metadata(&path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(&path, e)),
    };
    if len <= file.log_bytes {
        return Ok(());
    }
    let mut last = None;
    // The commit is normally the last line: a first read of 4 KiB finds it.
    log_read::lines_backwards(
        &path,
        file.log_bytes,
        len,
        4096,
        |end, line| match Commit::parse(line) {
            Some(commit) => {
                last = Some((commit, end));
                ControlFlow::Break(())
            }
            None => ControlFlow::Continue(()),
        },
    )?;
    if let Some((commit, end)) = last {
        commit.apply(file, end);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use session_core::{Message, SessionEvent};

    fn commit(version: u64) -> Commit {
        Commit {
            version,
            last_seq: version,
            event_count: version * 3,
            event_bytes: version * 4,
            context_tokens: version * 5,
            updated_at: DateTime::<Utc>::UNIX_EPOCH,
        }
    }

    /// Log lines of events with these texts, the last with seq `last`.
    fn lines(last: u64, texts: &[&str]) -> Vec<u8> {
        let first = last + 1 - u64::try_from(texts.len()).unwrap_or(0);
        let events: Vec<SessionEvent> = texts
            .iter()
            .zip(first..)
            .map(|(t, seq)| {
                let mut e = SessionEvent::new(Message::user(*t));
                e.seq = seq;
                e
            })
            .collect();
        log::encode(&events).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_sealed_batch_keeps_its_events_and_carries_the_commit_on_its_last_line() {
        let sealed = commit(7)
            .seal(lines(7, &["one", "two \n {\"commit\":"]))
            .unwrap_or_else(|e| panic!("{e}"));
        let text = String::from_utf8(sealed).unwrap_or_else(|e| panic!("{e}"));
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(Commit::parse(rows[0].as_bytes()), None);
        assert_eq!(Commit::parse(rows[1].as_bytes()), Some(commit(7)));
        let events: Vec<SessionEvent> = rows
            .iter()
            .map(|r| serde_json::from_str(r).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        assert_eq!(events[0].message.text(), "one");
        assert_eq!(events[1].message.text(), "two \n {\"commit\":");
    }

    #[test]
    fn a_commit_on_a_line_of_another_seq_is_not_taken() {
        let sealed = commit(7)
            .seal(lines(6, &["six"]))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(Commit::parse(&sealed[..sealed.len() - 1]), None);
        let sealed = commit(6)
            .seal(lines(6, &["six"]))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(Commit::parse(&sealed[..sealed.len() - 1]), Some(commit(6)));
    }

    #[test]
    fn a_line_that_is_not_an_object_with_members_is_refused() {
        assert!(commit(1).seal(b"{}\n".to_vec()).is_err());
        assert!(commit(1).seal(b"[1]\n".to_vec()).is_err());
    }

    #[test]
    fn settling_takes_the_last_complete_commit_past_the_checkpoint() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut log_bytes = lines(1, &["before the checkpoint"]);
        let checkpoint = u64::try_from(log_bytes.len()).unwrap_or(u64::MAX);
        let first = commit(2)
            .seal(lines(2, &["a", "b"]))
            .unwrap_or_else(|e| panic!("{e}"));
        log_bytes.extend_from_slice(&first);
        let committed = u64::try_from(log_bytes.len()).unwrap_or(u64::MAX);
        // An append in flight: complete lines without a commit, then a fragment.
        log_bytes.extend_from_slice(&lines(3, &["in flight"]));
        log_bytes.extend_from_slice(b"{\"commit\":{\"version\":9");
        fs::write(log::path(dir.path()), &log_bytes).unwrap_or_else(|e| panic!("{e}"));
        let session = session_core::NewSession::new("app", "u", DateTime::<Utc>::UNIX_EPOCH)
            .unwrap_or_else(|e| panic!("{e}"))
            .to_session(DateTime::<Utc>::UNIX_EPOCH);
        let mut file = SessionFile {
            session,
            initial_state: session_core::StateMap::default(),
            last_seq: 1,
            log_bytes: checkpoint,
            checkpoint,
            context: crate::format::ContextFile::default(),
            context_changes: Vec::new(),
            log_generation: 1,
        };
        settle(dir.path(), &mut file).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(file.log_bytes, committed);
        assert_eq!(Commit::of(&file), commit(2));
        // A checkpoint at the commit: nothing past it is committed.
        let before = Commit::of(&file);
        settle(dir.path(), &mut file).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(Commit::of(&file), before);
        assert_eq!(file.log_bytes, committed);
    }
}
