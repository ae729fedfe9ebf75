//! What a summarizing strategy asks and writes: the summarizer's prompts,
//! how each event reads in the transcript it is shown (an
//! [`EventFormatter`]), and the shadow prompt of the summary turn.

use std::sync::Arc;

use session_core::{SessionEvent, SUMMARY_PROMPT};

/// The placeholder a user prompt template is rendered with.
pub const SESSION_MESSAGES: &str = "${sessionMessages}";

/// How one event reads in the transcript a summarizer is shown: the hook
/// to redact, shorten or drop events before they reach a model.
///
/// ```
/// use session_compaction::{EventFormatter, SummaryPrompts};
/// use session_core::{Message, SessionEvent};
///
/// /// Leaves tool results out of the transcript.
/// #[derive(Debug)]
/// struct NoToolResults;
///
/// impl EventFormatter for NoToolResults {
///     fn format(&self, event: &SessionEvent, out: &mut String) -> bool {
///         if matches!(event.message, Message::Tool { .. }) {
///             return false;
///         }
///         out.push_str(event.message.text());
///         true
///     }
/// }
///
/// let prompts = SummaryPrompts::recursive().with_formatter(std::sync::Arc::new(NoToolResults));
/// let events = [
///     SessionEvent::new(Message::user("where is ORD-7?")),
///     SessionEvent::new(Message::tool_result("c1", "lookup", "secret internals")),
/// ];
/// let prompt = prompts.render(None, &events);
/// assert!(prompt.contains("where is ORD-7?") && !prompt.contains("secret"));
/// ```
pub trait EventFormatter: Send + Sync + std::fmt::Debug {
    /// Appends `event`'s line to `out` (no newline); `false` leaves the
    /// event out of the transcript (whatever it appended is dropped).
    fn format(&self, event: &SessionEvent, out: &mut String) -> bool;
}

/// The default transcript line: `role [branch]: text [calls name(args)]`.
#[derive(Debug, Clone, Copy, Default)]
pub struct TranscriptFormatter;

impl EventFormatter for TranscriptFormatter {
    fn format(&self, e: &SessionEvent, out: &mut String) -> bool {
        out.push_str(e.role().as_str());
        if let Some(b) = &e.branch {
            out.push_str(" [");
            out.push_str(b);
            out.push(']');
        }
        out.push_str(": ");
        out.push_str(e.message.text());
        for c in e.message.tool_calls() {
            out.push_str(" [calls ");
            out.push_str(&c.name);
            out.push('(');
            out.push_str(&c.arguments);
            out.push_str(")]");
        }
        true
    }
}

/// Prompts for summarizing strategies.
#[derive(Debug, Clone)]
pub struct SummaryPrompts {
    /// The system prompt.
    pub system: String,
    /// The user prompt; `${sessionMessages}` is replaced by the transcript.
    pub user: String,
    /// The synthetic user message that opens the summary turn written
    /// into the context ([`SUMMARY_PROMPT`] by default, the seeds' shadow
    /// prompt).
    pub shadow: String,
    /// How each event reads in the transcript ([`TranscriptFormatter`] by default).
    pub formatter: Arc<dyn EventFormatter>,
}

impl PartialEq for SummaryPrompts {
    fn eq(&self, other: &Self) -> bool {
        self.system == other.system
            && self.user == other.user
            && self.shadow == other.shadow
            && Arc::ptr_eq(&self.formatter, &other.formatter)
    }
}

impl SummaryPrompts {
    /// Prompts with this system and user prompt, the default shadow prompt and formatter.
    pub fn new(system: impl Into<String>, user: impl Into<String>) -> Self {
        Self {
            system: system.into(),
            user: user.into(),
            shadow: SUMMARY_PROMPT.to_owned(),
            formatter: Arc::new(TranscriptFormatter),
        }
    }

    /// The prompts for a plain-text rolling summary.
    pub fn recursive() -> Self {
        Self::new(
            "You are an expert at distilling chat history. Write a concise summary (at most about 500 words) \
             of the conversation that preserves decisions, facts, names, numbers and open questions. \
             When a previous summary is given, fold it into the new one.",
            format!("Summarize the conversation so far.\n\n{SESSION_MESSAGES}"),
        )
    }

    /// The prompts for a structured (JSON) summary.
    pub fn structured() -> Self {
        Self::new(
            "You are an expert at distilling chat history into structured notes. Answer with one JSON \
             object that follows the given schema exactly. When a previous summary is given, merge it: \
             keep its facts unless the conversation contradicts them.",
            format!("Summarize these messages:\n\n{SESSION_MESSAGES}"),
        )
    }

    /// Opens the summary turn with `shadow` instead of [`SUMMARY_PROMPT`].
    pub fn with_shadow(mut self, shadow: impl Into<String>) -> Self {
        self.shadow = shadow.into();
        self
    }

    /// Writes each event's transcript line with `formatter`.
    pub fn with_formatter(mut self, formatter: Arc<dyn EventFormatter>) -> Self {
        self.formatter = formatter;
        self
    }

    /// Renders the user prompt with the previous summary and the events'
    /// transcript, each event through the formatter.
    pub fn render(&self, previous: Option<&str>, events: &[SessionEvent]) -> String {
        let size: usize = events
            .iter()
            .map(|e| e.message.text().len().saturating_add(32))
            .sum();
        let mut transcript = String::with_capacity(size);
        if let Some(p) = previous {
            transcript.push_str("Previous summary:\n");
            transcript.push_str(p);
            transcript.push_str("\n\nNew messages:\n");
        }
        for e in events {
            let start = transcript.len();
            if self.formatter.format(e, &mut transcript) {
                transcript.push('\n');
            } else {
                transcript.truncate(start);
            }
        }
        self.user.replace(SESSION_MESSAGES, transcript.trim_end())
    }

    /// The summary turn of `summary` written by `source` at `timestamp`,
    /// opened by the shadow prompt.
    pub(crate) fn summary_turn(
        &self,
        summary: String,
        source: session_core::CompactionSource,
        timestamp: chrono::DateTime<chrono::Utc>,
    ) -> [SessionEvent; 2] {
        SessionEvent::summary_turn_with(&self.shadow, summary, source, timestamp)
    }
}
