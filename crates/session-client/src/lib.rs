//! The remote store of agent-session: [`RemoteRepository`] implements the
//! store contract ([`SessionRepository`](session_core::SessionRepository)) over the HTTP API of a
//! `session-server`, so a program uses sessions served elsewhere exactly
//! as it would a local store, and the server's errors come back as the
//! same [`SessionError`](session_core::SessionError) kinds.
//!
//! ```no_run
//! use session_client::RemoteRepository;
//! use session_core::{NewSession, SessionRepository};
//!
//! # async fn run() -> session_core::Result<()> {
//! let store = RemoteRepository::connect("http://127.0.0.1:8080").await?;
//! let session = store
//!     .create(NewSession::new("support", "ada", chrono::Utc::now())?)
//!     .await?;
//! assert_eq!(store.get(&session.id).await?.user_id, "ada");
//! # Ok(())
//! # }
//! ```

mod backend;
mod repository;
mod status;

pub use backend::BACKEND;
pub use repository::{RemoteRepository, API_KEY_ENV, DEFAULT_TIMEOUT};
