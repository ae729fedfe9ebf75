//! The export file: JSON Lines, a header line and then one [`SessionDump`]
//! per line. `agent-session export` writes it and `import` reads it; any
//! backend's `export_session` output can go in and any backend's
//! `import_session` can take what comes out.
//!
//! ```
//! use session_core::{ExportReader, ExportWriter, InMemoryRepository, NewSession, SessionRepository};
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let source = InMemoryRepository::new();
//! let s = source.create(NewSession::new("app", "alice", chrono::Utc::now())?).await?;
//! let mut file = ExportWriter::new(Vec::new())?;
//! file.write(&source.export_session(&s.id).await?)?;
//! let bytes = file.finish()?;
//!
//! let target = InMemoryRepository::new();
//! for dump in ExportReader::new(bytes.as_slice())? {
//!     target.import_session(dump?).await?;
//! }
//! assert_eq!(target.get(&s.id).await?.user_id, "alice");
//! # Ok::<(), session_core::SessionError>(())
//! # }).unwrap();
//! ```

use std::io::{BufRead, Write};

use crate::{Result, SessionDump, SessionError};

/// The `format` value of the header line.
pub const EXPORT_FORMAT: &str = "agent-session-export";
/// The `version` of the format this build writes. It reads every version
/// from 1: version 2 added the typed event flags (`partial`,
/// `turn_complete`, `error_code`, ...), which a version 1 file lacks;
/// version 3 added each session's `context_log` (when events left the
/// context), which older files lack: their events read with no exit time.
pub const EXPORT_VERSION: u64 = 3;

/// What an I/O error of the export file is reported as.
const IO: &str = "export file";

/// Writes an export file: the header at creation, then one line per dump.
#[derive(Debug)]
pub struct ExportWriter<W: Write> {
    inner: W,
    written: u64,
}

impl<W: Write> ExportWriter<W> {
    /// Starts an export into `inner` by writing the header line.
    pub fn new(mut inner: W) -> Result<Self> {
        let header = serde_json::json!({"format": EXPORT_FORMAT, "version": EXPORT_VERSION});
        writeln!(inner, "{header}").map_err(|e| SessionError::backend(IO, e))?;
        Ok(Self { inner, written: 0 })
    }

    /// Writes one session as one line.
    pub fn write(&mut self, dump: &SessionDump) -> Result<()> {
        let line = serde_json::to_vec(dump)
            .map_err(|e| SessionError::serialization(format!("session {}", dump.session.id), e))?;
        self.inner
            .write_all(&line)
            .and_then(|()| self.inner.write_all(b"\n"))
            .map_err(|e| SessionError::backend(IO, e))?;
        self.written += 1;
        Ok(())
    }

    /// How many sessions were written.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(mut self) -> Result<W> {
        self.inner
            .flush()
            .map_err(|e| SessionError::backend(IO, e))?;
        Ok(self.inner)
    }
}

/// Reads an export file: checks the header, then yields each dump, checked
/// with [`SessionDump::validate`]. A line that does not parse is a
/// `Serialization` error and one that is inconsistent is `InvalidInput`,
/// both naming the line; reading goes on with the next line. Blank lines
/// are skipped. An event without a token estimate (missing or 0, as in a
/// file written by another tool) gets the character heuristic's, so token
/// triggers see the imported history.
#[derive(Debug)]
pub struct ExportReader<R: BufRead> {
    inner: R,
    line: u64,
    buf: Vec<u8>,
    done: bool,
}

impl<R: BufRead> ExportReader<R> {
    /// Reads and checks the header line: `InvalidInput` if it is not an
    /// export of a version this build reads.
    pub fn new(mut inner: R) -> Result<Self> {
        let mut buf = Vec::new();
        inner
            .read_until(b'\n', &mut buf)
            .map_err(|e| SessionError::backend(IO, e))?;
        let head: serde_json::Value = serde_json::from_slice(&buf).unwrap_or_default();
        if head["format"] != EXPORT_FORMAT {
            return Err(SessionError::invalid(
                "export file",
                "this is not an agent-session export (its first line is not the export header)",
            ));
        }
        if !head["version"]
            .as_u64()
            .is_some_and(|v| (1..=EXPORT_VERSION).contains(&v))
        {
            return Err(SessionError::invalid(
                "export file",
                format!(
                    "export format version {}, this build reads versions 1 to {EXPORT_VERSION}",
                    head["version"]
                ),
            ));
        }
        Ok(Self {
            inner,
            line: 1,
            buf,
            done: false,
        })
    }

    /// The line number of the last line read (the header is line 1).
    pub fn line(&self) -> u64 {
        self.line
    }
}

impl<R: BufRead> Iterator for ExportReader<R> {
    type Item = Result<SessionDump>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            self.buf.clear();
            match self.inner.read_until(b'\n', &mut self.buf) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => {
                    self.done = true;
                    return Some(Err(SessionError::backend(IO, e)));
                }
            }
            self.line += 1;
            if self.buf.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let line = self.line;
            let dump = serde_json::from_slice::<SessionDump>(&self.buf)
                .map_err(|e| SessionError::serialization(format!("export line {line}"), e))
                .and_then(|mut dump| {
                    dump.validate().map_err(|e| {
                        SessionError::invalid(format!("export line {line}"), e.to_string())
                    })?;
                    crate::SessionEvent::estimate_missing(
                        &mut dump.events,
                        &crate::HeuristicEstimator,
                    );
                    Ok(dump)
                });
            return Some(dump);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{ErrorKind, Message, NewSession, SessionEvent, SharedState};

    fn dump(id: &str) -> SessionDump {
        let now = chrono::Utc::now();
        let session = NewSession::new("app", "alice", now)
            .and_then(|s| s.with_id(id))
            .unwrap()
            .to_session(now);
        let mut e = SessionEvent::new(Message::user("hi"));
        e.seq = 1;
        SessionDump {
            session,
            initial_state: crate::StateMap::new(),
            last_seq: 1,
            events: vec![e],
            context: vec![1],
            shared: SharedState::default(),
            context_log: Vec::new(),
        }
    }

    fn kinds(bytes: &[u8]) -> Vec<std::result::Result<String, ErrorKind>> {
        ExportReader::new(bytes)
            .unwrap()
            .map(|r| r.map(|d| d.session.id.into_string()).map_err(|e| e.kind()))
            .collect()
    }

    #[test]
    fn round_trips_dumps_in_order() {
        let dumps = vec![dump("a"), dump("b")];
        let mut w = ExportWriter::new(Vec::new()).unwrap();
        for d in &dumps {
            w.write(d).unwrap();
        }
        assert_eq!(w.written(), 2);
        let bytes = w.finish().unwrap();
        let back: Vec<SessionDump> = ExportReader::new(bytes.as_slice())
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(back, dumps);
    }

    #[test]
    fn header_is_checked() {
        let err = ExportReader::new(&b"{\"hello\":1}\n"[..]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(
            err.to_string().contains("not an agent-session export"),
            "{err}"
        );
        let err = ExportReader::new(&b"{\"format\":\"agent-session-export\",\"version\":9}\n"[..])
            .unwrap_err();
        assert!(err.to_string().contains("version 9"), "{err}");
        assert!(ExportReader::new(&b""[..]).is_err());
    }

    /// A version 1 file (before the typed event flags) still reads: its
    /// events have no flags.
    #[test]
    fn version_1_files_still_read() {
        let old = dump("old");
        let line = serde_json::to_string(&old).unwrap();
        assert!(!line.contains("turn_complete"));
        let file = format!("{{\"format\":\"agent-session-export\",\"version\":1}}\n{line}\n");
        let back: Vec<SessionDump> = ExportReader::new(file.as_bytes())
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(back, [old]);
        assert_eq!(back[0].events[0].turn_complete, None);
        assert!(
            back[0].context_log.is_empty(),
            "no context history before version 3"
        );
        let newer = "{\"format\":\"agent-session-export\",\"version\":4}\n";
        assert!(ExportReader::new(newer.as_bytes()).is_err());
    }

    /// A version 3 file carries each session's context history.
    #[test]
    fn the_context_history_round_trips() {
        let mut d = dump("h");
        d.session.version = 2;
        d.context_log = vec![crate::ContextChange::new(2, chrono::Utc::now(), 1, &[1])];
        let mut w = ExportWriter::new(Vec::new()).unwrap();
        w.write(&d).unwrap();
        let bytes = w.finish().unwrap();
        let back: Vec<SessionDump> = ExportReader::new(&bytes[..])
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(back, [d.clone()]);
        let mut ahead = d;
        ahead.context_log[0].version = 3;
        let err = ahead.validate().unwrap_err();
        assert_eq!(
            err.kind(),
            ErrorKind::InvalidInput,
            "a change past the session's version"
        );
    }

    #[test]
    fn bad_lines_are_typed_name_the_line_and_reading_goes_on() {
        let mut bad = dump("bad");
        bad.context = vec![7]; // not in the archive
        let mut bytes = ExportWriter::new(Vec::new()).unwrap().finish().unwrap();
        bytes.extend_from_slice(b"\n  \n{not json\n");
        bytes.extend_from_slice(&serde_json::to_vec(&bad).unwrap());
        bytes.extend_from_slice(b"\n\xff\xfe\n");
        bytes.extend_from_slice(&serde_json::to_vec(&dump("good")).unwrap());
        let got = kinds(&bytes);
        assert_eq!(
            got,
            vec![
                Err(ErrorKind::Serialization),
                Err(ErrorKind::InvalidInput),
                Err(ErrorKind::Serialization),
                Ok("good".to_owned()),
            ]
        );
        let mut r = ExportReader::new(bytes.as_slice()).unwrap();
        let first = r.next().unwrap().unwrap_err();
        assert!(first.to_string().contains("export line 4"), "{first}");
    }

    #[test]
    fn events_without_an_estimate_get_one_on_reading() {
        let mut d = dump("s1");
        for e in &mut d.events {
            e.token_estimate = 0;
        }
        let mut bytes = Vec::new();
        let mut w = ExportWriter::new(&mut bytes).unwrap();
        w.write(&d).unwrap();
        let back: Vec<SessionDump> = ExportReader::new(bytes.as_slice())
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert!(!back[0].events.is_empty());
        assert!(back[0].events.iter().all(|e| e.token_estimate > 0));
    }
}
