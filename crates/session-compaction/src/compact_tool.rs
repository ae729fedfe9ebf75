//! The `compact_context` tool: an agent compacts its own context.

use std::sync::Arc;

use serde_json::{json, Value};
use session_core::SessionService;

use crate::error::CompactionError;
use crate::policy::CompactionPolicy;
use crate::recall::ToolContext;

/// The `compact_context` tool, next to `conversation_search`: the agent
/// asks for a compaction of its own context (after finishing a sub-task,
/// before a large tool output). It runs the policy's strategy now, whatever
/// the trigger says, on the caller's session only (another owner's session
/// is `NotFound`), and answers with what it did.
#[derive(Clone)]
pub struct CompactContext {
    service: Arc<dyn SessionService>,
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

    /// A tool that compacts with `policy`'s strategy through `service`.
    pub fn new(service: Arc<dyn SessionService>, policy: CompactionPolicy) -> Self {
        Self { service, policy }
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

    /// Runs a call; answers what the compaction did as the service reports
    /// it ([`session_core::Compacted`]: `compacted`, the `reason` when it
    /// did not, the strategy and the sizes before and after). A writer that
    /// kept getting in between is a `Conflict` error; nothing changed.
    pub async fn call(
        &self,
        ctx: &ToolContext,
        _arguments: &Value,
    ) -> Result<String, CompactionError> {
        let done = self
            .service
            .compact(&ctx.owner, &ctx.session_id, &self.policy)
            .await?;
        serde_json::to_string(&done).map_err(|e| {
            CompactionError::Session(session_core::SessionError::serialization("answer", e))
        })
    }
}
