//! A compaction asked for by name and parameters (what every face's
//! `compact` takes): which strategy, with what, when and with which
//! summarizer; [`StrategySpec::compactor`] turns it into the
//! [`Compactor`] the service runs.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use session_core::{Compactor, SessionError};

use crate::{
    CompactionError, CompactionPolicy, CompactionStrategy, RecursiveSummarization, SlidingWindow,
    StructuredSummary, SummarizerChoice, SummaryPrompts, TokenBudget, ToolResultClearing, Trigger,
    TurnWindow,
};

/// Which strategy compacts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum StrategyName {
    /// Keep the last `max_events` events.
    SlidingWindow,
    /// Keep the last `max_turns` turns.
    TurnWindow,
    /// Keep the newest events within `max_tokens`.
    TokenBudget,
    /// Summarize all but the last `keep` turns (or `keep_messages`
    /// messages) into a summary turn.
    Summarize,
    /// Summarize as [`Self::Summarize`] does, into the seeds' JSON summary schema.
    StructuredSummary,
    /// Clear the text of old tool results, keeping the last `keep`.
    ToolResultClearing,
}

/// The messages a summarizing strategy keeps verbatim when the spec names
/// neither `keep` nor `keep_messages` (Open Astra's ten): a long tool loop
/// inside one turn compacts too.
pub const DEFAULT_KEEP_MESSAGES: usize = 10;

/// A strategy, its parameters, and optionally its trigger and summarizer.
///
/// ```
/// use session_compaction::{StrategyName, StrategySpec};
/// let spec: StrategySpec = serde_json::from_str(r#"{"strategy": "summarize", "keep": 2}"#).unwrap();
/// assert_eq!(spec.strategy, StrategyName::Summarize);
/// assert!(spec.compactor().is_ok());
/// let bad: StrategySpec = serde_json::from_str(r#"{"strategy": "sliding_window"}"#).unwrap();
/// assert!(bad.compactor().is_err(), "max_events is needed");
/// let when: StrategySpec = serde_json::from_str(
///     r#"{"strategy": "token_budget", "max_tokens": 4000, "trigger": {"tokens": 8000}}"#,
/// ).unwrap();
/// assert!(when.compactor().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct StrategySpec {
    /// The strategy.
    pub strategy: StrategyName,
    /// `sliding_window`: events kept.
    #[serde(default)]
    pub max_events: Option<usize>,
    /// `turn_window`: turns kept.
    #[serde(default)]
    pub max_turns: Option<usize>,
    /// `token_budget`: tokens the context may hold.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// `summarize`, `structured_summary`: turns kept verbatim;
    /// `tool_result_clearing`: tool results kept (default 3).
    #[serde(default)]
    pub keep: Option<usize>,
    /// `summarize`, `structured_summary`: messages kept verbatim instead
    /// of whole turns (default 10 when `keep` is absent too).
    #[serde(default)]
    pub keep_messages: Option<usize>,
    /// Compact only when this fires (default: now, whatever the context holds).
    #[serde(default)]
    pub trigger: Option<TriggerSpec>,
    /// `extractive` (default: offline, deterministic) or `openai:MODEL`
    /// (an OpenAI-compatible endpoint: `OPENAI_BASE_URL`, `OPENAI_API_KEY`).
    #[serde(default)]
    pub summarizer: Option<String>,
    /// `summarize`, `structured_summary`: the user message that opens the
    /// summary turn in the context (default: "Summarize the conversation
    /// we had so far.").
    #[serde(default)]
    pub shadow_prompt: Option<String>,
}

/// When a compaction runs: it fires when any of the limits given is reached.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct TriggerSpec {
    /// Turns in the context.
    pub turns: Option<usize>,
    /// Tokens in the context.
    pub tokens: Option<u64>,
    /// Events in the context.
    pub events: Option<usize>,
    /// Agent runs (invocations) in the context.
    pub invocations: Option<usize>,
    /// A model's context window in tokens: fires at `fraction` of it.
    pub context_window: Option<u64>,
    /// The share of `context_window` that fires (default 0.7).
    pub fraction: Option<f64>,
}

impl TriggerSpec {
    /// The trigger; `InvalidInput` for a zero limit, a fraction outside
    /// (0, 1], or no limit at all.
    pub fn build(&self) -> Result<Trigger, CompactionError> {
        let mut any = Vec::new();
        if let Some(n) = self.turns {
            any.push(Trigger::turn_count(n)?);
        }
        if let Some(n) = self.tokens {
            any.push(Trigger::token_count(n)?);
        }
        if let Some(n) = self.events {
            any.push(Trigger::event_count(n)?);
        }
        if let Some(n) = self.invocations {
            any.push(Trigger::InvocationCount(crate::strategy::at_least_one(
                "invocations",
                n,
            )?));
        }
        match (self.context_window, self.fraction) {
            (Some(window), fraction) => {
                any.push(Trigger::fraction_of(window, fraction.unwrap_or(0.7))?);
            }
            (None, Some(_)) => {
                return Err(CompactionError::invalid(
                    "fraction",
                    "needs context_window, the model's context in tokens",
                ))
            }
            (None, None) => {}
        }
        match any.len() {
            0 => Err(CompactionError::invalid(
                "trigger",
                "names no limit: give turns, tokens, events, invocations or context_window",
            )),
            1 => Ok(any.remove(0)),
            _ => Trigger::any(any),
        }
    }
}

/// The compaction a face runs when its caller names none: what
/// `{"strategy": "summarize"}` means (the offline summarizer, the
/// [`DEFAULT_KEEP_MESSAGES`] newest messages kept verbatim), now.
pub fn default_compactor() -> Arc<dyn Compactor> {
    let summarizer = Arc::new(crate::ExtractiveSummarizer::new());
    Arc::new(CompactionPolicy::new(
        Trigger::Always,
        Arc::new(RecursiveSummarization::open_astra(summarizer)),
    ))
}

fn needed<T>(value: Option<T>, field: &str) -> Result<T, SessionError> {
    value.ok_or_else(|| SessionError::invalid(field, "this strategy needs it"))
}

/// A compaction failure as the session error it is: the store's own, or
/// the summarizer's as a `Backend` error.
pub fn session_error(e: CompactionError) -> SessionError {
    match e {
        CompactionError::Session(e) => e,
        other => SessionError::backend("summarizer", other),
    }
}

impl StrategySpec {
    /// A spec of `strategy` with no parameters yet.
    pub fn new(strategy: StrategyName) -> Self {
        Self {
            strategy,
            max_events: None,
            max_turns: None,
            max_tokens: None,
            keep: None,
            keep_messages: None,
            trigger: None,
            summarizer: None,
            shadow_prompt: None,
        }
    }

    /// `prompts` with the spec's shadow prompt; `InvalidInput` for a blank one.
    fn prompts(&self, prompts: SummaryPrompts) -> Result<SummaryPrompts, SessionError> {
        match &self.shadow_prompt {
            None => Ok(prompts),
            Some(p) if p.trim().is_empty() => Err(SessionError::invalid(
                "shadow_prompt",
                "must not be blank: it opens the summary turn the model reads",
            )),
            Some(p) => Ok(prompts.with_shadow(p.clone())),
        }
    }

    /// The strategy; `InvalidInput` naming a parameter the strategy needs
    /// and lacks, or a zero one.
    pub fn build(&self) -> Result<Arc<dyn CompactionStrategy>, SessionError> {
        let summarizer = || -> Result<_, SessionError> {
            let choice: SummarizerChoice = match &self.summarizer {
                Some(text) => text.parse().map_err(session_error)?,
                None => SummarizerChoice::Extractive,
            };
            Ok(choice.build())
        };
        let keep_messages = match (self.keep, self.keep_messages) {
            (None, None) => Some(DEFAULT_KEEP_MESSAGES),
            (_, messages) => messages,
        };
        Ok(match self.strategy {
            StrategyName::SlidingWindow => Arc::new(
                SlidingWindow::new(needed(self.max_events, "max_events")?)
                    .map_err(session_error)?,
            ),
            StrategyName::TurnWindow => Arc::new(
                TurnWindow::new(needed(self.max_turns, "max_turns")?).map_err(session_error)?,
            ),
            StrategyName::TokenBudget => Arc::new(
                TokenBudget::new(needed(self.max_tokens, "max_tokens")?).map_err(session_error)?,
            ),
            StrategyName::Summarize => {
                let s = RecursiveSummarization::new(self.keep.unwrap_or(0), summarizer()?)
                    .with_prompts(self.prompts(SummaryPrompts::recursive())?);
                Arc::new(match keep_messages {
                    Some(n) => s.with_keep_recent_messages(n).map_err(session_error)?,
                    None => s,
                })
            }
            StrategyName::StructuredSummary => {
                let s = StructuredSummary::new(self.keep.unwrap_or(0), summarizer()?)
                    .with_prompts(self.prompts(SummaryPrompts::structured())?);
                Arc::new(match keep_messages {
                    Some(n) => s.with_keep_recent_messages(n).map_err(session_error)?,
                    None => s,
                })
            }
            StrategyName::ToolResultClearing => {
                Arc::new(ToolResultClearing::new(self.keep.unwrap_or(3)).map_err(session_error)?)
            }
        })
    }

    /// What the service runs for this spec (`SessionService::compact`):
    /// the strategy now, or only when the spec's trigger fires.
    pub fn compactor(&self) -> Result<Arc<dyn Compactor>, SessionError> {
        let strategy = self.build()?;
        Ok(match &self.trigger {
            None => Arc::new(CompactionPolicy::new(Trigger::Always, strategy)),
            Some(trigger) => Arc::new(
                CompactionPolicy::new(trigger.build().map_err(session_error)?, strategy)
                    .when_triggered(),
            ),
        })
    }
}
