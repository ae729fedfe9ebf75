//! The raw engines the stores are measured against: the least each engine
//! must do to keep an append-only log of events per session, written by
//! hand with the same driver and durability as the store, without checks,
//! ids, context, state or search index.
//!
//! - memory: a map of sessions to seq-ordered maps of events, behind a lock;
//! - SQLite: one table of (session, seq, body) and a head row per session;
//!   an append is `UPDATE … RETURNING` the next seq and one `INSERT`, in one
//!   transaction, WAL with `synchronous = NORMAL` (the store's default);
//! - files: one JSON line appended per event and fsynced (the store's default);
//! - Redis: the body, the seq in a sorted set and the head's version in one
//!   pipelined round trip, the seq counted by the client (standalone
//!   servers only);
//! - PostgreSQL: the same two tables as SQLite; an append is one statement
//!   (a CTE bumping the head and inserting the row), in its own schema.
//!
//! - Elasticsearch and OpenSearch: one index of `(session, seq, event)`
//!   documents, one `_create` per append with the store's refresh policy
//!   ([`raw_es`](super::raw_es)).
//!
//! Redis Cluster has no raw baseline.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::Mutex;

use agent_session::SessionEvent;
use anyhow::{anyhow, Context, Result};

use super::raw_es::RawEs;

/// A raw engine beside the store under test.
pub(crate) enum Raw {
    /// Process memory.
    Memory(Mutex<HashMap<String, BTreeMap<u64, SessionEvent>>>),
    /// A SQLite file next to the store's (removed afterwards).
    Sqlite {
        conn: Mutex<rusqlite::Connection>,
        path: Option<PathBuf>,
    },
    /// A directory inside the store's root (removed afterwards).
    Files(PathBuf),
    /// The store's Redis server, under a key prefix of its own.
    Redis {
        conn: redis::aio::MultiplexedConnection,
        prefix: String,
        /// Each session's last seq, kept by the client (one process owns the log).
        seqs: Mutex<HashMap<String, u64>>,
    },
    /// The store's PostgreSQL database, in a schema of its own.
    Postgres {
        client: tokio_postgres::Client,
        schema: String,
        append: tokio_postgres::Statement,
        read: tokio_postgres::Statement,
    },
    /// The store's Elasticsearch or OpenSearch node, in an index of its own.
    Elasticsearch(RawEs),
}

/// The store URL without the parameters the store takes for itself
/// (`schema`, `prefix`, `remembered_heads`), which the engine's own client
/// would refuse or misread: what the raw engine connects with.
fn without_store_params(url: &str) -> String {
    agent_session::take_url_params(url, &["schema", "prefix", "remembered_heads"]).0
}

fn poisoned<T>(_: T) -> anyhow::Error {
    anyhow!("a raw baseline call panicked")
}

impl Raw {
    /// The raw engine for the store `url` names, or why there is none.
    pub(crate) async fn open(url: &str) -> Result<std::result::Result<Self, &'static str>> {
        let scheme = url
            .split(':')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let tag = uuid::Uuid::new_v4().simple().to_string();
        Ok(Ok(match scheme.as_str() {
            "memory" => Self::Memory(Mutex::default()),
            "sqlite" => {
                let rest = url
                    .trim_start_matches("sqlite://")
                    .trim_start_matches("sqlite:");
                let rest = rest.split('?').next().unwrap_or_default();
                let path = (rest != ":memory:").then(|| PathBuf::from(format!("{rest}-raw-{tag}")));
                let conn = match &path {
                    Some(p) => rusqlite::Connection::open(p)?,
                    None => rusqlite::Connection::open_in_memory()?,
                };
                conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))?;
                conn.pragma_update(None, "synchronous", "NORMAL")?;
                conn.execute_batch(
                    "CREATE TABLE heads (id TEXT PRIMARY KEY, last_seq INTEGER NOT NULL) WITHOUT ROWID;
                     CREATE TABLE events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL,
                                          PRIMARY KEY (session_id, seq)) WITHOUT ROWID;",
                )?;
                Self::Sqlite {
                    conn: Mutex::new(conn),
                    path,
                }
            }
            "fs" | "file" => {
                let root = url
                    .trim_start_matches("fs://")
                    .trim_start_matches("file://");
                let dir = PathBuf::from(root.split('?').next().unwrap_or_default())
                    .join(format!(".bench-raw-{tag}"));
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
                Self::Files(dir)
            }
            "redis" | "rediss" => {
                let client = redis::Client::open(without_store_params(url))?;
                let conn = client.get_multiplexed_async_connection().await?;
                Self::Redis {
                    conn,
                    prefix: format!("agent-session-bench-raw-{tag}"),
                    seqs: Mutex::default(),
                }
            }
            "postgres" | "postgresql" => {
                let (client, connection) =
                    tokio_postgres::connect(&without_store_params(url), tokio_postgres::NoTls)
                        .await?;
                tokio::spawn(connection);
                let schema = format!("bench_raw_{tag}");
                client
                    .batch_execute(&format!(
                        "CREATE SCHEMA {schema};
                         CREATE TABLE {schema}.heads (id TEXT PRIMARY KEY, last_seq BIGINT NOT NULL);
                         CREATE TABLE {schema}.events (session_id TEXT NOT NULL, seq BIGINT NOT NULL,
                                                       body TEXT NOT NULL, PRIMARY KEY (session_id, seq));"
                    ))
                    .await?;
                let append = client
                    .prepare(&format!(
                        "WITH h AS (UPDATE {schema}.heads SET last_seq = last_seq + 1 WHERE id = $1 RETURNING last_seq) \
                         INSERT INTO {schema}.events SELECT $1, h.last_seq, $2 FROM h"
                    ))
                    .await?;
                let read = client
                    .prepare(&format!(
                        "SELECT body FROM {schema}.events WHERE session_id = $1 ORDER BY seq DESC LIMIT $2"
                    ))
                    .await?;
                Self::Postgres {
                    client,
                    schema,
                    append,
                    read,
                }
            }
            "es+http" | "es+https" => Self::Elasticsearch(RawEs::open(url, &tag).await?),
            "redis+cluster" => return Ok(Err("no raw baseline for Redis Cluster")),
            _ => return Ok(Err("no raw baseline for this store")),
        }))
    }

    /// What the baseline does, for the report.
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Self::Memory(_) => "memory: a locked map of seq-ordered event maps",
            Self::Sqlite { .. } => "SQLite: head row + (session, seq, body) row per append in one transaction, WAL, synchronous=NORMAL",
            Self::Files(_) => "files: one JSON line appended and fsynced per event",
            Self::Redis { .. } => "Redis: body, sorted-set entry and head counter in one pipelined round trip",
            Self::Postgres { .. } => "PostgreSQL: one statement bumping the head and inserting (session, seq, body)",
            Self::Elasticsearch(_) => "Elasticsearch: one _create of a (session, seq, event) document per append, the store's refresh policy",
        }
    }

    /// Creates a session's head.
    pub(crate) async fn session(&self, id: &str) -> Result<()> {
        match self {
            Self::Memory(m) => {
                m.lock()
                    .map_err(poisoned)?
                    .insert(id.to_owned(), BTreeMap::new());
            }
            Self::Sqlite { conn, .. } => {
                conn.lock()
                    .map_err(poisoned)?
                    .execute("INSERT INTO heads VALUES (?1, 0)", [id])?;
            }
            Self::Files(_) | Self::Redis { .. } | Self::Elasticsearch(_) => {}
            Self::Postgres { client, schema, .. } => {
                client
                    .execute(
                        &format!("INSERT INTO {schema}.heads VALUES ($1, 0)"),
                        &[&id],
                    )
                    .await?;
            }
        }
        Ok(())
    }

    /// Appends one event to a session.
    pub(crate) async fn append(&self, id: &str, e: &SessionEvent) -> Result<()> {
        match self {
            Self::Memory(m) => {
                let mut m = m.lock().map_err(poisoned)?;
                let log = m.entry(id.to_owned()).or_default();
                let seq = log
                    .keys()
                    .next_back()
                    .copied()
                    .unwrap_or(0)
                    .saturating_add(1);
                log.insert(seq, e.clone());
            }
            Self::Sqlite { conn, .. } => {
                let body = serde_json::to_string(e)?;
                let mut conn = conn.lock().map_err(poisoned)?;
                let tx =
                    conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
                let seq: i64 = tx
                    .prepare_cached(
                        "UPDATE heads SET last_seq = last_seq + 1 WHERE id = ?1 RETURNING last_seq",
                    )?
                    .query_row([id], |r| r.get(0))?;
                tx.prepare_cached("INSERT INTO events VALUES (?1, ?2, ?3)")?
                    .execute(rusqlite::params![id, seq, body])?;
                tx.commit()?;
            }
            Self::Files(dir) => {
                let mut line = serde_json::to_vec(e)?;
                line.push(b'\n');
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dir.join(format!("{id}.jsonl")))?;
                f.write_all(&line)?;
                f.sync_data()?;
            }
            Self::Redis { conn, prefix, seqs } => {
                let body = serde_json::to_string(e)?;
                let seq = {
                    let mut seqs = seqs.lock().map_err(poisoned)?;
                    let seq = seqs.entry(id.to_owned()).or_insert(0);
                    *seq = seq.saturating_add(1);
                    *seq
                };
                let key = |x: &str| format!("{prefix}:{{{id}}}:{x}");
                let mut c = conn.clone();
                redis::pipe()
                    .cmd("HSET")
                    .arg(key("ev"))
                    .arg(seq)
                    .arg(body)
                    .ignore()
                    .cmd("ZADD")
                    .arg(key("arc"))
                    .arg(seq)
                    .arg(seq)
                    .ignore()
                    .cmd("HINCRBY")
                    .arg(key("head"))
                    .arg("version")
                    .arg(1)
                    .ignore()
                    .query_async::<()>(&mut c)
                    .await?;
            }
            Self::Postgres { client, append, .. } => {
                let body = serde_json::to_string(e)?;
                client.execute(append, &[&id, &body]).await?;
            }
            Self::Elasticsearch(es) => es.append(id, e).await?,
        }
        Ok(())
    }

    /// Reads and decodes the newest `n` events of a session (all when `None`); returns how many.
    pub(crate) async fn read(&self, id: &str, n: Option<usize>) -> Result<usize> {
        let bodies: Vec<String> = match self {
            Self::Memory(m) => {
                let m = m.lock().map_err(poisoned)?;
                let log = m.get(id).ok_or_else(|| anyhow!("no raw session {id}"))?;
                let events: Vec<SessionEvent> = match n {
                    Some(n) => log.values().rev().take(n).cloned().collect(),
                    None => log.values().cloned().collect(),
                };
                return Ok(events.len());
            }
            Self::Sqlite { conn, .. } => {
                let conn = conn.lock().map_err(poisoned)?;
                let limit = n.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
                let mut stmt = conn.prepare_cached(
                    "SELECT body FROM events WHERE session_id = ?1 ORDER BY seq DESC LIMIT ?2",
                )?;
                let rows = stmt.query_map(rusqlite::params![id, limit], |r| r.get(0))?;
                rows.collect::<rusqlite::Result<_>>()?
            }
            Self::Files(dir) => {
                let mut f = std::fs::File::open(dir.join(format!("{id}.jsonl")))?;
                let len = f.metadata()?.len();
                // The tail: the last 64 KiB hold far more than the 20 events read.
                let from = match n {
                    Some(_) => len.saturating_sub(64 * 1024),
                    None => 0,
                };
                f.seek(SeekFrom::Start(from))?;
                let mut buf = String::new();
                f.read_to_string(&mut buf)?;
                let mut lines: Vec<&str> = buf.lines().collect();
                if from > 0 {
                    lines.remove(0);
                }
                let skip = n.map_or(0, |n| lines.len().saturating_sub(n));
                lines.into_iter().skip(skip).map(str::to_owned).collect()
            }
            Self::Redis { conn, prefix, .. } => {
                let mut c = conn.clone();
                let start = n.map_or(0, |n| -i64::try_from(n).unwrap_or(i64::MAX));
                let seqs: Vec<u64> = redis::cmd("ZRANGE")
                    .arg(format!("{prefix}:{{{id}}}:arc"))
                    .arg(start)
                    .arg(-1)
                    .query_async(&mut c)
                    .await?;
                if seqs.is_empty() {
                    return Ok(0);
                }
                redis::cmd("HMGET")
                    .arg(format!("{prefix}:{{{id}}}:ev"))
                    .arg(&seqs)
                    .query_async(&mut c)
                    .await?
            }
            Self::Postgres { client, read, .. } => {
                let limit = n.map_or(i64::MAX, |n| i64::try_from(n).unwrap_or(i64::MAX));
                let rows = client.query(read, &[&id, &limit]).await?;
                rows.iter()
                    .map(|r| r.try_get(0))
                    .collect::<Result<_, _>>()?
            }
            Self::Elasticsearch(es) => return es.read(id, n).await,
        };
        let mut decoded = 0usize;
        for b in &bodies {
            let _: SessionEvent = serde_json::from_str(b)?;
            decoded += 1;
        }
        Ok(decoded)
    }

    /// Removes everything the baseline wrote.
    pub(crate) async fn cleanup(self) -> Result<()> {
        match self {
            Self::Memory(_) => {}
            Self::Sqlite { conn, path } => {
                drop(conn);
                if let Some(p) = path {
                    for suffix in ["", "-wal", "-shm"] {
                        let _ = std::fs::remove_file(format!("{}{suffix}", p.display()));
                    }
                }
            }
            Self::Files(dir) => std::fs::remove_dir_all(&dir)?,
            Self::Redis {
                mut conn, prefix, ..
            } => {
                let keys: Vec<String> = redis::cmd("KEYS")
                    .arg(format!("{prefix}:*"))
                    .query_async(&mut conn)
                    .await?;
                for chunk in keys.chunks(1000) {
                    redis::cmd("DEL")
                        .arg(chunk)
                        .query_async::<()>(&mut conn)
                        .await?;
                }
            }
            Self::Postgres { client, schema, .. } => {
                client
                    .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
                    .await?;
            }
            Self::Elasticsearch(es) => es.cleanup().await?,
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::without_store_params;

    #[test]
    fn the_raw_engine_connects_without_the_store_s_own_parameters() {
        assert_eq!(
            without_store_params("postgres://u@h/db?schema=s&sslmode=disable&remembered_heads=9"),
            "postgres://u@h/db?sslmode=disable"
        );
        assert_eq!(
            without_store_params("redis://h:6379/0?prefix=p&remembered_heads=9"),
            "redis://h:6379/0"
        );
        assert_eq!(without_store_params("redis://h:6379"), "redis://h:6379");
    }
}
