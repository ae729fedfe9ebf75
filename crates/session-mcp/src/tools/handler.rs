//! [`SessionTools`] itself: whom it acts for, the owner and session a call
//! names, and the MCP handler that serves the tool tables of
//! [`super::sessions`] and [`super::recall`].

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::ServerHandler;
use rmcp::{schemars, tool_handler, RoleServer};
use serde::{Deserialize, Serialize};
use serde_json::json;
use session_core::{Compactor, Owner, SessionError, SessionId, SessionService};
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
    pub(super) service: Arc<dyn SessionService>,
    pub(super) compactor: Arc<dyn Compactor>,
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

/// A failed call as the tool's answer: the error's kind and message, for
/// the agent to read (`isError`), never a protocol failure.
pub(super) fn failed(e: &SessionError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(
        json!({"error": e.kind().as_str(), "message": e.to_string()}).to_string(),
    )])
}

/// The tool's answer: the text, or the error for the agent to read.
pub(super) fn answer(result: Result<String, SessionError>) -> CallToolResult {
    match result {
        Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
        Err(e) => failed(&e),
    }
}

/// `value` as the JSON text a tool answers.
pub(super) fn to_json<T: Serialize>(value: &T) -> Result<String, SessionError> {
    serde_json::to_string(value).map_err(|e| SessionError::serialization("answer", e))
}

impl SessionTools {
    fn new(service: Arc<dyn SessionService>, scope: Scope) -> Self {
        Self {
            service,
            compactor: session_compaction::default_compactor(),
            scope,
            tool_router: Self::session_router() + Self::recall_router(),
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
    pub(super) fn owner(
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
    pub(super) fn session(
        &self,
        ctx: &RequestContext<RoleServer>,
        named: SessionArgs,
    ) -> Result<(Owner, SessionId), SessionError> {
        let owner = self.owner(ctx, &named.owner, Some(&named.session_id))?;
        Ok((owner, SessionId::new(named.session_id)?))
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
                "Durable conversation memory: start a conversation (start_session), find or \
                 start the one of a conversation key (resolve_session) or start a key over \
                 (reset_session); search what left your context (conversation_search, \
                 cross_session_search) and read a hit whole (conversation_read); read the \
                 context (get_context), record messages (append_message) and compact \
                 (compact_context).",
            )
    }
}
