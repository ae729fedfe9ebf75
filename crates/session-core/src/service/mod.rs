//! The lifecycle API agents call: `SessionService` and `DefaultSessionService`.

mod api;
mod compact;
mod default;
mod hook;
mod persist_filter;
mod requests;

pub use api::SessionService;
pub use compact::{Compacted, Compactor};
pub use default::DefaultSessionService;
pub use hook::AppendHook;
pub use persist_filter::{
    failed_tool_call_ids, DropFailedToolCalls, DropSystemPrompts, FilterFn, PersistFilter, Verdict,
    TOOL_ERROR_KEY,
};
pub use requests::{
    CreateSessionRequest, CreateSessionRequestBuilder, DailyReset, Expiry, ResetPolicy,
    ResolveRequest, Resolved, Rewound,
};
