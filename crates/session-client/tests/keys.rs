//! The remote store behind a server with API keys: only an operator's key
//! may use the store routes it speaks.
#![allow(clippy::unwrap_used)] // a test: failing loudly is its job

use std::time::Duration;

use session_client::RemoteRepository;
use session_core::{AppName, ErrorKind, InMemoryRepository, NewSession, SessionRepository};
use session_server::{ApiKey, ApiKeys, KeyRole, SessionServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_remote_store_needs_an_operator_key() {
    let operator = ApiKey {
        name: "ops".into(),
        app: None,
        role: KeyRole::Admin,
        user: None,
    };
    let agent = ApiKey {
        name: "support-agent".into(),
        app: Some(AppName::new("support").unwrap()),
        role: KeyRole::Agent,
        user: None,
    };
    let (ops_key, line1) = ApiKeys::generate(&operator).unwrap();
    let (agent_key, line2) = ApiKeys::generate(&agent).unwrap();
    let keys = ApiKeys::parse(&format!("{line1}\n{line2}\n")).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = SessionServer::new(InMemoryRepository::new().shared()).with_api_keys(keys);
    let task = tokio::spawn(server.serve(listener, std::future::pending()));
    let timeout = Duration::from_secs(10);

    let no_key = RemoteRepository::connect_with(&base, None, timeout).await;
    assert_eq!(
        no_key.err().map(|e| e.kind()),
        Some(ErrorKind::Unauthorized)
    );
    let as_agent = RemoteRepository::connect_with(&base, Some(&agent_key), timeout).await;
    assert_eq!(
        as_agent.err().map(|e| e.kind()),
        Some(ErrorKind::NotFound),
        "hidden, not refused"
    );
    let ops = RemoteRepository::connect_with(&base, Some(&ops_key), timeout)
        .await
        .unwrap();
    let s = ops
        .create(NewSession::new("support", "ada", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    assert_eq!(ops.get(&s.id).await.unwrap().user_id, "ada");
    task.abort();
}
