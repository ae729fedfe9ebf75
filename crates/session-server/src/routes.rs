//! The HTTP API: one handler per call of the store contract.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use session_core::retention::Pruned;
use session_core::{
    AppendOutcome, NewSession, Page, RewindOutcome, RewindTo, SearchHit, SearchQuery, Session,
    SessionDump, SessionEvent, SessionRepository, SessionUpdate,
};
use session_wire::{
    CapabilitiesBody, Deleted, EventParams, ForkRequest, Problem, PruneRequest, PurgeRequest,
    Purged, SessionListParams, VersionBody,
};

use crate::owner_path::Failure;
use crate::problem::{
    etag, if_match, json_body, precondition_failed, query_params, required_if_match, session_id,
    ApiResult,
};
use crate::reply::{event_batch, json, ok};

/// The store every handler serves.
type Store = State<Arc<dyn SessionRepository>>;

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
        .route("/v1/import", post(crate::transfer::import))
        .route("/v1/export", get(crate::transfer::export_all))
        .route("/v1/search", post(search))
        .route("/v1/purge", post(purge))
        .with_state(repo)
}

/// What the store supports
#[utoipa::path(
    get,
    path = "/v1/capabilities",
    operation_id = "store_capabilities",
    tag = "store",
    responses((status = 200, description = "What the store supports", body = CapabilitiesBody), Failure)
)]
pub(crate) async fn capabilities(State(repo): Store) -> Response {
    ok(&CapabilitiesBody::from(repo.capabilities()))
}

/// The session, created
#[utoipa::path(
    post,
    path = "/v1/sessions",
    operation_id = "store_create",
    tag = "store",
    request_body = NewSession,
    responses((status = 201, description = "The session, created", body = Session, headers(("ETag" = String, description = "The session's version"))), Failure)
)]
pub(crate) async fn create(State(repo): Store, body: Bytes) -> ApiResult<Response> {
    let new: NewSession = json_body(&body)?;
    let session = repo.create(new).await?;
    Ok((etag(session.version), json(StatusCode::CREATED, &session)).into_response())
}

/// Sessions, newest activity first
#[utoipa::path(
    get,
    path = "/v1/sessions",
    operation_id = "store_list",
    tag = "store",
    params(SessionListParams),
    responses((status = 200, description = "Sessions, newest activity first", body = Page<Session>), Failure)
)]
pub(crate) async fn list(State(repo): Store, RawQuery(query): RawQuery) -> ApiResult<Response> {
    let params: SessionListParams = query_params(query.as_deref())?;
    Ok(ok(&repo.list(&params.into_query()?).await?))
}

/// The session
#[utoipa::path(
    get,
    path = "/v1/sessions/{id}",
    operation_id = "store_get_session",
    tag = "store",
    params(("id" = String, Path, description = "The session id")),
    responses((status = 200, description = "The session", body = Session, headers(("ETag" = String, description = "The session's version"))), Failure)
)]
pub(crate) async fn get_session(State(repo): Store, Path(id): Path<String>) -> ApiResult<Response> {
    let session = repo.get(&session_id(&id)?).await?;
    Ok((etag(session.version), ok(&session)).into_response())
}

/// The session, changed
#[utoipa::path(
    patch,
    path = "/v1/sessions/{id}",
    operation_id = "store_update",
    tag = "store",
    params(("id" = String, Path, description = "The session id"), ("If-Match" = Option<String>, Header, nullable = false, description = "Apply only at this version (its ETag)")),
    request_body = SessionUpdate,
    responses((status = 200, description = "The session, changed", body = Session, headers(("ETag" = String, description = "The session's version"))), Failure)
)]
pub(crate) async fn update(
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

/// Whether it was there
#[utoipa::path(
    delete,
    path = "/v1/sessions/{id}",
    operation_id = "store_delete",
    tag = "store",
    params(("id" = String, Path, description = "The session id")),
    responses((status = 200, description = "Whether it was there", body = Deleted), Failure)
)]
pub(crate) async fn delete(State(repo): Store, Path(id): Path<String>) -> ApiResult<Response> {
    let deleted = repo.delete(&session_id(&id)?).await?;
    Ok(ok(&Deleted { deleted }))
}

/// The session's version
#[utoipa::path(
    get,
    path = "/v1/sessions/{id}/version",
    operation_id = "store_version",
    tag = "store",
    params(("id" = String, Path, description = "The session id")),
    responses((status = 200, description = "The session's version", body = VersionBody, headers(("ETag" = String, description = "The session's version"))), Failure)
)]
pub(crate) async fn version(State(repo): Store, Path(id): Path<String>) -> ApiResult<Response> {
    let version = repo.event_version(&session_id(&id)?).await?;
    Ok((etag(version), ok(&VersionBody { version })).into_response())
}

/// What the append did
#[utoipa::path(
    post,
    path = "/v1/sessions/{id}/events",
    operation_id = "store_append",
    tag = "store",
    params(("id" = String, Path, description = "The session id")),
    request_body = Vec<SessionEvent>,
    responses((status = 200, description = "What the append did", body = AppendOutcome, headers(("ETag" = String, description = "The session's version"))), Failure)
)]
pub(crate) async fn append(
    State(repo): Store,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    let id = session_id(&id)?;
    let outcome = repo.append(&id, event_batch(&body)?).await?;
    Ok((etag(outcome.version), ok(&outcome)).into_response())
}

/// A page of events
#[utoipa::path(
    get,
    path = "/v1/sessions/{id}/events",
    operation_id = "store_events",
    tag = "store",
    params(("id" = String, Path, description = "The session id"), EventParams),
    responses((status = 200, description = "A page of events", body = Page<SessionEvent>), Failure)
)]
pub(crate) async fn events(
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

/// Replaced
#[utoipa::path(
    put,
    path = "/v1/sessions/{id}/context",
    operation_id = "store_replace_context",
    tag = "store",
    params(("id" = String, Path, description = "The session id"), ("If-Match" = String, Header, description = "The session's version as its ETag gave it (`\"7\"`)")),
    request_body = Vec<SessionEvent>,
    responses((status = 204, description = "Replaced", headers(("ETag" = String, description = "The session's version"))), (status = 412, description = "The session is at another version", body = Problem, content_type = "application/problem+json"), Failure)
)]
pub(crate) async fn replace_context(
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

/// What the rewind did
#[utoipa::path(
    post,
    path = "/v1/sessions/{id}/rewind",
    operation_id = "store_rewind",
    tag = "store",
    params(("id" = String, Path, description = "The session id")),
    request_body = RewindTo,
    responses((status = 200, description = "What the rewind did", body = RewindOutcome, headers(("ETag" = String, description = "The session's version"))), Failure)
)]
pub(crate) async fn rewind(
    State(repo): Store,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    let to: RewindTo = json_body(&body)?;
    let outcome = repo.rewind_to(&session_id(&id)?, &to).await?;
    Ok((etag(outcome.version), ok(&outcome)).into_response())
}

/// What the prune removed
#[utoipa::path(
    post,
    path = "/v1/sessions/{id}/prune",
    operation_id = "store_prune",
    tag = "store",
    params(("id" = String, Path, description = "The session id"), ("If-Match" = String, Header, description = "The session's version as its ETag gave it (`\"7\"`)")),
    request_body = PruneRequest,
    responses((status = 200, description = "What the prune removed", body = Pruned, headers(("ETag" = String, description = "The session's version"))), (status = 412, description = "The session is at another version", body = Problem, content_type = "application/problem+json"), Failure)
)]
pub(crate) async fn prune(
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

/// The fork
#[utoipa::path(
    post,
    path = "/v1/sessions/{id}/fork",
    operation_id = "store_fork",
    tag = "store",
    params(("id" = String, Path, description = "The session id")),
    request_body = ForkRequest,
    responses((status = 201, description = "The fork", body = Session), Failure)
)]
pub(crate) async fn fork(
    State(repo): Store,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    let request: ForkRequest = json_body(&body)?;
    let fork = repo
        .fork_session(&session_id(&id)?, &request.at, request.id, request.now)
        .await?;
    Ok(json(StatusCode::CREATED, &fork))
}

/// Everything about the session
#[utoipa::path(
    get,
    path = "/v1/sessions/{id}/export",
    operation_id = "store_export",
    tag = "store",
    params(("id" = String, Path, description = "The session id")),
    responses((status = 200, description = "Everything about the session", body = SessionDump), Failure)
)]
pub(crate) async fn export(State(repo): Store, Path(id): Path<String>) -> ApiResult<Response> {
    Ok(ok(&repo.export_session(&session_id(&id)?).await?))
}

/// A page of hits
#[utoipa::path(
    post,
    path = "/v1/search",
    operation_id = "store_search",
    tag = "store",
    request_body = SearchQuery,
    responses((status = 200, description = "A page of hits", body = Page<SearchHit>), Failure)
)]
pub(crate) async fn search(State(repo): Store, body: Bytes) -> ApiResult<Response> {
    let query: SearchQuery = json_body(&body)?;
    Ok(ok(&repo.search(&query).await?))
}

/// How many expired sessions went
#[utoipa::path(
    post,
    path = "/v1/purge",
    operation_id = "store_purge",
    tag = "store",
    request_body = PurgeRequest,
    responses((status = 200, description = "How many expired sessions went", body = Purged), Failure)
)]
pub(crate) async fn purge(State(repo): Store, body: Bytes) -> ApiResult<Response> {
    let request: PurgeRequest = json_body(&body)?;
    let purged = repo.purge_expired(request.now).await?;
    Ok(ok(&Purged { purged }))
}
