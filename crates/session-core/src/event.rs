//! `SessionEvent`: one immutable record around a chat message.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::clock::truncate_micros;
use crate::error::{Result, SessionError};
use crate::message::{Message, Role};
use crate::state::StateMap;
use crate::tokens::{HeuristicEstimator, TokenEstimator};
use crate::validate::{validate_branch, validate_id};

/// The bytes an event's encoding starts with room for (most events of an
/// agent's conversation fit).
const ENCODED_CAPACITY: usize = 512;

/// The metadata key compaction writes on each event it adds to a context:
/// the seqs of the events that left the context with it. A rewind that
/// removes such an event brings those events back (see
/// [`crate::SessionService::rewind`]).
pub const REPLACES_KEY: &str = "replaces";

/// The prompt that opens a synthetic summary turn.
pub const SUMMARY_PROMPT: &str = "Summarize the conversation we had so far.";

/// Which compaction produced a synthetic event.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum CompactionSource {
    /// A rolling summary of earlier turns.
    RecursiveSummarization,
    /// A JSON summary following the structured schema.
    StructuredSummary,
    /// Written by a user or another tool.
    Custom(String),
}

impl CompactionSource {
    /// The stored name.
    pub fn as_str(&self) -> &str {
        match self {
            Self::RecursiveSummarization => "recursive-summarization",
            Self::StructuredSummary => "structured-summary",
            Self::Custom(s) => s,
        }
    }
}

impl fmt::Display for CompactionSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<String> for CompactionSource {
    fn from(s: String) -> Self {
        match s.as_str() {
            "recursive-summarization" => Self::RecursiveSummarization,
            "structured-summary" => Self::StructuredSummary,
            _ => Self::Custom(s),
        }
    }
}

impl From<CompactionSource> for String {
    fn from(c: CompactionSource) -> Self {
        c.as_str().to_owned()
    }
}

/// One event of a session's log: a message plus identity, order and framework flags.
///
/// `seq` and `session_id` are assigned by the repository on append; the
/// builder leaves them empty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionEvent {
    /// Unique within its session; appends are idempotent by this id.
    pub id: String,
    /// The owning session (set by the repository on append).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub session_id: String,
    /// Position in the session's archive: strictly increasing, never reused (0 before append).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub seq: u64,
    /// When the event happened (data, never used for ordering).
    #[serde(serialize_with = "crate::timestamp::serialize")]
    pub timestamp: DateTime<Utc>,
    /// The chat message.
    pub message: Message,
    /// Dot path of the agent that produced it (`orch.researcher`); `None` = root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Groups the events of one agent run; rewind works by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invocation_id: Option<String>,
    /// The agent that wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    /// State changes this event carries (`key`, `user:key`, `app:key`; `null` removes a key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub state_delta: Option<StateMap>,
    /// Set on synthetic events written by compaction (summary turns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction_source: Option<CompactionSource>,
    /// Estimated tokens of the message.
    #[serde(default)]
    pub token_estimate: u32,
    /// Free-form metadata (model, latency, ...).
    #[serde(default, skip_serializing_if = "StateMap::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub metadata: StateMap,
    /// A partial (streamed) chunk of a model answer, not the final one (ADK's `partial`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<bool>,
    /// The model's turn is complete (ADK's `turnComplete`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_complete: Option<bool>,
    /// The model or tool reported an error: its code (ADK's `errorCode`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// The error's message (ADK's `errorMessage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// The model's answer was interrupted, e.g. by the user (ADK's `interrupted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<bool>,
    /// Ids of the tool calls of this event still running in the
    /// background (ADK's `longRunningToolIds`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub long_running_tool_ids: Vec<String>,
    /// When the event left the context and which replace took it out; set
    /// on archive reads only, never stored with the event. `None` while it
    /// is in the context (and for events that left before the store kept
    /// context changes). See [`crate::ContextLog`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_context: Option<ContextExit>,
}

/// When an event left the context, and which replace took it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ContextExit {
    /// When the replace that took it out was written.
    pub at: DateTime<Utc>,
    /// The session's version after that replace (one compaction, one version).
    pub version: u64,
}

impl SessionEvent {
    /// Gives each event without a token estimate (0, as from a client that
    /// does not count) `estimator`'s, so token triggers see every message.
    ///
    /// ```
    /// use session_core::{HeuristicEstimator, Message, SessionEvent};
    /// let mut events = vec![SessionEvent::new(Message::user("hello there"))];
    /// events[0].token_estimate = 0;
    /// SessionEvent::estimate_missing(&mut events, &HeuristicEstimator);
    /// assert!(events[0].token_estimate > 0);
    /// ```
    pub fn estimate_missing(events: &mut [SessionEvent], estimator: &dyn TokenEstimator) {
        for e in events.iter_mut().filter(|e| e.token_estimate == 0) {
            e.token_estimate = estimator.estimate_message(&e.message);
        }
    }

    /// An event with the builder's defaults: new UUID, now, no branch, empty metadata.
    ///
    /// The id is a version 7 UUID: it starts with the time, so the ids of a
    /// session's events sort roughly in the order they were made and land
    /// at the end of a store's id index instead of at random pages of it.
    pub fn new(message: Message) -> Self {
        let token_estimate = HeuristicEstimator.estimate_message(&message);
        Self {
            id: Uuid::now_v7().to_string(),
            session_id: String::new(),
            seq: 0,
            timestamp: truncate_micros(Utc::now()),
            message,
            branch: None,
            invocation_id: None,
            author: None,
            state_delta: None,
            compaction_source: None,
            token_estimate,
            metadata: StateMap::new(),
            partial: None,
            turn_complete: None,
            error_code: None,
            error_message: None,
            interrupted: None,
            long_running_tool_ids: Vec::new(),
            left_context: None,
        }
    }

    /// A builder for an event around `message`.
    pub fn builder(message: Message) -> SessionEventBuilder {
        SessionEventBuilder {
            event: Self::new(message),
            estimate_set: false,
        }
    }

    /// The synthetic summary turn: a synthetic user prompt and a synthetic
    /// assistant summary, same timestamp, both marked with `source`.
    pub fn summary_turn(
        summary: impl Into<String>,
        source: CompactionSource,
        timestamp: DateTime<Utc>,
    ) -> [SessionEvent; 2] {
        Self::summary_turn_with(SUMMARY_PROMPT, summary, source, timestamp)
    }

    /// [`Self::summary_turn`] opened by the user message `prompt` instead
    /// of [`SUMMARY_PROMPT`] (a custom shadow prompt).
    pub fn summary_turn_with(
        prompt: &str,
        summary: impl Into<String>,
        source: CompactionSource,
        timestamp: DateTime<Utc>,
    ) -> [SessionEvent; 2] {
        let mut prompt = Self::new(Message::user(prompt));
        let mut answer = Self::new(Message::assistant(summary));
        prompt.compaction_source = Some(source.clone());
        answer.compaction_source = Some(source);
        for e in [&mut prompt, &mut answer] {
            e.timestamp = truncate_micros(timestamp);
        }
        [prompt, answer]
    }

    /// Whether compaction wrote this event.
    pub fn is_synthetic(&self) -> bool {
        self.compaction_source.is_some()
    }

    /// The message's role.
    pub fn role(&self) -> Role {
        self.message.role()
    }

    /// Whether this event opens a turn: a root-level, non-synthetic user message.
    pub fn starts_turn(&self) -> bool {
        self.branch.is_none() && !self.is_synthetic() && self.role() == Role::User
    }

    /// Whether an agent on `viewer` sees this event: root events, the
    /// viewer's own branch and its ancestors; not peers, not descendants.
    pub fn visible_to(&self, viewer: &str) -> bool {
        match &self.branch {
            None => true,
            Some(b) => {
                viewer == b
                    || (viewer.len() > b.len()
                        && viewer.starts_with(b.as_str())
                        && viewer.as_bytes()[b.len()] == b'.')
            }
        }
    }

    /// The event as JSON (what the size limit measures and what stores may keep as is).
    pub fn encode(&self) -> Result<String> {
        // Sized for a typical event up front: growing from serde_json's
        // 128 bytes took two or three reallocations an event.
        let failed = |e: crate::error::BoxError| {
            SessionError::serialization(format!("event {}", self.id), e)
        };
        let mut out = Vec::with_capacity(ENCODED_CAPACITY);
        serde_json::to_writer(&mut out, self).map_err(|e| failed(e.into()))?;
        String::from_utf8(out).map_err(|e| failed(e.into()))
    }

    /// The length in bytes of [`SessionEvent::encode`]'s output, counted
    /// as it is written instead of kept.
    pub fn encoded_len(&self) -> Result<usize> {
        let mut counted = ByteCount(0);
        serde_json::to_writer(&mut counted, self)
            .map_err(|e| SessionError::serialization(format!("event {}", self.id), e))?;
        Ok(counted.0)
    }

    /// The size of the event as stores keep it: the length in bytes of its
    /// encoding without seq, session id and context exit (what a batch's
    /// bodies hold and the bytes quota counts).
    pub fn stored_bytes(&self) -> Result<u64> {
        let mut bare = self.clone();
        bare.seq = 0;
        bare.session_id.clear();
        bare.left_context = None;
        Ok(u64::try_from(bare.encoded_len()?).unwrap_or(u64::MAX))
    }

    /// The stored sizes of `events`, summed (see [`SessionEvent::stored_bytes`]).
    pub fn stored_bytes_of<'a>(events: impl IntoIterator<Item = &'a Self>) -> Result<u64> {
        events
            .into_iter()
            .try_fold(0u64, |sum, e| Ok(sum.saturating_add(e.stored_bytes()?)))
    }

    /// Decodes an event a backend stored as JSON, with its seq and session
    /// taken from the store; a corrupt body is a `Serialization` error naming both.
    pub fn decode_stored(session_id: &str, seq: u64, body: &str) -> Result<Self> {
        let mut e: Self = serde_json::from_str(body).map_err(|err| {
            crate::SessionError::serialization(format!("session {session_id} seq {seq}"), err)
        })?;
        e.seq = seq;
        session_id.clone_into(&mut e.session_id);
        Ok(e)
    }

    /// Checks ids and branch of the event.
    pub fn validate(&self) -> Result<()> {
        validate_id("event id", &self.id)?;
        if let Some(b) = &self.branch {
            validate_branch(b)?;
        }
        if let Some(i) = &self.invocation_id {
            validate_id("invocation id", i)?;
        }
        Ok(())
    }
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Builds a [`SessionEvent`] with validation.
///
/// ```
/// use session_core::{Message, SessionEvent};
/// let event = SessionEvent::builder(Message::assistant("Research result"))
///     .branch("orch.researcher")
///     .invocation_id("inv-1")
///     .metadata("model", "gpt-4o")
///     .build()
///     .unwrap();
/// assert!(event.visible_to("orch.researcher"));
/// assert!(!event.visible_to("orch.writer"));
/// ```
#[derive(Debug, Clone)]
pub struct SessionEventBuilder {
    event: SessionEvent,
    estimate_set: bool,
}

impl SessionEventBuilder {
    /// Sets the event id (default: a new UUID).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.event.id = id.into();
        self
    }

    /// Sets the timestamp (default: now).
    pub fn timestamp(mut self, t: DateTime<Utc>) -> Self {
        self.event.timestamp = truncate_micros(t);
        self
    }

    /// Sets the agent branch (`orch.researcher`).
    pub fn branch(mut self, branch: impl Into<String>) -> Self {
        self.event.branch = Some(branch.into());
        self
    }

    /// Sets the invocation id grouping one agent run.
    pub fn invocation_id(mut self, id: impl Into<String>) -> Self {
        self.event.invocation_id = Some(id.into());
        self
    }

    /// Sets the author (agent name).
    pub fn author(mut self, author: impl Into<String>) -> Self {
        self.event.author = Some(author.into());
        self
    }

    /// Adds one state change carried by the event.
    pub fn state(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.event
            .state_delta
            .get_or_insert_with(StateMap::new)
            .insert(key.into(), value.into());
        self
    }

    /// Marks the event a partial (streamed) chunk, or not.
    pub fn partial(mut self, partial: bool) -> Self {
        self.event.partial = Some(partial);
        self
    }

    /// Marks the model's turn complete, or not.
    pub fn turn_complete(mut self, complete: bool) -> Self {
        self.event.turn_complete = Some(complete);
        self
    }

    /// Records an error the model or a tool reported: its code and message.
    pub fn error(mut self, code: impl Into<String>, message: impl Into<String>) -> Self {
        self.event.error_code = Some(code.into());
        self.event.error_message = Some(message.into());
        self
    }

    /// Marks the answer interrupted, or not.
    pub fn interrupted(mut self, interrupted: bool) -> Self {
        self.event.interrupted = Some(interrupted);
        self
    }

    /// Names the tool calls of this event that keep running in the background.
    pub fn long_running_tool_ids(
        mut self,
        ids: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.event.long_running_tool_ids = ids.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the whole state delta.
    pub fn state_delta(mut self, delta: StateMap) -> Self {
        self.event.state_delta = Some(delta);
        self
    }

    /// Adds a metadata entry.
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.event.metadata.insert(key.into(), value.into());
        self
    }

    /// Marks the event synthetic, written by `source`.
    pub fn synthetic(mut self, source: CompactionSource) -> Self {
        self.event.compaction_source = Some(source);
        self
    }

    /// Overrides the token estimate (default: the character heuristic).
    pub fn token_estimate(mut self, tokens: u32) -> Self {
        self.event.token_estimate = tokens;
        self.estimate_set = true;
        self
    }

    /// Re-estimates tokens with `estimator` unless an estimate was set explicitly.
    pub fn estimate_with(mut self, estimator: &dyn TokenEstimator) -> Self {
        if !self.estimate_set {
            self.event.token_estimate = estimator.estimate_message(&self.event.message);
        }
        self
    }

    /// Validates and returns the event.
    pub fn build(self) -> Result<SessionEvent> {
        self.event.validate()?;
        Ok(self.event)
    }
}

/// Counts turns: root-level, non-synthetic user messages.
pub fn turn_count<'a>(events: impl IntoIterator<Item = &'a SessionEvent>) -> usize {
    events.into_iter().filter(|e| e.starts_turn()).count()
}

/// Splits events into turns. Events before the first turn (synthetic
/// summaries, system prompts, branched events) form a leading group of their own.
pub fn split_turns(events: &[SessionEvent]) -> Vec<&[SessionEvent]> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, e) in events.iter().enumerate() {
        if e.starts_turn() && i > start {
            out.push(&events[start..i]);
            start = i;
        }
    }
    if start < events.len() {
        out.push(&events[start..]);
    }
    out
}

/// Rejects a replacement context that names the same event id twice.
pub fn check_unique_ids(events: &[SessionEvent]) -> Result<()> {
    let mut seen = std::collections::HashSet::with_capacity(events.len());
    for e in events {
        if !seen.insert(e.id.as_str()) {
            return Err(SessionError::invalid(
                "context",
                format!("event id {} appears twice", e.id),
            ));
        }
    }
    Ok(())
}

/// An [`std::io::Write`] that keeps nothing and counts the bytes written.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_event_ids_are_time_ordered_uuids() {
        let ids: Vec<Uuid> = (0..1000)
            .map(|_| SessionEvent::new(Message::user("hi")).id)
            .map(|id| Uuid::parse_str(&id).unwrap())
            .collect();
        assert!(ids.iter().all(|id| id.get_version_num() == 7));
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "each id sorts after the one made before it"
        );
    }

    #[test]
    fn encoded_len_is_the_length_of_the_encoding() {
        let mut e = SessionEvent::new(Message::user("quote \" tab \t ünïcode ✓ \u{1}"));
        e.metadata
            .insert("k".into(), serde_json::json!({"nested": [1, "two"]}));
        assert_eq!(e.encoded_len().unwrap(), e.encode().unwrap().len());
    }

    #[test]
    fn builder_defaults() {
        let e = SessionEvent::builder(Message::user("hi")).build().unwrap();
        assert!(Uuid::parse_str(&e.id).is_ok());
        assert!(e.branch.is_none());
        assert!(e.metadata.is_empty());
        assert!(!e.is_synthetic());
        assert!(e.token_estimate > 0);
        assert!((Utc::now() - e.timestamp).num_seconds() < 5);
    }

    #[test]
    fn builder_rejects_bad_ids() {
        assert!(SessionEvent::builder(Message::user("x"))
            .id("a/b")
            .build()
            .is_err());
        assert!(SessionEvent::builder(Message::user("x"))
            .branch("a..b")
            .build()
            .is_err());
        assert!(SessionEvent::builder(Message::user("x"))
            .invocation_id("")
            .build()
            .is_err());
    }

    #[test]
    fn branch_visibility_is_by_segment() {
        let on = |b: &str| {
            SessionEvent::builder(Message::user("x"))
                .branch(b)
                .build()
                .unwrap()
        };
        let root = SessionEvent::new(Message::user("x"));
        assert!(root.visible_to("orch.researcher"));
        assert!(on("orch").visible_to("orch.researcher"));
        assert!(on("orch.researcher").visible_to("orch.researcher"));
        assert!(!on("orch.writer").visible_to("orch.researcher"));
        assert!(!on("orch.res").visible_to("orch.researcher"));
        assert!(!on("orch.researcher.sub").visible_to("orch.researcher"));
    }

    #[test]
    fn turns_count_only_root_real_user_messages() {
        let t = Utc::now();
        let [p, s] =
            SessionEvent::summary_turn("earlier", CompactionSource::RecursiveSummarization, t);
        let events = vec![
            p,
            s,
            SessionEvent::new(Message::user("q1")),
            SessionEvent::new(Message::assistant("a1")),
            SessionEvent::builder(Message::user("sub"))
                .branch("orch.researcher")
                .build()
                .unwrap(),
            SessionEvent::new(Message::user("q2")),
        ];
        assert_eq!(turn_count(&events), 2);
        let turns = split_turns(&events);
        assert_eq!(turns.len(), 3);
        assert_eq!(turns[0].len(), 2);
        assert_eq!(turns[1].len(), 3);
        assert_eq!(turns[2].len(), 1);
    }

    #[test]
    fn event_json_round_trips() {
        let e = SessionEvent::builder(Message::user("x\0y 🦀"))
            .state("user:name", "Ada")
            .synthetic(CompactionSource::Custom("mine".into()))
            .build()
            .unwrap();
        let back: SessionEvent = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
        assert_eq!(back, e);
    }
}
