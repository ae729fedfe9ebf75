//! The OpenAPI 3.1 document of the API, generated from the handlers'
//! annotations and served at `/openapi.json`; `docs/openapi.json` is the
//! checked-in copy a test keeps equal to it.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

/// The API's document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "agent-session",
        description = "Durable conversation sessions for LLM agents over HTTP: the store contract \
                       under /v1 (an operator's view) and the session service of one user of one \
                       app under /v1/apps/{app}/users/{user}. Errors are application/problem+json \
                       with the error's kind; a session's version is its ETag.",
        license(name = "MIT OR Apache-2.0"),
        version = "1"
    ),
    paths(
        crate::routes::capabilities,
        crate::routes::create,
        crate::routes::list,
        crate::routes::get_session,
        crate::routes::update,
        crate::routes::delete,
        crate::routes::version,
        crate::routes::append,
        crate::routes::events,
        crate::routes::replace_context,
        crate::routes::rewind,
        crate::routes::prune,
        crate::routes::fork,
        crate::routes::export,
        crate::transfer::import,
        crate::transfer::export_all,
        crate::transfer::export_owner,
        crate::routes::search,
        crate::routes::purge,
        crate::owner::erase,
        crate::owner::shared_state,
        crate::owner::create,
        crate::owner::list,
        crate::owner::resolve,
        crate::owner::reset,
        crate::owner::search,
        crate::owner::get_session,
        crate::owner::update,
        crate::owner::delete_session,
        crate::owner::end,
        crate::owner::reopen,
        crate::owner::append,
        crate::owner::append_message,
        crate::owner::events,
        crate::owner::messages,
        crate::owner::replace_context,
        crate::owner::rewind,
        crate::owner::pop,
        crate::owner::fork,
        crate::owner::usage,
        crate::compact::compact,
        crate::state_routes::get_state,
        crate::state_routes::patch_state,
    ),
    components(schemas(session_core::EventView, session_core::SyntheticFilter)),
    modifiers(&BearerKey),
    security(("api_key" = [])),
    tags(
        (name = "owner", description = "The session service for one user of one app"),
        (name = "store", description = "The store contract, call for call (operator keys)"),
    )
)]
pub struct ApiDoc;

/// Declares the `Authorization: Bearer` API key scheme.
struct BearerKey;

impl Modify for BearerKey {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API key from `agent-session api-key`, as `Authorization: Bearer ask_…`",
                    ))
                    .build(),
            ),
        );
    }
}

/// The document as pretty JSON with a final newline (what `/openapi.json`
/// serves and `docs/openapi.json` holds).
pub fn document() -> String {
    let mut json = ApiDoc::openapi().to_pretty_json().unwrap_or_default();
    json.push('\n');
    json
}
