//! Layers: repositories that wrap another repository and add one
//! cross-cutting behaviour, in the manner of OpenDAL layers and
//! tower-sessions' caching store. Stack them in any order; each forwards
//! every call and is itself a [`crate::SessionRepository`].
//!
//! ```
//! use session_core::layer::{RetryLayer, TracingLayer};
//! use session_core::{InMemoryRepository, SessionRepository};
//! let repo = TracingLayer::new(RetryLayer::new(InMemoryRepository::new()));
//! assert_eq!(repo.capabilities().backend, "memory");
//! ```

mod retry;
mod sealed_guard;
mod tracing;

pub use self::retry::{RetryLayer, RetryPolicy};
pub use self::sealed_guard::{SealedGuard, ENCRYPTED_STORE_HINT};
pub use self::tracing::{StoreObserver, TracingLayer};
