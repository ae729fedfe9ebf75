//! `serve`: the store over HTTP until the process is told to stop.

use std::net::SocketAddr;
use std::sync::Arc;

use agent_session::server::SessionServer;
use agent_session::SessionRepository;
use anyhow::{Context, Result};

/// Serves `repo` on `listen` until Ctrl-C or SIGTERM, then drains.
pub(crate) async fn run(repo: Arc<dyn SessionRepository>, listen: SocketAddr) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener.local_addr().unwrap_or(listen);
    crate::output::report(format_args!(
        "serving the {} store on http://{addr} (Ctrl-C stops)",
        repo.capabilities().backend
    ));
    SessionServer::new(repo)
        .serve(listener, stop_signal())
        .await
        .context("the server failed")
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
