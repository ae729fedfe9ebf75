//! W1–W4 through `SqliteRepository`, each beside a raw-rusqlite baseline of
//! the same schema and durability measured in the same run.
//!
//! `cargo bench -p session-sqlite --bench workloads`; see docs/performance.md.
#![allow(missing_docs, clippy::unwrap_used, clippy::cast_possible_wrap)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rusqlite::{params, Connection, TransactionBehavior};
use session_core::{
    EventFilter, Message, NewSession, SearchQuery, SessionEvent, SessionId, SessionRepository,
};
use session_sqlite::SqliteRepository;
use tokio::runtime::Runtime;

const SCHEMA: &str = include_str!("../migrations/0001_init.sql");
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

fn rt() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn library(path: &Path) -> Arc<SqliteRepository> {
    Arc::new(SqliteRepository::open(path).await.unwrap())
}

/// The library with indexing deferred past the benchmark (only searches would index).
async fn library_unindexed(path: &Path) -> Arc<SqliteRepository> {
    Arc::new(
        SqliteRepository::builder(path)
            .index_batch(usize::MAX)
            .open()
            .await
            .unwrap(),
    )
}

async fn new_session(repo: &SqliteRepository) -> SessionId {
    repo.create(NewSession::new("bench", "u", chrono::Utc::now()).unwrap())
        .await
        .unwrap()
        .id
}

/// The raw baseline: the same schema, WAL, synchronous = NORMAL, and the
/// same statements an append needs, written by hand.
struct Raw {
    conn: Connection,
    index: bool,
}

impl Raw {
    fn open(path: &Path, index: bool) -> Self {
        let conn = Connection::open(path).unwrap();
        conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
            .unwrap();
        conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        Self { conn, index }
    }

    fn session(&self, id: &str) {
        self.conn
            .execute(
                "INSERT INTO sessions VALUES (?1, 'bench', 'u', NULL, 'active', 0, 0, NULL, '{}', '{}', '{}', 0, 0, 0, 0, 1)",
                [id],
            )
            .unwrap();
    }

    fn append(&mut self, session: &str, event: &SessionEvent) {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .unwrap();
        let (last_seq, pos): (i64, i64) = tx
            .prepare_cached("SELECT last_seq, next_ctx_pos FROM sessions WHERE id = ?1")
            .unwrap()
            .query_row([session], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        let seq = last_seq + 1;
        let body = serde_json::to_string(event).unwrap();
        tx.prepare_cached(
            "INSERT INTO events (session_id, seq, id, ctx_pos, timestamp, role, branch, invocation_id, \
             synthetic, token_estimate, state_delta, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, NULL, 0, ?7, NULL, ?8)",
        )
        .unwrap()
        .execute(params![
            session,
            seq,
            event.id,
            pos,
            event.timestamp.timestamp_micros(),
            event.role().as_str(),
            event.token_estimate,
            body
        ])
        .unwrap();
        if self.index {
            let rowid = tx.last_insert_rowid();
            tx.prepare_cached("INSERT INTO events_fts (rowid, text) VALUES (?1, ?2)")
                .unwrap()
                .execute(params![rowid, event.message.text()])
                .unwrap();
        }
        tx.prepare_cached(
            "UPDATE sessions SET version = version + 1, last_seq = ?2, next_ctx_pos = ?3, \
             event_count = event_count + 1, context_tokens = context_tokens + ?4 WHERE id = ?1",
        )
        .unwrap()
        .execute(params![session, seq, pos + 1, event.token_estimate])
        .unwrap();
        tx.commit().unwrap();
    }
}

fn event(i: usize) -> SessionEvent {
    SessionEvent::new(Message::user(text(i)))
}

/// W1: append N events to one session, one call per event.
fn w1_append(c: &mut Criterion) {
    const N: usize = 10_000;
    let rt = rt();
    let mut g = c.benchmark_group("w1_append_one_session");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.throughput(Throughput::Elements(N as u64));
    for (name, unindexed) in [("library", false), ("library_index_deferred", true)] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let dir = tempfile::tempdir().unwrap();
                    let path = dir.path().join("b.db");
                    let repo = rt.block_on(async {
                        if unindexed {
                            library_unindexed(&path).await
                        } else {
                            library(&path).await
                        }
                    });
                    let id = rt.block_on(new_session(&repo));
                    let events: Vec<SessionEvent> = (0..N).map(event).collect();
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
    }
    for (name, index) in [("raw_with_fts", true), ("raw_without_fts", false)] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let dir = tempfile::tempdir().unwrap();
                    let mut raw = Raw::open(&dir.path().join("b.db"), index);
                    raw.session("s");
                    let events: Vec<SessionEvent> = (0..N).map(event).collect();
                    let start = Instant::now();
                    for e in &events {
                        raw.append("s", e);
                    }
                    total += start.elapsed();
                }
                total
            });
        });
    }
    g.finish();
}

/// W2: 1,000 sessions × 20 events.
fn w2_multi(c: &mut Criterion) {
    const SESSIONS: usize = 1_000;
    const PER: usize = 20;
    let rt = rt();
    let mut g = c.benchmark_group("w2_many_sessions");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.throughput(Throughput::Elements((SESSIONS * PER) as u64));
    g.bench_function("library", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let dir = tempfile::tempdir().unwrap();
                let repo = rt.block_on(library(&dir.path().join("b.db")));
                let start = Instant::now();
                rt.block_on(async {
                    for s in 0..SESSIONS {
                        let id = new_session(&repo).await;
                        for i in 0..PER {
                            repo.append(&id, vec![event(s * PER + i)]).await.unwrap();
                        }
                    }
                });
                total += start.elapsed();
            }
            total
        });
    });
    g.bench_function("raw_with_fts", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let dir = tempfile::tempdir().unwrap();
                let mut raw = Raw::open(&dir.path().join("b.db"), true);
                let start = Instant::now();
                for s in 0..SESSIONS {
                    let id = format!("s{s}");
                    raw.session(&id);
                    for i in 0..PER {
                        raw.append(&id, &event(s * PER + i));
                    }
                }
                total += start.elapsed();
            }
            total
        });
    });
    g.finish();
}

/// Fills a session with `n` events in batches of 1,000.
async fn filled(repo: &SqliteRepository, n: usize) -> SessionId {
    let id = new_session(repo).await;
    let mut i = 0;
    while i < n {
        let batch: Vec<SessionEvent> = (i..(i + 1000).min(n)).map(event).collect();
        i += batch.len();
        repo.append(&id, batch).await.unwrap();
    }
    id
}

/// W3 (last 20 of a large and of a small session) and W4 (keyword search over 100,000 events).
struct ReadSetup {
    _dir: tempfile::TempDir,
    repo: Arc<SqliteRepository>,
    raw: Connection,
    big: SessionId,
    small: SessionId,
}

fn read_setup(rt: &Runtime) -> ReadSetup {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reads.db");
    let repo = rt.block_on(library(&path));
    let big = rt.block_on(filled(&repo, 100_000));
    let small = rt.block_on(filled(&repo, 1_000));
    let raw = Connection::open(&path).unwrap();
    ReadSetup {
        _dir: dir,
        repo,
        raw,
        big,
        small,
    }
}

fn w3_w4_reads(c: &mut Criterion) {
    let rt = rt();
    // Built on first use, so that filtering other workloads skips it.
    let setup = std::cell::OnceCell::new();
    let setup = || setup.get_or_init(|| read_setup(&rt));

    let mut g = c.benchmark_group("w3_last_20");
    for (name, big) in [("100k", true), ("1k", false)] {
        let id = |s: &ReadSetup| if big { s.big.clone() } else { s.small.clone() };
        g.bench_function(BenchmarkId::new("library", name), |b| {
            let s = setup();
            let id = id(s);
            b.iter(|| {
                rt.block_on(s.repo.events(&id, &EventFilter::last(20)))
                    .unwrap()
            });
        });
        g.bench_function(BenchmarkId::new("raw", name), |b| {
            let s = setup();
            let id = id(s);
            b.iter(|| {
                let mut stmt = s
                    .raw
                    .prepare_cached(
                        "SELECT seq, body FROM events WHERE session_id = ?1 AND ctx_pos IS NOT NULL \
                         ORDER BY ctx_pos DESC LIMIT 20",
                    )
                    .unwrap();
                let rows: Vec<SessionEvent> = stmt
                    .query_map([id.as_str()], |r| r.get::<_, String>(1))
                    .unwrap()
                    .map(|b| serde_json::from_str(&b.unwrap()).unwrap())
                    .collect();
                rows
            });
        });
    }
    g.finish();

    let mut g = c.benchmark_group("w4_search_100k");
    g.bench_function("library", |b| {
        let s = setup();
        b.iter(|| {
            let hits = rt
                .block_on(s.repo.search(&SearchQuery::in_session(&s.big, "zanzibar")))
                .unwrap();
            assert_eq!(hits.items.len(), 10);
            hits
        });
    });
    g.bench_function("raw", |b| {
        let s = setup();
        b.iter(|| {
            let mut stmt = s
                .raw
                .prepare_cached(
                    "SELECT e.seq, e.body FROM events e WHERE e.session_id = ?1 AND e.rowid IN \
                     (SELECT rowid FROM events_fts WHERE events_fts MATCH '\"zanzibar\"') ORDER BY e.seq LIMIT 11",
                )
                .unwrap();
            let rows: Vec<SessionEvent> = stmt
                .query_map([s.big.as_str()], |r| r.get::<_, String>(1))
                .unwrap()
                .map(|b| serde_json::from_str(&b.unwrap()).unwrap())
                .collect();
            rows
        });
    });
    g.finish();
}

criterion_group!(benches, w1_append, w2_multi, w3_w4_reads);
criterion_main!(benches);
