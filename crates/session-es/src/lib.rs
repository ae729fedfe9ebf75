#![doc = include_str!("../README.md")]

mod batch;
mod body;
mod client;
mod config;
mod engine;
mod error;
mod events;
mod head;
mod index;
mod repo;
mod search;
mod state;
mod view;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use session_core::{Limits, SharedClock};

use crate::batch::Memo;
use crate::client::Client;

pub use config::{EsRepositoryBuilder, Refresh};
pub use engine::TextField;

/// A [`SessionRepository`](session_core::SessionRepository) on Elasticsearch 8 (or OpenSearch 2.15+).
///
/// See the crate docs for the document layout and consistency model.
#[derive(Clone)]
pub struct EsRepository {
    locks: Arc<[tokio::sync::Mutex<Memo>]>,
    client: Client,
    prefix: String,
    refresh: Refresh,
    clock: SharedClock,
    limits: Limits,
    /// The field type of the literal search text, as the events index has it.
    text_field: Arc<engine::TextFieldCell>,
}

impl std::fmt::Debug for EsRepository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EsRepository")
            .field("prefix", &self.prefix)
            .field("refresh", &self.refresh)
            .field("text_field", &self.text_field.get())
            .finish_non_exhaustive()
    }
}

impl EsRepository {
    fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }
}
