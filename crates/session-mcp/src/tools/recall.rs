//! The recall tools: search one session's whole archive, or all of one
//! user's sessions, and read one archived event whole.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{schemars, tool, tool_router, ErrorData as McpError, RoleServer};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use session_compaction::{ConversationSearch, CrossSessionSearch, ReadEvent, ToolContext};

use super::handler::{answer, OwnerArgs, SessionArgs, SessionTools};

/// Which of the query's words a message must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MatchArg {
    /// Every word and phrase (the default).
    All,
    /// At least one of them.
    Any,
}

/// A keyword query and the page of hits wanted.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct QueryArgs {
    /// Keywords: every word must occur (or any one, with match "any"), any
    /// order; "a phrase"; -excluded.
    pub query: String,
    /// Zero-based page of 10 hits.
    #[serde(default)]
    pub page: Option<u32>,
    /// "all" (default): a message must hold every word; "any": at least one.
    #[serde(default, rename = "match")]
    pub match_terms: Option<MatchArg>,
    /// Only messages at or after this time (RFC 3339, e.g. 2026-01-01T00:00:00Z).
    #[serde(default)]
    pub since: Option<String>,
}

/// `conversation_search`'s arguments: the session (its whole archive,
/// summaries included) and the query.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SearchArgs {
    /// The session searched.
    #[serde(flatten)]
    pub session: SessionArgs,
    /// What to look for.
    #[serde(flatten)]
    pub query: QueryArgs,
}

/// `cross_session_search`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct CrossSearchArgs {
    /// What to look for.
    #[serde(flatten)]
    pub query: QueryArgs,
    /// Whose sessions (when the API key does not fix it).
    #[serde(flatten)]
    pub owner: OwnerArgs,
}

/// `conversation_read`'s arguments: the session and the seq of the event.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ReadArgs {
    /// The session read.
    #[serde(flatten)]
    pub session: SessionArgs,
    /// The seq of the event, from a conversation_search hit.
    pub seq: u64,
}

impl QueryArgs {
    /// The arguments as the search tools of `session_compaction` take them.
    fn as_json(&self) -> Value {
        json!({"query": self.query, "page": self.page, "match": self.match_terms, "since": self.since})
    }
}

#[tool_router(router = recall_router, vis = "pub(super)")]
impl SessionTools {
    /// Searches one session's whole archive, including what left the context.
    #[tool(
        description = "Search the full history of a conversation, including parts no longer in \
                       your context, by keyword. Returns matching messages oldest first as JSON \
                       ({seq, timestamp, type, text}), or 'No results found.'. A long message is \
                       cut to an excerpt around the match, with \"truncated\": true; read it \
                       whole with conversation_read and its seq."
    )]
    async fn conversation_search(
        &self,
        Parameters(args): Parameters<SearchArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let result = async {
            let (owner, session_id) = self.session(&ctx, args.session)?;
            let tool_ctx = ToolContext { owner, session_id };
            ConversationSearch::new(self.service.clone())
                .call(&tool_ctx, &args.query.as_json())
                .await
        }
        .await;
        Ok(answer(result))
    }

    /// Searches all of one user's sessions.
    #[tool(
        description = "Search all of this user's past conversations by keyword. Returns matching \
                       messages oldest first as JSON ({seq, timestamp, type, text, session_id}), \
                       or 'No results found.'. A long message is cut to an excerpt around the \
                       match, with \"truncated\": true; read it whole with conversation_read, \
                       its session_id and seq."
    )]
    async fn cross_session_search(
        &self,
        Parameters(args): Parameters<CrossSearchArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let result = async {
            let owner = self.owner(&ctx, &args.owner, None)?;
            CrossSessionSearch::new(self.service.clone(), owner)
                .call(&args.query.as_json())
                .await
        }
        .await;
        Ok(answer(result))
    }

    /// Reads one archived event whole.
    #[tool(
        description = "Read one message of a conversation whole, by the seq a search hit gave \
                       (a long hit is cut to an excerpt). Returns {seq, timestamp, type, text} as \
                       JSON, or 'No event with seq N.'."
    )]
    async fn conversation_read(
        &self,
        Parameters(args): Parameters<ReadArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let result = async {
            let (owner, session_id) = self.session(&ctx, args.session)?;
            let tool_ctx = ToolContext { owner, session_id };
            ReadEvent::new(self.service.clone())
                .call(&tool_ctx, &json!({"seq": args.seq}))
                .await
        }
        .await;
        Ok(answer(result))
    }
}
