#![doc = include_str!("../README.md")]

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Script, Value};
use session_core::state::{replay_deltas, ScopedDelta};
use session_core::{
    check_session_id, check_unique_ids, contains_folded, fold_case, prepare_events, system_clock,
    validate_id, validate_owner, AppendOutcome, Capabilities, EventFilter, EventView,
    ImportOutcome, Limits, NewSession, Page, RewindOutcome, SearchHit, SearchMode, SearchQuery,
    SearchScope, Session, SessionDump, SessionError, SessionEvent, SessionQuery, SessionRepository,
    SessionUpdate, SharedClock, SharedState, StateMap,
};
use session_core::{stored_counter, MAX_VERSION};

pub(crate) const BACKEND: &str = "redis";

const COMMON: &str = include_str!("../lua/common.lua");

fn script(body: &str) -> Script {
    Script::new(&format!("{COMMON}\n{body}"))
}

/// Events fetched per round trip when a read scans a session.
const CHUNK: usize = 500;

/// A standalone or cluster connection.
#[derive(Clone)]
enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(c) => c.req_packed_commands(cmd, offset, count),
            Self::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}

fn map_err(e: redis::RedisError) -> SessionError {
    if e.is_io_error()
        || e.is_connection_dropped()
        || e.is_timeout()
        || e.is_connection_refusal()
        || e.is_cluster_error()
    {
        SessionError::unavailable(BACKEND, e)
    } else {
        SessionError::backend(BACKEND, e)
    }
}

/// The scripts, loaded once.
struct Scripts {
    create: Script,
    append: Script,
    replace: Script,
    rewind: Script,
    update: Script,
    delete: Script,
    import: Script,
}

/// A [`SessionRepository`] on Redis, standalone or cluster.
///
/// Every key of one session carries the session id as a hash tag, so one
/// session lives in one cluster slot and every write is one Lua script: one
/// round trip for an append (idempotency by event id, seq allocation, state
/// delta, version bump and, on a standalone server, the shared scopes and the
/// activity indexes). Expiry maps to `PEXPIREAT` on every key of the session.
#[derive(Clone)]
pub struct RedisRepository {
    conn: Conn,
    prefix: String,
    cluster: bool,
    clock: SharedClock,
    limits: Limits,
    scripts: std::sync::Arc<Scripts>,
}

impl std::fmt::Debug for RedisRepository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRepository")
            .field("prefix", &self.prefix)
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

/// Options for connecting a [`RedisRepository`].
#[derive(Clone)]
pub struct RedisRepositoryBuilder {
    nodes: Vec<String>,
    cluster: bool,
    prefix: String,
    clock: SharedClock,
    limits: Limits,
}

impl std::fmt::Debug for RedisRepositoryBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRepositoryBuilder")
            .field("nodes", &self.nodes.len())
            .field("cluster", &self.cluster)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisRepositoryBuilder {
    /// The key prefix: one namespace per application or tenant (default `as`).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The clock for expiry and activity times.
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// Event and page size limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Connects (a connection manager that reconnects, or the cluster client).
    pub async fn connect(self) -> session_core::Result<RedisRepository> {
        if self.prefix.is_empty() || self.prefix.contains(['{', '}', '*', '?', '[', ']', ' ']) {
            return Err(SessionError::invalid(
                "prefix",
                "must be non-empty, without braces, glob characters or spaces",
            ));
        }
        let conn = if self.cluster {
            let client = redis::cluster::ClusterClient::new(self.nodes.clone())
                .map_err(|e| SessionError::invalid("store URL", e.to_string()))?;
            Conn::Cluster(client.get_async_connection().await.map_err(map_err)?)
        } else {
            let url = self.nodes.first().cloned().unwrap_or_default();
            let client = redis::Client::open(url.as_str())
                .map_err(|e| SessionError::invalid("store URL", e.to_string()))?;
            let config = redis::aio::ConnectionManagerConfig::new()
                .set_number_of_retries(2)
                .set_connection_timeout(Some(std::time::Duration::from_secs(5)))
                .set_response_timeout(Some(std::time::Duration::from_secs(30)));
            Conn::Single(
                ConnectionManager::new_with_config(client, config)
                    .await
                    .map_err(map_err)?,
            )
        };
        let repo = RedisRepository {
            conn,
            prefix: self.prefix,
            cluster: self.cluster,
            clock: self.clock,
            limits: self.limits,
            scripts: std::sync::Arc::new(Scripts {
                create: script(include_str!("../lua/create.lua")),
                append: script(include_str!("../lua/append.lua")),
                replace: script(include_str!("../lua/replace.lua")),
                rewind: script(include_str!("../lua/rewind.lua")),
                update: script(include_str!("../lua/update.lua")),
                delete: script(include_str!("../lua/delete.lua")),
                import: script(include_str!("../lua/import.lua")),
            }),
        };
        let mut c = repo.conn.clone();
        redis::cmd("PING")
            .query_async::<String>(&mut c)
            .await
            .map_err(map_err)?;
        Ok(repo)
    }
}

const SESSION_KEYS: [&str; 11] = [
    "s", "st", "ev", "ids", "sid", "arc", "ctx", "tok", "inv", "dl", "init",
];

/// `app/user` (or `app/key`) for a key name, with `/` inside either part
/// escaped as `%2F`: names may hold `/` but never `%`, so two owners never
/// share a key, and names without `/` keep the key they always had.
fn pair(a: &str, b: &str) -> String {
    format!("{}/{}", a.replace('/', "%2F"), b.replace('/', "%2F"))
}

fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

fn json<T: serde::Serialize + ?Sized>(v: &T) -> session_core::Result<String> {
    serde_json::to_string(v).map_err(|e| SessionError::serialization("redis argument", e))
}

/// A state map as flat key/value arguments (values JSON; `null` → '' = delete).
fn kv_args(map: &StateMap) -> session_core::Result<Vec<String>> {
    let mut out = vec![map.len().to_string()];
    for (k, v) in map {
        out.push(k.clone());
        out.push(if v.is_null() { String::new() } else { json(v)? });
    }
    Ok(out)
}

impl RedisRepository {
    /// Options for a standalone server: `redis://host:6379/0` (or `rediss://`).
    pub fn builder(url: impl Into<String>) -> RedisRepositoryBuilder {
        RedisRepositoryBuilder {
            nodes: vec![url.into()],
            cluster: false,
            prefix: "as".to_owned(),
            clock: system_clock(),
            limits: Limits::default(),
        }
    }

    /// Options for a cluster, given some of its nodes (`redis://host:7000`, ...).
    pub fn cluster_builder(nodes: Vec<String>) -> RedisRepositoryBuilder {
        RedisRepositoryBuilder {
            nodes,
            cluster: true,
            prefix: "as".to_owned(),
            clock: system_clock(),
            limits: Limits::default(),
        }
    }

    /// Connects to `redis://…` (standalone) or `redis+cluster://host1:port,host2:port` (cluster).
    ///
    /// `?prefix=NAME` sets the key prefix (default `as`), so several
    /// applications can share one database; any other parameter is refused.
    pub async fn from_url(url: &str) -> session_core::Result<Self> {
        let (base, params) = session_core::split_url_query(url, "redis", &["prefix"])?;
        let mut builder = if let Some(rest) = base.strip_prefix("redis+cluster://") {
            let nodes = rest.split(',').map(|n| format!("redis://{n}")).collect();
            Self::cluster_builder(nodes)
        } else {
            Self::builder(base)
        };
        for (_, prefix) in params {
            builder = builder.prefix(prefix);
        }
        builder.connect().await
    }

    fn keys(&self, id: &str) -> Vec<String> {
        SESSION_KEYS
            .iter()
            .map(|k| format!("{}:{{{id}}}:{k}", self.prefix))
            .collect()
    }

    fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    fn base_args(&self, id: &str) -> Vec<String> {
        vec![
            micros(self.now()).to_string(),
            if self.cluster { "c" } else { "s" }.to_owned(),
            self.prefix.clone(),
            id.to_owned(),
        ]
    }

    async fn run_raw(
        &self,
        script: &Script,
        id: &str,
        args: Vec<String>,
    ) -> redis::RedisResult<Value> {
        let mut inv = script.prepare_invoke();
        for k in self.keys(id) {
            inv.key(k);
        }
        for a in args {
            inv.arg(a);
        }
        let mut c = self.conn.clone();
        inv.invoke_async(&mut c).await
    }

    /// Maps the errors the scripts raise onto the contract's kinds.
    fn script_err(id: &str, e: redis::RedisError) -> SessionError {
        match e.code() {
            Some("NOTFOUND") => SessionError::session_not_found(id),
            Some("EXPIRED") => SessionError::Expired { id: id.to_owned() },
            Some("EXISTS") => SessionError::AlreadyExists {
                what: "session",
                id: id.to_owned(),
            },
            Some("LIMIT") => SessionError::invalid(
                "session",
                e.detail()
                    .unwrap_or("a counter reached its maximum")
                    .to_owned(),
            ),
            Some("CORRUPT") => SessionError::serialization(format!("session {id} head"), e),
            _ => map_err(e),
        }
    }

    async fn run(
        &self,
        script: &Script,
        id: &str,
        args: Vec<String>,
    ) -> session_core::Result<Value> {
        self.run_raw(script, id, args)
            .await
            .map_err(|e| Self::script_err(id, e))
    }

    /// The physical TTL: a day after the logical expiry, when that is still ahead in real time
    /// (reads check the logical expiry; the TTL only reclaims memory).
    fn ttl_at(expires_at: Option<DateTime<Utc>>) -> String {
        match expires_at {
            Some(t) => {
                let at = t + chrono::Duration::days(1);
                if at > Utc::now() {
                    at.timestamp_millis().to_string()
                } else {
                    String::new()
                }
            }
            None => String::new(),
        }
    }

    /// The event arguments an insert takes.
    fn event_args(e: &SessionEvent, body: &str, out: &mut Vec<String>) -> session_core::Result<()> {
        out.push(e.id.clone());
        out.push(body.to_owned());
        out.push(e.token_estimate.to_string());
        out.push(e.invocation_id.clone().unwrap_or_default());
        let split = e
            .state_delta
            .as_ref()
            .map(ScopedDelta::split)
            .unwrap_or_default();
        out.push(if split.session.is_empty() {
            String::new()
        } else {
            json(&split.session)?
        });
        out.extend(kv_args(&split.session)?);
        out.extend(kv_args(&split.user)?);
        out.extend(kv_args(&split.app)?);
        Ok(())
    }

    /// Cluster mode: what a standalone script does for shared scopes and indexes.
    async fn follow_up(
        &self,
        id: &str,
        app: &str,
        user: &str,
        key: &str,
        deltas: &[&SessionEvent],
    ) -> session_core::Result<()> {
        if !self.cluster {
            return Ok(());
        }
        let mut c = self.conn.clone();
        for e in deltas {
            let Some(d) = &e.state_delta else { continue };
            let split = ScopedDelta::split(d);
            for (hash, map) in [
                (
                    format!("{}:u:{{{}}}", self.prefix, pair(app, user)),
                    &split.user,
                ),
                (format!("{}:a:{{{app}}}", self.prefix), &split.app),
            ] {
                for (k, v) in map {
                    if v.is_null() {
                        redis::cmd("HDEL")
                            .arg(&hash)
                            .arg(k)
                            .query_async::<()>(&mut c)
                            .await
                            .map_err(map_err)?;
                    } else {
                        redis::cmd("HSET")
                            .arg(&hash)
                            .arg(k)
                            .arg(json(v)?)
                            .query_async::<()>(&mut c)
                            .await
                            .map_err(map_err)?;
                    }
                }
            }
        }
        let s = self.get(id).await?;
        let score = -micros(s.updated_at);
        let zadd = |index: String| redis::cmd("ZADD").arg(index).arg(score).arg(id).clone();
        for cmd in [
            zadd(format!("{}:idx:all", self.prefix)),
            zadd(format!("{}:idx:o:{}", self.prefix, pair(app, user))),
        ] {
            cmd.query_async::<()>(&mut c).await.map_err(map_err)?;
        }
        if !key.is_empty() {
            zadd(format!("{}:idx:k:{}", self.prefix, pair(app, key)))
                .query_async::<()>(&mut c)
                .await
                .map_err(map_err)?;
        }
        if let Some(exp) = s.expires_at {
            redis::cmd("ZADD")
                .arg(format!("{}:idx:exp", self.prefix))
                .arg(micros(exp))
                .arg(id)
                .query_async::<()>(&mut c)
                .await
                .map_err(map_err)?;
        }
        Ok(())
    }

    async fn raw_session(
        &self,
        id: &str,
    ) -> session_core::Result<Option<(HashMap<String, String>, StateMap)>> {
        let keys = self.keys(id);
        let mut c = self.conn.clone();
        let (fields, state): (HashMap<String, String>, HashMap<String, String>) = redis::pipe()
            .cmd("HGETALL")
            .arg(&keys[0])
            .cmd("HGETALL")
            .arg(&keys[1])
            .query_async(&mut c)
            .await
            .map_err(map_err)?;
        if fields.is_empty() {
            return Ok(None);
        }
        let mut map = StateMap::new();
        for (k, v) in state {
            map.insert(
                k.clone(),
                serde_json::from_str(&v).map_err(|e| {
                    SessionError::serialization(format!("session {id} state key {k}"), e)
                })?,
            );
        }
        Ok(Some((fields, map)))
    }

    fn decode_session(
        id: &str,
        f: &HashMap<String, String>,
        state: StateMap,
    ) -> session_core::Result<Session> {
        let get = |k: &str| f.get(k).map(String::as_str).unwrap_or_default();
        let bad = |k: &str, e: String| SessionError::serialization(format!("session {id} {k}"), e);
        let int = |k: &str| get(k).parse::<i64>().map_err(|e| bad(k, e.to_string()));
        let time = |k: &str| -> session_core::Result<DateTime<Utc>> {
            DateTime::from_timestamp_micros(int(k)?).ok_or_else(|| bad(k, "out of range".into()))
        };
        Ok(Session {
            id: id.to_owned(),
            app: get("app").to_owned(),
            user_id: get("user_id").to_owned(),
            key: f.get("key").filter(|k| !k.is_empty()).cloned(),
            status: get("status")
                .parse()
                .map_err(|e: SessionError| bad("status", e.to_string()))?,
            created_at: time("created_at")?,
            updated_at: time("updated_at")?,
            expires_at: if get("expires_at").is_empty() {
                None
            } else {
                Some(time("expires_at")?)
            },
            metadata: serde_json::from_str(get("metadata"))
                .map_err(|e| bad("metadata", e.to_string()))?,
            state,
            event_count: stored_counter(int("event_count")?, u64::MAX, || {
                format!("session {id} event_count")
            })?,
            context_tokens: stored_counter(int("context_tokens")?, u64::MAX, || {
                format!("session {id} context_tokens")
            })?,
            version: stored_counter(int("version")?, MAX_VERSION, || {
                format!("session {id} version")
            })?,
        })
    }

    async fn live(&self, id: &str) -> session_core::Result<(HashMap<String, String>, Session)> {
        let Some((fields, state)) = self.raw_session(id).await? else {
            return Err(SessionError::session_not_found(id));
        };
        let s = Self::decode_session(id, &fields, state)?;
        if s.is_expired_at(self.now()) {
            return Err(SessionError::session_not_found(id));
        }
        Ok((fields, s))
    }

    /// Events by seq, fetched in bounded chunks.
    async fn fetch(&self, id: &str, seqs: &[u64]) -> session_core::Result<Vec<SessionEvent>> {
        let keys = self.keys(id);
        let mut c = self.conn.clone();
        let mut out = Vec::with_capacity(seqs.len());
        for chunk in seqs.chunks(CHUNK) {
            let bodies: Vec<Option<String>> = redis::cmd("HMGET")
                .arg(&keys[2])
                .arg(chunk)
                .query_async(&mut c)
                .await
                .map_err(map_err)?;
            for (seq, body) in chunk.iter().zip(bodies) {
                let body = body.ok_or_else(|| {
                    SessionError::serialization(
                        format!("session {id} seq {seq}"),
                        "the event body is missing",
                    )
                })?;
                out.push(SessionEvent::decode_stored(id, *seq, &body)?);
            }
        }
        Ok(out)
    }

    async fn seqs(&self, id: &str, view: EventView) -> session_core::Result<Vec<u64>> {
        let keys = self.keys(id);
        let key = match view {
            EventView::Archive => &keys[4],
            EventView::Context => &keys[5],
        };
        let mut c = self.conn.clone();
        redis::cmd("ZRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .query_async(&mut c)
            .await
            .map_err(map_err)
    }

    async fn read_state(&self, key: &str) -> session_core::Result<StateMap> {
        let mut c = self.conn.clone();
        let raw: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(key)
            .query_async(&mut c)
            .await
            .map_err(map_err)?;
        let mut m = StateMap::new();
        for (k, v) in raw {
            let value = serde_json::from_str(&v)
                .map_err(|e| SessionError::serialization(format!("{key} {k}"), e))?;
            m.insert(k, value);
        }
        Ok(m)
    }

    async fn ids_in(&self, index: &str) -> session_core::Result<Vec<String>> {
        let mut c = self.conn.clone();
        redis::cmd("ZRANGE")
            .arg(index)
            .arg(0)
            .arg(-1)
            .query_async(&mut c)
            .await
            .map_err(map_err)
    }
}

#[async_trait]
impl SessionRepository for RedisRepository {
    fn capabilities(&self) -> Capabilities {
        Capabilities::basic(BACKEND)
            .with_native_ttl()
            .with_durable()
            .with_multi_process()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "create", session_id = %session.id))]
    async fn create(&self, session: NewSession) -> session_core::Result<Session> {
        session.validate(self.now())?;
        let now = self.now();
        let updated = now.max(session.created_at);
        let split = ScopedDelta::split(&session.state);
        let fields: Vec<(&str, String)> = vec![
            ("app", session.app.clone()),
            ("user_id", session.user_id.clone()),
            ("key", session.key.clone().unwrap_or_default()),
            ("status", "active".into()),
            ("created_at", micros(session.created_at).to_string()),
            ("updated_at", micros(updated).to_string()),
            (
                "expires_at",
                session
                    .expires_at
                    .map(|t| micros(t).to_string())
                    .unwrap_or_default(),
            ),
            ("ttl_at", Self::ttl_at(session.expires_at)),
            ("metadata", json(&session.metadata)?),
            ("event_count", "0".into()),
            ("context_tokens", "0".into()),
            ("version", "0".into()),
            ("last_seq", "0".into()),
            ("next_ctx_pos", "1".into()),
        ];
        let mut args = self.base_args(&session.id);
        args.push(fields.len().to_string());
        for (k, v) in fields {
            args.push(k.to_owned());
            args.push(v);
        }
        args.extend(kv_args(&split.session)?);
        args.extend(kv_args(&split.user)?);
        args.extend(kv_args(&split.app)?);
        args.extend(kv_args(&session.state)?);
        self.run(&self.scripts.create, &session.id, args).await?;
        if self.cluster {
            let e = SessionEvent::builder(session_core::Message::user(""))
                .state_delta(session.state.clone())
                .build()?;
            self.follow_up(
                &session.id,
                &session.app,
                &session.user_id,
                session.key.as_deref().unwrap_or_default(),
                &[&e],
            )
            .await?;
        }
        Ok(session.to_session(now))
    }

    async fn get(&self, id: &str) -> session_core::Result<Session> {
        check_session_id(id)?;
        Ok(self.live(id).await?.1)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "update", session_id = %id))]
    async fn update(&self, id: &str, update: SessionUpdate) -> session_core::Result<Session> {
        check_session_id(id)?;
        update.validate(self.now())?;
        let mut args = self.base_args(id);
        args.push(
            update
                .expected_version
                .map(|v| v.to_string())
                .unwrap_or_default(),
        );
        let mut fields: Vec<(String, String)> = Vec::new();
        if let Some(m) = &update.metadata {
            fields.push(("metadata".into(), json(m)?));
        }
        if let Some(s) = update.status {
            fields.push(("status".into(), s.as_str().into()));
        }
        if let Some(exp) = update.expires_at {
            fields.push((
                "expires_at".into(),
                exp.map(|t| micros(t).to_string()).unwrap_or_default(),
            ));
            fields.push(("ttl_at".into(), Self::ttl_at(exp)));
        }
        args.push(fields.len().to_string());
        for (k, v) in fields {
            args.push(k);
            args.push(v);
        }
        match &update.state {
            Some(st) => {
                args.push("1".into());
                args.extend(kv_args(st)?);
            }
            None => args.push("0".into()),
        }
        if let Err(e) = self.run_raw(&self.scripts.update, id, args).await {
            if e.code() == Some("CONFLICT") {
                return Err(SessionError::Conflict {
                    id: id.to_owned(),
                    expected: update.expected_version.unwrap_or_default(),
                    actual: e
                        .detail()
                        .and_then(|d| d.trim().parse().ok())
                        .unwrap_or_default(),
                });
            }
            return Err(Self::script_err(id, e));
        }
        let s = self.get(id).await?;
        self.follow_up(
            id,
            &s.app.clone(),
            &s.user_id.clone(),
            s.key.as_deref().unwrap_or_default(),
            &[],
        )
        .await?;
        Ok(s)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "delete", session_id = %id))]
    async fn delete(&self, id: &str) -> session_core::Result<bool> {
        check_session_id(id)?;
        let owner = self.raw_session(id).await?.map(|(f, _)| f);
        let deleted = self
            .run(&self.scripts.delete, id, self.base_args(id))
            .await?;
        if self.cluster {
            if let Some(f) = owner {
                let mut c = self.conn.clone();
                let (app, user, key) = (
                    f.get("app").cloned().unwrap_or_default(),
                    f.get("user_id").cloned().unwrap_or_default(),
                    f.get("key").cloned().unwrap_or_default(),
                );
                let mut idx = vec![
                    format!("{}:idx:all", self.prefix),
                    format!("{}:idx:o:{}", self.prefix, pair(&app, &user)),
                    format!("{}:idx:exp", self.prefix),
                ];
                if !key.is_empty() {
                    idx.push(format!("{}:idx:k:{}", self.prefix, pair(&app, &key)));
                }
                for i in idx {
                    redis::cmd("ZREM")
                        .arg(i)
                        .arg(id)
                        .query_async::<()>(&mut c)
                        .await
                        .map_err(map_err)?;
                }
            }
        }
        Ok(deleted == Value::Int(1))
    }

    async fn list(&self, query: &SessionQuery) -> session_core::Result<Page<Session>> {
        query.check(&self.limits)?;
        let index = match (&query.app, &query.user_id, &query.key) {
            (Some(a), Some(u), _) => format!("{}:idx:o:{}", self.prefix, pair(a, u)),
            (Some(a), None, Some(k)) => format!("{}:idx:k:{}", self.prefix, pair(a, k)),
            _ => format!("{}:idx:all", self.prefix),
        };
        let now = self.now();
        let mut found = Vec::new();
        let mut unreadable = Vec::new();
        for id in self.ids_in(&index).await? {
            let read = match self.raw_session(&id).await {
                Ok(None) => continue,
                Ok(Some((f, st))) => Self::decode_session(&id, &f, st),
                Err(e) if e.kind() == session_core::ErrorKind::Serialization => Err(e),
                Err(e) => return Err(e),
            };
            match read {
                Ok(s) if !s.is_expired_at(now) && query.matches(&s) => found.push(s),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(id = %id, kind = ?e.kind(), "unreadable session left out of the list");
                    unreadable.push(id);
                }
            }
        }
        found.sort_by(|a, b| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        let mut page = Page::paginate(found, query.page, query.page_size);
        // Named only where the index read is the asker's own (owner index) or
        // an operator's unfiltered listing, so no owner sees another's ids.
        let own_index = query.app.is_some() && query.user_id.is_some();
        if query.page == 0 && (own_index || query.is_unfiltered()) {
            page.unreadable = unreadable;
        }
        Ok(page)
    }

    async fn purge_expired(&self, now: DateTime<Utc>) -> session_core::Result<u64> {
        let mut c = self.conn.clone();
        let ids: Vec<String> = redis::cmd("ZRANGEBYSCORE")
            .arg(format!("{}:idx:exp", self.prefix))
            .arg("-inf")
            .arg(micros(now))
            .query_async(&mut c)
            .await
            .map_err(map_err)?;
        let mut n = 0;
        for id in ids {
            if self.delete(&id).await? {
                n += 1;
            }
            redis::cmd("ZREM")
                .arg(format!("{}:idx:exp", self.prefix))
                .arg(&id)
                .query_async::<()>(&mut c)
                .await
                .map_err(map_err)?;
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
        let mut args = self.base_args(id);
        args.push(events.len().to_string());
        for (e, body) in events.iter().zip(&bodies) {
            Self::event_args(e, body, &mut args)?;
        }
        let out = self.run(&self.scripts.append, id, args).await?;
        let (version, written, app, user, key, seqs): (
            u64,
            usize,
            String,
            String,
            String,
            Vec<u64>,
        ) = redis::FromRedisValue::from_redis_value(out)
            .map_err(|e| SessionError::serialization("redis reply", e.to_string()))?;
        if written > 0 && self.cluster {
            let with_delta: Vec<&SessionEvent> =
                events.iter().filter(|e| e.state_delta.is_some()).collect();
            self.follow_up(id, &app, &user, &key, &with_delta).await?;
        }
        Ok(AppendOutcome {
            version,
            seqs,
            written,
        })
    }

    async fn events(
        &self,
        id: &str,
        filter: &EventFilter,
    ) -> session_core::Result<Page<SessionEvent>> {
        check_session_id(id)?;
        filter.check(&self.limits)?;
        self.live(id).await?;
        let plain = filter.branch.is_none()
            && filter.from.is_none()
            && filter.to.is_none()
            && filter.roles.is_empty()
            && filter.synthetic == session_core::SyntheticFilter::Include
            && filter.keyword.is_none()
            && filter.invocation_id.is_none();
        if plain {
            // Straight from the sorted set: O(log n + page).
            let keys = self.keys(id);
            let key = match filter.view {
                EventView::Archive => &keys[4],
                EventView::Context => &keys[5],
            };
            let mut c = self.conn.clone();
            let (start, stop, page_base) = if let Some(n) = filter.last_n {
                (-i64::try_from(n).unwrap_or(i64::MAX), -1, true)
            } else {
                let Some(offset) = filter
                    .page
                    .checked_mul(filter.page_size)
                    .and_then(|o| i64::try_from(o).ok())
                else {
                    return Ok(Page::empty(filter.page, filter.page_size));
                };
                // ZRANGE's stop is inclusive: page_size + 1 items tell whether more follow.
                let Some(stop) = i64::try_from(filter.page_size)
                    .ok()
                    .and_then(|size| offset.checked_add(size))
                else {
                    return Ok(Page::empty(filter.page, filter.page_size));
                };
                (offset, stop, false)
            };
            let seqs: Vec<u64> = redis::cmd("ZRANGE")
                .arg(key)
                .arg(start)
                .arg(stop)
                .query_async(&mut c)
                .await
                .map_err(map_err)?;
            let events = self.fetch(id, &seqs).await?;
            if page_base {
                return Ok(Page::paginate(events, filter.page, filter.page_size));
            }
            return Ok(Page::from_overfetch(events, filter.page, filter.page_size));
        }
        let seqs = self.seqs(id, filter.view).await?;
        let events = self.fetch(id, &seqs).await?;
        Ok(filter.apply(&events))
    }

    async fn event_version(&self, id: &str) -> session_core::Result<u64> {
        check_session_id(id)?;
        Ok(self.get(id).await?.version)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "replace_context", session_id = %id))]
    async fn replace_context(
        &self,
        id: &str,
        mut events: Vec<SessionEvent>,
        expected_version: u64,
    ) -> session_core::Result<bool> {
        check_session_id(id)?;
        let bodies = prepare_events(&mut events, &self.limits)?;
        check_unique_ids(&events)?;
        let mut args = self.base_args(id);
        args.push(expected_version.to_string());
        args.push(events.len().to_string());
        for (e, body) in events.iter().zip(&bodies) {
            Self::event_args(e, body, &mut args)?;
        }
        let out = self.run(&self.scripts.replace, id, args).await?;
        let replaced = out == Value::Int(1);
        if replaced && self.cluster {
            let s = self.get(id).await?;
            let with_delta: Vec<&SessionEvent> =
                events.iter().filter(|e| e.state_delta.is_some()).collect();
            self.follow_up(
                id,
                &s.app,
                &s.user_id,
                s.key.as_deref().unwrap_or_default(),
                &with_delta,
            )
            .await?;
        }
        Ok(replaced)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "rewind", session_id = %id))]
    async fn rewind(
        &self,
        id: &str,
        before_invocation_id: &str,
    ) -> session_core::Result<RewindOutcome> {
        check_session_id(id)?;
        validate_id("invocation id", before_invocation_id)?;
        let keys = self.keys(id);
        loop {
            let Some((fields, state)) = self.raw_session(id).await? else {
                return Err(SessionError::session_not_found(id));
            };
            if Self::decode_session(id, &fields, state)?.is_expired_at(self.now()) {
                return Err(SessionError::Expired { id: id.to_owned() });
            }
            let version = fields.get("version").cloned().unwrap_or_default();
            let mut c = self.conn.clone();
            let (from, init, deltas): (Option<u64>, HashMap<String, String>, HashMap<u64, String>) =
                redis::pipe()
                    .cmd("HGET")
                    .arg(&keys[6])
                    .arg(before_invocation_id)
                    .cmd("HGETALL")
                    .arg(&keys[8])
                    .cmd("HGETALL")
                    .arg(&keys[7])
                    .query_async(&mut c)
                    .await
                    .map_err(map_err)?;
            let Some(from) = from else {
                return Err(SessionError::NotFound {
                    what: "invocation",
                    id: before_invocation_id.to_owned(),
                });
            };
            let mut initial = StateMap::new();
            for (k, v) in init {
                initial.insert(
                    k,
                    serde_json::from_str(&v).map_err(|e| {
                        SessionError::serialization(format!("session {id} initial state"), e)
                    })?,
                );
            }
            let mut kept: Vec<(u64, StateMap)> = Vec::new();
            for (seq, d) in deltas {
                if seq < from {
                    kept.push((
                        seq,
                        serde_json::from_str(&d).map_err(|e| {
                            SessionError::serialization(
                                format!("session {id} seq {seq} state delta"),
                                e,
                            )
                        })?,
                    ));
                }
            }
            kept.sort_by_key(|(s, _)| *s);
            let state = replay_deltas(&initial, kept.iter().map(|(_, d)| d));
            let mut args = self.base_args(id);
            args.push(version);
            args.push(from.to_string());
            args.extend(kv_args(&state)?);
            let out = self.run(&self.scripts.rewind, id, args).await?;
            if out == Value::Int(-1) {
                continue; // someone wrote in between: read again
            }
            let (version, removed): (u64, usize) = redis::FromRedisValue::from_redis_value(out)
                .map_err(|e| SessionError::serialization("redis reply", e.to_string()))?;
            return Ok(RewindOutcome { version, removed });
        }
    }

    async fn search(&self, query: &SearchQuery) -> session_core::Result<Page<SearchHit>> {
        query.check(&self.limits)?;
        if query.mode == SearchMode::Ranked {
            return Err(SessionError::invalid(
                "search mode",
                "ranked search is not supported by the redis backend; use literal search",
            ));
        }
        let needle = fold_case(&query.text);
        let ids: Vec<String> = match &query.scope {
            SearchScope::Session(id) => {
                self.live(id).await?;
                vec![id.clone()]
            }
            SearchScope::User { app, user_id } => {
                let now = self.now();
                let mut out = Vec::new();
                for id in self
                    .ids_in(&format!("{}:idx:o:{}", self.prefix, pair(app, user_id)))
                    .await?
                {
                    if let Some((f, st)) = self.raw_session(&id).await? {
                        // The index is a hint: the session itself says who owns it.
                        let s = Self::decode_session(&id, &f, st)?;
                        if !s.is_expired_at(now) && &s.app == app && &s.user_id == user_id {
                            out.push(id);
                        }
                    }
                }
                out
            }
        };
        let mut hits = Vec::new();
        for id in &ids {
            let seqs = self.seqs(id, EventView::Archive).await?;
            for chunk in seqs.chunks(CHUNK) {
                for e in self.fetch(id, chunk).await? {
                    if contains_folded(&e.message.search_text(), &needle) {
                        hits.push(e);
                    }
                }
            }
        }
        if ids.len() > 1 {
            hits.sort_by(|a, b| {
                (a.timestamp, &a.session_id, a.seq).cmp(&(b.timestamp, &b.session_id, b.seq))
            });
        }
        Ok(Page::paginate(
            hits.into_iter().map(|e| SearchHit {
                session_id: e.session_id.clone(),
                event: e,
                score: None,
            }),
            query.page,
            query.page_size,
        ))
    }

    async fn shared_state(&self, app: &str, user_id: &str) -> session_core::Result<SharedState> {
        validate_owner(app, user_id)?;
        Ok(SharedState {
            app: self
                .read_state(&format!("{}:a:{{{app}}}", self.prefix))
                .await?,
            user: self
                .read_state(&format!("{}:u:{{{}}}", self.prefix, pair(app, user_id)))
                .await?,
        })
    }

    async fn export_session(&self, id: &str) -> session_core::Result<SessionDump> {
        check_session_id(id)?;
        let (fields, session) = self.live(id).await?;
        let keys = self.keys(id);
        let mut c = self.conn.clone();
        let init: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(&keys[8])
            .query_async(&mut c)
            .await
            .map_err(map_err)?;
        let mut initial = StateMap::new();
        for (k, v) in init {
            initial.insert(
                k,
                serde_json::from_str(&v).map_err(|e| {
                    SessionError::serialization(format!("session {id} initial state"), e)
                })?,
            );
        }
        let events = self
            .fetch(id, &self.seqs(id, EventView::Archive).await?)
            .await?;
        let context = self.seqs(id, EventView::Context).await?;
        let shared = self.shared_state(&session.app, &session.user_id).await?;
        Ok(SessionDump {
            last_seq: fields
                .get("last_seq")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            initial_state: initial,
            events,
            context,
            shared,
            session,
        })
    }

    async fn import_session(&self, mut dump: SessionDump) -> session_core::Result<ImportOutcome> {
        dump.validate()?;
        let id = dump.session.id.clone();
        if let Ok(existing) = self.get(&id).await {
            if existing.version >= dump.session.version {
                return Ok(ImportOutcome::Unchanged);
            }
            if self.cluster {
                // The old owner's indexes live outside the session's slot.
                self.delete(&id).await?;
            }
        }
        let s = dump.session.clone();
        let fields: Vec<(&str, String)> = vec![
            ("app", s.app.clone()),
            ("user_id", s.user_id.clone()),
            ("key", s.key.clone().unwrap_or_default()),
            ("status", s.status.as_str().into()),
            ("created_at", micros(s.created_at).to_string()),
            ("updated_at", micros(s.updated_at).to_string()),
            (
                "expires_at",
                s.expires_at
                    .map(|t| micros(t).to_string())
                    .unwrap_or_default(),
            ),
            ("ttl_at", Self::ttl_at(s.expires_at)),
            ("metadata", json(&s.metadata)?),
            ("event_count", dump.events.len().to_string()),
            ("context_tokens", dump.context_tokens().to_string()),
            ("version", s.version.to_string()),
            ("last_seq", dump.last_seq.to_string()),
            (
                "next_ctx_pos",
                dump.context.len().saturating_add(1).to_string(),
            ),
        ];
        let mut args = self.base_args(&id);
        args.push(s.version.to_string());
        args.push(fields.len().to_string());
        for (k, v) in fields {
            args.push(k.to_owned());
            args.push(v);
        }
        args.extend(kv_args(&s.state)?);
        args.extend(kv_args(&dump.shared.user)?);
        args.extend(kv_args(&dump.shared.app)?);
        args.extend(kv_args(&dump.initial_state)?);
        let positions = dump.context_positions();
        let seqs: Vec<u64> = dump.events.iter().map(|e| e.seq).collect();
        let bodies = prepare_events(&mut dump.events, &Limits::unlimited())?;
        args.push(dump.events.len().to_string());
        for ((e, body), seq) in dump.events.iter().zip(&bodies).zip(seqs) {
            let split = e
                .state_delta
                .as_ref()
                .map(ScopedDelta::split)
                .unwrap_or_default();
            args.extend([
                seq.to_string(),
                e.id.clone(),
                body.clone(),
                e.token_estimate.to_string(),
                e.invocation_id.clone().unwrap_or_default(),
                if split.session.is_empty() {
                    String::new()
                } else {
                    json(&split.session)?
                },
                positions
                    .get(&seq)
                    .map(ToString::to_string)
                    .unwrap_or_default(),
            ]);
        }
        // One script: concurrent imports of the same dump write it once.
        if self.run(&self.scripts.import, &id, args).await? == Value::Int(0) {
            return Ok(ImportOutcome::Unchanged);
        }
        if self.cluster {
            let e = SessionEvent::builder(session_core::Message::user(""))
                .state_delta(
                    dump.shared
                        .user
                        .iter()
                        .chain(dump.shared.app.iter())
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                )
                .build()?;
            self.follow_up(
                &id,
                &s.app,
                &s.user_id,
                s.key.as_deref().unwrap_or_default(),
                &[&e],
            )
            .await?;
        }
        Ok(ImportOutcome::Imported)
    }
}
