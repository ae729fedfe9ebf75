//! Tests that start their own Redis servers on loopback ports: two round
//! trips per append (command statistics), the whole suite on a three-master
//! cluster, and a proxy that cuts connections in the middle of appends.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::Arc;
use std::time::Duration;

use session_core::{
    EventView, Message, NewSession, SessionEvent, SessionRepository, SessionRepositoryExt,
    SharedClock,
};
use session_redis::RedisRepository;
use session_testkit::TestStore;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

static NEXT_PORT: AtomicU16 = AtomicU16::new(0);

/// A free loopback port for a server of this test process, whose cluster
/// bus port (+10,000) is free too: 20000..22000 and 30000..32000, below the
/// kernel's ephemeral range (32768 and up by default), so no client
/// connection of another test can be holding them.
fn port() -> u16 {
    let start = u16::try_from(std::process::id() % 40).unwrap() * 50;
    loop {
        let p = 20000 + (start + NEXT_PORT.fetch_add(1, Ordering::Relaxed)) % 2000;
        let free = |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
        if free(p) && free(p + 10_000) {
            return p;
        }
    }
}

/// redis-server processes killed when the test ends, pass or fail.
struct Servers(Vec<Child>, tempfile::TempDir);

impl Drop for Servers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn redis_available() -> bool {
    let found = Command::new("redis-server")
        .arg("--version")
        .output()
        .is_ok();
    if !found {
        session_testkit::skip::<()>("redis", "redis-server is not installed", false);
    }
    found
}

fn start(ports: &[u16], cluster: bool) -> Servers {
    let dir = tempfile::tempdir().unwrap();
    let mut children = Vec::new();
    for p in ports {
        let mut cmd = Command::new("redis-server");
        cmd.args([
            "--port",
            &p.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(dir.path())
        .arg("--logfile")
        .arg(dir.path().join(format!("redis-{p}.log")))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        if cluster {
            cmd.args([
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                &format!("nodes-{p}.conf"),
            ]);
        }
        children.push(cmd.spawn().unwrap());
    }
    let servers = Servers(children, dir);
    for p in ports {
        let mut up = false;
        for _ in 0..200 {
            if Command::new("redis-cli")
                .args(["-p", &p.to_string(), "ping"])
                .output()
                .is_ok_and(|o| o.stdout.starts_with(b"PONG"))
            {
                up = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            up,
            "redis-server on port {p} did not start; its log:\n{}",
            std::fs::read_to_string(servers.1.path().join(format!("redis-{p}.log")))
                .unwrap_or_default()
        );
    }
    servers
}

fn info(port: u16) -> HashMap<String, String> {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "info", "all"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.trim().split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// An append to a session this repository wrote last is one network round
/// trip: one `EVALSHA` writes the plan core made from the head the last
/// append left, after checking that head and the batch's ids; no other
/// command reaches the server (shown by `INFO commandstats` and `MONITOR`).
/// After another writer moved the head, the guess is refused and the
/// append reads (one more `EVALSHA`) and writes; the next is one again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_is_one_round_trip_from_the_head_it_left() {
    if !redis_available() {
        return;
    }
    let p = port();
    let _servers = start(&[p], false);
    let repo = RedisRepository::builder(format!("redis://127.0.0.1:{p}"))
        .connect()
        .await
        .unwrap();
    let s = repo
        .create(NewSession::new("app", "u", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    // Warm up: the first call may load the scripts.
    repo.append(&s.id, vec![SessionEvent::new(Message::user("warm-up"))])
        .await
        .unwrap();
    // MONITOR shows every command a client sends (and, tagged `lua`, those scripts run).
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut monitor = Command::new("redis-cli")
        .args(["-p", &p.to_string(), "monitor"])
        .stdout(log.reopen().unwrap())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = info(p);
    let n = 50;
    for i in 0..n {
        let e = SessionEvent::builder(Message::user(format!("m{i}")))
            .state("user:k", i)
            .build()
            .unwrap();
        repo.append(&s.id, vec![e]).await.unwrap();
    }
    let after = info(p);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = monitor.kill();
    let _ = monitor.wait();
    let calls = |m: &HashMap<String, String>, cmd: &str| -> u64 {
        m.get(&format!("cmdstat_{cmd}"))
            .and_then(|v| v.split(',').find_map(|kv| kv.strip_prefix("calls=")))
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    };
    assert_eq!(calls(&after, "evalsha") - calls(&before, "evalsha"), n);
    let text = std::fs::read_to_string(log.path()).unwrap();
    let from_clients: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("[0 127.0.0.1:") && !l.contains("\"info\""))
        .collect();
    assert_eq!(
        from_clients.len(),
        usize::try_from(n).unwrap(),
        "one command per append:\n{}",
        from_clients.join("\n")
    );
    assert!(from_clients
        .iter()
        .all(|l| l.contains("\"EVALSHA\"") || l.contains("\"evalsha\"")));

    // Another writer (another process) moves the head: a wrong guess costs
    // one refused script, then the append reads and writes as before.
    let other = RedisRepository::builder(format!("redis://127.0.0.1:{p}"))
        .connect()
        .await
        .unwrap();
    let by_other = SessionEvent::new(Message::user("from elsewhere"));
    other.append(&s.id, vec![by_other.clone()]).await.unwrap();
    let before = info(p);
    let out = repo
        .append(&s.id, vec![SessionEvent::new(Message::user("after"))])
        .await
        .unwrap();
    assert_eq!(calls(&info(p), "evalsha") - calls(&before, "evalsha"), 3);
    assert_eq!(out.seqs, vec![n + 3]);
    // Replaying the other writer's event through the guess writes nothing twice.
    other
        .append(&s.id, vec![SessionEvent::new(Message::user("again"))])
        .await
        .unwrap();
    let replay = other.append(&s.id, vec![by_other]).await.unwrap();
    assert_eq!(replay.seqs, vec![n + 2]);
    let archive = repo.all_events(&s.id, EventView::Archive).await.unwrap();
    assert_eq!(archive.len(), usize::try_from(n).unwrap() + 4);
}

/// The whole conformance suite on a three-master cluster started by the test.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_on_a_three_master_cluster() {
    if !redis_available() {
        return;
    }
    let ports = [port(), port(), port()];
    let _servers = start(&ports, true);
    let nodes: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let out = Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(&nodes)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    for p in ports {
        let mut ok = false;
        for _ in 0..100 {
            if info(p).is_empty() {
                continue;
            }
            let state = Command::new("redis-cli")
                .args(["-p", &p.to_string(), "cluster", "info"])
                .output()
                .unwrap();
            if String::from_utf8_lossy(&state.stdout).contains("cluster_state:ok") {
                ok = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(ok, "the cluster did not become ready");
    }
    let urls: Vec<String> = nodes.iter().map(|n| format!("redis://{n}")).collect();
    let factory = move |clock: SharedClock| {
        let urls = urls.clone();
        async move {
            let prefix = format!("c{}", uuid::Uuid::new_v4().simple());
            let repo = RedisRepository::cluster_builder(urls)
                .prefix(prefix)
                .clock(clock)
                .connect()
                .await
                .unwrap();
            Some(TestStore::new(repo))
        }
    };
    // Keys of one session share a slot; sessions spread over the masters.
    session_testkit::all_cases_in_sequence!(factory);
}

/// Forwards TCP between a client and Redis, cutting every connection after
/// a few forwarded chunks while `cutting` is set.
async fn proxy(listen: TcpListener, target: u16, cutting: Arc<AtomicBool>) {
    loop {
        let Ok((mut client, _)) = listen.accept().await else {
            return;
        };
        let cutting = cutting.clone();
        tokio::spawn(async move {
            let Ok(mut server) = TcpStream::connect(("127.0.0.1", target)).await else {
                return;
            };
            let mut budget = 6u32;
            let (mut a, mut b) = ([0u8; 16384], [0u8; 16384]);
            loop {
                tokio::select! {
                    n = client.read(&mut a) => {
                        let Ok(n) = n else { return };
                        if n == 0 || server.write_all(&a[..n]).await.is_err() { return; }
                    }
                    n = server.read(&mut b) => {
                        let Ok(n) = n else { return };
                        if n == 0 { return; }
                        if cutting.load(Ordering::Relaxed) {
                            budget = budget.saturating_sub(1);
                            if budget == 0 { return; } // drop both sides mid-stream
                        }
                        if client.write_all(&b[..n]).await.is_err() { return; }
                    }
                }
            }
        });
    }
}

/// Connections cut in the middle of appends: the client retries with the
/// same event ids until each append is acknowledged; at the end every event
/// is stored exactly once, seqs are gapless, and the version counts the
/// appends that wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_connections_lose_and_duplicate_nothing() {
    if !redis_available() {
        return;
    }
    let p = port();
    let _servers = start(&[p], false);
    let listen = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_port = listen.local_addr().unwrap().port();
    let cutting = Arc::new(AtomicBool::new(false));
    tokio::spawn(proxy(listen, p, cutting.clone()));
    let repo = RedisRepository::builder(format!("redis://127.0.0.1:{proxy_port}"))
        .connect()
        .await
        .unwrap();
    let s = repo
        .create(NewSession::new("app", "u", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    cutting.store(true, Ordering::Relaxed);
    let (mut retries, n) = (0, 60u64);
    for i in 0..n {
        let e = SessionEvent::builder(Message::user(format!("event {i}")))
            .id(format!("e{i}"))
            .build()
            .unwrap();
        let mut attempts = 0;
        loop {
            attempts += 1;
            match repo.append(&s.id, vec![e.clone()]).await {
                Ok(_) => break,
                Err(err) => {
                    assert!(err.is_retryable(), "a cut connection is retryable: {err}");
                    retries += 1;
                    assert!(attempts < 50, "never got through");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
    cutting.store(false, Ordering::Relaxed);
    assert!(retries > 0, "the proxy did cut connections");
    let direct = RedisRepository::builder(format!("redis://127.0.0.1:{p}"))
        .connect()
        .await
        .unwrap();
    let archive = direct.all_events(&s.id, EventView::Archive).await.unwrap();
    let ids: Vec<String> = archive.iter().map(|e| e.id.clone()).collect();
    assert_eq!(
        ids,
        (0..n).map(|i| format!("e{i}")).collect::<Vec<_>>(),
        "each event once, in order"
    );
    let seqs: Vec<u64> = archive.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=n).collect::<Vec<_>>());
    let session = direct.get(&s.id).await.unwrap();
    assert_eq!(
        session.version, n,
        "one version per append that wrote; retries wrote nothing"
    );
    assert_eq!(session.event_count, n);
}
