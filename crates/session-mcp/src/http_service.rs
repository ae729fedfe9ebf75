//! The tools over streamable HTTP, as routes to mount into the server.

use std::sync::Arc;

use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::tools::SessionTools;

/// The route `/mcp`: the tools over streamable HTTP, stateless (each
/// request stands alone, so any server process behind a load balancer
/// answers it) with plain JSON answers. Mount it with
/// `SessionServer::with_routes`, so that each request carries its
/// `Caller`. `loopback_only` keeps rmcp's check that the `Host` header
/// names a loopback address (against DNS rebinding of a local server);
/// turn it off when the server is reached by name, behind API keys.
pub fn streamable_http(tools: SessionTools, loopback_only: bool) -> Router {
    let mut config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true);
    if !loopback_only {
        config = config.disable_allowed_hosts();
    }
    let service = StreamableHttpService::new(
        move || Ok(tools.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    Router::new().route_service("/mcp", service)
}
