//! Export and import as NDJSON streams, in the format of `agent-session
//! export` (a header line, then one complete session dump per line), so a
//! file from the command line goes into a server and back.

use std::collections::VecDeque;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use session_core::{
    ExportReader, ImportOutcome, Owner, Page, Session, SessionDump, SessionId, SessionQuery,
    SessionRepository, SessionService, EXPORT_FORMAT, EXPORT_VERSION,
};
use session_wire::{ImportBody, Problem, SessionListParams};

use crate::owner_path::{Failure, OwnerAt, OwnerParams, OwnerState};
use crate::problem::{json_body, query_params, ApiResult};
use crate::reply::ok;

/// The media type of an export stream.
pub const NDJSON: &str = "application/x-ndjson";

/// Sessions exported per page of the listing.
const PAGE: usize = 100;

/// Whose sessions an export reads: every one the query matches (the
/// store's view, for operators), or one owner's (through the service).
#[derive(Clone)]
enum Lister {
    Store(Arc<dyn SessionRepository>),
    Owner(Arc<dyn SessionService>, Owner),
}

impl Lister {
    async fn page(&self, query: SessionQuery) -> session_core::Result<Page<Session>> {
        match self {
            Self::Store(repo) => repo.list(&query).await,
            Self::Owner(service, owner) => service.list(owner, query).await,
        }
    }

    async fn dump(&self, id: &SessionId) -> session_core::Result<SessionDump> {
        match self {
            Self::Store(repo) => repo.export_session(id).await,
            Self::Owner(service, owner) => service.export(owner, id).await,
        }
    }
}

/// Where an export stream is.
struct Cursor {
    lister: Lister,
    query: SessionQuery,
    lines: VecDeque<Bytes>,
    done: bool,
}

impl Cursor {
    /// Fills `lines` with the next page's dumps; a session that fails to
    /// export alone (a corrupt row) is logged and left out.
    async fn fill(&mut self) -> session_core::Result<()> {
        let page = self.lister.page(self.query.clone()).await?;
        for session in &page.items {
            match self.lister.dump(&session.id).await {
                Ok(dump) => self.lines.push_back(line(&dump)),
                Err(e) => tracing::warn!(
                    session = %session.id,
                    kind = e.kind().as_str(),
                    "left out of the export"
                ),
            }
        }
        self.done = !page.has_more;
        self.query.page = self.query.page.saturating_add(1);
        Ok(())
    }
}

fn line(dump: &SessionDump) -> Bytes {
    let mut bytes = serde_json::to_vec(dump).unwrap_or_default();
    bytes.push(b'\n');
    Bytes::from(bytes)
}

/// The export stream: the header, then the dumps page by page.
fn export_stream(lister: Lister, query: SessionQuery) -> Response {
    let header_line =
        serde_json::json!({"format": EXPORT_FORMAT, "version": EXPORT_VERSION}).to_string() + "\n";
    let mut lines = VecDeque::new();
    lines.push_back(Bytes::from(header_line));
    let cursor = Cursor {
        lister,
        query: query.page(0, PAGE),
        lines,
        done: false,
    };
    let stream = futures::stream::unfold(cursor, |mut cursor| async move {
        loop {
            if let Some(next) = cursor.lines.pop_front() {
                return Some((Ok::<_, session_core::SessionError>(next), cursor));
            }
            if cursor.done {
                return None;
            }
            if let Err(e) = cursor.fill().await {
                // The status is sent: end the stream short, as a failed read.
                cursor.done = true;
                return Some((Err(e), cursor));
            }
        }
    });
    ([(header::CONTENT_TYPE, NDJSON)], Body::from_stream(stream)).into_response()
}

/// Every session the query matches, as an export stream.
#[utoipa::path(
    get,
    path = "/v1/export",
    operation_id = "store_export_all",
    tag = "store",
    params(SessionListParams),
    responses(
        (status = 200, description = "An export file: a header line, then one session dump per line", content_type = "application/x-ndjson", body = String),
        Failure
    )
)]
pub(crate) async fn export_all(
    State(repo): State<Arc<dyn SessionRepository>>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let params: SessionListParams = query_params(query.as_deref())?;
    let query = params.into_query()?;
    Ok(export_stream(Lister::Store(repo), query))
}

/// Every session of the user, as an export stream.
#[utoipa::path(
    get,
    path = "/v1/apps/{app}/users/{user}/export",
    operation_id = "owner_export",
    tag = "owner",
    params(OwnerParams),
    responses(
        (status = 200, description = "An export file: a header line, then one session dump per line", content_type = "application/x-ndjson", body = String),
        Failure
    )
)]
pub(crate) async fn export_owner(
    State(s): State<OwnerState>,
    OwnerAt(owner): OwnerAt,
) -> ApiResult<Response> {
    Ok(export_stream(
        Lister::Owner(s.service.clone(), owner),
        SessionQuery::new(),
    ))
}

/// What an NDJSON import did.
#[derive(Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ImportReport {
    /// Sessions written.
    pub imported: u64,
    /// Sessions the store already held at the same or a later version.
    pub unchanged: u64,
    /// Lines that were not imported, with why.
    pub failed: Vec<FailedLine>,
}

/// A line an import left out.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FailedLine {
    /// Its line number (the header is line 1).
    pub line: u64,
    /// Why.
    pub error: Problem,
}

/// Imports one dump (JSON), or an export file (`application/x-ndjson`).
#[utoipa::path(
    post,
    path = "/v1/import",
    operation_id = "store_import",
    tag = "store",
    request_body(content = SessionDump, description = "One session dump as JSON, or an export file as application/x-ndjson"),
    responses(
        (status = 200, description = "JSON: imported or unchanged; NDJSON: the counts and the lines left out", body = ImportBody),
        Failure
    )
)]
pub(crate) async fn import(
    State(repo): State<Arc<dyn SessionRepository>>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let ndjson = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(NDJSON));
    if !ndjson {
        let dump: SessionDump = json_body(&body)?;
        let outcome = repo.import_session(dump).await?;
        return Ok(ok(&ImportBody { outcome }));
    }
    let mut reader = ExportReader::new(body.as_ref())?;
    let mut report = ImportReport::default();
    while let Some(next) = reader.next() {
        let line = reader.line();
        let result = match next {
            Ok(dump) => repo.import_session(dump).await,
            Err(e) => Err(e),
        };
        match result {
            Ok(ImportOutcome::Imported) => report.imported = report.imported.saturating_add(1),
            Ok(ImportOutcome::Unchanged) => {
                report.unchanged = report.unchanged.saturating_add(1);
            }
            Err(e) if e.kind() == session_core::ErrorKind::Unavailable => return Err(e.into()),
            Err(e) => report.failed.push(FailedLine {
                line,
                error: Problem::from_error(&e),
            }),
        }
    }
    Ok(ok(&report))
}
