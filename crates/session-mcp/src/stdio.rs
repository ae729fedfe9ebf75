//! The tools over stdio, for one owner named when the server starts.

use rmcp::ServiceExt;
use session_core::SessionError;

use crate::tools::SessionTools;

/// Serves `tools` over stdin and stdout until the client closes them.
pub async fn serve_stdio(tools: SessionTools) -> Result<(), SessionError> {
    let running = tools
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| SessionError::unavailable("mcp", std::io::Error::other(e.to_string())))?;
    running
        .waiting()
        .await
        .map_err(|e| SessionError::unavailable("mcp", std::io::Error::other(e.to_string())))?;
    Ok(())
}
