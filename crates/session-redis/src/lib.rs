#![doc = include_str!("../README.md")]
//!
//! # Modules
//!
//! [`RedisRepository`] is composed of parts, each owning the connection
//! handle, keys and scripts it needs:
//!
//! - `heads`: the session heads (head hashes, what a write plans from, the
//!   heads this repository's appends left, `session_core::plan::RememberedHeads`);
//! - `events`: the event log (bodies, archive and context sets, pages,
//!   the context's history, the initial state);
//! - `indexes`: the activity and expiry indexes;
//! - `shared`: the `user:` and `app:` shared scopes;
//! - `search_index`: the per-session trigram index, and search through it;
//! - `write`: the writer, running one Lua script per plan (and cluster
//!   mode's follow-up writes);
//! - `gate`: per-session write turns and paced compare-and-swap retries.
//!
//! Then the composition and the shared pieces:
//!
//! - `repository`: [`RedisRepository`], its builder and connection;
//! - `repo`: the [`SessionRepository`](session_core::SessionRepository)
//!   implementation — read the head, plan in [`session_core::plan`],
//!   persist, each step delegated to a part;
//! - `head_fields`: the head fields a write plans from and checks unchanged;
//! - `decode`: sessions and state scopes decoded from their hashes;
//! - `scripts`: the Lua scripts of `lua/` and their argument lists;
//! - `keys`: key names (one hash tag per session) and the `app/user` escaping;
//! - `conn`: the standalone or cluster connection;
//! - `error`: Redis errors onto the contract's kinds.

mod conn;
mod decode;
mod error;
mod events;
mod gate;
mod head_fields;
mod heads;
mod indexes;
mod keys;
mod repo;
mod repository;
mod scripts;
mod search_index;
mod shared;
mod write;

pub use repository::{RedisRepository, RedisRepositoryBuilder};
