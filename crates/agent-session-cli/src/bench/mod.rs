//! `bench`: the reference workloads against the store `--store` names, each
//! measured next to its raw engine in the same run, in interleaved pairs.
//!
//! - W1: appends to one session, one call and one commit each;
//! - W2: 20 events to each of many sessions, round robin, over N clients;
//! - W3: a full read and the last 20 events of W1's session;
//! - W4: single-word searches in W1's session, frequent to rare;
//! - scaling: the last 20 and a full read at several session lengths;
//! - compaction: a 1,000-event context summarized end to end, then the
//!   steady state (the previous summary and 50 new events, again and again).
//!
//! A workload runs in `--repeat` rounds; each round measures the store and
//! the raw engine ([`raw`]) back to back, alternating which goes first, so
//! the ratio of a pair is taken under the same machine load.

mod compaction;
mod events;
mod raw;
mod raw_es;
pub(crate) mod recall;
mod scaling;
mod setup;
mod stats;
mod writes;

use std::io::Write;
use std::sync::Arc;

use agent_session::SessionRepository;
use anyhow::Result;
use serde_json::json;

use crate::cli::{BenchArgs, WorkloadArg};
use raw::Raw;
use setup::Scratch;
use stats::Row;

/// Runs the workloads and prints the report: an operator's tool, on the
/// repository (it creates and removes sessions of its own).
pub(crate) async fn run(
    url: &str,
    repo: Arc<dyn SessionRepository>,
    args: &BenchArgs,
    json_out: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let (raw, no_raw) = if args.compare.is_some() {
        match Raw::open(url).await? {
            Ok(r) => (Some(Arc::new(r)), None),
            Err(why) => (None, Some(why)),
        }
    } else {
        (None, Some("not asked for (--compare raw)"))
    };
    let mut scratch = Scratch::new(repo.clone(), raw);
    let mut rows = Vec::new();
    let result = workloads(&mut scratch, args, &mut rows).await;
    scratch.remove_sessions().await;
    let described = scratch.raw.as_ref().map(|r| r.describe());
    if let Some(raw) = scratch.raw.take().and_then(Arc::into_inner) {
        raw.cleanup().await?;
    }
    result?;
    let backend = repo.capabilities().backend;
    let raw_said = match (&described, no_raw) {
        (Some(d), _) => (*d).to_owned(),
        (None, Some(why)) => format!("none ({why})"),
        (None, None) => "none".to_owned(),
    };
    let reports: Vec<serde_json::Value> = rows.iter().map(Row::to_json).collect();
    if json_out {
        let doc = json!({
            "store": backend,
            "date": chrono::Utc::now().format("%Y-%m-%d").to_string(),
            "raw": raw_said,
            "repeat": args.repeat,
            "results": reports,
        });
        writeln!(out, "{doc}")?;
    } else {
        writeln!(out, "store: {backend}")?;
        writeln!(out, "raw engine: {raw_said}")?;
        writeln!(
            out,
            "{:<46} {:>19}  {:>19}  speed ÷ raw: median (min–max)",
            "workload", "library (median)", "raw (median)"
        )?;
        for r in &rows {
            writeln!(out, "{}", r.to_line())?;
        }
    }
    Ok(())
}

async fn workloads(scratch: &mut Scratch, args: &BenchArgs, rows: &mut Vec<Row>) -> Result<()> {
    let wants = |w: WorkloadArg| args.workload == WorkloadArg::All || args.workload == w;
    if wants(WorkloadArg::W1) || wants(WorkloadArg::W3) || wants(WorkloadArg::W4) {
        let id = scratch.session().await?;
        let w1 = writes::w1(scratch, &id, args).await?;
        if wants(WorkloadArg::W1) {
            rows.push(w1);
        }
        if wants(WorkloadArg::W3) {
            rows.extend(scaling::w3(scratch, &id, args).await?);
        }
        if wants(WorkloadArg::W4) {
            rows.extend(scaling::w4(scratch, &id, args).await?);
        }
        scratch.drop_session(&id).await?;
    }
    if wants(WorkloadArg::W2) {
        rows.push(writes::w2(scratch, args).await?);
    }
    if wants(WorkloadArg::Scaling) {
        rows.extend(scaling::scaling(scratch, args).await?);
    }
    if wants(WorkloadArg::Compaction) {
        rows.extend(compaction::compaction(scratch, args).await?);
    }
    Ok(())
}
