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
/// context order): only the events the options' branch sees; the pinned
/// system messages first (the latest stored system message of each
/// branch; older ones are superseded and left out); then the rest in
/// context order, without tool calls that lack a result or results that
/// lack their call (what a chat-completions API would refuse).
pub fn model_context(events: Vec<SessionEvent>, options: &ContextOptions) -> Vec<Message> {
    let events = match &options.branch {
        None => events,
        Some(viewer) => {
            let visible: HashSet<String> = visible_branches(viewer).into_iter().collect();
            events
                .into_iter()
                .filter(|e| e.branch.as_ref().is_none_or(|b| visible.contains(b)))
                .collect()
        }
    };
    remove_unpaired_tool_calls(pinned_first(events), |_| false)
}

/// The context's messages with the pinned system messages first: the latest
/// stored (non-synthetic) system message of each branch, in context order;
/// older system messages of a branch are superseded and left out.
pub fn pinned_first(events: Vec<SessionEvent>) -> Vec<Message> {
    let is_system = |e: &SessionEvent| !e.is_synthetic() && e.role() == Role::System;
    let mut latest: HashMap<Option<&str>, usize> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        if is_system(e) {
            latest.insert(e.branch.as_deref(), i);
        }
    }
    let pinned: HashSet<usize> = latest.into_values().collect();
    let (mut first, mut rest) = (Vec::new(), Vec::new());
    for (i, e) in events.into_iter().enumerate() {
        if pinned.contains(&i) {
            first.push(e.message);
        } else if !is_system(&e) {
            rest.push(e.message);
        }
    }
    first.extend(rest);
    first
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
        assert_eq!(texts(&got), ["sub rules", "new rules", "hi", "hello"]);
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
