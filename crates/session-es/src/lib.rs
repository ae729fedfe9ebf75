#![doc = include_str!("../README.md")]
//!
//! # Layout
//!
//! - `repository.rs`: [`EsRepository`], a composition of the parts below,
//!   its options ([`EsRepositoryBuilder`]), `es+http://` URLs and connecting;
//! - `repo.rs`: the `SessionRepository` impl, which reads the head, asks
//!   `session_core::plan` and has the parts persist the plan;
//! - the parts, each owning its handles: `indices.rs` (the three indices,
//!   their mappings and the literal-search text field), `heads.rs` (session
//!   head documents, their compare-and-swap and listings), `events.rs`
//!   (event documents: bulk writes, held ids, cleanup), `view.rs` (reads of
//!   one session's events), `search.rs` (searches of events), `state.rs`
//!   (shared state documents), `locks.rs` (this process's per-session write
//!   locks and the compare-and-swap backoff);
//! - `index.rs`: one index as the parts use it, and the [`Refresh`] policy;
//!   `head.rs`: the head document; `body.rs`: documents and queries;
//!   `engine.rs`: the literal-search text field ([`TextField`]);
//!   `client.rs`: the HTTP layer; `error.rs`: answers and transport failures
//!   as `SessionError`s.

mod body;
mod client;
mod engine;
mod error;
mod events;
mod head;
mod heads;
mod index;
mod indices;
mod locks;
mod repo;
mod repository;
mod search;
mod state;
mod view;

pub use engine::TextField;
pub use index::Refresh;
pub use repository::{EsRepository, EsRepositoryBuilder};
