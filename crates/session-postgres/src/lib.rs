#![doc = include_str!("../README.md")]
//!
//! # Layout
//!
//! - `repository.rs`: the builder, [`PostgresRepository`] and connecting by URL;
//! - `error.rs`: driver and pool errors mapped onto `SessionError`;
//! - `repo.rs`: the `SessionRepository` implementation (read the head, plan, persist);
//! - `remembered.rs`: appends in one statement from the head the last append left;
//! - `schema.rs`: migrations, tear-down;
//! - `tables.rs`: table names, and which schema names are safe to quote;
//! - `sessions.rs`, `events.rs`, `shared.rs`: the statements on each table;
//! - `search.rs`: literal and ranked search;
//! - `sql.rs`: placeholders and stored-value conversions;
//! - `quiet.rs`: statements whose parameters never reach a log.

mod error;
mod events;
mod fork;
mod history;
mod quiet;
mod remembered;
mod repo;
mod repository;
mod schema;
mod search;
mod sessions;
mod shared;
mod sql;
mod tables;

pub use repository::{PostgresRepository, PostgresRepositoryBuilder, DEFAULT_RANDOM_PAGE_COST};
pub use schema::SCHEMA_VERSION;
