//! Compaction for agent-session: keep a session's context small while the
//! archive keeps everything.
//!
//! - [`Trigger`]s decide when (`TurnCount`, `TokenCount`, `ContextFraction`,
//!   `EventCount`, `Any`, `All`);
//! - [`CompactionStrategy`]s decide what stays, always on whole turns:
//!   [`SlidingWindow`], [`TurnWindow`], [`TokenBudget`],
//!   [`RecursiveSummarization`] and [`StructuredSummary`];
//! - [`Summarizer`]s write summaries: [`ExtractiveSummarizer`] offline,
//!   [`OpenAiSummarizer`] on any OpenAI-compatible endpoint;
//! - [`CompactionPolicy`] plugs a trigger and a strategy into
//!   `DefaultSessionService` after every append, or runs one now;
//! - the agent-facing layer: [`SessionMemory`] assembles each model call's
//!   messages and records new ones, and the recall tools
//!   [`ConversationSearch`] and [`CrossSessionSearch`] let the model search
//!   what compaction moved out of its context (pages bounded to
//!   [`DEFAULT_RECALL_PAGE_TOKENS`]) and [`ReadEvent`] read one event whole.
//!
//! ```
//! use std::sync::Arc;
//! use session_compaction::{CompactionOutcome, CompactionPolicy, ExtractiveSummarizer, RecursiveSummarization, Trigger};
//! use session_core::*;
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let repo = InMemoryRepository::new().shared();
//! let policy = CompactionPolicy::new(
//!     Trigger::TurnCount(4),
//!     Arc::new(RecursiveSummarization::new(2, Arc::new(ExtractiveSummarizer::new()))),
//! );
//! let service = DefaultSessionService::new(repo.clone()).with_append_hook(Arc::new(policy));
//! let alice = Owner::user("alice")?;
//! let s = service.create(CreateSessionRequest::builder("alice").build()?).await?;
//! for i in 1..=4 {
//!     service.append_message(&alice, &s.id, Message::user(format!("Question {i}: my code is {i}23."))).await?;
//!     let answer = format!("Answer {i}. {}", "Here is a long explanation of the details. ".repeat(8));
//!     service.append_message(&alice, &s.id, Message::assistant(answer)).await?;
//! }
//! // The fourth turn fired the trigger: a summary turn plus the last two turns.
//! let context = service.messages(&alice, &s.id).await?;
//! assert_eq!(context.len(), 2 + 4);
//! assert!(context[1].text().contains("123"));
//! // The archive still holds every message: recall search finds the original
//! // question and the summary that mentions it.
//! let hits = service.search(&alice, &SearchQuery::in_session(&s.id, "question 1")).await?;
//! assert_eq!(hits.items.len(), 2);
//! assert!(hits.items[1].event.is_synthetic());
//! # Ok::<(), SessionError>(())
//! # }).unwrap();
//! ```

mod branch;
mod calibration;
mod clearing;
mod compact_tool;
mod compactor;
mod error;
mod extractive;
mod flush;
mod memory;
mod openai;
mod plan;
mod policy;
mod prompt_log;
mod prompts;
mod recall;
mod spec;
mod strategy;
mod summarize;
mod tokens;
mod usage;

pub use branch::BranchSummary;
pub use calibration::UsageCalibration;
pub use clearing::{ToolResultClearing, CLEARED_SEQ};
pub use compact_tool::CompactContext;
pub use compactor::WhenTriggered;
pub use error::CompactionError;
pub use extractive::ExtractiveSummarizer;
pub use flush::{
    ChatModel, ChatRequest, FlushTurn, MemoryWriter, FLUSH_MAX_TOKENS, FLUSH_PROMPT,
    FLUSH_TEMPERATURE, MEMORY_WRITE_TOOL,
};
pub use memory::{facts_block, SessionMemory, SummaryInjection, TOOL_ERROR_KEY};
pub use openai::{OpenAiSummarizer, SummarizerChoice};
pub use policy::{BeforeCompaction, CompactionOutcome, CompactionPolicy, COMPACTION_ATTEMPTS};
pub use prompts::{EventFormatter, SummaryPrompts, TranscriptFormatter, SESSION_MESSAGES};
pub use recall::{
    no_event, ConversationSearch, CrossSessionSearch, ReadEvent, SearchArgs, ToolContext,
    DEFAULT_RECALL_HIT_TOKENS, DEFAULT_RECALL_PAGE_TOKENS, NO_RESULTS,
};
pub use session_core::remove_unpaired_tool_calls;
pub use spec::{
    default_compactor, session_error, StrategyName, StrategySpec, TriggerSpec,
    DEFAULT_KEEP_MESSAGES,
};
pub use strategy::{
    CompactionMetrics, CompactionNotice, CompactionRequest, CompactionResult, CompactionStrategy,
    SlidingWindow, TokenBudget, Trigger, TurnWindow, NOTICE_KEY,
};
pub use summarize::{
    default_summary_schema, merge_structured, validate_against_schema, RecursiveSummarization,
    StructuredSummary, Summarizer, SummaryRequest, OPEN_ASTRA_RECENT_MESSAGES,
};
pub use tokens::{estimator_for_model, BpeEstimator, CalibratedEstimator};
pub use usage::PromptEstimate;
