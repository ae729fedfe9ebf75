//! [`PostgresRepository`]: its options ([`PostgresRepositoryBuilder`]), its
//! connection pool, and connecting by URL.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Hook, HookError, Manager, ManagerConfig, Pool, RecyclingMethod};
use session_core::plan::DEFAULT_REMEMBERED_HEADS;
use session_core::{system_clock, Limits, SessionError, SharedClock};
use tokio_postgres::NoTls;

use crate::error::{map_pool, BACKEND};
use crate::remembered::{LeftHead, RememberedHeads};
use crate::tables::{valid_schema_name, Tables};

/// Options for connecting a [`PostgresRepository`].
#[derive(Clone)]
pub struct PostgresRepositoryBuilder {
    url: String,
    schema: String,
    pool_size: usize,
    extra_roots: Vec<Vec<u8>>,
    clock: SharedClock,
    limits: Limits,
    random_page_cost: Option<f64>,
    remembered_heads: usize,
}

/// The planner cost of a random page read on the store's connections unless
/// the builder says otherwise (see [`PostgresRepositoryBuilder::random_page_cost`]).
pub const DEFAULT_RANDOM_PAGE_COST: f64 = 1.1;

impl std::fmt::Debug for PostgresRepositoryBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may hold a password: show only what follows the `@`.
        let host = self.url.rsplit('@').next().unwrap_or_default();
        f.debug_struct("PostgresRepositoryBuilder")
            .field("host", &host)
            .field("schema", &self.schema)
            .field("pool_size", &self.pool_size)
            .field("remembered_heads", &self.remembered_heads)
            .finish_non_exhaustive()
    }
}

impl PostgresRepositoryBuilder {
    /// How many sessions' heads the repository remembers from its own
    /// appends (default [`DEFAULT_REMEMBERED_HEADS`]), so the next append to
    /// one of them writes in one statement without reading the session row
    /// first. A server appending round robin to more live sessions than
    /// this reads every row: give it at least that many. 0 remembers none.
    /// URL parameter `remembered_heads=N`.
    pub fn remembered_heads(mut self, sessions: usize) -> Self {
        self.remembered_heads = sessions;
        self
    }

    /// The schema holding the tables (default `agent_session`); one per app or tenant.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// The most pooled connections (default 16).
    pub fn pool_size(mut self, n: usize) -> Self {
        self.pool_size = n.max(1);
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

    /// The planner's cost of a random page read, set on each of the store's
    /// connections (default [`DEFAULT_RANDOM_PAGE_COST`], the usual value for
    /// SSDs; `None` keeps the server's, whose default of 4 assumes spinning
    /// disks). Every read of the store walks one session's index with a
    /// `LIMIT`; with the server's default and statistics that lag behind a
    /// fast-growing session, PostgreSQL instead scans every row past the
    /// cursor and sorts them, so a page costs as much as the session is
    /// long (measured: 14 ms instead of 0.3 ms per page of 1,000 at 100,000
    /// events, a full read 50 times slower).
    pub fn random_page_cost(mut self, cost: Option<f64>) -> Self {
        self.random_page_cost = cost;
        self
    }

    /// Trusts the CA certificate(s) in `pem` besides the public web roots,
    /// for servers with a private CA (used with `sslmode=require`).
    pub fn tls_root_certificates_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.extra_roots.push(pem.into());
        self
    }

    fn tls(&self) -> session_core::Result<tokio_postgres_rustls::MakeRustlsConnect> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::CertificateDer;
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        for pem in &self.extra_roots {
            // Caller input: `InvalidInput` holds a reason, not a source, so the
            // parser's words go into the reason (as for the URL below).
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| {
                    SessionError::invalid_because("TLS root certificate", "not PEM", e)
                })?;
                roots.add(cert).map_err(|e| {
                    SessionError::invalid(
                        "TLS root certificate",
                        format!("not a CA certificate: {e}"),
                    )
                })?;
            }
        }
        let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| SessionError::backend(BACKEND, e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
    }

    /// Connects, checks the server answers, and runs migrations. TLS is
    /// used, with certificate and host name verification, when the URL says
    /// `sslmode=require`; otherwise the connection is plain.
    pub async fn connect(self) -> session_core::Result<PostgresRepository> {
        if !valid_schema_name(&self.schema) {
            return Err(SessionError::invalid(
                "schema",
                "must be 1..=63 characters of [a-z0-9_], starting with a letter or `_`",
            ));
        }
        if let Some(cost) = self.random_page_cost {
            if !(cost.is_finite() && cost > 0.0 && cost <= 1000.0) {
                return Err(SessionError::invalid(
                    "random_page_cost",
                    format!("{cost} is not a cost in (0, 1000]"),
                ));
            }
        }
        let config = tokio_postgres::Config::from_str(&self.url)
            .map_err(|e| SessionError::invalid_because("store URL", "not a PostgreSQL URL", e))?;
        let manager_config = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let manager = if config.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
            Manager::from_config(config, self.tls()?, manager_config)
        } else {
            Manager::from_config(config, NoTls, manager_config)
        };
        let mut pool = Pool::builder(manager);
        if let Some(cost) = self.random_page_cost {
            let set = format!("SET random_page_cost = {cost}");
            pool = pool.post_create(Hook::async_fn(move |client, _| {
                let set = set.clone();
                Box::pin(
                    async move { client.batch_execute(&set).await.map_err(HookError::Backend) },
                )
            }));
        }
        let pool = pool
            .max_size(self.pool_size)
            .wait_timeout(Some(Duration::from_secs(30)))
            .create_timeout(Some(Duration::from_secs(10)))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| SessionError::backend(BACKEND, e))?;
        let repo = PostgresRepository {
            tables: Tables::new(&self.schema),
            schema: self.schema,
            pool,
            clock: self.clock,
            limits: self.limits,
            remembered: Arc::new(RememberedHeads::with_capacity(self.remembered_heads)),
        };
        repo.migrate().await?;
        Ok(repo)
    }
}

/// A [`SessionRepository`](session_core::SessionRepository) on PostgreSQL.
///
/// Every write is one transaction that locks the session row
/// (`SELECT … FOR UPDATE`) and checks the version it read when it bumps
/// it; serialization failures and deadlocks are retried a bounded number of
/// times. An append planned from the head this repository's previous
/// append to the session left is one statement that writes only if that
/// head still holds (see `docs/backends/postgres.md`). Search is one `LIKE` per query term over text folded in Rust,
/// served by a `pg_trgm` GIN index; ranked search orders by `ts_rank`.
#[derive(Clone)]
pub struct PostgresRepository {
    pub(crate) pool: Pool,
    pub(crate) schema: String,
    pub(crate) tables: Tables,
    pub(crate) clock: SharedClock,
    pub(crate) limits: Limits,
    /// The heads this repository's appends left (see `remembered`).
    pub(crate) remembered: Arc<RememberedHeads<LeftHead>>,
}

impl std::fmt::Debug for PostgresRepository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresRepository")
            .field("schema", &self.schema)
            .field("pool", &self.pool.status())
            .finish_non_exhaustive()
    }
}

impl PostgresRepository {
    /// Options for the server at `url` (`postgres://user:pass@host:5432/db`).
    pub fn builder(url: impl Into<String>) -> PostgresRepositoryBuilder {
        PostgresRepositoryBuilder {
            url: url.into(),
            schema: "agent_session".to_owned(),
            pool_size: 16,
            extra_roots: Vec::new(),
            clock: system_clock(),
            limits: Limits::default(),
            random_page_cost: Some(DEFAULT_RANDOM_PAGE_COST),
            remembered_heads: DEFAULT_REMEMBERED_HEADS,
        }
    }

    /// Connects with default options and runs migrations. A `schema=NAME`
    /// query parameter in the URL picks the schema
    /// (`postgres://host/db?schema=tenant_a`), `remembered_heads=N` sets
    /// [`PostgresRepositoryBuilder::remembered_heads`]; the other parameters
    /// are the server's connection settings (`sslmode`, ...).
    pub async fn connect(url: impl Into<String>) -> session_core::Result<Self> {
        Self::connect_with_limits(url, Limits::default()).await
    }

    /// [`Self::connect`] with `limits` (the facade passes a URL's quota settings).
    pub async fn connect_with_limits(
        url: impl Into<String>,
        limits: Limits,
    ) -> session_core::Result<Self> {
        let (url, ours) =
            session_core::take_url_params(&url.into(), &["schema", "remembered_heads"]);
        let mut builder = Self::builder(url).limits(limits);
        for (name, value) in ours {
            builder = if name == "schema" {
                builder.schema(value)
            } else {
                let sessions = session_core::whole_url_param(&name, &value)?;
                builder.remembered_heads(usize::try_from(sessions).unwrap_or(usize::MAX))
            };
        }
        builder.connect().await
    }

    /// The schema this repository uses.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// A pooled connection.
    pub(crate) async fn client(&self) -> session_core::Result<deadpool_postgres::Client> {
        self.pool.get().await.map_err(map_pool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bad_schema_and_url_are_invalid_input() {
        let err = PostgresRepository::builder("postgres://127.0.0.1/x")
            .schema("Robert'); DROP TABLE students;--")
            .connect()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), session_core::ErrorKind::InvalidInput);
        let err = PostgresRepository::connect("postgres://[::1")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), session_core::ErrorKind::InvalidInput);
        let err = PostgresRepository::connect("postgres://127.0.0.1/x?remembered_heads=many")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), session_core::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("remembered_heads"), "{err}");
    }

    /// A refused connection from the pool: `Unavailable`, with the driver
    /// error itself (not the pool's wrapper) as the source.
    #[tokio::test]
    async fn unreachable_server_is_unavailable_with_the_driver_error_as_source() {
        let err = PostgresRepository::connect("postgres://postgres@127.0.0.1:1/x?schema=t_x")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), session_core::ErrorKind::Unavailable);
        assert!(err.is_retryable());
        let source = std::error::Error::source(&err).expect("a source");
        assert!(
            source.downcast_ref::<tokio_postgres::Error>().is_some(),
            "{}",
            err.report()
        );
    }

    /// Every pooled connection plans with the configured random page cost
    /// (what keeps keyset pages on the index, see the builder), `None`
    /// leaves the server's, and a cost outside (0, 1000] is `InvalidInput`.
    #[tokio::test]
    async fn connections_plan_with_the_configured_page_cost() {
        let url = std::env::var("POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        let show = |repo: PostgresRepository| async move {
            let c = repo.pool.get().await.unwrap();
            let cost: String = c
                .query_one("SHOW random_page_cost", &[])
                .await
                .unwrap()
                .get(0);
            repo.drop_schema().await.unwrap();
            cost
        };
        let schema = || format!("t_{}", uuid::Uuid::new_v4().simple());
        let repo = match PostgresRepository::builder(&url)
            .schema(schema())
            .connect()
            .await
        {
            Ok(r) => r,
            Err(e) => {
                assert!(
                    std::env::var("CI").is_err(),
                    "no PostgreSQL at {url} in CI: {e}"
                );
                eprintln!("skipped: no PostgreSQL at {url}: {e}");
                return;
            }
        };
        assert_eq!(show(repo).await, DEFAULT_RANDOM_PAGE_COST.to_string());
        let server_default = PostgresRepository::builder(&url)
            .schema(schema())
            .random_page_cost(None)
            .connect()
            .await
            .unwrap();
        let server: String = {
            let (c, conn) = tokio_postgres::connect(&url, NoTls).await.unwrap();
            tokio::spawn(conn);
            c.query_one("SHOW random_page_cost", &[])
                .await
                .unwrap()
                .get(0)
        };
        assert_eq!(show(server_default).await, server);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e6] {
            let err = PostgresRepository::builder(&url)
                .random_page_cost(Some(bad))
                .connect()
                .await
                .unwrap_err();
            assert_eq!(err.kind(), session_core::ErrorKind::InvalidInput, "{bad}");
        }
    }
}
