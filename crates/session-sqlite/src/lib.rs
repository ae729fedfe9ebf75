#![doc = include_str!("../README.md")]
//!
//! # Layout
//!
//! - `repository.rs`: options ([`SqliteRepositoryBuilder`], [`Synchronous`]),
//!   opening (`from_url`), the writer and the reader pool;
//! - `error.rs`: rusqlite errors as `SessionError`s;
//! - `repo.rs`: the `SessionRepository` impl (read the head, plan in
//!   `session_core::plan`, persist in one transaction);
//! - `schema.rs`: migrations; `sessions.rs`, `events.rs`, `shared.rs`:
//!   one table group each; `search.rs`: the FTS5 index and queries;
//! - `sql.rs`: stored-value conversions (times, counters, offsets).

mod error;
mod events;
mod fork;
mod history;
mod repo;
mod repository;
mod schema;
mod search;
mod sessions;
mod shared;
mod sql;

pub use repository::{
    SqliteRepository, SqliteRepositoryBuilder, Synchronous, DEFAULT_INDEX_BATCH, DEFAULT_PAGE_SIZE,
};
pub use schema::SCHEMA_VERSION;
