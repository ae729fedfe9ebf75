//! The conformance, model and stress suites against a real Elasticsearch
//! node at `ELASTICSEARCH_URL` (default `http://127.0.0.1:9200`: `bash
//! .ci/services` starts 8.19 from its test distribution, which has no
//! `wildcard` field type and no `_delete_by_query`, so the backend's
//! `keyword` text field and its deletes by id are what run here). Under
//! `CI=true` a node that does not answer fails every test.

#[path = "support/real.rs"]
mod real;

use session_core::SharedClock;
use session_es::TextField;
use session_testkit::TestStore;

async fn es_store(clock: SharedClock) -> Option<TestStore> {
    real::Engine::Elasticsearch
        .store(clock, TextField::Detect)
        .await
}

session_testkit::conformance_suite!(es_store);
session_testkit::model_suite!(es_store);
session_testkit::stress_suite!(es_store);
