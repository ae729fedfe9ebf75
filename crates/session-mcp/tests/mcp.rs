//! The MCP server driven by real MCP clients: the SDK's own client over an
//! in-process pipe (initialize, tools/list, tools/call), and JSON-RPC over
//! streamable HTTP behind the server's API keys.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, CallToolResult, ClientConfig};
use rmcp::ServiceExt;
use serde_json::{json, Value};
use session_core::{
    AppName, CreateSessionRequest, DefaultSessionService, InMemoryRepository, Owner,
    SessionRepository, SessionService, UserId,
};
use session_mcp::SessionTools;
use session_server::{ApiKey, ApiKeys, KeyRole, SessionServer};

fn args(v: Value) -> serde_json::Map<String, Value> {
    match v {
        Value::Object(map) => map,
        other => panic!("tool arguments are an object, not {other}"),
    }
}

fn text(result: &CallToolResult) -> String {
    result.content[0].as_text().unwrap().text.clone()
}

/// Every tool is listed, each argument a top-level property of its input
/// schema, the shared session and owner arguments included.
fn check_listed_tools(listed: &[rmcp::model::Tool]) {
    let names: Vec<String> = listed.iter().map(|t| t.name.to_string()).collect();
    // The model sees every argument as a top-level property of the tool's
    // input schema, the shared session and owner arguments included.
    for (tool, wanted) in [
        (
            "conversation_search",
            &["session_id", "query", "page", "app", "user_id"][..],
        ),
        (
            "cross_session_search",
            &["query", "page", "app", "user_id"][..],
        ),
        (
            "get_context",
            &["session_id", "branch", "app", "user_id"][..],
        ),
        (
            "append_message",
            &["session_id", "role", "content", "app", "user_id"][..],
        ),
        (
            "compact_context",
            &["session_id", "spec", "app", "user_id"][..],
        ),
        (
            "start_session",
            &[
                "id", "key", "ttl_secs", "metadata", "state", "app", "user_id",
            ][..],
        ),
        (
            "resolve_session",
            &[
                "key",
                "idle_timeout_secs",
                "daily_reset_hour",
                "daily_reset_zone",
                "app",
            ][..],
        ),
        ("reset_session", &["key", "group", "app", "user_id"][..]),
        (
            "conversation_read",
            &["session_id", "seq", "app", "user_id"][..],
        ),
    ] {
        let schema = &listed.iter().find(|t| t.name == tool).unwrap().input_schema;
        let properties = schema.get("properties").and_then(Value::as_object).unwrap();
        for name in wanted {
            assert!(
                properties.contains_key(*name),
                "{tool} lacks {name}: {schema:?}"
            );
        }
    }
    for tool in [
        "conversation_search",
        "cross_session_search",
        "get_context",
        "append_message",
        "compact_context",
        "start_session",
        "resolve_session",
        "reset_session",
        "conversation_read",
    ] {
        assert!(names.iter().any(|n| n == tool), "{tool} in {names:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_lists_and_calls_the_session_tools() {
    let repo: Arc<dyn SessionRepository> = InMemoryRepository::new().shared();
    let service = Arc::new(DefaultSessionService::new(repo.clone()));
    let ada = Owner::parse("support", "ada").unwrap();
    let session = service
        .create(
            CreateSessionRequest::builder("ada")
                .app("support")
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    let tools = SessionTools::for_owner(service.clone(), ada);
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let server = tokio::spawn(async move {
        let running = tools.serve(server_io).await.unwrap();
        running.waiting().await.unwrap();
    });
    let client = ClientConfig::default().serve(client_io).await.unwrap();

    check_listed_tools(&client.list_all_tools().await.unwrap());

    let id = session.id.to_string();
    let call = |name: &'static str, arguments: Value| {
        let client = &client;
        async move {
            client
                .call_tool(CallToolRequestParams::new(name).with_arguments(args(arguments)))
                .await
                .unwrap()
        }
    };
    for n in 0..6 {
        let r = call(
            "append_message",
            json!({"session_id": id, "role": "user", "content": format!("turn {n}: my order ORD-5821{n} is late")}),
        )
        .await;
        assert_eq!(r.is_error, Some(false), "{}", text(&r));
        let r = call(
            "append_message",
            json!({"session_id": id, "role": "assistant", "content": format!("looking into ORD-5821{n}: {}", "checking the carrier, the depot and the route. ".repeat(20))}),
        )
        .await;
        let seq = serde_json::from_str::<Value>(&text(&r)).unwrap()["seq"].as_u64();
        assert_eq!(seq, Some(2 * n + 2));
    }
    let context: Value =
        serde_json::from_str(&text(&call("get_context", json!({"session_id": id})).await)).unwrap();
    assert_eq!(context.as_array().map(Vec::len), Some(12));

    let compacted: Value = serde_json::from_str(&text(
        &call("compact_context", json!({"session_id": id})).await,
    ))
    .unwrap();
    assert_eq!(compacted["compacted"], true, "{compacted}");
    // What left the context is still found.
    let hits = text(
        &call(
            "conversation_search",
            json!({"session_id": id, "query": "ORD-58210"}),
        )
        .await,
    );
    assert!(hits.contains("turn 0"), "{hits}");
    let across = text(&call("cross_session_search", json!({"query": "ORD-58213"})).await);
    assert!(across.contains(&id), "{across}");

    // A long tool output comes back cut to an excerpt with its seq, and
    // conversation_read gives it whole.
    let log = format!(
        "carrier log for ORD-99: {}",
        "scan at depot, parcel sorted. ".repeat(150)
    );
    let r = call(
        "append_message",
        json!({"session_id": id, "role": "assistant", "content": log}),
    )
    .await;
    let seq = serde_json::from_str::<Value>(&text(&r)).unwrap()["seq"].clone();
    let hits: Value = serde_json::from_str(&text(
        &call(
            "conversation_search",
            json!({"session_id": id, "query": "ORD-99"}),
        )
        .await,
    ))
    .unwrap();
    assert_eq!(
        (&hits[0]["seq"], &hits[0]["truncated"]),
        (&seq, &json!(true)),
        "{hits}"
    );
    assert!(hits[0]["text"].as_str().unwrap().len() < 400, "{hits}");
    let read: Value = serde_json::from_str(&text(
        &call("conversation_read", json!({"session_id": id, "seq": seq})).await,
    ))
    .unwrap();
    assert_eq!(read["text"], log.as_str());
    assert_eq!(read["type"], "assistant");
    let none = text(&call("conversation_read", json!({"session_id": id, "seq": 999})).await);
    assert_eq!(none, "No event with seq 999.");

    // Another owner's session answers as an unknown one.
    let r = call("get_context", json!({"session_id": id, "user_id": "bob"})).await;
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("not_found"), "{}", text(&r));
    // It names the session asked for, never the user, like an unknown session.
    assert!(
        text(&r).contains(&format!("session not found: {id}")) && !text(&r).contains("bob"),
        "{}",
        text(&r)
    );
    let r = call("get_context", json!({"session_id": "no-such"})).await;
    assert!(text(&r).contains("not_found"), "{}", text(&r));

    client.cancel().await.unwrap();
    server.await.unwrap();
}

/// The search tools take `match: "any"` (any one word instead of every
/// one) and `since` (only messages at or after a time), in one session and
/// across the user's sessions; a time that is not RFC 3339 is the agent's
/// error to read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_tools_take_any_of_and_since() {
    let service = Arc::new(DefaultSessionService::new(
        InMemoryRepository::new().shared(),
    ));
    let ada = Owner::parse("support", "ada").unwrap();
    let mut ids = Vec::new();
    for texts in [
        [
            ("2026-01-01T00:00:00Z", "old plum"),
            ("2026-01-02T00:00:00Z", "new pear"),
        ],
        [
            ("2026-01-03T00:00:00Z", "newer plum"),
            ("2026-01-04T00:00:00Z", "fig"),
        ],
    ] {
        let s = service
            .create(
                CreateSessionRequest::builder("ada")
                    .app("support")
                    .build()
                    .unwrap(),
            )
            .await
            .unwrap();
        let events = texts
            .iter()
            .map(|(at, text)| {
                session_core::SessionEvent::builder(session_core::Message::user(*text))
                    .timestamp(at.parse().unwrap())
                    .build()
                    .unwrap()
            })
            .collect();
        service.append_events(&ada, &s.id, events).await.unwrap();
        ids.push(s.id.to_string());
    }
    let tools = SessionTools::for_owner(service.clone(), ada);
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let server = tokio::spawn(async move {
        let running = tools.serve(server_io).await.unwrap();
        running.waiting().await.unwrap();
    });
    let client = ClientConfig::default().serve(client_io).await.unwrap();
    let listed = client.list_all_tools().await.unwrap();
    for tool in ["conversation_search", "cross_session_search"] {
        let schema = &listed.iter().find(|t| t.name == tool).unwrap().input_schema;
        let properties = schema.get("properties").and_then(Value::as_object).unwrap();
        assert!(
            properties.contains_key("match") && properties.contains_key("since"),
            "{tool}: {schema:?}"
        );
    }
    let texts = |name: &'static str, arguments: Value| {
        let client = &client;
        async move {
            let r = client
                .call_tool(CallToolRequestParams::new(name).with_arguments(args(arguments)))
                .await
                .unwrap();
            assert_eq!(r.is_error, Some(false), "{}", text(&r));
            let hits: Value = serde_json::from_str(&text(&r)).unwrap_or(json!([]));
            hits.as_array()
                .unwrap()
                .iter()
                .map(|h| h["text"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    let one = |extra: Value| {
        let mut a = json!({"session_id": ids[0], "query": "plum pear"});
        a.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        a
    };
    let every = texts("conversation_search", one(json!({}))).await;
    assert!(every.is_empty(), "{every:?}");
    let any = texts("conversation_search", one(json!({"match": "any"}))).await;
    assert_eq!(any, ["old plum", "new pear"]);
    let recent = json!({"match": "any", "since": "2026-01-02T00:00:00Z"});
    assert_eq!(
        texts("conversation_search", one(recent)).await,
        ["new pear"]
    );
    let across = json!({"query": "plum", "since": "2026-01-01T12:00:00Z"});
    assert_eq!(texts("cross_session_search", across).await, ["newer plum"]);
    let across = json!({"query": "fig pear", "match": "any"});
    assert_eq!(
        texts("cross_session_search", across).await,
        ["new pear", "fig"]
    );

    let bad = client
        .call_tool(
            CallToolRequestParams::new("cross_session_search")
                .with_arguments(args(json!({"query": "plum", "since": "yesterday"}))),
        )
        .await
        .unwrap();
    assert_eq!(bad.is_error, Some(true));
    assert!(text(&bad).contains("since"), "{}", text(&bad));
    client.cancel().await.unwrap();
    server.await.unwrap();
}

/// An agent that knows only MCP: it starts a session, finds the session of
/// a conversation key again (the same one twice), starts the key over (a
/// new one, which the key then finds), and writes and reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_only_agent_starts_resolves_and_resets_its_sessions() {
    let service = Arc::new(DefaultSessionService::new(
        InMemoryRepository::new().shared(),
    ));
    let tools = SessionTools::for_owner(service.clone(), Owner::parse("support", "ada").unwrap());
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let server = tokio::spawn(async move {
        let running = tools.serve(server_io).await.unwrap();
        running.waiting().await.unwrap();
    });
    let client = ClientConfig::default().serve(client_io).await.unwrap();
    let call = |name: &'static str, arguments: Value| {
        let client = &client;
        async move {
            let r = client
                .call_tool(CallToolRequestParams::new(name).with_arguments(args(arguments)))
                .await
                .unwrap();
            (r.is_error == Some(true), text(&r))
        }
    };
    let json_of = |(error, text): (bool, String)| {
        assert!(!error, "{text}");
        serde_json::from_str::<Value>(&text).unwrap()
    };

    let started = json_of(
        call(
            "start_session",
            json!({"id": "notes-1", "metadata": {"topic": "orders"}, "state": {"step": 1}}),
        )
        .await,
    );
    assert_eq!(started["id"], "notes-1");
    assert_eq!(started["metadata"]["topic"], "orders");
    let (error, again) = call("start_session", json!({"id": "notes-1"})).await;
    assert!(error && again.contains("already_exists"), "{again}");

    let key = json!({"key": "telegram:chat-42"});
    let first = json_of(call("resolve_session", key.clone()).await);
    assert_eq!(first["is_new"], true, "{first}");
    let same = json_of(call("resolve_session", key.clone()).await);
    assert_eq!(same["is_new"], false, "{same}");
    let id = first["session"]["id"].as_str().unwrap().to_owned();
    assert_eq!(same["session"]["id"], id.as_str(), "the same session twice");

    let fresh = json_of(call("reset_session", key.clone()).await);
    let new_id = fresh["id"].as_str().unwrap().to_owned();
    assert_ne!(new_id, id, "a reset starts a new session");
    assert_eq!(fresh["key"], "telegram:chat-42");
    let after = json_of(call("resolve_session", key.clone()).await);
    assert_eq!(
        (after["session"]["id"].as_str(), after["is_new"].as_bool()),
        (Some(new_id.as_str()), Some(false)),
        "the key finds the new session"
    );
    let old = service
        .get(
            &Owner::parse("support", "ada").unwrap(),
            &session_core::SessionId::new(&id).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        old.status,
        session_core::SessionStatus::Archived,
        "the old one is ended"
    );

    let appended = json_of(
        call(
            "append_message",
            json!({"session_id": new_id, "role": "user", "content": "where is ORD-7?"}),
        )
        .await,
    );
    assert_eq!(appended["seq"], 1);
    let context = json_of(call("get_context", json!({"session_id": new_id})).await);
    assert_eq!(context[0]["content"], "where is ORD-7?", "{context}");

    let (error, bad) = call("reset_session", json!({"key": ""})).await;
    assert!(error && bad.contains("invalid_input"), "{bad}");
    let (error, foreign) = call("resolve_session", json!({"key": "k", "user_id": "bob"})).await;
    assert!(error && foreign.contains("not_found"), "{foreign}");

    client.cancel().await.unwrap();
    server.await.unwrap();
}

/// One JSON-RPC call over streamable HTTP; the answer's `result`.
async fn rpc(
    http: &reqwest::Client,
    url: &str,
    key: Option<&str>,
    method: &str,
    params: Value,
) -> reqwest::Response {
    let mut request = http
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    request.send().await.unwrap()
}

async fn tool_text(response: reqwest::Response) -> (bool, String) {
    assert!(response.status().is_success(), "{}", response.status());
    let body: Value = response.json().await.unwrap();
    let result = &body["result"];
    (
        result["isError"].as_bool().unwrap_or(false),
        result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_each_call_acts_only_for_whom_its_key_allows() {
    let bound = ApiKey {
        name: "ada-bot".into(),
        app: Some(AppName::new("support").unwrap()),
        role: KeyRole::Agent,
        user: Some(UserId::new("ada").unwrap()),
    };
    let other_app = ApiKey {
        name: "billing".into(),
        app: Some(AppName::new("billing").unwrap()),
        role: KeyRole::Admin,
        user: None,
    };
    let (ada_key, line1) = ApiKeys::generate(&bound).unwrap();
    let (billing_key, line2) = ApiKeys::generate(&other_app).unwrap();
    let keys = ApiKeys::parse(&format!("{line1}\n{line2}\n")).unwrap();

    let server = SessionServer::new(InMemoryRepository::new().shared()).with_api_keys(keys);
    let tools = SessionTools::per_request(server.service());
    let server = server.with_routes(session_mcp::streamable_http(tools, true));
    let session = server
        .service()
        .create(
            CreateSessionRequest::builder("ada")
                .app("support")
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let task = tokio::spawn(server.serve(listener, std::future::pending()));
    let http = reqwest::Client::new();

    let init = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}});
    let r = rpc(&http, &url, None, "initialize", init.clone()).await;
    assert_eq!(
        r.status(),
        reqwest::StatusCode::UNAUTHORIZED,
        "no key, no MCP"
    );
    let r = rpc(&http, &url, Some(&ada_key), "initialize", init).await;
    assert!(r.status().is_success());
    let listed: Value = rpc(&http, &url, Some(&ada_key), "tools/list", json!({}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        listed["result"]["tools"].as_array().map(Vec::len),
        Some(9),
        "{listed}"
    );

    let id = session.id.to_string();
    let append = json!({"name": "append_message", "arguments": {"session_id": id, "role": "user", "content": "deliver to 12 Rue Lepic"}});
    let (error, answer) =
        tool_text(rpc(&http, &url, Some(&ada_key), "tools/call", append).await).await;
    assert!(!error, "the bound key writes ada's session: {answer}");
    let search =
        json!({"name": "conversation_search", "arguments": {"session_id": id, "query": "Lepic"}});
    let (_, hits) =
        tool_text(rpc(&http, &url, Some(&ada_key), "tools/call", search.clone()).await).await;
    assert!(hits.contains("12 Rue Lepic"), "{hits}");
    // A key of another app, naming ada's session, learns nothing.
    let foreign = json!({"name": "conversation_search", "arguments": {"session_id": id, "query": "Lepic", "app": "support", "user_id": "ada"}});
    let (error, answer) =
        tool_text(rpc(&http, &url, Some(&billing_key), "tools/call", foreign).await).await;
    assert!(
        error && answer.contains("not_found") && !answer.contains("Lepic"),
        "{answer}"
    );
    // The bound key cannot act for bob.
    let as_bob = json!({"name": "get_context", "arguments": {"session_id": id, "user_id": "bob"}});
    let (error, answer) =
        tool_text(rpc(&http, &url, Some(&ada_key), "tools/call", as_bob).await).await;
    assert!(error && answer.contains("not_found"), "{answer}");
    assert!(
        answer.contains(&format!("session not found: {id}")) && !answer.contains("bob"),
        "{answer}"
    );
    task.abort();
}
