//! The write workloads: W1 (one session, one call per event) and W2 (many
//! sessions, round robin, over concurrent clients).

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_session::{SessionId, SessionRepository};
use anyhow::{anyhow, Result};
use indicatif::ProgressBar;
use tokio::task::JoinSet;

use super::events::event;
use super::raw::Raw;
use super::setup::Scratch;
use super::stats::{interleaved, progress, rate, Row, Unit};
use crate::cli::BenchArgs;

/// Appends events `range` one call each, over `clients` concurrent tasks,
/// op `i` going to `ids[i % ids.len()]`; to the store, or to the raw engine.
async fn appends(
    target: Target,
    ids: &Arc<Vec<SessionId>>,
    range: Range<usize>,
    clients: usize,
    bar: &ProgressBar,
) -> Result<Duration> {
    let clients = clients.max(1);
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for c in 0..clients {
        let (target, ids, bar, range) = (target.clone(), ids.clone(), bar.clone(), range.clone());
        tasks.spawn(async move {
            for i in range.skip(c).step_by(clients) {
                let id = ids
                    .get(i % ids.len().max(1))
                    .ok_or_else(|| anyhow!("no session to append to"))?;
                match &target {
                    Target::Store(repo) => {
                        repo.append(id, vec![event(i)]).await?;
                    }
                    Target::Raw(raw) => raw.append(id.as_str(), &event(i)).await?,
                }
                bar.inc(1);
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(start.elapsed())
}

/// Where a workload writes.
#[derive(Clone)]
enum Target {
    Store(Arc<dyn SessionRepository>),
    Raw(Arc<Raw>),
}

/// Runs `rounds` pairs of the same appends on the store and the raw engine
/// ([`interleaved`]); records events/s per pair.
async fn paired_appends(
    scratch: &Scratch,
    row: &mut Row,
    ids: &Arc<Vec<SessionId>>,
    per_round: usize,
    rounds: usize,
    clients: usize,
) -> Result<()> {
    let sides = if scratch.raw.is_some() { 2 } else { 1 };
    let bar = progress(per_round * rounds * sides, &row.workload);
    let range = |r: usize| r * per_round..(r + 1) * per_round;
    let store = Target::Store(scratch.repo.clone());
    let raw = scratch.raw.clone().map(Target::Raw);
    interleaved(
        rounds,
        scratch.raw.as_deref(),
        row,
        async |r| {
            let took = appends(store.clone(), ids, range(r), clients, &bar).await?;
            Ok(rate(per_round, took))
        },
        async |_, r| {
            let raw = raw.clone().ok_or_else(|| anyhow!("no raw engine"))?;
            let took = appends(raw, ids, range(r), clients, &bar).await?;
            Ok(rate(per_round, took))
        },
    )
    .await?;
    bar.finish_and_clear();
    Ok(())
}

/// W1: `--events` appends to one session, one call (and commit) each.
pub(crate) async fn w1(scratch: &Scratch, id: &SessionId, args: &BenchArgs) -> Result<Row> {
    let rounds = args.repeat.max(1);
    let per_round = (args.events / rounds).max(1);
    let mut row = Row::new(
        format!("W1 append: {} events to 1 session", per_round * rounds),
        Unit::EventsPerSec,
    );
    let ids = Arc::new(vec![id.clone()]);
    paired_appends(scratch, &mut row, &ids, per_round, rounds, 1).await?;
    Ok(row)
}

/// W2: 20 events to each of `--sessions` sessions, round robin, over `--clients` clients.
pub(crate) async fn w2(scratch: &mut Scratch, args: &BenchArgs) -> Result<Row> {
    let sessions = args.sessions.max(1);
    let mut ids = Vec::with_capacity(sessions);
    let bar = progress(sessions, "W2: creating sessions");
    for _ in 0..sessions {
        ids.push(scratch.session().await?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let rounds = args.repeat.max(1);
    let per_round = (sessions * 20 / rounds).max(1);
    let mut row = Row::new(
        format!(
            "W2 append: {sessions} sessions × 20, {} client{}",
            args.clients,
            if args.clients == 1 { "" } else { "s" }
        ),
        Unit::EventsPerSec,
    );
    paired_appends(
        scratch,
        &mut row,
        &Arc::new(ids),
        per_round,
        rounds,
        args.clients,
    )
    .await?;
    Ok(row)
}
