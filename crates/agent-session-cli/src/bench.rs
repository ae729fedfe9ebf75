//! `bench`: the W1–W4 workloads against whatever store `--store` names.

use std::io::Write;
use std::time::{Duration, Instant};

use agent_session::{
    EventFilter, Message, NewSession, SearchQuery, SessionEvent, SessionId, SessionRepository,
    SessionRepositoryExt,
};
use anyhow::Result;
use serde_json::{json, Value};

use crate::WorkloadArg;

fn text(i: usize) -> String {
    const WORDS: &[&str] = &[
        "alpha", "river", "stone", "cloud", "maple", "orbit", "piano", "delta",
    ];
    let mut s: Vec<&str> = (0..12)
        .map(|k| WORDS[(i * 7 + k * 3) % WORDS.len()])
        .collect();
    if i % 100 == 0 {
        s.push("zanzibar");
    }
    s.join(" ")
}

struct Sample {
    name: &'static str,
    ops: usize,
    events: usize,
    total: Duration,
    latencies: Vec<Duration>,
}

impl Sample {
    fn report(&mut self) -> Value {
        self.latencies.sort_unstable();
        let pct = |p: f64| {
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                clippy::cast_precision_loss
            )]
            let i = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
            self.latencies
                .get(i)
                .copied()
                .unwrap_or_default()
                .as_secs_f64()
                * 1e3
        };
        #[allow(clippy::cast_precision_loss)]
        let rate = self.events as f64 / self.total.as_secs_f64().max(1e-9);
        json!({"workload": self.name, "operations": self.ops, "events": self.events,
               "events_per_s": rate.round(), "p50_ms": pct(0.5), "p99_ms": pct(0.99)})
    }
}

async fn session(repo: &dyn SessionRepository) -> Result<SessionId> {
    Ok(repo
        .create(NewSession::new("bench", "bench", chrono::Utc::now())?)
        .await?
        .id)
}

async fn timed<F, Fut>(
    name: &'static str,
    ops: usize,
    events_per_op: usize,
    mut f: F,
) -> Result<Sample>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let mut latencies = Vec::with_capacity(ops);
    let start = Instant::now();
    for i in 0..ops {
        let t = Instant::now();
        f(i).await?;
        latencies.push(t.elapsed());
    }
    Ok(Sample {
        name,
        ops,
        events: ops.saturating_mul(events_per_op),
        total: start.elapsed(),
        latencies,
    })
}

pub(crate) async fn run(
    repo: &dyn SessionRepository,
    workload: WorkloadArg,
    events: usize,
    json_out: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let events = events.max(1);
    let mut created = Vec::new();
    let mut samples = Vec::new();
    let wants = |w: WorkloadArg| workload == WorkloadArg::All || workload == w;
    let result: Result<()> = async {
        if wants(WorkloadArg::Append) || wants(WorkloadArg::Read) || wants(WorkloadArg::Search) {
            let id = session(repo).await?;
            created.push(id.clone());
            let append = timed("append (one session, one call per event)", events, 1, |i| {
                let id = id.clone();
                async move {
                    repo.append(&id, vec![SessionEvent::new(Message::user(text(i)))])
                        .await?;
                    Ok(())
                }
            })
            .await?;
            if wants(WorkloadArg::Append) {
                samples.push(append);
            }
            if wants(WorkloadArg::Read) {
                samples.push(
                    timed("read (last 20 events)", 200, 20, |_| {
                        let id = id.clone();
                        async move {
                            repo.events(&id, &EventFilter::last(20)).await?;
                            Ok(())
                        }
                    })
                    .await?,
                );
                samples.push(
                    timed("read (full context)", 10, events, |_| {
                        let id = id.clone();
                        async move {
                            repo.all_events(&id, agent_session::EventView::Context)
                                .await?;
                            Ok(())
                        }
                    })
                    .await?,
                );
            }
            if wants(WorkloadArg::Search) {
                samples.push(
                    timed("search (keyword, first page)", 100, 1, |_| {
                        let id = id.clone();
                        async move {
                            repo.search(&SearchQuery::in_session(&id, "zanzibar"))
                                .await?;
                            Ok(())
                        }
                    })
                    .await?,
                );
            }
        }
        if wants(WorkloadArg::Multi) {
            let sessions = (events / 20).max(1);
            let mut ids = Vec::with_capacity(sessions);
            for _ in 0..sessions {
                ids.push(session(repo).await?);
            }
            created.extend(ids.iter().cloned());
            samples.push(
                timed(
                    "multi (sessions × 20 events, one call per event)",
                    sessions * 20,
                    1,
                    |i| {
                        let id = ids[i % sessions].clone();
                        async move {
                            repo.append(&id, vec![SessionEvent::new(Message::user(text(i)))])
                                .await?;
                            Ok(())
                        }
                    },
                )
                .await?,
            );
        }
        Ok(())
    }
    .await;
    for id in &created {
        let _ = repo.delete(id).await;
    }
    result?;
    let backend = repo.capabilities().backend;
    let reports: Vec<Value> = samples.iter_mut().map(Sample::report).collect();
    if json_out {
        writeln!(out, "{}", json!({"backend": backend, "results": reports}))?;
    } else {
        writeln!(out, "store: {backend}")?;
        for r in &reports {
            writeln!(
                out,
                "{:<48} {:>10} events/s   p50 {:>8.3} ms   p99 {:>8.3} ms",
                r["workload"].as_str().unwrap_or_default(),
                r["events_per_s"],
                r["p50_ms"].as_f64().unwrap_or_default(),
                r["p99_ms"].as_f64().unwrap_or_default()
            )?;
        }
    }
    Ok(())
}
