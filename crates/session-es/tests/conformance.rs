//! The conformance and model suites against the Elasticsearch (or
//! OpenSearch) cluster at `ELASTICSEARCH_URL` (for example
//! `es+http://localhost:9200`, see `docker-compose.yml`), each test under its
//! own random index prefix, dropped afterwards. Without the variable every
//! test prints why it skipped: no cluster can be installed on the CI machine,
//! so this is the one skip allowed under `CI=true`.

use session_core::SharedClock;
use session_es::EsRepository;
use session_testkit::TestStore;

/// Drops the test's indices when the test ends.
struct DropIndices(EsRepository);

impl Drop for DropIndices {
    fn drop(&mut self) {
        let repo = self.0.clone();
        let _ = std::thread::spawn(move || {
            if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                let _ = rt.block_on(repo.drop_indices());
            }
        })
        .join();
    }
}

async fn es_store(clock: SharedClock) -> Option<TestStore> {
    let Ok(url) = std::env::var("ELASTICSEARCH_URL") else {
        return session_testkit::skip(
            "elasticsearch",
            "ELASTICSEARCH_URL is not set (no cluster to test against; `docker compose up -d elasticsearch` starts one)",
            true,
        );
    };
    let url = if url.starts_with("es+") {
        url
    } else {
        format!("es+{url}")
    };
    let sep = if url.contains('?') { '&' } else { '?' };
    let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    let connected = match EsRepository::builder_from_url(&format!("{url}{sep}prefix={prefix}")) {
        Ok(builder) => builder.clock(clock).connect().await,
        Err(e) => Err(e),
    };
    match connected {
        Ok(repo) => Some(TestStore::new(repo.clone()).with_guard(DropIndices(repo))),
        Err(e) => panic!("ELASTICSEARCH_URL={url} is set but unusable: {e}"),
    }
}

session_testkit::conformance_suite!(es_store);
session_testkit::model_suite!(es_store);
session_testkit::stress_suite!(es_store);
