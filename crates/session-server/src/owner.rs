//! The owner routes: the session service for one user of one app, under
//! `/v1/apps/{app}/users/{user}`. Every call is scoped to that owner, as
//! [`SessionService`] scopes it: another owner's session is `NotFound`,
//! exactly as an unknown one.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::Router;
use session_core::wire::{
    CreateBody, EventParams, ForkBody, ResolveBody, ResolvedBody, RewindBody, SessionListParams,
};
use session_core::{
    AppName, AppendOutcome, Erased, Message, Owner, Page, Problem, SearchHit, SearchQuery, Session,
    SessionEvent, SessionRepository, SessionService, SessionUpdate, SharedState, UsageReport,
    UserId,
};

use crate::problem::{etag, if_match, json_body, query_params, required_if_match, ApiResult};
use crate::routes::{event_batch, json, ok};

/// What the owner routes serve: the service, and the store under it for
/// the shared scopes.
#[derive(Clone)]
pub(crate) struct OwnerState {
    pub(crate) service: Arc<dyn SessionService>,
    pub(crate) repo: Arc<dyn SessionRepository>,
}

type Svc = State<OwnerState>;

/// The owner of a path, validated.
pub(crate) fn owner(app: &str, user: &str) -> ApiResult<Owner> {
    AppName::new(app)?;
    UserId::new(user)?;
    Ok(Owner::new(app, user))
}

/// The owner routes, scoped by the caller's key in [`crate::auth`].
pub(crate) fn routes(state: OwnerState) -> Router {
    let base = "/v1/apps/{app}/users/{user}";
    Router::new()
        .route(base, delete(erase))
        .route(&format!("{base}/state"), get(shared_state))
        .route(
            &format!("{base}/export"),
            get(crate::transfer::export_owner),
        )
        .route(&format!("{base}/sessions"), post(create).get(list))
        .route(&format!("{base}/resolve"), post(resolve))
        .route(&format!("{base}/search"), post(search))
        .route(
            &format!("{base}/sessions/{{id}}"),
            get(get_session).patch(update).delete(delete_session),
        )
        .route(&format!("{base}/sessions/{{id}}/end"), post(end))
        .route(&format!("{base}/sessions/{{id}}/reopen"), post(reopen))
        .route(
            &format!("{base}/sessions/{{id}}/events"),
            post(append).get(events),
        )
        .route(
            &format!("{base}/sessions/{{id}}/messages"),
            post(append_message).get(messages),
        )
        .route(
            &format!("{base}/sessions/{{id}}/context"),
            axum::routing::put(replace_context),
        )
        .route(&format!("{base}/sessions/{{id}}/rewind"), post(rewind))
        .route(&format!("{base}/sessions/{{id}}/fork"), post(fork))
        .route(&format!("{base}/sessions/{{id}}/usage"), get(usage))
        .route(
            &format!("{base}/sessions/{{id}}/compact"),
            post(crate::compact::compact),
        )
        .route(
            &format!("{base}/sessions/{{id}}/state"),
            get(crate::state_routes::get_state).patch(crate::state_routes::patch_state),
        )
        .with_state(state)
}

type OwnerPath = Path<(String, String)>;
type SessionPath = Path<(String, String, String)>;

/// What was erased
#[utoipa::path(
    delete,
    path = "/v1/apps/{app}/users/{user}",
    operation_id = "owner_erase",
    tag = "owner",
    params(("app" = String, Path, description = "The app"), ("user" = String, Path, description = "The user")),
    responses((status = 200, description = "What was erased", body = Erased), (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json"))
)]
pub(crate) async fn erase(State(s): Svc, Path((app, user)): OwnerPath) -> ApiResult<Response> {
    Ok(ok(&s.service.erase_user(&owner(&app, &user)?).await?))
}

/// The user: and app: state
#[utoipa::path(
    get,
    path = "/v1/apps/{app}/users/{user}/state",
    operation_id = "owner_shared_state",
    tag = "owner",
    params(("app" = String, Path, description = "The app"), ("user" = String, Path, description = "The user")),
    responses((status = 200, description = "The user: and app: state", body = SharedState), (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json"))
)]
pub(crate) async fn shared_state(
    State(s): Svc,
    Path((app, user)): OwnerPath,
) -> ApiResult<Response> {
    let (app, user) = (AppName::new(app)?, UserId::new(user)?);
    Ok(ok(&s.repo.shared_state(&app, &user).await?))
}

/// The session, created
#[utoipa::path(
    post,
    path = "/v1/apps/{app}/users/{user}/sessions",
    operation_id = "owner_create",
    tag = "owner",
    params(("app" = String, Path, description = "The app"), ("user" = String, Path, description = "The user")),
    request_body = CreateBody,
    responses((status = 201, description = "The session, created", body = Session, headers(("ETag" = String, description = "The session's version"))), (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json"))
)]
pub(crate) async fn create(
    State(s): Svc,
    Path((app, user)): OwnerPath,
    body: Bytes,
) -> ApiResult<Response> {
    let body: CreateBody = json_body(&body)?;
    owner(&app, &user)?;
    let session = s.service.create(body.into_request(&app, &user)?).await?;
    Ok((etag(session.version), json(StatusCode::CREATED, &session)).into_response())
}

/// The user's sessions, newest activity first
#[utoipa::path(
    get,
    path = "/v1/apps/{app}/users/{user}/sessions",
    operation_id = "owner_list",
    tag = "owner",
    params(("app" = String, Path, description = "The app"), ("user" = String, Path, description = "The user"), SessionListParams),
    responses((status = 200, description = "The user's sessions, newest activity first", body = Page<Session>), (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json"))
)]
pub(crate) async fn list(
    State(s): Svc,
    Path((app, user)): OwnerPath,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let params: SessionListParams = query_params(query.as_deref())?;
    let owner = owner(&app, &user)?;
    Ok(ok(&s.service.list(&owner, params.into_query()?).await?))
}

/// The active session of the key (201 when created)
#[utoipa::path(
    post,
    path = "/v1/apps/{app}/users/{user}/resolve",
    operation_id = "owner_resolve",
    tag = "owner",
    params(("app" = String, Path, description = "The app"), ("user" = String, Path, description = "The user")),
    request_body = ResolveBody,
    responses((status = 200, description = "The active session of the key (201 when created)", body = ResolvedBody, headers(("ETag" = String, description = "The session's version"))), (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json"))
)]
pub(crate) async fn resolve(
    State(s): Svc,
    Path((app, user)): OwnerPath,
    body: Bytes,
) -> ApiResult<Response> {
    let body: ResolveBody = json_body(&body)?;
    owner(&app, &user)?;
    let (request, policy) = body.into_request(&app, &user)?;
    let resolved = s.service.resolve(&request, &policy).await?;
    let body = ResolvedBody {
        session: resolved.session,
        is_new: resolved.is_new,
    };
    let status = if body.is_new {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((etag(body.session.version), json(status, &body)).into_response())
}

/// A page of hits
#[utoipa::path(
    post,
    path = "/v1/apps/{app}/users/{user}/search",
    operation_id = "owner_search",
    tag = "owner",
    params(("app" = String, Path, description = "The app"), ("user" = String, Path, description = "The user")),
    request_body = SearchQuery,
    responses((status = 200, description = "A page of hits", body = Page<SearchHit>), (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json"))
)]
pub(crate) async fn search(
    State(s): Svc,
    Path((app, user)): OwnerPath,
    body: Bytes,
) -> ApiResult<Response> {
    let query: SearchQuery = json_body(&body)?;
    Ok(ok(&s.service.search(&owner(&app, &user)?, &query).await?))
}

/// The session, shared state merged
#[utoipa::path(
    get,
    path = "/v1/apps/{app}/users/{user}/sessions/{id}",
    operation_id = "owner_get_session",
    tag = "owner",
    params(("app" = String, Path, description = "The app"), ("user" = String, Path, description = "The user"), ("id" = String, Path, description = "The session id")),
    responses((status = 200, description = "The session, shared state merged", body = Session, headers(("ETag" = String, description = "The session's version"))), (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json"))
)]
pub(crate) async fn get_session(
    State(s): Svc,
    Path((app, user, id)): SessionPath,
) -> ApiResult<Response> {
    let session = s.service.get(&owner(&app, &user)?, &id).await?;
    Ok((etag(session.version), ok(&session)).into_response())
}

/// The session, changed
#[utoipa::path(
    patch,
    path = "/v1/apps/{app}/users/{user}/sessions/{id}",
    operation_id = "owner_update",
    tag = "owner",
    params(("app" = String, Path, description = "The app"), ("user" = String, Path, description = "The user"), ("id" = String, Path, description = "The session id"), ("If-Match" = Option<String>, Header, nullable = false, description = "Apply only at this version (its ETag)")),
    request_body = SessionUpdate,
    responses((status = 200, description = "The session, changed", body = Session, headers(("ETag" = String, description = "The session's version"))), (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json"))
)]
pub(crate) async fn update(
    State(s): Svc,
    Path((app, user, id)): SessionPath,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let mut update: SessionUpdate = json_body(&body)?;
    if let Some(version) = if_match(&headers)? {
        update.expected_version = Some(version);
    }
    let session = s.service.update(&owner(&app, &user)?, &id, update).await?;
    Ok((etag(session.version), ok(&session)).into_response())
}

/// Deleted
#[utoipa::path(
    delete,
    path = "/v1/apps/{app}/users/{user}/sessions/{id}",
    operation_id = "owner_delete_session",
    tag = "owner",
    params(("app" = String, Path, description = "The app"), ("user" = String, Path, description = "The user"), ("id" = String, Path, description = "The session id")),
    responses((status = 204, description = "Deleted"), (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json"))
)]
pub(crate) async fn delete_session(
    State(s): Svc,
    Path((app, user, id)): SessionPath,
) -> ApiResult<Response> {
    s.service.delete(&owner(&app, &user)?, &id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The session, ended
#[utoipa::path(
    post,
    path = "/v1/apps/{app}/users/{user}/sessions/{id}/end",
    operation_id = "owner_end",
    tag = "owner",
    params(("app" = String, Path, description = "The app"), ("user" = String, Path, description = "The user"), ("id" = String, Path, description = "The session id")),
    responses((status = 200, description = "The session, ended", body = Session, headers(("ETag" = String, description = "The session's version"))), (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json"))
)]
pub(crate) async fn end(State(s): Svc, Path((app, user, id)): SessionPath) -> ApiResult<Response> {
    let session = s.service.end(&owner(&app, &user)?, &id).await?;
    Ok((etag(session.version), ok(&session)).into_response())
}

/// The session, writable again
#[utoipa::path(
    post,
    path = "/v1/apps/{app}/users/{user}/sessions/{id}/reopen",
    operation_id = "owner_reopen",
    tag = "owner",
    params(("app" = String, Path, description = "The app"), ("user" = String, Path, description = "The user"), ("id" = String, Path, description = "The session id")),
    responses((status = 200, description = "The session, writable again", body = Session, headers(("ETag" = String, description = "The session's version"))), (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json"))
)]
pub(crate) async fn reopen(
    State(s): Svc,
    Path((app, user, id)): SessionPath,
) -> ApiResult<Response> {
    let session = s.service.reopen(&owner(&app, &user)?, &id).await?;
    Ok((etag(session.version), ok(&session)).into_response())
}

/// What the append did
#[utoipa::path(
    post,
    path = "/v1/apps/{app}/users/{user}/sessions/{id}/events",
    operation_id = "owner_append",
    tag = "owner",
    params(("app" = String, Path, description = "The app"), ("user" = String, Path, description = "The user"), ("id" = String, Path, description = "The session id")),
    request_body = Vec<SessionEvent>,
    responses((status = 200, description = "What the append did", body = AppendOutcome, headers(("ETag" = String, description = "The session's version"))), (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json"))
)]
pub(crate) async fn append(
    State(s): Svc,
    Path((app, user, id)): SessionPath,
    body: Bytes,
) -> ApiResult<Response> {
    let mut events = event_batch(&body)?;
    SessionEvent::estimate_missing(&mut events, &session_core::HeuristicEstimator);
    let outcome = s
        .service
        .append_events(&owner(&app, &user)?, &id, events)
        .await?;
    Ok((etag(outcome.version), ok(&outcome)).into_response())
}

/// What the append did
#[utoipa::path(
    post,
    path = "/v1/apps/{app}/users/{user}/sessions/{id}/messages",
    operation_id = "owner_append_message",
    tag = "owner",
    params(("app" = String, Path, description = "The app"), ("user" = String, Path, description = "The user"), ("id" = String, Path, description = "The session id")),
    request_body = Message,
    responses((status = 200, description = "What the append did", body = AppendOutcome, headers(("ETag" = String, description = "The session's version"))), (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json"))
)]
pub(crate) async fn append_message(
    State(s): Svc,
    Path((app, user, id)): SessionPath,
    body: Bytes,
) -> ApiResult<Response> {
    let message: Message = json_body(&body)?;
    let outcome = s
        .service
        .append_message(&owner(&app, &user)?, &id, message)
        .await?;
    Ok((etag(outcome.version), ok(&outcome)).into_response())
}

/// A page of events
#[utoipa::path(
    get,
    path = "/v1/apps/{app}/users/{user}/sessions/{id}/events",
    operation_id = "owner_events",
    tag = "owner",
    params(("app" = String, Path, description = "The app"), ("user" = String, Path, description = "The user"), ("id" = String, Path, description = "The session id"), EventParams),
    responses((status = 200, description = "A page of events", body = Page<SessionEvent>), (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json"))
)]
pub(crate) async fn events(
    State(s): Svc,
    Path((app, user, id)): SessionPath,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let params: EventParams = query_params(query.as_deref())?;
    let filter = params.into_filter()?;
    Ok(ok(&s
        .service
        .events(&owner(&app, &user)?, &id, &filter)
        .await?))
}

/// The context as model messages
#[utoipa::path(
    get,
    path = "/v1/apps/{app}/users/{user}/sessions/{id}/messages",
    operation_id = "owner_messages",
    tag = "owner",
    params(("app" = String, Path, description = "The app"), ("user" = String, Path, description = "The user"), ("id" = String, Path, description = "The session id")),
    responses((status = 200, description = "The context as model messages", body = Vec<Message>), (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json"))
)]
pub(crate) async fn messages(
    State(s): Svc,
    Path((app, user, id)): SessionPath,
) -> ApiResult<Response> {
    Ok(ok(&s.service.messages(&owner(&app, &user)?, &id).await?))
}

/// Replaced
#[utoipa::path(
    put,
    path = "/v1/apps/{app}/users/{user}/sessions/{id}/context",
    operation_id = "owner_replace_context",
    tag = "owner",
    params(("app" = String, Path, description = "The app"), ("user" = String, Path, description = "The user"), ("id" = String, Path, description = "The session id"), ("If-Match" = String, Header, description = "The session's version as its ETag gave it (`\"7\"`)")),
    request_body = Vec<SessionEvent>,
    responses((status = 204, description = "Replaced", headers(("ETag" = String, description = "The session's version"))), (status = 412, description = "The session is at another version", body = Problem, content_type = "application/problem+json"), (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json"))
)]
pub(crate) async fn replace_context(
    State(s): Svc,
    Path((app, user, id)): SessionPath,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let expected = required_if_match(&headers)?;
    let owner = owner(&app, &user)?;
    let events = event_batch(&body)?;
    if s.service
        .replace_context(&owner, &id, events, expected)
        .await?
    {
        let session = s.service.get(&owner, &id).await?;
        Ok((StatusCode::NO_CONTENT, etag(session.version)).into_response())
    } else {
        let actual = s.service.get(&owner, &id).await?.version;
        let id = session_core::SessionId::new(id)?;
        Err(crate::problem::precondition_failed(&id, expected, actual))
    }
}

/// The session after the rewind
#[utoipa::path(
    post,
    path = "/v1/apps/{app}/users/{user}/sessions/{id}/rewind",
    operation_id = "owner_rewind",
    tag = "owner",
    params(("app" = String, Path, description = "The app"), ("user" = String, Path, description = "The user"), ("id" = String, Path, description = "The session id")),
    request_body = RewindBody,
    responses((status = 200, description = "The session after the rewind", body = Session, headers(("ETag" = String, description = "The session's version"))), (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json"))
)]
pub(crate) async fn rewind(
    State(s): Svc,
    Path((app, user, id)): SessionPath,
    body: Bytes,
) -> ApiResult<Response> {
    let body: RewindBody = json_body(&body)?;
    let session = s
        .service
        .rewind(&owner(&app, &user)?, &id, &body.invocation_id)
        .await?;
    Ok((etag(session.version), ok(&session)).into_response())
}

/// The fork
#[utoipa::path(
    post,
    path = "/v1/apps/{app}/users/{user}/sessions/{id}/fork",
    operation_id = "owner_fork",
    tag = "owner",
    params(("app" = String, Path, description = "The app"), ("user" = String, Path, description = "The user"), ("id" = String, Path, description = "The session id")),
    request_body = ForkBody,
    responses((status = 201, description = "The fork", body = Session, headers(("ETag" = String, description = "The session's version"))), (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json"))
)]
pub(crate) async fn fork(
    State(s): Svc,
    Path((app, user, id)): SessionPath,
    body: Bytes,
) -> ApiResult<Response> {
    let body: ForkBody = json_body(&body)?;
    let fork = s.service.fork(&owner(&app, &user)?, &id, &body.at).await?;
    Ok((etag(fork.version), json(StatusCode::CREATED, &fork)).into_response())
}

/// Model usage in total, per invocation and per model
#[utoipa::path(
    get,
    path = "/v1/apps/{app}/users/{user}/sessions/{id}/usage",
    operation_id = "owner_usage",
    tag = "owner",
    params(("app" = String, Path, description = "The app"), ("user" = String, Path, description = "The user"), ("id" = String, Path, description = "The session id")),
    responses((status = 200, description = "Model usage in total, per invocation and per model", body = UsageReport), (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json"))
)]
pub(crate) async fn usage(
    State(s): Svc,
    Path((app, user, id)): SessionPath,
) -> ApiResult<Response> {
    Ok(ok(&s.service.usage(&owner(&app, &user)?, &id).await?))
}
