//! Multi-process and crash tests for backends that write locally (SQLite,
//! files): several processes on one store, and writers killed with SIGKILL.
//!
//! The children are the test binary itself, re-run with [`CHILD_ENV`] set
//! so that the generated `child_process_entry` test does the child's work
//! and prints one `ACK <seq> <event id>` line per acknowledged append.
//! Use [`crate::process_suite!`] to generate the tests.

use std::collections::HashMap;
use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use session_core::{
    EventView, Message, NewSession, SessionEvent, SessionRepository, SessionRepositoryExt,
};

/// Set in a child's environment: what it should do.
pub const CHILD_ENV: &str = "SESSION_TESTKIT_CHILD";

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The child's work; a no-op when the test binary runs normally.
pub fn child_entry<F, Fut>(open: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = Arc<dyn SessionRepository>>,
{
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return;
    };
    let var = |k: &str| std::env::var(k).unwrap();
    let (location, session, prefix) = (
        var("CHILD_STORE"),
        crate::sid(&var("CHILD_SESSION")),
        var("CHILD_PREFIX"),
    );
    let count: usize = var("CHILD_COUNT").parse().unwrap();
    rt().block_on(async move {
        let repo = open(location).await;
        let mut out = std::io::stdout().lock();
        for i in 0..count {
            let id = format!("{prefix}-{i}");
            let mut b = SessionEvent::builder(Message::user(format!("{prefix} says {i}"))).id(&id);
            if mode == "crash" && i % 7 == 0 {
                b = b.state("last", i);
            }
            let outcome = repo
                .append(&session, vec![b.build().unwrap()])
                .await
                .unwrap();
            writeln!(out, "ACK {} {id}", outcome.seqs[0]).unwrap();
            out.flush().unwrap();
        }
    });
}

fn spawn(mode: &str, location: &str, session: &str, prefix: &str, count: usize) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "child_process_entry",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, mode)
        .env("CHILD_STORE", location)
        .env("CHILD_SESSION", session)
        .env("CHILD_PREFIX", prefix)
        .env("CHILD_COUNT", count.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Collects a child's acknowledgements (event id → seq) until its stdout closes.
fn acks(child: &mut Child) -> std::thread::JoinHandle<HashMap<String, u64>> {
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        let mut acked = HashMap::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // The harness may print "test child_process_entry ... " on the same line;
            // a child killed mid-line leaves a partial last line, which is not counted.
            let Some(at) = line.find("ACK ") else {
                continue;
            };
            let mut parts = line[at + 4..].split(' ');
            if let (Some(Ok(seq)), Some(id)) = (parts.next().map(str::parse::<u64>), parts.next()) {
                acked.insert(id.to_owned(), seq);
            }
        }
        acked
    })
}

async fn setup(repo: &dyn SessionRepository) -> session_core::SessionId {
    repo.create(
        NewSession::new("app", "alice", chrono::Utc::now())
            .unwrap()
            .with_id("shared")
            .unwrap(),
    )
    .await
    .unwrap()
    .id
}

/// Appends per process in [`processes_lose_nothing`].
pub const PER_PROCESS: usize = 2000;

/// Four processes × 2,000 appends to one session: every acknowledged event is
/// stored once under its acknowledged seq, gapless, each process's events in order.
pub fn processes_lose_nothing<F, Fut>(location: &str, open: F, check: impl Fn(&str))
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Arc<dyn SessionRepository>>,
{
    let rt = rt();
    let repo = rt.block_on(open(location.to_owned()));
    let session = rt.block_on(setup(&*repo));
    let mut children: Vec<Child> = (0..4)
        .map(|p| spawn("append", location, &session, &format!("p{p}"), PER_PROCESS))
        .collect();
    let readers: Vec<_> = children.iter_mut().map(acks).collect();
    for c in &mut children {
        assert!(c.wait().unwrap().success(), "a child failed");
    }
    let mut acked = HashMap::new();
    for r in readers {
        acked.extend(r.join().unwrap());
    }
    let total = 4 * PER_PROCESS as u64;
    assert_eq!(acked.len() as u64, total);
    let archive = rt
        .block_on(repo.all_events(&session, EventView::Archive))
        .unwrap();
    let seqs: Vec<u64> = archive.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=total).collect::<Vec<u64>>());
    for e in &archive {
        assert_eq!(acked.get(&e.id), Some(&e.seq), "event {}", e.id);
    }
    for p in 0..4 {
        let prefix = format!("p{p}-");
        let mine: Vec<&str> = archive
            .iter()
            .filter(|e| e.id.starts_with(&prefix))
            .map(|e| e.id.as_str())
            .collect();
        let want: Vec<String> = (0..PER_PROCESS).map(|i| format!("p{p}-{i}")).collect();
        assert_eq!(mine, want, "each process's events keep their order");
    }
    check(location);
}

fn next_rand(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// `rounds` writers killed with SIGKILL at random moments: after each, the
/// store opens, passes `check`, holds every acknowledged event under its
/// acknowledged seq, seqs are gapless and the counters match the log.
pub fn killed_writers_lose_nothing<F, Fut>(
    location: &str,
    rounds: usize,
    open: F,
    check: impl Fn(&str),
) where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Arc<dyn SessionRepository>>,
{
    let rt = rt();
    let session = {
        let repo = rt.block_on(open(location.to_owned()));
        rt.block_on(setup(&*repo))
    };
    let mut seed = u64::from_le_bytes(uuid::Uuid::new_v4().as_bytes()[..8].try_into().unwrap()) | 1;
    eprintln!("crash test seed {seed}");
    let mut all: HashMap<String, u64> = HashMap::new();
    for round in 0..rounds {
        let mut child = spawn("crash", location, &session, &format!("r{round}"), 1_000_000);
        let reader = acks(&mut child);
        std::thread::sleep(Duration::from_millis(30 + next_rand(&mut seed) % 250));
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        all.extend(reader.join().unwrap());

        check(location);
        let repo = rt.block_on(open(location.to_owned()));
        // A write first: it is what recovers a torn or unacknowledged tail.
        rt.block_on(repo.append(
            &session,
            vec![SessionEvent::builder(Message::user("probe"))
                    .id(format!("probe-{round}"))
                    .build()
                    .unwrap()],
        ))
        .unwrap();
        let archive = rt
            .block_on(repo.all_events(&session, EventView::Archive))
            .unwrap();
        let seqs: Vec<u64> = archive.iter().map(|e| e.seq).collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "round {round}: seqs increase"
        );
        let stored: HashMap<&str, u64> = archive.iter().map(|e| (e.id.as_str(), e.seq)).collect();
        for (id, seq) in &all {
            assert_eq!(
                stored.get(id.as_str()),
                Some(seq),
                "round {round}: acknowledged {id} lost"
            );
        }
        let s = rt.block_on(repo.get(&session)).unwrap();
        assert_eq!(
            s.event_count,
            archive.len() as u64,
            "round {round}: counters match the log"
        );
    }
    assert!(!all.is_empty(), "the children made progress");
}

/// Generates the multi-process and crash tests for a local backend.
///
/// `$open` is a path to `async fn(String) -> Arc<dyn SessionRepository>`
/// opening the store at a location; `$location` a path to
/// `fn(&std::path::Path) -> String` naming the store inside a temp dir;
/// `$check` a path to `fn(&str)` run on the location after every crash
/// (an integrity check, or a no-op).
#[macro_export]
macro_rules! process_suite {
    ($open:path, $location:path, $check:path) => {
        /// The body of the child processes; a no-op when run as an ordinary test.
        #[test]
        fn child_process_entry() {
            $crate::process::child_entry($open);
        }

        #[test]
        fn processes_appending_to_one_store_lose_nothing() {
            let dir = $crate::tempfile::tempdir().unwrap();
            $crate::process::processes_lose_nothing(&$location(dir.path()), $open, $check);
        }

        #[test]
        fn full_disk_is_typed_and_recovers() {
            $crate::full_disk::full_disk_is_typed_and_recovers(
                "full_disk_is_typed_and_recovers",
                $location,
                $open,
                $check,
            );
        }

        #[test]
        fn killed_writers_lose_no_acknowledged_event() {
            let dir = $crate::tempfile::tempdir().unwrap();
            let rounds = ::std::env::var("CRASH_ROUNDS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(50);
            $crate::process::killed_writers_lose_nothing(
                &$location(dir.path()),
                rounds,
                $open,
                $check,
            );
        }
    };
}
