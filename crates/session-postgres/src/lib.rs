#![doc = include_str!("../README.md")]
//!
//! # Layout
//!
//! - `lib.rs`: the builder, [`PostgresRepository`] and connecting by URL;
//! - `error.rs`: driver and pool errors mapped onto `SessionError`;
//! - `repo.rs`: the `SessionRepository` implementation (read the head, plan, persist);
//! - `schema.rs`: table names, migrations, tear-down;
//! - `sessions.rs`, `events.rs`, `shared.rs`: the statements on each table;
//! - `search.rs`: literal and ranked search;
//! - `sql.rs`: placeholders and stored-value conversions;
//! - `quiet.rs`: statements whose parameters never reach a log.

mod error;
mod events;
mod quiet;
mod repo;
mod schema;
mod search;
mod sessions;
mod shared;
mod sql;

use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use session_core::{system_clock, Limits, SessionError, SharedClock};
use tokio_postgres::NoTls;

use crate::error::map_pool;
use crate::schema::{valid_schema_name, Tables};

pub(crate) const BACKEND: &str = "postgres";

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 2;

/// Options for connecting a [`PostgresRepository`].
#[derive(Clone)]
pub struct PostgresRepositoryBuilder {
    url: String,
    schema: String,
    pool_size: usize,
    extra_roots: Vec<Vec<u8>>,
    clock: SharedClock,
    limits: Limits,
}

impl std::fmt::Debug for PostgresRepositoryBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may hold a password: show only what follows the `@`.
        let host = self.url.rsplit('@').next().unwrap_or_default();
        f.debug_struct("PostgresRepositoryBuilder")
            .field("host", &host)
            .field("schema", &self.schema)
            .field("pool_size", &self.pool_size)
            .finish_non_exhaustive()
    }
}

impl PostgresRepositoryBuilder {
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
        let pool = Pool::builder(manager)
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
/// times. Search is one `LIKE` per query term over text folded in Rust,
/// served by a `pg_trgm` GIN index; ranked search orders by `ts_rank`.
#[derive(Clone)]
pub struct PostgresRepository {
    pool: Pool,
    schema: String,
    tables: Tables,
    clock: SharedClock,
    limits: Limits,
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
        }
    }

    /// Connects with default options and runs migrations. A `schema=NAME`
    /// query parameter in the URL picks the schema
    /// (`postgres://host/db?schema=tenant_a`).
    pub async fn connect(url: impl Into<String>) -> session_core::Result<Self> {
        let url = url.into();
        let (url, schema) = split_schema_param(&url);
        let mut builder = Self::builder(url);
        if let Some(schema) = schema {
            builder = builder.schema(schema);
        }
        builder.connect().await
    }

    /// The schema this repository uses.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    async fn client(&self) -> session_core::Result<deadpool_postgres::Client> {
        self.pool.get().await.map_err(map_pool)
    }
}

/// Removes a `schema=` parameter from a URL's query string and returns it.
fn split_schema_param(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), None);
    };
    let mut schema = None;
    let rest: Vec<&str> = query
        .split('&')
        .filter(|kv| match kv.strip_prefix("schema=") {
            Some(v) => {
                schema = Some(v.to_owned());
                false
            }
            None => !kv.is_empty(),
        })
        .collect();
    if rest.is_empty() {
        (base.to_owned(), schema)
    } else {
        (format!("{base}?{}", rest.join("&")), schema)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_param_is_taken_out_of_the_url() {
        assert_eq!(
            split_schema_param("postgres://h/db?schema=t1&sslmode=disable"),
            (
                "postgres://h/db?sslmode=disable".to_owned(),
                Some("t1".to_owned())
            )
        );
        assert_eq!(
            split_schema_param("postgres://h/db"),
            ("postgres://h/db".to_owned(), None)
        );
        assert_eq!(
            split_schema_param("postgres://h/db?schema=x"),
            ("postgres://h/db".to_owned(), Some("x".to_owned()))
        );
    }

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
}
