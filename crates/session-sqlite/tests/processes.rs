//! Several processes on one database file, and processes killed mid-append.
//!
//! The children are this same test binary, re-run with `SESSION_SQLITE_CHILD`
//! set so that `child_process_entry` does the child's work and prints one
//! `ACK <seq> <event id>` line per acknowledged append.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use session_core::{
    EventView, Message, NewSession, SessionEvent, SessionRepository, SessionRepositoryExt,
};
use session_sqlite::SqliteRepository;

const CHILD_ENV: &str = "SESSION_SQLITE_CHILD";

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The body of the child processes; a no-op when run as an ordinary test.
#[test]
fn child_process_entry() {
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return;
    };
    let db = std::env::var("CHILD_DB").unwrap();
    let session = std::env::var("CHILD_SESSION").unwrap();
    let prefix = std::env::var("CHILD_PREFIX").unwrap();
    let count: usize = std::env::var("CHILD_COUNT").unwrap().parse().unwrap();
    rt().block_on(async move {
        let repo = SqliteRepository::open(&db).await.unwrap();
        let mut out = std::io::stdout().lock();
        for i in 0..count {
            let id = format!("{prefix}-{i}");
            let mut builder =
                SessionEvent::builder(Message::user(format!("{prefix} says {i}"))).id(&id);
            if mode == "crash" && i % 7 == 0 {
                builder = builder.state("last", i);
            }
            let outcome = repo
                .append(&session, vec![builder.build().unwrap()])
                .await
                .unwrap();
            writeln!(out, "ACK {} {id}", outcome.seqs[0]).unwrap();
            out.flush().unwrap();
        }
    });
}

fn spawn_child(mode: &str, db: &Path, session: &str, prefix: &str, count: usize) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "child_process_entry",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, mode)
        .env("CHILD_DB", db)
        .env("CHILD_SESSION", session)
        .env("CHILD_PREFIX", prefix)
        .env("CHILD_COUNT", count.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Reads the child's acknowledgements until its stdout closes: (event id -> seq).
fn acks(child: &mut Child) -> std::thread::JoinHandle<HashMap<String, u64>> {
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        let mut acked = HashMap::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // The test harness may print "test child_process_entry ... " on the same line.
            let Some(at) = line.find("ACK ") else {
                continue;
            };
            // A child killed mid-line leaves a partial last line: not counted.
            let mut parts = line[at + 4..].split(' ');
            if let (Some(Ok(seq)), Some(id)) = (parts.next().map(str::parse::<u64>), parts.next()) {
                acked.insert(id.to_owned(), seq);
            }
        }
        acked
    })
}

fn integrity_ok(db: &Path) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let result: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(result, "ok");
}

async fn setup(db: &Path) -> (SqliteRepository, String) {
    let repo = SqliteRepository::open(db).await.unwrap();
    let s = repo
        .create(NewSession::new("app", "alice", chrono::Utc::now()).with_id("shared"))
        .await
        .unwrap();
    (repo, s.id)
}

/// Four processes appending to one session of one file lose nothing: every
/// acknowledged event is stored once, under its acknowledged seq, gapless.
#[test]
fn processes_appending_to_one_file_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("multi.db");
    let rt = rt();
    let (repo, session) = rt.block_on(setup(&db));
    let mut children: Vec<Child> = (0..4)
        .map(|p| spawn_child("append", &db, &session, &format!("p{p}"), 500))
        .collect();
    let readers: Vec<_> = children.iter_mut().map(acks).collect();
    for c in &mut children {
        assert!(c.wait().unwrap().success());
    }
    let mut acked = HashMap::new();
    for r in readers {
        acked.extend(r.join().unwrap());
    }
    assert_eq!(acked.len(), 2000);
    let archive = rt
        .block_on(repo.all_events(&session, EventView::Archive))
        .unwrap();
    let seqs: Vec<u64> = archive.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=2000).collect::<Vec<u64>>());
    for e in &archive {
        assert_eq!(acked.get(&e.id), Some(&e.seq), "event {}", e.id);
    }
    for p in 0..4 {
        let mine: Vec<String> = archive
            .iter()
            .filter(|e| e.id.starts_with(&format!("p{p}-")))
            .map(|e| e.id.clone())
            .collect();
        let want: Vec<String> = (0..500).map(|i| format!("p{p}-{i}")).collect();
        assert_eq!(mine, want, "each process's events keep their order");
    }
    integrity_ok(&db);
}

/// A tiny deterministic generator for kill delays (seeded per run, printed).
fn next_rand(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// SIGKILL at random moments during appends, 20 rounds on one file: after
/// each, the file passes `integrity_check`, every acknowledged event is there
/// under its acknowledged seq, and seqs are gapless.
#[test]
fn killed_writers_lose_no_acknowledged_event() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crash.db");
    let rt = rt();
    let (repo, session) = rt.block_on(setup(&db));
    drop(repo);
    let mut seed = u64::from_le_bytes(uuid::Uuid::new_v4().as_bytes()[..8].try_into().unwrap()) | 1;
    eprintln!("crash test seed {seed}");
    let mut all_acked: HashMap<String, u64> = HashMap::new();
    for round in 0..20 {
        let mut child = spawn_child("crash", &db, &session, &format!("r{round}"), 1_000_000);
        let reader = acks(&mut child);
        let delay = 30 + next_rand(&mut seed) % 250;
        std::thread::sleep(Duration::from_millis(delay));
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        all_acked.extend(reader.join().unwrap());

        integrity_ok(&db);
        let repo = rt.block_on(SqliteRepository::open(&db)).unwrap();
        let archive = rt
            .block_on(repo.all_events(&session, EventView::Archive))
            .unwrap();
        let seqs: Vec<u64> = archive.iter().map(|e| e.seq).collect();
        assert_eq!(
            seqs,
            (1..=archive.len() as u64).collect::<Vec<u64>>(),
            "round {round}: gapless"
        );
        let stored: HashMap<&str, u64> = archive.iter().map(|e| (e.id.as_str(), e.seq)).collect();
        for (id, seq) in &all_acked {
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
    assert!(!all_acked.is_empty(), "the children made progress");
}
