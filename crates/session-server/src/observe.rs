//! Operations: a request id and one log line per request (never message
//! content: the route template, not the URL), and the Prometheus metrics
//! served at `/metrics`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use session_core::layer::StoreObserver;
use session_core::ErrorKind;
use tracing::Instrument;

/// The header a request id travels in, both ways.
pub const REQUEST_ID: &str = "x-request-id";

/// The error kind a response reports, set by the problem responses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ErrorKindTag(pub(crate) &'static str);

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    route: String,
    status: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RouteLabels {
    method: String,
    route: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StoreLabels {
    backend: String,
    op: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StoreErrorLabels {
    backend: String,
    op: String,
    kind: String,
}

fn latency_histogram() -> Histogram {
    // 100 µs to ~26 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 19))
}

/// The server's metrics.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RouteLabels, Histogram, fn() -> Histogram>,
    errors: Family<KindLabels, Counter>,
    store_latency: Family<StoreLabels, Histogram, fn() -> Histogram>,
    store_errors: Family<StoreErrorLabels, Counter>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("agent_session");
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<RouteLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram,
        );
        let errors = Family::<KindLabels, Counter>::default();
        let store_latency =
            Family::<StoreLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                latency_histogram,
            );
        let store_errors = Family::<StoreErrorLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests by method, route and status",
            requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time to answer an HTTP request, by method and route",
            latency.clone(),
        );
        registry.register(
            "http_errors",
            "Requests answered with a problem document, by error kind",
            errors.clone(),
        );
        registry.register(
            "store_call_duration_seconds",
            "Time of each store call, by backend and operation",
            store_latency.clone(),
        );
        registry.register(
            "store_errors",
            "Store calls that failed, by backend, operation and error kind",
            store_errors.clone(),
        );
        Self {
            registry,
            requests,
            latency,
            errors,
            store_latency,
            store_errors,
        }
    }
}

impl Metrics {
    /// The metrics in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

impl StoreObserver for Metrics {
    fn observe(
        &self,
        backend: &'static str,
        op: &'static str,
        elapsed: Duration,
        error: Option<ErrorKind>,
    ) {
        let labels = StoreLabels {
            backend: backend.to_owned(),
            op: op.to_owned(),
        };
        self.store_latency
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        if let Some(kind) = error {
            self.store_errors
                .get_or_create(&StoreErrorLabels {
                    backend: labels.backend,
                    op: labels.op,
                    kind: kind.as_str().to_owned(),
                })
                .inc();
        }
    }
}

/// `GET /metrics`.
pub(crate) async fn metrics(State(metrics): State<Arc<Metrics>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.render(),
    )
        .into_response()
}

/// The id of a request: the caller's `x-request-id` when it is a short
/// printable token, else a new UUID.
fn request_id(request: &Request) -> String {
    request
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned)
}

/// Gives each request an id (echoed in `x-request-id`), runs it in a span
/// carrying the id, method and route template, logs its outcome and
/// records it in the metrics.
pub(crate) async fn track(
    State(metrics): State<Arc<Metrics>>,
    request: Request,
    next: Next,
) -> Response {
    let id = request_id(&request);
    let method = request.method().as_str().to_owned();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    let span = tracing::info_span!("request", request_id = %id, method = %method, route = %route);
    let started = Instant::now();
    let mut response = next.run(request).instrument(span.clone()).await;
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    let kind = response.extensions().get::<ErrorKindTag>().map(|k| k.0);
    span.in_scope(|| {
        let elapsed_ms = elapsed.as_secs_f64() * 1000.0;
        tracing::info!(status, elapsed_ms, kind = kind.unwrap_or("-"), "answered");
    });
    metrics
        .requests
        .get_or_create(&RequestLabels {
            method: method.clone(),
            route: route.clone(),
            status,
        })
        .inc();
    metrics
        .latency
        .get_or_create(&RouteLabels { method, route })
        .observe(elapsed.as_secs_f64());
    if let Some(kind) = kind {
        metrics
            .errors
            .get_or_create(&KindLabels {
                kind: kind.to_owned(),
            })
            .inc();
    }
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    response
}
