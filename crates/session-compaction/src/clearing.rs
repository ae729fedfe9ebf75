//! Tool-result clearing: compaction inside a turn without a summarizer.

use async_trait::async_trait;
use serde_json::json;
use session_core::{Message, SessionEvent};

use crate::error::CompactionError;
use crate::strategy::{CompactionRequest, CompactionResult, CompactionStrategy};

/// The metadata key a placeholder carries: the seq of the result it stands for.
pub const CLEARED_SEQ: &str = "cleared_seq";

/// Replaces older tool results in the context with a short placeholder
/// naming the tool, the call id and the seq to recall the original by
/// (`conversation_search`, or the archive view); the archive keeps every
/// original. The newest `keep_last` results stay verbatim, results of the
/// tools in `exclude_tools` are never cleared, and nothing happens unless
/// at least `min_clear` results would be cleared, so the prompt prefix does
/// not change on every call. The placeholder keeps the result's position
/// and `tool_call_id`, so every call still has its answer.
#[derive(Debug, Clone)]
pub struct ToolResultClearing {
    /// Tool results kept verbatim, newest first (at least one).
    keep_last: usize,
    /// Clear only when at least this many results would be cleared (at least one).
    min_clear: usize,
    /// Tools whose results are never cleared.
    pub exclude_tools: Vec<String>,
    /// Estimates a placeholder's tokens (default: the character heuristic).
    pub estimator: std::sync::Arc<dyn session_core::TokenEstimator>,
}

impl Default for ToolResultClearing {
    fn default() -> Self {
        Self {
            keep_last: 3,
            min_clear: 1,
            exclude_tools: Vec::new(),
            estimator: std::sync::Arc::new(session_core::HeuristicEstimator),
        }
    }
}

impl ToolResultClearing {
    /// Keeps the newest `keep_last` results (at least 1), clearing as soon as one can go.
    pub fn new(keep_last: usize) -> Result<Self, CompactionError> {
        if keep_last == 0 {
            return Err(CompactionError::invalid("keep last", "must be at least 1"));
        }
        Ok(Self {
            keep_last,
            ..Self::default()
        })
    }

    /// The tool results kept verbatim.
    pub fn keep_last(&self) -> usize {
        self.keep_last
    }

    /// The fewest results a clearing clears.
    pub fn min_clear(&self) -> usize {
        self.min_clear
    }

    /// Clears only when at least `n` results would go (at least 1).
    pub fn with_min_clear(mut self, n: usize) -> Result<Self, CompactionError> {
        if n == 0 {
            return Err(CompactionError::invalid("min clear", "must be at least 1"));
        }
        self.min_clear = n;
        Ok(self)
    }

    /// Estimates placeholders' tokens with `estimator` (e.g. a BPE counter).
    pub fn with_estimator(
        mut self,
        estimator: std::sync::Arc<dyn session_core::TokenEstimator>,
    ) -> Self {
        self.estimator = estimator;
        self
    }

    /// Never clears results of these tools.
    pub fn with_excluded_tools(
        mut self,
        tools: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.exclude_tools = tools.into_iter().map(Into::into).collect();
        self
    }
}

/// The placeholder that stands for `result` (seq `seq`) in the context.
fn placeholder(
    result: &SessionEvent,
    call_id: &str,
    name: Option<&str>,
    estimator: &dyn session_core::TokenEstimator,
) -> SessionEvent {
    let tool = name.unwrap_or("a tool");
    let mut e = SessionEvent::new(Message::Tool {
        tool_call_id: call_id.to_owned(),
        name: name.map(str::to_owned),
        content: format!(
            "[result of {tool} (call {call_id}) cleared from the context; it is kept as seq {} and conversation_search finds it]",
            result.seq
        )
        .into(),
    });
    e.timestamp = result.timestamp;
    e.branch.clone_from(&result.branch);
    e.invocation_id.clone_from(&result.invocation_id);
    e.author.clone_from(&result.author);
    e.metadata.insert(CLEARED_SEQ.to_owned(), json!(result.seq));
    e.token_estimate = estimator.estimate_message(&e.message);
    e
}

#[async_trait]
impl CompactionStrategy for ToolResultClearing {
    fn name(&self) -> &'static str {
        "tool-result-clearing"
    }

    async fn compact(
        &self,
        request: &CompactionRequest,
    ) -> Result<CompactionResult, CompactionError> {
        let clearable: Vec<usize> = request
            .events
            .iter()
            .enumerate()
            .filter(|(_, e)| match &e.message {
                Message::Tool { name, .. } => {
                    !e.metadata.contains_key(CLEARED_SEQ)
                        && !name
                            .as_deref()
                            .is_some_and(|n| self.exclude_tools.iter().any(|x| x == n))
                }
                _ => false,
            })
            .map(|(i, _)| i)
            .collect();
        let clear = clearable.len().saturating_sub(self.keep_last.max(1));
        if clear == 0 || clear < self.min_clear.max(1) {
            let (found, keep, min) = (
                clearable.len(),
                self.keep_last.max(1),
                self.min_clear.max(1),
            );
            return Ok(
                CompactionResult::build(request, request.events.clone(), Vec::new(), None)
                    .explained(|| {
                        format!(
                            "{found} tool results can be cleared, {keep} stay verbatim, and clearing starts at {min}"
                        )
                    }),
            );
        }
        let cleared: std::collections::HashSet<usize> =
            clearable[..clear].iter().copied().collect();
        let mut context = Vec::with_capacity(request.events.len());
        let mut archived = Vec::with_capacity(clear);
        for (i, e) in request.events.iter().enumerate() {
            match &e.message {
                Message::Tool {
                    tool_call_id, name, ..
                } if cleared.contains(&i) => {
                    let stand_in =
                        placeholder(e, tool_call_id, name.as_deref(), self.estimator.as_ref());
                    // A placeholder no smaller than its result would grow the context.
                    if stand_in.token_estimate < e.token_estimate {
                        context.push(stand_in);
                        archived.push(e.clone());
                    } else {
                        context.push(e.clone());
                    }
                }
                _ => context.push(e.clone()),
            }
        }
        Ok(
            CompactionResult::build(request, context, archived, None).explained(|| {
                format!("the {clear} tool results that could be cleared are no larger than their placeholders")
            }),
        )
    }
}
