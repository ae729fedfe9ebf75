//! The same-answer suite (`session_testkit::same_answer`) through the
//! command line: every step the CLI offers (create, append, context,
//! compact, search, rewind, fork) answers what
//! `tests/same-answer/scenario.json` says, as the library, the HTTP routes,
//! MCP and the Python package do. The steps it does not offer (resolve,
//! state, another owner's reads) run through the library on the same store.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::PathBuf;
use std::sync::Arc;

use agent_session::{Compacted, Message, Session, SessionEvent, SessionService};
use serde_json::{json, Value};
use session_testkit::same_answer::{
    self, append_outcome, compacted, context_outcome, id_of, search_outcome, session_outcome,
    Aliases, Face, LibraryFace, Step, APP, HITS, USER,
};

/// The error kinds by exit code, as `docs/cli.md` lists them.
const EXIT_KINDS: [(i32, &str); 5] = [
    (2, "invalid_input"),
    (3, "not_found"),
    (4, "conflict"),
    (8, "session_ended"),
    (9, "quota_exceeded"),
];

/// The binary over one store.
struct Cli {
    store: support::Store,
}

impl Cli {
    /// The JSON lines a command printed, or the error kind its exit code names.
    fn call(&self, args: &[&str]) -> Result<Vec<Value>, Value> {
        let output = support::cli(&self.store)
            .arg("--json")
            .args(args)
            .output()
            .unwrap();
        if output.status.success() {
            let text = String::from_utf8(output.stdout).unwrap();
            Ok(text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect())
        } else {
            let code = output.status.code().unwrap_or(1);
            let kind = EXIT_KINDS
                .iter()
                .find(|(c, _)| *c == code)
                .map_or("backend", |(_, k)| k);
            Err(json!({ "error": kind }))
        }
    }

    /// Appends one event with the flags that say what it is.
    fn append(&self, id: &str, e: &SessionEvent) -> Result<Vec<Value>, Value> {
        let mut args = vec!["append".to_owned(), id.to_owned()];
        let mut flag = |name: &str, value: String| {
            args.push(format!("--{name}"));
            args.push(value);
        };
        match &e.message {
            Message::Tool {
                tool_call_id, name, ..
            } => {
                flag("tool-result", tool_call_id.clone());
                if let Some(name) = name {
                    flag("tool-name", name.clone());
                }
                flag("text", e.message.text().to_owned());
            }
            m if !m.tool_calls().is_empty() => {
                let call = &m.tool_calls()[0];
                flag("tool-call", call.name.clone());
                flag("call-id", call.id.clone());
                flag("args", call.arguments_json().unwrap().to_string());
            }
            m => {
                flag("role", m.role().to_string());
                flag("text", m.text().to_owned());
            }
        }
        if let Some(invocation) = &e.invocation_id {
            flag("invocation", invocation.clone());
        }
        if let Some(branch) = &e.branch {
            flag("branch", branch.clone());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.call(&args)
    }
}

fn events_of(lines: &[Value]) -> Value {
    let session: Session = serde_json::from_value(lines[0].clone()).unwrap();
    session_outcome(&session)
}

#[async_trait::async_trait]
impl Face for Cli {
    async fn run(&mut self, step: &Step, aliases: &mut Aliases) -> Option<Value> {
        let answer = match step {
            Step::Create { session } => {
                self.call(&["create", "--user", USER, "--app", APP])
                    .map(|lines| {
                        let id = lines[0]["id"].as_str().unwrap().to_owned();
                        aliases.insert(session.clone(), id);
                        events_of(&lines)
                    })
            }
            Step::Append { session, events } => {
                let id = id_of(aliases, session);
                let mut written = 0;
                let mut failed = None;
                for e in events {
                    match self.append(&id, e) {
                        Ok(_) => written += 1,
                        Err(kind) => failed = failed.or(Some(kind)),
                    }
                }
                failed.map_or_else(|| Ok(append_outcome(written)), Err)
            }
            Step::Context { session } => {
                self.call(&["context", &id_of(aliases, session)])
                    .map(|lines| {
                        let messages: Vec<Message> = lines
                            .into_iter()
                            .map(|l| serde_json::from_value(l).unwrap())
                            .collect();
                        context_outcome(&messages)
                    })
            }
            Step::Compact { session, spec } => self
                .call(&[
                    "compact",
                    &id_of(aliases, session),
                    "--spec",
                    &spec.to_string(),
                ])
                .map(|lines| {
                    let done: Compacted = serde_json::from_value(lines[0].clone()).unwrap();
                    compacted(&done)
                }),
            Step::Search { session, query } => self
                .call(&[
                    "search",
                    &id_of(aliases, session),
                    query,
                    "--page-size",
                    &HITS.to_string(),
                ])
                .map(|lines| search_outcome(lines[0]["hits"].as_array().unwrap().len())),
            Step::Rewind {
                session,
                invocation,
            } => {
                let id = id_of(aliases, session);
                self.call(&["rewind", &id, "--before-invocation", invocation])
                    .and_then(|_| self.call(&["list", "--app", APP, "--user", USER]))
                    .map(|lines| {
                        let this = lines.iter().find(|s| s["id"] == id.as_str()).unwrap();
                        json!({ "events": this["event_count"] })
                    })
            }
            Step::Fork { session, into } => {
                self.call(&["fork", &id_of(aliases, session)]).map(|lines| {
                    let id = lines[0]["id"].as_str().unwrap().to_owned();
                    aliases.insert(into.clone(), id);
                    events_of(&lines)
                })
            }
            Step::Resolve { .. } | Step::PatchState { .. } | Step::Get { .. } => return None,
        };
        Some(answer.unwrap_or_else(|kind| kind))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_answers_what_the_scenario_file_says() {
    let store = support::store();
    let repo = agent_session::open(&store.url).await.unwrap();
    let service: Arc<dyn SessionService> =
        Arc::new(agent_session::DefaultSessionService::new(repo));
    let mut face = Cli { store };
    let mut fallback = LibraryFace { service };
    let got = same_answer::run(&mut face, &mut fallback).await;
    let file =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/same-answer/scenario.json");
    let ran = same_answer::check("cli", &got, &same_answer::expected(&file));
    assert!(ran >= 30, "the CLI offers most steps: ran {ran}");
}
