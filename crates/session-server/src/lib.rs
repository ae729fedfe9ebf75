//! The HTTP server of agent-session: any store behind one JSON API, so
//! agents written in any language, and any number of server processes
//! over one shared store, use the same sessions.
//!
//! The API follows the store contract ([`SessionRepository`]) call for
//! call under `/v1` (`docs/server.md` lists the routes); errors are
//! `application/problem+json` documents carrying the error's kind
//! ([`session_core::Problem`]); a session's version is its `ETag`, and the
//! compare-and-swap calls take it as `If-Match`. `session-client` is the
//! remote store that speaks it.
//!
//! ```no_run
//! use session_core::InMemoryRepository;
//! use session_server::SessionServer;
//!
//! # async fn run() -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! SessionServer::new(InMemoryRepository::new().shared())
//!     .serve(listener, std::future::pending())
//!     .await
//! # }
//! ```

use std::future::Future;
use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use session_core::{SessionQuery, SessionRepository};

mod problem;
mod routes;

/// The default largest request body: 32 MiB (an imported session travels whole).
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// A server over one store: build it, then [`SessionServer::serve`] or
/// mount [`SessionServer::router`] into an application of your own.
#[derive(Clone)]
pub struct SessionServer {
    repo: Arc<dyn SessionRepository>,
    max_body_bytes: usize,
}

impl std::fmt::Debug for SessionServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionServer")
            .field("backend", &self.repo.capabilities().backend)
            .field("max_body_bytes", &self.max_body_bytes)
            .finish()
    }
}

impl SessionServer {
    /// A server over `repo`.
    pub fn new(repo: Arc<dyn SessionRepository>) -> Self {
        Self {
            repo,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }

    /// Refuses request bodies larger than `bytes` with 413.
    pub fn with_max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// The routes: the API under `/v1`, and `/healthz` (the process
    /// answers) and `/readyz` (the store answers).
    pub fn router(&self) -> Router {
        let probes = Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route("/readyz", get(ready))
            .with_state(self.repo.clone());
        routes::api(self.repo.clone())
            .merge(probes)
            .layer(DefaultBodyLimit::max(self.max_body_bytes))
    }

    /// Serves on `listener` until `shutdown` completes, then stops
    /// accepting connections and finishes the requests in flight (a write
    /// the store acknowledged is answered).
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        axum::serve(listener, self.router())
            .with_graceful_shutdown(shutdown)
            .await
    }
}

/// 200 when the store answers a one-session listing, else 503 with the error.
async fn ready(State(repo): State<Arc<dyn SessionRepository>>) -> Response {
    match repo.list(&SessionQuery::new().page(0, 1)).await {
        Ok(_) => "ready".into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, e.report().to_string()).into_response(),
    }
}
