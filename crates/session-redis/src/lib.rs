#![doc = include_str!("../README.md")]
//!
//! # Modules
//!
//! - `repository`: [`RedisRepository`], its builder and connection;
//! - `repo`: the [`SessionRepository`](session_core::SessionRepository)
//!   implementation — read the head, plan in [`session_core::plan`], persist;
//! - `read`: the reads (the head a write plans from, events, state, indexes);
//! - `head_fields`: the head fields a write plans from and checks unchanged;
//! - `write`: the arguments of each write script, and cluster follow-ups;
//! - `scripts`: the Lua scripts of `lua/` and their argument lists;
//! - `search`: search and listings;
//! - `search_index`: the per-session trigram index search builds and reads;
//! - `keys`: key names (one hash tag per session) and the `app/user` escaping;
//! - `conn`: the standalone or cluster connection;
//! - `gate`: per-session write turns and paced compare-and-swap retries;
//! - `error`: Redis errors onto the contract's kinds.

mod conn;
mod error;
mod gate;
mod head_fields;
mod heads;
mod keys;
mod read;
mod repo;
mod repository;
mod scripts;
mod search;
mod search_index;
mod view;
mod write;

pub use repository::{RedisRepository, RedisRepositoryBuilder};
