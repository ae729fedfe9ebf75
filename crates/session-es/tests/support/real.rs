//! The real engines the suites run against: an Elasticsearch node at
//! `ELASTICSEARCH_URL` (default `http://127.0.0.1:9200`) and an OpenSearch
//! node at `OPENSEARCH_URL` (default `http://127.0.0.1:9201`), both started
//! by `bash .ci/services`. Each store lives under its own random index
//! prefix, dropped when the test ends. A node that does not answer skips
//! the test with a printed reason, and fails it under `CI=true`.

#![allow(dead_code)]

use session_core::SharedClock;
use session_es::{EsRepository, EsRepositoryBuilder, TextField};
use session_testkit::TestStore;

/// Random histories of the model suite on a real node (`MODEL_CASES`
/// overrides): each creates three indices, which a node does in tenths of a
/// second, so the 256 of the in-process stores would take most of a CI run.
pub(crate) const MODEL_CASES: u32 = 24;

/// Random agent histories of the promise suite on a real node
/// (`PROMISE_CASES` overrides): every step is a few refreshed writes.
pub(crate) const PROMISE_CASES: u32 = 8;

/// Appends per writer of the stress suite on a real node (`STRESS_APPENDS`
/// overrides; 500 elsewhere): 16 writers on each of 4 sessions, every
/// append a refreshed write of the head and of the events.
pub(crate) const STRESS_APPENDS: &str = "8";

/// Appends per writer of the conformance suite's 16-writer concurrency
/// case on a real node (250 elsewhere): every contended append is a
/// version-checked write of the head plus a refresh, so 4,000 of them take
/// minutes of a CI run while 320 keep the same 16-way contention.
pub(crate) const APPENDS_PER_WRITER: u64 = 20;

/// Sets `STRESS_APPENDS` to [`STRESS_APPENDS`] unless it is set.
pub(crate) fn scale_stress() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("STRESS_APPENDS").is_none() {
            std::env::set_var("STRESS_APPENDS", STRESS_APPENDS);
        }
    });
}

/// The suites on one engine's store factory: conformance, model (on
/// [`MODEL_CASES`] histories) and stress (at [`STRESS_APPENDS`]).
#[macro_export]
macro_rules! real_node_suites {
    ($factory:path) => {
        session_testkit::conformance_suite!($factory);

        #[test]
        fn behaves_like_the_reference_on_random_histories() {
            session_testkit::model::run_model($factory, real::MODEL_CASES);
        }

        session_testkit::promise_suite!($factory, real::PROMISE_CASES);

        #[test]
        fn stress_writers_on_four_sessions_lose_nothing() {
            real::scale_stress();
            session_testkit::run_case(
                $factory,
                session_testkit::stress::writers_on_four_sessions_lose_nothing,
            );
        }

        #[test]
        fn stress_compaction_racing_appends_keeps_every_event() {
            session_testkit::run_case(
                $factory,
                session_testkit::stress::compaction_racing_appends_keeps_every_event,
            );
        }
    };
}

/// One of the two engines the backend supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Engine {
    Elasticsearch,
    OpenSearch,
}

impl Engine {
    /// The variable naming the node's URL.
    pub(crate) fn var(self) -> &'static str {
        match self {
            Self::Elasticsearch => "ELASTICSEARCH_URL",
            Self::OpenSearch => "OPENSEARCH_URL",
        }
    }

    /// The node `.ci/services` starts.
    pub(crate) fn default_url(self) -> &'static str {
        match self {
            Self::Elasticsearch => "http://127.0.0.1:9200",
            Self::OpenSearch => "http://127.0.0.1:9201",
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Elasticsearch => "elasticsearch",
            Self::OpenSearch => "opensearch",
        }
    }

    /// The node's URL (`http://host:port`, without the `es+`).
    pub(crate) fn url(self) -> String {
        let url = std::env::var(self.var()).unwrap_or_else(|_| self.default_url().to_owned());
        let url = url.strip_prefix("es+").map(str::to_owned).unwrap_or(url);
        url.trim_end_matches('/').to_owned()
    }

    /// A builder for the node under a fresh random prefix (`t` + 32 hex digits).
    pub(crate) fn builder(self) -> EsRepositoryBuilder {
        EsRepository::builder(self.url()).prefix(format!("t{}", uuid::Uuid::new_v4().simple()))
    }

    /// Connects `builder`; a node that does not answer skips (fails under
    /// `CI=true`). A node busy with other tests' index creations can refuse
    /// for a moment (OpenSearch throttles its cluster manager's tasks), so
    /// an unavailable node is asked again, for up to about 16 s, before it
    /// counts as absent.
    pub(crate) async fn connect(self, builder: EsRepositoryBuilder) -> Option<EsRepository> {
        let mut pause = std::time::Duration::from_millis(250);
        let mut tries = 0;
        let outcome = loop {
            tries += 1;
            match builder.clone().connect().await {
                Err(e) if e.kind() == session_core::ErrorKind::Unavailable && tries < 7 => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(std::time::Duration::from_secs(4));
                }
                outcome => break outcome,
            }
        };
        match outcome {
            Ok(repo) => Some(repo),
            Err(e) if e.kind() == session_core::ErrorKind::Unavailable => session_testkit::skip(
                self.name(),
                &format!(
                    "no node answers at {}={} ({e}); `bash .ci/services` starts one",
                    self.var(),
                    self.url()
                ),
                false,
            ),
            Err(e) => panic!("{}={} is unusable: {}", self.var(), self.url(), chain(&e)),
        }
    }

    /// A store on the node for the shared suites, its indices dropped afterwards.
    pub(crate) async fn store(
        self,
        clock: SharedClock,
        text_field: TextField,
    ) -> Option<TestStore> {
        let repo = self
            .connect(self.builder().clock(clock).text_field(text_field))
            .await?;
        Some(
            TestStore::new(repo.clone())
                .with_guard(DropIndices(repo))
                .with_appends_per_writer(APPENDS_PER_WRITER),
        )
    }
}

/// An error and its sources, one after the other.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

/// Drops the test's indices when the test ends.
pub(crate) struct DropIndices(pub(crate) EsRepository);

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
