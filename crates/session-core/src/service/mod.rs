//! The lifecycle API agents call: `SessionService` and `DefaultSessionService`.

mod api;
mod compact;
mod default;
mod hook;
mod requests;

pub use api::SessionService;
pub use compact::{BudgetShortfall, BudgetUnit, Compacted, Compactor};
pub use default::DefaultSessionService;
pub use hook::AppendHook;
pub use requests::{
    CreateSessionRequest, CreateSessionRequestBuilder, DailyReset, Expiry, ResetPolicy,
    ResolveRequest, Resolved, Rewound,
};
