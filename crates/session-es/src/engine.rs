//! What the backend takes from an engine beyond what every Elasticsearch
//! and OpenSearch node has: the `wildcard` field type (an x-pack module of
//! Elasticsearch's default distribution, core in OpenSearch 2.15+), detected
//! when the indices are created, with a `keyword` layout where it is missing.

use std::sync::atomic::{AtomicU8, Ordering};

use serde_json::Value;

/// The field type of the case-folded text that literal search matches
/// (`text_lc` in the events index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum TextField {
    /// `wildcard` where the engine has that field type, else `keyword`
    /// (the default). An existing index keeps the type it was created with.
    #[default]
    Detect,
    /// A `wildcard` field: one value per event, any substring found through
    /// the field's n-gram index.
    Wildcard,
    /// A `keyword` field, which every node has (an Elasticsearch without
    /// the x-pack `wildcard` module, such as its test distribution): a text
    /// longer than [`TextField::PIECE_CHARS`] characters is stored as
    /// overlapping pieces, so a term of up to [`TextField::EXACT_CHARS`]
    /// characters is found exactly; a longer one is narrowed by its first
    /// [`TextField::EXACT_CHARS`] characters and checked on the client.
    Keyword,
}

impl TextField {
    /// The most characters of one piece of a `keyword` text (at most four
    /// bytes each, under Lucene's limit of 32,766 bytes for one term).
    pub const PIECE_CHARS: usize = 8_000;
    /// Where each piece of a `keyword` text starts after the previous one.
    const PIECE_STEP: usize = 4_000;
    /// The longest literal term a `keyword` text answers exactly: every
    /// substring this long lies whole in some piece.
    pub const EXACT_CHARS: usize = Self::PIECE_CHARS - Self::PIECE_STEP + 1;

    /// The mapping type of the field.
    pub(crate) fn mapping_type(self) -> &'static str {
        match self {
            Self::Keyword => "keyword",
            Self::Detect | Self::Wildcard => "wildcard",
        }
    }

    /// The value of the field for a folded text: the text itself, or on a
    /// `keyword` field its overlapping pieces when it is longer than one.
    pub(crate) fn value(self, folded: &str) -> Value {
        if self != Self::Keyword {
            return Value::String(folded.to_owned());
        }
        let starts: Vec<usize> = folded.char_indices().map(|(i, _)| i).collect();
        if starts.len() <= Self::PIECE_CHARS {
            return Value::String(folded.to_owned());
        }
        let mut pieces = Vec::new();
        let mut first = 0usize;
        loop {
            let last = first.saturating_add(Self::PIECE_CHARS);
            let from = starts.get(first).copied().unwrap_or(folded.len());
            let to = starts.get(last).copied().unwrap_or(folded.len());
            pieces.push(Value::String(
                folded.get(from..to).unwrap_or_default().to_owned(),
            ));
            if last >= starts.len() {
                break;
            }
            first = first.saturating_add(Self::PIECE_STEP);
        }
        Value::Array(pieces)
    }

    /// The substring to look for when a literal `term` (folded) is searched
    /// on this field, and whether the answer is exact (a longer term on a
    /// `keyword` field is looked for by its first [`TextField::EXACT_CHARS`]
    /// characters: the hits must be checked).
    pub(crate) fn needle(self, folded: &str) -> (&str, bool) {
        if self != Self::Keyword {
            return (folded, true);
        }
        match folded.char_indices().nth(Self::EXACT_CHARS) {
            Some((cut, _)) => (folded.get(..cut).unwrap_or(folded), false),
            None => (folded, true),
        }
    }

    fn code(self) -> u8 {
        match self {
            Self::Detect => 0,
            Self::Wildcard => 1,
            Self::Keyword => 2,
        }
    }

    fn from_code(code: u8) -> Self {
        match code {
            1 => Self::Wildcard,
            2 => Self::Keyword,
            _ => Self::Detect,
        }
    }
}

/// The text field asked for and the one the events index has (shared by clones of a repository).
#[derive(Debug)]
pub(crate) struct TextFieldCell {
    asked: TextField,
    found: AtomicU8,
}

impl TextFieldCell {
    pub(crate) fn new(asked: TextField) -> Self {
        Self {
            asked,
            found: AtomicU8::new(asked.code()),
        }
    }

    /// The type asked for when the repository was built.
    pub(crate) fn asked(&self) -> TextField {
        self.asked
    }

    /// The type documents are written for: the index's once read, else the
    /// one asked for (`Detect` writes as `Wildcard`, which a `keyword` text
    /// of at most [`TextField::PIECE_CHARS`] characters equals).
    pub(crate) fn get(&self) -> TextField {
        match TextField::from_code(self.found.load(Ordering::Relaxed)) {
            TextField::Keyword => TextField::Keyword,
            TextField::Detect | TextField::Wildcard => TextField::Wildcard,
        }
    }

    pub(crate) fn set(&self, field: TextField) {
        self.found.store(field.code(), Ordering::Relaxed);
    }
}

/// Whether an error answer refuses a mapping for want of the `wildcard`
/// field type: a `mapper_parsing_exception` naming it, as the error or one
/// of its causes (a template's is wrapped in an `illegal_argument_exception`).
pub(crate) fn lacks_wildcard_type(status: u16, body: &Value) -> bool {
    if status != 400 {
        return false;
    }
    let mut err = body.get("error");
    // The chain is short; the bound only guards against a malformed answer.
    for _ in 0..16 {
        let Some(e) = err else { return false };
        let kind = e.get("type").and_then(Value::as_str);
        let reason = e.get("reason").and_then(Value::as_str).unwrap_or_default();
        if kind == Some("mapper_parsing_exception") && reason.contains("[wildcard]") {
            return true;
        }
        err = e.get("caused_by");
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(v: &Value) -> Vec<String> {
        match v {
            Value::String(s) => vec![s.clone()],
            Value::Array(a) => a
                .iter()
                .map(|p| p.as_str().unwrap_or_default().to_owned())
                .collect(),
            _ => panic!("{v}"),
        }
    }

    #[test]
    fn short_texts_stay_whole_and_long_keyword_texts_overlap() {
        assert_eq!(TextField::Keyword.value("abc"), Value::String("abc".into()));
        let long: String = (0..20_001u32)
            .map(|i| char::from_u32(0x4e00 + i % 500).unwrap_or('x'))
            .collect();
        assert_eq!(
            TextField::Wildcard.value(&long),
            Value::String(long.clone())
        );
        let got = pieces(&TextField::Keyword.value(&long));
        assert!(got.len() > 1);
        for p in &got {
            assert!(p.chars().count() <= TextField::PIECE_CHARS);
            assert!(p.len() < 32_766);
        }
        // Every substring of EXACT_CHARS characters lies whole in one piece.
        let chars: Vec<char> = long.chars().collect();
        for start in (0..chars.len() - TextField::EXACT_CHARS).step_by(997) {
            let sub: String = chars[start..start + TextField::EXACT_CHARS]
                .iter()
                .collect();
            assert!(got.iter().any(|p| p.contains(&sub)), "lost at {start}");
        }
        assert_eq!(
            got.last().map(|p| p.chars().last()),
            Some(chars.last().copied())
        );
    }

    #[test]
    fn long_terms_on_keyword_fields_are_narrowed_and_marked() {
        let long = "a".repeat(TextField::EXACT_CHARS + 1);
        assert_eq!(TextField::Wildcard.needle(&long), (long.as_str(), true));
        let (n, exact) = TextField::Keyword.needle(&long);
        assert!(!exact);
        assert_eq!(n.len(), TextField::EXACT_CHARS);
        assert_eq!(TextField::Keyword.needle("lyon"), ("lyon", true));
    }

    #[test]
    fn a_missing_wildcard_type_is_recognised() {
        let body = serde_json::json!({"error": {"type": "mapper_parsing_exception",
            "reason": "Failed to parse mapping: The mapper type [wildcard] declared on field [text_lc] does not exist."},
            "status": 400});
        assert!(lacks_wildcard_type(400, &body));
        let template = serde_json::json!({"error": {"type": "illegal_argument_exception",
            "reason": "composable template [p-events] template after composition is invalid",
            "caused_by": {"type": "illegal_argument_exception", "reason": "invalid composite mappings",
                "caused_by": {"type": "mapper_parsing_exception",
                    "reason": "Failed to parse mapping: The mapper type [wildcard] declared on field [text_lc] does not exist."}}},
            "status": 400});
        assert!(lacks_wildcard_type(400, &template));
        assert!(!lacks_wildcard_type(
            400,
            &serde_json::json!({"error": {"type": "mapper_parsing_exception", "reason": "x"}})
        ));
    }
}
