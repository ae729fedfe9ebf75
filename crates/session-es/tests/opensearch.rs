//! The conformance, model and stress suites against a real OpenSearch node
//! at `OPENSEARCH_URL` (default `http://127.0.0.1:9201`: `bash .ci/services`
//! starts 2.19 as an embedded node), with the `wildcard` text field it
//! offers. The `keyword` text field runs the whole suite on Elasticsearch
//! (`elasticsearch.rs`); `text_fields.rs` runs its edge cases on both. Under
//! `CI=true` a node that does not answer fails every test. The model and
//! stress suites run smaller here (see `support/real.rs`).

#[path = "support/real.rs"]
#[macro_use]
mod real;

use session_core::SharedClock;
use session_es::TextField;
use session_testkit::TestStore;

async fn os_store(clock: SharedClock) -> Option<TestStore> {
    real::Engine::OpenSearch
        .store(clock, TextField::Detect)
        .await
}

real_node_suites!(os_store);
