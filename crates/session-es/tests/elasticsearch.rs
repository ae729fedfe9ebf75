//! The conformance, model and stress suites against a real Elasticsearch
//! node at `ELASTICSEARCH_URL` (default `http://127.0.0.1:9200`: `bash
//! .ci/services` starts 8.19 from its test distribution, which has no
//! `wildcard` field type and no `_delete_by_query`, so the backend's
//! `keyword` text field and its deletes by id are what run here). Under
//! `CI=true` a node that does not answer fails every test. The model and
//! stress suites run smaller here (see `support/real.rs`).

#[path = "support/real.rs"]
#[macro_use]
mod real;

use session_core::SharedClock;
use session_es::TextField;
use session_testkit::TestStore;

async fn es_store(clock: SharedClock) -> Option<TestStore> {
    real::Engine::Elasticsearch
        .store(clock, TextField::Detect)
        .await
}

real_node_suites!(es_store);
