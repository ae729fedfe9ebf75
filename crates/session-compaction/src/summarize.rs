//! Summarizing strategies and the summarizers behind them.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Map, Value};
use session_core::{CompactionSource, Message, Role, SessionEvent, TokenEstimator};

use crate::error::CompactionError;
use crate::plan::Plan;
use crate::prompts::SummaryPrompts;
use crate::strategy::{CompactionRequest, CompactionResult, CompactionStrategy};

/// What a summarizer is asked.
#[derive(Debug, Clone)]
pub struct SummaryRequest<'a> {
    /// The system prompt.
    pub system_prompt: &'a str,
    /// The user prompt, with `${sessionMessages}` already rendered.
    pub user_prompt: String,
    /// The previous summary, if the context held one.
    pub previous_summary: Option<&'a str>,
    /// The events to summarize (leaving the context, plus any overlap).
    pub events: &'a [SessionEvent],
    /// The JSON schema the answer must follow, for structured summaries.
    pub schema: Option<&'a Value>,
}

/// Writes a summary of events. Implementations: [`crate::ExtractiveSummarizer`]
/// (offline, deterministic) and [`crate::OpenAiSummarizer`] (any
/// OpenAI-compatible chat-completions endpoint).
#[async_trait]
pub trait Summarizer: Send + Sync + std::fmt::Debug {
    /// The summary text (JSON text when the request has a schema).
    async fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, CompactionError>;
}

/// The latest synthetic summary text of `source` in the context.
fn previous_summary<'a>(events: &'a [SessionEvent], source: &CompactionSource) -> Option<&'a str> {
    events
        .iter()
        .rev()
        .find(|e| e.compaction_source.as_ref() == Some(source) && e.role() == Role::Assistant)
        .map(|e| e.message.text())
}

/// How a summarizing strategy summarizes: shared by [`RecursiveSummarization`] and [`StructuredSummary`].
struct SummaryJob<'a> {
    keep_recent: usize,
    /// Keep this many of the newest messages instead of whole turns.
    keep_messages: Option<usize>,
    overlap: usize,
    source: CompactionSource,
    summarizer: &'a dyn Summarizer,
    prompts: &'a SummaryPrompts,
    schema: Option<&'a Value>,
    estimator: &'a dyn TokenEstimator,
}

/// Where a summarizing compaction cuts the context.
#[derive(Debug, Clone, Copy)]
enum Cutting {
    /// Before turn `cut` (or, `inside`, between the steps of the newest turn).
    Turns { cut: usize, inside: bool },
    /// Before the real event at this index (see [`Plan::message_cut`]).
    Messages(usize),
}

/// Where a summarizing compaction cuts `plan`: `keep_messages` newest
/// messages or `keep_recent` turns stay. `Err` says why nothing can leave.
fn choose_cut(
    plan: &Plan,
    keep_recent: usize,
    keep_messages: Option<usize>,
) -> Result<Cutting, String> {
    if let Some(keep) = keep_messages {
        let k = plan.message_cut(keep);
        if k > 0 {
            return Ok(Cutting::Messages(k));
        }
        let messages = plan.real_len();
        return Err(if messages > keep {
            "a tool call waiting for its result keeps the older messages".to_owned()
        } else {
            format!("nothing is older than the {keep} messages kept verbatim ({messages} in the context)")
        });
    }
    let cut = plan
        .turns
        .len()
        .saturating_sub(keep_recent)
        .min(plan.max_cut());
    // `keep_recent == 0` on a context whose newest turn is a long tool loop:
    // summarize the steps inside that turn, keeping its user message and newest step.
    let inside = keep_recent == 0
        && plan.can_cut_last_turn()
        && cut + 1 == plan.turns.len()
        && !plan.middle_steps(1).is_empty();
    if cut == 0 && !inside {
        let turns = plan.turns.len();
        return Err(if turns > keep_recent {
            "a tool call still waiting for its result keeps the older turns".to_owned()
        } else {
            format!("nothing is older than the {keep_recent} turns kept verbatim ({turns} in the context)")
        });
    }
    Ok(Cutting::Turns { cut, inside })
}

/// `shown` with the results of its tool calls that arrived later, in the
/// part of the context that stays: they leave with their calls (see
/// `Cut::paired`), so the summarizer sees them.
fn with_late_results(mut shown: Vec<SessionEvent>, plan: &Plan) -> Vec<SessionEvent> {
    let calls: HashSet<&str> = shown
        .iter()
        .flat_map(|e| e.message.tool_calls().iter().map(|c| c.id.as_str()))
        .collect();
    let have: HashSet<&str> = shown.iter().map(|e| e.id.as_str()).collect();
    let late: Vec<SessionEvent> = plan
        .preamble
        .iter()
        .chain(plan.turns.iter().flatten())
        .filter(|e| !have.contains(e.id.as_str()))
        .filter(|e| {
            matches!(&e.message, Message::Tool { tool_call_id, .. }
                if calls.contains(tool_call_id.as_str()))
        })
        .cloned()
        .collect();
    shown.extend(late);
    shown
}

/// Summarizes the turns leaving the context into one synthetic summary turn.
async fn summarize_into_turn(
    request: &CompactionRequest,
    job: SummaryJob<'_>,
    finish: impl Fn(Option<&str>, String) -> Result<String, CompactionError>,
) -> Result<CompactionResult, CompactionError> {
    let SummaryJob {
        keep_recent,
        keep_messages,
        overlap,
        source,
        summarizer,
        prompts,
        schema,
        estimator,
    } = job;
    let source = &source;
    let plan = Plan::new(&request.events);
    let cutting = match choose_cut(&plan, keep_recent, keep_messages) {
        Ok(cutting) => cutting,
        Err(why) => {
            return Ok(
                CompactionResult::build(request, request.events.clone(), Vec::new(), None)
                    .explained(move || why),
            )
        }
    };
    let previous = previous_summary(&request.events, source);
    // What leaves the context, plus any overlap: what the summarizer sees.
    let shown: Vec<SessionEvent> = match cutting {
        Cutting::Messages(k) => plan.first_real(k),
        Cutting::Turns { cut, inside } => {
            let mut shown: Vec<SessionEvent> =
                plan.turns[..cut].iter().flatten().cloned().collect();
            if inside {
                shown.extend(plan.middle_steps(1));
            } else {
                shown.extend(
                    plan.turns[cut..(cut + overlap).min(plan.turns.len())]
                        .iter()
                        .flatten()
                        .cloned(),
                );
            }
            shown
        }
    };
    let shown = with_late_results(shown, &plan);
    let summary_request = SummaryRequest {
        system_prompt: &prompts.system,
        user_prompt: prompts.render(previous, &shown),
        previous_summary: previous,
        events: &shown,
        schema,
    };
    let raw = summarizer.summarize(&summary_request).await?;
    if raw.trim().is_empty() {
        return Err(CompactionError::InvalidSummary {
            reason: "the summarizer returned an empty summary".to_owned(),
        });
    }
    let summary = finish(previous, raw)?;
    let now = session_core::Clock::now(&session_core::SystemClock);
    let [mut prompt, mut answer] = prompts.summary_turn(summary.clone(), source.clone(), now);
    for e in [&mut prompt, &mut answer] {
        e.token_estimate = estimator.estimate_message(&e.message);
    }
    // The new summary replaces this source's earlier ones; other synthetic events stay.
    let mut synthetic = vec![prompt, answer];
    let mut archived = Vec::new();
    for e in &plan.synthetic {
        if e.compaction_source.as_ref() == Some(source) {
            archived.push(e.clone());
        } else {
            synthetic.push(e.clone());
        }
    }
    let c = match cutting {
        Cutting::Messages(k) => plan.cut_at_message(k, synthetic),
        Cutting::Turns { inside: true, .. } => plan.cut_last_turn_steps(synthetic, 1),
        Cutting::Turns { cut, .. } => plan.cut(cut, synthetic),
    };
    archived.extend(c.archived);
    Ok(CompactionResult::build(
        request,
        c.context,
        archived,
        Some(summary),
    ))
}

/// The newest messages Open Astra keeps verbatim when it compacts.
pub const OPEN_ASTRA_RECENT_MESSAGES: usize = 10;

/// A rolling plain-text summary: the new summary is made from the previous
/// one plus the turns leaving the context; the last `keep_recent` turns stay
/// verbatim, and `overlap` of them are also shown to the summarizer.
#[derive(Debug, Clone)]
pub struct RecursiveSummarization {
    /// Turns kept verbatim.
    pub keep_recent: usize,
    /// When set, this many of the newest messages are kept verbatim
    /// instead of `keep_recent` whole turns (see [`Self::with_keep_recent_messages`]).
    pub keep_recent_messages: Option<usize>,
    /// Kept turns also shown to the summarizer, for continuity.
    pub overlap: usize,
    /// Who writes the summary.
    pub summarizer: Arc<dyn Summarizer>,
    /// The prompts.
    pub prompts: SummaryPrompts,
    /// Estimates the summary turn's tokens (default: the character heuristic).
    pub estimator: Arc<dyn TokenEstimator>,
}

impl RecursiveSummarization {
    /// Open Astra's numbers: the 10 newest messages kept verbatim, the
    /// rest folded into a summary of about 500 words (the recursive
    /// prompts ask for at most about 500; [`crate::OpenAiSummarizer`]
    /// defaults to the seed's temperature 0.3 and 1,024 tokens). Pair it
    /// with [`crate::Trigger::context_fraction`] (70 %), as
    /// [`crate::CompactionPolicy::open_astra`] does.
    pub fn open_astra(summarizer: Arc<dyn Summarizer>) -> Self {
        Self {
            keep_recent_messages: Some(OPEN_ASTRA_RECENT_MESSAGES),
            ..Self::new(0, summarizer)
        }
    }

    /// Estimates the summary turn's tokens with `estimator` (e.g. a BPE counter).
    pub fn with_estimator(mut self, estimator: Arc<dyn TokenEstimator>) -> Self {
        self.estimator = estimator;
        self
    }

    /// Keeps the `n` newest messages verbatim (at least 1) instead of whole
    /// turns, as Open Astra does: the cut moves earlier rather than part a
    /// tool call from its result, and never passes a tool call still
    /// waiting for its result. The preamble and older turns leave whole or
    /// in part; `overlap` does not apply.
    pub fn with_keep_recent_messages(mut self, n: usize) -> Result<Self, CompactionError> {
        self.keep_recent_messages = Some(crate::strategy::at_least_one("keep recent messages", n)?);
        Ok(self)
    }

    /// Keeps `keep_recent` turns and summarizes the rest with `summarizer`.
    pub fn new(keep_recent: usize, summarizer: Arc<dyn Summarizer>) -> Self {
        Self {
            estimator: Arc::new(session_core::HeuristicEstimator),
            keep_recent,
            keep_recent_messages: None,
            overlap: 0,
            summarizer,
            prompts: SummaryPrompts::recursive(),
        }
    }

    /// Also shows `overlap` kept turns to the summarizer.
    pub fn with_overlap(mut self, overlap: usize) -> Self {
        self.overlap = overlap;
        self
    }

    /// [`Self::with_overlap`], refusing an overlap at or above `keep_recent`
    /// (the summarizer would be shown every kept turn again).
    pub fn try_with_overlap(self, overlap: usize) -> Result<Self, CompactionError> {
        if overlap > 0 && overlap >= self.keep_recent {
            return Err(CompactionError::invalid(
                "overlap",
                format!(
                    "an overlap of {overlap} is not below keep_recent ({})",
                    self.keep_recent
                ),
            ));
        }
        Ok(self.with_overlap(overlap))
    }

    /// Uses custom prompts.
    pub fn with_prompts(mut self, prompts: SummaryPrompts) -> Self {
        self.prompts = prompts;
        self
    }
}

#[async_trait]
impl CompactionStrategy for RecursiveSummarization {
    fn name(&self) -> &'static str {
        "recursive-summarization"
    }

    async fn compact(
        &self,
        request: &CompactionRequest,
    ) -> Result<CompactionResult, CompactionError> {
        let job = SummaryJob {
            keep_recent: self.keep_recent,
            keep_messages: self.keep_recent_messages,
            overlap: self.overlap,
            source: CompactionSource::RecursiveSummarization,
            summarizer: self.summarizer.as_ref(),
            prompts: &self.prompts,
            schema: None,
            estimator: self.estimator.as_ref(),
        };
        summarize_into_turn(request, job, |_, raw| Ok(raw.trim().to_owned())).await
    }
}

/// The default structured-summary schema of the seeds: fourteen required fields.
pub fn default_summary_schema() -> Value {
    let strings = json!({"type": "array", "items": {"type": "string"}});
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "title": {"type": "string"},
            "keywords": strings,
            "summary": {"type": "string"},
            "key_points": strings,
            "key_facts": strings,
            "action_items": strings,
            "goal": {"type": "string"},
            "discoveries": strings,
            "accomplishments": strings,
            "relevant_files": strings,
            "citations": {"type": "array", "items": {
                "type": "object",
                "properties": {"source": {"type": "string"}, "quote": {"type": "string"}},
                "required": ["source", "quote"]
            }},
            "sentiment": {"type": "string", "enum": ["positive", "neutral", "negative"]},
            "confidence": {"type": "number"},
            "metadata": {"type": "string"}
        },
        "required": [
            "title", "keywords", "summary", "key_points", "key_facts", "action_items", "citations",
            "sentiment", "confidence", "metadata", "goal", "discoveries", "accomplishments", "relevant_files"
        ]
    })
}

/// Checks `value` against the subset of JSON Schema summaries use: `type`,
/// `properties`, `required`, `items`, `enum`, `additionalProperties: false`.
pub fn validate_against_schema(value: &Value, schema: &Value) -> Result<(), String> {
    validate_at(value, schema, "$")
}

fn validate_at(value: &Value, schema: &Value, path: &str) -> Result<(), String> {
    if let Some(t) = schema.get("type").and_then(Value::as_str) {
        let ok = match t {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "number" => value.is_number(),
            "integer" => value.is_i64() || value.is_u64(),
            "boolean" => value.is_boolean(),
            "null" => value.is_null(),
            _ => true,
        };
        if !ok {
            return Err(format!("{path} should be of type {t}"));
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        if !allowed.contains(value) {
            return Err(format!(
                "{path} is not one of {}",
                Value::Array(allowed.clone())
            ));
        }
    }
    if let (Some(obj), Some(props)) = (
        value.as_object(),
        schema.get("properties").and_then(Value::as_object),
    ) {
        for req in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(k) = req.as_str() {
                if !obj.contains_key(k) {
                    return Err(format!("{path}.{k} is required"));
                }
            }
        }
        if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
            if let Some(extra) = obj.keys().find(|k| !props.contains_key(*k)) {
                return Err(format!("{path}.{extra} is not in the schema"));
            }
        }
        for (k, v) in obj {
            if let Some(s) = props.get(k) {
                validate_at(v, s, &format!("{path}.{k}"))?;
            }
        }
    }
    if let (Some(items), Some(item_schema)) = (value.as_array(), schema.get("items")) {
        for (i, v) in items.iter().enumerate() {
            validate_at(v, item_schema, &format!("{path}[{i}]"))?;
        }
    }
    Ok(())
}

/// Merges a new structured summary into the previous one: list fields keep
/// the previous items the new summary dropped (new items after them,
/// without duplicates); every other field takes the new value.
pub fn merge_structured(previous: &Value, new: &Value) -> Value {
    let (Some(prev), Some(next)) = (previous.as_object(), new.as_object()) else {
        return new.clone();
    };
    let mut out: Map<String, Value> = next.clone();
    for (k, pv) in prev {
        match (pv, next.get(k)) {
            (Value::Array(p), Some(Value::Array(n))) => {
                let mut merged = p.clone();
                for item in n {
                    if !merged.contains(item) {
                        merged.push(item.clone());
                    }
                }
                out.insert(k.clone(), Value::Array(merged));
            }
            (_, None) => {
                out.insert(k.clone(), pv.clone());
            }
            _ => {}
        }
    }
    Value::Object(out)
}

/// A JSON summary following a schema (default: the seeds' fourteen fields),
/// validated, and merged with the previous structured summary.
#[derive(Debug, Clone)]
pub struct StructuredSummary {
    /// Turns kept verbatim.
    pub keep_recent: usize,
    /// When set, this many of the newest messages are kept verbatim
    /// instead of `keep_recent` whole turns (see [`Self::with_keep_recent_messages`]).
    pub keep_recent_messages: Option<usize>,
    /// Kept turns also shown to the summarizer.
    pub overlap: usize,
    /// Who writes the summary.
    pub summarizer: Arc<dyn Summarizer>,
    /// The prompts.
    pub prompts: SummaryPrompts,
    /// The schema the summary must follow.
    pub schema: Value,
    /// Estimates the summary turn's tokens (default: the character heuristic).
    pub estimator: Arc<dyn TokenEstimator>,
}

impl StructuredSummary {
    /// Estimates the summary turn's tokens with `estimator` (e.g. a BPE counter).
    pub fn with_estimator(mut self, estimator: Arc<dyn TokenEstimator>) -> Self {
        self.estimator = estimator;
        self
    }

    /// Keeps the `n` newest messages verbatim (at least 1) instead of whole
    /// turns, as Open Astra does: the cut moves earlier rather than part a
    /// tool call from its result, and never passes a tool call still
    /// waiting for its result. The preamble and older turns leave whole or
    /// in part; `overlap` does not apply.
    pub fn with_keep_recent_messages(mut self, n: usize) -> Result<Self, CompactionError> {
        self.keep_recent_messages = Some(crate::strategy::at_least_one("keep recent messages", n)?);
        Ok(self)
    }

    /// The default schema and prompts, keeping `keep_recent` turns.
    pub fn new(keep_recent: usize, summarizer: Arc<dyn Summarizer>) -> Self {
        Self {
            estimator: Arc::new(session_core::HeuristicEstimator),
            keep_recent,
            keep_recent_messages: None,
            overlap: 0,
            summarizer,
            prompts: SummaryPrompts::structured(),
            schema: default_summary_schema(),
        }
    }

    /// Uses a custom schema.
    pub fn with_schema(mut self, schema: Value) -> Self {
        self.schema = schema;
        self
    }

    /// Uses custom prompts (the user prompt should contain `${sessionMessages}`).
    pub fn with_prompts(mut self, prompts: SummaryPrompts) -> Self {
        self.prompts = prompts;
        self
    }

    /// Also shows `overlap` kept turns to the summarizer.
    pub fn with_overlap(mut self, overlap: usize) -> Self {
        self.overlap = overlap;
        self
    }
}

#[async_trait]
impl CompactionStrategy for StructuredSummary {
    fn name(&self) -> &'static str {
        "structured-summary"
    }

    async fn compact(
        &self,
        request: &CompactionRequest,
    ) -> Result<CompactionResult, CompactionError> {
        let schema = &self.schema;
        let job = SummaryJob {
            keep_recent: self.keep_recent,
            keep_messages: self.keep_recent_messages,
            overlap: self.overlap,
            source: CompactionSource::StructuredSummary,
            summarizer: self.summarizer.as_ref(),
            prompts: &self.prompts,
            schema: Some(schema),
            estimator: self.estimator.as_ref(),
        };
        summarize_into_turn(request, job, |previous, raw| {
            let new: Value =
                serde_json::from_str(raw.trim()).map_err(|e| CompactionError::InvalidSummary {
                    reason: format!("the summary is not JSON: {e}"),
                })?;
            validate_against_schema(&new, schema)
                .map_err(|reason| CompactionError::InvalidSummary { reason })?;
            let merged = match previous.and_then(|p| serde_json::from_str::<Value>(p).ok()) {
                Some(prev) => merge_structured(&prev, &new),
                None => new,
            };
            Ok(merged.to_string())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema_sample() -> Value {
        json!({
            "title": "Trip", "keywords": ["lisbon"], "summary": "Plan the trip.", "key_points": [],
            "key_facts": [], "action_items": [], "goal": "Plan the 3 day trip.", "discoveries": [],
            "accomplishments": [], "relevant_files": [], "citations": [], "sentiment": "neutral",
            "confidence": 0.5, "metadata": ""
        })
    }

    #[test]
    fn schema_validation_names_the_problem() {
        let schema = default_summary_schema();
        let ok = schema_sample();
        assert_eq!(validate_against_schema(&ok, &schema), Ok(()));
        let mut missing = ok.clone();
        missing.as_object_mut().unwrap().remove("goal");
        assert_eq!(
            validate_against_schema(&missing, &schema),
            Err("$.goal is required".to_owned())
        );
        let mut wrong = ok.clone();
        wrong["sentiment"] = json!("ecstatic");
        assert!(validate_against_schema(&wrong, &schema)
            .unwrap_err()
            .contains("sentiment"));
        let mut extra = ok;
        extra["surprise"] = json!(1);
        assert!(validate_against_schema(&extra, &schema).is_err());
    }

    #[test]
    fn merge_keeps_previous_list_items() {
        let prev = json!({"key_facts": ["a", "b"], "summary": "old", "goal": "g"});
        let new = json!({"key_facts": ["b", "c"], "summary": "new"});
        assert_eq!(
            merge_structured(&prev, &new),
            json!({"key_facts": ["a", "b", "c"], "summary": "new", "goal": "g"})
        );
    }

    #[test]
    fn prompt_template_renders_messages() {
        let p = SummaryPrompts::new("", "Please summarize: ${sessionMessages}");
        let out = p.render(
            Some("before"),
            &[SessionEvent::new(session_core::Message::user("hi"))],
        );
        assert_eq!(
            out,
            "Please summarize: Previous summary:\nbefore\n\nNew messages:\nuser: hi"
        );
    }
}
