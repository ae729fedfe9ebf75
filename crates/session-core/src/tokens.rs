//! Token estimation: the trait, and the character heuristic of the seeds.

use crate::message::Message;

/// Estimates how many tokens a text or message costs a model.
///
/// Estimates are stored per event at append time, so a trigger that checks
/// the context size costs O(1). `session-compaction` adds an exact BPE
/// counter and a calibrated one behind this same trait.
pub trait TokenEstimator: Send + Sync + std::fmt::Debug {
    /// Tokens for a piece of text.
    fn estimate_text(&self, text: &str) -> u32;

    /// Tokens for a whole message: its text, tool calls and a small per-message overhead.
    fn estimate_message(&self, message: &Message) -> u32 {
        let mut total = 4 + self.estimate_text(message.text());
        for call in message.tool_calls() {
            total = total
                .saturating_add(self.estimate_text(&call.name))
                .saturating_add(self.estimate_text(&call.arguments))
                .saturating_add(3);
        }
        total
    }
}

/// The character heuristic: JSON or array content / 3, any other text
/// (prose, code, logs) / 3.5, each rounded up. Deliberately conservative:
/// on the repository's corpus it overcounts both `o200k_base` and
/// `cl100k_base` by 4 % to 10 % per conversation (`docs/compaction.md`),
/// so compaction fires early rather than late.
///
/// ```
/// use session_core::{HeuristicEstimator, TokenEstimator};
/// let e = HeuristicEstimator;
/// assert_eq!(e.estimate_text("abcdefg"), 2);        // text: 7 / 3.5
/// assert_eq!(e.estimate_text("{\"a\": 123}"), 4);   // JSON: 10 / 3, rounded up
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct HeuristicEstimator;

impl TokenEstimator for HeuristicEstimator {
    fn estimate_text(&self, text: &str) -> u32 {
        let len = text.chars().count();
        let trimmed = text.trim_start();
        let tokens = if trimmed.starts_with('{') || trimmed.starts_with('[') {
            len.div_ceil(3)
        } else {
            // len / 3.5, rounded up.
            len.saturating_mul(2).div_ceil(7)
        };
        u32::try_from(tokens).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heuristic_divisors() {
        let e = HeuristicEstimator;
        assert_eq!(e.estimate_text(""), 0);
        assert_eq!(e.estimate_text("abcde"), 2, "5 / 3.5, rounded up");
        assert_eq!(e.estimate_text("abcdefg"), 2);
        assert_eq!(e.estimate_text("[1,2,3]"), 3);
        assert_eq!(
            e.estimate_text("see ```rust\nfn x(){}``` ok"),
            8,
            "code counts as text: 26 / 3.5"
        );
    }

    #[test]
    fn messages_count_tool_calls() {
        let e = HeuristicEstimator;
        let plain = e.estimate_message(&Message::assistant(""));
        let call = e.estimate_message(&Message::assistant_tool_calls(
            "",
            vec![crate::ToolCall::new(
                "c",
                "lookup",
                &serde_json::json!({"q": "x"}),
            )],
        ));
        assert!(call > plain);
    }
}
