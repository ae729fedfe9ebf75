//! Scale-out: two `agent-session serve` processes over one PostgreSQL, 16
//! clients appending to shared sessions through both, and one server
//! killed mid-run. Nothing acknowledged is lost, nothing is stored twice,
//! and each session's seqs stay gapless.
#![allow(clippy::unwrap_used)]

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use agent_session::{
    EventFilter, EventView, Message, NewSession, RemoteRepository, SessionEvent, SessionId,
    SessionRepository,
};

const CLIENTS: usize = 16;
const APPENDS: usize = 40;
const SESSIONS: usize = 4;

fn pg_url() -> String {
    std::env::var("POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A server process, killed when dropped.
struct ServerProcess {
    child: Child,
    url: String,
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `agent-session serve` on a free loopback port and waits for the
/// line that says where it listens.
fn serve(store: &str) -> ServerProcess {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agent-session"))
        .args(["--store", store, "serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("the server exited before listening")
            .unwrap();
        if let Some(rest) = line.split(" on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
    };
    // Keep draining stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    ServerProcess { child, url }
}

/// Whether PostgreSQL answers; under CI it must.
fn postgres_up() -> bool {
    let up = std::net::TcpStream::connect("127.0.0.1:5432").is_ok()
        || std::env::var("POSTGRES_URL").is_ok();
    if !up {
        assert!(
            std::env::var("CI").is_err(),
            "CI=true: PostgreSQL must answer on 127.0.0.1:5432"
        );
        eprintln!("SKIPPED scale-out test: no PostgreSQL on 127.0.0.1:5432");
    }
    up
}

fn event(id: &str) -> SessionEvent {
    let mut e = SessionEvent::new(Message::user(format!("message {id}")));
    id.clone_into(&mut e.id);
    e
}

#[test]
fn two_servers_over_one_postgres_lose_nothing_when_one_dies() {
    if !postgres_up() {
        return;
    }
    let schema = format!("scale_{}", uuid::Uuid::new_v4().simple());
    let store = format!("{}?schema={schema}", pg_url());
    let a = serve(&store);
    let mut b = serve(&store);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let b_url = b.url.clone();
    rt.block_on(async {
        let timeout = Duration::from_secs(10);
        let via_a = Arc::new(
            RemoteRepository::connect_with(&a.url, None, timeout)
                .await
                .unwrap(),
        );
        let via_b = Arc::new(
            RemoteRepository::connect_with(&b_url, None, timeout)
                .await
                .unwrap(),
        );
        let mut sessions = Vec::new();
        for _ in 0..SESSIONS {
            let s = via_a
                .create(NewSession::new("scale", "ada", chrono::Utc::now()).unwrap())
                .await
                .unwrap();
            sessions.push(s.id);
        }
        let acked = Arc::new(AtomicUsize::new(0));
        let failovers = Arc::new(AtomicUsize::new(0));
        let mut clients = Vec::new();
        for c in 0..CLIENTS {
            let (via_a, via_b) = (via_a.clone(), via_b.clone());
            let (acked, failovers) = (acked.clone(), failovers.clone());
            let session = sessions[c % SESSIONS].clone();
            clients.push(tokio::spawn(async move {
                let mut seqs: Vec<(String, SessionId, u64)> = Vec::new();
                for n in 0..APPENDS {
                    let id = format!("c{c}-{n}");
                    // Alternate servers; after a failure, send the same event
                    // again through the other one (appends are idempotent by id).
                    let mut target = if n % 2 == 0 { &via_a } else { &via_b };
                    let mut tries = 0;
                    let seq = loop {
                        match target.append(&session, vec![event(&id)]).await {
                            Ok(outcome) => break outcome.seqs[0],
                            Err(e) => {
                                tries += 1;
                                assert!(tries < 20, "{id}: {e}");
                                failovers.fetch_add(1, Ordering::SeqCst);
                                target = &via_a;
                            }
                        }
                    };
                    acked.fetch_add(1, Ordering::SeqCst);
                    seqs.push((id, session.clone(), seq));
                }
                seqs
            }));
        }
        // Kill server B once a third of the writes are acknowledged.
        while acked.load(Ordering::SeqCst) < CLIENTS * APPENDS / 3 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        b.child.kill().unwrap();
        let mut acknowledged: HashMap<String, (SessionId, u64)> = HashMap::new();
        for client in clients {
            for (id, session, seq) in client.await.unwrap() {
                acknowledged.insert(id, (session, seq));
            }
        }
        assert_eq!(acknowledged.len(), CLIENTS * APPENDS);
        assert!(
            failovers.load(Ordering::SeqCst) > 0,
            "writes sent to the killed server went through the other one"
        );
        let mut stored = 0;
        for session in &sessions {
            let mut events = Vec::new();
            let mut after = None;
            loop {
                let mut filter = EventFilter::archive().view(EventView::Archive).page(0, 500);
                if let Some(seq) = after {
                    filter = filter.after(seq);
                }
                let page = via_a.events(session, &filter).await.unwrap();
                events.extend(page.items.iter().cloned());
                match page.next_after() {
                    Some(seq) => after = Some(seq),
                    None => break,
                }
            }
            let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
            let expected: Vec<u64> = (1..=u64::try_from(seqs.len()).unwrap()).collect();
            assert_eq!(seqs, expected, "seqs of {session} are gapless");
            let ids: HashSet<&str> = events.iter().map(|e| e.id.as_str()).collect();
            assert_eq!(
                ids.len(),
                events.len(),
                "no event of {session} is stored twice"
            );
            for e in &events {
                let (s, seq) = &acknowledged[&e.id];
                assert_eq!(
                    (s, *seq),
                    (session, e.seq),
                    "{} kept its acknowledged seq",
                    e.id
                );
            }
            stored += events.len();
        }
        assert_eq!(
            stored,
            CLIENTS * APPENDS,
            "every acknowledged write is stored"
        );
        // Clean up the schema through a library connection.
        let repo = agent_session::PostgresRepository::builder(pg_url())
            .schema(schema)
            .connect()
            .await
            .unwrap();
        repo.drop_schema().await.unwrap();
    });
    drop(a);
}
