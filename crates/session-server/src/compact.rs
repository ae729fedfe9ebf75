//! `POST /v1/apps/{app}/users/{user}/sessions/{id}/compact`: compacts one
//! session's context through the service with a strategy, its parameters,
//! and optionally its trigger and summarizer ([`StrategySpec`]); the
//! archive keeps every event.

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use session_compaction::StrategySpec;
use session_core::Compacted;

use crate::owner_path::{Failure, OwnerState, SessionAt, SessionParams};
use crate::problem::{etag, json_body, ApiResult};
use crate::reply::ok;

/// Compacts the session's context now (or when the spec's trigger fires).
#[utoipa::path(post, path = "/v1/apps/{app}/users/{user}/sessions/{id}/compact", operation_id = "owner_compact", tag = "owner",
    params(SessionParams), request_body = StrategySpec,
    responses(
        (status = 200, description = "What the compaction did", body = Compacted, headers(("ETag" = String, description = "The session's version"))),
        (status = 409, description = "Another writer kept changing the session; nothing changed", body = session_wire::Problem, content_type = "application/problem+json"),
        Failure
    ))]
pub(crate) async fn compact(
    State(s): State<OwnerState>,
    SessionAt(owner, id): SessionAt,
    body: Bytes,
) -> ApiResult<Response> {
    let spec: StrategySpec = json_body(&body)?;
    let compactor = spec.compactor()?;
    let done = s.service.compact(&owner, &id, compactor.as_ref()).await?;
    Ok((etag(done.version), ok(&done)).into_response())
}
