//! The reference workload's events: JSON events of about 250 bytes; in
//! every block of ten, eight user and assistant texts of about 200
//! characters, then an assistant tool call and its tool result.

use agent_session::{Message, SessionEvent, ToolCall};
use serde_json::json;

const WORDS: &[&str] = &[
    "alpha", "river", "stone", "cloud", "maple", "orbit", "piano", "delta", "ember", "grove",
    "lunar", "cedar", "north", "quartz", "amber", "harbor",
];

/// Words planted at known rates for the search workload, frequent to rare:
/// `(word, one event in N holds it)`.
pub(crate) const PLANTED: &[(&str, usize)] = &[("walrus", 10), ("quokka", 100), ("zanzibar", 1000)];

/// A word most events hold: the frequent end of the search workload.
pub(crate) const FREQUENT: &str = "alpha";

/// About 200 characters of text for event `i`.
fn text(i: usize) -> String {
    let mut s = String::with_capacity(220);
    let mut k = 0;
    while s.len() < 190 {
        s.push_str(WORDS[(i.wrapping_mul(7).wrapping_add(k * 3)) % WORDS.len()]);
        s.push(' ');
        k += 1;
    }
    for (word, every) in PLANTED {
        if i.is_multiple_of(*every) {
            s.push_str(word);
            s.push(' ');
        }
    }
    s.pop();
    s
}

/// Event `i` of the reference mix.
pub(crate) fn event(i: usize) -> SessionEvent {
    let message = match i % 10 {
        8 => Message::assistant_tool_calls(
            "",
            vec![ToolCall::new(
                format!("call-{i}"),
                "lookup_order",
                &json!({"order": i, "fields": ["status", "address"]}),
            )],
        ),
        9 => Message::tool_result(
            format!("call-{}", i.saturating_sub(1)),
            "lookup_order",
            text(i),
        ),
        k if k % 2 == 0 => Message::user(text(i)),
        _ => Message::assistant(text(i)),
    };
    SessionEvent::new(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_has_a_tool_call_and_result_in_every_ten_and_events_of_about_250_bytes() {
        let events: Vec<SessionEvent> = (0..1000).map(event).collect();
        let calls = events
            .iter()
            .filter(|e| !e.message.tool_calls().is_empty())
            .count();
        let results = events
            .iter()
            .filter(|e| e.role() == agent_session::Role::Tool)
            .count();
        assert_eq!((calls, results), (100, 100));
        let bytes: usize = events
            .iter()
            .map(|e| serde_json::to_string(&e.message).unwrap().len())
            .sum();
        let mean = bytes / events.len();
        assert!((150..=350).contains(&mean), "mean message size {mean}");
        let rare = events
            .iter()
            .filter(|e| e.message.text().contains("zanzibar"))
            .count();
        assert_eq!(rare, 1);
    }
}
