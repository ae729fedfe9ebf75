//! `POST /v1/apps/{app}/users/{user}/sessions/{id}/compact`: compacts one
//! session's context now with a strategy and its parameters
//! ([`StrategySpec`]), offline (the extractive summarizer for
//! `summarize`); the archive keeps every event.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use session_compaction::{Compacted, StrategySpec};
use session_core::Problem;

use crate::owner::{owner, OwnerState};
use crate::problem::{etag, json_body, ApiResult};
use crate::routes::ok;

/// Compacts the session's context now.
#[utoipa::path(
    post,
    path = "/v1/apps/{app}/users/{user}/sessions/{id}/compact",
    operation_id = "owner_compact",
    tag = "owner",
    params(
        ("app" = String, Path, description = "The app"),
        ("user" = String, Path, description = "The user"),
        ("id" = String, Path, description = "The session id")
    ),
    request_body = StrategySpec,
    responses(
        (status = 200, description = "What the compaction did", body = Compacted),
        (status = 409, description = "Another writer changed the session meanwhile; nothing changed", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json")
    )
)]
pub(crate) async fn compact(
    State(s): State<OwnerState>,
    Path((app, user, id)): Path<(String, String, String)>,
    body: Bytes,
) -> ApiResult<Response> {
    let spec: StrategySpec = json_body(&body)?;
    let session = s.service.get(&owner(&app, &user)?, &id).await?;
    let answer = spec.compact_now(s.repo.as_ref(), &session.id).await?;
    let version = s.repo.event_version(&session.id).await?;
    Ok((etag(version), ok(&answer)).into_response())
}
