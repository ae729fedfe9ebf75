#![doc = include_str!("../README.md")]
//!
//! # Layout
//!
//! - `repository.rs`: [`EsRepository`], its options ([`EsRepositoryBuilder`],
//!   [`Refresh`]), `es+http://` URLs and connecting;
//! - `client.rs`: the HTTP layer; `error.rs`: answers and transport failures
//!   as `SessionError`s;
//! - `repo.rs`: the `SessionRepository` impl;
//! - `engine.rs`: the literal-search text field ([`TextField`]); `index.rs`:
//!   the indices, their mappings and document paths; `body.rs`: documents and
//!   queries;
//! - `head.rs`, `events.rs`, `batch.rs`, `state.rs`, `search.rs`, `view.rs`:
//!   session heads, event documents, writing a batch, shared state, searches
//!   and reads.

mod batch;
mod body;
mod client;
mod engine;
mod error;
mod events;
mod head;
mod index;
mod repo;
mod repository;
mod search;
mod state;
mod view;

pub use engine::TextField;
pub use repository::{EsRepository, EsRepositoryBuilder, Refresh};
