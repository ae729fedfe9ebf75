//! Replies: values as JSON responses, and request bodies of events.

use axum::body::Bytes;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use session_core::{SessionError, SessionEvent};

use crate::problem::{json_body, ApiError, ApiResult};

/// A JSON response with `status`.
pub(crate) fn json<T: Serialize>(status: StatusCode, value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => (status, [(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => ApiError::from(SessionError::serialization("response", e)).into_response(),
    }
}

/// A JSON 200 response.
pub(crate) fn ok<T: Serialize>(value: &T) -> Response {
    json(StatusCode::OK, value)
}

/// The events of a body: an array of events, or one event.
pub(crate) fn event_batch(body: &Bytes) -> ApiResult<Vec<SessionEvent>> {
    let value: serde_json::Value = json_body(body)?;
    if value.is_array() {
        json_body(body)
    } else {
        json_body::<SessionEvent>(body).map(|e| vec![e])
    }
}
