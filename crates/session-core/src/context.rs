//! The model-ready context: what every face answers when an agent asks for
//! the messages of its next model call. One function, [`model_context`],
//! so the HTTP routes, MCP, the bindings and the CLI cannot disagree.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::event::SessionEvent;
use crate::filter::visible_branches;
use crate::message::{Message, Role};

/// Which context a caller asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct ContextOptions {
    /// The branch of the agent asking (`orch.researcher`): it sees root
    /// events, its ancestors' and its own, not its peers'. `None`: every
    /// event of the context.
    pub branch: Option<String>,
}

impl ContextOptions {
    /// The context as the agent on `branch` sees it.
    pub fn branch(branch: impl Into<String>) -> Self {
        Self {
            branch: Some(branch.into()),
        }
    }
}

/// The messages of a model call from a session's context `events` (in
/// context order), as the agent on the options' branch sees them:
///
/// - its events: root events, its ancestors' and its own (every event when
///   no branch is given: the root agent sees its sub-agents' work);
/// - system messages only of its own branch and its ancestors (the root
///   agent never gets a sub-agent's prompt), the latest of each, placed
///   first, ancestors before descendants; older ones are superseded and
///   left out;
/// - then the rest in context order, each tool result right after the
///   call it answers (a result that arrived turns later moves up to it),
///   without tool calls that lack a result or results that lack their call
///   (what a chat-completions API would refuse).
pub fn model_context(events: Vec<SessionEvent>, options: &ContextOptions) -> Vec<Message> {
    let viewer = options.branch.as_deref();
    let visible: HashSet<String> = viewer
        .map(|v| visible_branches(v).into_iter().collect())
        .unwrap_or_default();
    let sees_prompt = |b: Option<&String>| b.is_none_or(|b| visible.contains(b));
    let events: Vec<SessionEvent> = events
        .into_iter()
        .filter(|e| {
            if is_stored_system(e) {
                sees_prompt(e.branch.as_ref())
            } else {
                viewer.is_none() || sees_prompt(e.branch.as_ref())
            }
        })
        .collect();
    pair_adjacent(remove_unpaired_tool_calls(pinned_first(events), |_| false))
}

/// Whether `e` is a stored system message (not a summary).
fn is_stored_system(e: &SessionEvent) -> bool {
    !e.is_synthetic() && e.role() == Role::System
}

/// The context's messages with the pinned system messages first: the latest
/// stored (non-synthetic) system message of each branch, root first, then
/// each branch after its ancestors; older system messages of a branch are
/// superseded and left out.
pub fn pinned_first(events: Vec<SessionEvent>) -> Vec<Message> {
    let mut latest: HashMap<Option<&str>, usize> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        if is_stored_system(e) {
            latest.insert(e.branch.as_deref(), i);
        }
    }
    let depth = |b: Option<&str>| b.map_or(0, |b| b.matches('.').count().saturating_add(1));
    let mut pinned: Vec<(usize, usize)> = latest.into_iter().map(|(b, i)| (depth(b), i)).collect();
    pinned.sort_unstable();
    let order: HashMap<usize, usize> = pinned
        .iter()
        .enumerate()
        .map(|(rank, (_, i))| (*i, rank))
        .collect();
    let mut first: Vec<(usize, Message)> = Vec::new();
    let mut rest = Vec::new();
    for (i, e) in events.into_iter().enumerate() {
        if let Some(rank) = order.get(&i) {
            first.push((*rank, e.message));
        } else if !is_stored_system(&e) {
            rest.push(e.message);
        }
    }
    first.sort_by_key(|(rank, _)| *rank);
    let mut out: Vec<Message> = first.into_iter().map(|(_, m)| m).collect();
    out.extend(rest);
    out
}

/// Moves each tool result right after the assistant message holding its
/// call, the results of parallel calls in call order: a chat-completions
/// API wants them there, and a result can arrive turns after its call.
/// Messages are otherwise left in order.
pub fn pair_adjacent(messages: Vec<Message>) -> Vec<Message> {
    let calls: HashSet<String> = messages
        .iter()
        .flat_map(|m| m.tool_calls().iter().map(|c| c.id.clone()))
        .collect();
    let mut results: HashMap<String, Vec<Message>> = HashMap::new();
    let mut rest = Vec::with_capacity(messages.len());
    for m in messages {
        if let Message::Tool { tool_call_id, .. } = &m {
            if calls.contains(tool_call_id) {
                let id = tool_call_id.clone();
                results.entry(id).or_default().push(m);
                continue;
            }
        }
        rest.push(m);
    }
    let mut out = Vec::with_capacity(rest.len());
    for m in rest {
        let ids: Vec<String> = m.tool_calls().iter().map(|c| c.id.clone()).collect();
        out.push(m);
        for id in ids {
            out.extend(results.remove(&id).unwrap_or_default());
        }
    }
    out
}

/// Removes assistant tool calls that lack any of their results (and those
/// partial results), tool results whose call is missing, and calls whose
/// ids `drop` selects (with their results): what a chat-completions API
/// would reject or what the caller asked to leave out.
pub fn remove_unpaired_tool_calls(
    messages: Vec<Message>,
    drop: impl Fn(&str) -> bool,
) -> Vec<Message> {
    let results: HashSet<&str> = messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    let mut dropped_calls: HashSet<String> = HashSet::new();
    let mut kept_calls: HashSet<String> = HashSet::new();
    for m in &messages {
        let calls = m.tool_calls();
        if calls.is_empty() {
            continue;
        }
        let complete = calls
            .iter()
            .all(|c| results.contains(c.id.as_str()) && !drop(&c.id));
        for c in calls {
            if complete {
                kept_calls.insert(c.id.clone());
            } else {
                dropped_calls.insert(c.id.clone());
            }
        }
    }
    messages
        .into_iter()
        .filter(|m| match m {
            Message::Tool { tool_call_id, .. } => {
                kept_calls.contains(tool_call_id)
                    && !dropped_calls.contains(tool_call_id)
                    && !drop(tool_call_id)
            }
            Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
                tool_calls.iter().all(|c| kept_calls.contains(&c.id))
            }
            _ => true,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    fn texts(messages: &[Message]) -> Vec<&str> {
        messages.iter().map(Message::text).collect()
    }

    #[test]
    fn the_latest_system_message_of_each_branch_comes_first() {
        let e = |m: Message| SessionEvent::new(m);
        let mut sub = e(Message::system("sub rules"));
        sub.branch = Some("orch.sub".to_owned());
        let got = pinned_first(vec![
            e(Message::system("old rules")),
            e(Message::user("hi")),
            sub,
            e(Message::system("new rules")),
            e(Message::assistant("hello")),
        ]);
        assert_eq!(texts(&got), ["new rules", "sub rules", "hi", "hello"]);
    }

    #[test]
    fn each_agent_gets_its_own_and_its_ancestors_system_prompts_only() {
        let system_on = |branch: Option<&str>, text: &str| {
            let mut e = SessionEvent::new(Message::system(text));
            e.branch = branch.map(str::to_owned);
            e
        };
        let events = vec![
            system_on(Some("orch.researcher"), "SUB"),
            system_on(None, "ROOT"),
            system_on(Some("orch.writer"), "WRITER"),
            SessionEvent::new(Message::user("q")),
        ];
        let view = |branch: Option<&str>| {
            let options = ContextOptions {
                branch: branch.map(str::to_owned),
            };
            let got = model_context(events.clone(), &options);
            texts(&got)
                .iter()
                .map(|t| (*t).to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(view(None), ["ROOT", "q"], "the root agent");
        assert_eq!(view(Some("orch.researcher")), ["ROOT", "SUB", "q"]);
        assert_eq!(view(Some("orch")), ["ROOT", "q"]);
    }

    #[test]
    fn a_late_result_is_sent_right_after_its_call() {
        let calls = Message::assistant_tool_calls(
            "",
            vec![
                ToolCall::new("c1", "lookup", &serde_json::json!({})),
                ToolCall::new("c2", "lookup", &serde_json::json!({})),
            ],
        );
        let events: Vec<SessionEvent> = vec![
            Message::user("q1"),
            calls,
            Message::tool_result("c2", "lookup", "r2"),
            Message::assistant("a1"),
            Message::user("q2"),
            Message::tool_result("c1", "lookup", "r1 late"),
            Message::assistant("a2"),
        ]
        .into_iter()
        .map(SessionEvent::new)
        .collect();
        let got = model_context(events, &ContextOptions::default());
        assert_eq!(texts(&got), ["q1", "", "r1 late", "r2", "a1", "q2", "a2"]);
    }

    #[test]
    fn a_tool_call_without_its_result_is_left_out_of_the_model_context() {
        let call = Message::assistant_tool_calls(
            "",
            vec![ToolCall::new("c1", "lookup", &serde_json::json!({}))],
        );
        let events = vec![
            SessionEvent::new(Message::user("find it")),
            SessionEvent::new(call),
        ];
        let got = model_context(events, &ContextOptions::default());
        assert_eq!(texts(&got), ["find it"]);
    }

    #[test]
    fn an_agent_on_a_branch_does_not_see_its_peers() {
        let on = |branch: &str, text: &str| {
            let mut e = SessionEvent::new(Message::user(text));
            e.branch = Some(branch.to_owned());
            e
        };
        let events = vec![
            SessionEvent::new(Message::user("root")),
            on("orch", "orchestrator"),
            on("orch.researcher", "mine"),
            on("orch.writer", "peer"),
        ];
        let got = model_context(events, &ContextOptions::branch("orch.researcher"));
        assert_eq!(texts(&got), ["root", "orchestrator", "mine"]);
    }
}
