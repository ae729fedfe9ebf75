//! The HTTP API: one handler per call of the store contract.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Serialize;
use session_core::wire::{
    CapabilitiesBody, Deleted, EventParams, ForkRequest, ImportBody, PruneRequest, PurgeRequest,
    Purged, SessionListParams, VersionBody,
};
use session_core::{
    NewSession, RewindTo, SearchQuery, SessionDump, SessionEvent, SessionRepository, SessionUpdate,
};

use crate::problem::{
    etag, if_match, json_body, precondition_failed, query_params, required_if_match, session_id,
    ApiResult,
};

/// The store every handler serves.
type Store = State<Arc<dyn SessionRepository>>;

/// A JSON response with `status`.
pub(crate) fn json<T: Serialize>(status: StatusCode, value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => (status, [(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => {
            crate::problem::ApiError::from(session_core::SessionError::serialization("response", e))
                .into_response()
        }
    }
}

/// A JSON 200 response.
pub(crate) fn ok<T: Serialize>(value: &T) -> Response {
    json(StatusCode::OK, value)
}

/// The routes of the store contract under `/v1`, over `repo`.
pub(crate) fn api(repo: Arc<dyn SessionRepository>) -> Router {
    Router::new()
        .route("/v1/capabilities", get(capabilities))
        .route("/v1/sessions", post(create).get(list))
        .route(
            "/v1/sessions/{id}",
            get(get_session).patch(update).delete(delete),
        )
        .route("/v1/sessions/{id}/version", get(version))
        .route("/v1/sessions/{id}/events", post(append).get(events))
        .route(
            "/v1/sessions/{id}/context",
            axum::routing::put(replace_context),
        )
        .route("/v1/sessions/{id}/rewind", post(rewind))
        .route("/v1/sessions/{id}/prune", post(prune))
        .route("/v1/sessions/{id}/fork", post(fork))
        .route("/v1/sessions/{id}/export", get(export))
        .route("/v1/import", post(import))
        .route("/v1/search", post(search))
        .route("/v1/purge", post(purge))
        .with_state(repo)
}

async fn capabilities(State(repo): Store) -> Response {
    ok(&CapabilitiesBody::from(repo.capabilities()))
}

async fn create(State(repo): Store, body: Bytes) -> ApiResult<Response> {
    let new: NewSession = json_body(&body)?;
    let session = repo.create(new).await?;
    Ok((etag(session.version), json(StatusCode::CREATED, &session)).into_response())
}

async fn list(State(repo): Store, RawQuery(query): RawQuery) -> ApiResult<Response> {
    let params: SessionListParams = query_params(query.as_deref())?;
    Ok(ok(&repo.list(&params.into_query()?).await?))
}

async fn get_session(State(repo): Store, Path(id): Path<String>) -> ApiResult<Response> {
    let session = repo.get(&session_id(&id)?).await?;
    Ok((etag(session.version), ok(&session)).into_response())
}

async fn update(
    State(repo): Store,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let mut update: SessionUpdate = json_body(&body)?;
    if let Some(version) = if_match(&headers)? {
        update.expected_version = Some(version);
    }
    let session = repo.update(&session_id(&id)?, update).await?;
    Ok((etag(session.version), ok(&session)).into_response())
}

async fn delete(State(repo): Store, Path(id): Path<String>) -> ApiResult<Response> {
    let deleted = repo.delete(&session_id(&id)?).await?;
    Ok(ok(&Deleted { deleted }))
}

async fn version(State(repo): Store, Path(id): Path<String>) -> ApiResult<Response> {
    let version = repo.event_version(&session_id(&id)?).await?;
    Ok((etag(version), ok(&VersionBody { version })).into_response())
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

async fn append(State(repo): Store, Path(id): Path<String>, body: Bytes) -> ApiResult<Response> {
    let id = session_id(&id)?;
    let outcome = repo.append(&id, event_batch(&body)?).await?;
    Ok((etag(outcome.version), ok(&outcome)).into_response())
}

async fn events(
    State(repo): Store,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let params: EventParams = query_params(query.as_deref())?;
    let page = repo
        .events(&session_id(&id)?, &params.into_filter()?)
        .await?;
    Ok(ok(&page))
}

async fn replace_context(
    State(repo): Store,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let id = session_id(&id)?;
    let expected = required_if_match(&headers)?;
    let events = event_batch(&body)?;
    if repo.replace_context(&id, events, expected).await? {
        let version = repo.event_version(&id).await?;
        Ok((StatusCode::NO_CONTENT, etag(version)).into_response())
    } else {
        let actual = repo.event_version(&id).await?;
        Err(precondition_failed(&id, expected, actual))
    }
}

async fn rewind(State(repo): Store, Path(id): Path<String>, body: Bytes) -> ApiResult<Response> {
    let to: RewindTo = json_body(&body)?;
    let outcome = repo.rewind_to(&session_id(&id)?, &to).await?;
    Ok((etag(outcome.version), ok(&outcome)).into_response())
}

async fn prune(
    State(repo): Store,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let id = session_id(&id)?;
    let expected = required_if_match(&headers)?;
    let request: PruneRequest = json_body(&body)?;
    if let Some(pruned) = repo.prune_events(&id, &request.seqs, expected).await? {
        Ok((etag(pruned.version), ok(&pruned)).into_response())
    } else {
        let actual = repo.event_version(&id).await?;
        Err(precondition_failed(&id, expected, actual))
    }
}

async fn fork(State(repo): Store, Path(id): Path<String>, body: Bytes) -> ApiResult<Response> {
    let request: ForkRequest = json_body(&body)?;
    let fork = repo
        .fork_session(&session_id(&id)?, &request.at, request.id, request.now)
        .await?;
    Ok(json(StatusCode::CREATED, &fork))
}

async fn export(State(repo): Store, Path(id): Path<String>) -> ApiResult<Response> {
    Ok(ok(&repo.export_session(&session_id(&id)?).await?))
}

async fn import(State(repo): Store, body: Bytes) -> ApiResult<Response> {
    let dump: SessionDump = json_body(&body)?;
    let outcome = repo.import_session(dump).await?;
    Ok(ok(&ImportBody { outcome }))
}

async fn search(State(repo): Store, body: Bytes) -> ApiResult<Response> {
    let query: SearchQuery = json_body(&body)?;
    Ok(ok(&repo.search(&query).await?))
}

async fn purge(State(repo): Store, body: Bytes) -> ApiResult<Response> {
    let request: PurgeRequest = json_body(&body)?;
    let purged = repo.purge_expired(request.now).await?;
    Ok(ok(&Purged { purged }))
}
