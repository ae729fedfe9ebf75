//! `POST /v1/sessions/{id}/prune` removes only archived events outside the
//! context: a context event or a seq the archive lacks is a 400 problem
//! (`invalid_input`) naming the seq, and nothing is pruned.
#![allow(clippy::unwrap_used)] // a test: failing loudly is its job

mod support;

use reqwest::{header, Client, StatusCode};
use serde_json::{json, Value};
use session_core::{InMemoryRepository, Message, NewSession, SessionEvent};
use session_server::SessionServer;
use support::{json_of, problem, start};

/// The seqs of the events a view of the session at `url` holds.
async fn seqs(http: &Client, url: &str, view: &str) -> Vec<u64> {
    let page = json_of(http.get(format!("{url}/events?view={view}&page_size=100"))).await;
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect()
}

async fn version(http: &Client, url: &str) -> u64 {
    json_of(http.get(format!("{url}/version"))).await["version"]
        .as_u64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prune_route_refuses_context_events_and_seqs_the_archive_lacks() {
    let server = start(SessionServer::new(InMemoryRepository::new().shared())).await;
    let http = Client::new();
    let base = &server.base;
    let new = NewSession::new("support", "ada", chrono::Utc::now()).unwrap();
    let created = json_of(http.post(format!("{base}/v1/sessions")).json(&new)).await;
    let url = format!("{base}/v1/sessions/{}", created["id"].as_str().unwrap());
    let events: Vec<SessionEvent> = (1..=4)
        .map(|i| SessionEvent::new(Message::user(format!("m{i}"))))
        .collect();
    let r = http
        .post(format!("{url}/events"))
        .json(&events)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{}", r.text().await.unwrap());
    // The context keeps the last event only.
    let context = json_of(http.get(format!("{url}/events?view=context&page_size=100"))).await;
    let last = context["items"].as_array().unwrap().last().unwrap().clone();
    let v = version(&http, &url).await;
    let r = http
        .put(format!("{url}/context"))
        .header(header::IF_MATCH, format!("\"{v}\""))
        .json(&json!([last]))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    assert_eq!(seqs(&http, &url, "context").await, [4]);
    let v = version(&http, &url).await;

    for (asked, named) in [(json!([1, 4]), 4), (json!([2, 77]), 77)] {
        let r = http
            .post(format!("{url}/prune"))
            .header(header::IF_MATCH, format!("\"{v}\""))
            .json(&json!({ "seqs": asked }))
            .send()
            .await
            .unwrap();
        let (status, body) = problem(r).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{asked}: {body}");
        assert_eq!(body["kind"], "invalid_input", "{asked}: {body}");
        assert!(
            body["detail"]
                .as_str()
                .unwrap()
                .contains(&format!("seq {named}")),
            "{asked}: {body}"
        );
        assert_eq!(version(&http, &url).await, v, "{asked}: nothing written");
        assert_eq!(seqs(&http, &url, "archive").await, [1, 2, 3, 4]);
        assert_eq!(seqs(&http, &url, "context").await, [4]);
    }

    let r = http
        .post(format!("{url}/prune"))
        .header(header::IF_MATCH, format!("\"{v}\""))
        .json(&json!({"seqs": [1, 2]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.json::<Value>().await.unwrap()["removed"], 2);
    assert_eq!(seqs(&http, &url, "archive").await, [3, 4]);
    let export = json_of(http.get(format!("{url}/export"))).await;
    let r = http
        .post(format!("{base}/v1/import"))
        .json(&export)
        .send()
        .await
        .unwrap();
    assert!(
        r.status().is_success(),
        "the export re-imports: {}",
        r.text().await.unwrap()
    );
}
