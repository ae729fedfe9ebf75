//! The HTTP server of agent-session: any store behind one JSON API, so
//! agents written in any language, and any number of server processes
//! over one shared store, use the same sessions.
//!
//! The API follows the store contract ([`SessionRepository`]) call for
//! call under `/v1` (`docs/server.md` lists the routes); errors are
//! `application/problem+json` documents carrying the error's kind
//! ([`session_wire::Problem`]); a session's version is its `ETag`, and the
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
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use session_core::layer::TracingLayer;
use session_core::{DefaultSessionService, SessionQuery, SessionRepository, SessionService};

pub mod auth;
pub mod compact;
mod guard;
pub mod observe;
pub mod openapi;
pub mod owner;
mod owner_path;
mod problem;
mod reply;
mod routes;
pub mod state_routes;
pub mod tls;
pub mod transfer;

pub use auth::{ApiKey, ApiKeys, KeyRole};
pub use guard::Caller;
pub use observe::Metrics;
pub use tls::TlsConfig;

/// The default largest request body: 32 MiB (an imported session travels whole).
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// The default time a request may take before it is answered with 503.
pub const DEFAULT_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A server over one store: build it, then [`SessionServer::serve`] or
/// mount [`SessionServer::router`] into an application of your own.
#[derive(Clone)]
pub struct SessionServer {
    repo: Arc<dyn SessionRepository>,
    service: Arc<dyn SessionService>,
    keys: Arc<ApiKeys>,
    metrics: Arc<Metrics>,
    max_body_bytes: usize,
    extra: Option<Router>,
    limiter: Option<Arc<guard::KeyLimiter>>,
    request_timeout: std::time::Duration,
}

impl std::fmt::Debug for SessionServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionServer")
            .field("backend", &self.repo.capabilities().backend)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("api_keys", &self.keys.len())
            .finish_non_exhaustive()
    }
}

impl SessionServer {
    /// A server over `repo`, answering everyone (see [`Self::with_api_keys`]),
    /// its owner routes served by a [`DefaultSessionService`] over `repo`.
    ///
    /// Every store call is timed into the server's [`Metrics`].
    pub fn new(repo: Arc<dyn SessionRepository>) -> Self {
        let metrics = Arc::new(Metrics::default());
        let repo: Arc<dyn SessionRepository> =
            Arc::new(TracingLayer::new(repo).with_observer(metrics.clone()));
        Self {
            service: Arc::new(DefaultSessionService::new(repo.clone())),
            repo,
            keys: Arc::new(ApiKeys::default()),
            metrics,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            extra: None,
            limiter: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }

    /// Lets each API key send `per_second` requests a second on average,
    /// in bursts of up to `burst`; past that, 429 with `Retry-After`.
    pub fn with_rate_limit(
        mut self,
        per_second: std::num::NonZeroU32,
        burst: std::num::NonZeroU32,
    ) -> Self {
        let quota = governor::Quota::per_second(per_second).allow_burst(burst);
        self.limiter = Some(Arc::new(governor::RateLimiter::keyed(quota)));
        self
    }

    /// Answers a request still running after `timeout` with 503
    /// (`unavailable`) (default 30 s).
    pub fn with_request_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The store the routes serve (behind the metrics layer).
    pub fn repository(&self) -> Arc<dyn SessionRepository> {
        self.repo.clone()
    }

    /// The service the owner routes call.
    pub fn service(&self) -> Arc<dyn SessionService> {
        self.service.clone()
    }

    /// Mounts `routes` (e.g. the MCP endpoint of `session-mcp`) behind the
    /// same keys, request ids, metrics and body limit; each request finds
    /// its [`Caller`] in its extensions and decides what it may see.
    pub fn with_routes(mut self, routes: Router) -> Self {
        self.extra = Some(match self.extra.take() {
            Some(mounted) => mounted.merge(routes),
            None => routes,
        });
        self
    }

    /// The server's metrics (what `/metrics` serves).
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// Serves the owner routes with `service` (one with compaction, persist
    /// filters or retention configured) instead of the default service.
    pub fn with_service(mut self, service: Arc<dyn SessionService>) -> Self {
        self.service = service;
        self
    }

    /// Requires one of `keys` on every API call (see [`auth`]); without
    /// keys the server answers everyone.
    pub fn with_api_keys(mut self, keys: ApiKeys) -> Self {
        self.keys = Arc::new(keys);
        self
    }

    /// Refuses request bodies larger than `bytes` with 413.
    pub fn with_max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// The routes: the API under `/v1`; `/healthz` (the process
    /// answers), `/readyz` (the store answers) and `/metrics` (Prometheus),
    /// which need no key. Each request gets an id (`x-request-id`) and one
    /// log line.
    pub fn router(&self) -> Router {
        let probes = Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route("/readyz", get(ready))
            .with_state(self.repo.clone())
            .merge(
                Router::new()
                    .route("/metrics", get(observe::metrics))
                    .with_state(self.metrics.clone()),
            )
            .route(
                "/openapi.json",
                get(|| async {
                    (
                        [(axum::http::header::CONTENT_TYPE, "application/json")],
                        openapi::document(),
                    )
                }),
            );
        let store =
            routes::api(self.repo.clone()).route_layer(middleware::from_fn(guard::operator_only));
        let owners = owner::routes(owner_path::OwnerState {
            service: self.service.clone(),
        })
        .route_layer(middleware::from_fn(guard::owner_only));
        let mut api = store.merge(owners);
        if let Some(extra) = &self.extra {
            api = api.merge(extra.clone());
        }
        api.layer(middleware::from_fn_with_state(
            self.request_timeout,
            guard::time_limit,
        ))
        .layer(middleware::from_fn_with_state(
            guard::Gate {
                keys: self.keys.clone(),
                limiter: self.limiter.clone(),
            },
            guard::authenticate,
        ))
        .merge(probes)
        .layer(DefaultBodyLimit::max(self.max_body_bytes))
        .layer(middleware::from_fn_with_state(
            self.metrics.clone(),
            observe::track,
        ))
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

impl SessionServer {
    /// [`Self::serve`] over TLS: each connection's handshake with `tls`
    /// runs on its own (10 s at most), so a slow client holds up no other.
    pub async fn serve_tls(
        self,
        listener: tokio::net::TcpListener,
        tls: &TlsConfig,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let listener = tls::TlsListener::new(listener, tls)?;
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
