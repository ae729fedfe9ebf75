//! Checks shared by the compaction test files.

use std::collections::HashSet;

use session_core::{Message, SessionEvent};

/// Every tool call in `context` has its result there, and every result its call.
pub(crate) fn pairs_hold(context: &[SessionEvent]) -> bool {
    let calls: HashSet<&str> = context
        .iter()
        .flat_map(|e| e.message.tool_calls().iter().map(|c| c.id.as_str()))
        .collect();
    let results: HashSet<&str> = context
        .iter()
        .filter_map(|e| match &e.message {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    calls == results
}
