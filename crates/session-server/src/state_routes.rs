//! `GET` and `PATCH /v1/apps/{app}/users/{user}/sessions/{id}/state`: a
//! session's state by scope, and a merge patch of its session scope.
//! (`user:` and `app:` keys change through the state deltas of events, as
//! everywhere in agent-session: `POST …/events`.)

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use session_core::{ScopedState, StateMap};

use crate::owner_path::{Failure, OwnerState, SessionAt, SessionParams};
use crate::problem::{etag, if_match, json_body, ApiResult};
use crate::reply::ok;

/// A session's state by scope.
#[utoipa::path(get, path = "/v1/apps/{app}/users/{user}/sessions/{id}/state", operation_id = "owner_get_state", tag = "owner",
    params(SessionParams),
    responses((status = 200, description = "The state by scope", body = ScopedState, headers(("ETag" = String, description = "The session's version"))), Failure))]
pub(crate) async fn get_state(
    State(s): State<OwnerState>,
    SessionAt(owner, id): SessionAt,
) -> ApiResult<Response> {
    let state = s.service.state(&owner, &id).await?;
    Ok((etag(state.version), ok(&state)).into_response())
}

/// Merges a patch into the session scope: each key is set, `null` removes it.
#[utoipa::path(patch, path = "/v1/apps/{app}/users/{user}/sessions/{id}/state", operation_id = "owner_patch_state", tag = "owner",
    params(SessionParams, ("If-Match" = Option<String>, Header, nullable = false, description = "Apply only at this version (its ETag)")),
    request_body(content = Object, description = "Session-scope keys to set (`null` removes one)"),
    responses((status = 200, description = "The state by scope after the patch", body = ScopedState, headers(("ETag" = String, description = "The session's version"))), Failure))]
pub(crate) async fn patch_state(
    State(s): State<OwnerState>,
    SessionAt(owner, id): SessionAt,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let patch: StateMap = json_body(&body)?;
    let expected = if_match(&headers)?;
    let state = s.service.patch_state(&owner, &id, &patch, expected).await?;
    Ok((etag(state.version), ok(&state)).into_response())
}
