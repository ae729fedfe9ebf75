#![doc = include_str!("../README.md")]

use std::sync::Arc;

pub use session_core::*;
/// The HTTP API's wire shapes (request bodies, problem documents), shared by every face.
pub use session_wire as wire;

/// The session service as named JSON operations, for the language bindings (feature `compaction`).
#[cfg(feature = "compaction")]
pub mod ops;

#[cfg(feature = "remote")]
pub use session_client::RemoteRepository;
/// Compaction: triggers, strategies, summarizers, token estimators (feature `compaction`).
#[cfg(feature = "compaction")]
pub use session_compaction as compaction;
/// Encryption at rest over any store (feature `encryption`).
#[cfg(feature = "encryption")]
pub use session_encryption as encryption;
#[cfg(feature = "es")]
pub use session_es::{EsRepository, EsRepositoryBuilder, Refresh};
#[cfg(feature = "fs")]
pub use session_fs::{FsRepository, FsRepositoryBuilder};
#[cfg(feature = "postgres")]
pub use session_postgres::{PostgresRepository, PostgresRepositoryBuilder};
#[cfg(feature = "redis")]
pub use session_redis::{RedisRepository, RedisRepositoryBuilder};
/// The HTTP server over any store (feature `server`).
#[cfg(feature = "server")]
pub use session_server as server;
#[cfg(feature = "sqlite")]
pub use session_sqlite::{SqliteRepository, SqliteRepositoryBuilder, Synchronous};

/// A store URL's scheme and the cargo feature (and crate) that serves it.
const BACKENDS: &[(&[&str], &str, &str)] = &[
    (&["sqlite"], "sqlite", "session-sqlite"),
    (&["fs", "file"], "fs", "session-fs"),
    (
        &["redis", "rediss", "redis+cluster"],
        "redis",
        "session-redis",
    ),
    (&["postgres", "postgresql"], "postgres", "session-postgres"),
    (&["es+http", "es+https"], "es", "session-es"),
    (&["http", "https"], "remote", "session-client"),
];

/// The scheme of a store URL: what precedes `://` (or `:` for `sqlite::memory:`).
fn scheme(url: &str) -> Option<&str> {
    if let Some((scheme, _)) = url.split_once("://") {
        return Some(scheme);
    }
    url.split_once(':').map(|(scheme, _)| scheme)
}

/// Opens the store a URL names and returns it as a shared repository.
///
/// `memory://` is always available. The other schemes belong to backends
/// behind cargo features; a scheme whose feature is not compiled in is an
/// `InvalidInput` error naming the feature to enable.
///
/// The store comes wrapped in [`layer::TracingLayer`] (a span per call with
/// its duration and outcome), remote stores (Redis, PostgreSQL,
/// Elasticsearch) also in [`layer::RetryLayer`] (jittered retries of the
/// calls that are safe to repeat), and every store in
/// [`layer::SealedGuard`]: opened without a keyring, it refuses to read or
/// write the content of sessions the encryption layer sealed, with an
/// `Encryption` error that says to give the keyring. [`open_encrypted`]
/// opens a store behind the encryption layer; [`open_unlayered`] returns
/// the bare store.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = agent_session::open("memory://").await.unwrap();
/// assert_eq!(store.capabilities().backend, "memory");
/// let err = agent_session::open("nosuch://x").await.unwrap_err();
/// assert_eq!(err.kind(), agent_session::ErrorKind::InvalidInput);
/// # });
/// ```
pub async fn open(url: &str) -> Result<Arc<dyn SessionRepository>> {
    let store = open_layered(url).await?;
    Ok(Arc::new(layer::TracingLayer::new(layer::SealedGuard::new(
        store,
    ))))
}

/// Opens the store a URL names behind the encryption layer, which seals
/// what it writes and opens what it reads with `keyring`: [`open`]'s
/// layers, with [`encryption::EncryptedRepository`] in place of the guard.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use agent_session::encryption::Keyring;
/// let ring = Keyring::generate("k1").unwrap();
/// let store = agent_session::open_encrypted("memory://", ring).await.unwrap();
/// assert_eq!(store.inner().capabilities().backend, "memory");
/// # });
/// ```
#[cfg(feature = "encryption")]
pub async fn open_encrypted(
    url: &str,
    keyring: encryption::Keyring,
) -> Result<encryption::EncryptedRepository<Arc<dyn SessionRepository>>> {
    let store: Arc<dyn SessionRepository> =
        Arc::new(layer::TracingLayer::new(open_layered(url).await?));
    Ok(encryption::EncryptedRepository::new(store, keyring))
}

/// The store with its retry layer where it has one.
async fn open_layered(url: &str) -> Result<Arc<dyn SessionRepository>> {
    let (store, remote) = open_store(url).await?;
    Ok(if remote {
        Arc::new(layer::RetryLayer::new(store))
    } else {
        store
    })
}

/// Opens the store a URL names without any layer: no tracing spans, no
/// retries. For benchmarks that compare the engine with the raw driver,
/// and for callers that stack their own [`layer`]s.
pub async fn open_unlayered(url: &str) -> Result<Arc<dyn SessionRepository>> {
    open_store(url).await.map(|(store, _)| store)
}

/// The store and whether it is remote (reached over a network, so worth
/// retrying when briefly unavailable).
#[cfg_attr(
    not(any(
        feature = "sqlite",
        feature = "fs",
        feature = "redis",
        feature = "postgres",
        feature = "es",
        feature = "remote"
    )),
    allow(clippy::unused_async)
)] // backends connect asynchronously
async fn open_store(url: &str) -> Result<(Arc<dyn SessionRepository>, bool)> {
    let (url, limits) = limits_from_url(url, Limits::default())?;
    let url = url.as_str();
    let Some(scheme) = scheme(url) else {
        return Err(SessionError::invalid(
            "store URL",
            format!("{url:?} has no scheme; try memory://, sqlite://sessions.db, fs://./data, redis://127.0.0.1:6379, postgres://host/db or es+http://host:9200"),
        ));
    };
    let scheme = scheme.to_ascii_lowercase();
    if scheme == "memory" {
        return Ok((
            InMemoryRepository::new().with_limits(limits).shared(),
            false,
        ));
    }
    #[cfg(feature = "sqlite")]
    if scheme == "sqlite" {
        return Ok((
            Arc::new(SqliteRepository::from_url_with_limits(url, limits).await?),
            false,
        ));
    }
    #[cfg(feature = "fs")]
    if scheme == "fs" || scheme == "file" {
        return Ok((
            Arc::new(FsRepository::from_url_with_limits(url, limits).await?),
            false,
        ));
    }
    #[cfg(feature = "redis")]
    if scheme == "redis" || scheme == "rediss" || scheme == "redis+cluster" {
        return Ok((
            Arc::new(RedisRepository::from_url_with_limits(url, limits).await?),
            true,
        ));
    }
    #[cfg(feature = "postgres")]
    if scheme == "postgres" || scheme == "postgresql" {
        return Ok((
            Arc::new(PostgresRepository::connect_with_limits(url, limits).await?),
            true,
        ));
    }
    #[cfg(feature = "es")]
    if scheme == "es+http" || scheme == "es+https" {
        return Ok((
            Arc::new(
                EsRepository::builder_from_url(url)?
                    .limits(limits)
                    .connect()
                    .await?,
            ),
            true,
        ));
    }
    #[cfg(feature = "remote")]
    if scheme == "http" || scheme == "https" {
        if limits != Limits::default() {
            return Err(SessionError::invalid(
                "store URL",
                "a served store takes its limits from the server's store URL, not the client's",
            ));
        }
        return Ok((Arc::new(RemoteRepository::connect(url).await?), true));
    }
    if let Some((_, feature, krate)) = BACKENDS
        .iter()
        .find(|(s, _, _)| s.contains(&scheme.as_str()))
    {
        return Err(SessionError::invalid(
            "store URL",
            format!(
                "the {scheme}:// store needs the `{feature}` feature of agent-session \
                 (backend crate {krate}), which is not compiled into this build"
            ),
        ));
    }
    let known: Vec<String> = std::iter::once("memory")
        .chain(
            BACKENDS
                .iter()
                .flat_map(|(schemes, _, _)| schemes.iter().copied()),
        )
        .map(|s| format!("{s}://"))
        .collect();
    Err(SessionError::invalid(
        "store URL",
        format!("unknown scheme {scheme:?}; known: {}", known.join(", ")),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(not(feature = "es"))]
    #[tokio::test]
    async fn disabled_backend_names_its_feature() {
        let err = open("es+http://localhost:9200").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(err.to_string().contains("`es` feature"), "{err}");
    }

    #[cfg(feature = "es")]
    #[tokio::test]
    async fn es_scheme_connects_and_reports_an_absent_server_as_unavailable() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let err = open(&format!("es+http://127.0.0.1:{port}?prefix=t"))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
        let err = open("es+http://127.0.0.1:9?refresh=never")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    }

    #[tokio::test]
    async fn unknown_and_missing_schemes_are_invalid_input() {
        for url in ["ftp://x", "no-scheme-here", ""] {
            let err = open(url).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{url}");
        }
    }

    /// A misspelt or unknown URL option is an error naming it, never ignored
    /// (a Redis `?prefx=` would silently share keys with another app).
    #[tokio::test(flavor = "multi_thread")]
    async fn unknown_url_parameters_are_invalid_input() {
        let dir = tempfile::tempdir().unwrap();
        let mut urls = Vec::new();
        if cfg!(feature = "sqlite") {
            urls.push(format!(
                "sqlite://{}?mode=ro",
                dir.path().join("s.db").display()
            ));
        }
        if cfg!(feature = "fs") {
            urls.push(format!("fs://{}?sync=off", dir.path().join("f").display()));
        }
        if cfg!(feature = "redis") {
            urls.push("redis://127.0.0.1:9?prefx=a".to_owned());
        }
        for url in urls {
            let err = open(&url).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{url}: {err}");
            let name = url
                .rsplit('?')
                .next()
                .and_then(|q| q.split('=').next())
                .unwrap();
            assert!(err.to_string().contains(name), "{url}: {err}");
        }
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test(flavor = "multi_thread")]
    async fn sqlite_scheme_opens_a_file_that_persists() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("s.db").display());
        let a = open(&url).await.unwrap();
        assert_eq!(a.capabilities().backend, "sqlite");
        a.create(
            NewSession::new("app", "u", chrono::Utc::now())
                .unwrap()
                .with_id("s")
                .unwrap(),
        )
        .await
        .unwrap();
        drop(a);
        let b = open(&url).await.unwrap();
        assert_eq!(b.get(&"s".parse().unwrap()).await.unwrap().user_id, "u");
        let mem = open("sqlite::memory:").await.unwrap();
        assert!(mem.get(&"s".parse().unwrap()).await.is_err());
    }

    #[cfg(not(feature = "sqlite"))]
    #[tokio::test]
    async fn sqlite_without_its_feature_names_it() {
        let err = open("sqlite://x.db").await.unwrap_err();
        assert!(err.to_string().contains("`sqlite` feature"), "{err}");
    }

    #[tokio::test]
    async fn memory_scheme_opens_a_fresh_store() {
        let a = open("memory://").await.unwrap();
        let b = open("MEMORY://").await.unwrap();
        a.create(
            NewSession::new("app", "u", chrono::Utc::now())
                .unwrap()
                .with_id("s")
                .unwrap(),
        )
        .await
        .unwrap();
        assert!(
            b.get(&"s".parse().unwrap()).await.is_err(),
            "each open is its own store"
        );
    }
}

/// The Rust examples of the repository's documentation, compiled (and run
/// where they need nothing outside) as doctests of this crate, so none of
/// them drifts from the API. `docs/backends/new.md` shows
/// `crates/session-testkit/tests/guide_store.rs`, which is compiled and
/// run as that crate's test.
#[cfg(doctest)]
mod documentation {
    #[doc = include_str!("../../../README.md")]
    struct Readme;
    #[doc = include_str!("../../../docs/agents.md")]
    struct Agents;
    #[doc = include_str!("../../../docs/compaction.md")]
    struct Compaction;
    #[doc = include_str!("../../../docs/concepts.md")]
    struct Concepts;
    #[doc = include_str!("../../../docs/search.md")]
    struct Search;
    #[cfg(feature = "es")]
    #[doc = include_str!("../../../docs/backends/elasticsearch.md")]
    struct Elasticsearch;
    #[cfg(feature = "postgres")]
    #[doc = include_str!("../../../docs/backends/postgres.md")]
    struct Postgres;
    #[cfg(feature = "redis")]
    #[doc = include_str!("../../../docs/backends/redis.md")]
    struct Redis;
    #[cfg(feature = "sqlite")]
    #[doc = include_str!("../../../docs/backends/sqlite.md")]
    struct Sqlite;
    #[cfg(feature = "fs")]
    #[doc = include_str!("../../../docs/backends/fs.md")]
    struct Files;
    #[cfg(feature = "remote")]
    #[doc = include_str!("../../../docs/server.md")]
    struct Server;
}
