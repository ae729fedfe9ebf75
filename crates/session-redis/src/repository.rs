//! [`RedisRepository`]: the parts it is composed of, and
//! [`RedisRepositoryBuilder`], the options it connects with.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use redis::aio::ConnectionManager;
use session_core::plan::DEFAULT_REMEMBERED_HEADS;
use session_core::{system_clock, Limits, SessionError, SharedClock};

use crate::conn::Conn;
use crate::error::{bad_url, map_err};
use crate::events::EventLog;
use crate::gate::Gates;
use crate::heads::Heads;
use crate::indexes::Indexes;
use crate::keys::KeySpace;
use crate::scripts::Scripts;
use crate::search_index::SearchIndex;
use crate::shared::SharedScopes;
use crate::write::Writer;

/// A [`SessionRepository`](session_core::SessionRepository) on Redis, standalone or cluster.
///
/// Every key of one session carries the session id as a hash tag, so one
/// session lives in one cluster slot. A write reads the session's head
/// (and which ids of its batch it holds) in one round trip, plans in
/// `session_core::plan`, and persists the plan with one Lua script that
/// first checks the head is unchanged (compare-and-swap; on a standalone
/// server the script also writes the shared scopes and the activity
/// indexes). Expiry maps to `PEXPIREAT` on every key of the session.
///
/// It is a composition of parts, each owning the connection handle, keys
/// and scripts it needs: the session heads, the event log, the activity
/// and expiry indexes, the shared scopes, the search index, the writer
/// that runs the write scripts, and the per-session write turns.
#[derive(Clone)]
pub struct RedisRepository {
    pub(crate) heads: Heads,
    pub(crate) events: EventLog,
    pub(crate) indexes: Indexes,
    pub(crate) shared: SharedScopes,
    pub(crate) search: SearchIndex,
    pub(crate) writer: Writer,
    pub(crate) gates: Arc<Gates>,
    pub(crate) cluster: bool,
    pub(crate) clock: SharedClock,
    pub(crate) limits: Limits,
}

impl std::fmt::Debug for RedisRepository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRepository")
            .field("prefix", &self.heads.prefix())
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
    remembered_heads: usize,
}

impl std::fmt::Debug for RedisRepositoryBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRepositoryBuilder")
            .field("nodes", &self.nodes.len())
            .field("cluster", &self.cluster)
            .field("prefix", &self.prefix)
            .field("remembered_heads", &self.remembered_heads)
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

    /// How many sessions' heads the repository remembers from its own
    /// appends (default [`DEFAULT_REMEMBERED_HEADS`]), so the next append to
    /// one of them plans without reading its head first. A server appending
    /// round robin to more live sessions than this reads every head: give
    /// it at least that many (a head takes about a kilobyte). 0 remembers
    /// none. URL parameter `remembered_heads=N`.
    pub fn remembered_heads(mut self, sessions: usize) -> Self {
        self.remembered_heads = sessions;
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
        if self.cluster && self.limits.max_user_sessions.is_some() {
            // A user's sessions live under many hash tags: no script can
            // count them atomically with a create.
            return Err(SessionError::Unsupported {
                backend: "redis",
                operation: "the sessions-per-user quota on Redis Cluster",
            });
        }
        let conn = if self.cluster {
            let client = redis::cluster::ClusterClient::new(self.nodes.clone()).map_err(bad_url)?;
            Conn::Cluster(client.get_async_connection().await.map_err(map_err)?)
        } else {
            let url = self.nodes.first().cloned().unwrap_or_default();
            let client = redis::Client::open(url.as_str()).map_err(bad_url)?;
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
        let mut c = conn.clone();
        redis::cmd("PING")
            .query_async::<String>(&mut c)
            .await
            .map_err(map_err)?;
        let keys = KeySpace::new(self.prefix);
        let scripts = Arc::new(Scripts::load());
        let events = EventLog::new(conn.clone(), keys.clone());
        let indexes = Indexes::new(conn.clone(), keys.clone());
        let shared = SharedScopes::new(conn.clone(), keys.clone());
        Ok(RedisRepository {
            heads: Heads::new(
                conn.clone(),
                keys.clone(),
                scripts.clone(),
                self.clock.clone(),
                self.remembered_heads,
            ),
            search: SearchIndex::new(
                conn.clone(),
                keys.clone(),
                scripts.clone(),
                self.clock.clone(),
                events.clone(),
            ),
            writer: Writer::new(
                conn,
                keys,
                scripts,
                self.cluster,
                &self.limits,
                indexes.clone(),
                shared.clone(),
            ),
            events,
            indexes,
            shared,
            gates: Arc::default(),
            cluster: self.cluster,
            clock: self.clock,
            limits: self.limits,
        })
    }
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
            remembered_heads: DEFAULT_REMEMBERED_HEADS,
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
            remembered_heads: DEFAULT_REMEMBERED_HEADS,
        }
    }

    /// Connects to `redis://…` (standalone) or `redis+cluster://host1:port,host2:port` (cluster).
    ///
    /// `?prefix=NAME` sets the key prefix (default `as`), so several
    /// applications can share one database; `remembered_heads=N` sets
    /// [`RedisRepositoryBuilder::remembered_heads`]; any other parameter is
    /// refused.
    pub async fn from_url(url: &str) -> session_core::Result<Self> {
        Self::from_url_with_limits(url, Limits::default()).await
    }

    /// [`Self::from_url`] with `limits` (the facade passes a URL's quota settings).
    pub async fn from_url_with_limits(url: &str, limits: Limits) -> session_core::Result<Self> {
        let (base, params) =
            session_core::split_url_query(url, "redis", &["prefix", "remembered_heads"])?;
        let mut builder = if let Some(rest) = base.strip_prefix("redis+cluster://") {
            let nodes = rest.split(',').map(|n| format!("redis://{n}")).collect();
            Self::cluster_builder(nodes)
        } else {
            Self::builder(base)
        };
        for (name, value) in params {
            builder = if name == "prefix" {
                builder.prefix(value)
            } else {
                let sessions = session_core::whole_url_param(&name, &value)?;
                builder.remembered_heads(usize::try_from(sessions).unwrap_or(usize::MAX))
            };
        }
        builder.limits(limits).connect().await
    }

    /// The time now, by this repository's clock.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }
}
