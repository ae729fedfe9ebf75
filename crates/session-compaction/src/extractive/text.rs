//! The text side of the offline summarizer: cutting messages into passages
//! and words, and what makes a word or a passage salient.

use std::borrow::Cow;
use std::hash::Hasher as _;
use std::sync::OnceLock;

use aho_corasick::AhoCorasick;
use rustc_hash::{FxHashSet as HashSet, FxHasher};
use serde_json::Value;

const STOPWORDS: &[&str] = &[
    "about", "above", "after", "again", "also", "because", "been", "before", "being", "below",
    "between", "both", "cannot", "could", "does", "doing", "down", "each", "even", "every", "from",
    "further", "have", "having", "here", "hello", "into", "just", "like", "more", "most", "much",
    "must", "need", "only", "other", "over", "please", "same", "should", "some", "still", "such",
    "than", "thank", "thanks", "that", "their", "them", "then", "there", "these", "they", "this",
    "those", "through", "under", "until", "very", "want", "were", "what", "when", "where", "which",
    "while", "will", "with", "would", "your", "yours", "yes", "okay", "sure", "great", "right",
    "let's", "i'll", "i'm", "it's", "that's", "don't", "can't", "we'll", "you're", "i've", "now",
    "the", "and", "for", "you", "are", "but", "not", "all", "any", "can", "had", "has", "her",
    "his", "how", "its", "our", "out", "she", "was", "who", "why", "did", "get", "got", "one",
];

pub(super) const DECISION_CUES: &[&str] = &[
    "decid",
    "decision",
    "agreed",
    "go with",
    "we'll use",
    "let's use",
    "chose",
    "choose",
    "instead",
    "prefer",
    "switch to",
    "settled",
    "final",
    "approved",
    "confirm",
    "we keep",
    "keep the",
    "stick with",
    "going with",
    "opt for",
    "opted",
];
pub(super) const ACTION_CUES: &[&str] = &[
    "todo",
    "to do",
    "next step",
    "follow up",
    "follow-up",
    "remind",
    "will send",
    "will ship",
    "i'll",
    "we'll",
    "need to",
    "pending",
    "tomorrow",
    "next week",
    "by friday",
    "deadline",
];
pub(super) const DONE_CUES: &[&str] = &[
    "done",
    "fixed",
    "merged",
    "created",
    "issued",
    "shipped",
    "passed",
    "resolved",
    "updated",
    "refunded",
    "completed",
    "applied",
    "deployed",
    "booked",
    "sent",
];
pub(super) const ERROR_CUES: &[&str] = &[
    "error",
    "failed",
    "failure",
    "panicked",
    "root cause",
    "because",
    "exception",
    "traceback",
];

/// A hash of `text` lower-cased: passages that differ only in case are one.
pub(super) fn folded_hash(text: &str) -> u64 {
    let mut h = FxHasher::default();
    if text.is_ascii() {
        // Eight bytes at a time: the common case, without decoding chars.
        let mut chunks = text.as_bytes().chunks_exact(8);
        for chunk in chunks.by_ref() {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            word.make_ascii_lowercase();
            h.write_u64(u64::from_le_bytes(word));
        }
        for b in chunks.remainder() {
            h.write_u8(b.to_ascii_lowercase());
        }
    } else {
        for c in text.chars().flat_map(char::to_lowercase) {
            h.write_u32(u32::from(c));
        }
    }
    h.finish()
}

pub(super) fn stopword(lower: &str) -> bool {
    static SET: OnceLock<HashSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| STOPWORDS.iter().copied().collect())
        .contains(lower)
}

/// Which kinds of cue a lower-cased passage holds.
#[derive(Debug, Clone, Copy, Default)]
#[allow(clippy::struct_excessive_bools)] // one flag per cue list
pub(super) struct Cues {
    pub(super) decision: bool,
    pub(super) action: bool,
    pub(super) done: bool,
    pub(super) error: bool,
}

/// One pass over the passage for every cue list (ASCII case-insensitive).
pub(super) fn cues(text: &str) -> Cues {
    static MATCHER: OnceLock<Option<(AhoCorasick, Vec<u8>)>> = OnceLock::new();
    let Some((matcher, kinds)) = MATCHER.get_or_init(|| {
        let lists: [&[&str]; 4] = [DECISION_CUES, ACTION_CUES, DONE_CUES, ERROR_CUES];
        let mut patterns = Vec::new();
        let mut kinds = Vec::new();
        for (kind, list) in (0u8..).zip(lists) {
            for cue in list {
                patterns.push(*cue);
                kinds.push(kind);
            }
        }
        AhoCorasick::builder()
            .kind(Some(aho_corasick::AhoCorasickKind::DFA))
            .ascii_case_insensitive(true)
            .build(patterns)
            .ok()
            .map(|m| (m, kinds))
    }) else {
        return Cues::default();
    };
    let mut found = Cues::default();
    for m in matcher.find_overlapping_iter(text) {
        match kinds.get(m.pattern().as_usize()) {
            Some(0) => found.decision = true,
            Some(1) => found.action = true,
            Some(2) => found.done = true,
            Some(_) => found.error = true,
            None => {}
        }
    }
    found
}

/// Splits a message text into passages: JSON into `key: value` leaves,
/// other text into lines and sentences.
pub(super) fn split_text<'a>(text: &'a str, out: &mut dyn FnMut(Cow<'a, str>)) {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
            json_leaves(&v, "", &mut |leaf| out(Cow::Owned(leaf)));
            return;
        }
    }
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let mut start = 0;
        for (i, c) in line.char_indices() {
            if !matches!(c, '.' | '!' | '?') {
                continue;
            }
            let end = i + c.len_utf8();
            let mut ahead = line.get(end..).unwrap_or_default().chars();
            if ahead.next().is_some_and(char::is_whitespace)
                && ahead.next().is_some_and(char::is_uppercase)
            {
                let piece = line.get(start..end).unwrap_or_default().trim();
                if !piece.is_empty() {
                    out(Cow::Borrowed(piece));
                }
                start = end;
            }
        }
        let rest = line.get(start..).unwrap_or_default().trim();
        if !rest.is_empty() {
            out(Cow::Borrowed(rest));
        }
    }
}

pub(super) fn json_leaves(v: &Value, path: &str, out: &mut dyn FnMut(String)) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                json_leaves(child, k, out);
            }
        }
        Value::Array(items) => {
            for child in items {
                json_leaves(child, path, out);
            }
        }
        Value::String(s) if !s.trim().is_empty() => {
            if s.contains('\n') || s.len() > 120 {
                split_text(s, &mut |piece| out(piece.into_owned()));
            } else if path.is_empty() {
                out(s.clone());
            } else {
                out(format!("{path}: {s}"));
            }
        }
        Value::Number(n) if !path.is_empty() => out(format!("{path}: {n}")),
        Value::Bool(b) if !path.is_empty() => out(format!("{path}: {b}")),
        _ => {}
    }
}

/// A word with punctuation trimmed: where it is in its passage.
#[derive(Debug, Clone, Copy)]
pub(super) struct Word {
    pub(super) start: usize,
    pub(super) end: usize,
    /// Whether it starts a sentence.
    pub(super) sentence_start: bool,
}

/// Appends the words of `text` to `out`.
pub(super) fn words_into(text: &str, out: &mut Vec<Word>) {
    let mut start = true;
    let base = text.as_ptr() as usize;
    for raw in text.split_whitespace() {
        let w = raw.trim_matches(|c: char| {
            !(c.is_alphanumeric()
                || matches!(
                    c,
                    '#' | '/' | '_' | '-' | '.' | ':' | '@' | '$' | '€' | '£' | '%'
                ))
        });
        let w = w.trim_end_matches(['.', ':', '-']);
        if !w.is_empty() {
            // `w` is a slice of `text`: its offset is its address minus the text's.
            let offset = (w.as_ptr() as usize).saturating_sub(base);
            out.push(Word {
                start: offset,
                end: offset + w.len(),
                sentence_start: start,
            });
        }
        start = raw.ends_with(['.', '!', '?', ':']);
    }
}

/// `word` lower-cased into `buffer` (ASCII without allocating).
pub(super) fn lower_into<'a>(word: &str, buffer: &'a mut String) -> &'a str {
    buffer.clear();
    if word.is_ascii() {
        buffer.push_str(word);
        buffer.make_ascii_lowercase();
    } else {
        buffer.extend(word.chars().flat_map(char::to_lowercase));
    }
    buffer
}

pub(super) fn is_path(w: &str) -> bool {
    const SOURCE_EXTENSIONS: &[&str] = &[
        "rs", "py", "toml", "md", "ts", "js", "go", "sql", "json", "yaml", "yml",
    ];
    if !w.contains(['/', '.']) {
        return false;
    }
    let extension = w
        .rsplit_once('.')
        .filter(|(stem, _)| !stem.is_empty() && !stem.ends_with('/'))
        .map(|(_, e)| e)
        .filter(|e| (1..=5).contains(&e.len()) && e.chars().all(|c| c.is_ascii_alphanumeric()));
    let source_file =
        extension.is_some_and(|e| SOURCE_EXTENSIONS.iter().any(|s| e.eq_ignore_ascii_case(s)));
    (w.contains('/') && !w.starts_with("http") && w.len() > 2)
        || (extension.is_some() && w.contains('_'))
        || (source_file && w.len() > 3)
}

/// How much a word says: identifiers and long numbers most, names and
/// paths next, rare words a little, common words nothing.
pub(super) fn term_weight(w: &str, lower: &str, sentence_start: bool, df: usize) -> f64 {
    let (mut digits, mut letters, mut len, mut lower_seen, mut inner_upper) =
        (0, 0, 0, false, false);
    for (i, c) in w.chars().enumerate() {
        len += 1;
        if c.is_ascii_digit() {
            digits += 1;
        } else if c.is_alphabetic() {
            letters += 1;
            if c.is_lowercase() {
                lower_seen = true;
            } else if i > 0 && c.is_uppercase() {
                inner_upper = true;
            }
        }
    }
    if w.starts_with("http://") || w.starts_with("https://") || w.contains('@') && letters > 2 {
        return 3.0;
    }
    if digits > 0 {
        // Codes (ORD-58213, v2.3.1, JD0146…) name one thing; a price, a
        // time or a plain count is often just detail.
        return if letters > 0 && len >= 4 {
            4.0
        } else if letters > 0 || digits >= 3 {
            1.5
        } else {
            0.5
        };
    }
    if is_path(w) || w.contains("::") {
        return 3.0;
    }
    if len < 3 || stopword(lower) {
        return 0.0;
    }
    if w.contains('_') || (inner_upper && lower_seen) {
        return 2.5;
    }
    let rarity = match df {
        0..=2 => 0.35,
        3..=5 => 0.15,
        _ => 0.0,
    };
    if w.chars().next().is_some_and(char::is_uppercase) && !sentence_start {
        return 2.0 + rarity;
    }
    if len >= 4 {
        rarity
    } else {
        0.0
    }
}

/// `text` (of `count` characters) cut to at most `max` characters around
/// its most salient term, and its length in characters.
pub(super) fn cut_around<'a>(
    text: Cow<'a, str>,
    count: usize,
    terms: &[(u32, f64)],
    vocabulary: &[String],
    max: usize,
) -> (Cow<'a, str>, usize) {
    if count <= max {
        return (text, count);
    }
    let lower = text.to_lowercase();
    let anchor = terms
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .and_then(|(t, _)| vocabulary.get(*t as usize))
        .and_then(|t| lower.find(t.as_str()))
        .map_or(0, |byte| lower[..byte].chars().count());
    let start = anchor.saturating_sub(max / 3);
    let end = start.saturating_add(max).min(count);
    let start = end.saturating_sub(max);
    let mut out: String = text.chars().skip(start).take(end - start).collect();
    let mut chars = end - start;
    if start > 0 {
        out.insert(0, '…');
        chars += 1;
    }
    if end < count {
        out.push('…');
        chars += 1;
    }
    (Cow::Owned(out), chars)
}

pub(super) fn first_sentence(text: &str, max: usize) -> String {
    let mut first = None;
    split_text(text, &mut |p| {
        if first.is_none() {
            first = Some(p);
        }
    });
    first.unwrap_or_default().chars().take(max).collect()
}
