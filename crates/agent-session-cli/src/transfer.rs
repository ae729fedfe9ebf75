//! export, import and migrate: whole sessions as JSON Lines, between any two stores.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::{BufReader, IsTerminal, Write};

use agent_session::{
    ExportReader, ExportWriter, ImportOutcome, SessionDump, SessionQuery, SessionRepository,
};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;

fn progress(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(
        Some(len),
        if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        },
    );
    bar.set_style(
        ProgressStyle::with_template("{msg} {bar:30} {pos}/{len} sessions ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(what.to_owned());
    bar
}

/// Every session id of the store (optionally of one app), newest activity first.
async fn all_ids(repo: &dyn SessionRepository, app: Option<&str>) -> Result<Vec<String>> {
    let mut ids = Vec::new();
    let mut page = 0;
    loop {
        let mut q = SessionQuery::new().page(page, 1000);
        if let Some(a) = app {
            q = q.app(a);
        }
        let p = repo.list(&q).await?;
        ids.extend(p.items.into_iter().map(|s| s.id));
        if !p.has_more {
            return Ok(ids);
        }
        page += 1;
    }
}

pub(crate) async fn export(
    repo: &dyn SessionRepository,
    sessions: &[String],
    all: bool,
    out: Option<&str>,
) -> Result<()> {
    let ids = match (all, sessions.is_empty()) {
        (true, true) => all_ids(repo, None).await?,
        (false, false) => sessions.to_vec(),
        (true, false) => bail!("give session ids or --all, not both"),
        (false, true) => bail!("nothing to export: give session ids or --all"),
    };
    let writer: Box<dyn Write> = match out {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("cannot create {path}"))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let mut writer = ExportWriter::new(writer)?;
    let bar = progress(ids.len() as u64, "exporting");
    for id in &ids {
        writer.write(&repo.export_session(id).await?)?;
        bar.inc(1);
    }
    writer.finish()?;
    bar.finish_and_clear();
    if let Some(path) = out {
        eprintln!("exported {} sessions to {path}", ids.len());
    }
    Ok(())
}

pub(crate) async fn import(repo: &dyn SessionRepository, file: &str, json_out: bool) -> Result<()> {
    let f = std::fs::File::open(file).with_context(|| format!("cannot open {file}"))?;
    let dumps =
        ExportReader::new(BufReader::new(f)).with_context(|| format!("cannot import {file}"))?;
    let (mut imported, mut unchanged) = (0u64, 0u64);
    for dump in dumps {
        let dump = dump.with_context(|| format!("cannot import {file}"))?;
        match repo.import_session(dump).await? {
            ImportOutcome::Imported => imported += 1,
            ImportOutcome::Unchanged => unchanged += 1,
        }
    }
    if json_out {
        println!("{}", json!({"imported": imported, "unchanged": unchanged}));
    } else {
        println!("imported {imported} sessions ({unchanged} already up to date)");
    }
    Ok(())
}

/// A checksum of a dump's content (stable within one run: both sides are hashed by this process).
fn checksum(dump: &SessionDump) -> Result<u64> {
    let mut h = DefaultHasher::new();
    serde_json::to_string(dump)?.hash(&mut h);
    Ok(h.finish())
}

pub(crate) async fn migrate(
    from: &dyn SessionRepository,
    to: &dyn SessionRepository,
    app: Option<&str>,
    json_out: bool,
) -> Result<()> {
    let ids = all_ids(from, app).await?;
    let bar = progress(ids.len() as u64, "copying");
    let mut events = 0usize;
    for id in &ids {
        let dump = from.export_session(id).await?;
        events += dump.events.len();
        to.import_session(dump).await?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    let bar = progress(ids.len() as u64, "verifying");
    for id in &ids {
        let (a, b) = (from.export_session(id).await?, to.export_session(id).await?);
        if a.events.len() != b.events.len() || checksum(&a)? != checksum(&b)? {
            bail!(
                "session {id} differs after the copy ({} events at the source, {} at the target)",
                a.events.len(),
                b.events.len()
            );
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    if json_out {
        println!(
            "{}",
            json!({"sessions": ids.len(), "events": events, "verified": true})
        );
    } else {
        println!(
            "migrated {} sessions ({events} events); verified: event counts and checksums match for every session",
            ids.len()
        );
    }
    Ok(())
}
