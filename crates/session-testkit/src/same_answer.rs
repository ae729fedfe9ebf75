//! The same-answer suite: one scenario (create, resolve, a tool loop of 25
//! steps inside one turn, the model-ready context, compaction by each
//! strategy, search, rewind, fork, state, errors by kind) that every face
//! of the session service runs — the library, the HTTP owner routes, MCP,
//! the CLI, the Python package — and whose outcomes must all equal the
//! ones checked in at `tests/same-answer/scenario.json`.
//!
//! A face implements [`Face`]: it runs the steps it offers and answers
//! `None` for the others, which [`run`] then performs through a fallback
//! face over the same store (so the next steps find the session they
//! expect) without comparing them. Outcomes are reduced to plain JSON by
//! the functions of this module, so every face is compared on the same
//! terms; the Python package's test reads the same file and reduces its
//! answers the same way.
//!
//! ```
//! let steps = session_testkit::same_answer::scenario();
//! assert!(steps.len() > 20);
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use session_compaction::StrategySpec;
use session_core::{
    Compacted, CreateSessionRequest, ErrorKind, ForkAt, Message, Owner, ResetPolicy,
    ResolveRequest, RewindTo, Role, SearchQuery, Session, SessionError, SessionEvent, SessionId,
    SessionService, StateMap, ToolCall,
};

/// The scenario's owner.
pub const APP: &str = "same-answer";
/// The scenario's user.
pub const USER: &str = "ada";
/// The page of hits every face reads: the first, of 10.
pub const HITS: usize = 10;
/// Another user of the app, whose calls on the scenario's sessions must
/// read like calls on unknown ones.
pub const OTHER_USER: &str = "mallory";

/// One step. Sessions are named by aliases the scenario gives them; a face
/// maps each alias to the id it got when it created or forked the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Create a session of the scenario's owner, known as `session`.
    Create {
        /// The alias.
        session: String,
    },
    /// Resolve the owner's session of `key` (never reset).
    Resolve {
        /// The resolution key.
        key: String,
    },
    /// Append `events` to `session` in one batch.
    Append {
        /// The alias.
        session: String,
        /// The events, ids and timestamps included.
        events: Vec<SessionEvent>,
    },
    /// The model-ready context of `session`.
    Context {
        /// The alias.
        session: String,
    },
    /// Compact `session` with `spec` (a `StrategySpec` as JSON).
    Compact {
        /// The alias.
        session: String,
        /// The strategy, its parameters, trigger and summarizer.
        spec: Value,
    },
    /// Search `session`'s archive for `query`.
    Search {
        /// The alias.
        session: String,
        /// The query.
        query: String,
    },
    /// Rewind `session` to before `invocation`.
    Rewind {
        /// The alias.
        session: String,
        /// The invocation id.
        invocation: String,
    },
    /// Fork `session` at its latest event into a session known as `into`.
    Fork {
        /// The alias.
        session: String,
        /// The fork's alias.
        into: String,
    },
    /// Merge `patch` into `session`'s session-scope state.
    PatchState {
        /// The alias.
        session: String,
        /// Keys to set (`null` removes one).
        patch: StateMap,
    },
    /// Read `session` as `user` (the scenario's user when `None`).
    Get {
        /// The alias (an alias never created reads as an unknown id).
        session: String,
        /// Who asks.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user: Option<String>,
    },
}

/// A step and the outcome every face must answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expected {
    /// The step.
    pub step: Step,
    /// Its outcome, reduced by this module's functions.
    pub outcome: Value,
}

/// The ids of the scenario's sessions by alias, shared by a face and its fallback.
pub type Aliases = std::collections::HashMap<String, String>;

/// The id `alias` stands for (an alias never created stands for itself,
/// which no session has).
pub fn id_of(aliases: &Aliases, alias: &str) -> String {
    aliases
        .get(alias)
        .cloned()
        .unwrap_or_else(|| alias.to_owned())
}

/// A face of the session service, as the suite drives it.
#[async_trait::async_trait]
pub trait Face: Send {
    /// Runs `step`, recording in `aliases` the id of a session it creates
    /// or forks; `None` when this face does not offer the call.
    async fn run(&mut self, step: &Step, aliases: &mut Aliases) -> Option<Value>;
}

/// The reduced outcome of a failed call: its kind.
pub fn failed(kind: ErrorKind) -> Value {
    json!({ "error": kind.as_str() })
}

/// The reduced outcome of any call: the value `ok` reduces it to, or the error's kind.
pub fn outcome<T>(result: Result<T, SessionError>, ok: impl FnOnce(T) -> Value) -> Value {
    match result {
        Ok(v) => ok(v),
        Err(e) => failed(e.kind()),
    }
}

/// A message as one line: `role: text`, a tool call as `assistant: call NAME`.
pub fn message_line(m: &Message) -> String {
    let role = match m.role() {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let calls: Vec<&str> = m.tool_calls().iter().map(|c| c.name.as_str()).collect();
    if calls.is_empty() {
        format!("{role}: {}", m.text())
    } else {
        format!("{role}: call {}", calls.join(","))
    }
}

/// The outcome of `context`: the messages, one line each.
pub fn context_outcome(messages: &[Message]) -> Value {
    json!({ "messages": messages.iter().map(message_line).collect::<Vec<_>>() })
}

/// The outcome of `create`, `get`, `rewind` and `fork`: the session's event count.
pub fn session_outcome(session: &Session) -> Value {
    json!({ "events": session.event_count })
}

/// The outcome of `compact`: whether it compacted, and the context after.
pub fn compact_outcome(compacted: bool, events_after: usize, tokens_after: u64) -> Value {
    if compacted {
        json!({ "compacted": true, "events_after": events_after, "tokens_after": tokens_after })
    } else {
        json!({ "compacted": false })
    }
}

/// The outcome of `search`: how many hits.
pub fn search_outcome(hits: usize) -> Value {
    json!({ "hits": hits })
}

/// The outcome of `patch_state`: the session scope after.
pub fn state_outcome(session_scope: &StateMap) -> Value {
    json!({ "session": session_scope })
}

/// The outcome of `resolve`.
pub fn resolve_outcome(is_new: bool) -> Value {
    json!({ "is_new": is_new })
}

/// The outcome of `append`: how many events were written.
pub fn append_outcome(written: usize) -> Value {
    json!({ "written": written })
}

fn at(seconds: i64) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp(1_767_225_600 + seconds, 0).unwrap_or_default()
}

/// An event with a fixed id and time, so every face appends the same bytes.
fn event(n: u32, message: Message, invocation: &str) -> SessionEvent {
    let mut e = SessionEvent::new(message);
    e.id = format!("00000000-0000-7000-8000-{n:012}");
    e.timestamp = at(i64::from(n));
    e.invocation_id = Some(invocation.to_owned());
    e
}

/// A user's question, then a tool loop of `steps` calls and results inside
/// the same turn, then the answer: what an agent run writes.
fn tool_loop(first: u32, steps: u32, invocation: &str) -> Vec<SessionEvent> {
    let mut n = first;
    let mut next = |m: Message| {
        n += 1;
        event(n, m, invocation)
    };
    let mut events = vec![next(Message::user(
        "Where is order ORD-17? Check every warehouse.",
    ))];
    for i in 1..=steps {
        let call = ToolCall::new(
            format!("call-{first}-{i}"),
            "lookup",
            &json!({ "warehouse": i }),
        );
        events.push(next(Message::assistant_tool_calls("", vec![call])));
        events.push(next(Message::tool_result(
            format!("call-{first}-{i}"),
            "lookup",
            format!(
                "warehouse {i}: ORD-17 not here, {} shelves checked:{}",
                i * 40,
                " aisle clear, dock clear, cage clear,".repeat(6)
            ),
        )));
    }
    events.push(next(Message::assistant(
        "ORD-17 is in none of the warehouses.",
    )));
    events
}

/// The scenario, in order.
pub fn scenario() -> Vec<Step> {
    let s = |a: &str| a.to_owned();
    let mut steps = vec![
        Step::Create { session: s("main") },
        Step::Resolve { key: s("chat-1") },
        Step::Resolve { key: s("chat-1") },
        Step::Append {
            session: s("main"),
            events: vec![event(
                1,
                Message::system("Answer in one sentence."),
                "inv-0",
            )],
        },
        Step::Append {
            session: s("main"),
            events: tool_loop(100, 25, "inv-1"),
        },
        Step::Context { session: s("main") },
        Step::Search {
            session: s("main"),
            query: s("ORD-17 shelves"),
        },
    ];
    let specs = [
        ("by-summary", json!({"strategy": "summarize"})),
        ("by-structure", json!({"strategy": "structured_summary"})),
        (
            "by-window",
            json!({"strategy": "sliding_window", "max_events": 10}),
        ),
        (
            "by-turns",
            json!({"strategy": "turn_window", "max_turns": 1}),
        ),
        (
            "by-budget",
            json!({"strategy": "token_budget", "max_tokens": 400}),
        ),
        (
            "by-clearing",
            json!({"strategy": "tool_result_clearing", "keep": 3}),
        ),
        (
            "by-trigger",
            json!({"strategy": "summarize", "trigger": {"tokens": 1_000_000}}),
        ),
    ];
    for (alias, spec) in specs {
        steps.push(Step::Fork {
            session: s("main"),
            into: s(alias),
        });
        steps.push(Step::Compact {
            session: s(alias),
            spec,
        });
        steps.push(Step::Context { session: s(alias) });
    }
    steps.extend([
        // A call whose result has not arrived: left out of the model's context.
        Step::Append {
            session: s("main"),
            events: vec![event(
                200,
                Message::assistant_tool_calls(
                    "",
                    vec![ToolCall::new("call-pending", "lookup", &json!({}))],
                ),
                "inv-1",
            )],
        },
        Step::Context { session: s("main") },
        Step::Search {
            session: s("by-summary"),
            query: s("warehouse 3"),
        },
        Step::Append {
            session: s("main"),
            events: tool_loop(300, 2, "inv-2"),
        },
        Step::Rewind {
            session: s("main"),
            invocation: s("inv-2"),
        },
        Step::Context { session: s("main") },
        Step::PatchState {
            session: s("main"),
            patch: BTreeMap::from([(s("step"), json!(2)), (s("draft"), json!("x"))])
                .into_iter()
                .collect(),
        },
        Step::PatchState {
            session: s("main"),
            patch: [(s("user:lang"), json!("de"))].into_iter().collect(),
        },
        Step::Get {
            session: s("main"),
            user: Some(s(OTHER_USER)),
        },
        Step::Get {
            session: s("never-created"),
            user: None,
        },
        Step::Compact {
            session: s("main"),
            spec: json!({"strategy": "sliding_window"}),
        },
        Step::Compact {
            session: s("main"),
            spec: json!({"strategy": "sliding_window", "max_events": 0}),
        },
    ]);
    steps.extend(promise_steps());
    steps
}

/// Three short turns (invocations `inv-a`..`inv-c`) after a system prompt
/// and a sub-agent's prompt, appended to `session`.
fn three_turns(session: &str) -> Step {
    let mut sub = event(400, Message::system("Research only."), "inv-a");
    sub.branch = Some("orch.researcher".to_owned());
    let mut events = vec![event(399, Message::system("Be brief."), "inv-a"), sub];
    for (i, inv) in ["inv-a", "inv-b", "inv-c"].into_iter().enumerate() {
        let n = 401 + 2 * u32::try_from(i).unwrap_or(0);
        events.push(event(n, Message::user(format!("question {i}")), inv));
        events.push(event(n + 1, Message::assistant(format!("answer {i}")), inv));
    }
    Step::Append {
        session: session.to_owned(),
        events,
    }
}

/// The promise through every face: the root agent's context leaves out
/// the sub-agent's prompt; a rewind after a window compaction restores the
/// turns it dropped; a summary that would not save tokens is not made; a
/// budget the newest turn is over reports by how much.
fn promise_steps() -> Vec<Step> {
    let s = |a: &str| a.to_owned();
    let compact = |session: &str, spec: Value| Step::Compact {
        session: s(session),
        spec,
    };
    vec![
        Step::Create {
            session: s("turns"),
        },
        three_turns("turns"),
        Step::Context {
            session: s("turns"),
        },
        Step::Fork {
            session: s("turns"),
            into: s("tiny"),
        },
        compact("tiny", json!({"strategy": "summarize", "keep": 1})),
        Step::Fork {
            session: s("turns"),
            into: s("tight"),
        },
        compact(
            "tight",
            json!({"strategy": "token_budget", "max_tokens": 20}),
        ),
        compact("turns", json!({"strategy": "turn_window", "max_turns": 1})),
        Step::Context {
            session: s("turns"),
        },
        Step::Rewind {
            session: s("turns"),
            invocation: s("inv-c"),
        },
        Step::Context {
            session: s("turns"),
        },
    ]
}

/// Runs the scenario through `face`, the steps it does not offer through
/// `fallback` (over the same store); answers each step's outcome, `None`
/// for the steps the face did not run.
pub async fn run(face: &mut dyn Face, fallback: &mut dyn Face) -> Vec<(Step, Option<Value>)> {
    let mut aliases = Aliases::new();
    let mut out = Vec::new();
    for step in scenario() {
        let got = face.run(&step, &mut aliases).await;
        if got.is_none() {
            let _ = fallback.run(&step, &mut aliases).await;
        }
        out.push((step, got));
    }
    out
}

/// The checked-in outcomes (`tests/same-answer/scenario.json` from the
/// workspace root, given as `path`).
pub fn expected(path: &std::path::Path) -> Vec<Expected> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Asserts that what `face` answered is what the scenario expects, step by
/// step; answers how many steps the face ran itself.
pub fn check(face: &str, got: &[(Step, Option<Value>)], expected: &[Expected]) -> usize {
    assert_eq!(
        got.len(),
        expected.len(),
        "{face}: the scenario changed: regenerate tests/same-answer/scenario.json \
         (UPDATE_SAME_ANSWER=1 cargo test -p agent-session-scenarios --test same_answer)"
    );
    let mut ran = 0;
    for (i, ((step, outcome), want)) in got.iter().zip(expected).enumerate() {
        assert_eq!(
            step, &want.step,
            "{face}: step {i} is not the checked-in one"
        );
        if let Some(outcome) = outcome {
            ran += 1;
            assert_eq!(
                outcome, &want.outcome,
                "{face}: step {i} ({step:?}) answered differently"
            );
        }
    }
    ran
}

/// The scenario's owner, or `user` of its app.
pub fn owner(user: Option<&str>) -> Owner {
    Owner::parse(APP, user.unwrap_or(USER)).unwrap()
}

/// A compaction spec of the scenario, parsed.
pub fn spec(value: &Value) -> Result<StrategySpec, SessionError> {
    serde_json::from_value(value.clone())
        .map_err(|e| SessionError::invalid_because("spec", e.to_string(), e))
}

/// The outcome of a compaction the service reported.
pub fn compacted(c: &Compacted) -> Value {
    let mut outcome = compact_outcome(c.compacted, c.events_after, c.tokens_after);
    if let (Some(s), Some(map)) = (&c.shortfall, outcome.as_object_mut()) {
        map.insert("over_by".to_owned(), json!(s.over_by));
    }
    outcome
}

/// The library: the service, called in Rust; also every other face's
/// fallback for the steps it does not offer.
pub struct LibraryFace {
    /// The service.
    pub service: Arc<dyn SessionService>,
}

impl LibraryFace {
    fn id(aliases: &Aliases, alias: &str) -> Result<SessionId, SessionError> {
        SessionId::new(id_of(aliases, alias))
    }

    async fn compact(&self, id: &SessionId, spec_json: &Value) -> Result<Compacted, SessionError> {
        let compactor = spec(spec_json)?.compactor()?;
        self.service
            .compact(&owner(None), id, compactor.as_ref())
            .await
    }
}

fn remember(aliases: &mut Aliases, alias: &str, session: &Session) {
    aliases.insert(alias.to_owned(), session.id.to_string());
}

#[async_trait::async_trait]
impl Face for LibraryFace {
    async fn run(&mut self, step: &Step, aliases: &mut Aliases) -> Option<Value> {
        let me = owner(None);
        let s = &self.service;
        Some(match step {
            Step::Create { session } => {
                let request = CreateSessionRequest::for_owner(&me).build().unwrap();
                let created = s.create(request).await.unwrap();
                remember(aliases, session, &created);
                session_outcome(&created)
            }
            Step::Resolve { key } => outcome(
                s.resolve(&ResolveRequest::for_owner(&me, key), &ResetPolicy::never())
                    .await,
                |r| resolve_outcome(r.is_new),
            ),
            Step::Append { session, events } => {
                let id = Self::id(aliases, session).unwrap();
                outcome(s.append_events(&me, &id, events.clone()).await, |o| {
                    append_outcome(o.written)
                })
            }
            Step::Context { session } => {
                let id = Self::id(aliases, session).unwrap();
                outcome(s.messages(&me, &id).await, |m| context_outcome(&m))
            }
            Step::Compact { session, spec } => {
                let id = Self::id(aliases, session).unwrap();
                outcome(self.compact(&id, spec).await, |c| compacted(&c))
            }
            Step::Search { session, query } => {
                let q = SearchQuery::in_session(id_of(aliases, session), query).page(0, HITS);
                outcome(s.search(&me, &q).await, |p| search_outcome(p.items.len()))
            }
            Step::Rewind {
                session,
                invocation,
            } => {
                let id = Self::id(aliases, session).unwrap();
                let to = RewindTo::before_invocation(invocation.as_str()).unwrap();
                outcome(s.rewind(&me, &id, &to).await, |r| {
                    session_outcome(&r.session)
                })
            }
            Step::Fork { session, into } => {
                let id = Self::id(aliases, session).unwrap();
                let fork = s.fork(&me, &id, &ForkAt::Latest).await.unwrap();
                remember(aliases, into, &fork);
                session_outcome(&fork)
            }
            Step::PatchState { session, patch } => {
                let id = Self::id(aliases, session).unwrap();
                outcome(s.patch_state(&me, &id, patch, None).await, |st| {
                    state_outcome(&st.session)
                })
            }
            Step::Get { session, user } => {
                let who = owner(user.as_deref());
                match Self::id(aliases, session) {
                    Ok(id) => outcome(s.get(&who, &id).await, |x| session_outcome(&x)),
                    Err(e) => failed(e.kind()),
                }
            }
        })
    }
}
