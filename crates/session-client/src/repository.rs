//! [`RemoteRepository`]: connecting to a `session-server`, sending each call
//! of the store contract, and reading its answers and errors.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use reqwest::{header, Method, RequestBuilder, Response, StatusCode, Url};
use serde::de::DeserializeOwned;
use session_core::retention::Pruned;
use session_core::{
    AppName, AppendOutcome, Capabilities, Erased, EventFilter, ForkAt, ImportOutcome, NewSession,
    Page, Result, RewindOutcome, RewindTo, SearchHit, SearchQuery, Session, SessionDump,
    SessionError, SessionEvent, SessionId, SessionQuery, SessionRepository, SessionUpdate,
    SharedState, UserId,
};
use session_wire::{
    CapabilitiesBody, Deleted, EventParams, ForkRequest, ImportBody, PruneRequest, PurgeRequest,
    Purged, SessionListParams, VersionBody, PROBLEM_CONTENT_TYPE,
};

use crate::backend::BACKEND;
use crate::status;

/// The default time one call may take, connection included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The environment variable [`RemoteRepository::connect`] reads the API key from.
pub const API_KEY_ENV: &str = "AGENT_SESSION_API_KEY";

/// A store reached through a `session-server`.
#[derive(Debug, Clone)]
pub struct RemoteRepository {
    http: reqwest::Client,
    base: Url,
    capabilities: Capabilities,
}

/// A transport failure: a request the client cannot build (a URL longer
/// than an HTTP request may carry, from a long query) is `InvalidInput`;
/// unreachable, timed out or cut off is `Unavailable` (retrying may
/// succeed); anything else a `Backend` error.
fn transport(e: reqwest::Error) -> SessionError {
    if e.is_builder() {
        SessionError::invalid_because(
            "request URL",
            "the client cannot send it: a URL may hold at most 65534 bytes, \
             and the query (filter, keyword, metadata) makes it longer",
            e.without_url(),
        )
    } else if e.is_connect() || e.is_timeout() || e.is_request() || e.is_body() {
        SessionError::unavailable(BACKEND, e)
    } else {
        SessionError::backend(BACKEND, e)
    }
}

impl RemoteRepository {
    /// Connects to the server at `url` (`http://host:port`, or `https://`,
    /// with an optional path prefix) with the API key in
    /// `AGENT_SESSION_API_KEY` (if set), and reads what its store supports.
    /// The store routes need an operator's key (`*` admin) on a server with keys.
    pub async fn connect(url: &str) -> Result<Self> {
        let key = std::env::var(API_KEY_ENV).ok().filter(|k| !k.is_empty());
        Self::connect_with(url, key.as_deref(), DEFAULT_TIMEOUT).await
    }

    /// Connects with `api_key` (sent as `Authorization: Bearer`), each call
    /// limited to `timeout`.
    pub async fn connect_with(url: &str, api_key: Option<&str>, timeout: Duration) -> Result<Self> {
        let mut base = Url::parse(url).map_err(|e| {
            SessionError::invalid_because("server URL", format!("{url:?} is not a URL"), e)
        })?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(SessionError::invalid(
                "server URL",
                format!("{url:?} must be an http:// or https:// URL"),
            ));
        }
        base.set_query(None);
        base.set_fragment(None);
        let mut headers = header::HeaderMap::new();
        if let Some(key) = api_key {
            let mut value =
                header::HeaderValue::from_str(&format!("Bearer {key}")).map_err(|e| {
                    SessionError::invalid_because("API key", "must be printable ASCII", e)
                })?;
            value.set_sensitive(true);
            headers.insert(header::AUTHORIZATION, value);
        }
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .default_headers(headers)
            .build()
            .map_err(|e| SessionError::backend(BACKEND, e))?;
        let mut repo = Self {
            http,
            base,
            capabilities: Capabilities::basic(BACKEND),
        };
        let declared: CapabilitiesBody = repo
            .call(repo.request(Method::GET, &["v1", "capabilities"]))
            .await?;
        repo.capabilities = declared.declared_as(BACKEND);
        Ok(repo)
    }

    /// The URL of the path `segments` under the base, each segment escaped.
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    fn request(&self, method: Method, segments: &[&str]) -> RequestBuilder {
        self.http.request(method, self.url(segments))
    }

    fn session(&self, method: Method, id: &SessionId, tail: &[&str]) -> RequestBuilder {
        let mut segments = vec!["v1", "sessions", id.as_str()];
        segments.extend_from_slice(tail);
        self.request(method, &segments)
    }

    /// Sends `request`; a success response as it came, any other as its error.
    async fn send(&self, request: RequestBuilder) -> Result<Response> {
        let response = request.send().await.map_err(transport)?;
        if response.status().is_success() {
            return Ok(response);
        }
        Err(error_of(response).await)
    }

    /// Sends `request` and decodes the JSON answer.
    async fn call<T: DeserializeOwned>(&self, request: RequestBuilder) -> Result<T> {
        decode(self.send(request).await?).await
    }

    /// Sends a compare-and-swap `request`: `None` when the server answers
    /// 412 (the session is at another version).
    async fn swap(&self, request: RequestBuilder) -> Result<Option<Response>> {
        let response = request.send().await.map_err(transport)?;
        if response.status() == StatusCode::PRECONDITION_FAILED {
            return Ok(None);
        }
        if response.status().is_success() {
            return Ok(Some(response));
        }
        Err(error_of(response).await)
    }
}

/// The error an unsuccessful response reports: its problem document, or
/// the kind its status maps to when it has none (see [`status`]).
async fn error_of(response: Response) -> SessionError {
    let status = response.status();
    let path = response.url().path().to_owned();
    let is_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(PROBLEM_CONTENT_TYPE));
    match response.bytes().await {
        Ok(body) => status::error_of(status, &path, is_problem, &body),
        Err(e) => transport(e),
    }
}

/// The JSON body of `response` as a `T`.
async fn decode<T: DeserializeOwned>(response: Response) -> Result<T> {
    let body = response.bytes().await.map_err(transport)?;
    serde_json::from_slice(&body).map_err(|e| SessionError::serialization("server response", e))
}

/// An `If-Match` value naming `version`.
fn version_tag(version: u64) -> String {
    format!("\"{version}\"")
}

#[async_trait]
impl SessionRepository for RemoteRepository {
    fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    async fn create(&self, session: NewSession) -> Result<Session> {
        self.call(
            self.request(Method::POST, &["v1", "sessions"])
                .json(&session),
        )
        .await
    }

    async fn get(&self, id: &SessionId) -> Result<Session> {
        self.call(self.session(Method::GET, id, &[])).await
    }

    async fn update(&self, id: &SessionId, update: SessionUpdate) -> Result<Session> {
        self.call(self.session(Method::PATCH, id, &[]).json(&update))
            .await
    }

    async fn delete(&self, id: &SessionId) -> Result<bool> {
        let deleted: Deleted = self.call(self.session(Method::DELETE, id, &[])).await?;
        Ok(deleted.deleted)
    }

    async fn list(&self, query: &SessionQuery) -> Result<Page<Session>> {
        let params = SessionListParams::from_query(query);
        self.call(
            self.request(Method::GET, &["v1", "sessions"])
                .query(&params),
        )
        .await
    }

    async fn purge_expired(&self, now: DateTime<Utc>) -> Result<u64> {
        let purged: Purged = self
            .call(
                self.request(Method::POST, &["v1", "purge"])
                    .json(&PurgeRequest { now }),
            )
            .await?;
        Ok(purged.purged)
    }

    async fn append(&self, id: &SessionId, events: Vec<SessionEvent>) -> Result<AppendOutcome> {
        self.call(self.session(Method::POST, id, &["events"]).json(&events))
            .await
    }

    async fn events(&self, id: &SessionId, filter: &EventFilter) -> Result<Page<SessionEvent>> {
        let params = EventParams::from_filter(filter);
        self.call(self.session(Method::GET, id, &["events"]).query(&params))
            .await
    }

    async fn event_version(&self, id: &SessionId) -> Result<u64> {
        let body: VersionBody = self
            .call(self.session(Method::GET, id, &["version"]))
            .await?;
        Ok(body.version)
    }

    async fn replace_context(
        &self,
        id: &SessionId,
        events: Vec<SessionEvent>,
        expected_version: u64,
    ) -> Result<bool> {
        let request = self
            .session(Method::PUT, id, &["context"])
            .header(header::IF_MATCH, version_tag(expected_version))
            .json(&events);
        Ok(self.swap(request).await?.is_some())
    }

    async fn rewind_to(&self, id: &SessionId, to: &RewindTo) -> Result<RewindOutcome> {
        self.call(self.session(Method::POST, id, &["rewind"]).json(to))
            .await
    }

    async fn search(&self, query: &SearchQuery) -> Result<Page<SearchHit>> {
        self.call(self.request(Method::POST, &["v1", "search"]).json(query))
            .await
    }

    async fn shared_state(&self, app: &AppName, user_id: &UserId) -> Result<SharedState> {
        let path = [
            "v1",
            "apps",
            app.as_str(),
            "users",
            user_id.as_str(),
            "state",
        ];
        self.call(self.request(Method::GET, &path)).await
    }

    async fn export_session(&self, id: &SessionId) -> Result<SessionDump> {
        self.call(self.session(Method::GET, id, &["export"])).await
    }

    async fn import_session(&self, dump: SessionDump) -> Result<ImportOutcome> {
        let body: ImportBody = self
            .call(self.request(Method::POST, &["v1", "import"]).json(&dump))
            .await?;
        Ok(body.outcome)
    }

    async fn erase_user(&self, app: &AppName, user_id: &UserId) -> Result<Erased> {
        let path = ["v1", "apps", app.as_str(), "users", user_id.as_str()];
        self.call(self.request(Method::DELETE, &path)).await
    }

    async fn prune_events(
        &self,
        id: &SessionId,
        seqs: &[u64],
        expected_version: u64,
    ) -> Result<Option<Pruned>> {
        let request = self
            .session(Method::POST, id, &["prune"])
            .header(header::IF_MATCH, version_tag(expected_version))
            .json(&PruneRequest {
                seqs: seqs.to_vec(),
            });
        match self.swap(request).await? {
            Some(response) => decode(response).await.map(Some),
            None => Ok(None),
        }
    }

    async fn fork_session(
        &self,
        source: &SessionId,
        at: &ForkAt,
        id: SessionId,
        now: DateTime<Utc>,
    ) -> Result<Session> {
        let request = ForkRequest {
            at: at.clone(),
            id,
            now,
        };
        self.call(self.session(Method::POST, source, &["fork"]).json(&request))
            .await
    }
}
