//! `GET` and `PATCH /v1/apps/{app}/users/{user}/sessions/{id}/state`: a
//! session's state by scope, and a merge patch of its session scope.
//! (`user:` and `app:` keys change through the state deltas of events, as
//! everywhere in agent-session: `POST …/events`.)

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use session_core::wire::StateBody;
use session_core::{Problem, StateMap};

use crate::owner::{owner, OwnerState};
use crate::problem::{etag, if_match, json_body, ApiResult};
use crate::routes::ok;

/// A session's state by scope.
#[utoipa::path(
    get,
    path = "/v1/apps/{app}/users/{user}/sessions/{id}/state",
    operation_id = "owner_get_state",
    tag = "owner",
    params(
        ("app" = String, Path, description = "The app"),
        ("user" = String, Path, description = "The user"),
        ("id" = String, Path, description = "The session id")
    ),
    responses(
        (status = 200, description = "The state by scope", body = StateBody, headers(("ETag" = String, description = "The session's version"))),
        (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json")
    )
)]
pub(crate) async fn get_state(
    State(s): State<OwnerState>,
    Path((app, user, id)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    let owner = owner(&app, &user)?;
    let (body, version) = StateBody::read(s.service.as_ref(), s.repo.as_ref(), &owner, &id).await?;
    Ok((etag(version), ok(&body)).into_response())
}

/// Merges a patch into the session scope: each key is set, `null` removes it.
#[utoipa::path(
    patch,
    path = "/v1/apps/{app}/users/{user}/sessions/{id}/state",
    operation_id = "owner_patch_state",
    tag = "owner",
    params(
        ("app" = String, Path, description = "The app"),
        ("user" = String, Path, description = "The user"),
        ("id" = String, Path, description = "The session id"),
        ("If-Match" = Option<String>, Header, nullable = false, description = "Apply only at this version (its ETag)")
    ),
    request_body(content = Object, description = "Session-scope keys to set (`null` removes one)"),
    responses(
        (status = 200, description = "The state by scope after the patch", body = StateBody, headers(("ETag" = String, description = "The session's version"))),
        (status = "default", description = "An error: a problem document with its kind (`invalid_input` for a `user:`, `app:` or `temp:` key)", body = Problem, content_type = "application/problem+json")
    )
)]
pub(crate) async fn patch_state(
    State(s): State<OwnerState>,
    Path((app, user, id)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let patch: StateMap = json_body(&body)?;
    let owner = owner(&app, &user)?;
    let expected = if_match(&headers)?;
    let (body, version) = StateBody::patch(
        s.service.as_ref(),
        s.repo.as_ref(),
        &owner,
        &id,
        &patch,
        expected,
    )
    .await?;
    Ok((etag(version), ok(&body)).into_response())
}
