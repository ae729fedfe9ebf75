//! The MCP server of agent-session: what an MCP-capable agent needs of its
//! sessions, as tools. `start_session` starts a session, `resolve_session`
//! finds (or starts) the active session of a conversation key and
//! `reset_session` starts a key over; `conversation_search` and
//! `cross_session_search` find what left the context (a long hit cut to an
//! excerpt, which `conversation_read` reads whole), `get_context` reads
//! the context as model messages, `append_message` records a message, and
//! `compact_context` compacts the context now.
//!
//! Served two ways, with the same scoping:
//! - over stdio ([`serve_stdio`]), for one owner named when the server
//!   starts (`agent-session mcp --app support --user ada`);
//! - over streamable HTTP at `/mcp` of `agent-session serve`
//!   ([`streamable_http`]), where each call's API key decides whom it may
//!   act for, exactly as on the HTTP API: the tools take `app` and
//!   `user_id` where the key does not fix them, and another owner's
//!   session answers as an unknown one.
//!
//! ```no_run
//! use std::sync::Arc;
//! use session_core::{DefaultSessionService, InMemoryRepository, Owner};
//! use session_mcp::SessionTools;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let service = Arc::new(DefaultSessionService::new(InMemoryRepository::new().shared()));
//! let tools = SessionTools::for_owner(service, Owner::parse("support", "ada")?);
//! session_mcp::serve_stdio(tools).await?;
//! # Ok(()) }
//! ```

mod http_service;
mod stdio;
mod tools;

pub use http_service::streamable_http;
pub use stdio::serve_stdio;
pub use tools::{
    AppendArgs, AppendRole, CompactArgs, ContextArgs, CrossSearchArgs, MatchArg, OwnerArgs,
    QueryArgs, ReadArgs, ResetArgs, ResolveArgs, SearchArgs, SessionArgs, SessionTools, StartArgs,
};
