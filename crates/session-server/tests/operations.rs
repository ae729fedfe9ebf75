//! Operating the server: metrics and request ids, the OpenAPI document,
//! rate and time limits, TLS.
#![allow(clippy::unwrap_used)] // a test: failing loudly is its job

mod support;

use reqwest::{header, Client, StatusCode};
use serde_json::{json, Value};
use session_core::InMemoryRepository;
use session_server::SessionServer;
use support::{keys, problem, secret, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_by_route_errors_by_kind_and_time_the_store() {
    let server = start(SessionServer::new(InMemoryRepository::new().shared())).await;
    let http = Client::new();
    let sessions = format!("{}/v1/apps/support/users/ada/sessions", server.base);
    let r = http.post(&sessions).json(&json!({})).send().await.unwrap();
    let generated = r
        .headers()
        .get("x-request-id")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        generated.len(),
        36,
        "a new request gets a UUID: {generated}"
    );
    let r = http
        .get(format!("{sessions}/nope"))
        .header("x-request-id", "trace-42")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers().get("x-request-id").unwrap(),
        "trace-42",
        "a caller's id is kept"
    );
    let text = http
        .get(format!("{}/metrics", server.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let has = |needle: &str| text.lines().any(|l| l.contains(needle));
    assert!(
        has(
            r#"agent_session_http_requests_total{method="POST",route="/v1/apps/{app}/users/{user}/sessions",status="201"} 1"#
        ),
        "{text}"
    );
    assert!(
        has(r#"agent_session_http_errors_total{kind="not_found"} 1"#),
        "{text}"
    );
    assert!(
        has(r#"agent_session_store_call_duration_seconds_count{backend="memory",op="create"} 1"#),
        "{text}"
    );
    assert!(
        has(r#"agent_session_store_errors_total{backend="memory",op="get",kind="not_found"} 1"#),
        "{text}"
    );
    assert!(!text.contains("nope"), "no ids or content in metrics");
}

/// The served OpenAPI document is the checked-in `docs/openapi.json`
/// (regenerate it with `UPDATE_OPENAPI=1 cargo test -p session-server --test operations`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_openapi_document_is_the_checked_in_one() {
    let server = start(SessionServer::new(InMemoryRepository::new().shared())).await;
    let served = Client::new()
        .get(format!("{}/openapi.json", server.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(served, session_server::openapi::document());
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, &served).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == served,
        "docs/openapi.json is not the served document: regenerate it with \
         UPDATE_OPENAPI=1 cargo test -p session-server --test operations"
    );
    let doc: Value = serde_json::from_str(&served).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["paths"]["/v1/apps/{app}/users/{user}/sessions/{id}/messages"]["post"].is_object());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_over_its_rate_gets_429_with_retry_after_and_others_go_on() {
    let (keys, secrets) = keys();
    let one = std::num::NonZeroU32::new(1).unwrap();
    let server = start(
        SessionServer::new(InMemoryRepository::new().shared())
            .with_api_keys(keys)
            .with_rate_limit(one, std::num::NonZeroU32::new(2).unwrap()),
    )
    .await;
    let http = Client::new();
    let url = format!("{}/v1/apps/support/users/ada/sessions", server.base);
    let agent = secret(&secrets, "support-agent");
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let r = http.get(&url).bearer_auth(agent).send().await.unwrap();
        statuses.push(r.status());
        if r.status() == StatusCode::TOO_MANY_REQUESTS {
            assert!(r.headers().get(header::RETRY_AFTER).is_some());
            let (_, body) = problem(r).await;
            assert_eq!(body["kind"], "unavailable", "a client retries it later");
        }
    }
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ],
        "a burst of 2, then the rate"
    );
    let admin = secret(&secrets, "support-admin");
    let r = http.get(&url).bearer_auth(admin).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK, "each key has its own rate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_time_limit_is_503_unavailable() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = start(
        SessionServer::new(InMemoryRepository::new().shared())
            .with_request_timeout(std::time::Duration::from_millis(200)),
    )
    .await;
    // A client that announces a body and stalls after a part of it.
    let addr = server.base.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    socket
        .write_all(
            b"POST /v1/apps/support/users/ada/sessions HTTP/1.1\r\nhost: x\r\n\
              content-type: application/json\r\ncontent-length: 100\r\n\r\n{\"id\":",
        )
        .await
        .unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        let mut buf = [0u8; 4096];
        loop {
            let n = socket.read(&mut buf).await.unwrap();
            answer.extend_from_slice(&buf[..n]);
            if n == 0 || String::from_utf8_lossy(&answer).contains("\"kind\"") {
                break;
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "the server answered before the client gave up"
    );
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(
        text.contains("\"kind\":\"unavailable\"") && text.contains("took longer"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_the_api_answers_and_a_broken_handshake_holds_up_no_one() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let tls = session_server::TlsConfig::from_pem_files(
        &data.join("localhost.crt"),
        &data.join("localhost.key"),
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = SessionServer::new(InMemoryRepository::new().shared());
    let task = tokio::spawn(async move {
        server
            .serve_tls(listener, &tls, std::future::pending())
            .await
    });
    // A client that connects and never speaks TLS.
    let _stalled = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let ca = reqwest::Certificate::from_pem(&std::fs::read(data.join("ca.crt")).unwrap()).unwrap();
    let https = Client::builder().add_root_certificate(ca).build().unwrap();
    let r = https
        .post(format!(
            "https://localhost:{port}/v1/apps/support/users/ada/sessions"
        ))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let plain = Client::new()
        .get(format!("http://localhost:{port}/healthz"))
        .send()
        .await;
    assert!(
        plain.is_err() || !plain.unwrap().status().is_success(),
        "plain HTTP is not served"
    );
    // A key file that is not PEM is refused with the path named.
    let bad = session_server::TlsConfig::from_pem_files(
        &data.join("localhost.crt"),
        &data.join("missing.key"),
    );
    assert!(bad.err().is_some_and(|e| e.to_string().contains("TLS key")));
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_finishes_the_request_in_flight() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let repo = InMemoryRepository::new().shared();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(SessionServer::new(repo.clone()).serve(listener, async {
        let _ = stopped.await;
    }));
    // A create whose body is half sent when the shutdown starts.
    let body = br#"{"id": "in-flight"}"#;
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /v1/apps/support/users/ada/sessions HTTP/1.1\r\nhost: x\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    socket.write_all(&body[..5]).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    stop.send(()).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    socket.write_all(&body[5..]).await.unwrap();
    let mut answer = String::new();
    socket.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    let served = tokio::time::timeout(std::time::Duration::from_secs(10), server).await;
    assert!(
        matches!(served, Ok(Ok(Ok(())))),
        "the server stopped after answering"
    );
    let id = session_core::SessionId::new("in-flight").unwrap();
    assert!(session_core::SessionRepository::get(repo.as_ref(), &id)
        .await
        .is_ok());
    // New connections are refused once it stopped.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}
