//! W1–W4 through `RedisRepository` beside a raw baseline measured in the same
//! run: the commands an append needs (seq, body, id index, archive and
//! context sets, counters), pipelined in one round trip by the same client.
//!
//! `cargo bench -p session-redis --bench workloads` against `REDIS_URL`
//! (default the local server); see docs/performance.md.
#![allow(missing_docs, clippy::unwrap_used)]

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use redis::aio::ConnectionManager;
use session_core::{
    EventFilter, Message, NewSession, SearchQuery, SessionEvent, SessionId, SessionRepository,
};
use session_redis::RedisRepository;
use tokio::runtime::Runtime;

fn url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

fn text(i: usize) -> String {
    let words = [
        "alpha", "river", "stone", "cloud", "maple", "orbit", "piano", "delta",
    ];
    let mut s: Vec<&str> = (0..12)
        .map(|k| words[(i * 7 + k * 3) % words.len()])
        .collect();
    if i % 1000 == 0 {
        s.push("zanzibar");
    }
    s.join(" ")
}

fn rt() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

struct Bench {
    repo: RedisRepository,
    raw: ConnectionManager,
    prefix: String,
}

async fn setup() -> Bench {
    let prefix = format!("bench{}", uuid::Uuid::new_v4().simple());
    let repo = RedisRepository::builder(url())
        .prefix(&prefix)
        .connect()
        .await
        .unwrap();
    let raw = ConnectionManager::new(redis::Client::open(url()).unwrap())
        .await
        .unwrap();
    Bench { repo, raw, prefix }
}

impl Bench {
    async fn session(&self) -> SessionId {
        self.repo
            .create(NewSession::new("b", "u", chrono::Utc::now()).unwrap())
            .await
            .unwrap()
            .id
    }

    /// The raw append: what the script writes, pipelined, without checks or atomicity.
    async fn raw_append(
        mut raw: ConnectionManager,
        prefix: &str,
        session: &str,
        seq: usize,
        e: &SessionEvent,
    ) {
        let k = |x: &str| format!("{prefix}:raw:{{{session}}}:{x}");
        let body = serde_json::to_string(e).unwrap();
        redis::pipe()
            .cmd("HSET")
            .arg(k("ev"))
            .arg(seq)
            .arg(body)
            .ignore()
            .cmd("HSET")
            .arg(k("ids"))
            .arg(&e.id)
            .arg(seq)
            .ignore()
            .cmd("ZADD")
            .arg(k("arc"))
            .arg(seq)
            .arg(seq)
            .ignore()
            .cmd("ZADD")
            .arg(k("ctx"))
            .arg(seq)
            .arg(seq)
            .ignore()
            .cmd("HINCRBY")
            .arg(k("s"))
            .arg("version")
            .arg(1)
            .ignore()
            .cmd("HINCRBY")
            .arg(k("s"))
            .arg("event_count")
            .arg(1)
            .ignore()
            .query_async::<()>(&mut raw)
            .await
            .unwrap();
    }

    async fn cleanup(&mut self) {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}:*", self.prefix))
            .query_async(&mut self.raw)
            .await
            .unwrap();
        for chunk in keys.chunks(1000) {
            redis::cmd("DEL")
                .arg(chunk)
                .query_async::<()>(&mut self.raw)
                .await
                .unwrap();
        }
    }
}

fn appends(c: &mut Criterion) {
    const N: usize = 2_000;
    const CLIENTS: usize = 16;
    let rt = rt();
    let mut b = rt.block_on(setup());
    let mut g = c.benchmark_group("redis_w1_append");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements(N as u64));
    for clients in [1usize, CLIENTS] {
        for raw in [false, true] {
            let name = format!(
                "{}_{}_clients",
                if raw { "raw" } else { "library" },
                clients
            );
            g.bench_function(name, |bench| {
                bench.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let ids: Vec<SessionId> = rt.block_on(async {
                            let mut v = Vec::new();
                            for _ in 0..clients {
                                v.push(b.session().await);
                            }
                            v
                        });
                        let start = Instant::now();
                        rt.block_on(async {
                            let tasks = ids.iter().enumerate().map(|(t, id)| {
                                let repo = b.repo.clone();
                                let conn = b.raw.clone();
                                let prefix = b.prefix.clone();
                                let id = id.clone();
                                async move {
                                    for i in 0..N / clients {
                                        let e = SessionEvent::new(Message::user(text(t * N + i)));
                                        if raw {
                                            Bench::raw_append(
                                                conn.clone(),
                                                &prefix,
                                                &id,
                                                i + 1,
                                                &e,
                                            )
                                            .await;
                                        } else {
                                            repo.append(&id, vec![e]).await.unwrap();
                                        }
                                    }
                                }
                            });
                            futures::future::join_all(tasks).await;
                        });
                        total += start.elapsed();
                    }
                    total
                });
            });
        }
    }
    g.finish();
    rt.block_on(b.cleanup());
}

fn reads(c: &mut Criterion) {
    let rt = rt();
    let mut b = rt.block_on(setup());
    let mut ids = Vec::new();
    for n in [100_000usize, 1_000] {
        let id = rt.block_on(b.session());
        for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
            let batch = chunk
                .iter()
                .map(|i| SessionEvent::new(Message::user(text(*i))))
                .collect();
            rt.block_on(b.repo.append(&id, batch)).unwrap();
        }
        ids.push(id);
    }
    let mut g = c.benchmark_group("redis_w3_last_20");
    for (name, id) in [("100k", &ids[0]), ("1k", &ids[1])] {
        g.bench_with_input(BenchmarkId::new("library", name), id, |bench, id| {
            bench.iter(|| {
                rt.block_on(b.repo.events(id, &EventFilter::last(20)))
                    .unwrap()
            });
        });
    }
    g.finish();
    let mut g = c.benchmark_group("redis_w4_search_100k");
    g.sample_size(10);
    g.bench_function("library", |bench| {
        bench.iter(|| {
            rt.block_on(b.repo.search(&SearchQuery::in_session(&ids[0], "zanzibar")))
                .unwrap()
        });
    });
    g.finish();
    rt.block_on(b.cleanup());
}

criterion_group!(benches, appends, reads);
criterion_main!(benches);
