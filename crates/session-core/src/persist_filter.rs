//! Filters applied to an append's events before they are stored
//! (Sentinel's pre-filtering): drop stored system prompts, failed tool
//! calls, or anything a caller's own rule names; redact what may be kept
//! only in part. What a filter did is reported in the append's outcome.

use std::collections::HashSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::event::SessionEvent;
use crate::message::{Message, Role};

/// Metadata key marking a tool result as failed (`true`).
pub const TOOL_ERROR_KEY: &str = "tool_error";

/// What a [`PersistFilter`] decides for one event about to be stored.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Store it as it is.
    Keep,
    /// Store this instead (its id, and so its idempotency, stay the original's).
    Redact(Box<SessionEvent>),
    /// Do not store it.
    Drop,
}

/// A rule the service applies to every event of an append before it is
/// stored ([`crate::DefaultSessionService::with_persist_filter`]). Filters
/// run in the order they were added; the first that drops an event ends
/// its checks, a redaction is what the next filter sees. The events that
/// remain are appended in one call, so the filtered batch is stored whole
/// or not at all.
pub trait PersistFilter: Send + Sync + fmt::Debug {
    /// A short name, reported with each event the filter dropped or redacted.
    fn name(&self) -> &str;

    /// Decides for `event`, given the whole `batch` it arrives in.
    fn check(&self, event: &SessionEvent, batch: &[SessionEvent]) -> Verdict;

    /// Decides for every event of `batch`, in order (override to share
    /// work across the batch).
    fn check_batch(&self, batch: &[SessionEvent]) -> Vec<Verdict> {
        batch.iter().map(|e| self.check(e, batch)).collect()
    }
}

/// What a filter did to an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum FilterAction {
    /// The event was not stored.
    Dropped,
    /// A changed event was stored in its place.
    Redacted,
}

/// One event of an append that a [`PersistFilter`] dropped or redacted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FilteredEvent {
    /// The event's id.
    pub event_id: String,
    /// The filter's [`PersistFilter::name`].
    pub filter: String,
    /// What it did.
    pub action: FilterAction,
}

/// Applies `filters` to `batch`: the events to store and what was filtered.
pub(crate) fn apply(
    filters: &[std::sync::Arc<dyn PersistFilter>],
    batch: Vec<SessionEvent>,
) -> (Vec<SessionEvent>, Vec<FilteredEvent>) {
    let mut events = batch;
    let mut filtered = Vec::new();
    for f in filters {
        let verdicts = f.check_batch(&events);
        let mut kept = Vec::with_capacity(events.len());
        for (event, verdict) in events.into_iter().zip(verdicts) {
            let action = match verdict {
                Verdict::Keep => {
                    kept.push(event);
                    continue;
                }
                Verdict::Drop => FilterAction::Dropped,
                Verdict::Redact(mut replacement) => {
                    replacement.id.clone_from(&event.id);
                    kept.push(*replacement);
                    FilterAction::Redacted
                }
            };
            filtered.push(FilteredEvent {
                event_id: event.id,
                filter: f.name().to_owned(),
                action,
            });
        }
        events = kept;
    }
    (events, filtered)
}

/// Drops stored system messages (the system prompt belongs to the agent's
/// code, not to the history); summaries and other synthetic events stay.
#[derive(Debug, Clone, Copy, Default)]
pub struct DropSystemPrompts;

impl PersistFilter for DropSystemPrompts {
    fn name(&self) -> &'static str {
        "drop-system-prompts"
    }

    fn check(&self, event: &SessionEvent, _batch: &[SessionEvent]) -> Verdict {
        if event.role() == Role::System && !event.is_synthetic() {
            Verdict::Drop
        } else {
            Verdict::Keep
        }
    }
}

/// Drops failed tool calls: tool results marked failed ([`TOOL_ERROR_KEY`]
/// `true` in their metadata) and, in the same batch, the calls they answer
/// (an assistant message keeps its text and its other calls; one left
/// with neither is dropped). A call stored by an earlier append stays; the
/// history's read-time filter leaves out a call without its result.
#[derive(Debug, Clone, Copy, Default)]
pub struct DropFailedToolCalls;

/// The ids of the tool calls whose results in `events` are marked failed
/// ([`TOOL_ERROR_KEY`] `true`).
pub fn failed_tool_call_ids(events: &[SessionEvent]) -> HashSet<&str> {
    events
        .iter()
        .filter(|e| {
            e.metadata
                .get(TOOL_ERROR_KEY)
                .and_then(serde_json::Value::as_bool)
                == Some(true)
        })
        .filter_map(|e| match &e.message {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect()
}

impl DropFailedToolCalls {
    fn verdict(failed: &HashSet<&str>, event: &SessionEvent) -> Verdict {
        match &event.message {
            Message::Tool { tool_call_id, .. } if failed.contains(tool_call_id.as_str()) => {
                Verdict::Drop
            }
            Message::Assistant {
                content,
                tool_calls,
            } if tool_calls.iter().any(|c| failed.contains(c.id.as_str())) => {
                let rest: Vec<_> = tool_calls
                    .iter()
                    .filter(|c| !failed.contains(c.id.as_str()))
                    .cloned()
                    .collect();
                if rest.is_empty() && content.text.trim().is_empty() && content.parts.is_empty() {
                    return Verdict::Drop;
                }
                let mut kept = event.clone();
                kept.message = Message::Assistant {
                    content: content.clone(),
                    tool_calls: rest,
                };
                Verdict::Redact(Box::new(kept))
            }
            _ => Verdict::Keep,
        }
    }
}

impl PersistFilter for DropFailedToolCalls {
    fn name(&self) -> &'static str {
        "drop-failed-tool-calls"
    }

    fn check(&self, event: &SessionEvent, batch: &[SessionEvent]) -> Verdict {
        Self::verdict(&failed_tool_call_ids(batch), event)
    }

    fn check_batch(&self, batch: &[SessionEvent]) -> Vec<Verdict> {
        let failed = failed_tool_call_ids(batch);
        batch.iter().map(|e| Self::verdict(&failed, e)).collect()
    }
}

/// A filter from a name and a function: a caller's own rule.
pub struct FilterFn<F> {
    name: String,
    check: F,
}

impl<F> FilterFn<F>
where
    F: Fn(&SessionEvent, &[SessionEvent]) -> Verdict + Send + Sync,
{
    /// The filter `check`, reported as `name`.
    pub fn new(name: impl Into<String>, check: F) -> Self {
        Self {
            name: name.into(),
            check,
        }
    }
}

#[allow(clippy::missing_fields_in_debug)] // the function has nothing to show
impl<F> fmt::Debug for FilterFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FilterFn")
            .field("name", &self.name)
            .finish()
    }
}

impl<F> PersistFilter for FilterFn<F>
where
    F: Fn(&SessionEvent, &[SessionEvent]) -> Verdict + Send + Sync,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn check(&self, event: &SessionEvent, batch: &[SessionEvent]) -> Verdict {
        (self.check)(event, batch)
    }
}
