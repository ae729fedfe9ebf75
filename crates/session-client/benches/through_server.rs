//! What the server costs: the same store used in-process and through a
//! `session-server` over loopback HTTP, measured in the same run,
//! interleaved in pairs.
//!
//! `cargo bench -p session-client --bench through_server` prints, for
//! SQLite and PostgreSQL (`POSTGRES_URL`, default the local server):
//! - appends at 16 clients (each appends one event at a time to its own
//!   session): events/s in-process and through the server, and the ratio
//!   per pair (median, fastest, slowest);
//! - reading the last 20 events of a 1,000-event session: latency in-process
//!   and through the server (p50, p99), and the server's added latency.
//!
//! `SERVER_PAIRS` (default 7) and `SERVER_APPENDS` (per client, default 50)
//! change the sizes.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::cast_precision_loss,
    clippy::cast_sign_loss
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use session_client::RemoteRepository;
use session_core::{EventFilter, Message, NewSession, SessionEvent, SessionId, SessionRepository};
use session_server::SessionServer;

const CLIENTS: usize = 16;

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let i = ((v.len() - 1) as f64 * p).round() as usize;
    v[i]
}

fn median(v: Vec<f64>) -> f64 {
    percentile(v, 0.5)
}

fn event(i: usize) -> SessionEvent {
    SessionEvent::new(Message::user(format!(
        "turn {i}: the user asks about order ORD-{i} and the agent looks it up"
    )))
}

/// Events/s of 16 clients appending `appends` events each, one per call.
async fn appends_per_second(repo: Arc<dyn SessionRepository>, appends: usize) -> f64 {
    let mut sessions = Vec::new();
    for _ in 0..CLIENTS {
        let s = repo
            .create(NewSession::new("bench", "ada", chrono::Utc::now()).unwrap())
            .await
            .unwrap();
        sessions.push(s.id);
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for id in sessions {
        let repo = repo.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..appends {
                repo.append(&id, vec![event(i)]).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    (CLIENTS * appends) as f64 / started.elapsed().as_secs_f64()
}

/// Latencies (ms) of `calls` reads of the last 20 events of `id`.
async fn last_20_latencies(repo: &dyn SessionRepository, id: &SessionId, calls: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        let page = repo.events(id, &EventFilter::last(20)).await.unwrap();
        out.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(page.items.len(), 20);
    }
    out
}

async fn measure(name: &str, local: Arc<dyn SessionRepository>) {
    let pairs = setting("SERVER_PAIRS", 7);
    let appends = setting("SERVER_APPENDS", 50);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server =
        tokio::spawn(SessionServer::new(local.clone()).serve(listener, std::future::pending()));
    let remote: Arc<dyn SessionRepository> = Arc::new(
        RemoteRepository::connect_with(&format!("http://{addr}"), None, Duration::from_secs(30))
            .await
            .unwrap(),
    );

    let (mut inproc, mut served, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for pair in 0..pairs {
        // Alternate which goes first, so neither always meets a warmer cache.
        let (a, b) = if pair % 2 == 0 {
            let a = appends_per_second(local.clone(), appends).await;
            (a, appends_per_second(remote.clone(), appends).await)
        } else {
            let b = appends_per_second(remote.clone(), appends).await;
            (appends_per_second(local.clone(), appends).await, b)
        };
        inproc.push(a);
        served.push(b);
        ratios.push(b / a);
    }
    let (lo, hi) = ratios
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    println!(
        "{name}: appends at {CLIENTS} clients, {pairs} pairs: in-process {:.0} events/s, through \
         the server {:.0} events/s (medians); server/in-process ratio median {:.2} (min {lo:.2}, \
         max {hi:.2})",
        median(inproc),
        median(served),
        median(ratios)
    );

    let s = local
        .create(NewSession::new("bench", "ada", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    let batch: Vec<SessionEvent> = (0..1000).map(event).collect();
    for chunk in batch.chunks(250) {
        local.append(&s.id, chunk.to_vec()).await.unwrap();
    }
    let (mut l, mut r) = (Vec::new(), Vec::new());
    for _ in 0..pairs {
        l.extend(last_20_latencies(local.as_ref(), &s.id, 50).await);
        r.extend(last_20_latencies(remote.as_ref(), &s.id, 50).await);
    }
    let (l50, l99) = (percentile(l.clone(), 0.5), percentile(l, 0.99));
    let (r50, r99) = (percentile(r.clone(), 0.5), percentile(r, 0.99));
    println!(
        "{name}: last 20 of 1,000 events: in-process p50 {l50:.3} ms p99 {l99:.3} ms; through the \
         server p50 {r50:.3} ms p99 {r99:.3} ms; added by the server p50 {:.3} ms p99 {:.3} ms",
        r50 - l50,
        r99 - l99
    );
    server.abort();
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let sqlite = session_sqlite::SqliteRepository::open(dir.path().join("bench.db"))
            .await
            .unwrap();
        measure("sqlite", Arc::new(sqlite)).await;

        let url = std::env::var("POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        let schema = format!("bench_{}", uuid::Uuid::new_v4().simple());
        match session_postgres::PostgresRepository::builder(url.as_str())
            .schema(schema)
            .pool_size(16)
            .connect()
            .await
        {
            Ok(pg) => {
                measure("postgres", Arc::new(pg.clone())).await;
                pg.drop_schema().await.unwrap();
            }
            Err(e) => println!("postgres: skipped, no PostgreSQL at {url}: {e}"),
        }
    });
}
