//! The cost of a fork on SQLite: the native fork (rows copied with
//! `INSERT … SELECT`, bodies untouched) against the portable one (export,
//! cut in core, import) in the same run, interleaved in pairs.
//!
//! `cargo bench -p session-sqlite --bench fork` (from the workspace root);
//! `FORK_EVENTS` sets the session size (default 1000), `FORK_PAIRS` the
//! number of pairs (default 15).

use std::time::{Duration, Instant};

use session_core::{
    fork_dump, ForkAt, Message, NewSession, SessionEvent, SessionId, SessionRepository,
};
use session_sqlite::SqliteRepository;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let events = env("FORK_EVENTS", 1000);
    let pairs = env("FORK_PAIRS", 15);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = SqliteRepository::open(dir.path().join("fork.db"))
            .await
            .expect("open");
        let s = repo
            .create(NewSession::new("bench", "alice", chrono::Utc::now()).expect("session"))
            .await
            .expect("create");
        let batch: Vec<SessionEvent> = (0..events)
            .map(|i| {
                let text = format!("turn {i}: {}", "a tool result line ".repeat(20));
                let m = if i % 2 == 0 { Message::user(text) } else { Message::assistant(text) };
                SessionEvent::new(m)
            })
            .collect();
        for chunk in batch.chunks(500) {
            repo.append(&s.id, chunk.to_vec()).await.expect("append");
        }
        let at = ForkAt::Latest;
        let (mut native, mut portable) = (Vec::new(), Vec::new());
        for _ in 0..pairs {
            let t = Instant::now();
            let f = repo
                .fork_session(&s.id, &at, SessionId::generate(), chrono::Utc::now())
                .await
                .expect("native fork");
            native.push(t.elapsed());
            assert_eq!(f.event_count, u64::try_from(events).expect("count"));

            let t = Instant::now();
            let dump = repo.export_session(&s.id).await.expect("export");
            let fork = fork_dump(dump, &at, SessionId::generate(), chrono::Utc::now())
                .expect("plan");
            repo.import_session(fork).await.expect("import");
            portable.push(t.elapsed());
        }
        let ms = |d: &Duration| d.as_secs_f64() * 1000.0;
        let ratios: Vec<f64> = native
            .iter()
            .zip(&portable)
            .map(|(n, p)| ms(n) / ms(p))
            .collect();
        let (lo, hi) = ratios
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
        println!(
            "fork of {events} events, {pairs} pairs: native {:.2} ms, export+import {:.2} ms (medians); \
             native/portable ratio median {:.2} (min {lo:.2}, max {hi:.2})",
            median(native.iter().map(ms).collect()),
            median(portable.iter().map(ms).collect()),
            median(ratios.clone()),
        );
    });
}
