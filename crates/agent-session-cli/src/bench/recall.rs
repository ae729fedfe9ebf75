//! `bench --workload recall`: search at scale. Two sessions (N/10 and N
//! events of ~250-byte agent messages) on the store under test; per size, a
//! selective two-word query (10 hits per 10,000 events, one of its words
//! also alone elsewhere), a frequent word (in every event), and a read of
//! the last 20 events as the store's own floor, run in interleaved rounds.
//! Each figure is the median with its 10th–90th percentile spread, and the
//! ratio of the median to the floor's.

use std::io::Write;
use std::time::{Duration, Instant};

use agent_session::{
    EventFilter, Message, NewSession, SearchQuery, SessionEvent, SessionId, SessionRepository,
};
use anyhow::{ensure, Result};
use serde_json::{json, Value};

/// Rounds of (selective, frequent, floor).
const ROUNDS: usize = 31;
/// Events per append while filling.
const FILL_BATCH: usize = 1000;

/// Event `i`'s text: a tool-using agent's chatter, with the planted words.
fn text(i: usize) -> String {
    const WORDS: &[&str] = &[
        "shipment",
        "customer",
        "warehouse",
        "invoice",
        "tracking",
        "carrier",
        "refund",
        "address",
        "delivery",
        "package",
        "status",
        "update",
    ];
    let mut s = format!("turn {i}: ");
    for k in 0..30 {
        s.push_str(WORDS[(i * 7 + k * 5) % WORDS.len()]);
        s.push(' ');
    }
    match i % 1000 {
        500 => s.push_str("the customer's locker is 4711"),
        250 => s.push_str("a locker was mentioned"),
        _ => s.push_str("nothing planted"),
    }
    s
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Median, 10th and 90th percentile of `v` in ms.
fn spread(mut v: Vec<Duration>) -> (f64, f64, f64) {
    v.sort_unstable();
    let at = |p: usize| {
        v.get(v.len().saturating_sub(1).saturating_mul(p) / 100)
            .copied()
            .map_or(0.0, millis)
    };
    (at(50), at(10), at(90))
}

async fn fill(repo: &dyn SessionRepository, n: usize) -> Result<SessionId> {
    let id = repo
        .create(NewSession::new(
            "bench",
            "bench-recall",
            chrono::Utc::now(),
        )?)
        .await?
        .id;
    let mut i = 0;
    while i < n {
        let end = (i + FILL_BATCH).min(n);
        let batch = (i..end)
            .map(|k| SessionEvent::new(Message::user(text(k))))
            .collect();
        repo.append(&id, batch).await?;
        i = end;
    }
    Ok(id)
}

async fn time<F: std::future::Future<Output = Result<usize>>>(f: F) -> Result<(Duration, usize)> {
    let t = Instant::now();
    let hits = f.await?;
    Ok((t.elapsed(), hits))
}

/// Runs the recall workload with `events` as the larger session's size.
pub(crate) async fn run(
    repo: &dyn SessionRepository,
    events: usize,
    json_out: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let large = events.max(1000);
    let mut reports: Vec<Value> = Vec::new();
    let mut created = Vec::new();
    let result: Result<()> = async {
        for n in [large / 10, large] {
            let id = fill(repo, n).await?;
            created.push(id.clone());
            let selective = SearchQuery::in_session(id.as_str(), "locker 4711");
            let frequent = SearchQuery::in_session(id.as_str(), "warehouse");
            // The first search may build an index (Redis, files): not timed.
            repo.search(&selective).await?;
            let (mut sel, mut freq, mut floor) = (Vec::new(), Vec::new(), Vec::new());
            let mut hits = (0, 0);
            for _ in 0..ROUNDS {
                let (d, h) = time(async { Ok(repo.search(&selective).await?.items.len()) }).await?;
                sel.push(d);
                hits.0 = h;
                let (d, h) = time(async { Ok(repo.search(&frequent).await?.items.len()) }).await?;
                freq.push(d);
                hits.1 = h;
                let (d, _) =
                    time(async { Ok(repo.events(&id, &EventFilter::last(20)).await?.items.len()) })
                        .await?;
                floor.push(d);
            }
            ensure!(
                hits.0 == (n / 1000).min(10),
                "the selective query found {} hits",
                hits.0
            );
            let floor = spread(floor);
            for (name, v) in [
                ("selective two words (\"locker 4711\")", sel),
                ("frequent word (\"warehouse\")", freq),
            ] {
                let (median, p10, p90) = spread(v);
                reports.push(json!({
                    "events": n, "query": name, "median_ms": median, "p10_ms": p10, "p90_ms": p90,
                    "last_20_median_ms": floor.0,
                    "ratio_to_last_20": median / floor.0.max(1e-6),
                }));
            }
        }
        Ok(())
    }
    .await;
    for id in &created {
        let _ = repo.delete(id).await;
    }
    result?;
    let backend = repo.capabilities().backend;
    if json_out {
        writeln!(out, "{}", json!({"backend": backend, "recall": reports}))?;
        return Ok(());
    }
    writeln!(
        out,
        "store: {backend}; {ROUNDS} interleaved rounds, median [p10–p90]"
    )?;
    for r in &reports {
        writeln!(
            out,
            "{:>7} events  {:<36} {:>8.3} ms [{:.3}–{:.3}]   {:>6.1}× last-20 read",
            r["events"],
            r["query"].as_str().unwrap_or_default(),
            r["median_ms"].as_f64().unwrap_or_default(),
            r["p10_ms"].as_f64().unwrap_or_default(),
            r["p90_ms"].as_f64().unwrap_or_default(),
            r["ratio_to_last_20"].as_f64().unwrap_or_default(),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_planted_pair_is_selective_and_the_frequent_word_everywhere() {
        let q = agent_session::ParsedQuery::parse("locker 4711").unwrap();
        let hits = (0..10_000).filter(|i| q.matches(&text(*i))).count();
        assert_eq!(hits, 10);
        let one_word = (0..10_000).filter(|i| text(*i).contains("locker")).count();
        assert_eq!(one_word, 20);
        assert!((0..1000).all(|i| text(i).contains("warehouse")));
        assert!(text(3).len() > 200);
    }
}
