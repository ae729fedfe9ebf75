//! `POST /v1/apps/{app}/users/{user}/sessions/{id}/compact`: compacts one
//! session's context now with a strategy and its parameters, offline (the
//! extractive summarizer for `summarize`); the archive keeps every event.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use session_compaction::{
    CompactionError, CompactionOutcome, CompactionPolicy, CompactionStrategy, ExtractiveSummarizer,
    RecursiveSummarization, SlidingWindow, TokenBudget, ToolResultClearing, Trigger, TurnWindow,
};
use session_core::{Problem, SessionError};
use std::sync::Arc;

use crate::owner::{owner, OwnerState};
use crate::problem::{etag, json_body, ApiResult};
use crate::routes::ok;

/// Which strategy compacts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StrategyName {
    /// Keep the last `max_events` events.
    SlidingWindow,
    /// Keep the last `max_turns` turns.
    TurnWindow,
    /// Keep the newest events within `max_tokens`.
    TokenBudget,
    /// Summarize all but the last `keep` turns into a summary turn.
    Summarize,
    /// Clear the text of old tool results, keeping the last `keep`.
    ToolResultClearing,
}

/// What to compact with.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompactBody {
    /// The strategy.
    pub strategy: StrategyName,
    /// `sliding_window`: events kept.
    #[serde(default)]
    pub max_events: Option<usize>,
    /// `turn_window`: turns kept.
    #[serde(default)]
    pub max_turns: Option<usize>,
    /// `token_budget`: tokens the context may hold.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// `summarize`: turns kept verbatim (default 2); `tool_result_clearing`:
    /// tool results kept (default 3).
    #[serde(default)]
    pub keep: Option<usize>,
}

/// What the compaction did.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CompactedBody {
    /// Whether the context changed.
    pub compacted: bool,
    /// Why not, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Context events before.
    pub events_before: usize,
    /// Context events after.
    pub events_after: usize,
    /// Context tokens before.
    pub tokens_before: u64,
    /// Context tokens after.
    pub tokens_after: u64,
    /// The summary written, for `summarize`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// A compaction failure as the session error it is: the store's own, or
/// the summarizer's as a `Backend` error.
fn session_error(e: CompactionError) -> SessionError {
    match e {
        CompactionError::Session(e) => e,
        other => SessionError::backend("summarizer", other),
    }
}

fn needed<T>(value: Option<T>, field: &str) -> Result<T, SessionError> {
    value.ok_or_else(|| SessionError::invalid(field, "this strategy needs it"))
}

/// The strategy a body names, with its parameters.
fn strategy(body: &CompactBody) -> Result<Arc<dyn CompactionStrategy>, SessionError> {
    Ok(match body.strategy {
        StrategyName::SlidingWindow => Arc::new(SlidingWindow {
            max_events: needed(body.max_events, "max_events")?,
        }),
        StrategyName::TurnWindow => Arc::new(TurnWindow {
            max_turns: needed(body.max_turns, "max_turns")?,
        }),
        StrategyName::TokenBudget => Arc::new(TokenBudget {
            max_tokens: needed(body.max_tokens, "max_tokens")?,
        }),
        StrategyName::Summarize => Arc::new(RecursiveSummarization::new(
            body.keep.unwrap_or(2),
            Arc::new(ExtractiveSummarizer::default()),
        )),
        StrategyName::ToolResultClearing => Arc::new(ToolResultClearing {
            keep_last: body.keep.unwrap_or(3),
            ..Default::default()
        }),
    })
}

/// Compacts the session's context now.
#[utoipa::path(
    post,
    path = "/v1/apps/{app}/users/{user}/sessions/{id}/compact",
    operation_id = "owner_compact",
    tag = "owner",
    params(
        ("app" = String, Path, description = "The app"),
        ("user" = String, Path, description = "The user"),
        ("id" = String, Path, description = "The session id")
    ),
    request_body = CompactBody,
    responses(
        (status = 200, description = "What the compaction did", body = CompactedBody),
        (status = 409, description = "Another writer changed the session meanwhile; nothing changed", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "An error: a problem document with its kind", body = Problem, content_type = "application/problem+json")
    )
)]
pub(crate) async fn compact(
    State(s): State<OwnerState>,
    Path((app, user, id)): Path<(String, String, String)>,
    body: Bytes,
) -> ApiResult<Response> {
    let body: CompactBody = json_body(&body)?;
    let owner = owner(&app, &user)?;
    let session = s.service.get(&owner, &id).await?;
    let policy = CompactionPolicy::new(Trigger::TurnCount(0), strategy(&body)?);
    let before = (session.context_tokens, session.version);
    let answer = match policy
        .compact_now(s.repo.as_ref(), &session.id)
        .await
        .map_err(session_error)?
    {
        CompactionOutcome::Compacted(r) => CompactedBody {
            compacted: true,
            reason: None,
            events_before: r.metrics.events_before,
            events_after: r.metrics.events_after,
            tokens_before: r.metrics.tokens_before,
            tokens_after: r.metrics.tokens_after,
            summary: r.summary,
        },
        CompactionOutcome::LostRace { read_version } => {
            let actual = s.repo.event_version(&session.id).await?;
            return Err(SessionError::Conflict {
                id: session.id.to_string(),
                expected: read_version,
                actual,
            }
            .into());
        }
        other => CompactedBody {
            compacted: false,
            reason: Some(match other {
                CompactionOutcome::NotNeeded { reason } => reason,
                _ => "nothing to compact".to_owned(),
            }),
            events_before: 0,
            events_after: 0,
            tokens_before: before.0,
            tokens_after: before.0,
            summary: None,
        },
    };
    let version = s.repo.event_version(&session.id).await.unwrap_or(before.1);
    Ok((etag(version), ok(&answer)).into_response())
}
