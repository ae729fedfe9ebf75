//! The same-answer suite (`session_testkit::same_answer`) through the
//! library, the HTTP owner routes and MCP: each answers every step it
//! offers exactly as `tests/same-answer/scenario.json` says. The CLI runs
//! it in its own tests, the Python package in `bindings/python/tests`.
//!
//! `UPDATE_SAME_ANSWER=1` rewrites the file from the library's answers.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::Arc;

use agent_session::server::SessionServer;
use agent_session::{
    Compacted, DefaultSessionService, InMemoryRepository, Message, SearchQuery, SessionRepository,
    SessionService,
};
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::{RoleClient, RunningService};
use rmcp::ServiceExt;
use serde_json::{json, Value};
use session_testkit::same_answer::{
    self, append_outcome, compacted, context_outcome, id_of, owner, resolve_outcome,
    search_outcome, Aliases, Expected, Face, LibraryFace, Step, APP, HITS, USER,
};

fn scenario_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("same-answer/scenario.json")
}

/// The HTTP owner routes of `agent-session serve`.
struct Http {
    base: String,
    client: reqwest::Client,
}

impl Http {
    fn url(&self, user: Option<&str>, tail: &str) -> String {
        format!(
            "{}/v1/apps/{APP}/users/{}{tail}",
            self.base,
            user.unwrap_or(USER)
        )
    }

    fn session_url(&self, aliases: &Aliases, alias: &str, tail: &str) -> String {
        self.url(None, &format!("/sessions/{}{tail}", id_of(aliases, alias)))
    }

    /// The JSON answer, or the problem document's kind.
    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Value, Value> {
        let response = request.send().await.unwrap();
        let ok = response.status().is_success();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if ok {
            Ok(body)
        } else {
            let kind = body["kind"].as_str().unwrap_or("backend").to_owned();
            Err(json!({ "error": kind }))
        }
    }

    fn events(body: &Value) -> Value {
        json!({ "events": body["event_count"] })
    }
}

#[async_trait::async_trait]
impl Face for Http {
    #[allow(clippy::too_many_lines)] // one arm per step
    async fn run(&mut self, step: &Step, aliases: &mut Aliases) -> Option<Value> {
        let c = &self.client;
        let answer = match step {
            Step::Create { session } => self
                .send(c.post(self.url(None, "/sessions")).json(&json!({})))
                .await
                .map(|b| {
                    aliases.insert(session.clone(), b["id"].as_str().unwrap().to_owned());
                    Self::events(&b)
                }),
            Step::Resolve { key } => self
                .send(
                    c.post(self.url(None, "/resolve"))
                        .json(&json!({ "key": key })),
                )
                .await
                .map(|b| resolve_outcome(b["is_new"].as_bool().unwrap())),
            Step::Append { session, events } => self
                .send(
                    c.post(self.session_url(aliases, session, "/events"))
                        .json(events),
                )
                .await
                .map(|b| append_outcome(usize::try_from(b["written"].as_u64().unwrap()).unwrap())),
            Step::Context { session } => self
                .send(c.get(self.session_url(aliases, session, "/messages")))
                .await
                .map(|b| {
                    let messages: Vec<Message> = serde_json::from_value(b).unwrap();
                    context_outcome(&messages)
                }),
            Step::Compact { session, spec } => self
                .send(
                    c.post(self.session_url(aliases, session, "/compact"))
                        .json(spec),
                )
                .await
                .map(|b| {
                    let done: Compacted = serde_json::from_value(b).unwrap();
                    compacted(&done)
                }),
            Step::Search { session, query } => {
                let q = SearchQuery::in_session(id_of(aliases, session), query).page(0, HITS);
                self.send(c.post(self.url(None, "/search")).json(&q))
                    .await
                    .map(|b| search_outcome(b["items"].as_array().unwrap().len()))
            }
            Step::Rewind {
                session,
                invocation,
            } => self
                .send(
                    c.post(self.session_url(aliases, session, "/rewind"))
                        .json(&json!({ "invocation_id": invocation })),
                )
                .await
                .map(|b| Self::events(&b)),
            Step::Fork { session, into } => self
                .send(
                    c.post(self.session_url(aliases, session, "/fork"))
                        .json(&json!({ "at": "latest" })),
                )
                .await
                .map(|b| {
                    aliases.insert(into.clone(), b["id"].as_str().unwrap().to_owned());
                    Self::events(&b)
                }),
            Step::PatchState { session, patch } => self
                .send(
                    c.patch(self.session_url(aliases, session, "/state"))
                        .json(patch),
                )
                .await
                .map(|b| json!({ "session": b["session"] })),
            Step::Get { session, user } => {
                let url = self.url(
                    user.as_deref(),
                    &format!("/sessions/{}", id_of(aliases, session)),
                );
                self.send(c.get(url)).await.map(|b| Self::events(&b))
            }
        };
        Some(answer.unwrap_or_else(|problem| problem))
    }
}

/// The MCP tools, through the SDK's client over an in-process pipe.
struct Mcp {
    client: RunningService<RoleClient, ClientConfig>,
}

impl Mcp {
    /// The tool's answer as JSON, or the error's kind.
    async fn call(&self, tool: &'static str, arguments: Value) -> Value {
        let Value::Object(arguments) = arguments else {
            unreachable!("tool arguments are an object")
        };
        let result = self
            .client
            .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
            .await
            .unwrap();
        let text = result.content[0].as_text().unwrap().text.clone();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if result.is_error == Some(true) {
            json!({ "error": value["error"] })
        } else {
            value
        }
    }
}

#[async_trait::async_trait]
impl Face for Mcp {
    async fn run(&mut self, step: &Step, aliases: &mut Aliases) -> Option<Value> {
        Some(match step {
            Step::Context { session } => {
                let got = self
                    .call(
                        "get_context",
                        json!({ "session_id": id_of(aliases, session) }),
                    )
                    .await;
                match serde_json::from_value::<Vec<Message>>(got.clone()) {
                    Ok(messages) => context_outcome(&messages),
                    Err(_) => got,
                }
            }
            Step::Compact { session, spec } => {
                let got = self
                    .call(
                        "compact_context",
                        json!({ "session_id": id_of(aliases, session), "spec": spec }),
                    )
                    .await;
                match serde_json::from_value::<Compacted>(got.clone()) {
                    Ok(done) => compacted(&done),
                    Err(_) => got,
                }
            }
            Step::Search { session, query } => {
                let got = self
                    .call(
                        "conversation_search",
                        json!({ "session_id": id_of(aliases, session), "query": query }),
                    )
                    .await;
                match got {
                    Value::Array(hits) => search_outcome(hits.len()),
                    Value::String(_) => search_outcome(0),
                    other => other,
                }
            }
            _ => return None,
        })
    }
}

fn store() -> (Arc<dyn SessionRepository>, Arc<dyn SessionService>) {
    let repo: Arc<dyn SessionRepository> = InMemoryRepository::new().shared();
    let service: Arc<dyn SessionService> = Arc::new(DefaultSessionService::new(repo.clone()));
    (repo, service)
}

async fn run_library() -> Vec<(Step, Option<Value>)> {
    let (_, service) = store();
    let mut face = LibraryFace {
        service: service.clone(),
    };
    let mut fallback = LibraryFace { service };
    same_answer::run(&mut face, &mut fallback).await
}

fn checked_in() -> Vec<Expected> {
    same_answer::expected(&scenario_file())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_library_answers_what_the_scenario_file_says() {
    let got = run_library().await;
    if std::env::var_os("UPDATE_SAME_ANSWER").is_some() {
        let expected: Vec<Expected> = got
            .iter()
            .map(|(step, outcome)| Expected {
                step: step.clone(),
                outcome: outcome.clone().unwrap(),
            })
            .collect();
        let text = serde_json::to_string_pretty(&expected).unwrap() + "\n";
        std::fs::create_dir_all(scenario_file().parent().unwrap()).unwrap();
        std::fs::write(scenario_file(), text).unwrap();
    }
    let ran = same_answer::check("library", &got, &checked_in());
    assert_eq!(ran, got.len(), "the library offers every step");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_owner_routes_answer_the_same() {
    let (repo, service) = store();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = SessionServer::new(repo).with_service(service.clone());
    let task = tokio::spawn(server.serve(listener, std::future::pending()));
    let mut face = Http {
        base,
        client: reqwest::Client::new(),
    };
    let mut fallback = LibraryFace { service };
    let got = same_answer::run(&mut face, &mut fallback).await;
    task.abort();
    let ran = same_answer::check("http", &got, &checked_in());
    assert_eq!(ran, got.len(), "the HTTP API offers every step");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_tools_answer_the_same() {
    let (_, service) = store();
    let tools = agent_session_mcp_tools(service.clone());
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    let server = tokio::spawn(async move {
        let running = tools.serve(server_io).await.unwrap();
        let _ = running.waiting().await;
    });
    let client = ClientConfig::default().serve(client_io).await.unwrap();
    let mut face = Mcp { client };
    let mut fallback = LibraryFace { service };
    let got = same_answer::run(&mut face, &mut fallback).await;
    server.abort();
    let ran = same_answer::check("mcp", &got, &checked_in());
    assert!(
        ran >= 15,
        "MCP offers context, compaction and search: ran {ran}"
    );
}

fn agent_session_mcp_tools(service: Arc<dyn SessionService>) -> session_mcp::SessionTools {
    session_mcp::SessionTools::for_owner(service, owner(None))
}
