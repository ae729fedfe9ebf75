//! Open Astra's pre-compaction flush turn: before the summarizer runs, the
//! agent gets one model call whose only tool is a memory write, so what
//! matters survives in long-term memory.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};
use session_core::{Message, Session, SessionEvent};

use crate::error::CompactionError;
use crate::policy::BeforeCompaction;

/// The one tool the flush turn offers.
pub const MEMORY_WRITE_TOOL: &str = "memory_write";
/// The seed's sampling temperature for the flush turn.
pub const FLUSH_TEMPERATURE: f64 = 0.3;
/// The seed's token limit for the flush turn's answer.
pub const FLUSH_MAX_TOKENS: u32 = 2048;
/// The seed's instruction, sent as the last message of the flush turn.
pub const FLUSH_PROMPT: &str = "Save any important information before compaction";

/// One chat-completion call.
#[derive(Debug, Clone, Copy)]
pub struct ChatRequest<'a> {
    /// The messages, system prompt first.
    pub messages: &'a [Message],
    /// The tools offered, as OpenAI function-tool JSON.
    pub tools: &'a [Value],
    /// Sampling temperature.
    pub temperature: f64,
    /// The most tokens the answer may take.
    pub max_tokens: u32,
}

/// A chat model: one call, the assistant's answer (its text and tool calls).
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// Runs one chat completion.
    async fn complete(&self, request: &ChatRequest<'_>) -> Result<Message, CompactionError>;
}

/// Where the flush turn's memory writes go (a vector store, a notes table, …).
#[async_trait]
pub trait MemoryWriter: Send + Sync {
    /// Saves `content` for the owner of `session`.
    async fn write(&self, session: &Session, content: &str) -> Result<(), CompactionError>;
}

/// The flush turn as a [`BeforeCompaction`] hook: the context, then
/// [`FLUSH_PROMPT`], to `model` with [`MEMORY_WRITE_TOOL`] as the only
/// tool, at the seed's temperature (0.3) and token limit (2,048); each
/// `memory_write` call's `content` goes to `writer`. A failed call or
/// write is logged: the compaction goes on (the archive keeps every
/// event, and recall finds them).
pub struct FlushTurn {
    model: Arc<dyn ChatModel>,
    writer: Arc<dyn MemoryWriter>,
}

impl std::fmt::Debug for FlushTurn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlushTurn").finish_non_exhaustive()
    }
}

impl FlushTurn {
    /// The flush turn through `model`, saving with `writer`.
    pub fn new(model: Arc<dyn ChatModel>, writer: Arc<dyn MemoryWriter>) -> Self {
        Self { model, writer }
    }

    /// The tool definition offered to the model.
    pub fn memory_write_tool() -> Value {
        json!({
            "type": "function",
            "function": {
                "name": MEMORY_WRITE_TOOL,
                "description": "Save information to long-term memory so that it survives the compaction of this conversation.",
                "parameters": {
                    "type": "object",
                    "properties": {"content": {"type": "string", "description": "What to remember."}},
                    "required": ["content"]
                }
            }
        })
    }

    /// The messages of the flush turn for `context`.
    fn messages(context: &[SessionEvent]) -> Vec<Message> {
        let mut messages = vec![Message::system(
            "The conversation below is about to be compacted: older messages will be replaced by a summary. \
             Use the memory_write tool to save decisions, preferences, facts and strategies worth keeping.",
        )];
        let history: Vec<Message> = context.iter().map(|e| e.message.clone()).collect();
        messages.extend(session_core::remove_unpaired_tool_calls(history, |_| false));
        messages.push(Message::user(FLUSH_PROMPT));
        messages
    }

    async fn flush(
        &self,
        session: &Session,
        context: &[SessionEvent],
    ) -> Result<usize, CompactionError> {
        let messages = Self::messages(context);
        let tools = [Self::memory_write_tool()];
        let answer = self
            .model
            .complete(&ChatRequest {
                messages: &messages,
                tools: &tools,
                temperature: FLUSH_TEMPERATURE,
                max_tokens: FLUSH_MAX_TOKENS,
            })
            .await?;
        let mut written = 0;
        for call in answer.tool_calls() {
            if call.name != MEMORY_WRITE_TOOL {
                tracing::warn!(session_id = %session.id, tool = %call.name, "the flush turn called a tool it was not offered; ignored");
                continue;
            }
            let content = serde_json::from_str::<Value>(&call.arguments)
                .ok()
                .and_then(|v| v.get("content").and_then(Value::as_str).map(str::to_owned));
            match content {
                Some(c) if !c.trim().is_empty() => {
                    self.writer.write(session, &c).await?;
                    written += 1;
                }
                _ => {
                    tracing::warn!(session_id = %session.id, "a memory_write call without a content string; ignored");
                }
            }
        }
        Ok(written)
    }
}

#[async_trait]
impl BeforeCompaction for FlushTurn {
    async fn before_compaction(&self, session: &Session, context: &[SessionEvent]) {
        match self.flush(session, context).await {
            Ok(written) => {
                tracing::info!(session_id = %session.id, written, "pre-compaction flush");
            }
            Err(e) => {
                tracing::warn!(session_id = %session.id, error = %e, "pre-compaction flush failed; compacting anyway");
            }
        }
    }
}
