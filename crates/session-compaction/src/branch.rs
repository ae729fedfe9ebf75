//! Branch-scoped compaction: summarize one sub-agent's work, leave the rest alone.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use session_core::{CompactionSource, Message, SessionEvent};

use crate::error::CompactionError;
use crate::prompts::SummaryPrompts;
use crate::strategy::{CompactionRequest, CompactionResult, CompactionStrategy};
use crate::summarize::{Summarizer, SummaryRequest};

/// Summarizes the events of one branch (a sub-agent, `orch.researcher`, and
/// the branches below it) except its newest `keep_last`, without touching
/// root events or sibling branches. The summary turn is written on that
/// branch, at the position of the first event it replaces, so it is
/// visible exactly where the branch's work was: to the branch and the
/// agents below it, and in the unfiltered view, never to siblings. A tool call and its
/// result are never separated; the archive keeps every original.
#[derive(Debug, Clone)]
pub struct BranchSummary {
    branch: String,
    keep_last: usize,
    summarizer: Arc<dyn Summarizer>,
    prompts: SummaryPrompts,
}

impl BranchSummary {
    /// Summarizes `branch` with `summarizer`, keeping its newest `keep_last` events verbatim.
    pub fn new(
        branch: impl Into<String>,
        keep_last: usize,
        summarizer: Arc<dyn Summarizer>,
    ) -> Result<Self, CompactionError> {
        let branch = branch.into();
        session_core::validate_branch(&branch)?;
        Ok(Self {
            branch,
            keep_last,
            summarizer,
            prompts: SummaryPrompts::recursive(),
        })
    }

    fn on_branch(&self, e: &SessionEvent) -> bool {
        e.branch.as_deref().is_some_and(|b| {
            b == self.branch
                || (b.len() > self.branch.len()
                    && b.starts_with(self.branch.as_str())
                    && b.as_bytes().get(self.branch.len()) == Some(&b'.'))
        })
    }
}

#[async_trait]
impl CompactionStrategy for BranchSummary {
    fn name(&self) -> &'static str {
        "branch-summary"
    }

    async fn compact(
        &self,
        request: &CompactionRequest,
    ) -> Result<CompactionResult, CompactionError> {
        let mine: Vec<usize> = request
            .events
            .iter()
            .enumerate()
            .filter(|(_, e)| !e.is_synthetic() && self.on_branch(e))
            .map(|(i, _)| i)
            .collect();
        // Move the boundary back until no call/result pair crosses it.
        let mut end = mine.len().saturating_sub(self.keep_last);
        while end > 0 {
            let leaving = &mine[..end];
            let kept_results: HashSet<&str> = mine[end..]
                .iter()
                .filter_map(|&i| match &request.events[i].message {
                    Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
                    _ => None,
                })
                .collect();
            let splits = leaving.iter().any(|&i| {
                request.events[i]
                    .message
                    .tool_calls()
                    .iter()
                    .any(|c| kept_results.contains(c.id.as_str()))
            });
            if !splits {
                break;
            }
            end -= 1;
        }
        if end == 0 {
            let (found, keep) = (mine.len(), self.keep_last);
            let branch = &self.branch;
            return Ok(
                CompactionResult::build(request, request.events.clone(), Vec::new(), None)
                    .explained(|| {
                        format!("branch {branch} has {found} events and {keep} stay verbatim")
                    }),
            );
        }
        let leaving: HashSet<usize> = mine[..end].iter().copied().collect();
        let replaced: Vec<SessionEvent> = mine[..end]
            .iter()
            .map(|&i| request.events[i].clone())
            .collect();
        // The summarizer sees the branch's work as a conversation of its own.
        let shown: Vec<SessionEvent> = replaced
            .iter()
            .cloned()
            .map(|mut e| {
                e.branch = None;
                e
            })
            .collect();
        let summary = self
            .summarizer
            .summarize(&SummaryRequest {
                system_prompt: &self.prompts.system,
                user_prompt: self.prompts.render(None, &shown),
                previous_summary: None,
                events: &shown,
                schema: None,
            })
            .await?;
        if summary.trim().is_empty() {
            return Err(CompactionError::InvalidSummary {
                reason: "the summarizer returned an empty summary".to_owned(),
            });
        }
        let source = CompactionSource::Custom(format!("branch:{}", self.branch));
        let mut turn = self
            .prompts
            .summary_turn(summary.clone(), source, replaced[0].timestamp);
        for e in &mut turn {
            e.branch = Some(self.branch.clone());
        }
        let mut context = Vec::with_capacity(request.events.len());
        let mut summary_placed = false;
        for (i, e) in request.events.iter().enumerate() {
            if leaving.contains(&i) {
                if !summary_placed {
                    context.extend(turn.iter().cloned());
                    summary_placed = true;
                }
            } else {
                context.push(e.clone());
            }
        }
        Ok(CompactionResult::build(
            request,
            context,
            replaced,
            Some(summary),
        ))
    }
}
