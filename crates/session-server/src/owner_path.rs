//! What every owner route parses first: the owner and the session its path
//! names, typed (`Owner`, `SessionId`) before the handler runs, and the
//! state the owner routes share (the service, nothing else).

use std::sync::Arc;

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use serde::Deserialize;
use session_core::{Owner, SessionError, SessionId, SessionService};
use session_wire::Problem;

use crate::problem::ApiError;

/// What the owner routes serve: the session service, the one door.
#[derive(Clone)]
pub(crate) struct OwnerState {
    pub(crate) service: Arc<dyn SessionService>,
}

/// The path of an owner route.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub(crate) struct OwnerParams {
    /// The app
    app: String,
    /// The user
    user: String,
}

/// The path of a session route.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub(crate) struct SessionParams {
    /// The app
    app: String,
    /// The user
    user: String,
    /// The session id
    id: String,
}

/// The owner a route's path names.
pub(crate) struct OwnerAt(pub(crate) Owner);

/// The owner and the session a route's path names.
pub(crate) struct SessionAt(pub(crate) Owner, pub(crate) SessionId);

/// A path that does not parse: `InvalidInput` naming it.
fn bad_path(e: &axum::extract::rejection::PathRejection) -> ApiError {
    SessionError::invalid("path", e.body_text()).into()
}

impl<S: Send + Sync> FromRequestParts<S> for OwnerAt {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(p) = Path::<OwnerParams>::from_request_parts(parts, state)
            .await
            .map_err(|e| bad_path(&e))?;
        Ok(Self(Owner::parse(&p.app, &p.user)?))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for SessionAt {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(p) = Path::<SessionParams>::from_request_parts(parts, state)
            .await
            .map_err(|e| bad_path(&e))?;
        Ok(Self(Owner::parse(&p.app, &p.user)?, SessionId::new(p.id)?))
    }
}

/// The response every route shares besides its own: an error, as a
/// problem document with its kind.
#[derive(utoipa::IntoResponses)]
#[response(
    status = "default",
    description = "An error: a problem document with its kind",
    content_type = "application/problem+json"
)]
#[allow(dead_code)] // a description for the OpenAPI document: errors are answered by `ApiError`
pub(crate) struct Failure(Problem);
