//! export, import and migrate: whole sessions as JSON Lines, between any two stores.
//! Operator's tools: they read and write every owner's sessions, whole,
//! on the repositories (not through the session service).
//!
//! One session that cannot be read or written (a corrupt stored row, a
//! refused dump) does not stop the others: its error goes to stderr, the
//! rest carry on, and the command fails at the end with the count. An
//! unavailable store or an unwritable output stops at once.

use std::collections::hash_map::DefaultHasher;
use std::fmt::Display;
use std::hash::{Hash, Hasher};
use std::io::{BufReader, BufWriter, Write};

use agent_session::{
    ErrorKind, ExportReader, ExportWriter, ImportOutcome, SessionDump, SessionError, SessionId,
    SessionQuery, SessionRepository,
};
use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;
use serde_json::json;

fn progress(len: usize, what: &str) -> ProgressBar {
    crate::output::progress_bar(len, what, "{msg} {bar:30} {pos}/{len} sessions, {eta} left")
}

/// Every session id of the store (optionally of one app), newest activity first.
pub(crate) async fn all_ids(
    repo: &dyn SessionRepository,
    app: Option<&str>,
) -> Result<Vec<SessionId>> {
    let mut ids = Vec::new();
    let mut page = 0;
    loop {
        let mut q = SessionQuery::new().page(page, 1000);
        if let Some(a) = app {
            q = q.app(a);
        }
        let p = repo.list(&q).await?;
        ids.extend(p.items.into_iter().map(|s| s.id));
        // Sessions the store could not decode are tried too, so their
        // errors are reported and counted instead of silently missing.
        // (An id that is not even valid cannot be addressed, so it is left out.)
        ids.extend(
            p.unreadable
                .iter()
                .filter_map(|id| SessionId::new(id.as_str()).ok()),
        );
        if !p.has_more {
            return Ok(ids);
        }
        page += 1;
    }
}

/// Whether an error concerns one session only, so the others can go on
/// (an unavailable store would fail them all).
fn per_session(e: &SessionError) -> bool {
    e.kind() != ErrorKind::Unavailable
}

/// Reports one session's failure on stderr, above the progress bar.
fn failure(bar: &ProgressBar, what: impl Display, e: SessionError) {
    let e = anyhow::Error::from(e);
    bar.suspend(|| {
        crate::output::report(format_args!(
            "error: {what}: {}",
            crate::output::describe(&e)
        ));
    });
}

/// `export`: the sessions given (or all of them) as JSON Lines, to `file`
/// or `out`; an operator's tool.
pub(crate) async fn export(
    repo: &dyn SessionRepository,
    sessions: &[SessionId],
    all: bool,
    file: Option<&str>,
    out: &mut dyn Write,
) -> Result<()> {
    let ids = match (all, sessions.is_empty()) {
        (true, true) => all_ids(repo, None).await?,
        (false, false) => sessions.to_vec(),
        (true, false) => bail!("give session ids or --all, not both"),
        (false, true) => bail!("nothing to export: give session ids or --all"),
    };
    let mut created;
    let sink: &mut dyn Write = match file {
        Some(path) => {
            created = BufWriter::new(
                std::fs::File::create(path).with_context(|| format!("cannot create {path}"))?,
            );
            &mut created
        }
        None => out,
    };
    let mut writer = ExportWriter::new(sink)?;
    let bar = progress(ids.len(), "exporting");
    let mut failed = 0usize;
    for id in &ids {
        bar.inc(1);
        let dump = match repo.export_session(id).await {
            Ok(dump) => dump,
            Err(e) if per_session(&e) => {
                failure(&bar, format_args!("cannot export session {id}"), e);
                failed += 1;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        match writer.write(&dump) {
            Ok(()) => {}
            // A dump that does not encode wrote nothing: the output stays whole.
            Err(e) if e.kind() == ErrorKind::Serialization => {
                failure(&bar, format_args!("cannot export session {id}"), e);
                failed += 1;
            }
            // The output failed (a full disk, a closed pipe): nothing more can be written.
            Err(e) => return Err(e.into()),
        }
    }
    writer.finish()?;
    bar.finish_and_clear();
    if let Some(path) = file {
        crate::output::report(format_args!(
            "exported {} sessions to {path}",
            ids.len() - failed
        ));
    }
    if failed > 0 {
        bail!(
            "{failed} of {} sessions could not be exported (each is named above)",
            ids.len()
        );
    }
    Ok(())
}

/// `import FILE`: the sessions of an export, written as they were
/// (idempotent); an operator's tool.
pub(crate) async fn import(
    repo: &dyn SessionRepository,
    file: &str,
    json_out: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let f = std::fs::File::open(file).with_context(|| format!("cannot open {file}"))?;
    let dumps =
        ExportReader::new(BufReader::new(f)).with_context(|| format!("cannot import {file}"))?;
    let (mut imported, mut unchanged, mut failed) = (0u64, 0u64, 0u64);
    let bar = ProgressBar::hidden();
    for dump in dumps {
        let dump = match dump {
            Ok(d) => d,
            Err(e) if per_session(&e) => {
                failure(&bar, format_args!("cannot import from {file}"), e);
                failed += 1;
                continue;
            }
            Err(e) => return Err(anyhow::Error::from(e).context(format!("cannot import {file}"))),
        };
        let id = dump.session.id.clone();
        match repo.import_session(dump).await {
            Ok(ImportOutcome::Imported) => imported += 1,
            Ok(ImportOutcome::Unchanged) => unchanged += 1,
            Err(e) if per_session(&e) => {
                failure(&bar, format_args!("cannot import session {id}"), e);
                failed += 1;
            }
            Err(e) => return Err(e.into()),
        }
    }
    if json_out {
        writeln!(
            out,
            "{}",
            json!({"imported": imported, "unchanged": unchanged, "failed": failed})
        )?;
    } else {
        writeln!(
            out,
            "imported {imported} sessions ({unchanged} already up to date)"
        )?;
    }
    if failed > 0 {
        bail!("{failed} entries of {file} could not be imported (each is named above)");
    }
    Ok(())
}

/// A checksum of a dump's content (stable within one run: both sides are hashed by this process).
fn checksum(dump: &SessionDump) -> Result<u64> {
    let mut h = DefaultHasher::new();
    serde_json::to_string(dump)?.hash(&mut h);
    Ok(h.finish())
}

/// `migrate --to URL`: every session (of one app) copied to another store,
/// then verified; an operator's tool.
pub(crate) async fn migrate(
    from: &dyn SessionRepository,
    to: &dyn SessionRepository,
    app: Option<&str>,
    json_out: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let ids = all_ids(from, app).await?;
    let mut failed = 0usize;
    let bar = progress(ids.len(), "copying");
    let mut copied = Vec::with_capacity(ids.len());
    for id in &ids {
        let copy = match from.export_session(id).await {
            Ok(dump) => {
                let n = dump.events.len();
                to.import_session(dump).await.map(|_| n)
            }
            Err(e) => Err(e),
        };
        match copy {
            Ok(n) => copied.push((id, n)),
            Err(e) if per_session(&e) => {
                failure(&bar, format_args!("cannot copy session {id}"), e);
                failed += 1;
            }
            Err(e) => return Err(e.into()),
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let bar = progress(copied.len(), "verifying");
    let (mut verified, mut events) = (0usize, 0usize);
    for (id, n) in copied {
        let pair = match from.export_session(id).await {
            Ok(a) => to.export_session(id).await.map(|b| (a, b)),
            Err(e) => Err(e),
        };
        match pair {
            Ok((a, b)) => {
                if a.events.len() == b.events.len() && checksum(&a)? == checksum(&b)? {
                    verified += 1;
                    events = events.saturating_add(n);
                } else {
                    bar.suspend(|| {
                        crate::output::report(format_args!(
                            "error: session {id} differs after the copy ({} events at the source, {} at the target)",
                            a.events.len(),
                            b.events.len()
                        ));
                    });
                    failed += 1;
                }
            }
            Err(e) if per_session(&e) => {
                failure(&bar, format_args!("cannot verify session {id}"), e);
                failed += 1;
            }
            Err(e) => return Err(e.into()),
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    if json_out {
        writeln!(
            out,
            "{}",
            json!({"sessions": verified, "events": events, "verified": true, "failed": failed})
        )?;
    } else {
        writeln!(
            out,
            "migrated {verified} sessions ({events} events); verified: event counts and checksums match for every session"
        )?;
    }
    if failed > 0 {
        bail!(
            "{failed} of {} sessions could not be migrated (each is named above)",
            ids.len()
        );
    }
    Ok(())
}
