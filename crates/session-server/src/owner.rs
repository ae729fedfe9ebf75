//! The owner routes: the session service for one user of one app, under
//! `/v1/apps/{app}/users/{user}`. Each handler parses (the path into an
//! `Owner` and a `SessionId`, the body into its type), calls the service
//! once and replies; another owner's session is `NotFound`, exactly as an
//! unknown one, because the service says so.

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::Router;
use session_core::{
    AppendOutcome, ContextOptions, Erased, Message, Page, SearchHit, SearchQuery, Session,
    SessionEvent, SessionUpdate, SharedState, UsageReport,
};
use session_wire::{
    CreateBody, EventParams, ForkBody, ResetBody, ResolveBody, ResolvedBody, RewindBody,
    SessionListParams,
};

use crate::owner_path::{Failure, OwnerAt, OwnerParams, OwnerState, SessionAt, SessionParams};
use crate::problem::{
    etag, if_match, json_body, precondition_failed, query_params, required_if_match, ApiResult,
};
use crate::reply::{event_batch, json, ok};

type Svc = State<OwnerState>;

/// The owner routes, scoped by the caller's key in [`crate::auth`].
pub(crate) fn routes(state: OwnerState) -> Router {
    let base = "/v1/apps/{app}/users/{user}";
    let session = format!("{base}/sessions/{{id}}");
    Router::new()
        .route(base, delete(erase))
        .route(&format!("{base}/state"), get(shared_state))
        .route(
            &format!("{base}/export"),
            get(crate::transfer::export_owner),
        )
        .route(&format!("{base}/sessions"), post(create).get(list))
        .route(&format!("{base}/resolve"), post(resolve))
        .route(&format!("{base}/reset"), post(reset))
        .route(&format!("{base}/search"), post(search))
        .route(
            &session,
            get(get_session).patch(update).delete(delete_session),
        )
        .route(&format!("{session}/end"), post(end))
        .route(&format!("{session}/reopen"), post(reopen))
        .route(&format!("{session}/events"), post(append).get(events))
        .route(
            &format!("{session}/messages"),
            post(append_message).get(messages),
        )
        .route(&format!("{session}/context"), put(replace_context))
        .route(&format!("{session}/rewind"), post(rewind))
        .route(&format!("{session}/pop"), post(pop))
        .route(&format!("{session}/fork"), post(fork))
        .route(&format!("{session}/usage"), get(usage))
        .route(&format!("{session}/compact"), post(crate::compact::compact))
        .route(
            &format!("{session}/state"),
            get(crate::state_routes::get_state).patch(crate::state_routes::patch_state),
        )
        .with_state(state)
}

/// Everything stored of the user in the app is erased
#[utoipa::path(delete, path = "/v1/apps/{app}/users/{user}", operation_id = "owner_erase", tag = "owner",
    params(OwnerParams),
    responses((status = 200, description = "What was erased", body = Erased), Failure))]
pub(crate) async fn erase(State(s): Svc, OwnerAt(owner): OwnerAt) -> ApiResult<Response> {
    Ok(ok(&s.service.erase_user(&owner).await?))
}

/// The user: and app: state
#[utoipa::path(get, path = "/v1/apps/{app}/users/{user}/state", operation_id = "owner_shared_state", tag = "owner",
    params(OwnerParams),
    responses((status = 200, description = "The user: and app: state", body = SharedState), Failure))]
pub(crate) async fn shared_state(State(s): Svc, OwnerAt(owner): OwnerAt) -> ApiResult<Response> {
    Ok(ok(&s.service.shared_state(&owner).await?))
}

/// Creates a session
#[utoipa::path(post, path = "/v1/apps/{app}/users/{user}/sessions", operation_id = "owner_create", tag = "owner",
    params(OwnerParams), request_body = CreateBody,
    responses((status = 201, description = "The session, created", body = Session, headers(("ETag" = String, description = "The session's version"))), Failure))]
pub(crate) async fn create(
    State(s): Svc,
    OwnerAt(owner): OwnerAt,
    body: Bytes,
) -> ApiResult<Response> {
    let body: CreateBody = json_body(&body)?;
    let session = s.service.create(body.into_request(&owner)?).await?;
    Ok((etag(session.version), json(StatusCode::CREATED, &session)).into_response())
}

/// The user's sessions, newest activity first
#[utoipa::path(get, path = "/v1/apps/{app}/users/{user}/sessions", operation_id = "owner_list", tag = "owner",
    params(OwnerParams, SessionListParams),
    responses((status = 200, description = "The user's sessions, newest activity first", body = Page<Session>), Failure))]
pub(crate) async fn list(
    State(s): Svc,
    OwnerAt(owner): OwnerAt,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let params: SessionListParams = query_params(query.as_deref())?;
    Ok(ok(&s.service.list(&owner, params.into_query()?).await?))
}

/// The active session of the key (201 when created)
#[utoipa::path(post, path = "/v1/apps/{app}/users/{user}/resolve", operation_id = "owner_resolve", tag = "owner",
    params(OwnerParams), request_body = ResolveBody,
    responses((status = 200, description = "The active session of the key (201 when created)", body = ResolvedBody, headers(("ETag" = String, description = "The session's version"))), Failure))]
pub(crate) async fn resolve(
    State(s): Svc,
    OwnerAt(owner): OwnerAt,
    body: Bytes,
) -> ApiResult<Response> {
    let body: ResolveBody = json_body(&body)?;
    let (request, policy) = body.into_request(&owner)?;
    let resolved = s.service.resolve(&request, &policy).await?;
    let status = if resolved.is_new {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let version = resolved.session.version;
    let body = ResolvedBody {
        session: resolved.session,
        is_new: resolved.is_new,
    };
    Ok((etag(version), json(status, &body)).into_response())
}

/// Starts the key over: its active session is ended and a new one created
#[utoipa::path(post, path = "/v1/apps/{app}/users/{user}/reset", operation_id = "owner_reset", tag = "owner",
    params(OwnerParams), request_body = ResetBody,
    responses((status = 201, description = "The key's new session (the one it had, if any, is ended)", body = Session, headers(("ETag" = String, description = "The session's version"))), Failure))]
pub(crate) async fn reset(
    State(s): Svc,
    OwnerAt(owner): OwnerAt,
    body: Bytes,
) -> ApiResult<Response> {
    let body: ResetBody = json_body(&body)?;
    let session = s.service.reset(&body.into_request(&owner)?).await?;
    Ok((etag(session.version), json(StatusCode::CREATED, &session)).into_response())
}

/// A page of hits
#[utoipa::path(post, path = "/v1/apps/{app}/users/{user}/search", operation_id = "owner_search", tag = "owner",
    params(OwnerParams), request_body = SearchQuery,
    responses((status = 200, description = "A page of hits", body = Page<SearchHit>), Failure))]
pub(crate) async fn search(
    State(s): Svc,
    OwnerAt(owner): OwnerAt,
    body: Bytes,
) -> ApiResult<Response> {
    let query: SearchQuery = json_body(&body)?;
    Ok(ok(&s.service.search(&owner, &query).await?))
}

/// The session, shared state merged
#[utoipa::path(get, path = "/v1/apps/{app}/users/{user}/sessions/{id}", operation_id = "owner_get_session", tag = "owner",
    params(SessionParams),
    responses((status = 200, description = "The session, shared state merged", body = Session, headers(("ETag" = String, description = "The session's version"))), Failure))]
pub(crate) async fn get_session(
    State(s): Svc,
    SessionAt(owner, id): SessionAt,
) -> ApiResult<Response> {
    let session = s.service.get(&owner, &id).await?;
    Ok((etag(session.version), ok(&session)).into_response())
}

/// Changes metadata, state, status or expiry
#[utoipa::path(patch, path = "/v1/apps/{app}/users/{user}/sessions/{id}", operation_id = "owner_update", tag = "owner",
    params(SessionParams, ("If-Match" = Option<String>, Header, nullable = false, description = "Apply only at this version (its ETag)")),
    request_body = SessionUpdate,
    responses((status = 200, description = "The session, changed", body = Session, headers(("ETag" = String, description = "The session's version"))), Failure))]
pub(crate) async fn update(
    State(s): Svc,
    SessionAt(owner, id): SessionAt,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let mut update: SessionUpdate = json_body(&body)?;
    if let Some(version) = if_match(&headers)? {
        update.expected_version = Some(version);
    }
    let session = s.service.update(&owner, &id, update).await?;
    Ok((etag(session.version), ok(&session)).into_response())
}

/// Deletes the session and its events
#[utoipa::path(delete, path = "/v1/apps/{app}/users/{user}/sessions/{id}", operation_id = "owner_delete_session", tag = "owner",
    params(SessionParams),
    responses((status = 204, description = "Deleted"), Failure))]
pub(crate) async fn delete_session(
    State(s): Svc,
    SessionAt(owner, id): SessionAt,
) -> ApiResult<Response> {
    s.service.delete(&owner, &id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Ends the session
#[utoipa::path(post, path = "/v1/apps/{app}/users/{user}/sessions/{id}/end", operation_id = "owner_end", tag = "owner",
    params(SessionParams),
    responses((status = 200, description = "The session, ended", body = Session, headers(("ETag" = String, description = "The session's version"))), Failure))]
pub(crate) async fn end(State(s): Svc, SessionAt(owner, id): SessionAt) -> ApiResult<Response> {
    let session = s.service.end(&owner, &id).await?;
    Ok((etag(session.version), ok(&session)).into_response())
}

/// Reopens an ended session
#[utoipa::path(post, path = "/v1/apps/{app}/users/{user}/sessions/{id}/reopen", operation_id = "owner_reopen", tag = "owner",
    params(SessionParams),
    responses((status = 200, description = "The session, writable again", body = Session, headers(("ETag" = String, description = "The session's version"))), Failure))]
pub(crate) async fn reopen(State(s): Svc, SessionAt(owner, id): SessionAt) -> ApiResult<Response> {
    let session = s.service.reopen(&owner, &id).await?;
    Ok((etag(session.version), ok(&session)).into_response())
}

/// Appends a batch of events atomically
#[utoipa::path(post, path = "/v1/apps/{app}/users/{user}/sessions/{id}/events", operation_id = "owner_append", tag = "owner",
    params(SessionParams), request_body = Vec<SessionEvent>,
    responses((status = 200, description = "What the append did", body = AppendOutcome, headers(("ETag" = String, description = "The session's version"))), Failure))]
pub(crate) async fn append(
    State(s): Svc,
    SessionAt(owner, id): SessionAt,
    body: Bytes,
) -> ApiResult<Response> {
    let events = event_batch(&body)?;
    let outcome = s.service.append_events(&owner, &id, events).await?;
    Ok((etag(outcome.version), ok(&outcome)).into_response())
}

/// Appends one message
#[utoipa::path(post, path = "/v1/apps/{app}/users/{user}/sessions/{id}/messages", operation_id = "owner_append_message", tag = "owner",
    params(SessionParams), request_body = Message,
    responses((status = 200, description = "What the append did", body = AppendOutcome, headers(("ETag" = String, description = "The session's version"))), Failure))]
pub(crate) async fn append_message(
    State(s): Svc,
    SessionAt(owner, id): SessionAt,
    body: Bytes,
) -> ApiResult<Response> {
    let message: Message = json_body(&body)?;
    let outcome = s.service.append_message(&owner, &id, message).await?;
    Ok((etag(outcome.version), ok(&outcome)).into_response())
}

/// A page of events
#[utoipa::path(get, path = "/v1/apps/{app}/users/{user}/sessions/{id}/events", operation_id = "owner_events", tag = "owner",
    params(SessionParams, EventParams),
    responses((status = 200, description = "A page of events", body = Page<SessionEvent>), Failure))]
pub(crate) async fn events(
    State(s): Svc,
    SessionAt(owner, id): SessionAt,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let params: EventParams = query_params(query.as_deref())?;
    let filter = params.into_filter()?;
    Ok(ok(&s.service.events(&owner, &id, &filter).await?))
}

/// The model-ready context: pinned system messages first, the branch's view, unpaired tool calls left out
#[utoipa::path(get, path = "/v1/apps/{app}/users/{user}/sessions/{id}/messages", operation_id = "owner_messages", tag = "owner",
    params(SessionParams, ("branch" = Option<String>, Query, description = "The branch of the agent asking (`orch.researcher`)")),
    responses((status = 200, description = "The context as model messages", body = Vec<Message>), Failure))]
pub(crate) async fn messages(
    State(s): Svc,
    SessionAt(owner, id): SessionAt,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let options: ContextOptions = query_params(query.as_deref())?;
    Ok(ok(&s.service.context(&owner, &id, &options).await?))
}

/// Swaps the context if the session is at the `If-Match` version
#[utoipa::path(put, path = "/v1/apps/{app}/users/{user}/sessions/{id}/context", operation_id = "owner_replace_context", tag = "owner",
    params(SessionParams, ("If-Match" = String, Header, description = "The session's version as its ETag gave it (`\"7\"`)")),
    request_body = Vec<SessionEvent>,
    responses((status = 204, description = "Replaced", headers(("ETag" = String, description = "The session's new version"))), (status = 412, description = "The session is at another version", body = session_wire::Problem, content_type = "application/problem+json"), Failure))]
pub(crate) async fn replace_context(
    State(s): Svc,
    SessionAt(owner, id): SessionAt,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let expected = required_if_match(&headers)?;
    let events = event_batch(&body)?;
    match s
        .service
        .replace_context(&owner, &id, events, expected)
        .await
    {
        Ok(version) => Ok((StatusCode::NO_CONTENT, etag(version)).into_response()),
        Err(session_core::SessionError::Conflict { actual, .. }) => {
            Err(precondition_failed(&id, expected, actual))
        }
        Err(e) => Err(e.into()),
    }
}

/// Removes the events of an invocation and everything after
#[utoipa::path(post, path = "/v1/apps/{app}/users/{user}/sessions/{id}/rewind", operation_id = "owner_rewind", tag = "owner",
    params(SessionParams), request_body = RewindBody,
    responses((status = 200, description = "The session after the rewind", body = Session, headers(("ETag" = String, description = "The session's version"))), Failure))]
pub(crate) async fn rewind(
    State(s): Svc,
    SessionAt(owner, id): SessionAt,
    body: Bytes,
) -> ApiResult<Response> {
    let body: RewindBody = json_body(&body)?;
    let to = body.target()?;
    let rewound = s.service.rewind(&owner, &id, &to).await?;
    Ok((etag(rewound.session.version), ok(&rewound.session)).into_response())
}

/// Removes the latest event that is not a summary
#[utoipa::path(post, path = "/v1/apps/{app}/users/{user}/sessions/{id}/pop", operation_id = "owner_pop", tag = "owner",
    params(SessionParams),
    responses((status = 200, description = "The event removed (null when the session had none)", body = Option<SessionEvent>), Failure))]
pub(crate) async fn pop(State(s): Svc, SessionAt(owner, id): SessionAt) -> ApiResult<Response> {
    Ok(ok(&s.service.pop(&owner, &id).await?))
}

/// Forks the session into a new one
#[utoipa::path(post, path = "/v1/apps/{app}/users/{user}/sessions/{id}/fork", operation_id = "owner_fork", tag = "owner",
    params(SessionParams), request_body = ForkBody,
    responses((status = 201, description = "The fork", body = Session, headers(("ETag" = String, description = "The session's version"))), Failure))]
pub(crate) async fn fork(
    State(s): Svc,
    SessionAt(owner, id): SessionAt,
    body: Bytes,
) -> ApiResult<Response> {
    let body: ForkBody = json_body(&body)?;
    let fork = s.service.fork(&owner, &id, &body.at).await?;
    Ok((etag(fork.version), json(StatusCode::CREATED, &fork)).into_response())
}

/// Model usage in total, per invocation and per model
#[utoipa::path(get, path = "/v1/apps/{app}/users/{user}/sessions/{id}/usage", operation_id = "owner_usage", tag = "owner",
    params(SessionParams),
    responses((status = 200, description = "Model usage in total, per invocation and per model", body = UsageReport), Failure))]
pub(crate) async fn usage(State(s): Svc, SessionAt(owner, id): SessionAt) -> ApiResult<Response> {
    Ok(ok(&s.service.usage(&owner, &id).await?))
}
