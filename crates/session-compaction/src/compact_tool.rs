//! The `compact_context` tool: an agent compacts its own context.

use std::sync::Arc;

use serde_json::{json, Value};
use session_core::{SessionId, SessionRepository, SessionService};

use crate::policy::{CompactionOutcome, CompactionPolicy};
use crate::recall::ToolContext;
use crate::CompactionError;

/// The `compact_context` tool, next to `conversation_search`: the agent
/// asks for a compaction of its own context (after finishing a sub-task,
/// before a large tool output). It runs the policy's strategy now, whatever
/// the trigger says, on the caller's session only (another owner's session
/// is `NotFound`), and answers with what it did.
#[derive(Clone)]
pub struct CompactContext {
    service: Arc<dyn SessionService>,
    repository: Arc<dyn SessionRepository>,
    policy: CompactionPolicy,
}

impl std::fmt::Debug for CompactContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactContext")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl CompactContext {
    /// The tool's name.
    pub const NAME: &'static str = "compact_context";

    /// A tool that compacts with `policy`'s strategy, checking owners through `service`.
    pub fn new(
        service: Arc<dyn SessionService>,
        repository: Arc<dyn SessionRepository>,
        policy: CompactionPolicy,
    ) -> Self {
        Self {
            service,
            repository,
            policy,
        }
    }

    /// The tool definition in the OpenAI function-tool shape.
    pub fn definition(&self) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": Self::NAME,
                "description": "Compact this conversation's context now: older parts leave the context \
                                (summarized or dropped, depending on the configuration) and stay searchable \
                                with conversation_search. Use it when the context is long or a sub-task is done.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "innerThought": {
                            "type": "string",
                            "description": "Your private reasoning about why you compact now. Not shown to the user."
                        }
                    },
                    "required": ["innerThought"],
                    "additionalProperties": false
                }
            }
        })
    }

    /// Runs a call; answers `{"compacted": true, "strategy", "events_before",
    /// "events_after", "tokens_before", "tokens_after"}`, or `{"compacted":
    /// false, "reason"}` when there was nothing to compact or another writer
    /// changed the session meanwhile.
    pub async fn call(
        &self,
        ctx: &ToolContext,
        _arguments: &Value,
    ) -> Result<String, CompactionError> {
        let session = self.service.get(&ctx.owner, &ctx.session_id).await?;
        let id: &SessionId = &session.id;
        let answer = match self
            .policy
            .compact_now(self.repository.as_ref(), id)
            .await?
        {
            CompactionOutcome::Compacted(r) => json!({
                "compacted": true,
                "strategy": self.policy.strategy_name(),
                "events_before": r.metrics.events_before,
                "events_after": r.metrics.events_after,
                "tokens_before": r.metrics.tokens_before,
                "tokens_after": r.metrics.tokens_after,
            }),
            CompactionOutcome::LostRace { .. } => json!({
                "compacted": false,
                "reason": "the conversation changed meanwhile; try again",
            }),
            CompactionOutcome::NotNeeded { reason } => {
                json!({"compacted": false, "reason": reason})
            }
        };
        Ok(answer.to_string())
    }
}
