#![doc = include_str!("../README.md")]

mod quiet;
mod store;

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use session_core::{
    check_session_id, check_unique_ids, prepare_events, system_clock, validate_id, AppendOutcome,
    Capabilities, EventFilter, ImportOutcome, Limits, NewSession, Page, RewindOutcome, SearchHit,
    SearchQuery, Session, SessionDump, SessionError, SessionEvent, SessionQuery, SessionRepository,
    SessionUpdate, SharedClock, SharedState,
};
use tokio_postgres::error::SqlState;
use tokio_postgres::NoTls;

use crate::store::{StoreError, Tables};

pub(crate) const BACKEND: &str = "postgres";

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 1;

const MIGRATIONS: &[(i64, &str)] = &[(1, include_str!("../migrations/0001_init.sql"))];

/// How many times a transaction that lost a serialization or deadlock race is retried.
const MAX_ATTEMPTS: u32 = 5;

/// An error and all its causes on one line ("connecting: TLS handshake: unknown issuer").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// Maps an engine error onto the kinds callers act on.
fn map_pg(e: &tokio_postgres::Error) -> SessionError {
    let msg = error_chain(e);
    match e.code() {
        Some(c)
            if *c == SqlState::T_R_SERIALIZATION_FAILURE
                || *c == SqlState::T_R_DEADLOCK_DETECTED =>
        {
            SessionError::unavailable(BACKEND, msg)
        }
        Some(c)
            if *c == SqlState::ADMIN_SHUTDOWN
                || *c == SqlState::CRASH_SHUTDOWN
                || *c == SqlState::CANNOT_CONNECT_NOW
                || *c == SqlState::TOO_MANY_CONNECTIONS
                || c.code().starts_with("08") =>
        {
            SessionError::unavailable(BACKEND, msg)
        }
        // No SQLSTATE and no server error: the connection itself failed.
        None if e.is_closed() || e.as_db_error().is_none() => {
            SessionError::unavailable(BACKEND, msg)
        }
        _ => SessionError::backend(BACKEND, msg),
    }
}

fn map_store(e: StoreError) -> SessionError {
    match e {
        StoreError::Pg(e) => map_pg(&e),
        StoreError::Session(e) => e,
    }
}

/// Whether the connection behind an error is unusable (closed, killed by the server).
fn connection_broken(e: &StoreError) -> bool {
    match e {
        StoreError::Pg(pg) => {
            pg.is_closed()
                || pg.as_db_error().is_none()
                || pg
                    .code()
                    .is_some_and(|c| *c == SqlState::ADMIN_SHUTDOWN || c.code().starts_with("08"))
        }
        StoreError::Session(_) => false,
    }
}

/// Finishes a pooled call: a connection the error shows broken leaves the pool.
fn settle<T>(
    client: deadpool_postgres::Client,
    result: Result<T, StoreError>,
) -> Result<T, StoreError> {
    if let Err(e) = &result {
        if connection_broken(e) {
            drop(deadpool_postgres::Object::take(client));
        }
    }
    result
}

fn retryable(e: &StoreError) -> bool {
    matches!(e, StoreError::Pg(pg) if pg.code().is_some_and(|c| *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED))
}

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
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert =
                    cert.map_err(|e| SessionError::invalid("TLS root certificate", e.to_string()))?;
                roots
                    .add(cert)
                    .map_err(|e| SessionError::invalid("TLS root certificate", e.to_string()))?;
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
        if self.schema.is_empty()
            || self.schema.len() > 63
            || !self
                .schema
                .starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            || !self
                .schema
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            return Err(SessionError::invalid(
                "schema",
                "must be 1..=63 characters of [a-z0-9_], starting with a letter or `_`",
            ));
        }
        let config = tokio_postgres::Config::from_str(&self.url).map_err(|e| {
            SessionError::invalid("store URL", format!("not a PostgreSQL URL: {e}"))
        })?;
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

/// A [`SessionRepository`] on PostgreSQL.
///
/// Every write is one transaction that locks the session row
/// (`SELECT … FOR UPDATE`) and checks the version it read when it bumps
/// it; serialization failures and deadlocks are retried a bounded number of
/// times. Search is a case-insensitive literal `LIKE` over text folded in
/// Rust, served by a `pg_trgm` GIN index; ranked search uses `tsvector`.
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
        self.pool
            .get()
            .await
            .map_err(|e| SessionError::unavailable(BACKEND, error_chain(&e)))
    }

    /// Brings the schema up to [`SCHEMA_VERSION`]; idempotent, and safe when
    /// several processes start at once (a transaction-scoped advisory lock serializes them).
    pub async fn migrate(&self) -> session_core::Result<i64> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| map_pg(&e))?;
        // One lock for every schema: the pg_trgm extension is database-wide.
        let lock_key = "agent_session:migrate";
        let run = async {
            tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&lock_key])
                .await?;
            tx.batch_execute(&format!(
                "CREATE SCHEMA IF NOT EXISTS \"{s}\"; \
                 CREATE TABLE IF NOT EXISTS \"{s}\".schema_version (version BIGINT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
                s = self.schema
            ))
            .await?;
            let current: Option<i64> = tx
                .query_one(
                    &format!(
                        "SELECT MAX(version) FROM \"{}\".schema_version",
                        self.schema
                    ),
                    &[],
                )
                .await?
                .try_get(0)?;
            let current = current.unwrap_or(0);
            if current > SCHEMA_VERSION {
                return Err(StoreError::Session(SessionError::backend(
                    BACKEND,
                    format!(
                        "schema {} has version {current}, newer than the {SCHEMA_VERSION} this build knows; upgrade agent-session",
                        self.schema
                    ),
                )));
            }
            for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
                tx.batch_execute(&sql.replace("__SCHEMA__", &format!("\"{}\"", self.schema)))
                    .await?;
                tx.execute(
                    &format!(
                        "INSERT INTO \"{}\".schema_version (version) VALUES ($1)",
                        self.schema
                    ),
                    &[version],
                )
                .await?;
                tracing::info!(backend = BACKEND, schema = %self.schema, version, "applied schema migration");
            }
            Ok(())
        };
        run.await.map_err(map_store)?;
        tx.commit().await.map_err(|e| map_pg(&e))?;
        Ok(SCHEMA_VERSION)
    }

    /// Drops the schema and everything in it. For tests and tear-down.
    pub async fn drop_schema(&self) -> session_core::Result<()> {
        let client = self.client().await?;
        client
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
                self.schema
            ))
            .await
            .map_err(|e| map_pg(&e))
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

/// Runs one write transaction, retrying serialization failures and deadlocks.
macro_rules! write_tx {
    ($self:ident, |$tx:ident, $now:ident| $body:expr) => {{
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut client = $self.client().await?;
            let $now = $self.clock.now();
            let result: Result<_, StoreError> = async {
                let $tx = client.transaction().await?;
                let out = $body.await?;
                $tx.commit().await?;
                Ok(out)
            }
            .await;
            let result = settle(client, result);
            match result {
                Err(e) if retryable(&e) && attempt < MAX_ATTEMPTS => {
                    tracing::debug!(
                        backend = BACKEND,
                        attempt,
                        "retrying a transaction that lost a race"
                    );
                    tokio::time::sleep(Duration::from_millis(5 * u64::from(attempt))).await;
                }
                other => break other.map_err(map_store),
            }
        }
    }};
}

#[async_trait]
impl SessionRepository for PostgresRepository {
    fn capabilities(&self) -> Capabilities {
        Capabilities::basic(BACKEND)
            .with_ranked_search()
            .with_durable()
            .with_multi_process()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "create", app = %session.app, session_id = %session.id))]
    async fn create(&self, session: NewSession) -> session_core::Result<Session> {
        session.validate(self.clock.now())?;
        let t = &self.tables;
        write_tx!(self, |tx, now| store::create(&tx, t, &session, now))
    }

    async fn get(&self, id: &str) -> session_core::Result<Session> {
        check_session_id(id)?;
        let c = self.client().await?;
        let result = store::get(&c, &self.tables, id, self.clock.now()).await;
        settle(c, result).map_err(map_store)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "update", session_id = %id))]
    async fn update(&self, id: &str, update: SessionUpdate) -> session_core::Result<Session> {
        check_session_id(id)?;
        update.validate(self.clock.now())?;
        let t = &self.tables;
        write_tx!(self, |tx, now| store::update(&tx, t, id, &update, now))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "delete", session_id = %id))]
    async fn delete(&self, id: &str) -> session_core::Result<bool> {
        check_session_id(id)?;
        let t = &self.tables;
        write_tx!(self, |tx, _now| store::delete(&tx, t, id))
    }

    async fn list(&self, query: &SessionQuery) -> session_core::Result<Page<Session>> {
        query.check(&self.limits)?;
        let c = self.client().await?;
        let result = store::list(&c, &self.tables, query, self.clock.now()).await;
        settle(c, result).map_err(map_store)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "purge_expired"))]
    async fn purge_expired(&self, now: DateTime<Utc>) -> session_core::Result<u64> {
        let t = &self.tables;
        write_tx!(self, |tx, _clock_now| store::purge_expired(&tx, t, now))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "append", session_id = %id, events = events.len()))]
    async fn append(
        &self,
        id: &str,
        mut events: Vec<SessionEvent>,
    ) -> session_core::Result<AppendOutcome> {
        check_session_id(id)?;
        let bodies = prepare_events(&mut events, &self.limits)?;
        let t = &self.tables;
        write_tx!(self, |tx, now| store::append(
            &tx, t, id, &events, &bodies, now
        ))
    }

    async fn events(
        &self,
        id: &str,
        filter: &EventFilter,
    ) -> session_core::Result<Page<SessionEvent>> {
        check_session_id(id)?;
        filter.check(&self.limits)?;
        let c = self.client().await?;
        let result = store::events(&c, &self.tables, id, filter, self.clock.now()).await;
        settle(c, result).map_err(map_store)
    }

    async fn event_version(&self, id: &str) -> session_core::Result<u64> {
        check_session_id(id)?;
        let c = self.client().await?;
        let result = store::event_version(&c, &self.tables, id, self.clock.now()).await;
        settle(c, result).map_err(map_store)
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
        let t = &self.tables;
        write_tx!(self, |tx, now| store::replace_context(
            &tx,
            t,
            id,
            &events,
            &bodies,
            expected_version,
            now
        ))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "rewind", session_id = %id))]
    async fn rewind(
        &self,
        id: &str,
        before_invocation_id: &str,
    ) -> session_core::Result<RewindOutcome> {
        check_session_id(id)?;
        validate_id("invocation id", before_invocation_id)?;
        let t = &self.tables;
        write_tx!(self, |tx, now| store::rewind(
            &tx,
            t,
            id,
            before_invocation_id,
            now
        ))
    }

    async fn search(&self, query: &SearchQuery) -> session_core::Result<Page<SearchHit>> {
        query.check(&self.limits)?;
        let c = self.client().await?;
        let result = store::search(&c, &self.tables, query, self.clock.now()).await;
        settle(c, result).map_err(map_store)
    }

    async fn export_session(&self, id: &str) -> session_core::Result<SessionDump> {
        check_session_id(id)?;
        let c = self.client().await?;
        let result = store::export_session(&c, &self.tables, id, self.clock.now()).await;
        settle(c, result).map_err(map_store)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "import", session_id = %dump.session.id))]
    async fn import_session(&self, mut dump: SessionDump) -> session_core::Result<ImportOutcome> {
        dump.validate()?;
        let seqs: Vec<u64> = dump.events.iter().map(|e| e.seq).collect();
        let bodies = prepare_events(&mut dump.events, &Limits::unlimited())?;
        for (e, seq) in dump.events.iter_mut().zip(seqs) {
            e.seq = seq;
        }
        let t = &self.tables;
        write_tx!(self, |tx, now| store::import_session(
            &tx, t, &dump, &bodies, now
        ))
    }

    async fn shared_state(&self, app: &str, user_id: &str) -> session_core::Result<SharedState> {
        session_core::validate_owner(app, user_id)?;
        let c = self.client().await?;
        let result = store::shared_state(&c, &self.tables, app, user_id).await;
        settle(c, result).map_err(map_store)
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
}
