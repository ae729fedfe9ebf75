//! One function per behaviour of the contract. Each takes a fresh [`Fixture`].
//!
//! The cases are grouped by behaviour in private submodules and re-exported
//! here, so every case is `cases::<name>` (the path the suite macros expand to).
//!
//! [`Fixture`]: crate::Fixture

mod append;
mod capabilities;
mod context;
mod counters;
mod events;
mod export;
mod history;
mod lifecycle;
mod limits;
mod metadata;
mod paging;
mod query;
mod resolve;
mod restore;
mod retention;
mod search;
mod sessions;
mod state;
mod support;

pub use append::{
    an_append_that_adds_nothing_changes_nothing, append_assigns_gapless_increasing_seqs,
    append_batch_is_atomic, append_bumps_version_once_per_call, append_is_idempotent_by_event_id,
    append_owned_checks_the_owner, append_persist_filters_drop_and_redact_before_storing,
    append_to_unknown_session_is_not_found, concurrent_appends_lose_nothing,
};
pub use capabilities::{ranked_search_puts_the_best_match_first, requires};
pub use context::{
    concurrent_replace_exactly_one_wins, replace_context_keeps_the_archive,
    replace_context_with_current_version, replace_context_with_stale_version_changes_nothing,
    rewind_after_compaction_restores_the_replaced_turns,
    rewind_removes_invocation_and_later_events, rewind_to_a_seq_removes_it_and_later_events,
    rewind_unknown_invocation_is_not_found,
};
pub use counters::event_bytes_count_what_the_archive_holds;
pub use events::{
    events_blank_keyword_is_invalid_input_like_search, events_branch_visibility,
    events_context_and_archive_views, events_filter_before_paging,
    events_keyword_filter_is_literal, events_last_n_returns_most_recent_oldest_first,
    events_role_filter, events_round_trip_every_field, events_round_trip_typed_flags,
    events_synthetic_in_out_only, events_time_range, turn_count_counts_root_real_user_messages,
};
pub use export::export_import_round_trips;
pub use history::archived_events_carry_when_they_left_the_context;
pub use lifecycle::{
    a_repeated_fork_returns_the_fork_it_made, an_ended_session_refuses_writes_until_reopened,
    appends_racing_an_end_land_before_it_or_not_at_all,
    erase_user_removes_everything_of_the_user_and_nothing_else,
    fork_copies_up_to_the_point_and_never_shares_appends,
};
pub use limits::{
    a_large_event_of_many_distinct_words_is_stored_and_found, clock_jumps_back_and_forward,
    nul_and_astral_text_round_trips, oversize_event_is_rejected, page_size_limits,
    session_of_100k_events_pages_and_searches,
};
pub use metadata::list_filters_by_metadata;
pub use paging::{
    events_page_by_cursor_reads_the_whole_view, items_read_the_objects_stored_under_a_key,
    session_items_answer_the_session_and_its_page,
};
pub use query::{
    ranked_search_returns_the_same_matches, search_agrees_with_the_reference_matcher,
    search_finds_every_word_in_any_order, search_hits_carry_seq_role_snippet_and_total,
};
pub use resolve::{
    end_archives_but_keeps_readable, resolve_daily_reset, resolve_group_key_is_shared,
    resolve_idle_timeout_starts_over, resolve_manual_reset, resolve_returns_fresh_session,
};
pub use restore::{
    rewind_after_a_window_compaction_restores_the_dropped_turns,
    rewind_after_tool_result_clearing_restores_the_results_in_place,
    rewind_to_a_seq_after_two_compactions_restores_each_point,
};
pub use retention::{
    a_rewind_after_a_prune_starts_at_what_is_left, prune_never_removes_what_rewind_replays,
    prune_refuses_context_events_and_seqs_the_archive_lacks,
    retention_by_age_removes_the_old_head_of_the_archive,
    retention_keeps_the_latest_events_and_what_must_stay,
    retention_policies_run_on_purge_and_on_append,
};
pub use search::{
    any_of_matches_events_with_any_term, search_across_a_users_sessions,
    search_is_case_insensitive_over_the_archive, search_is_chronological_and_paged,
    search_special_characters_match_literally, search_without_match_is_empty,
    since_bounds_cross_session_search,
};
pub use sessions::{
    create_duplicate_id_is_already_exists, create_rejects_invalid_ids, create_with_generated_id,
    create_with_given_id, delete_removes_session_and_events, expired_session_reads_as_absent,
    expiry_defaults_to_sixty_days, expiry_in_the_past_is_rejected, expiry_none_never_expires,
    list_filters_by_app_user_key_status, list_is_paged_newest_activity_first,
    purge_expired_removes_exactly_the_expired, update_changes_fields_and_checks_version,
};
pub use state::{
    state_app_scope_is_per_app, state_delta_lands_atomically_with_its_event, state_session_scope,
    state_temp_keys_are_never_persisted, state_user_scope_is_per_user_per_app,
};

// Cases kept in modules of their own; the isolation matrix of every
// service call x owner is in `isolation.rs`.
pub use crate::hostile::{
    chat_platform_identifiers_stay_apart, concurrent_identical_imports_write_once,
    counters_at_the_maximum_refuse_writes_and_keep_data, extreme_pages_are_empty,
    import_refuses_counters_past_the_maximum,
};
pub use crate::isolation::isolation_matrix_every_service_call;
pub use crate::reserved::{
    expiry_at_the_latest_accepted_date_is_stored, reserved_owner_names_never_collide_with_real_ones,
};
