//! What compaction works on and produces, the triggers that start it, and
//! the strategies that decide what stays in the context.

use async_trait::async_trait;
use session_core::{BudgetShortfall, BudgetUnit, Session, SessionEvent};

use crate::plan::{tokens, Plan};

use crate::error::CompactionError;

/// Everything a strategy needs: the session and its current context.
#[derive(Debug, Clone)]
pub struct CompactionRequest {
    /// The session (counters included).
    pub session: Session,
    /// The context, in context order.
    pub events: Vec<SessionEvent>,
    /// Events in the context.
    pub event_count: usize,
    /// Turns in the context (root-level, non-synthetic user messages).
    pub turn_count: usize,
    /// Sum of the context events' token estimates.
    pub token_count: u64,
}

impl CompactionRequest {
    /// A request over `session`'s context `events`, with the counts computed.
    pub fn new(session: Session, events: Vec<SessionEvent>) -> Self {
        let token_count = events.iter().map(|e| u64::from(e.token_estimate)).sum();
        Self {
            event_count: events.len(),
            turn_count: session_core::turn_count(&events),
            token_count,
            session,
            events,
        }
    }
}

/// Sizes before and after a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CompactionMetrics {
    /// Context events before.
    pub events_before: usize,
    /// Context events after.
    pub events_after: usize,
    /// Context tokens before.
    pub tokens_before: u64,
    /// Context tokens after.
    pub tokens_after: u64,
    /// Events that left the context (they stay in the archive).
    pub archived: usize,
}

/// What a strategy decided.
#[derive(Debug, Clone)]
pub struct CompactionResult {
    /// The new context: synthetic events first, then the kept events in order.
    pub context: Vec<SessionEvent>,
    /// The events that leave the context (still in the archive).
    pub archived: Vec<SessionEvent>,
    /// The summary text written, for summarizing strategies.
    pub summary: Option<String>,
    /// Sizes before and after.
    pub metrics: CompactionMetrics,
    /// What the compaction did, as recorded on the session: set by
    /// [`crate::CompactionPolicy`] when it replaces the context.
    pub notice: Option<CompactionNotice>,
    /// When the strategy changed nothing: why.
    pub unchanged_because: Option<String>,
    /// The session's version once [`crate::CompactionPolicy`] swapped this
    /// context in (`None` until then).
    pub version: Option<u64>,
    /// When the new context is still over the strategy's budget: by how
    /// much and why.
    pub shortfall: Option<BudgetShortfall>,
}

/// What one compaction did: the policy returns it in the outcome and
/// records it (metadata key [`NOTICE_KEY`]) on every event the compaction
/// added to the context (a summary turn, a placeholder).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CompactionNotice {
    /// The strategy's name (`token-budget`, `summarize`, ...).
    pub strategy: String,
    /// Why it ran: the trigger that fired, or `requested` for a compaction run on demand.
    pub trigger: String,
    /// Events that left the context (they stay in the archive).
    pub events_archived: usize,
    /// Context tokens before.
    pub tokens_before: u64,
    /// Context tokens after.
    pub tokens_after: u64,
}

/// The metadata key of a [`CompactionNotice`] on the events a compaction added.
pub const NOTICE_KEY: &str = "compaction";

impl CompactionResult {
    /// Whether the strategy changed nothing.
    pub fn is_noop(&self) -> bool {
        self.archived.is_empty() && self.summary.is_none()
    }

    pub(crate) fn build(
        request: &CompactionRequest,
        context: Vec<SessionEvent>,
        archived: Vec<SessionEvent>,
        summary: Option<String>,
    ) -> Self {
        let tokens =
            |events: &[SessionEvent]| events.iter().map(|e| u64::from(e.token_estimate)).sum();
        let metrics = CompactionMetrics {
            events_before: request.events.len(),
            events_after: context.len(),
            tokens_before: request.token_count,
            tokens_after: tokens(&context),
            archived: archived.len(),
        };
        Self {
            context,
            archived,
            summary,
            metrics,
            notice: None,
            unchanged_because: None,
            version: None,
            shortfall: None,
        }
    }

    /// Records that the new context is still over the strategy's budget.
    pub(crate) fn short_by(mut self, shortfall: Option<BudgetShortfall>) -> Self {
        self.shortfall = shortfall;
        self
    }

    /// Records why nothing changed, when nothing did.
    pub(crate) fn explained(mut self, why: impl FnOnce() -> String) -> Self {
        if self.is_noop() {
            self.unchanged_because = Some(why());
        }
        self
    }
}

/// When to compact. Checked after appends; token counts come from the
/// session's running total, so token triggers cost O(1).
#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    /// When the context holds at least this many turns.
    TurnCount(usize),
    /// When the context's token estimate reaches this many tokens.
    TokenCount(u64),
    /// When the context reaches `fraction` of a model's `max_tokens` (the seeds use 0.7).
    ContextFraction {
        /// The model's context window in tokens.
        max_tokens: u64,
        /// The share of it that triggers compaction.
        fraction: f64,
    },
    /// When the context holds at least this many events (compacting every n events).
    EventCount(usize),
    /// When the context's real events span at least this many distinct
    /// invocations (agent runs). With a strategy that keeps `k` invocations,
    /// this compacts every `n − k` new invocations: ADK's events compaction
    /// (see [`crate::CompactionPolicy::every_invocations`]).
    InvocationCount(usize),
    /// When any of these fires.
    Any(Vec<Trigger>),
    /// When all of these fire.
    All(Vec<Trigger>),
    /// On every check: a policy that compacts whenever it is run (on
    /// demand, as `SessionService::compact` runs a spec without a trigger).
    Always,
}

pub(crate) fn at_least_one<T: PartialOrd + From<u8>>(
    field: &str,
    n: T,
) -> Result<T, CompactionError> {
    if n < T::from(1) {
        return Err(CompactionError::invalid(field, "must be at least 1"));
    }
    Ok(n)
}

impl Trigger {
    /// Fires at `n` turns (at least 1).
    pub fn turn_count(n: usize) -> Result<Self, CompactionError> {
        Ok(Self::TurnCount(at_least_one("turn count", n)?))
    }

    /// Fires at `n` context tokens (at least 1).
    pub fn token_count(n: u64) -> Result<Self, CompactionError> {
        Ok(Self::TokenCount(at_least_one("token count", n)?))
    }

    /// Fires at `n` context events (at least 1).
    pub fn event_count(n: usize) -> Result<Self, CompactionError> {
        Ok(Self::EventCount(at_least_one("event count", n)?))
    }

    /// Fires at `fraction` (in `(0, 1]`) of a `max_tokens` window (at least 1).
    pub fn fraction_of(max_tokens: u64, fraction: f64) -> Result<Self, CompactionError> {
        at_least_one("max tokens", max_tokens)?;
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(CompactionError::invalid(
                "fraction",
                format!("{fraction} is not in (0, 1]"),
            ));
        }
        Ok(Self::ContextFraction {
            max_tokens,
            fraction,
        })
    }

    /// Fires when any of `triggers` fires (at least one).
    pub fn any(triggers: Vec<Trigger>) -> Result<Self, CompactionError> {
        if triggers.is_empty() {
            return Err(CompactionError::invalid("triggers", "give at least one"));
        }
        Ok(Self::Any(triggers))
    }

    /// Fires when all of `triggers` fire (at least one).
    pub fn all(triggers: Vec<Trigger>) -> Result<Self, CompactionError> {
        if triggers.is_empty() {
            return Err(CompactionError::invalid("triggers", "give at least one"));
        }
        Ok(Self::All(triggers))
    }

    /// `ContextFraction` at the default 70 %.
    pub fn context_fraction(max_tokens: u64) -> Self {
        Self::ContextFraction {
            max_tokens,
            fraction: 0.7,
        }
    }

    /// Whether deciding needs the context's event or turn counts (not only the session's token total).
    pub fn needs_events(&self) -> bool {
        match self {
            Self::TurnCount(_) | Self::EventCount(_) | Self::InvocationCount(_) => true,
            Self::TokenCount(_) | Self::ContextFraction { .. } | Self::Always => false,
            Self::Any(ts) | Self::All(ts) => ts.iter().any(Trigger::needs_events),
        }
    }

    /// Whether the trigger fires for these counts.
    pub fn fires(&self, tokens: u64, events: usize, turns: usize) -> bool {
        match self {
            Self::TurnCount(n) => turns >= *n,
            Self::TokenCount(n) => tokens >= *n,
            Self::ContextFraction {
                max_tokens,
                fraction,
            } => {
                #[allow(clippy::cast_precision_loss)] // token counts are far below 2^52
                let limit = *max_tokens as f64 * fraction;
                #[allow(clippy::cast_precision_loss)]
                let used = tokens as f64;
                used >= limit
            }
            Self::EventCount(n) => events >= *n,
            // Needs the events themselves: see `fires_for`.
            Self::InvocationCount(_) => false,
            Self::Any(ts) => ts.iter().any(|t| t.fires(tokens, events, turns)),
            Self::All(ts) => !ts.is_empty() && ts.iter().all(|t| t.fires(tokens, events, turns)),
            Self::Always => true,
        }
    }

    /// Whether the trigger fires for a request.
    pub fn fires_for(&self, request: &CompactionRequest) -> bool {
        match self {
            Self::InvocationCount(n) => {
                let spanned: std::collections::HashSet<&str> = request
                    .events
                    .iter()
                    .filter(|e| !e.is_synthetic())
                    .filter_map(|e| e.invocation_id.as_deref())
                    .collect();
                spanned.len() >= *n
            }
            Self::Any(ts) => ts.iter().any(|t| t.fires_for(request)),
            Self::All(ts) => !ts.is_empty() && ts.iter().all(|t| t.fires_for(request)),
            other => other.fires(request.token_count, request.event_count, request.turn_count),
        }
    }
}

/// Decides the new context of a session.
#[async_trait]
pub trait CompactionStrategy: Send + Sync + std::fmt::Debug {
    /// A short name for logs and metrics.
    fn name(&self) -> &'static str;

    /// Computes the new context; the request's events are the current context.
    async fn compact(
        &self,
        request: &CompactionRequest,
    ) -> Result<CompactionResult, CompactionError>;
}

/// Keeps the most recent whole turns holding at most `max_events` real
/// events (pinned system messages and synthetic summaries not counted).
/// When the newest turn alone holds more, it is cut inside at step
/// boundaries: its user message and newest steps stay, a tool call never
/// leaves without its result.
#[derive(Debug, Clone, Copy)]
pub struct SlidingWindow {
    /// The most real (non-synthetic, non-pinned) events to keep.
    max_events: usize,
}

impl SlidingWindow {
    /// Keeps at most `max_events` real events (at least 1).
    pub fn new(max_events: usize) -> Result<Self, CompactionError> {
        Ok(Self {
            max_events: at_least_one("max events", max_events)?,
        })
    }

    /// The most real events kept.
    pub fn max_events(&self) -> usize {
        self.max_events
    }
}

impl Default for SlidingWindow {
    /// 100 events.
    fn default() -> Self {
        Self { max_events: 100 }
    }
}

#[async_trait]
impl CompactionStrategy for SlidingWindow {
    fn name(&self) -> &'static str {
        "sliding-window"
    }

    async fn compact(
        &self,
        request: &CompactionRequest,
    ) -> Result<CompactionResult, CompactionError> {
        let plan = Plan::new(&request.events);
        let mut kept = plan.preamble.len();
        let mut cut = plan.turns.len();
        for (i, turn) in plan.turns.iter().enumerate().rev() {
            if kept + turn.len() > self.max_events {
                break;
            }
            kept += turn.len();
            cut = i;
        }
        let fixed = plan.pinned.len() + plan.synthetic.len();
        let c = if cut == plan.turns.len() && plan.can_cut_last_turn() {
            plan.cut_inside_last_turn(&plan.synthetic, |ctx| {
                ctx.len().saturating_sub(fixed) <= self.max_events
            })
        } else {
            plan.cut_with(cut, plan.synthetic.clone(), true)
        };
        let real = c.context.len().saturating_sub(fixed);
        let shortfall = BudgetShortfall::of(
            BudgetUnit::Events,
            u64::try_from(self.max_events).unwrap_or(u64::MAX),
            u64::try_from(real).unwrap_or(u64::MAX),
            || shortfall_reason(&plan, plan.preamble.len() > self.max_events),
        );
        Ok(
            CompactionResult::build(request, c.context, c.archived, None)
                .short_by(shortfall)
                .explained(|| {
                    why_kept(
                        &plan,
                        &format!("{kept} events fit the window of {}", self.max_events),
                    )
                }),
        )
    }
}

/// Why a window strategy's context is still over its budget: what it
/// never cuts (`fixed_over`: the pinned messages, summaries and preamble
/// alone are over), a pending tool call, or the newest step.
fn shortfall_reason(plan: &Plan, fixed_over: bool) -> String {
    if fixed_over {
        "the pinned system messages, summaries and events before the first question are over it on their own"
            .to_owned()
    } else if plan.max_cut() < plan.turns.len().saturating_sub(1) {
        "a tool call still waiting for its result keeps its turn and every later one".to_owned()
    } else {
        "the newest turn's question and latest step are never cut".to_owned()
    }
}

/// Why a window strategy kept everything: the newest turn cannot be cut
/// further, a pending tool call holds the rest, or it all fits.
fn why_kept(plan: &Plan, fits: &str) -> String {
    if plan.turns.is_empty() {
        return "the context holds no turn to cut (only pinned, summary or preamble events)"
            .to_owned();
    }
    if plan.max_cut() < plan.turns.len().saturating_sub(1) {
        return "a tool call still waiting for its result keeps its turn and every later one"
            .to_owned();
    }
    if plan.turns.len() == 1 && !plan.can_cut_last_turn() {
        return "the context is one turn with a single step, which is never cut".to_owned();
    }
    fits.to_owned()
}

/// Keeps the most recent `max_turns` turns; does nothing while the context
/// holds no more turns than that (the preamble and pinned system messages
/// are not turns).
#[derive(Debug, Clone, Copy)]
pub struct TurnWindow {
    /// The most turns to keep (at least one is always kept).
    max_turns: usize,
}

impl TurnWindow {
    /// Keeps the latest `max_turns` turns (at least 1).
    pub fn new(max_turns: usize) -> Result<Self, CompactionError> {
        Ok(Self {
            max_turns: at_least_one("max turns", max_turns)?,
        })
    }

    /// The most turns kept.
    pub fn max_turns(&self) -> usize {
        self.max_turns
    }
}

impl Default for TurnWindow {
    /// 10 turns.
    fn default() -> Self {
        Self { max_turns: 10 }
    }
}

#[async_trait]
impl CompactionStrategy for TurnWindow {
    fn name(&self) -> &'static str {
        "turn-window"
    }

    async fn compact(
        &self,
        request: &CompactionRequest,
    ) -> Result<CompactionResult, CompactionError> {
        let plan = Plan::new(&request.events);
        if plan.turns.len() <= self.max_turns.max(1) {
            let turns = plan.turns.len();
            return Ok(
                CompactionResult::build(request, request.events.clone(), Vec::new(), None)
                    .explained(|| {
                        let plural = if turns == 1 { "" } else { "s" };
                        format!(
                            "the context holds {turns} turn{plural}, within the limit of {}",
                            self.max_turns
                        )
                    }),
            );
        }
        let cut = plan.turns.len().saturating_sub(self.max_turns.max(1));
        let kept = plan.turns.len().saturating_sub(cut.min(plan.max_cut()));
        let shortfall = BudgetShortfall::of(
            BudgetUnit::Turns,
            u64::try_from(self.max_turns).unwrap_or(u64::MAX),
            u64::try_from(kept).unwrap_or(u64::MAX),
            || shortfall_reason(&plan, false),
        );
        let c = plan.cut_with(cut, plan.synthetic.clone(), true);
        Ok(
            CompactionResult::build(request, c.context, c.archived, None)
                .short_by(shortfall)
                .explained(|| why_kept(&plan, "")),
        )
    }
}

/// Keeps the most recent whole turns that fit `max_tokens` together with the
/// pinned system messages (charged once, as fixed overhead), the synthetic
/// summaries and the preamble. When the newest turn alone is over budget,
/// it is cut inside at step boundaries (its user message and newest steps
/// stay; the preamble goes only if it must); the result is within budget
/// whenever the user message and the newest step fit at all.
#[derive(Debug, Clone, Copy)]
pub struct TokenBudget {
    /// The token budget of the compacted context.
    max_tokens: u64,
}

impl TokenBudget {
    /// Keeps the context within `max_tokens` (at least 1).
    pub fn new(max_tokens: u64) -> Result<Self, CompactionError> {
        Ok(Self {
            max_tokens: at_least_one("max tokens", max_tokens)?,
        })
    }

    /// The token budget.
    pub fn max_tokens(&self) -> u64 {
        self.max_tokens
    }
}

impl Default for TokenBudget {
    /// 8,000 tokens.
    fn default() -> Self {
        Self { max_tokens: 8_000 }
    }
}

#[async_trait]
impl CompactionStrategy for TokenBudget {
    fn name(&self) -> &'static str {
        "token-budget"
    }

    async fn compact(
        &self,
        request: &CompactionRequest,
    ) -> Result<CompactionResult, CompactionError> {
        let plan = Plan::new(&request.events);
        if plan.overhead() > self.max_tokens {
            return Err(CompactionError::invalid(
                "max tokens",
                format!(
                    "a budget of {} tokens is below the {} tokens of the pinned system messages",
                    self.max_tokens,
                    plan.overhead()
                ),
            ));
        }
        let mut used = plan.overhead() + tokens(&plan.synthetic) + tokens(&plan.preamble);
        let mut cut = plan.turns.len();
        for (i, turn) in plan.turns.iter().enumerate().rev() {
            let t = tokens(turn);
            if used + t > self.max_tokens {
                break;
            }
            used += t;
            cut = i;
        }
        let c = if cut == plan.turns.len() && plan.can_cut_last_turn() {
            plan.cut_inside_last_turn(&plan.synthetic, |ctx| tokens(ctx) <= self.max_tokens)
        } else {
            plan.cut_with(cut, plan.synthetic.clone(), true)
        };
        let total = request.token_count;
        let fixed = plan.overhead() + tokens(&plan.synthetic);
        let result = CompactionResult::build(request, c.context, c.archived, None);
        let shortfall = BudgetShortfall::of(
            BudgetUnit::Tokens,
            self.max_tokens,
            result.metrics.tokens_after,
            || shortfall_reason(&plan, fixed > self.max_tokens),
        );
        Ok(result.short_by(shortfall).explained(|| {
            why_kept(
                &plan,
                &format!(
                    "the context's {total} tokens fit the budget of {}",
                    self.max_tokens
                ),
            )
        }))
    }
}
