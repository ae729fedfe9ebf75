//! [`SessionTools`]: the session tools, their arguments and their handler.

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::ServerHandler;
use rmcp::{schemars, tool, tool_handler, tool_router, ErrorData as McpError, RoleServer};
use serde::Deserialize;
use serde_json::{json, Value};
use session_compaction::{ConversationSearch, CrossSessionSearch, StrategySpec, ToolContext};
use session_core::{
    Compactor, ContextOptions, Message, Owner, SessionError, SessionId, SessionService,
};
use session_server::Caller;

/// Whom the tools act for.
#[derive(Debug, Clone)]
enum Scope {
    /// One owner, fixed when the server started (stdio).
    Fixed(Owner),
    /// Whoever each request's API key allows (streamable HTTP).
    PerRequest,
}

/// The session tools, served by [`crate::serve_stdio`] or [`crate::streamable_http`].
#[derive(Clone)]
pub struct SessionTools {
    service: Arc<dyn SessionService>,
    compactor: Arc<dyn Compactor>,
    scope: Scope,
    tool_router: ToolRouter<Self>,
}

impl std::fmt::Debug for SessionTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionTools")
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// The owner a tool call names, where the API key does not fix it.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct OwnerArgs {
    /// The app.
    #[serde(default)]
    pub app: Option<String>,
    /// The user.
    #[serde(default)]
    pub user_id: Option<String>,
}

/// The session a tool call acts on, and whose it is where the API key
/// does not fix it.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SessionArgs {
    /// The session.
    pub session_id: String,
    /// Whose session (when the API key does not fix it).
    #[serde(flatten)]
    pub owner: OwnerArgs,
}

/// A keyword query and the page of hits wanted.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct QueryArgs {
    /// Keywords: every word must occur, any order; "a phrase"; -excluded.
    pub query: String,
    /// Zero-based page of 10 hits.
    #[serde(default)]
    pub page: Option<u32>,
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

/// `get_context`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ContextArgs {
    /// The session read.
    #[serde(flatten)]
    pub session: SessionArgs,
    /// The branch of the agent asking (`orch.researcher`): it sees root
    /// events, its ancestors' and its own, not its peers'.
    #[serde(default)]
    pub branch: Option<String>,
}

/// `compact_context`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct CompactArgs {
    /// The session compacted.
    #[serde(flatten)]
    pub session: SessionArgs,
    /// How to compact, instead of the server's default: `{"strategy":
    /// "summarize" | "structured_summary" | "sliding_window" | "turn_window" |
    /// "token_budget" | "tool_result_clearing", its parameters (`keep`,
    /// `keep_messages`, `max_events`, `max_turns`, `max_tokens`), and
    /// optionally `trigger` ({"tokens": n, ...}) and `summarizer`
    /// ("extractive" or "openai:MODEL")}`.
    #[serde(default)]
    pub spec: Option<Value>,
}

impl QueryArgs {
    /// The arguments as the search tools of `session_compaction` take them.
    fn as_json(&self) -> Value {
        json!({"query": self.query, "page": self.page})
    }
}

/// Who wrote an appended message.
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AppendRole {
    /// The user.
    User,
    /// The model.
    Assistant,
    /// Instructions.
    System,
}

/// `append_message`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AppendArgs {
    /// The session written to.
    #[serde(flatten)]
    pub session: SessionArgs,
    /// Who wrote it.
    pub role: AppendRole,
    /// The text.
    pub content: String,
}

/// A failed call as the tool's answer: the error's kind and message, for
/// the agent to read (`isError`), never a protocol failure.
fn failed(e: &SessionError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(
        json!({"error": e.kind().as_str(), "message": e.to_string()}).to_string(),
    )])
}

fn answer(result: Result<String, SessionError>) -> CallToolResult {
    match result {
        Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
        Err(e) => failed(&e),
    }
}

impl SessionTools {
    fn new(service: Arc<dyn SessionService>, scope: Scope) -> Self {
        Self {
            service,
            compactor: session_compaction::default_compactor(),
            scope,
            tool_router: Self::tool_router(),
        }
    }

    /// Tools acting for `owner` only (stdio).
    pub fn for_owner(service: Arc<dyn SessionService>, owner: Owner) -> Self {
        Self::new(service, Scope::Fixed(owner))
    }

    /// Tools acting for whom each request's [`Caller`] may act for (HTTP).
    pub fn per_request(service: Arc<dyn SessionService>) -> Self {
        Self::new(service, Scope::PerRequest)
    }

    /// Compacts with `compactor` in `compact_context` when the call names
    /// no spec (default: `summarize` with the offline summarizer, keeping
    /// the newest messages verbatim).
    pub fn with_compaction(mut self, compactor: Arc<dyn Compactor>) -> Self {
        self.compactor = compactor;
        self
    }

    /// The owner a call acts for: the fixed one, or the one the request's
    /// key allows given the arguments. A key that may not act for it gets
    /// the `NotFound` an unknown `session` gets (or, for a call naming no
    /// session, an unknown user).
    fn owner(
        &self,
        ctx: &RequestContext<RoleServer>,
        named: &OwnerArgs,
        session: Option<&str>,
    ) -> Result<Owner, SessionError> {
        let (app, user_id) = (named.app.as_deref(), named.user_id.as_deref());
        let hidden = || match session {
            Some(id) => SessionError::NotFound {
                what: "session",
                id: id.to_owned(),
            },
            None => SessionError::NotFound {
                what: "user",
                id: user_id.unwrap_or_default().to_owned(),
            },
        };
        match &self.scope {
            Scope::Fixed(owner) => {
                let other_app = app.is_some_and(|a| a != owner.app);
                let other_user = user_id.is_some_and(|u| u != owner.user);
                if other_app || other_user {
                    return Err(hidden());
                }
                Ok(owner.clone())
            }
            Scope::PerRequest => {
                let caller = ctx
                    .extensions
                    .get::<http::request::Parts>()
                    .and_then(|p| p.extensions.get::<Caller>())
                    .ok_or_else(|| SessionError::Unauthorized {
                        reason: "no caller on this request".to_owned(),
                    })?;
                let (key_app, key_user) = match caller {
                    Caller::Key(key) => (
                        key.app.as_ref().map(ToString::to_string),
                        key.user.as_ref().map(ToString::to_string),
                    ),
                    Caller::Open => (None, None),
                };
                let app = app
                    .map(str::to_owned)
                    .or(key_app)
                    .ok_or_else(|| SessionError::invalid("app", "name the app of the session"))?;
                let user = user_id.map(str::to_owned).or(key_user).ok_or_else(|| {
                    SessionError::invalid("user_id", "name the user of the session")
                })?;
                if !caller.may_act_for(&app, &user) {
                    return Err(hidden());
                }
                Owner::parse(&app, &user)
            }
        }
    }

    /// The owner and the session a call names.
    fn session(
        &self,
        ctx: &RequestContext<RoleServer>,
        named: SessionArgs,
    ) -> Result<(Owner, SessionId), SessionError> {
        let owner = self.owner(ctx, &named.owner, Some(&named.session_id))?;
        Ok((owner, SessionId::new(named.session_id)?))
    }
}

#[tool_router]
impl SessionTools {
    /// Searches one session's whole archive, including what left the context.
    #[tool(
        description = "Search the full history of a conversation, including parts no longer in \
                       your context, by keyword. Returns matching messages oldest first as JSON \
                       ({timestamp, type, text}), or 'No results found.'."
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
                       messages oldest first as JSON with the session each came from, or 'No \
                       results found.'."
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

    /// The model-ready context.
    #[tool(
        description = "Read a conversation's current context as chat messages, ready for a model \
                       call (the pinned system messages first, then the rest in order, tool calls \
                       without their results left out), as a JSON array."
    )]
    async fn get_context(
        &self,
        Parameters(args): Parameters<ContextArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let result = async {
            let (owner, id) = self.session(&ctx, args.session)?;
            let options = ContextOptions {
                branch: args.branch,
            };
            let messages = self.service.context(&owner, &id, &options).await?;
            serde_json::to_string(&messages).map_err(|e| SessionError::serialization("context", e))
        }
        .await;
        Ok(answer(result))
    }

    /// Records one message.
    #[tool(
        description = "Record a message in a conversation. Answers {seq, version}: the message's \
                       position and the conversation's version after it."
    )]
    async fn append_message(
        &self,
        Parameters(args): Parameters<AppendArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let result = async {
            let (owner, id) = self.session(&ctx, args.session)?;
            let message = match args.role {
                AppendRole::User => Message::user(args.content),
                AppendRole::Assistant => Message::assistant(args.content),
                AppendRole::System => Message::system(args.content),
            };
            let outcome = self.service.append_message(&owner, &id, message).await?;
            Ok(json!({"seq": outcome.seqs.first(), "version": outcome.version}).to_string())
        }
        .await;
        Ok(answer(result))
    }

    /// Compacts the context now.
    #[tool(
        description = "Compact a conversation's context now: older parts leave the context \
                       (summarized or dropped) and stay searchable with conversation_search. \
                       Answers what it did ({compacted, strategy, events_before, events_after, \
                       tokens_before, tokens_after, version}), or why there was nothing to compact."
    )]
    async fn compact_context(
        &self,
        Parameters(args): Parameters<CompactArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let result = async {
            let (owner, id) = self.session(&ctx, args.session)?;
            let chosen = match args.spec {
                Some(spec) => serde_json::from_value::<StrategySpec>(spec)
                    .map_err(|e| SessionError::invalid_because("spec", e.to_string(), e))?
                    .compactor()?,
                None => self.compactor.clone(),
            };
            let done = self.service.compact(&owner, &id, chosen.as_ref()).await?;
            serde_json::to_string(&done).map_err(|e| SessionError::serialization("answer", e))
        }
        .await;
        Ok(answer(result))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for SessionTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "agent-session",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "Durable conversation memory: search what left your context \
                 (conversation_search, cross_session_search), read the context (get_context), \
                 record messages (append_message) and compact (compact_context).",
            )
    }
}
