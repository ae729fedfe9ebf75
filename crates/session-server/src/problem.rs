//! Errors as `application/problem+json` responses, and the parsing of
//! requests into typed values whose failures are such errors.

use axum::body::Bytes;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use session_core::{SessionError, SessionId};
use session_wire::{Problem, PROBLEM_CONTENT_TYPE};

/// A handler's failure: a [`SessionError`] answered as a problem document
/// with the status its kind maps to (or an explicit one, e.g. 412).
#[derive(Debug)]
pub(crate) struct ApiError {
    error: SessionError,
    status: Option<StatusCode>,
}

impl ApiError {
    /// `error` answered with `status` instead of its kind's.
    pub(crate) fn with_status(error: SessionError, status: StatusCode) -> Self {
        Self {
            error,
            status: Some(status),
        }
    }
}

impl From<SessionError> for ApiError {
    fn from(error: SessionError) -> Self {
        Self {
            error,
            status: None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut problem = Problem::from_error(&self.error);
        if let Some(status) = self.status {
            problem.status = status.as_u16();
        }
        let status =
            StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if status.is_server_error() {
            tracing::warn!(
                kind = problem.kind,
                status = status.as_u16(),
                "request failed"
            );
        }
        let body = serde_json::to_vec(&problem).unwrap_or_default();
        let mut response = (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(PROBLEM_CONTENT_TYPE),
            )],
            body,
        )
            .into_response();
        response
            .extensions_mut()
            .insert(crate::observe::ErrorKindTag(self.error.kind().as_str()));
        response
    }
}

/// A handler's result.
pub(crate) type ApiResult<T> = Result<T, ApiError>;

/// The JSON body as a `T`; `InvalidInput` naming the body when it is not one.
pub(crate) fn json_body<T: DeserializeOwned>(body: &Bytes) -> ApiResult<T> {
    serde_json::from_slice(body).map_err(|e| {
        SessionError::invalid_because("request body", format!("not the expected JSON: {e}"), e)
            .into()
    })
}

/// The query string as a `T`; `InvalidInput` naming the query when it is not one.
pub(crate) fn query_params<T: DeserializeOwned + Default>(query: Option<&str>) -> ApiResult<T> {
    match query {
        None | Some("") => Ok(T::default()),
        Some(q) => serde_urlencoded::from_str(q)
            .map_err(|e| SessionError::invalid_because("query string", e.to_string(), e).into()),
    }
}

/// A session id from the path.
pub(crate) fn session_id(id: &str) -> ApiResult<SessionId> {
    SessionId::new(id).map_err(ApiError::from)
}

/// The version an `If-Match` header names (`"7"`, `W/"7"` or `7`); `None` if absent.
pub(crate) fn if_match(headers: &HeaderMap) -> ApiResult<Option<u64>> {
    let Some(value) = headers.get(header::IF_MATCH) else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or_default().trim();
    let text = text.strip_prefix("W/").unwrap_or(text).trim_matches('"');
    text.parse::<u64>().map(Some).map_err(|e| {
        SessionError::invalid_because(
            "If-Match",
            "must be the session's version as its ETag gives it (\"7\")",
            e,
        )
        .into()
    })
}

/// The version an `If-Match` header must name on a compare-and-swap call.
pub(crate) fn required_if_match(headers: &HeaderMap) -> ApiResult<u64> {
    if_match(headers)?.ok_or_else(|| {
        ApiError::with_status(
            SessionError::invalid(
                "If-Match",
                "this call swaps only at a known version: send the session's ETag as If-Match",
            ),
            StatusCode::PRECONDITION_REQUIRED,
        )
    })
}

/// The `ETag` of a session at `version`.
pub(crate) fn etag(version: u64) -> [(header::HeaderName, String); 1] {
    [(header::ETAG, format!("\"{version}\""))]
}

/// A compare-and-swap that found the session at version `actual`, not `expected`: 412.
pub(crate) fn precondition_failed(id: &SessionId, expected: u64, actual: u64) -> ApiError {
    ApiError::with_status(
        SessionError::Conflict {
            id: id.to_string(),
            expected,
            actual,
        },
        StatusCode::PRECONDITION_FAILED,
    )
}
