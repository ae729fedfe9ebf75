//! The middleware that applies [`ApiKeys`]: who is calling, and whether
//! the route is theirs.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use session_core::SessionError;

use crate::auth::{ApiKey, ApiKeys};
use crate::problem::ApiError;

/// Requests per key a server lets through, over time.
pub(crate) type KeyLimiter = governor::DefaultKeyedRateLimiter<String>;

/// What [`authenticate`] checks a request against.
#[derive(Clone)]
pub(crate) struct Gate {
    pub(crate) keys: Arc<ApiKeys>,
    pub(crate) limiter: Option<Arc<KeyLimiter>>,
}

/// Who a request comes from, as the guard found it: in the request's
/// extensions of every route behind the keys (those of
/// [`crate::SessionServer::with_routes`] too).
#[derive(Debug, Clone)]
pub enum Caller {
    /// The server holds no keys: everyone may call everything.
    Open,
    /// The request carried this key.
    Key(Arc<ApiKey>),
}

impl Caller {
    /// Whether the caller may use every app (an operator's key, or a server without keys).
    pub fn is_operator(&self) -> bool {
        match self {
            Self::Open => true,
            Self::Key(key) => key.is_operator(),
        }
    }

    /// Whether the caller may act for `user` in `app`.
    pub fn may_act_for(&self, app: &str, user: &str) -> bool {
        match self {
            Self::Open => true,
            Self::Key(key) => key.may_act_for(app, user),
        }
    }
}

/// 401 with a `WWW-Authenticate: Bearer` challenge.
fn unauthorized(reason: &str) -> Response {
    let mut response = ApiError::from(SessionError::Unauthorized {
        reason: reason.to_owned(),
    })
    .into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// 429 with `Retry-After`: the key sent more requests than its rate allows.
fn too_many(wait: std::time::Duration) -> Response {
    let seconds = wait.as_secs().saturating_add(1);
    let mut response = ApiError::with_status(
        SessionError::unavailable(
            "http",
            std::io::Error::other(format!(
                "this API key is over its request rate; retry in {seconds} s"
            )),
        ),
        axum::http::StatusCode::TOO_MANY_REQUESTS,
    )
    .into_response();
    if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// Answers a request that takes longer than `limit` with 503 (`unavailable`):
/// the caller may send it again (appends are idempotent by event id).
pub(crate) async fn time_limit(
    State(limit): State<std::time::Duration>,
    request: Request,
    next: Next,
) -> Response {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::from(SessionError::unavailable(
            "http",
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the request took longer than {} ms", limit.as_millis()),
            ),
        ))
        .into_response(),
    }
}

/// The answer to a key that may not use a route: the same 404 an unknown
/// session gets, so it learns nothing about what exists.
fn hidden(request: &Request) -> Response {
    ApiError::from(SessionError::NotFound {
        what: "resource",
        id: request.uri().path().to_owned(),
    })
    .into_response()
}

/// Finds the caller's key (`Authorization: Bearer …`) and records it for
/// the route guards; 401 without a key the server holds.
pub(crate) async fn authenticate(
    State(gate): State<Gate>,
    mut request: Request,
    next: Next,
) -> Response {
    let keys = &gate.keys;
    let caller = if keys.is_empty() {
        Caller::Open
    } else {
        let secret = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim);
        let Some(secret) = secret else {
            return unauthorized("send an API key as `Authorization: Bearer KEY`");
        };
        let Some(key) = keys.authenticate(secret) else {
            return unauthorized("the API key is not one this server holds");
        };
        tracing::debug!(key = key.name, "authenticated");
        if let Some(limiter) = &gate.limiter {
            if let Err(not_until) = limiter.check_key(&key.name) {
                let wait = not_until.wait_time_from(governor::clock::Clock::now(
                    &governor::clock::DefaultClock::default(),
                ));
                return too_many(wait);
            }
        }
        Caller::Key(key)
    };
    request.extensions_mut().insert(caller);
    next.run(request).await
}

/// The store routes are an operator's view of every app: operator keys only.
pub(crate) async fn operator_only(request: Request, next: Next) -> Response {
    match request.extensions().get::<Caller>() {
        Some(caller) if caller.is_operator() => next.run(request).await,
        _ => hidden(&request),
    }
}

/// The owner routes: keys of the path's app, agent keys for their user only.
pub(crate) async fn owner_only(request: Request, next: Next) -> Response {
    let mut segments = request.uri().path().split('/').skip(1);
    // /v1/apps/{app}/users/{user}/...
    let owner = match (
        segments.next(),
        segments.next(),
        segments.next(),
        segments.next(),
        segments.next(),
    ) {
        (Some("v1"), Some("apps"), Some(app), Some("users"), Some(user)) => Some((app, user)),
        _ => None,
    };
    let allowed = match (request.extensions().get::<Caller>(), owner) {
        (Some(caller), Some((app, user))) => {
            let app = percent_decode(app);
            let user = percent_decode(user);
            caller.may_act_for(&app, &user)
        }
        _ => false,
    };
    if allowed {
        next.run(request).await
    } else {
        hidden(&request)
    }
}

/// A path segment with its `%XX` escapes decoded (names may hold `@ + / | #`).
fn percent_decode(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let escaped = (b == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        if let Some(decoded) = escaped {
            out.push(decoded);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
