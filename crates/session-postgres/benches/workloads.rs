//! W1–W4 through `PostgresRepository`, each beside a raw tokio-postgres
//! baseline on the same tables, measured in the same run.
//!
//! `cargo bench -p session-postgres --bench workloads` against `POSTGRES_URL`
//! (default the local server); see docs/performance.md.
#![allow(missing_docs, clippy::unwrap_used)]

use std::cell::OnceCell;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use session_core::{
    EventFilter, Message, NewSession, SearchQuery, SessionEvent, SessionId, SessionRepository,
};
use session_postgres::PostgresRepository;
use tokio::runtime::Runtime;
use tokio_postgres::NoTls;

const WORDS: &[&str] = &[
    "alpha", "river", "stone", "cloud", "maple", "orbit", "piano", "delta", "ember", "grove",
    "lunar", "cedar", "north", "quartz", "amber", "harbor",
];

fn text(i: usize) -> String {
    let mut s = String::new();
    for k in 0..12 {
        s.push_str(WORDS[(i * 7 + k * 3) % WORDS.len()]);
        s.push(' ');
    }
    if i % 1000 == 0 {
        s.push_str("zanzibar");
    }
    s
}

fn url() -> String {
    std::env::var("POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

fn rt() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

struct Bench {
    repo: PostgresRepository,
    raw: tokio_postgres::Client,
    schema: String,
    head: tokio_postgres::Statement,
    insert: tokio_postgres::Statement,
    update: tokio_postgres::Statement,
}

async fn setup() -> Bench {
    let schema = format!("bench_{}", uuid::Uuid::new_v4().simple());
    let repo = PostgresRepository::builder(url())
        .schema(&schema)
        .connect()
        .await
        .unwrap();
    let (raw, conn) = tokio_postgres::connect(&url(), NoTls).await.unwrap();
    tokio::spawn(conn);
    let s = &schema;
    let head = raw
        .prepare(&format!(
            "SELECT last_seq, next_ctx_pos FROM \"{s}\".sessions WHERE id = $1 FOR UPDATE"
        ))
        .await
        .unwrap();
    let insert = raw
        .prepare(&format!(
            "INSERT INTO \"{s}\".events (session_id, seq, id, ctx_pos, ts, role, synthetic, \
             token_estimate, search_text, body) VALUES ($1, $2, $3, $4, $5, $6, false, $7, $8, $9)"
        ))
        .await
        .unwrap();
    let update = raw
        .prepare(&format!(
            "UPDATE \"{s}\".sessions SET version = version + 1, last_seq = $2, next_ctx_pos = $3, \
             event_count = event_count + 1 WHERE id = $1"
        ))
        .await
        .unwrap();
    Bench {
        repo,
        raw,
        schema,
        head,
        insert,
        update,
    }
}

impl Bench {
    async fn session(&self) -> SessionId {
        self.repo
            .create(NewSession::new("bench", "u", chrono::Utc::now()).unwrap())
            .await
            .unwrap()
            .id
    }

    /// The raw append: lock the row, insert, update the head, commit.
    async fn raw_append(&mut self, session: &str, e: &SessionEvent) {
        let tx = self.raw.transaction().await.unwrap();
        let row = tx.query_one(&self.head, &[&session]).await.unwrap();
        let (seq, pos): (i64, i64) = (row.get::<_, i64>(0) + 1, row.get(1));
        let body = serde_json::to_string(e).unwrap();
        tx.execute(
            &self.insert,
            &[
                &session,
                &seq,
                &e.id,
                &pos,
                &e.timestamp.timestamp_micros(),
                &"user",
                &i64::from(e.token_estimate),
                &e.message.text().to_lowercase(),
                &body,
            ],
        )
        .await
        .unwrap();
        tx.execute(&self.update, &[&session, &seq, &(pos + 1)])
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
}

fn event(i: usize) -> SessionEvent {
    SessionEvent::new(Message::user(text(i)))
}

/// W1 (one session, one call per event) and W2 (many sessions × 20 events).
fn appends(c: &mut Criterion) {
    const W1: usize = 2_000;
    const SESSIONS: usize = 100;
    let rt = rt();
    let mut bench = rt.block_on(setup());
    let mut g = c.benchmark_group("pg_w1_append_one_session");
    g.sample_size(10).measurement_time(Duration::from_secs(15));
    g.throughput(Throughput::Elements(W1 as u64));
    g.bench_function("library", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let id = rt.block_on(bench.session());
                let events: Vec<SessionEvent> = (0..W1).map(event).collect();
                let start = Instant::now();
                rt.block_on(async {
                    for e in events {
                        bench.repo.append(&id, vec![e]).await.unwrap();
                    }
                });
                total += start.elapsed();
            }
            total
        });
    });
    g.bench_function("raw", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let id = rt.block_on(bench.session());
                let events: Vec<SessionEvent> = (0..W1).map(event).collect();
                let start = Instant::now();
                rt.block_on(async {
                    for e in &events {
                        bench.raw_append(&id, e).await;
                    }
                });
                total += start.elapsed();
            }
            total
        });
    });
    g.finish();

    let mut g = c.benchmark_group("pg_w2_many_sessions");
    g.sample_size(10).measurement_time(Duration::from_secs(15));
    g.throughput(Throughput::Elements((SESSIONS * 20) as u64));
    for raw in [false, true] {
        g.bench_function(if raw { "raw" } else { "library" }, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let ids: Vec<SessionId> =
                        rt.block_on(async { futures_ids(&bench, SESSIONS).await });
                    let start = Instant::now();
                    rt.block_on(async {
                        for (s, id) in ids.iter().enumerate() {
                            for i in 0..20 {
                                let e = event(s * 20 + i);
                                if raw {
                                    bench.raw_append(id, &e).await;
                                } else {
                                    bench.repo.append(id, vec![e]).await.unwrap();
                                }
                            }
                        }
                    });
                    total += start.elapsed();
                }
                total
            });
        });
    }
    g.finish();
    rt.block_on(bench.repo.drop_schema()).unwrap();
}

async fn futures_ids(bench: &Bench, n: usize) -> Vec<SessionId> {
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        ids.push(bench.session().await);
    }
    ids
}

/// W3 (last 20 of 100,000 and of 1,000 events) and W4 (search in 100,000).
fn reads(c: &mut Criterion) {
    let rt = rt();
    let state = OnceCell::new();
    let get = || {
        state.get_or_init(|| {
            rt.block_on(async {
                let bench = setup().await;
                let mut ids = Vec::new();
                for n in [100_000usize, 1_000] {
                    let id = bench.session().await;
                    let mut i = 0;
                    while i < n {
                        let batch: Vec<SessionEvent> = (i..(i + 1000).min(n)).map(event).collect();
                        i += batch.len();
                        bench.repo.append(&id, batch).await.unwrap();
                    }
                    ids.push(id);
                }
                bench
                    .raw
                    .batch_execute(&format!("ANALYZE \"{}\".events", bench.schema))
                    .await
                    .unwrap();
                (bench, ids)
            })
        })
    };
    let mut g = c.benchmark_group("pg_w3_last_20");
    for (name, idx) in [("100k", 0), ("1k", 1)] {
        g.bench_function(BenchmarkId::new("library", name), |b| {
            let (bench, ids) = get();
            b.iter(|| {
                rt.block_on(bench.repo.events(&ids[idx], &EventFilter::last(20)))
                    .unwrap()
            });
        });
        g.bench_function(BenchmarkId::new("raw", name), |b| {
            let (bench, ids) = get();
            let sql = format!(
                "SELECT seq, body FROM \"{}\".events WHERE session_id = $1 AND ctx_pos IS NOT NULL \
                 ORDER BY ctx_pos DESC LIMIT 20",
                bench.schema
            );
            b.iter(|| {
                rt.block_on(async {
                    let rows = bench.raw.query(&sql, &[&ids[idx].as_str()]).await.unwrap();
                    rows.iter()
                        .map(|r| serde_json::from_str::<SessionEvent>(r.get(1)).unwrap())
                        .collect::<Vec<_>>()
                })
            });
        });
    }
    g.finish();
    let mut g = c.benchmark_group("pg_w4_search_100k");
    g.bench_function("library", |b| {
        let (bench, ids) = get();
        b.iter(|| {
            let hits = rt
                .block_on(
                    bench
                        .repo
                        .search(&SearchQuery::in_session(&ids[0], "zanzibar")),
                )
                .unwrap();
            assert_eq!(hits.items.len(), 10);
        });
    });
    g.bench_function("raw", |b| {
        let (bench, ids) = get();
        let sql = format!(
            "SELECT seq, body FROM \"{}\".events WHERE session_id = $1 AND search_text LIKE '%zanzibar%' \
             ORDER BY seq LIMIT 11",
            bench.schema
        );
        b.iter(|| {
            rt.block_on(async {
                let rows = bench.raw.query(&sql, &[&ids[0].as_str()]).await.unwrap();
                rows.iter()
                    .map(|r| serde_json::from_str::<SessionEvent>(r.get(1)).unwrap())
                    .collect::<Vec<_>>()
            })
        });
    });
    g.finish();
    if let Some((bench, _)) = state.get() {
        rt.block_on(bench.repo.drop_schema()).unwrap();
    }
}

criterion_group!(benches, appends, reads);
criterion_main!(benches);
