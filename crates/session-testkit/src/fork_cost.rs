//! The cost of a store's fork against the portable one (export, cut in
//! core, import), measured in the same run, interleaved in pairs: what
//! each backend's `fork` bench prints.

use std::time::Instant;

use session_core::{
    fork_dump, ForkAt, Message, NewSession, SessionEvent, SessionId, SessionRepository,
};

/// Fills a session with `events` events of about 400 characters, then
/// forks it whole `pairs` times each way, alternating, and returns the
/// line to print: both medians and the median, fastest and slowest
/// ratio of the store's fork to the portable one.
pub async fn measure(repo: &dyn SessionRepository, events: usize, pairs: usize) -> String {
    let s = repo
        .create(NewSession::new("bench", "alice", chrono::Utc::now()).expect("session"))
        .await
        .expect("create");
    let batch: Vec<SessionEvent> = (0..events)
        .map(|i| {
            let text = format!("turn {i}: {}", "a tool result line ".repeat(20));
            let m = if i % 2 == 0 {
                Message::user(text)
            } else {
                Message::assistant(text)
            };
            SessionEvent::new(m)
        })
        .collect();
    for chunk in batch.chunks(500) {
        repo.append(&s.id, chunk.to_vec()).await.expect("append");
    }
    let at = ForkAt::Latest;
    let (mut native, mut portable) = (Vec::new(), Vec::new());
    for _ in 0..pairs.max(1) {
        let t = Instant::now();
        let f = repo
            .fork_session(&s.id, &at, SessionId::generate(), chrono::Utc::now())
            .await
            .expect("store's fork");
        native.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(f.event_count, u64::try_from(events).expect("count"));

        let t = Instant::now();
        let dump = repo.export_session(&s.id).await.expect("export");
        let fork = fork_dump(dump, &at, SessionId::generate(), chrono::Utc::now()).expect("plan");
        repo.import_session(fork).await.expect("import");
        portable.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let ratios: Vec<f64> = native.iter().zip(&portable).map(|(n, p)| n / p).collect();
    let (lo, hi) = ratios
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    format!(
        "fork of {events} events, {pairs} pairs: store {:.2} ms, export+import {:.2} ms (medians); \
         store/portable ratio median {:.2} (min {lo:.2}, max {hi:.2})",
        median(native),
        median(portable),
        median(ratios),
    )
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(f64::NAN)
}

/// `FORK_EVENTS` (default 1000) and `FORK_PAIRS` (default 15) from the environment.
pub fn settings() -> (usize, usize) {
    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    (env("FORK_EVENTS", 1000), env("FORK_PAIRS", 15))
}
