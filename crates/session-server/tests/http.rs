//! The server over HTTP: keys and scopes, problem documents, versions as
//! ETags, compaction and state, checked with a plain HTTP client.
#![allow(clippy::unwrap_used)] // a test: failing loudly is its job

mod support;

use reqwest::{header, Client, StatusCode};
use serde_json::{json, Value};
use session_core::{InMemoryRepository, SessionRepository};
use session_server::SessionServer;
use support::{json_of, keys, new_session, problem, secret, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_the_server_answers_401_and_reveals_nothing() {
    let (keys, secrets) = keys();
    let server =
        start(SessionServer::new(InMemoryRepository::new().shared()).with_api_keys(keys)).await;
    let http = Client::new();
    let url = format!("{}/v1/apps/support/users/ada/sessions", server.base);
    let r = http.get(&url).send().await.unwrap();
    assert!(r.headers().get(header::WWW_AUTHENTICATE).is_some());
    let (status, body) = problem(r).await;
    assert_eq!(
        (status, body["kind"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("unauthorized"))
    );
    let (status, _) = problem(
        http.get(&url)
            .bearer_auth("ask_wrong")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // The probes stay open for load balancers.
    let r = http
        .get(format!("{}/readyz", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let ok = http
        .get(&url)
        .bearer_auth(secret(&secrets, "support-agent"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_act_only_for_their_app_and_user_and_others_see_404() {
    let (keys, secrets) = keys();
    let server =
        start(SessionServer::new(InMemoryRepository::new().shared()).with_api_keys(keys)).await;
    let http = Client::new();
    let base = &server.base;
    let bot = secret(&secrets, "ada-bot");
    // The bound agent creates a session for ada.
    let r = http
        .post(format!("{base}/v1/apps/support/users/ada/sessions"))
        .bearer_auth(bot)
        .json(&json!({"metadata": {"ticket": 7}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let id = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let unknown = "no-such-session";

    // Each refused call answers exactly as an unknown session does.
    let refused = [
        (
            "ada-bot",
            format!("/v1/apps/support/users/bob/sessions/{id}"),
        ),
        (
            "support-agent",
            format!("/v1/apps/billing/users/ada/sessions/{id}"),
        ),
        ("support-admin", format!("/v1/sessions/{id}")),
        ("support-agent", format!("/v1/sessions/{id}")),
    ];
    for (key, path) in refused {
        let (status, body) = problem(
            http.get(format!("{base}{path}"))
                .bearer_auth(secret(&secrets, key))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(
            (status, body["kind"].as_str()),
            (StatusCode::NOT_FOUND, Some("not_found")),
            "{key} {path}"
        );
    }
    // bob's path with an app admin key: the service hides ada's session.
    let as_bob = format!("{base}/v1/apps/support/users/bob/sessions/{id}");
    let as_bob_unknown = format!("{base}/v1/apps/support/users/bob/sessions/{unknown}");
    let admin = secret(&secrets, "support-admin");
    let (s1, b1) = problem(http.get(&as_bob).bearer_auth(admin).send().await.unwrap()).await;
    let (s2, b2) = problem(
        http.get(&as_bob_unknown)
            .bearer_auth(admin)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s1, &b1["kind"], &b1["title"]),
        (s2, &b2["kind"], &b2["title"])
    );
    assert_eq!(s1, StatusCode::NOT_FOUND);

    // The owner and the operator read it.
    let as_ada = format!("{base}/v1/apps/support/users/ada/sessions/{id}");
    for key in ["ada-bot", "support-agent", "support-admin"] {
        let r = http
            .get(&as_ada)
            .bearer_auth(secret(&secrets, key))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{key}");
    }
    let r = http
        .get(format!("{base}/v1/sessions/{id}"))
        .bearer_auth(secret(&secrets, "ops"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_travel_as_etags_and_swaps_need_if_match() {
    let server = start(SessionServer::new(InMemoryRepository::new().shared())).await;
    let http = Client::new();
    let sessions = format!("{}/v1/apps/support/users/ada/sessions", server.base);
    let session = new_session(&http, &sessions, json!({})).await;
    let r = http
        .post(format!("{session}/messages"))
        .json(&json!({"role": "user", "content": "my order ORD-1 is late"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let etag = r
        .headers()
        .get(header::ETAG)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(etag, "\"1\"");
    let context = format!("{session}/context");
    let (status, _) = problem(http.put(&context).json(&json!([])).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::PRECONDITION_REQUIRED);
    let (status, body) = problem(
        http.put(&context)
            .header(header::IF_MATCH, "\"0\"")
            .json(&json!([]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, body["actual"].as_u64()),
        (StatusCode::PRECONDITION_FAILED, Some(1))
    );
    let r = http
        .put(&context)
        .header(header::IF_MATCH, etag)
        .json(&json!([]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    // The archive keeps the message the context no longer holds.
    let archive: Value = json_of(http.get(format!("{session}/events?view=archive"))).await;
    assert_eq!(archive["items"].as_array().map(Vec::len), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_problem_document_and_stores_nothing() {
    let repo = InMemoryRepository::new().shared();
    let server = start(SessionServer::new(repo.clone()).with_max_body_bytes(4096)).await;
    let http = Client::new();
    let sessions = format!("{}/v1/apps/support/users/ada/sessions", server.base);
    for (body, field) in [
        ("{not json", "request body"),
        (r#"{"ttl_secs": 60, "never_expires": true}"#, "expiry"),
        (r#"{"id": "a b"}"#, "session id"),
    ] {
        let r = http
            .post(&sessions)
            .header(header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let (status, problem) = problem(r).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(problem["kind"], "invalid_input", "{body}");
        assert_eq!(problem["field"], field, "{body}");
    }
    let (status, _) = problem(
        http.get(format!("{sessions}?metadata=%5B1%5D"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let big = "x".repeat(8192);
    let r = http
        .post(&sessions)
        .json(&json!({"metadata": {"note": big}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let all = repo.list(&session_core::SessionQuery::new()).await.unwrap();
    assert!(all.items.is_empty(), "nothing was stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_runs_the_named_strategy_and_the_archive_keeps_everything() {
    let server = start(SessionServer::new(InMemoryRepository::new().shared())).await;
    let http = Client::new();
    let sessions = format!("{}/v1/apps/support/users/ada/sessions", server.base);
    let session = new_session(&http, &sessions, json!({})).await;
    for n in 0..6 {
        for (role, text) in [
            ("user", format!("question {n} about order ORD-{n}")),
            ("assistant", format!("answer {n}")),
        ] {
            let r = http
                .post(format!("{session}/messages"))
                .json(&json!({"role": role, "content": text}))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::OK);
        }
    }
    let compact = format!("{session}/compact");
    let (status, body) = problem(
        http.post(&compact)
            .json(&json!({"strategy": "sliding_window"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, body["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("max_events"))
    );
    let r: Value = json_of(
        http.post(&compact)
            .json(&json!({"strategy": "summarize", "keep": 2})),
    )
    .await;
    assert_eq!(r["compacted"], true, "{r}");
    assert!(
        r["events_after"].as_u64() < r["events_before"].as_u64(),
        "{r}"
    );
    let again: Value = json_of(
        http.post(&compact)
            .json(&json!({"strategy": "summarize", "keep": 2})),
    )
    .await;
    assert_eq!(again["compacted"], false, "{again}");
    assert!(
        again["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "says why: {again}"
    );
    let archive: Value = http
        .get(format!(
            "{session}/events?view=archive&synthetic=exclude&page_size=100"
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        archive["items"].as_array().map(Vec::len),
        Some(12),
        "every message stays in the archive"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_reads_by_scope_and_patches_the_session_scope() {
    let server = start(SessionServer::new(InMemoryRepository::new().shared())).await;
    let http = Client::new();
    let sessions = format!("{}/v1/apps/support/users/ada/sessions", server.base);
    let state = format!(
        "{}/state",
        new_session(
            &http,
            &sessions,
            json!({"state": {"step": 1, "draft": "x", "user:lang": "fr", "app:tier": "gold"}})
        )
        .await
    );
    let before: Value = http.get(&state).send().await.unwrap().json().await.unwrap();
    assert_eq!(before["session"], json!({"step": 1, "draft": "x"}));
    assert_eq!(before["user"], json!({"user:lang": "fr"}));
    assert_eq!(before["app"], json!({"app:tier": "gold"}));
    let r = http
        .patch(&state)
        .json(&json!({"step": 2, "draft": null}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let etag = r
        .headers()
        .get(header::ETAG)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let after: Value = r.json().await.unwrap();
    assert_eq!(after["session"], json!({"step": 2}));
    assert_eq!(after["user"], before["user"], "other scopes untouched");
    let (status, body) = problem(
        http.patch(&state)
            .json(&json!({"user:lang": "de"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, body["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("state"))
    );
    let (status, _) = problem(
        http.patch(&state)
            .header(header::IF_MATCH, "\"0\"")
            .json(&json!({"step": 3}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "a stale If-Match changes nothing"
    );
    let r = http
        .patch(&state)
        .header(header::IF_MATCH, etag)
        .json(&json!({"step": 3}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_stream_imports_into_another_server_and_bad_lines_are_reported() {
    let source = start(SessionServer::new(InMemoryRepository::new().shared())).await;
    let http = Client::new();
    let sessions = format!("{}/v1/apps/support/users/ada/sessions", source.base);
    for n in 0..3 {
        let s: Value = json_of(http.post(&sessions).json(&json!({}))).await;
        let r = http
            .post(format!("{sessions}/{}/messages", s["id"].as_str().unwrap()))
            .json(&json!({"role": "user", "content": format!("message {n}")}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    let bob = format!("{}/v1/apps/support/users/bob/sessions", source.base);
    http.post(&bob).json(&json!({})).send().await.unwrap();

    let r = http
        .get(format!("{}/v1/apps/support/users/ada/export", source.base))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers().get(header::CONTENT_TYPE).unwrap(),
        "application/x-ndjson"
    );
    let file = r.text().await.unwrap();
    assert_eq!(
        file.lines().count(),
        1 + 3,
        "the header and ada's three sessions, not bob's"
    );
    assert!(file
        .lines()
        .next()
        .unwrap()
        .contains("agent-session-export"));
    let all = http
        .get(format!("{}/v1/export", source.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        all.lines().count(),
        1 + 4,
        "the store route exports every session"
    );

    let target_repo = InMemoryRepository::new().shared();
    let target = start(SessionServer::new(target_repo.clone())).await;
    let with_a_bad_line = format!("{file}{{\"not\": \"a dump\"}}\n");
    let report: Value = json_of(
        http.post(format!("{}/v1/import", target.base))
            .header(header::CONTENT_TYPE, "application/x-ndjson")
            .body(with_a_bad_line.clone()),
    )
    .await;
    assert_eq!(report["imported"], 3, "{report}");
    assert_eq!(report["failed"][0]["line"], 5, "{report}");
    assert_eq!(
        report["failed"][0]["error"]["kind"], "serialization",
        "{report}"
    );
    let again: Value = json_of(
        http.post(format!("{}/v1/import", target.base))
            .header(header::CONTENT_TYPE, "application/x-ndjson")
            .body(file),
    )
    .await;
    assert_eq!(
        (again["imported"].as_u64(), again["unchanged"].as_u64()),
        (Some(0), Some(3)),
        "idempotent"
    );
    let listed = target_repo
        .list(&session_core::SessionQuery::new())
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 3);
    let (status, _) = problem(
        http.post(format!("{}/v1/import", target.base))
            .header(header::CONTENT_TYPE, "application/x-ndjson")
            .body("{\"no\": \"header\"}\n")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "a file without the export header"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_sent_without_a_token_estimate_are_counted() {
    let server = start(SessionServer::new(InMemoryRepository::new().shared())).await;
    let http = Client::new();
    let sessions = format!("{}/v1/apps/support/users/ada/sessions", server.base);
    let session = new_session(&http, &sessions, json!({})).await;
    let sent = json!([{
        "id": "e-1",
        "timestamp": "2026-11-24T07:00:00Z",
        "message": {"role": "user", "content": "a message long enough to count several tokens"}
    }]);
    let r = http
        .post(format!("{session}/events"))
        .json(&sent)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let read = json_of(http.get(&session)).await;
    assert!(read["context_tokens"].as_u64() > Some(0), "{read}");
}

/// After a window compaction, a rewind by seq and one by invocation each
/// put back the context the session had at that point; a body naming both
/// (or neither) is a 400 and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_by_seq_or_invocation_restores_what_a_window_dropped() {
    let server = start(SessionServer::new(InMemoryRepository::new().shared())).await;
    let http = Client::new();
    let sessions = format!("{}/v1/apps/support/users/ada/sessions", server.base);
    let session = new_session(&http, &sessions, json!({})).await;
    for n in 1..=3 {
        let inv = format!("i{n}");
        let turn: Vec<session_core::SessionEvent> = [
            session_core::Message::user(format!("q{n}")),
            session_core::Message::assistant(format!("a{n}")),
        ]
        .into_iter()
        .map(|m| {
            session_core::SessionEvent::builder(m)
                .invocation_id(&inv)
                .build()
                .unwrap()
        })
        .collect();
        let r = http
            .post(format!("{session}/events"))
            .json(&turn)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{:?}", r.text().await);
    }
    let context = || async {
        let page: Value = json_of(http.get(format!("{session}/events?view=context"))).await;
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["message"]["content"].as_str().unwrap_or("").to_owned())
            .collect::<Vec<String>>()
    };
    let compact = format!("{session}/compact");
    let rewind = format!("{session}/rewind");
    let r: Value = json_of(
        http.post(&compact)
            .json(&json!({"strategy": "turn_window", "max_turns": 1})),
    )
    .await;
    assert_eq!(r["compacted"], true, "{r}");
    assert_eq!(context().await, ["q3", "a3"]);
    for bad in [json!({}), json!({"seq": 5, "invocation_id": "i3"})] {
        let (status, _) = problem(http.post(&rewind).json(&bad).send().await.unwrap()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    }
    let _: Value = json_of(http.post(&rewind).json(&json!({"seq": 6}))).await;
    assert_eq!(context().await, ["q1", "a1", "q2", "a2", "q3"]);
    let _: Value = json_of(http.post(&rewind).json(&json!({"invocation_id": "i2"}))).await;
    assert_eq!(context().await, ["q1", "a1"]);
}

/// A manual reset ends the key's session and starts a new one, which
/// resolve then finds; a key never used gets its first session; a body
/// naming no key, a bad key or a field reset does not take is a 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_starts_a_key_over_and_resolve_finds_the_new_session() {
    let server = start(SessionServer::new(InMemoryRepository::new().shared())).await;
    let http = Client::new();
    let owner = format!("{}/v1/apps/support/users/ada", server.base);
    let (resolve, reset) = (format!("{owner}/resolve"), format!("{owner}/reset"));
    let key = json!({"key": "telegram:chat-42"});
    let first: Value = json_of(http.post(&resolve).json(&key)).await;
    let old = first["session"]["id"].as_str().unwrap().to_owned();

    let r = http.post(&reset).json(&key).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    assert!(r.headers().get(header::ETAG).is_some());
    let fresh: Value = r.json().await.unwrap();
    let new = fresh["id"].as_str().unwrap().to_owned();
    assert_ne!(new, old, "a new session");
    assert_eq!(fresh["key"], "telegram:chat-42");

    let r = http.post(&resolve).json(&key).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK, "found, not created");
    let again: Value = r.json().await.unwrap();
    assert_eq!(
        (again["session"]["id"].as_str(), again["is_new"].as_bool()),
        (Some(new.as_str()), Some(false))
    );
    let ended: Value = json_of(http.get(format!("{owner}/sessions/{old}"))).await;
    assert_eq!(ended["status"], "archived", "{ended}");

    // A key never used: the reset starts its first session.
    let r = http
        .post(&reset)
        .json(&json!({"key": "never-seen", "metadata": {"channel": "sms"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let first_of_key: Value = r.json().await.unwrap();
    assert_eq!(first_of_key["metadata"]["channel"], "sms");

    for (bad, field) in [
        (json!({}), "key"),
        (json!({"key": "a b"}), "key"),
        (json!({"key": "k", "idle_timeout_secs": 60}), "request body"),
    ] {
        let (status, body) = problem(http.post(&reset).json(&bad).send().await.unwrap()).await;
        assert_eq!(
            (status, body["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some(field)),
            "{bad}: {body}"
        );
    }
}
