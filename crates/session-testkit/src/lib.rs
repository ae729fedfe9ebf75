//! The conformance suite every agent-session backend runs.
//!
//! Each behaviour of the [`SessionRepository`] contract (and of
//! [`DefaultSessionService`] over it) is one documented `pub async fn` in
//! [`cases`], taking a fresh [`Fixture`]. The [`conformance_suite!`] macro
//! expands the whole list into separate `#[test]`s for one backend, so
//! `cargo test append_is_idempotent_by_event_id` runs one case everywhere.
//!
//! ```
//! use session_core::{InMemoryRepository, SharedClock};
//! use session_testkit::TestStore;
//!
//! async fn memory(clock: SharedClock) -> Option<TestStore> {
//!     Some(TestStore::new(InMemoryRepository::new().with_clock(clock)))
//! }
//!
//! // In a test file: expands into one #[test] per behaviour.
//! session_testkit::conformance_suite!(memory);
//! # fn main() {}
//! ```
//!
//! A factory returns `None` to skip (after saying why, see [`skip`]); under
//! `CI=true` only Elasticsearch may skip.
//!
//! [`DefaultSessionService`]: session_core::DefaultSessionService
#![allow(clippy::unwrap_used, clippy::missing_panics_doc)] // a test suite: failing loudly is its job

use std::future::Future;
use std::sync::Arc;

use session_core::{ManualClock, SessionRepository, SharedClock};

pub mod activity;
pub mod cases;
pub mod corpus;
pub mod erasure;
mod fixture;
pub mod fork_cost;
pub mod full_disk;
pub mod hostile;
mod isolation;
pub mod model;
pub mod process;
pub mod promise;
pub mod quota;
pub mod reserved;
pub mod same_answer;
pub mod sealed;
pub mod stress;

pub use fixture::{
    app_name, assistant, iid, sid, texts, user, user_id, Fixture, APP, DEFAULT_APPENDS_PER_WRITER,
    LARGE_SESSION_BATCH, LARGE_SESSION_EVENTS,
};
#[doc(hidden)]
pub use tempfile;

/// What a factory hands the suite: the repository under test, plus an
/// optional guard (a temp dir, a cleanup handle) dropped after the test.
pub struct TestStore {
    repo: Arc<dyn SessionRepository>,
    guard: Option<Box<dyn std::any::Any + Send + Sync>>,
    appends_per_writer: Option<u64>,
    large_session_events: Option<u64>,
}

impl TestStore {
    /// A store with nothing to clean up.
    pub fn new(repo: impl SessionRepository + 'static) -> Self {
        Self {
            repo: Arc::new(repo),
            guard: None,
            appends_per_writer: None,
            large_session_events: None,
        }
    }

    /// The same store seen through `wrap` (a layer: encryption, retries),
    /// its guard kept.
    pub fn map(
        mut self,
        wrap: impl FnOnce(Arc<dyn SessionRepository>) -> Arc<dyn SessionRepository>,
    ) -> Self {
        self.repo = wrap(self.repo);
        self
    }

    /// Keeps `guard` alive for the test's duration (e.g. a `tempfile::TempDir`).
    pub fn with_guard(mut self, guard: impl std::any::Any + Send + Sync) -> Self {
        self.guard = Some(Box::new(guard));
        self
    }

    /// Scales the concurrency cases down to `n` appends per writer (16
    /// writers on one session), for an engine where each contended append
    /// is a network round trip and a refresh: the contention stays, the
    /// run stays short.
    pub fn with_appends_per_writer(mut self, n: u64) -> Self {
        self.appends_per_writer = Some(n);
        self
    }

    /// Scales the large-session case down to `n` events (a multiple of
    /// 5,000, at least 10,000), for a test double whose every request is
    /// a debug-built server's: the case's paging past 10,000 events and its
    /// search stay, the run stays short. Real engines keep 100,000.
    pub fn with_large_session_events(mut self, n: u64) -> Self {
        self.large_session_events = Some(n);
        self
    }

    /// The fixture the suites hand a case: the store's repository on
    /// `clock`, scaled as the store asked.
    fn fixture(&self, clock: Arc<ManualClock>) -> Fixture {
        let mut fixture = Fixture::new(self.repo.clone(), clock);
        if let Some(n) = self.appends_per_writer {
            fixture = fixture.with_appends_per_writer(n);
        }
        if let Some(n) = self.large_session_events {
            fixture = fixture.with_large_session_events(n);
        }
        fixture
    }
}

/// Says why a backend's tests cannot run here and returns `None` (skip) —
/// or panics under `CI=true` unless `allowed_in_ci` (no store of the
/// workspace passes it: under `CI=true` every suite runs on its engine).
pub fn skip<T>(backend: &str, reason: &str, allowed_in_ci: bool) -> Option<T> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(
        !ci || allowed_in_ci,
        "{backend} conformance tests cannot run under CI=true: {reason}"
    );
    // Written to the process's stderr directly: the test harness captures
    // `eprintln!` of passing tests, and a skip must be seen.
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("SKIPPED {backend} conformance test: {reason}\n").as_bytes(),
    );
    None
}

/// Runs one case: builds a multi-threaded runtime, a manual clock, the
/// repository from `factory`, and the case over them. Used by [`conformance_suite!`].
pub fn run_case<F, FF, C, CF>(factory: F, case: C)
where
    F: FnOnce(SharedClock) -> FF,
    FF: Future<Output = Option<TestStore>>,
    C: FnOnce(Fixture) -> CF,
    CF: Future<Output = ()>,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let clock = Arc::new(ManualClock::new());
        if let Some(store) = factory(clock.clone()).await {
            case(store.fixture(clock)).await;
            drop(store.guard);
        }
    });
}

/// Calls `$callback!($($args)* ; case, case, ...)` with every case of the
/// suite: the one list both [`conformance_suite!`] and
/// [`all_cases_in_sequence!`] expand.
#[doc(hidden)]
#[macro_export]
macro_rules! __with_cases {
    ($callback:path, $($args:tt)*) => {
        $callback!($($args)* ;
            create_with_given_id,
            create_with_generated_id,
            create_duplicate_id_is_already_exists,
            create_rejects_invalid_ids,
            expiry_defaults_to_sixty_days,
            expiry_none_never_expires,
            expiry_in_the_past_is_rejected,
            expired_session_reads_as_absent,
            purge_expired_removes_exactly_the_expired,
            list_filters_by_app_user_key_status,
            list_is_paged_newest_activity_first,
            list_filters_by_metadata,
            delete_removes_session_and_events,
            update_changes_fields_and_checks_version,
            append_assigns_gapless_increasing_seqs,
            append_batch_is_atomic,
            append_bumps_version_once_per_call,
            append_is_idempotent_by_event_id,
            an_append_that_adds_nothing_changes_nothing,
            event_bytes_count_what_the_archive_holds,
            retention_keeps_the_latest_events_and_what_must_stay,
            retention_by_age_removes_the_old_head_of_the_archive,
            retention_policies_run_on_purge_and_on_append,
            a_rewind_after_a_prune_starts_at_what_is_left,
            prune_refuses_context_events_and_seqs_the_archive_lacks,
            prune_never_removes_what_rewind_replays,
            append_to_unknown_session_is_not_found,
            append_owned_checks_the_owner,
            append_persist_filters_drop_and_redact_before_storing,
            events_context_and_archive_views,
            events_last_n_returns_most_recent_oldest_first,
            events_page_by_cursor_reads_the_whole_view,
            events_branch_visibility,
            events_time_range,
            events_role_filter,
            events_synthetic_in_out_only,
            events_filter_before_paging,
            events_keyword_filter_is_literal,
            items_read_the_objects_stored_under_a_key,
            session_items_answer_the_session_and_its_page,
            events_blank_keyword_is_invalid_input_like_search,
            events_round_trip_every_field,
            events_round_trip_typed_flags,
            turn_count_counts_root_real_user_messages,
            replace_context_with_current_version,
            replace_context_with_stale_version_changes_nothing,
            replace_context_keeps_the_archive,
            archived_events_carry_when_they_left_the_context,
            search_is_case_insensitive_over_the_archive,
            search_is_chronological_and_paged,
            search_special_characters_match_literally,
            search_without_match_is_empty,
            search_across_a_users_sessions,
            ranked_search_puts_the_best_match_first,
            search_finds_every_word_in_any_order,
            search_agrees_with_the_reference_matcher,
            search_hits_carry_seq_role_snippet_and_total,
            ranked_search_returns_the_same_matches,
            any_of_matches_events_with_any_term,
            since_bounds_cross_session_search,
            state_session_scope,
            state_user_scope_is_per_user_per_app,
            state_app_scope_is_per_app,
            state_temp_keys_are_never_persisted,
            state_delta_lands_atomically_with_its_event,
            rewind_removes_invocation_and_later_events,
            rewind_unknown_invocation_is_not_found,
            rewind_after_compaction_restores_the_replaced_turns,
            rewind_after_a_window_compaction_restores_the_dropped_turns,
            rewind_to_a_seq_after_two_compactions_restores_each_point,
            rewind_after_tool_result_clearing_restores_the_results_in_place,
            rewind_to_a_seq_removes_it_and_later_events,
            isolation_matrix_every_service_call,
            import_refuses_counters_past_the_maximum,
            counters_at_the_maximum_refuse_writes_and_keep_data,
            extreme_pages_are_empty,
            concurrent_identical_imports_write_once,
            chat_platform_identifiers_stay_apart,
            reserved_owner_names_never_collide_with_real_ones,
            expiry_at_the_latest_accepted_date_is_stored,
            oversize_event_is_rejected,
            a_large_event_of_many_distinct_words_is_stored_and_found,
            nul_and_astral_text_round_trips,
            page_size_limits,
            session_of_100k_events_pages_and_searches,
            clock_jumps_back_and_forward,
            concurrent_appends_lose_nothing,
            concurrent_replace_exactly_one_wins,
            resolve_returns_fresh_session,
            resolve_idle_timeout_starts_over,
            resolve_daily_reset,
            resolve_manual_reset,
            resolve_group_key_is_shared,
            end_archives_but_keeps_readable,
            an_ended_session_refuses_writes_until_reopened,
            appends_racing_an_end_land_before_it_or_not_at_all,
            fork_copies_up_to_the_point_and_never_shares_appends,
            a_repeated_fork_returns_the_fork_it_made,
            erase_user_removes_everything_of_the_user_and_nothing_else,
            export_import_round_trips,
        );
    };
}

/// Expands the whole conformance suite into one `#[test]` per behaviour.
///
/// The argument is a path to `async fn(SharedClock) -> Option<TestStore>`
/// that builds a fresh, isolated repository on the given clock for each
/// test (a temp file, a temp dir, a random key prefix), or returns `None`
/// to skip after [`skip`].
#[macro_export]
macro_rules! conformance_suite {
    ($factory:path) => {
        $crate::__with_cases!($crate::conformance_suite, @cases $factory);
    };
    (@cases $factory:path; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::run_case($factory, $crate::cases::$case);
            }
        )*
    };
}

/// Runs every case of the suite one after another inside the current async
/// test, each on a fresh store from `$factory` (a closure
/// `Fn(SharedClock) -> impl Future<Output = Option<TestStore>>`): for
/// backends whose server the test itself starts, such as a Redis cluster.
#[macro_export]
macro_rules! all_cases_in_sequence {
    ($factory:expr) => {
        $crate::__with_cases!($crate::all_cases_in_sequence, @run $factory)
    };
    (@run $factory:expr ; $($case:ident),* $(,)?) => {{
        let factory = $factory;
        $(
            $crate::run_case_in(stringify!($case), &factory, $crate::cases::$case).await;
        )*
    }};
}

/// Runs one case on a fresh store inside the caller's runtime (see [`all_cases_in_sequence!`]).
pub async fn run_case_in<F, FF, C, CF>(name: &str, factory: &F, case: C)
where
    F: Fn(SharedClock) -> FF,
    FF: Future<Output = Option<TestStore>>,
    C: FnOnce(Fixture) -> CF,
    CF: Future<Output = ()>,
{
    let clock = Arc::new(ManualClock::new());
    if let Some(store) = factory(clock.clone()).await {
        eprintln!("case {name}");
        case(store.fixture(clock)).await;
        drop(store.guard);
    }
}
