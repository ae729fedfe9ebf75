//! [`SessionTools`]: the session tools, their arguments and their handler.
//! The tools live in two tables: [`sessions`] (start, resolve and reset a
//! session, read its context, append, compact) and [`recall`] (search what
//! left the context, read one event of it whole).

mod handler;
mod recall;
mod sessions;

pub use handler::{OwnerArgs, SessionArgs, SessionTools};
pub use recall::{CrossSearchArgs, MatchArg, QueryArgs, ReadArgs, SearchArgs};
pub use sessions::{
    AppendArgs, AppendRole, CompactArgs, ContextArgs, ResetArgs, ResolveArgs, StartArgs,
};
