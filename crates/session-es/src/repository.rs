//! [`EsRepository`]: its parts, its connection options (the builder,
//! `es+http://` URLs), connecting, and the methods that are not the trait's.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use elasticsearch::auth::Credentials;
use elasticsearch::http::transport::{SingleNodeConnectionPool, TransportBuilder};
use session_core::{system_clock, Limits, SessionError, SharedClock};

use crate::client::Client;
use crate::engine::{TextField, TextFieldCell};
use crate::error::build_error;
use crate::events::EventDocs;
use crate::heads::Heads;
use crate::index::Refresh;
use crate::indices::Indices;
use crate::locks::LockStripes;
use crate::search::EventSearch;
use crate::state::SharedScopes;
use crate::view::Views;

/// A [`SessionRepository`](session_core::SessionRepository) on Elasticsearch 8 (or OpenSearch 2.15+).
///
/// See the crate docs for the document layout and consistency model. It is
/// composed of parts, each owning its handles: the indices, the session
/// heads, the event documents, the views and searches of events, the shared
/// state scopes and this process's write locks (clones share them).
#[derive(Clone)]
pub struct EsRepository {
    /// The three indices: creation, removal, the text field type.
    pub(crate) indices: Indices,
    /// The session head documents.
    pub(crate) heads: Heads,
    /// The event documents: writes and cleanup.
    pub(crate) events: EventDocs,
    /// Reads of one session's events.
    pub(crate) views: Views,
    /// Searches of events.
    pub(crate) event_search: EventSearch,
    /// The shared state documents.
    pub(crate) scopes: SharedScopes,
    /// This process's per-session write locks.
    pub(crate) locks: LockStripes,
    pub(crate) refresh: Refresh,
    pub(crate) clock: SharedClock,
    pub(crate) limits: Limits,
}

impl std::fmt::Debug for EsRepository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EsRepository")
            .field("prefix", &self.indices.prefix())
            .field("refresh", &self.refresh)
            .field("text_field", &self.indices.text_field().get())
            .finish_non_exhaustive()
    }
}

/// Options for connecting an [`EsRepository`].
#[derive(Clone)]
pub struct EsRepositoryBuilder {
    url: String,
    credentials: Option<Credentials>,
    prefix: String,
    refresh: Refresh,
    timeout: Duration,
    migrate: bool,
    clock: SharedClock,
    limits: Limits,
    text_field: TextField,
}

impl std::fmt::Debug for EsRepositoryBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EsRepositoryBuilder")
            .field("url", &self.url)
            .field("credentials", &self.credentials.as_ref().map(|_| "<set>"))
            .field("prefix", &self.prefix)
            .field("refresh", &self.refresh)
            .field("text_field", &self.text_field)
            .finish_non_exhaustive()
    }
}

/// Checks an index prefix: lowercase letters, digits, `.`, `_`, `-`, starting with a letter or digit.
fn validate_prefix(prefix: &str) -> session_core::Result<()> {
    let ok = !prefix.is_empty()
        && prefix.len() <= 100
        && prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
        && prefix
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(SessionError::invalid(
            "index prefix",
            format!(
                "{prefix:?} is not a valid prefix: use 1 to 100 lowercase letters, digits, \
                 `.`, `_` or `-`, starting with a letter or digit"
            ),
        ))
    }
}

impl EsRepositoryBuilder {
    /// The index prefix: `{prefix}-sessions`, `{prefix}-events`, `{prefix}-state` (default `agent-session`).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Basic authentication.
    pub fn basic_auth(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.credentials = Some(Credentials::Basic(user.into(), password.into()));
        self
    }

    /// API key authentication with the encoded key (`base64(id:key)`, as Kibana shows it).
    pub fn api_key(mut self, encoded: impl Into<String>) -> Self {
        self.credentials = Some(Credentials::EncodedApiKey(encoded.into()));
        self
    }

    /// When writes become visible to searches (default [`Refresh::Immediate`]).
    pub fn refresh(mut self, refresh: Refresh) -> Self {
        self.refresh = refresh;
        self
    }

    /// The timeout of each request (default 30 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The field type literal search uses when `connect` creates the events
    /// index (default [`TextField::Detect`]: `wildcard` where the engine has
    /// it). An existing index keeps its own, which `connect` reads.
    pub fn text_field(mut self, text_field: TextField) -> Self {
        self.text_field = text_field;
        self
    }

    /// Whether `connect` creates the index templates and indices (default yes).
    pub fn migrate(mut self, migrate: bool) -> Self {
        self.migrate = migrate;
        self
    }

    /// The clock used for expiry and activity times (tests inject a manual one).
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// The size limits enforced on writes and pages.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Builds the client and, unless turned off, runs [`EsRepository::migrate`].
    pub async fn connect(self) -> session_core::Result<EsRepository> {
        validate_prefix(&self.prefix)?;
        if self.limits.max_user_sessions.is_some() {
            // Elasticsearch writes one document at a time: nothing counts a
            // user's sessions atomically with a create.
            return Err(SessionError::Unsupported {
                backend: "elasticsearch",
                operation: "the sessions-per-user quota",
            });
        }
        let url = elasticsearch::http::Url::parse(&self.url).map_err(|e| {
            SessionError::invalid_because(
                "elasticsearch url",
                format!("{} is not usable", self.url),
                e,
            )
        })?;
        let mut builder = TransportBuilder::new(SingleNodeConnectionPool::new(url))
            .timeout(self.timeout)
            .enable_meta_header(false);
        if let Some(c) = self.credentials {
            builder = builder.auth(c);
        }
        let transport = builder.build().map_err(build_error)?;
        let client = Client::new(transport, self.timeout);
        let text_field = Arc::new(TextFieldCell::new(self.text_field));
        let indices = Indices::new(client, self.prefix, Arc::clone(&text_field));
        let repo = EsRepository {
            heads: Heads::new(indices.index("sessions"), self.refresh, self.clock.clone()),
            events: EventDocs::new(
                indices.index("events"),
                self.refresh,
                Arc::clone(&text_field),
            ),
            views: Views::new(indices.index("events"), Arc::clone(&text_field)),
            event_search: EventSearch::new(indices.index("events"), text_field),
            scopes: SharedScopes::new(indices.index("state"), self.refresh),
            locks: LockStripes::new(),
            indices,
            refresh: self.refresh,
            clock: self.clock,
            limits: self.limits,
        };
        if self.migrate {
            repo.migrate().await?;
        } else {
            repo.indices.read_text_field().await?;
        }
        Ok(repo)
    }
}

/// The parts of an `es+http://` URL: the server URL, credentials and options.
fn parse_url(url: &str) -> session_core::Result<EsRepositoryBuilder> {
    let rest = url
        .strip_prefix("es+")
        .or_else(|| url.strip_prefix("elasticsearch+"))
        .unwrap_or(url);
    let parsed = elasticsearch::http::Url::parse(rest).map_err(|e| {
        SessionError::invalid_because("elasticsearch url", format!("{url} is not a URL"), e)
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(SessionError::invalid(
            "elasticsearch url",
            format!("{url}: expected es+http:// or es+https://"),
        ));
    }
    let mut server = parsed.clone();
    server.set_query(None);
    server.set_fragment(None);
    let _ = server.set_username("");
    let _ = server.set_password(None);
    let mut b = EsRepository::builder(server.as_str());
    if !parsed.username().is_empty() {
        let decode = |s: &str| {
            percent_decode(s).map_err(|e| {
                SessionError::invalid_because(
                    "elasticsearch url",
                    "the credentials are not usable",
                    e,
                )
            })
        };
        b = b.basic_auth(
            decode(parsed.username())?,
            decode(parsed.password().unwrap_or_default())?,
        );
    }
    for (k, v) in parsed.query_pairs() {
        match k.as_ref() {
            "prefix" => b = b.prefix(v.into_owned()),
            "api_key" => b = b.api_key(v.into_owned()),
            "refresh" => {
                b = b.refresh(match v.as_ref() {
                    "true" | "immediate" => Refresh::Immediate,
                    "wait_for" => Refresh::WaitFor,
                    other => {
                        return Err(SessionError::invalid(
                            "elasticsearch url",
                            format!("refresh={other}: expected true or wait_for"),
                        ))
                    }
                });
            }
            "text_field" => {
                b = b.text_field(match v.as_ref() {
                    "detect" => TextField::Detect,
                    "wildcard" => TextField::Wildcard,
                    "keyword" => TextField::Keyword,
                    other => {
                        return Err(SessionError::invalid(
                            "elasticsearch url",
                            format!("text_field={other}: expected detect, wildcard or keyword"),
                        ))
                    }
                });
            }
            "timeout_ms" => {
                let ms: u64 = v.parse().map_err(|_| {
                    SessionError::invalid(
                        "elasticsearch url",
                        format!("timeout_ms={v}: not a number"),
                    )
                })?;
                b = b.timeout(Duration::from_millis(ms));
            }
            other => {
                return Err(SessionError::invalid(
                    "elasticsearch url",
                    format!(
                        "unknown option {other}; known: prefix, api_key, refresh, \
                         text_field, timeout_ms"
                    ),
                ))
            }
        }
    }
    Ok(b)
}

/// Decodes `%XX` escapes of URL user info.
fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .ok_or_else(|| "truncated % escape".to_owned())?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| format!("bad % escape %{hex}"))?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "not UTF-8".to_owned())
}

impl EsRepository {
    /// Options for the server at `url` (`http://host:9200`).
    pub fn builder(url: impl Into<String>) -> EsRepositoryBuilder {
        EsRepositoryBuilder {
            url: url.into(),
            credentials: None,
            prefix: "agent-session".into(),
            refresh: Refresh::default(),
            timeout: Duration::from_secs(30),
            migrate: true,
            clock: system_clock(),
            limits: Limits::default(),
            text_field: TextField::Detect,
        }
    }

    /// Connects from a URL: `es+http://[user:password@]host:9200[/?prefix=P&api_key=K&refresh=wait_for&text_field=keyword&timeout_ms=N]`
    /// (or `es+https://`); runs [`EsRepository::migrate`].
    pub async fn from_url(url: &str) -> session_core::Result<Self> {
        parse_url(url)?.connect().await
    }

    /// The builder a URL describes, for further options (clock, limits) before connecting.
    pub fn builder_from_url(url: &str) -> session_core::Result<EsRepositoryBuilder> {
        parse_url(url)
    }

    /// The index prefix.
    pub fn prefix(&self) -> &str {
        self.indices.prefix()
    }

    /// Creates (or updates) the index templates and creates the three
    /// indices if missing, then reads which text field type the events
    /// index has (see [`TextField`]). Safe to run concurrently and repeatedly.
    pub async fn migrate(&self) -> session_core::Result<()> {
        self.indices.migrate().await
    }

    /// Deletes the three indices and their templates (everything under the prefix).
    pub async fn drop_indices(&self) -> session_core::Result<()> {
        self.indices.drop_all().await
    }

    pub(crate) fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_give_server_credentials_and_options() {
        let b = parse_url(
            "es+https://elastic:p%40ss@es.example:9243/?prefix=tenant-a&refresh=wait_for",
        )
        .unwrap();
        assert_eq!(b.url, "https://es.example:9243/");
        assert_eq!(b.prefix, "tenant-a");
        assert_eq!(b.refresh, Refresh::WaitFor);
        match b.credentials {
            Some(Credentials::Basic(u, p)) => {
                assert_eq!((u.as_str(), p.as_str()), ("elastic", "p@ss"));
            }
            _ => panic!("expected basic credentials"),
        }
        let b = parse_url("es+http://localhost:9200?api_key=abc%3D").unwrap();
        assert!(matches!(b.credentials, Some(Credentials::EncodedApiKey(k)) if k == "abc="));
        assert!(parse_url("es+ftp://x").is_err());
        assert!(parse_url("es+http://localhost:9200?shards=3").is_err());
        assert!(parse_url("es+http://localhost:9200?refresh=false").is_err());
        let b = parse_url("es+http://localhost:9200?text_field=keyword").unwrap();
        assert_eq!(b.text_field, TextField::Keyword);
        assert!(parse_url("es+http://localhost:9200?text_field=ngram").is_err());
    }

    #[test]
    fn prefixes_must_be_valid_index_names() {
        assert!(validate_prefix("agent-session").is_ok());
        assert!(validate_prefix("t1.x_y").is_ok());
        for bad in ["", "Upper", "-lead", "a b", "a/b", "a*", &"x".repeat(101)] {
            assert!(validate_prefix(bad).is_err(), "{bad:?} accepted");
        }
    }
}
