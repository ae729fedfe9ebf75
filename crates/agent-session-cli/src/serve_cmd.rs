//! `serve`: the store over HTTP until the process is told to stop; and
//! `api-key`: a new key for it.

use std::io::Write;
use std::sync::Arc;

use agent_session::server::{ApiKey, ApiKeys, KeyRole, SessionServer, TlsConfig};
use agent_session::{AppName, SessionError, SessionRepository, UserId};
use anyhow::{Context, Result};

use crate::cli::{KeyRoleArg, ServeArgs};

/// Serves `repo` until Ctrl-C or SIGTERM, then drains: an operator's
/// tool, the server behind every HTTP and MCP caller (it checks their
/// API keys and runs the service for them).
pub(crate) async fn run(repo: Arc<dyn SessionRepository>, options: ServeArgs) -> Result<()> {
    let tls = match (&options.tls_cert, &options.tls_key) {
        (Some(cert), Some(key)) => Some(TlsConfig::from_pem_files(cert, key)?),
        _ => None,
    };
    let keys = match &options.api_keys {
        Some(path) => ApiKeys::from_file(path)?,
        None => ApiKeys::default(),
    };
    if keys.is_empty() && !options.listen.ip().is_loopback() && !options.insecure_no_auth {
        return Err(SessionError::invalid(
            "--listen",
            format!(
                "{} is reachable from other machines and no API keys are set: give \
                 --api-keys FILE (see `agent-session api-key`), or --insecure-no-auth",
                options.listen
            ),
        )
        .into());
    }
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("cannot listen on {}", options.listen))?;
    let addr = listener.local_addr().unwrap_or(options.listen);
    let auth = if keys.is_empty() {
        "no API keys: every caller is an operator".to_owned()
    } else {
        format!("{} API keys", keys.len())
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    crate::output::report(format_args!(
        "serving the {} store on {scheme}://{addr} (MCP at /mcp; {auth}; Ctrl-C stops)",
        repo.capabilities().backend
    ));
    let loopback_only = options.listen.ip().is_loopback();
    let mut server = SessionServer::new(repo)
        .with_api_keys(keys)
        .with_max_body_bytes(options.max_body_bytes)
        .with_request_timeout(options.request_timeout);
    if let Some(rate) = options.rate_limit {
        let burst = rate.saturating_mul(std::num::NonZeroU32::MIN.saturating_add(1));
        server = server.with_rate_limit(rate, burst);
    }
    let tools = session_mcp::SessionTools::per_request(server.service());
    let server = server.with_routes(session_mcp::streamable_http(tools, loopback_only));
    match &tls {
        Some(tls) => server.serve_tls(listener, tls, stop_signal()).await,
        None => server.serve(listener, stop_signal()).await,
    }
    .context("the server failed")
}

/// Prints a new secret and its key file line.
pub(crate) fn api_key(
    name: String,
    app: &str,
    role: KeyRoleArg,
    user: Option<UserId>,
    out: &mut dyn Write,
) -> Result<()> {
    if name.is_empty() || name.chars().any(char::is_whitespace) {
        return Err(SessionError::invalid("--name", "must be one word").into());
    }
    let app = if app == "*" {
        None
    } else {
        Some(AppName::new(app)?)
    };
    let role = match role {
        KeyRoleArg::Admin => KeyRole::Admin,
        KeyRoleArg::Agent => KeyRole::Agent,
    };
    if user.is_some() && role == KeyRole::Admin {
        return Err(SessionError::invalid("--user", "binds agent keys only").into());
    }
    let key = ApiKey {
        name,
        app,
        role,
        user,
    };
    let (secret, line) = ApiKeys::generate(&key)?;
    writeln!(out, "key:  {secret}")?;
    writeln!(out, "line: {line}")?;
    crate::output::report(format_args!(
        "add the line to the --api-keys file and give the key to its client (it is shown only now)"
    ));
    Ok(())
}

/// Completes on Ctrl-C, or on SIGTERM where there are signals.
async fn stop_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
    crate::output::report(format_args!("stopping: finishing the requests in flight"));
}
