#![doc = include_str!("../README.md")]

mod batch;
mod blocking;
mod clock;
mod context;
mod context_log;
mod dump;
mod error;
mod event;
mod export;
mod filter;
mod fork;
mod fork_at;
mod ids;
mod item;
pub mod layer;
mod memory;
mod message;
mod outcome;
mod owner;
mod persist_filter;
pub mod plan;
/// The time-zone crate `ResetPolicy::daily_at` takes its zones from.
pub use jiff;
pub use plan::RewindTo;
mod repository;
mod resolution_key;
pub mod retention;
pub mod search;
mod service;
mod session;
pub mod state;
mod timestamp;
mod tokens;
mod url;
mod usage;
mod validate;

pub use batch::{prepare_events, size_events};
pub use blocking::run_blocking;
pub use clock::{system_clock, truncate_micros, Clock, ManualClock, SharedClock, SystemClock};
pub use context::{
    model_context, pair_adjacent, pinned_first, remove_unpaired_tool_calls, ContextOptions,
};
pub use context_log::{ContextChange, ContextLog};
pub use dump::SessionDump;
pub use error::{BoxError, ErrorKind, ErrorReport, Result, SessionError};
pub use event::{
    check_unique_ids, split_turns, turn_count, CompactionSource, ContextExit, SessionEvent,
    SessionEventBuilder, REPLACES_KEY, SUMMARY_PROMPT,
};
pub use export::{ExportReader, ExportWriter, EXPORT_FORMAT, EXPORT_VERSION};
pub use filter::{
    visible_branches, EventFilter, EventMatcher, EventView, Page, SessionQuery, SyntheticFilter,
    Total, DEFAULT_PAGE_SIZE, MAX_METADATA_FILTERS,
};
pub use fork::{fork_dump, fork_target, EventOutline, ForkPlan, ForkSource};
pub use fork_at::{ForkAt, FORKED_AT_SEQ, FORKED_FROM};
pub use ids::{stored_id, AppName, EventId, InvocationId, Key, SessionId, UserId};
pub use item::{keyed_page, KeyedItem, SessionItems};
pub use memory::InMemoryRepository;
pub use message::{Content, ContentPart, FileRef, ImageUrl, Message, Role, ToolCall};
pub use outcome::{AppendOutcome, ImportOutcome, RewindOutcome};
pub use owner::Owner;
pub use persist_filter::{
    failed_tool_call_ids, DropFailedToolCalls, DropSystemPrompts, FilterAction, FilterFn,
    FilteredEvent, PersistFilter, Verdict, TOOL_ERROR_KEY,
};
pub use repository::{
    session_items_apart, Capabilities, Erased, SessionRepository, SessionRepositoryExt,
};
pub use resolution_key::{ResolutionKey, GROUP_SURFACE};
pub use search::{
    contains_folded, fold_case, page_of_matches, MatchTerms, ParsedQuery, RankStats, SearchHit,
    SearchMode, SearchQuery, SearchScope, TrigramIndex,
};
pub use service::{
    AppendHook, BudgetShortfall, BudgetUnit, Compacted, Compactor, CreateSessionRequest,
    CreateSessionRequestBuilder, DailyReset, DefaultSessionService, Expiry, ResetPolicy,
    ResolveRequest, Resolved, Rewound, SessionService,
};
pub use session::{
    default_ttl, NewSession, Session, SessionStatus, SessionUpdate, DEFAULT_APP, ENCRYPTION_RECORD,
    GROUP_USER,
};
pub use state::{ScopedState, SharedDelta, SharedState, StateMap, StateScope};
pub use tokens::{HeuristicEstimator, TokenEstimator};
pub use url::{limits_from_url, split_url_query, take_url_params, whole_url_param, QUOTA_PARAMS};
pub use usage::{ModelUsage, UsageReport, UsageTotals, USAGE_KEY};
pub use validate::{
    check_seq_room, next_seq, next_version, stored_counter, validate_branch, validate_id,
    validate_name, Limits, MAX_ID_LEN, MAX_SEQ, MAX_VERSION,
};
