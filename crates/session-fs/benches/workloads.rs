//! W1, W3 and W4 through `FsRepository`, beside a raw baseline of the same
//! durability measured in the same run: one JSON line appended and fsynced
//! per event.
//!
//! `cargo bench -p session-fs --bench workloads`; see docs/performance.md.
#![allow(missing_docs, clippy::unwrap_used)]

use std::io::Write;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use session_core::{
    EventFilter, Message, NewSession, SearchQuery, SessionEvent, SessionRepository,
};
use session_fs::FsRepository;

fn text(i: usize) -> String {
    let words = [
        "alpha", "river", "stone", "cloud", "maple", "orbit", "piano", "delta",
    ];
    let mut s: Vec<&str> = (0..12)
        .map(|k| words[(i * 7 + k * 3) % words.len()])
        .collect();
    if i.is_multiple_of(1000) {
        s.push("zanzibar");
    }
    s.join(" ")
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn w1(c: &mut Criterion) {
    const N: usize = 500;
    let rt = rt();
    let mut g = c.benchmark_group("fs_w1_append_one_session");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function("library", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let dir = tempfile::tempdir().unwrap();
                let repo = rt.block_on(FsRepository::open(dir.path())).unwrap();
                let id = rt
                    .block_on(repo.create(NewSession::new("b", "u", chrono::Utc::now()).unwrap()))
                    .unwrap()
                    .id;
                let events: Vec<SessionEvent> = (0..N)
                    .map(|i| SessionEvent::new(Message::user(text(i))))
                    .collect();
                let start = Instant::now();
                rt.block_on(async {
                    for e in events {
                        repo.append(&id, vec![e]).await.unwrap();
                    }
                });
                total += start.elapsed();
            }
            total
        });
    });
    g.bench_function("raw_line_and_fsync", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let dir = tempfile::tempdir().unwrap();
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dir.path().join("events.jsonl"))
                    .unwrap();
                let events: Vec<SessionEvent> = (0..N)
                    .map(|i| SessionEvent::new(Message::user(text(i))))
                    .collect();
                let start = Instant::now();
                for e in &events {
                    let mut line = serde_json::to_vec(e).unwrap();
                    line.push(b'\n');
                    f.write_all(&line).unwrap();
                    f.sync_data().unwrap();
                }
                total += start.elapsed();
            }
            total
        });
    });
    g.finish();
}

fn reads(c: &mut Criterion) {
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    let repo = rt
        .block_on(FsRepository::builder(dir.path()).sync(false).open())
        .unwrap();
    let mut ids = Vec::new();
    for n in [10_000usize, 1_000] {
        let id = rt
            .block_on(repo.create(NewSession::new("b", "u", chrono::Utc::now()).unwrap()))
            .unwrap()
            .id;
        for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
            let batch = chunk
                .iter()
                .map(|i| SessionEvent::new(Message::user(text(*i))))
                .collect();
            rt.block_on(repo.append(&id, batch)).unwrap();
        }
        ids.push(id);
    }
    let mut g = c.benchmark_group("fs_w3_last_20");
    for (name, id) in [("10k", &ids[0]), ("1k", &ids[1])] {
        g.bench_with_input(BenchmarkId::new("library", name), id, |b, id| {
            b.iter(|| {
                rt.block_on(repo.events(id, &EventFilter::last(20)))
                    .unwrap()
            });
        });
    }
    g.finish();
    let mut g = c.benchmark_group("fs_w4_search_10k");
    g.bench_function("library", |b| {
        b.iter(|| {
            rt.block_on(repo.search(&SearchQuery::in_session(&ids[0], "zanzibar")))
                .unwrap()
        });
    });
    g.finish();
}

criterion_group!(benches, w1, reads);
criterion_main!(benches);
