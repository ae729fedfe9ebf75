//! The HTTP API's wire shapes of agent-session, shared by the server
//! (`session-server`), the remote store (`session-client`) and the
//! bindings, so every face reads and writes the same JSON: the request
//! bodies and query strings the core types do not already cover, and
//! [`Problem`], a `SessionError` as an RFC 9457 problem document.
//!
//! ```
//! use session_core::{EventFilter, Role};
//! use session_wire::EventParams;
//! let filter = EventFilter::archive().roles([Role::User, Role::Tool]).page(2, 50);
//! let params = EventParams::from_filter(&filter);
//! assert_eq!(params.roles.as_deref(), Some("user,tool"));
//! assert_eq!(params.into_filter().unwrap(), filter);
//! ```

mod bodies;
mod owner;
mod problem;

pub use bodies::*;
pub use owner::{CreateBody, ForkBody, ResetBody, ResolveBody, ResolvedBody, RewindBody};
pub use problem::{http_status, Problem, PROBLEM_CONTENT_TYPE};
