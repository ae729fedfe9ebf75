//! The offline summarizer: picks the fewest passages that carry the most
//! names, numbers, identifiers and decisions, within a budget.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::ops::Range;
use std::rc::Rc;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use async_trait::async_trait;
use serde_json::{json, Value};
use session_core::{Message, Role, SessionEvent};

use crate::error::CompactionError;
use crate::summarize::{Summarizer, SummaryRequest};

mod text;

use text::{
    cues, cut_around, first_sentence, folded_hash, is_path, lower_into, split_text, stopword,
    term_weight, words_into, Cues, Word,
};

/// An offline summarizer that needs no model. Deterministic: it cuts the
/// events into passages (sentences, log lines, the fields of JSON tool
/// results and tool-call arguments), then picks greedily the passages that
/// add the most *not yet covered* salient terms — identifiers, numbers,
/// names, paths, links, rare words — with a bonus for decisions and errors,
/// until the summary reaches its budget (by default 20 % of the summarized
/// text, between 1,500 and 16,000 characters). A fact said ten times is kept
/// once; chatter without salient terms is left out. The picked passages are
/// written in conversation order. Structured requests get the fourteen
/// fields filled from the same passages.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use session_compaction::{ExtractiveSummarizer, Summarizer, SummaryRequest};
/// use session_core::{Message, SessionEvent};
/// let events = vec![
///     SessionEvent::new(Message::user("Hi! My order ORD-58213 arrived cracked.")),
///     SessionEvent::new(Message::assistant("Sorry to hear that. Let me check.")),
///     SessionEvent::new(Message::user("Please send the replacement to Kastanienallee 12.")),
/// ];
/// let request = SummaryRequest { system_prompt: "", user_prompt: String::new(),
///     previous_summary: None, events: &events, schema: None };
/// let summary = ExtractiveSummarizer::new().summarize(&request).await?;
/// assert!(summary.contains("ORD-58213") && summary.contains("Kastanienallee 12"));
/// assert!(!summary.contains("Let me check"));
/// # Ok::<(), session_compaction::CompactionError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ExtractiveSummarizer {
    passage_chars: usize,
    share: f64,
    min_chars: usize,
    max_chars: usize,
}

impl Default for ExtractiveSummarizer {
    fn default() -> Self {
        Self::new()
    }
}

/// One candidate passage of the summary.
#[derive(Debug, Clone)]
struct Passage<'a> {
    /// Where it comes from: `user`, `assistant`, a tool name, `summary`.
    source: Rc<str>,
    text: Cow<'a, str>,
    /// Salient terms (ids in the vocabulary) and their weights.
    terms: Vec<(u32, f64)>,
    bonus: f64,
    kind: Kind,
    /// Its length before cutting.
    original_chars: usize,
    /// Its length (of `text`, after cutting).
    chars: usize,
}

/// What a passage reports, for the structured fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Decision,
    Action,
    Done,
    Finding,
    Fact,
}

/// The events (and the previous summary's lines) cut into pieces of text,
/// each with its source label, in conversation order; summaries among the
/// events are left out.
fn pieces<'a>(
    previous: Option<&'a str>,
    events: &'a [SessionEvent],
) -> Vec<(Rc<str>, Cow<'a, str>)> {
    let mut raw: Vec<(Rc<str>, Cow<'a, str>)> = Vec::new();
    if let Some(p) = previous {
        let source: Rc<str> = Rc::from("summary");
        for line in p.lines() {
            let line = line.trim().trim_start_matches("- ");
            if !line.is_empty() {
                raw.push((source.clone(), Cow::Borrowed(line)));
            }
        }
    }
    for e in events.iter().filter(|e| !e.is_synthetic()) {
        let source: Rc<str> = match (&e.branch, &e.message) {
            (Some(b), _) => Rc::from(format!("[{b}] {}", e.role())),
            (None, Message::Tool { name, .. }) => Rc::from(name.as_deref().unwrap_or("tool")),
            (None, m) => Rc::from(m.role().as_str()),
        };
        split_text(e.message.text(), &mut |piece| {
            raw.push((source.clone(), piece));
        });
        for call in e.message.tool_calls() {
            let label: Rc<str> = Rc::from(format!("{} call", call.name));
            split_text(&call.arguments, &mut |piece| {
                raw.push((label.clone(), piece));
            });
        }
    }
    raw
}

/// A distinct piece: its source, its text, its cues, and its range of
/// [`Interned::words`].
type Piece<'a> = (Rc<str>, Cow<'a, str>, Cues, Range<usize>);

/// The distinct pieces of a conversation with their words interned.
struct Interned<'a> {
    /// Each distinct piece, in conversation order.
    pieces: Vec<Piece<'a>>,
    /// Every piece's words, as (term id, word): a piece holds a range of it.
    words: Vec<(u32, Word)>,
    /// Term id → the term, lower-cased.
    vocabulary: Vec<String>,
    /// Term id → in how many pieces it occurs.
    df: Vec<usize>,
}

/// Drops repeated pieces, interns every word once and counts in how many
/// pieces each occurs.
fn intern(raw: Vec<(Rc<str>, Cow<'_, str>)>) -> Interned<'_> {
    let mut seen: HashSet<u64> =
        HashSet::with_capacity_and_hasher(raw.len(), rustc_hash::FxBuildHasher);
    let mut ids: HashMap<String, u32> =
        HashMap::with_capacity_and_hasher(raw.len(), rustc_hash::FxBuildHasher);
    let mut vocabulary: Vec<String> = Vec::new();
    let mut df: Vec<usize> = Vec::new();
    let mut tokenized = Vec::new();
    let mut buffer = String::new();
    // Every passage's words in one list (a passage holds a range of
    // it), and for each term the last passage that counted it.
    let mut all_words: Vec<(u32, Word)> = Vec::new();
    let mut scratch: Vec<Word> = Vec::new();
    let mut counted_in: Vec<usize> = Vec::new();
    for (source, text) in raw {
        if !seen.insert(folded_hash(&text)) {
            continue;
        }
        let passage = tokenized.len() + 1;
        let found = cues(&text);
        let first = all_words.len();
        scratch.clear();
        words_into(&text, &mut scratch);
        for w in scratch.drain(..) {
            let key = lower_into(text.get(w.start..w.end).unwrap_or_default(), &mut buffer);
            let id = if let Some(id) = ids.get(key) {
                *id
            } else {
                let id = u32::try_from(vocabulary.len()).unwrap_or(u32::MAX);
                ids.insert(key.to_owned(), id);
                vocabulary.push(key.to_owned());
                df.push(0);
                counted_in.push(0);
                id
            };
            // In how many passages: once per passage, however often.
            if let (Some(n), Some(last)) =
                (df.get_mut(id as usize), counted_in.get_mut(id as usize))
            {
                if *last != passage {
                    *last = passage;
                    *n += 1;
                }
            }
            all_words.push((id, w));
        }
        tokenized.push((source, text, found, first..all_words.len()));
    }
    Interned {
        pieces: tokenized,
        words: all_words,
        vocabulary,
        df,
    }
}

/// What a piece reports, from its cues and its source.
fn kind_of(found: Cues, source: &str) -> Kind {
    let is_tool = !matches!(source, "user" | "assistant" | "summary");
    if found.decision {
        Kind::Decision
    } else if found.action {
        Kind::Action
    } else if found.done {
        Kind::Done
    } else if is_tool {
        Kind::Finding
    } else {
        Kind::Fact
    }
}

/// How much a piece's source weighs: people state requirements and
/// decisions; tool output and tool-call arguments (patches, commands)
/// mostly carry detail.
fn source_scale(source: &str) -> f64 {
    match source {
        "summary" => 1.3,
        "user" => 1.2,
        "assistant" => 1.0,
        s if s.starts_with('[') => 0.8,
        s if s.ends_with(" call") => 0.35,
        _ => 0.5,
    }
}

/// The salient terms of a piece of `kind` with `words` of `text`, each
/// once at its highest weight times `scale`; `lower_case_weight` caches
/// the weight of terms written in ASCII lower case.
fn weighted_terms(
    words: &[(u32, Word)],
    text: &str,
    kind: Kind,
    scale: f64,
    vocabulary: &[String],
    df: &[usize],
    lower_case_weight: &mut [Option<f64>],
) -> Vec<(u32, f64)> {
    let mut terms: Vec<(u32, f64)> = Vec::with_capacity(words.len());
    for (id, w) in words {
        let count = df.get(*id as usize).copied().unwrap_or(1);
        let lower = vocabulary.get(*id as usize).map_or("", String::as_str);
        let original = text.get(w.start..w.end).unwrap_or_default();
        // ASCII in lower case: no capital anywhere.
        let plain = original.is_ascii() && original == lower;
        let slot = lower_case_weight.get_mut(*id as usize);
        let mut weight = match slot {
            Some(Some(weight)) if plain => *weight,
            Some(slot) if plain => {
                let weight = term_weight(original, lower, w.sentence_start, count);
                *slot = Some(weight);
                weight
            }
            _ => term_weight(original, lower, w.sentence_start, count),
        };
        // What a decision is about matters even in common words.
        if kind == Kind::Decision && lower.chars().count() >= 4 && !stopword(lower) {
            weight = weight.max(0.3);
        }
        if weight > 0.0 {
            terms.push((*id, weight * scale));
        }
    }
    // One entry per term, at its highest weight.
    terms.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.total_cmp(&a.1)));
    terms.dedup_by_key(|t| t.0);
    terms
}

impl ExtractiveSummarizer {
    /// A summary of 20 % of the summarized text, between 1,500 and 16,000
    /// characters; passages of at most 220 characters.
    pub fn new() -> Self {
        Self {
            passage_chars: 220,
            share: 0.2,
            min_chars: 1_500,
            max_chars: 16_000,
        }
    }

    /// The summary's budget: `share` (in `(0, 1]`) of the summarized text,
    /// at least `min_chars` and at most `max_chars` characters.
    pub fn with_budget(
        mut self,
        share: f64,
        min_chars: usize,
        max_chars: usize,
    ) -> Result<Self, CompactionError> {
        if !(share > 0.0 && share <= 1.0) {
            return Err(CompactionError::invalid(
                "share",
                format!("{share} is not in (0, 1]"),
            ));
        }
        if min_chars == 0 || min_chars > max_chars {
            return Err(CompactionError::invalid(
                "min_chars",
                format!("{min_chars} must be at least 1 and at most max_chars ({max_chars})"),
            ));
        }
        self.share = share;
        self.min_chars = min_chars;
        self.max_chars = max_chars;
        Ok(self)
    }

    /// The longest a passage may be, in characters (at least 40; longer
    /// ones are cut around their most salient term).
    pub fn with_passage_chars(mut self, chars: usize) -> Self {
        self.passage_chars = chars.max(40);
        self
    }

    fn budget(&self, input_chars: usize) -> usize {
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss
        )] // a share of a text length: small, non-negative
        let share = (input_chars as f64 * self.share) as usize;
        share.clamp(self.min_chars, self.max_chars)
    }

    /// Cuts the events (and the previous summary) into passages, with the
    /// vocabulary their term ids index.
    fn passages<'a>(
        &self,
        previous: Option<&'a str>,
        events: &'a [SessionEvent],
    ) -> (Vec<Passage<'a>>, Vec<String>) {
        let Interned {
            pieces,
            words,
            vocabulary,
            df,
        } = intern(pieces(previous, events));
        // A word written in ASCII lower case weighs the same wherever it
        // stands (only capitals and their place in the sentence matter):
        // weighed once per term.
        let mut lower_case_weight: Vec<Option<f64>> = vec![None; vocabulary.len()];
        let passages = pieces
            .into_iter()
            .map(|(source, text, found, range)| {
                let words = words.get(range).unwrap_or_default();
                let kind = kind_of(found, &source);
                let scale = source_scale(&source);
                let mut terms = weighted_terms(
                    words,
                    &text,
                    kind,
                    scale,
                    &vocabulary,
                    &df,
                    &mut lower_case_weight,
                );
                let mut bonus = match kind {
                    Kind::Decision => 1.5,
                    Kind::Action => 1.0,
                    _ => 0.0,
                };
                if found.error {
                    bonus += 1.0;
                }
                let original_chars = text.chars().count();
                let (text, chars) = cut_around(
                    text,
                    original_chars,
                    &terms,
                    &vocabulary,
                    self.passage_chars,
                );
                if chars < original_chars {
                    // Only what the cut text says counts as covered.
                    let kept = text.to_lowercase();
                    terms.retain(|(t, _)| {
                        vocabulary
                            .get(*t as usize)
                            .is_some_and(|w| kept.contains(w.as_str()))
                    });
                }
                Passage {
                    source,
                    text,
                    terms,
                    bonus: bonus * scale,
                    kind,
                    original_chars,
                    chars,
                }
            })
            .collect();
        (passages, vocabulary)
    }

    /// The passages to keep, in conversation order, the share of the
    /// salient weight they cover, and the vocabulary of their terms.
    fn select<'a>(
        &self,
        previous: Option<&'a str>,
        events: &'a [SessionEvent],
    ) -> (Vec<Passage<'a>>, f64, Vec<String>) {
        let (passages, vocabulary) = self.passages(previous, events);
        let input_chars: usize = passages.iter().map(|p| p.original_chars).sum();
        let mut budget = self.budget(input_chars);
        let mut covered = vec![false; vocabulary.len()];
        let lengths: Vec<usize> = passages.iter().map(|p| p.chars).collect();
        let value = |i: usize, covered: &[bool]| -> f64 {
            // The passage's five most salient new terms: a concise fact
            // beats a log line full of identifiers.
            let mut top = [0.0f64; 5];
            for (t, w) in &passages[i].terms {
                if covered.get(*t as usize).copied().unwrap_or(true) {
                    continue;
                }
                if let Some(slot) = top.iter().position(|x| *w > *x) {
                    top.copy_within(slot..4, slot + 1);
                    top[slot] = *w;
                }
            }
            let new: f64 = top.iter().sum();
            if new <= 0.0 {
                return 0.0;
            }
            #[allow(clippy::cast_precision_loss)] // a passage's length
            let len = lengths[i] as f64;
            (new + passages[i].bonus) / (1.0 + len / 120.0)
        };
        // Lazy greedy: values only fall as coverage grows, so a stale value
        // is an upper bound; recompute the top until it stays on top.
        let mut heap: BinaryHeap<Scored> = (0..passages.len())
            .map(|i| Scored(value(i, &covered), i))
            .filter(|s| s.0 > 0.0)
            .collect();
        let mut chosen = Vec::new();
        while let Some(Scored(stale, i)) = heap.pop() {
            let fresh = value(i, &covered);
            if fresh < 0.35 && !chosen.is_empty() {
                continue;
            }
            if heap.peek().is_some_and(|next| fresh < next.0) && fresh < stale {
                heap.push(Scored(fresh, i));
                continue;
            }
            let cost = lengths[i] + passages[i].source.len() + 4;
            if cost > budget {
                continue;
            }
            budget -= cost;
            for (t, _) in &passages[i].terms {
                if let Some(c) = covered.get_mut(*t as usize) {
                    *c = true;
                }
            }
            chosen.push(i);
        }
        if chosen.is_empty() && !passages.is_empty() {
            // Nothing salient at all: the first and the last passage say
            // what it started with and where it stands.
            chosen.push(0);
            if passages.len() > 1 {
                chosen.push(passages.len() - 1);
            }
        }
        let (mut total, mut kept) = (0.0, 0.0);
        for (t, w) in passages.iter().flat_map(|p| p.terms.iter()) {
            total += w;
            if covered.get(*t as usize).copied().unwrap_or(false) {
                kept += w;
            }
        }
        let coverage = if total > 0.0 { kept / total } else { 1.0 };
        chosen.sort_unstable();
        let mut passages: Vec<Option<Passage>> = passages.into_iter().map(Some).collect();
        let picked = chosen
            .into_iter()
            .filter_map(|i| passages.get_mut(i).and_then(Option::take))
            .collect();
        (picked, coverage, vocabulary)
    }

    fn structured(&self, previous: Option<&str>, events: &[SessionEvent]) -> Value {
        let (picked, coverage, vocabulary) = self.select(previous, events);
        let real: Vec<&SessionEvent> = events.iter().filter(|e| !e.is_synthetic()).collect();
        let users: Vec<&str> = real
            .iter()
            .filter(|e| e.role() == Role::User && e.branch.is_none())
            .map(|e| e.message.text())
            .collect();
        let goal = users
            .first()
            .map(|t| first_sentence(t, 200))
            .unwrap_or_default();
        let latest = users
            .last()
            .map(|t| first_sentence(t, 200))
            .unwrap_or_default();
        let list = |kind: Kind| -> Vec<String> {
            picked
                .iter()
                .filter(|p| p.kind == kind)
                .map(|p| format!("{}: {}", p.source, p.text))
                .collect()
        };
        let mut files: Vec<String> = Vec::new();
        let mut links: Vec<Value> = Vec::new();
        for p in &picked {
            for w in p.text.split_whitespace() {
                let w = w.trim_matches(|c: char| "\"'`()[]{}<>,;".contains(c));
                if w.starts_with("http://") || w.starts_with("https://") {
                    if links.len() < 12 {
                        links.push(json!({"source": w, "quote": p.text}));
                    }
                } else if is_path(w) && !files.iter().any(|f| f == w) {
                    files.push(w.to_owned());
                }
            }
        }
        let mut summary = previous
            .map(|p| format!("{} ", first_sentence(p, 300)))
            .unwrap_or_default();
        summary.push_str(&goal);
        if latest != goal && !latest.is_empty() {
            summary.push_str(" Latest: ");
            summary.push_str(&latest);
        }
        json!({
            "title": goal.chars().take(80).collect::<String>(),
            "keywords": keywords(&picked, &vocabulary),
            "summary": summary,
            "key_points": list(Kind::Decision),
            "key_facts": list(Kind::Fact),
            "action_items": list(Kind::Action),
            "goal": goal,
            "discoveries": list(Kind::Finding),
            "accomplishments": list(Kind::Done),
            "relevant_files": files,
            "citations": links,
            "sentiment": sentiment(&users),
            "confidence": (coverage * 100.0).round() / 100.0,
            "metadata": format!("extractive summary of {} events: {} passages", real.len(), picked.len()),
        })
    }
}

/// A passage's value and index, ordered by value (ties: earlier first).
#[derive(Debug, PartialEq)]
struct Scored(f64, usize);
impl Eq for Scored {}
impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scored {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0
            .total_cmp(&other.0)
            .then_with(|| other.1.cmp(&self.1))
    }
}

fn keywords(picked: &[Passage], vocabulary: &[String]) -> Vec<String> {
    let mut weights: HashMap<&str, f64> = HashMap::default();
    for (t, w) in picked.iter().flat_map(|p| p.terms.iter()) {
        if let Some(term) = vocabulary.get(*t as usize) {
            if term.chars().all(char::is_alphabetic) {
                *weights.entry(term.as_str()).or_default() += w;
            }
        }
    }
    let mut ranked: Vec<(&str, f64)> = weights.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    ranked
        .into_iter()
        .take(6)
        .map(|(t, _)| t.to_owned())
        .collect()
}

fn sentiment(user_texts: &[&str]) -> &'static str {
    const NEGATIVE: &[&str] = &[
        "broken",
        "cracked",
        "angry",
        "frustrat",
        "disappoint",
        "unacceptable",
        "terrible",
        "annoy",
        "worst",
        "still not",
        "upset",
    ];
    const POSITIVE: &[&str] = &[
        "thanks",
        "thank you",
        "great",
        "perfect",
        "awesome",
        "love",
        "appreciate",
        "excellent",
    ];
    let (mut neg, mut pos) = (0usize, 0usize);
    for t in user_texts {
        let lower = t.to_lowercase();
        neg += NEGATIVE.iter().filter(|c| lower.contains(*c)).count();
        pos += POSITIVE.iter().filter(|c| lower.contains(*c)).count();
    }
    match pos.cmp(&neg) {
        Ordering::Greater => "positive",
        Ordering::Less => "negative",
        Ordering::Equal => "neutral",
    }
}

#[async_trait]
impl Summarizer for ExtractiveSummarizer {
    async fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, CompactionError> {
        if request.schema.is_some() {
            let prev = request
                .previous_summary
                .and_then(|p| serde_json::from_str::<Value>(p).ok())
                .and_then(|v| v.get("summary").and_then(Value::as_str).map(str::to_owned));
            return Ok(self.structured(prev.as_deref(), request.events).to_string());
        }
        let (picked, _, _) = self.select(request.previous_summary, request.events);
        let mut out = String::new();
        for p in picked {
            out.push_str("- ");
            if &*p.source != "summary" {
                out.push_str(&p.source);
                out.push_str(": ");
            }
            out.push_str(&p.text);
            out.push('\n');
        }
        Ok(out.trim_end().to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summarize::{default_summary_schema, validate_against_schema};

    #[test]
    fn the_structured_summary_follows_the_schema() {
        let ok = ExtractiveSummarizer::new().structured(
            None,
            &[SessionEvent::new(Message::user(
                "Plan the 3 day trip to Lisbon.",
            ))],
        );
        assert_eq!(
            validate_against_schema(&ok, &default_summary_schema()),
            Ok(())
        );
        assert_eq!(ok["goal"], "Plan the 3 day trip to Lisbon.");
    }

    #[test]
    fn repeated_facts_are_kept_once() {
        let mut events = Vec::new();
        for i in 0..40 {
            events.push(SessionEvent::new(Message::user(format!(
                "Is order ORD-58213 shipped yet? Asking again ({i})."
            ))));
            events.push(SessionEvent::new(Message::assistant(
                "Not yet, it is being packed.",
            )));
        }
        let s = ExtractiveSummarizer::new();
        let (picked, _, _) = s.select(None, &events);
        let with_order = picked
            .iter()
            .filter(|p| p.text.contains("ORD-58213"))
            .count();
        assert_eq!(with_order, 1, "{picked:?}");
    }

    #[test]
    fn sentences_split_without_breaking_identifiers() {
        let mut out = Vec::new();
        split_text(
            "Version v1.2.3 is out. Use it e.g. in CI. Done!",
            &mut |p| out.push(p),
        );
        assert_eq!(
            out,
            ["Version v1.2.3 is out.", "Use it e.g. in CI.", "Done!"]
        );
    }

    #[test]
    fn json_results_split_into_fields() {
        let mut out = Vec::new();
        split_text(
            r#"{"order":"ORD-1","items":[{"sku":"K-9"}],"paid":true}"#,
            &mut |p| out.push(p),
        );
        out.sort();
        assert_eq!(out, ["order: ORD-1", "paid: true", "sku: K-9"]);
    }

    #[test]
    fn chatter_without_salient_terms_still_gets_a_summary() {
        let step = "lorem ipsum dolor sit amet ".repeat(12);
        let events: Vec<SessionEvent> = (1..=20)
            .map(|i| SessionEvent::new(Message::assistant(format!("step {i}: {step}"))))
            .collect();
        let (picked, _, _) = ExtractiveSummarizer::new().select(None, &events);
        assert!(!picked.is_empty());
    }

    #[test]
    fn budget_is_validated() {
        assert!(ExtractiveSummarizer::new()
            .with_budget(0.0, 10, 20)
            .is_err());
        assert!(ExtractiveSummarizer::new()
            .with_budget(0.5, 30, 20)
            .is_err());
        assert!(ExtractiveSummarizer::new().with_budget(0.5, 10, 20).is_ok());
    }
}
