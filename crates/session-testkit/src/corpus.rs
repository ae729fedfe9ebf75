//! A corpus of realistic agent conversations with planted facts, for
//! measuring what compaction keeps.
//!
//! Three conversations of 110+ turns each, written for this corpus (files in
//! `crates/session-testkit/corpus/`): a support chat with orders and
//! addresses, a coding agent with many large tool outputs, and a research
//! agent that delegates to sub-agents on branches. Each lists the facts —
//! names, numbers, identifiers, decisions — that a later question needs,
//! with the exact text (`needle`) that shows a summary or a search kept it.
//!
//! ```
//! let corpus = session_testkit::corpus::all();
//! assert_eq!(corpus.len(), 3);
//! for c in &corpus {
//!     assert!(c.turns() >= 100, "{} has {} turns", c.name, c.turns());
//!     assert!(c.facts.len() >= 10);
//! }
//! ```

use serde_json::Value;
use session_core::{Message, SessionEvent};

/// One fact planted in a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlantedFact {
    /// A short name for the fact.
    pub id: String,
    /// The exact text (matched case-insensitively) whose presence shows the fact is known.
    pub needle: String,
    /// A later question that needs the fact.
    pub question: String,
}

impl PlantedFact {
    /// Whether `text` carries the fact.
    pub fn is_in(&self, text: &str) -> bool {
        text.to_lowercase().contains(&self.needle.to_lowercase())
    }
}

/// One conversation of the corpus.
#[derive(Debug, Clone)]
pub struct Conversation {
    /// `support`, `coding` or `research`.
    pub name: String,
    /// What it is.
    pub description: String,
    /// The app it belongs to.
    pub app: String,
    /// The user it belongs to.
    pub user: String,
    /// The planted facts.
    pub facts: Vec<PlantedFact>,
    /// The events, in order, with their invocation ids and branches.
    pub events: Vec<SessionEvent>,
}

impl Conversation {
    /// User messages on the main branch.
    pub fn turns(&self) -> usize {
        session_core::turn_count(&self.events)
    }

    /// The whole conversation as text (for checking where a needle occurs).
    pub fn text(&self) -> String {
        let mut out = String::new();
        for e in &self.events {
            out.push_str(e.message.text());
            for c in e.message.tool_calls() {
                out.push_str(&c.arguments);
            }
            out.push('\n');
        }
        out
    }
}

const FILES: [(&str, &str); 3] = [
    ("support", include_str!("../corpus/support.json")),
    ("coding", include_str!("../corpus/coding.json")),
    ("research", include_str!("../corpus/research.json")),
];

/// The three conversations.
pub fn all() -> Vec<Conversation> {
    FILES
        .iter()
        .map(|(name, text)| parse(text).unwrap_or_else(|e| panic!("corpus/{name}.json: {e}")))
        .collect()
}

/// One conversation by name.
pub fn named(name: &str) -> Option<Conversation> {
    all().into_iter().find(|c| c.name == name)
}

fn field<'a>(v: &'a Value, key: &str) -> Result<&'a str, String> {
    v.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("missing string field {key:?}"))
}

fn parse(text: &str) -> Result<Conversation, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let facts = v
        .get("facts")
        .and_then(Value::as_array)
        .ok_or("missing facts")?
        .iter()
        .map(|f| {
            Ok(PlantedFact {
                id: field(f, "id")?.to_owned(),
                needle: field(f, "needle")?.to_owned(),
                question: field(f, "question")?.to_owned(),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let events = v
        .get("events")
        .and_then(Value::as_array)
        .ok_or("missing events")?
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let message: Message =
                serde_json::from_value(e.get("message").cloned().unwrap_or_default())
                    .map_err(|err| format!("event {i}: {err}"))?;
            let mut b = SessionEvent::builder(message).id(format!("corpus-{i:05}"));
            if let Some(inv) = e.get("invocation_id").and_then(Value::as_str) {
                b = b.invocation_id(inv);
            }
            if let Some(branch) = e.get("branch").and_then(Value::as_str) {
                b = b.branch(branch);
            }
            b.build().map_err(|err| format!("event {i}: {err}"))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Conversation {
        name: field(&v, "name")?.to_owned(),
        description: field(&v, "description")?.to_owned(),
        app: field(&v, "app")?.to_owned(),
        user: field(&v, "user")?.to_owned(),
        facts,
        events,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_needle_occurs_in_its_conversation() {
        for c in all() {
            let text = c.text();
            for f in &c.facts {
                assert!(f.is_in(&text), "{}: {} not found", c.name, f.needle);
            }
        }
    }
}
