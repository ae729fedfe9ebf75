//! The conformance, model and stress suites against a real OpenSearch node
//! at `OPENSEARCH_URL` (default `http://127.0.0.1:9201`: `bash .ci/services`
//! starts 2.19 as an embedded node), with the `wildcard` text field it
//! offers; and the conformance suite again with the `keyword` text field
//! (what an engine without `wildcard` gets), so both layouts run on both
//! engines. Under `CI=true` a node that does not answer fails every test.

#[path = "support/real.rs"]
mod real;

use session_core::SharedClock;
use session_es::TextField;
use session_testkit::TestStore;

async fn os_store(clock: SharedClock) -> Option<TestStore> {
    real::Engine::OpenSearch
        .store(clock, TextField::Detect)
        .await
}

session_testkit::conformance_suite!(os_store);
session_testkit::model_suite!(os_store);
session_testkit::stress_suite!(os_store);

/// The conformance suite with the `keyword` text field on OpenSearch.
mod keyword_text {
    use super::real;
    use session_core::SharedClock;
    use session_es::TextField;
    use session_testkit::TestStore;

    async fn os_keyword_store(clock: SharedClock) -> Option<TestStore> {
        real::Engine::OpenSearch
            .store(clock, TextField::Keyword)
            .await
    }

    session_testkit::conformance_suite!(os_keyword_store);
}
