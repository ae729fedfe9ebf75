//! The session tools: start, resolve and reset a session, read its
//! context, record a message, compact.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{schemars, tool, tool_router, ErrorData as McpError, RoleServer};
use serde::Deserialize;
use serde_json::{json, Value};
use session_compaction::StrategySpec;
use session_core::{ContextOptions, Message, SessionError, StateMap};
use session_wire::{CreateBody, ResetBody, ResolveBody, ResolvedBody};

use super::handler::{answer, to_json, OwnerArgs, SessionArgs, SessionTools};

/// `start_session`'s arguments: what to create, everything optional (as
/// the HTTP create body).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct StartArgs {
    /// The session's id; generated (a UUID v7) when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// A conversation key (`telegram:chat-123`) that resolve_session finds it by.
    #[serde(default)]
    pub key: Option<String>,
    /// Time to live in seconds (default 60 days).
    #[serde(default)]
    pub ttl_secs: Option<u64>,
    /// Metadata, a JSON object.
    #[serde(default)]
    pub metadata: Option<StateMap>,
    /// Initial state, a JSON object (`user:` and `app:` keys go to the shared scopes).
    #[serde(default)]
    pub state: Option<StateMap>,
    /// Whose session (when the API key does not fix it).
    #[serde(flatten)]
    pub owner: OwnerArgs,
}

/// `resolve_session`'s arguments: the key and its reset policy (as the
/// HTTP resolve body).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct ResolveArgs {
    /// The conversation key (`telegram:chat-123:agent-a`).
    pub key: String,
    /// The app's group session for the key, shared by all its users.
    #[serde(default)]
    pub group: bool,
    /// Start over after this many idle seconds.
    #[serde(default)]
    pub idle_timeout_secs: Option<u64>,
    /// Start over daily at this hour (0-23) ...
    #[serde(default)]
    pub daily_reset_hour: Option<u8>,
    /// ... in this IANA time zone (default UTC).
    #[serde(default)]
    pub daily_reset_zone: Option<String>,
    /// Time to live in seconds of a session the call creates.
    #[serde(default)]
    pub ttl_secs: Option<u64>,
    /// Metadata of a session the call creates.
    #[serde(default)]
    pub metadata: Option<StateMap>,
    /// Whose session (when the API key does not fix it).
    #[serde(flatten)]
    pub owner: OwnerArgs,
}

/// `reset_session`'s arguments: the key started over (as the HTTP reset body).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct ResetArgs {
    /// The conversation key.
    pub key: String,
    /// The app's group session for the key, shared by all its users.
    #[serde(default)]
    pub group: bool,
    /// Time to live in seconds of the new session.
    #[serde(default)]
    pub ttl_secs: Option<u64>,
    /// Metadata of the new session.
    #[serde(default)]
    pub metadata: Option<StateMap>,
    /// Whose session (when the API key does not fix it).
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

impl StartArgs {
    /// The HTTP create body these arguments stand for.
    fn body(self) -> CreateBody {
        CreateBody {
            id: self.id,
            key: self.key,
            ttl_secs: self.ttl_secs,
            metadata: self.metadata.unwrap_or_default(),
            state: self.state.unwrap_or_default(),
            ..CreateBody::default()
        }
    }
}

impl ResolveArgs {
    /// The HTTP resolve body these arguments stand for.
    fn body(self) -> ResolveBody {
        ResolveBody {
            key: self.key,
            group: self.group,
            idle_timeout_secs: self.idle_timeout_secs,
            daily_reset_hour: self.daily_reset_hour,
            daily_reset_zone: self.daily_reset_zone,
            ttl_secs: self.ttl_secs,
            metadata: self.metadata.unwrap_or_default(),
        }
    }
}

impl ResetArgs {
    /// The HTTP reset body these arguments stand for.
    fn body(self) -> ResetBody {
        ResetBody {
            key: self.key,
            group: self.group,
            ttl_secs: self.ttl_secs,
            metadata: self.metadata.unwrap_or_default(),
        }
    }
}

#[tool_router(router = session_router, vis = "pub(super)")]
impl SessionTools {
    /// Creates a session.
    #[tool(
        description = "Start a new conversation (a session) and answer it as JSON ({id, key, \
                       version, ...}); use its id with the other tools. Optional: id, key (a \
                       conversation key resolve_session finds it by), ttl_secs, metadata, state."
    )]
    async fn start_session(
        &self,
        Parameters(args): Parameters<StartArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let result = async {
            let owner = self.owner(&ctx, &args.owner, None)?;
            let request = args.body().into_request(&owner)?;
            to_json(&self.service.create(request).await?)
        }
        .await;
        Ok(answer(result))
    }

    /// Finds or creates the active session of a key, reset by policy.
    #[tool(
        description = "Find the active conversation of a conversation key, or start one: answers \
                       {session, is_new}. The same key gives the same session until it is reset \
                       (reset_session) or the reset policy fires: idle_timeout_secs, or \
                       daily_reset_hour in daily_reset_zone."
    )]
    async fn resolve_session(
        &self,
        Parameters(args): Parameters<ResolveArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let result = async {
            let owner = self.owner(&ctx, &args.owner, None)?;
            let (request, policy) = args.body().into_request(&owner)?;
            let resolved = self.service.resolve(&request, &policy).await?;
            to_json(&ResolvedBody {
                session: resolved.session,
                is_new: resolved.is_new,
            })
        }
        .await;
        Ok(answer(result))
    }

    /// Starts a key over.
    #[tool(
        description = "Start a conversation key over: its active conversation is ended (still \
                       readable and searchable) and a new one started and answered as JSON; \
                       resolve_session finds the new one from now on."
    )]
    async fn reset_session(
        &self,
        Parameters(args): Parameters<ResetArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let result = async {
            let owner = self.owner(&ctx, &args.owner, None)?;
            let request = args.body().into_request(&owner)?;
            to_json(&self.service.reset(&request).await?)
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
            to_json(&done)
        }
        .await;
        Ok(answer(result))
    }
}
