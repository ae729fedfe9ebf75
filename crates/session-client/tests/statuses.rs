//! A query too long for a URL is `InvalidInput`, not a store failure:
//! whether the client cannot send it or the server refuses it with 414.
#![allow(clippy::unwrap_used)] // a test: failing loudly is its job

use std::time::Duration;

use session_client::RemoteRepository;
use session_core::{
    ErrorKind, EventFilter, InMemoryRepository, NewSession, SessionQuery, SessionRepository,
};
use session_server::SessionServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The first 300 characters of an error's report (a long query would fill the screen).
fn short(e: &session_core::SessionError) -> String {
    e.report().to_string().chars().take(300).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_too_long_for_a_url_is_invalid_input() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = SessionServer::new(InMemoryRepository::new().shared());
    let task = tokio::spawn(server.serve(listener, std::future::pending()));
    let remote =
        RemoteRepository::connect_with(&format!("http://{addr}"), None, Duration::from_secs(10))
            .await
            .unwrap();
    let s = remote
        .create(NewSession::new("support", "ada", chrono::Utc::now()).unwrap())
        .await
        .unwrap();

    let long = "w".repeat(100_000);
    let filter = EventFilter::archive().keyword(long.as_str()).page(0, 10);
    let err = remote.events(&s.id, &filter).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{}", short(&err));
    assert!(err.to_string().contains("request URL"), "{}", short(&err));
    let err = remote
        .list(&SessionQuery::new().user(long.as_str()).page(0, 10))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{}", short(&err));

    // The server refuses such a URL from any client with 414, which the
    // remote store reads as `InvalidInput` (see `status.rs`).
    let mut raw = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "GET /v1/sessions/{}/events?keyword={long} HTTP/1.1\r\nHost: {addr}\r\n\r\n",
        s.id
    );
    raw.write_all(request.as_bytes()).await.unwrap();
    let mut head = [0u8; 12];
    raw.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 414", "{}", String::from_utf8_lossy(&head));
    task.abort();
}
