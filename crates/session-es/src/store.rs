//! `EsRepository`: the session model on Elasticsearch documents.
//!
//! One head document per session (index `{prefix}-sessions`) is the commit
//! point: every write is a compare-and-swap of it (`if_seq_no` /
//! `if_primary_term`). The head holds the version, counters, state, the
//! context layout and the *pending batch*: the events of the last committed
//! write, verbatim. Event documents (`{prefix}-events`, id
//! `session|incarnation|seq`, written with `op_type=create`) are an index of
//! committed batches: the writer indexes its batch right after the commit,
//! and any later writer first re-indexes the pending batch it finds (create
//! is idempotent) before replacing it. Readers take the pending batch from
//! the head, so they never miss a committed event, crash or not.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use elasticsearch::auth::Credentials;
use elasticsearch::http::transport::{SingleNodeConnectionPool, TransportBuilder};
use elasticsearch::http::Method;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use session_core::state::{apply_delta, replay_deltas, ScopedDelta, SharedDelta};
use session_core::{
    check_session_id, check_unique_ids, prepare_events, system_clock, validate_id, validate_owner,
    AppendOutcome, Capabilities, EventFilter, EventView, ImportOutcome, Limits, NewSession, Page,
    RewindOutcome, SearchHit, SearchMode, SearchQuery, SearchScope, Session, SessionDump,
    SessionError, SessionEvent, SessionQuery, SessionRepository, SessionUpdate, SharedClock,
    SharedState, StateMap,
};

use crate::body::{self, micros, DocOwner};
use crate::client::{bulk_items, Client, ItemResult, BACKEND};

/// Hits fetched per `_search` round trip while collecting results.
const CHUNK: usize = 1000;
/// Sort values fetched per round trip while skipping to a deep page.
const SKIP_CHUNK: usize = 10_000;
/// Largest `_bulk` body sent at once (well under the default 100 MB `http.max_content_length`).
const BULK_BYTES: usize = 16 * 1024 * 1024;

/// Writers of one session in one process queue on one of these locks, so
/// compare-and-swap conflicts only happen between processes.
const LOCK_STRIPES: usize = 64;

/// When writes become visible to searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Refresh {
    /// `refresh=true`: the written shards refresh before the write returns (lowest latency).
    #[default]
    Immediate,
    /// `refresh=wait_for`: the write returns after the next scheduled refresh (cheaper for the cluster, up to `refresh_interval` slower).
    WaitFor,
}

impl Refresh {
    fn param(self) -> &'static str {
        match self {
            Self::Immediate => "true",
            Self::WaitFor => "wait_for",
        }
    }
}

/// What a lock stripe remembers: the last pending batch this process indexed
/// (session, incarnation, highest seq), so its next write need not index it again.
type Memo = Option<(String, String, u64)>;

fn batch_key(head: &Head) -> Option<(String, String, u64)> {
    head.pending
        .iter()
        .map(|p| p.seq)
        .max()
        .map(|seq| (head.session.id.clone(), head.inc.clone(), seq))
}

/// One event of the pending batch, as committed in the head.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pending {
    seq: u64,
    id: String,
    tokens: u32,
    body: String,
}

/// The head document's unindexed part: everything about a session but its events.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Head {
    session: Session,
    initial_state: StateMap,
    /// The incarnation: a fresh id per create or import, carried by every event document.
    inc: String,
    last_seq: u64,
    /// Rewound seq ranges (inclusive): their documents may linger until cleaned up.
    #[serde(default)]
    dead: Vec<[u64; 2]>,
    /// The context set by the last replace: `[seq, tokens]` in context order.
    #[serde(default)]
    base: Vec<[u64; 2]>,
    /// The context is `base` followed by every live event with a seq above `mark`.
    #[serde(default)]
    mark: u64,
    /// The last committed batch (its event documents may not be indexed yet).
    #[serde(default)]
    pending: Vec<Pending>,
}

impl Head {
    /// The highest seq whose event document is guaranteed indexed and visible to search.
    fn indexed_max(&self) -> u64 {
        self.pending
            .iter()
            .map(|p| p.seq)
            .min()
            .map_or(self.last_seq, |s| s - 1)
    }

    fn is_dead(&self, seq: u64) -> bool {
        self.dead.iter().any(|[a, b]| (*a..=*b).contains(&seq))
    }

    fn owner(&self) -> DocOwner<'_> {
        DocOwner {
            session_id: &self.session.id,
            inc: &self.inc,
            app: &self.session.app,
            user_id: &self.session.user_id,
        }
    }

    /// The pending events that are live, decoded.
    fn pending_events(&self) -> session_core::Result<Vec<SessionEvent>> {
        self.pending
            .iter()
            .filter(|p| !self.is_dead(p.seq))
            .map(|p| SessionEvent::decode_stored(&self.session.id, p.seq, &p.body))
            .collect()
    }

    /// The sessions-index document.
    fn doc(&self) -> session_core::Result<Value> {
        let s = &self.session;
        let head = serde_json::to_string(self)
            .map_err(|e| SessionError::serialization(format!("session {} head", s.id), e))?;
        let mut doc = json!({
            "sid": s.id,
            "app": s.app,
            "user_id": s.user_id,
            "status": s.status.as_str(),
            "inc": self.inc,
            "updated_us": micros(s.updated_at),
            "head": head,
        });
        if let Some(map) = doc.as_object_mut() {
            if let Some(k) = &s.key {
                map.insert("key".into(), json!(k));
            }
            if let Some(t) = s.expires_at {
                map.insert("expires_us".into(), json!(micros(t)));
            }
        }
        Ok(doc)
    }

    /// Reads a head from a sessions-index `_source`.
    fn from_source(id: &str, source: &Value) -> session_core::Result<Self> {
        let text = source
            .get("head")
            .and_then(Value::as_str)
            .ok_or_else(|| SessionError::serialization(format!("session {id}"), "no head"))?;
        serde_json::from_str(text)
            .map_err(|e| SessionError::serialization(format!("session {id} head"), e))
    }
}

/// A head as read, with the coordinates a compare-and-swap needs.
#[derive(Debug, Clone)]
struct Loaded {
    head: Head,
    seq_no: i64,
    primary_term: i64,
}

/// One search hit as returned.
#[derive(Debug, Clone)]
struct Hit {
    id: String,
    source: Value,
    sort: Value,
    score: Option<f64>,
}

fn parse_hits(body: &Value) -> session_core::Result<Vec<Hit>> {
    let hits = body
        .get("hits")
        .and_then(|h| h.get("hits"))
        .and_then(Value::as_array)
        .ok_or_else(|| SessionError::serialization("search response", "no hits.hits array"))?;
    Ok(hits
        .iter()
        .map(|h| Hit {
            id: h
                .get("_id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            source: h.get("_source").cloned().unwrap_or(Value::Null),
            sort: h.get("sort").cloned().unwrap_or(Value::Null),
            score: h.get("_score").and_then(Value::as_f64),
        })
        .collect())
}

/// The path of one document, its id percent-encoded (ids may hold `:` and `|`).
fn doc_path(index: &str, id: &str) -> String {
    let mut out = format!("{index}/_doc/");
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn u64_field(source: &Value, field: &str, what: &str) -> session_core::Result<u64> {
    source
        .get(field)
        .and_then(Value::as_u64)
        .ok_or_else(|| SessionError::serialization(what.to_owned(), format!("no `{field}`")))
}

/// Decodes an event document's `_source`.
fn decode_event(session_id: &str, source: &Value) -> session_core::Result<SessionEvent> {
    let seq = u64_field(source, "seq", &format!("session {session_id} event"))?;
    let body = source.get("body").and_then(Value::as_str).ok_or_else(|| {
        SessionError::serialization(format!("session {session_id} seq {seq}"), "no body")
    })?;
    SessionEvent::decode_stored(session_id, seq, body)
}

/// A view segment whose events come from a search, in seq order.
struct Remote {
    query: Value,
}

/// The parts of a view, in order: events already in hand, then searched ones, then in hand.
struct Parts {
    before: Vec<SessionEvent>,
    remote: Remote,
    after: Vec<SessionEvent>,
}

/// A [`SessionRepository`] on Elasticsearch 8 (or OpenSearch 2.15+).
///
/// See the crate docs for the document layout and consistency model.
#[derive(Clone)]
pub struct EsRepository {
    locks: Arc<[tokio::sync::Mutex<Memo>]>,
    client: Client,
    prefix: String,
    refresh: Refresh,
    clock: SharedClock,
    limits: Limits,
}

impl std::fmt::Debug for EsRepository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EsRepository")
            .field("prefix", &self.prefix)
            .field("refresh", &self.refresh)
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
}

impl std::fmt::Debug for EsRepositoryBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EsRepositoryBuilder")
            .field("url", &self.url)
            .field("credentials", &self.credentials.as_ref().map(|_| "<set>"))
            .field("prefix", &self.prefix)
            .field("refresh", &self.refresh)
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
        let url = elasticsearch::http::Url::parse(&self.url).map_err(|e| {
            SessionError::invalid("elasticsearch url", format!("{}: {e}", self.url))
        })?;
        let mut builder = TransportBuilder::new(SingleNodeConnectionPool::new(url))
            .timeout(self.timeout)
            .enable_meta_header(false);
        if let Some(c) = self.credentials {
            builder = builder.auth(c);
        }
        let transport = builder
            .build()
            .map_err(|e| SessionError::invalid("elasticsearch url", e.to_string()))?;
        let repo = EsRepository {
            locks: (0..LOCK_STRIPES)
                .map(|_| tokio::sync::Mutex::new(None))
                .collect(),
            client: Client::new(transport, self.timeout),
            prefix: self.prefix,
            refresh: self.refresh,
            clock: self.clock,
            limits: self.limits,
        };
        if self.migrate {
            repo.migrate().await?;
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
    let parsed = elasticsearch::http::Url::parse(rest)
        .map_err(|e| SessionError::invalid("elasticsearch url", format!("{url}: {e}")))?;
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
                SessionError::invalid("elasticsearch url", format!("credentials: {e}"))
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
                    format!("unknown option {other}; known: prefix, api_key, refresh, timeout_ms"),
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

/// The events of a batch after id resolution: which are new, and every event's seq.
struct Placed {
    seqs: Vec<u64>,
    tokens: Vec<u32>,
    new: Vec<Pending>,
    shared: SharedDelta,
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
        }
    }

    /// Connects from a URL: `es+http://[user:password@]host:9200[/?prefix=P&api_key=K&refresh=wait_for&timeout_ms=N]`
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
        &self.prefix
    }

    fn index(&self, which: &str) -> String {
        format!("{}-{which}", self.prefix)
    }

    fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    fn refresh_param(&self) -> (&'static str, String) {
        ("refresh", self.refresh.param().to_owned())
    }

    /// Creates (or updates) the index templates and creates the three
    /// indices if missing. Safe to run concurrently and repeatedly.
    pub async fn migrate(&self) -> session_core::Result<()> {
        for (which, mapping) in [
            ("sessions", body::sessions_mapping()),
            ("events", body::events_mapping()),
            ("state", body::state_mapping()),
        ] {
            let name = self.index(which);
            let template = body::index_template(&name, &mapping);
            self.client
                .send(
                    Method::Put,
                    &format!("_index_template/{name}"),
                    &[],
                    Some(template.to_string()),
                )
                .await?
                .success("")?;
            let reply = self
                .client
                .send(Method::Put, &name, &[], Some(mapping.to_string()))
                .await?;
            if !reply.ok() {
                let err = reply.error();
                if err.kind != "resource_already_exists_exception" {
                    return Err(err.into_session_error(""));
                }
            }
        }
        Ok(())
    }

    /// Deletes the three indices and their templates (everything under the prefix).
    pub async fn drop_indices(&self) -> session_core::Result<()> {
        for which in ["sessions", "events", "state"] {
            let name = self.index(which);
            for path in [name.clone(), format!("_index_template/{name}")] {
                let reply = self.client.send(Method::Delete, &path, &[], None).await?;
                if !reply.ok() && reply.status != 404 {
                    return Err(reply.error().into_session_error(""));
                }
            }
        }
        Ok(())
    }

    // ----- heads -----

    async fn load(&self, id: &str) -> session_core::Result<Option<Loaded>> {
        let reply = self
            .client
            .send(
                Method::Get,
                &doc_path(&self.index("sessions"), id),
                &[],
                None,
            )
            .await?;
        if reply.status == 404 && reply.body.get("found") == Some(&Value::Bool(false)) {
            return Ok(None);
        }
        let body = reply.success(id)?;
        Self::loaded(id, &body).map(Some)
    }

    fn loaded(id: &str, doc: &Value) -> session_core::Result<Loaded> {
        let what = format!("session {id}");
        let seq_no = doc
            .get("_seq_no")
            .and_then(Value::as_i64)
            .ok_or_else(|| SessionError::serialization(what.clone(), "no _seq_no"))?;
        let primary_term = doc
            .get("_primary_term")
            .and_then(Value::as_i64)
            .ok_or_else(|| SessionError::serialization(what.clone(), "no _primary_term"))?;
        let head = Head::from_source(id, doc.get("_source").unwrap_or(&Value::Null))?;
        Ok(Loaded {
            head,
            seq_no,
            primary_term,
        })
    }

    async fn live(&self, id: &str) -> session_core::Result<Loaded> {
        match self.load(id).await? {
            Some(l) if !l.head.session.is_expired_at(self.now()) => Ok(l),
            _ => Err(SessionError::session_not_found(id)),
        }
    }

    async fn writable(&self, id: &str) -> session_core::Result<Loaded> {
        match self.load(id).await? {
            Some(l) if l.head.session.is_expired_at(self.now()) => {
                Err(SessionError::Expired { id: id.to_owned() })
            }
            Some(l) => Ok(l),
            None => Err(SessionError::session_not_found(id)),
        }
    }

    /// Writes a head: compare-and-swap against `old`, or create when `old` is `None`.
    /// `false` when someone else wrote (or created) first.
    async fn put_head(&self, old: Option<&Loaded>, head: &Head) -> session_core::Result<bool> {
        let id = &head.session.id;
        let mut query = vec![self.refresh_param()];
        match old {
            Some(l) => {
                query.push(("if_seq_no", l.seq_no.to_string()));
                query.push(("if_primary_term", l.primary_term.to_string()));
            }
            None => query.push(("op_type", "create".to_owned())),
        }
        let reply = self
            .client
            .send(
                Method::Put,
                &doc_path(&self.index("sessions"), id),
                &query,
                Some(head.doc()?.to_string()),
            )
            .await?;
        if reply.status == 409 {
            return Ok(false);
        }
        reply.success(id).map(|_| true)
    }

    /// Commits `new` over `old`: first makes sure `old`'s pending batch is
    /// indexed (it is about to leave the head), then swaps.
    async fn commit(&self, memo: &Memo, old: &Loaded, new: &Head) -> session_core::Result<bool> {
        if !old.head.pending.is_empty() && *memo != batch_key(&old.head) {
            self.index_pending(&old.head).await?;
        }
        self.put_head(Some(old), new).await
    }

    /// After a commit: the shared scopes, then the batch's event documents.
    /// The write is already durable; a failure here is repaired by the next
    /// write (documents) or reported (shared scopes).
    async fn after_commit(
        &self,
        memo: &mut Memo,
        head: &Head,
        shared: &SharedDelta,
    ) -> session_core::Result<()> {
        self.apply_shared(&head.session.app, &head.session.user_id, shared)
            .await?;
        match self.index_pending(head).await {
            Ok(()) => *memo = batch_key(head),
            Err(e) => {
                tracing::warn!(
                    backend = BACKEND,
                    session_id = %head.session.id,
                    error = %e,
                    "committed batch not indexed yet; the next write of the session indexes it"
                );
            }
        }
        Ok(())
    }

    /// Indexes the pending batch of `head` (create: documents already there are kept).
    async fn index_pending(&self, head: &Head) -> session_core::Result<()> {
        let mut docs = Vec::with_capacity(head.pending.len());
        for p in &head.pending {
            let e = SessionEvent::decode_stored(&head.session.id, p.seq, &p.body)?;
            docs.push((p.seq, body::event_doc(head.owner(), p.seq, &e, &p.body)?));
        }
        self.create_events(head, docs).await
    }

    /// Creates event documents in `_bulk` requests of bounded size.
    async fn create_events(
        &self,
        head: &Head,
        docs: Vec<(u64, Value)>,
    ) -> session_core::Result<()> {
        let index = self.index("events");
        let mut existed = false;
        let mut body = String::new();
        let flush = |body: &mut String| std::mem::take(body);
        let mut batches = Vec::new();
        for (seq, doc) in docs {
            let id = body::event_doc_id(&head.session.id, &head.inc, seq);
            body::bulk_line(&mut body, "create", &index, &id, Some(&doc));
            if body.len() >= BULK_BYTES {
                batches.push(flush(&mut body));
            }
        }
        if !body.is_empty() {
            batches.push(flush(&mut body));
        }
        for b in batches {
            let items = self.bulk(b, &head.session.id).await?;
            for item in items {
                match item {
                    ItemResult::Done => {}
                    ItemResult::Exists => existed = true,
                    ItemResult::Failed(e) => return Err(e.into_session_error(&head.session.id)),
                }
            }
        }
        if existed {
            // Another writer created them: make sure its documents are searchable before we go on.
            self.client
                .send(Method::Post, &format!("{index}/_refresh"), &[], None)
                .await?
                .success(&head.session.id)?;
        }
        Ok(())
    }

    async fn bulk(&self, body: String, session_id: &str) -> session_core::Result<Vec<ItemResult>> {
        let reply = self
            .client
            .send(Method::Post, "_bulk", &[self.refresh_param()], Some(body))
            .await?;
        let body = reply.success(session_id)?;
        bulk_items(&body)
    }

    /// Deletes documents matching `query` from an index (best effort: used for cleanup only).
    async fn delete_by_query(&self, which: &str, query: Value) {
        let result = self
            .client
            .send(
                Method::Post,
                &format!("{}/_delete_by_query", self.index(which)),
                &[
                    ("conflicts", "proceed".to_owned()),
                    ("refresh", "true".to_owned()),
                ],
                Some(json!({ "query": query }).to_string()),
            )
            .await
            .and_then(|r| r.success(""));
        if let Err(e) = result {
            tracing::warn!(backend = BACKEND, error = %e, "cleanup of unreachable documents failed; they stay hidden");
        }
    }

    /// Deletes a session's head by compare-and-swap if `still` holds for the
    /// current head (re-read after every lost race), then its documents.
    /// Whether this call deleted it.
    async fn delete_head(
        &self,
        id: &str,
        still: impl Fn(&Head) -> bool,
    ) -> session_core::Result<bool> {
        let mut attempt = 0;
        loop {
            Self::backoff(&mut attempt).await;
            let Some(cur) = self.load(id).await? else {
                return Ok(false);
            };
            if !still(&cur.head) {
                return Ok(false);
            }
            let reply = self
                .client
                .send(
                    Method::Delete,
                    &doc_path(&self.index("sessions"), id),
                    &[
                        ("if_seq_no", cur.seq_no.to_string()),
                        ("if_primary_term", cur.primary_term.to_string()),
                        self.refresh_param(),
                    ],
                    None,
                )
                .await?;
            match reply.status {
                409 => {}
                404 => return Ok(false),
                _ => {
                    reply.success(id)?;
                    self.drop_incarnation(id, &cur.head.inc).await;
                    return Ok(true);
                }
            }
        }
    }

    /// Removes the event documents of an incarnation (after a delete or a re-create).
    async fn drop_incarnation(&self, session_id: &str, inc: &str) {
        self.delete_by_query(
            "events",
            json!({"bool": {"filter": [
                {"term": {"session_id": session_id}},
                {"term": {"inc": inc}}
            ]}}),
        )
        .await;
    }

    // ----- shared scopes -----

    /// `u|app|user` or `a|app`, with `|` inside a name escaped as `%7C`
    /// (names may hold `|` but never `%`), so two owners never share a
    /// document; names without `|` keep the id they always had.
    fn state_doc_id(app: &str, user_id: Option<&str>) -> String {
        let esc = |s: &str| s.replace('|', "%7C");
        match user_id {
            Some(u) => format!("u|{}|{}", esc(app), esc(u)),
            None => format!("a|{}", esc(app)),
        }
    }

    async fn read_state_doc(
        &self,
        doc_id: &str,
    ) -> session_core::Result<Option<(StateMap, i64, i64)>> {
        let reply = self
            .client
            .send(
                Method::Get,
                &doc_path(&self.index("state"), doc_id),
                &[],
                None,
            )
            .await?;
        if reply.status == 404 && reply.body.get("found") == Some(&Value::Bool(false)) {
            return Ok(None);
        }
        let body = reply.success("")?;
        let what = || format!("shared state {doc_id}");
        let text = body
            .get("_source")
            .and_then(|s| s.get("json"))
            .and_then(Value::as_str)
            .ok_or_else(|| SessionError::serialization(what(), "no json"))?;
        let map = session_core::state::decode_state(text, what)?;
        let seq_no = body.get("_seq_no").and_then(Value::as_i64).unwrap_or(-1);
        let term = body
            .get("_primary_term")
            .and_then(Value::as_i64)
            .unwrap_or(-1);
        Ok(Some((map, seq_no, term)))
    }

    /// Applies (`replace = false`) or sets (`replace = true`) one shared scope, with a CAS loop.
    async fn write_state_doc(
        &self,
        doc_id: &str,
        delta: &StateMap,
        replace: bool,
    ) -> session_core::Result<()> {
        let mut attempt = 0;
        loop {
            Self::backoff(&mut attempt).await;
            let current = self.read_state_doc(doc_id).await?;
            let mut query = vec![self.refresh_param()];
            let mut map = if let Some((map, seq_no, term)) = current {
                query.push(("if_seq_no", seq_no.to_string()));
                query.push(("if_primary_term", term.to_string()));
                map
            } else {
                query.push(("op_type", "create".to_owned()));
                StateMap::new()
            };
            if replace {
                map = delta.clone();
            } else {
                apply_delta(&mut map, delta);
            }
            let json = session_core::state::encode_state(&map, "shared state")?;
            let reply = self
                .client
                .send(
                    Method::Put,
                    &doc_path(&self.index("state"), doc_id),
                    &query,
                    Some(json!({ "json": json }).to_string()),
                )
                .await?;
            if reply.status == 409 {
                continue;
            }
            reply.success("")?;
            return Ok(());
        }
    }

    async fn apply_shared(
        &self,
        app: &str,
        user_id: &str,
        d: &SharedDelta,
    ) -> session_core::Result<()> {
        if !d.app.is_empty() {
            self.write_state_doc(&Self::state_doc_id(app, None), &d.app, false)
                .await?;
        }
        if !d.user.is_empty() {
            self.write_state_doc(&Self::state_doc_id(app, Some(user_id)), &d.user, false)
                .await?;
        }
        Ok(())
    }

    // ----- searches -----

    async fn search_page(
        &self,
        which: &str,
        request: &Value,
        session_id: &str,
    ) -> session_core::Result<Vec<Hit>> {
        let reply = self
            .client
            .send(
                Method::Post,
                &format!("{}/_search", self.index(which)),
                &[],
                Some(request.to_string()),
            )
            .await?;
        parse_hits(&reply.success(session_id)?)
    }

    /// Collects hits of `query` in `sort` order: skips the first `skip` hits
    /// for which `keep` holds (fetching `source` without the event bodies),
    /// then returns up to `take` more. Pages with `search_after`, never `from`.
    #[allow(clippy::too_many_arguments)]
    async fn collect(
        &self,
        which: &str,
        query: &Value,
        sort: &Value,
        source: &Value,
        mut skip: usize,
        take: usize,
        keep: &mut (dyn FnMut(&Hit) -> bool + Send),
        session_id: &str,
    ) -> session_core::Result<Vec<Hit>> {
        let light = match source.as_array() {
            Some(fields) => Value::Array(
                fields
                    .iter()
                    .filter(|f| *f != "body" && *f != "head")
                    .cloned()
                    .collect(),
            ),
            None => source.clone(),
        };
        let mut out = Vec::new();
        let mut after: Option<Value> = None;
        while out.len() < take {
            // While skipping, never fetch past the skip: the page itself is fetched with bodies.
            let (size, src) = if skip > 0 {
                (skip.min(SKIP_CHUNK), &light)
            } else {
                ((take - out.len()).clamp(1, CHUNK), source)
            };
            let req = body::search_request(query, sort, size, after.as_ref(), src);
            let hits = self.search_page(which, &req, session_id).await?;
            let n = hits.len();
            for h in hits {
                after = Some(h.sort.clone());
                if !keep(&h) {
                    continue;
                }
                if skip > 0 {
                    skip -= 1;
                } else {
                    out.push(h);
                }
            }
            if n < size {
                break;
            }
        }
        Ok(out)
    }

    /// Events of one session's view part, `skip` then `take`, in seq order (or reversed).
    async fn remote_events(
        &self,
        head: &Head,
        remote: &Remote,
        reverse: bool,
        skip: usize,
        take: usize,
    ) -> session_core::Result<Vec<SessionEvent>> {
        if take == 0 {
            return Ok(Vec::new());
        }
        let sort = if reverse {
            json!([{"seq": "desc"}])
        } else {
            json!([{"seq": "asc"}])
        };
        let id = &head.session.id;
        let hits = self
            .collect(
                "events",
                &remote.query,
                &sort,
                &json!(["seq", "body"]),
                skip,
                take,
                &mut |_| true,
                id,
            )
            .await?;
        hits.iter().map(|h| decode_event(id, &h.source)).collect()
    }

    /// Cuts the window a filter asks for out of `parts`.
    async fn window(
        &self,
        head: &Head,
        parts: Parts,
        filter: &EventFilter,
    ) -> session_core::Result<Page<SessionEvent>> {
        let m = filter.matcher();
        let before: Vec<SessionEvent> = parts.before.into_iter().filter(|e| m.matches(e)).collect();
        let after: Vec<SessionEvent> = parts.after.into_iter().filter(|e| m.matches(e)).collect();
        if let Some(n) = filter.last_n {
            // The newest n: walk the parts backwards.
            let mut newest: Vec<SessionEvent> = after.iter().rev().take(n).cloned().collect();
            let want = n - newest.len();
            let remote = self
                .remote_events(head, &parts.remote, true, 0, want)
                .await?;
            newest.extend(remote);
            let want = n.saturating_sub(newest.len());
            newest.extend(before.iter().rev().take(want).cloned());
            newest.reverse();
            return Ok(Page::paginate(newest, filter.page, filter.page_size));
        }
        let Some(offset) = filter.page.checked_mul(filter.page_size) else {
            return Ok(Page::empty(filter.page, filter.page_size));
        };
        let take = filter.page_size.saturating_add(1);
        let mut items: Vec<SessionEvent> = before.iter().skip(offset).take(take).cloned().collect();
        let mut skip = offset.saturating_sub(before.len());
        if items.len() < take {
            let remote = self
                .remote_events(head, &parts.remote, false, skip, take - items.len())
                .await?;
            if remote.is_empty() && skip > 0 {
                // Everything remote was skipped (or there was nothing): count it to skip into `after`.
                let counted = self
                    .count_events(&parts.remote.query, &head.session.id)
                    .await?;
                skip = skip.saturating_sub(counted);
            } else {
                skip = 0;
            }
            items.extend(remote);
        }
        if items.len() < take {
            items.extend(after.iter().skip(skip).take(take - items.len()).cloned());
        }
        Ok(Page::from_overfetch(items, filter.page, filter.page_size))
    }

    async fn count_events(&self, query: &Value, session_id: &str) -> session_core::Result<usize> {
        let reply = self
            .client
            .send(
                Method::Post,
                &format!("{}/_count", self.index("events")),
                &[],
                Some(json!({ "query": query }).to_string()),
            )
            .await?;
        let body = reply.success(session_id)?;
        Ok(body
            .get("count")
            .and_then(Value::as_u64)
            .map_or(0, |c| usize::try_from(c).unwrap_or(usize::MAX)))
    }

    /// Reads event documents by seq (realtime `_mget`), in the given order; missing ones are an error.
    async fn events_by_seq(
        &self,
        head: &Head,
        seqs: &[u64],
    ) -> session_core::Result<Vec<SessionEvent>> {
        let id = &head.session.id;
        let mut out = Vec::with_capacity(seqs.len());
        for chunk in seqs.chunks(CHUNK) {
            let ids: Vec<String> = chunk
                .iter()
                .map(|s| body::event_doc_id(id, &head.inc, *s))
                .collect();
            let reply = self
                .client
                .send(
                    Method::Post,
                    &format!("{}/_mget", self.index("events")),
                    &[],
                    Some(json!({ "ids": ids }).to_string()),
                )
                .await?;
            let body = reply.success(id)?;
            let docs = body
                .get("docs")
                .and_then(Value::as_array)
                .ok_or_else(|| SessionError::serialization("mget response", "no docs array"))?;
            for (doc, seq) in docs.iter().zip(chunk) {
                if doc.get("found") != Some(&Value::Bool(true)) {
                    return Err(SessionError::serialization(
                        format!("session {id} seq {seq}"),
                        "the context names an event whose document is missing",
                    ));
                }
                out.push(decode_event(
                    id,
                    doc.get("_source").unwrap_or(&Value::Null),
                )?);
            }
        }
        Ok(out)
    }

    /// The parts of a view of one session, with the filter's criteria in the remote query.
    async fn view_parts(
        &self,
        head: &Head,
        view: EventView,
        filter: &EventFilter,
    ) -> session_core::Result<Parts> {
        let pending = head.pending_events()?;
        let after_seq = match view {
            EventView::Archive => 0,
            EventView::Context => head.mark,
        };
        let (mut filter_clauses, must_not) = body::session_events(
            &head.session.id,
            &head.inc,
            after_seq,
            head.indexed_max(),
            &head.dead,
        );
        filter_clauses.extend(body::filter_clauses(filter));
        let remote = Remote {
            query: body::bool_query(filter_clauses, must_not),
        };
        let (before, after) = match view {
            EventView::Archive => (Vec::new(), pending),
            EventView::Context => {
                let mut by_seq: HashMap<u64, SessionEvent> =
                    pending.into_iter().map(|e| (e.seq, e)).collect();
                let wanted: Vec<u64> = head
                    .base
                    .iter()
                    .map(|[s, _]| *s)
                    .filter(|s| !by_seq.contains_key(s))
                    .collect();
                for e in self.events_by_seq(head, &wanted).await? {
                    by_seq.insert(e.seq, e);
                }
                let before = head
                    .base
                    .iter()
                    .filter_map(|[s, _]| by_seq.get(s).cloned())
                    .collect();
                let mut after: Vec<SessionEvent> =
                    by_seq.into_values().filter(|e| e.seq > head.mark).collect();
                after.sort_by_key(|e| e.seq);
                (before, after)
            }
        };
        Ok(Parts {
            before,
            remote,
            after,
        })
    }

    /// Every live event of a session, in seq order.
    async fn all_events(&self, head: &Head) -> session_core::Result<Vec<SessionEvent>> {
        let parts = self
            .view_parts(head, EventView::Archive, &EventFilter::archive())
            .await?;
        let mut out = self
            .remote_events(head, &parts.remote, false, 0, usize::MAX)
            .await?;
        out.extend(parts.after);
        Ok(out)
    }

    /// Which of `ids` the session already holds: id → (seq, tokens).
    async fn known_ids(
        &self,
        head: &Head,
        ids: &[&str],
    ) -> session_core::Result<HashMap<String, (u64, u32)>> {
        let mut known = HashMap::new();
        for p in &head.pending {
            if !head.is_dead(p.seq) {
                known.insert(p.id.clone(), (p.seq, p.tokens));
            }
        }
        let wanted: Vec<&str> = ids
            .iter()
            .copied()
            .filter(|i| !known.contains_key(*i))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        if wanted.is_empty() || head.indexed_max() == 0 {
            return Ok(known);
        }
        let (mut filter, must_not) = body::session_events(
            &head.session.id,
            &head.inc,
            0,
            head.indexed_max(),
            &head.dead,
        );
        filter.push(json!({"terms": {"event_id": wanted}}));
        let hits = self
            .collect(
                "events",
                &body::bool_query(filter, must_not),
                &json!([{"seq": "asc"}]),
                &json!(["seq", "event_id", "tokens"]),
                0,
                wanted.len(),
                &mut |_| true,
                &head.session.id,
            )
            .await?;
        for h in hits {
            let what = format!("session {} event", head.session.id);
            let seq = u64_field(&h.source, "seq", &what)?;
            let tokens = u32::try_from(u64_field(&h.source, "tokens", &what)?).unwrap_or(u32::MAX);
            let eid = h
                .source
                .get("event_id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            known.insert(eid, (seq, tokens));
        }
        Ok(known)
    }

    /// Resolves a batch against the session: existing ids keep their seq, new events get the next seqs
    /// and their state deltas (session part into `head`, shared parts collected).
    async fn place(
        &self,
        head: &mut Head,
        events: &[SessionEvent],
        bodies: &[String],
    ) -> session_core::Result<Placed> {
        let ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
        let mut known = self.known_ids(head, &ids).await?;
        let mut placed = Placed {
            seqs: Vec::with_capacity(events.len()),
            tokens: Vec::with_capacity(events.len()),
            new: Vec::new(),
            shared: SharedDelta::default(),
        };
        for (e, b) in events.iter().zip(bodies) {
            if let Some(&(seq, tokens)) = known.get(&e.id) {
                placed.seqs.push(seq);
                placed.tokens.push(tokens);
                continue;
            }
            // The head is written only after this loop: an error leaves the store as it was.
            head.last_seq = session_core::next_seq(head.last_seq)?;
            let seq = head.last_seq;
            if let Some(delta) = &e.state_delta {
                placed.shared.apply_event(&mut head.session.state, delta);
            }
            head.session.event_count = head.session.event_count.saturating_add(1);
            known.insert(e.id.clone(), (seq, e.token_estimate));
            placed.seqs.push(seq);
            placed.tokens.push(e.token_estimate);
            placed.new.push(Pending {
                seq,
                id: e.id.clone(),
                tokens: e.token_estimate,
                body: b.clone(),
            });
        }
        Ok(placed)
    }

    /// Serializes this process's writers of one session (other processes are kept out by the CAS).
    async fn lock(&self, id: &str) -> tokio::sync::MutexGuard<'_, Memo> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        id.hash(&mut h);
        let i = usize::try_from(h.finish() % LOCK_STRIPES as u64).unwrap_or(0);
        self.locks[i].lock().await
    }

    /// Called at the top of every compare-and-swap loop: sleeps (with jitter) from the second round on.
    async fn backoff(attempt: &mut u32) {
        if *attempt > 0 {
            let jitter = u64::try_from(uuid::Uuid::new_v4().as_u128() % 1000).unwrap_or(0);
            let micros = (250u64 << *attempt) + jitter * u64::from(*attempt);
            tokio::time::sleep(Duration::from_micros(micros)).await;
        }
        *attempt = (*attempt + 1).min(8);
    }

    /// Bumps the version (a typed error at `MAX_VERSION`) and the activity time.
    fn touch(&self, head: &mut Head) -> session_core::Result<()> {
        head.session.version = session_core::next_version(head.session.version)?;
        head.session.updated_at = head.session.updated_at.max(self.now());
        Ok(())
    }

    /// Every session document matching `query`, in id order, with `source` fields.
    async fn all_sessions(&self, query: &Value, source: &Value) -> session_core::Result<Vec<Hit>> {
        self.collect(
            "sessions",
            query,
            &json!([{"sid": "asc"}]),
            source,
            0,
            usize::MAX,
            &mut |_| true,
            "",
        )
        .await
    }

    /// Live sessions of one owner (for cross-session search).
    async fn owner_heads(&self, app: &str, user_id: &str) -> session_core::Result<Vec<Head>> {
        let q = session_core::SessionQuery::new().app(app).user(user_id);
        let query = body::sessions_query(&q, micros(self.now()));
        let hits = self.all_sessions(&query, &json!(["head"])).await?;
        hits.iter()
            .map(|h| Head::from_source(&h.id, &h.source))
            .collect()
    }

    async fn search_literal_all(
        &self,
        app: &str,
        user_id: &str,
        query: &SearchQuery,
    ) -> session_core::Result<Page<SearchHit>> {
        let heads = self.owner_heads(app, user_id).await?;
        if heads.is_empty() {
            return Ok(Page::empty(query.page, query.page_size));
        }
        let Some(offset) = query.page.checked_mul(query.page_size) else {
            return Ok(Page::empty(query.page, query.page_size));
        };
        let needle = session_core::fold_case(&query.text);
        let mut extra: Vec<SessionEvent> = Vec::new();
        for h in &heads {
            for e in h.pending_events()? {
                if session_core::contains_folded(&e.message.search_text(), &needle) {
                    extra.push(e);
                }
            }
        }
        let by_inc: HashMap<&str, &Head> = heads.iter().map(|h| (h.inc.as_str(), h)).collect();
        let incs: Vec<&str> = by_inc.keys().copied().collect();
        let q = body::bool_query(
            vec![
                json!({"term": {"app": app}}),
                json!({"term": {"user_id": user_id}}),
                json!({"terms": {"inc": incs}}),
                body::literal_text(&query.text),
            ],
            Vec::new(),
        );
        let want = offset.saturating_add(query.page_size).saturating_add(1);
        let mut keep = |h: &Hit| {
            let inc = h
                .source
                .get("inc")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let seq = h.source.get("seq").and_then(Value::as_u64).unwrap_or(0);
            by_inc
                .get(inc)
                .is_some_and(|head| seq <= head.indexed_max() && !head.is_dead(seq))
        };
        let hits = self
            .collect(
                "events",
                &q,
                &json!([{"ts_us": "asc"}, {"session_id": "asc"}, {"seq": "asc"}]),
                &json!(["seq", "body", "session_id", "inc"]),
                0,
                want,
                &mut keep,
                "",
            )
            .await?;
        let mut all = Vec::with_capacity(hits.len() + extra.len());
        for h in &hits {
            let sid = h
                .source
                .get("session_id")
                .and_then(Value::as_str)
                .unwrap_or_default();
            all.push(decode_event(sid, &h.source)?);
        }
        all.extend(extra);
        all.sort_by(|a, b| {
            (a.timestamp, &a.session_id, a.seq).cmp(&(b.timestamp, &b.session_id, b.seq))
        });
        Ok(Page::paginate(
            all.into_iter().map(|e| SearchHit {
                session_id: e.session_id.clone(),
                event: e,
                score: None,
            }),
            query.page,
            query.page_size,
        ))
    }

    async fn search_ranked(&self, query: &SearchQuery) -> session_core::Result<Page<SearchHit>> {
        let heads = match &query.scope {
            SearchScope::Session(id) => vec![self.live(id).await?.head],
            SearchScope::User { app, user_id } => self.owner_heads(app, user_id).await?,
        };
        if heads.is_empty() {
            return Ok(Page::empty(query.page, query.page_size));
        }
        let Some(offset) = query.page.checked_mul(query.page_size) else {
            return Ok(Page::empty(query.page, query.page_size));
        };
        let by_inc: HashMap<&str, &Head> = heads.iter().map(|h| (h.inc.as_str(), h)).collect();
        let incs: Vec<&str> = by_inc.keys().copied().collect();
        let q = json!({"bool": {
            "must": [{"match": {"text": {"query": query.text}}}],
            "filter": [{"terms": {"inc": incs}}]
        }});
        let mut keep = |h: &Hit| {
            let inc = h
                .source
                .get("inc")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let seq = h.source.get("seq").and_then(Value::as_u64).unwrap_or(0);
            by_inc
                .get(inc)
                .is_some_and(|head| seq <= head.last_seq && !head.is_dead(seq))
        };
        let hits = self
            .collect(
                "events",
                &q,
                &json!([{"_score": "desc"}, {"ts_us": "asc"}, {"session_id": "asc"}, {"seq": "asc"}]),
                &json!(["seq", "body", "session_id", "inc"]),
                offset,
                query.page_size.saturating_add(1),
                &mut keep,
                "",
            )
            .await?;
        let mut items = Vec::with_capacity(hits.len());
        for h in &hits {
            let sid = h
                .source
                .get("session_id")
                .and_then(Value::as_str)
                .unwrap_or_default();
            items.push(SearchHit {
                session_id: sid.to_owned(),
                event: decode_event(sid, &h.source)?,
                score: h.score,
            });
        }
        Ok(Page::from_overfetch(items, query.page, query.page_size))
    }
}

#[async_trait]
impl SessionRepository for EsRepository {
    fn capabilities(&self) -> Capabilities {
        Capabilities::basic(BACKEND)
            .with_ranked_search()
            .with_durable()
            .with_multi_process()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "create", session_id = %new.id))]
    async fn create(&self, new: NewSession) -> session_core::Result<Session> {
        let now = self.now();
        new.validate(now)?;
        let split = ScopedDelta::split(&new.state);
        let mut shared = SharedDelta::default();
        shared.add(&split);
        let head = Head {
            session: new.to_session(now),
            initial_state: new.state.clone(),
            inc: uuid::Uuid::new_v4().simple().to_string(),
            last_seq: 0,
            dead: Vec::new(),
            base: Vec::new(),
            mark: 0,
            pending: Vec::new(),
        };
        let _guard = self.lock(&new.id).await;
        let mut attempt = 0;
        loop {
            Self::backoff(&mut attempt).await;
            let existing = self.load(&new.id).await?;
            if let Some(l) = &existing {
                if !l.head.session.is_expired_at(now) {
                    return Err(SessionError::AlreadyExists {
                        what: "session",
                        id: new.id,
                    });
                }
            }
            if self.put_head(existing.as_ref(), &head).await? {
                if let Some(old) = existing {
                    self.drop_incarnation(&new.id, &old.head.inc).await;
                }
                self.apply_shared(&head.session.app, &head.session.user_id, &shared)
                    .await?;
                return Ok(head.session);
            }
        }
    }

    async fn get(&self, id: &str) -> session_core::Result<Session> {
        check_session_id(id)?;
        Ok(self.live(id).await?.head.session)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "update", session_id = %id))]
    async fn update(&self, id: &str, update: SessionUpdate) -> session_core::Result<Session> {
        check_session_id(id)?;
        let now = self.now();
        update.validate(now)?;
        let memo = self.lock(id).await;
        let mut attempt = 0;
        loop {
            Self::backoff(&mut attempt).await;
            let cur = self.writable(id).await?;
            let mut head = cur.head.clone();
            head.pending.clear();
            update.clone().apply_to(&mut head.session, now)?;
            if self.commit(&memo, &cur, &head).await? {
                return Ok(head.session);
            }
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "delete", session_id = %id))]
    async fn delete(&self, id: &str) -> session_core::Result<bool> {
        check_session_id(id)?;
        let _guard = self.lock(id).await;
        self.delete_head(id, |_| true).await
    }

    async fn list(&self, query: &SessionQuery) -> session_core::Result<Page<Session>> {
        query.check(&self.limits)?;
        let Some(offset) = query.page.checked_mul(query.page_size) else {
            return Ok(Page::empty(query.page, query.page_size));
        };
        let q = body::sessions_query(query, micros(self.now()));
        let hits = self
            .collect(
                "sessions",
                &q,
                &json!([{"updated_us": "desc"}, {"sid": "asc"}]),
                &json!(["head"]),
                offset,
                query.page_size.saturating_add(1),
                &mut |_| true,
                "",
            )
            .await?;
        let items = hits
            .iter()
            .map(|h| Head::from_source(&h.id, &h.source).map(|head| head.session))
            .collect::<session_core::Result<Vec<_>>>()?;
        Ok(Page::from_overfetch(items, query.page, query.page_size))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "purge_expired"))]
    async fn purge_expired(&self, now: DateTime<Utc>) -> session_core::Result<u64> {
        let q = json!({"range": {"expires_us": {"lte": micros(now)}}});
        let hits = self.all_sessions(&q, &json!(["sid"])).await?;
        let mut n = 0;
        for h in hits {
            let _guard = self.lock(&h.id).await;
            // Re-checked on the current head: an expiry moved since the search keeps the session.
            if self
                .delete_head(&h.id, |head| head.session.is_expired_at(now))
                .await?
            {
                n += 1;
            }
        }
        Ok(n)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "append", session_id = %id, events = events.len()))]
    async fn append(
        &self,
        id: &str,
        mut events: Vec<SessionEvent>,
    ) -> session_core::Result<AppendOutcome> {
        check_session_id(id)?;
        let bodies = prepare_events(&mut events, &self.limits)?;
        let mut memo = self.lock(id).await;
        let mut attempt = 0;
        loop {
            Self::backoff(&mut attempt).await;
            let cur = self.writable(id).await?;
            let mut head = cur.head.clone();
            let placed = self.place(&mut head, &events, &bodies).await?;
            let written = placed.new.len();
            if written == 0 {
                return Ok(AppendOutcome {
                    version: head.session.version,
                    seqs: placed.seqs,
                    written,
                });
            }
            head.session.context_tokens = head
                .session
                .context_tokens
                .saturating_add(placed.new.iter().map(|p| u64::from(p.tokens)).sum::<u64>());
            head.pending = placed.new;
            self.touch(&mut head)?;
            if self.commit(&memo, &cur, &head).await? {
                self.after_commit(&mut memo, &head, &placed.shared).await?;
                return Ok(AppendOutcome {
                    version: head.session.version,
                    seqs: placed.seqs,
                    written,
                });
            }
        }
    }

    async fn events(
        &self,
        id: &str,
        filter: &EventFilter,
    ) -> session_core::Result<Page<SessionEvent>> {
        check_session_id(id)?;
        filter.check(&self.limits)?;
        let head = self.live(id).await?.head;
        let parts = self.view_parts(&head, filter.view, filter).await?;
        self.window(&head, parts, filter).await
    }

    async fn event_version(&self, id: &str) -> session_core::Result<u64> {
        check_session_id(id)?;
        Ok(self.live(id).await?.head.session.version)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "replace_context", session_id = %id, events = events.len()))]
    async fn replace_context(
        &self,
        id: &str,
        mut events: Vec<SessionEvent>,
        expected_version: u64,
    ) -> session_core::Result<bool> {
        check_session_id(id)?;
        let bodies = prepare_events(&mut events, &self.limits)?;
        check_unique_ids(&events)?;
        let mut memo = self.lock(id).await;
        let mut attempt = 0;
        loop {
            Self::backoff(&mut attempt).await;
            let cur = self.writable(id).await?;
            if cur.head.session.version != expected_version {
                return Ok(false);
            }
            let mut head = cur.head.clone();
            let placed = self.place(&mut head, &events, &bodies).await?;
            head.base = placed
                .seqs
                .iter()
                .zip(&placed.tokens)
                .map(|(s, t)| [*s, u64::from(*t)])
                .collect();
            head.mark = head.last_seq;
            head.session.context_tokens = head.base.iter().map(|[_, t]| *t).sum();
            head.pending = placed.new;
            self.touch(&mut head)?;
            if self.commit(&memo, &cur, &head).await? {
                self.after_commit(&mut memo, &head, &placed.shared).await?;
                return Ok(true);
            }
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "rewind", session_id = %id))]
    async fn rewind(
        &self,
        id: &str,
        before_invocation_id: &str,
    ) -> session_core::Result<RewindOutcome> {
        check_session_id(id)?;
        validate_id("invocation id", before_invocation_id)?;
        let memo = self.lock(id).await;
        let mut attempt = 0;
        loop {
            Self::backoff(&mut attempt).await;
            let cur = self.writable(id).await?;
            let head0 = &cur.head;
            let all = self.all_events(head0).await?;
            let Some(from) = all
                .iter()
                .find(|e| e.invocation_id.as_deref() == Some(before_invocation_id))
                .map(|e| e.seq)
            else {
                return Err(SessionError::NotFound {
                    what: "invocation",
                    id: before_invocation_id.to_owned(),
                });
            };
            let kept: Vec<&SessionEvent> = all.iter().filter(|e| e.seq < from).collect();
            let removed = all.len() - kept.len();
            let mut head = head0.clone();
            head.session.state = replay_deltas(
                &head.initial_state,
                kept.iter().filter_map(|e| e.state_delta.as_ref()),
            );
            head.session.event_count = u64::try_from(kept.len()).unwrap_or(u64::MAX);
            head.base.retain(|[s, _]| *s < from);
            let tail_tokens: u64 = kept
                .iter()
                .filter(|e| e.seq > head.mark)
                .map(|e| u64::from(e.token_estimate))
                .sum();
            head.session.context_tokens =
                head.base.iter().map(|[_, t]| *t).sum::<u64>() + tail_tokens;
            head.dead.push([from, head.last_seq]);
            head.pending.clear();
            self.touch(&mut head)?;
            if self.commit(&memo, &cur, &head).await? {
                self.delete_by_query(
                    "events",
                    json!({"bool": {"filter": [
                        {"term": {"session_id": id}},
                        {"term": {"inc": head.inc}},
                        {"range": {"seq": {"gte": from}}}
                    ]}}),
                )
                .await;
                return Ok(RewindOutcome {
                    version: head.session.version,
                    removed,
                });
            }
        }
    }

    async fn search(&self, query: &SearchQuery) -> session_core::Result<Page<SearchHit>> {
        query.check(&self.limits)?;
        if query.mode == SearchMode::Ranked {
            return self.search_ranked(query).await;
        }
        match &query.scope {
            SearchScope::Session(id) => {
                let f = EventFilter::archive()
                    .keyword(query.text.clone())
                    .page(query.page, query.page_size);
                Ok(self.events(id, &f).await?.map(|e| SearchHit {
                    session_id: e.session_id.clone(),
                    event: e,
                    score: None,
                }))
            }
            SearchScope::User { app, user_id } => {
                self.search_literal_all(app, user_id, query).await
            }
        }
    }

    async fn shared_state(&self, app: &str, user_id: &str) -> session_core::Result<SharedState> {
        validate_owner(app, user_id)?;
        let app_state = self
            .read_state_doc(&Self::state_doc_id(app, None))
            .await?
            .map(|(m, _, _)| m)
            .unwrap_or_default();
        let user_state = self
            .read_state_doc(&Self::state_doc_id(app, Some(user_id)))
            .await?
            .map(|(m, _, _)| m)
            .unwrap_or_default();
        Ok(SharedState {
            app: app_state,
            user: user_state,
        })
    }

    async fn export_session(&self, id: &str) -> session_core::Result<SessionDump> {
        check_session_id(id)?;
        let head = self.live(id).await?.head;
        let events = self.all_events(&head).await?;
        let mut context: Vec<u64> = head.base.iter().map(|[s, _]| *s).collect();
        context.extend(events.iter().map(|e| e.seq).filter(|s| *s > head.mark));
        let shared = self
            .shared_state(&head.session.app, &head.session.user_id)
            .await?;
        Ok(SessionDump {
            session: head.session,
            initial_state: head.initial_state,
            last_seq: head.last_seq,
            events,
            context,
            shared,
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "import", session_id = %dump.session.id))]
    async fn import_session(&self, mut dump: SessionDump) -> session_core::Result<ImportOutcome> {
        dump.validate()?;
        let id = dump.session.id.clone();
        let tokens: HashMap<u64, u32> = dump
            .events
            .iter()
            .map(|e| (e.seq, e.token_estimate))
            .collect();
        let seqs: Vec<u64> = dump.events.iter().map(|e| e.seq).collect();
        let mut session = dump.session.clone();
        session.event_count = u64::try_from(dump.events.len()).unwrap_or(u64::MAX);
        session.context_tokens = dump.context_tokens();
        let bodies = prepare_events(&mut dump.events, &Limits::unlimited())?;
        let head = Head {
            session,
            initial_state: dump.initial_state.clone(),
            inc: uuid::Uuid::new_v4().simple().to_string(),
            last_seq: dump.last_seq,
            dead: Vec::new(),
            base: dump
                .context
                .iter()
                .map(|s| [*s, u64::from(tokens.get(s).copied().unwrap_or(0))])
                .collect(),
            mark: dump.last_seq,
            pending: Vec::new(),
        };
        let mut docs = Vec::with_capacity(dump.events.len());
        for ((e, b), seq) in dump.events.iter().zip(&bodies).zip(&seqs) {
            docs.push((*seq, body::event_doc(head.owner(), *seq, e, b)?));
        }
        let mut written = false;
        let _guard = self.lock(&id).await;
        let mut attempt = 0;
        loop {
            Self::backoff(&mut attempt).await;
            let existing = self.load(&id).await?;
            if let Some(l) = &existing {
                if !l.head.session.is_expired_at(self.now())
                    && l.head.session.version >= dump.session.version
                {
                    if written {
                        self.drop_incarnation(&id, &head.inc).await;
                    }
                    return Ok(ImportOutcome::Unchanged);
                }
            }
            if !written {
                self.create_events(&head, docs.clone()).await?;
                written = true;
            }
            if self.put_head(existing.as_ref(), &head).await? {
                if let Some(old) = existing {
                    self.drop_incarnation(&id, &old.head.inc).await;
                }
                let s = &head.session;
                if !dump.shared.app.is_empty() {
                    self.write_state_doc(&Self::state_doc_id(&s.app, None), &dump.shared.app, true)
                        .await?;
                }
                if !dump.shared.user.is_empty() {
                    self.write_state_doc(
                        &Self::state_doc_id(&s.app, Some(&s.user_id)),
                        &dump.shared.user,
                        true,
                    )
                    .await?;
                }
                return Ok(ImportOutcome::Imported);
            }
        }
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
    }

    fn fixture(name: &str) -> Value {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn search_responses_give_ids_sources_sort_values_and_scores() {
        let hits = parse_hits(&fixture("search_hits.json")).unwrap();
        assert_eq!(hits.len(), 2);
        let last = hits.last().unwrap();
        assert_eq!(
            last.sort,
            json!([4_098_435_132_000_i64, "FaslK3QBySSL_rrj9zM5"])
        );
        assert!(last.score.is_none(), "sorted searches carry no score");
        let scored = parse_hits(&fixture("search_hits_scored.json")).unwrap();
        assert!(scored.iter().all(|h| h.score.is_some() && !h.id.is_empty()));
        assert!(parse_hits(&fixture("search_empty.json"))
            .unwrap()
            .is_empty());
        assert!(
            parse_hits(&fixture("count.json")).is_err(),
            "a body without hits is an error"
        );
    }

    #[test]
    fn a_get_answer_gives_the_compare_and_swap_coordinates() {
        let s = NewSession::new("a", "u", Utc::now()).to_session(Utc::now());
        let head = Head {
            session: s,
            initial_state: StateMap::new(),
            inc: "i".into(),
            last_seq: 0,
            dead: Vec::new(),
            base: Vec::new(),
            mark: 0,
            pending: Vec::new(),
        };
        // The documented GET answer, with our head document as its source.
        let mut doc = fixture("get_found.json");
        doc["_source"] = head.doc().unwrap();
        let l = EsRepository::loaded("s", &doc).unwrap();
        assert_eq!(l.seq_no, doc["_seq_no"].as_i64().unwrap());
        assert_eq!(l.primary_term, doc["_primary_term"].as_i64().unwrap());
        // The documented answer as is: not a head; reported, not panicked on.
        let err = EsRepository::loaded("s", &fixture("get_found.json")).unwrap_err();
        assert_eq!(err.kind(), session_core::ErrorKind::Serialization);
        assert!(err.to_string().contains("session s"), "{err}");
    }

    #[test]
    fn document_paths_escape_ids() {
        assert_eq!(
            doc_path("p-state", "u|app|bob"),
            "p-state/_doc/u%7Capp%7Cbob"
        );
        assert_eq!(
            doc_path("p-sessions", "chat:1.a_b-c"),
            "p-sessions/_doc/chat%3A1.a_b-c"
        );
    }

    #[test]
    fn prefixes_must_be_valid_index_names() {
        assert!(validate_prefix("agent-session").is_ok());
        assert!(validate_prefix("t1.x_y").is_ok());
        for bad in ["", "Upper", "-lead", "a b", "a/b", "a*", &"x".repeat(101)] {
            assert!(validate_prefix(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn indexed_max_stops_below_the_pending_batch() {
        let s = NewSession::new("a", "u", Utc::now()).to_session(Utc::now());
        let mut h = Head {
            session: s,
            initial_state: StateMap::new(),
            inc: "i".into(),
            last_seq: 9,
            dead: vec![[3, 4]],
            base: Vec::new(),
            mark: 0,
            pending: Vec::new(),
        };
        assert_eq!(h.indexed_max(), 9);
        h.pending = vec![
            Pending {
                seq: 8,
                id: "a".into(),
                tokens: 1,
                body: "{}".into(),
            },
            Pending {
                seq: 9,
                id: "b".into(),
                tokens: 1,
                body: "{}".into(),
            },
        ];
        assert_eq!(h.indexed_max(), 7);
        assert!(h.is_dead(3) && h.is_dead(4) && !h.is_dead(5));
        let doc = h.doc().unwrap();
        let back = Head::from_source("x", &doc).unwrap();
        assert_eq!(back.pending.len(), 2);
        assert_eq!(back.dead, vec![[3, 4]]);
        assert_eq!(doc["expires_us"], micros(h.session.expires_at.unwrap()));
    }
}
