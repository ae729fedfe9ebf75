//! The context cut into what strategies may move.
//!
//! - **Pinned**: the latest stored system message of each branch. Never
//!   archived by a strategy, never sent to a summarizer, charged once as
//!   fixed overhead, placed first. Older system messages of the same branch
//!   are superseded and leave the context at the next compaction.
//! - **Synthetic**: existing summary turns, opaque, kept and placed after the pinned ones.
//! - **Preamble**: real events before the first user message (a boot note,
//!   sub-agent work); kept unless the budget cannot be met otherwise.
//! - **Turns**: whole turns, oldest first. The newest turn can be cut inside
//!   at step boundaries (see [`steps`]), never separating a tool call from its result.

use std::collections::{HashMap, HashSet};

use session_core::{Message, Role, SessionEvent};

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) pinned: Vec<SessionEvent>,
    pub(crate) superseded: Vec<SessionEvent>,
    pub(crate) synthetic: Vec<SessionEvent>,
    pub(crate) preamble: Vec<SessionEvent>,
    pub(crate) turns: Vec<Vec<SessionEvent>>,
    /// The first turn that must stay because it (or a later one) holds a
    /// tool call whose result has not arrived.
    pub(crate) pinned_from: usize,
    /// Tool calls whose result has not arrived.
    pending: HashSet<String>,
}

/// What a cut keeps and what leaves the context.
#[derive(Debug, Default)]
pub(crate) struct Cut {
    pub(crate) context: Vec<SessionEvent>,
    pub(crate) archived: Vec<SessionEvent>,
}

impl Cut {
    /// A cut that archives a tool call archives its results too, wherever
    /// they arrived: a result that came turns later leaves with its call
    /// rather than stay in the context without it. Never grows the context.
    pub(crate) fn paired(mut self) -> Self {
        let gone: HashSet<String> = self
            .archived
            .iter()
            .flat_map(|e| e.message.tool_calls().iter().map(|c| c.id.clone()))
            .collect();
        if gone.is_empty() {
            return self;
        }
        let (late, kept): (Vec<SessionEvent>, Vec<SessionEvent>) =
            self.context.into_iter().partition(|e| {
                matches!(&e.message, Message::Tool { tool_call_id, .. }
                    if gone.contains(tool_call_id))
            });
        self.context = kept;
        self.archived.extend(late);
        self
    }
}

pub(crate) fn tokens<'a>(events: impl IntoIterator<Item = &'a SessionEvent>) -> u64 {
    events
        .into_iter()
        .map(|e| u64::from(e.token_estimate))
        .sum()
}

fn is_stored_system(e: &SessionEvent) -> bool {
    !e.is_synthetic() && e.role() == Role::System
}

/// The ids of the tool calls in `events` that have a result in `events`.
pub(crate) fn answered(events: &[SessionEvent]) -> HashSet<&str> {
    events
        .iter()
        .filter_map(|e| match &e.message {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect()
}

impl Plan {
    pub(crate) fn new(events: &[SessionEvent]) -> Self {
        // The latest system message per branch is pinned; older ones are superseded.
        let mut latest: HashMap<Option<&str>, usize> = HashMap::new();
        for (i, e) in events.iter().enumerate() {
            if is_stored_system(e) {
                latest.insert(e.branch.as_deref(), i);
            }
        }
        let (mut pinned, mut superseded, mut synthetic, mut real) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (i, e) in events.iter().enumerate() {
            if is_stored_system(e) {
                if latest.get(&e.branch.as_deref()) == Some(&i) {
                    pinned.push(e.clone());
                } else {
                    superseded.push(e.clone());
                }
            } else if e.is_synthetic() {
                synthetic.push(e.clone());
            } else {
                real.push(e.clone());
            }
        }
        let done = answered(&real);
        let pending: HashSet<String> = real
            .iter()
            .filter(|e| e.role() == Role::Assistant)
            .flat_map(|e| e.message.tool_calls())
            .filter(|c| !done.contains(c.id.as_str()))
            .map(|c| c.id.clone())
            .collect();
        drop(done);
        // The turns are consecutive runs of `real`: move the events into them.
        let lengths: Vec<usize> = session_core::split_turns(&real)
            .iter()
            .map(|t| t.len())
            .collect();
        let mut rest = real.into_iter();
        let mut turns: Vec<Vec<SessionEvent>> = lengths
            .into_iter()
            .map(|n| rest.by_ref().take(n).collect())
            .collect();
        let preamble = match turns.first() {
            Some(first) if !first.first().is_some_and(SessionEvent::starts_turn) => turns.remove(0),
            _ => Vec::new(),
        };
        let waits = |e: &SessionEvent| {
            e.message
                .tool_calls()
                .iter()
                .any(|c| pending.contains(&c.id))
        };
        let pinned_from = turns
            .iter()
            .position(|turn| turn.iter().any(waits))
            .unwrap_or(turns.len());
        Self {
            pinned,
            superseded,
            synthetic,
            preamble,
            turns,
            pinned_from,
            pending,
        }
    }

    /// The latest turn index strategies may cut at: never past a pending
    /// tool call, and always keeping the last turn.
    pub(crate) fn max_cut(&self) -> usize {
        self.pinned_from.min(self.turns.len().saturating_sub(1))
    }

    /// The tokens every context this plan makes carries: the pinned messages.
    pub(crate) fn overhead(&self) -> u64 {
        tokens(&self.pinned)
    }

    /// Keeps the pinned messages, then `synthetic`, the preamble and the
    /// turns from `cut` on; superseded system messages and earlier turns
    /// leave. Moves the events: no copy of the context is made.
    pub(crate) fn cut(self, cut: usize, synthetic: Vec<SessionEvent>) -> Cut {
        let cut = cut.min(self.max_cut());
        let Self {
            pinned,
            superseded,
            preamble,
            turns,
            ..
        } = self;
        let mut context = pinned;
        context.extend(synthetic);
        context.extend(preamble);
        let mut archived = superseded;
        let mut turns = turns.into_iter();
        for turn in turns.by_ref().take(cut) {
            archived.extend(turn);
        }
        for turn in turns {
            context.extend(turn);
        }
        Cut { context, archived }.paired()
    }

    /// [`Plan::cut`], keeping the preamble or not.
    pub(crate) fn cut_with(
        &self,
        cut: usize,
        synthetic: Vec<SessionEvent>,
        keep_preamble: bool,
    ) -> Cut {
        let cut = cut.min(self.max_cut());
        let mut context = self.pinned.clone();
        context.extend(synthetic);
        let mut archived = self.superseded.clone();
        if keep_preamble {
            context.extend(self.preamble.iter().cloned());
        } else {
            archived.extend(self.preamble.iter().cloned());
        }
        context.extend(self.turns[cut..].iter().flatten().cloned());
        archived.extend(self.turns[..cut].iter().flatten().cloned());
        Cut { context, archived }.paired()
    }

    /// Where a cut keeping at least `keep` of the newest real events falls,
    /// as an index into the preamble and the turns read in order: moved
    /// earlier until no tool call before it has its result at or after
    /// it, and never past a turn that waits for a tool result. 0: nothing
    /// can leave.
    pub(crate) fn message_cut(&self, keep: usize) -> usize {
        let flat: Vec<&SessionEvent> = self
            .preamble
            .iter()
            .chain(self.turns.iter().flatten())
            .collect();
        let waiting_from = self.preamble.len()
            + self
                .turns
                .iter()
                .take(self.pinned_from)
                .map(Vec::len)
                .sum::<usize>();
        let mut k = flat.len().saturating_sub(keep).min(waiting_from);
        // (call, result) positions: a cut may not fall between the two.
        let mut call_at: HashMap<&str, usize> = HashMap::new();
        let mut pairs = Vec::new();
        for (i, e) in flat.iter().enumerate() {
            for c in e.message.tool_calls() {
                call_at.insert(c.id.as_str(), i);
            }
            if let Message::Tool { tool_call_id, .. } = &e.message {
                if let Some(&c) = call_at.get(tool_call_id.as_str()) {
                    pairs.push((c, i));
                }
            }
        }
        while let Some(c) = pairs
            .iter()
            .filter(|(c, r)| *c < k && k <= *r)
            .map(|(c, _)| *c)
            .min()
        {
            k = c;
        }
        k
    }

    /// How many real events (preamble and turns) the plan holds.
    pub(crate) fn real_len(&self) -> usize {
        self.preamble.len() + self.turns.iter().map(Vec::len).sum::<usize>()
    }

    /// The first `k` real events (preamble and turns in order), copied.
    pub(crate) fn first_real(&self, k: usize) -> Vec<SessionEvent> {
        self.preamble
            .iter()
            .chain(self.turns.iter().flatten())
            .take(k)
            .cloned()
            .collect()
    }

    /// Keeps the pinned messages, `synthetic` and the real events from
    /// index `k` on (see [`Plan::message_cut`]); superseded system messages
    /// and the earlier real events leave. Moves the events.
    pub(crate) fn cut_at_message(self, k: usize, synthetic: Vec<SessionEvent>) -> Cut {
        let Self {
            pinned,
            superseded,
            preamble,
            turns,
            ..
        } = self;
        let mut context = pinned;
        context.extend(synthetic);
        let mut archived = superseded;
        for (i, e) in preamble
            .into_iter()
            .chain(turns.into_iter().flatten())
            .enumerate()
        {
            if i < k {
                archived.push(e);
            } else {
                context.push(e);
            }
        }
        Cut { context, archived }.paired()
    }

    /// Whether cutting inside the newest turn is possible: every earlier
    /// turn can go, and the newest turn has steps to drop.
    pub(crate) fn can_cut_last_turn(&self) -> bool {
        let last = self.turns.len().saturating_sub(1);
        self.max_cut() == last && self.turns.last().is_some_and(|t| steps(t).len() > 1)
    }

    /// The pinned messages, `synthetic` and (if `keep_preamble`) the preamble.
    fn head(&self, synthetic: &[SessionEvent], keep_preamble: bool) -> Vec<SessionEvent> {
        let mut head = self.pinned.clone();
        head.extend(synthetic.iter().cloned());
        if keep_preamble {
            head.extend(self.preamble.iter().cloned());
        }
        head
    }

    /// Cuts everything before the newest turn, then keeps that turn's user
    /// message and its newest steps while `fits(kept context)` holds (the
    /// last step always stays): the cut for an overflow inside one turn.
    /// The preamble goes only when the turn's first and last steps do not
    /// fit with it.
    pub(crate) fn cut_inside_last_turn(
        &self,
        synthetic: &[SessionEvent],
        fits: impl Fn(&[SessionEvent]) -> bool,
    ) -> Cut {
        let last = self.turns.len().saturating_sub(1);
        let whole = self.cut_with(last, synthetic.to_vec(), true);
        if fits(&whole.context) || !self.can_cut_last_turn() {
            return whole;
        }
        let all = steps(&self.turns[last]);
        let must_keep = (all.len() - 1).min(self.first_waiting(&all)).max(1);
        let first = &all[0];
        let minimal = |keep_preamble: bool| {
            let mut c = self.head(synthetic, keep_preamble);
            c.extend(first.iter().cloned());
            c.extend(all[must_keep..].iter().flatten().cloned());
            c
        };
        let keep_preamble = self.preamble.is_empty() || fits(&minimal(true));
        let mut context = self.head(synthetic, keep_preamble);
        context.extend(first.iter().cloned());
        let mut kept_from = (all.len() - 1).min(self.first_waiting(&all)).max(1);
        while kept_from > 1 {
            let mut probe = context.clone();
            probe.extend(all[kept_from - 1..].iter().flatten().cloned());
            if !fits(&probe) {
                break;
            }
            kept_from -= 1;
        }
        context.extend(all[kept_from..].iter().flatten().cloned());
        let mut archived = self.superseded.clone();
        if !keep_preamble {
            archived.extend(self.preamble.iter().cloned());
        }
        archived.extend(self.turns[..last].iter().flatten().cloned());
        archived.extend(all[1..kept_from].iter().flatten().cloned());
        Cut { context, archived }.paired()
    }
}

impl Plan {
    /// The first of `steps` that holds a tool call still waiting for its
    /// result (it and every later step must stay); `steps.len()` if none.
    fn first_waiting(&self, steps: &[Vec<SessionEvent>]) -> usize {
        steps
            .iter()
            .position(|step| {
                step.iter().any(|e| {
                    e.message
                        .tool_calls()
                        .iter()
                        .any(|c| self.pending.contains(&c.id))
                })
            })
            .unwrap_or(steps.len())
    }

    /// The newest turn's steps that a summary would replace: every step
    /// between its user message and its newest `keep_steps` steps (none
    /// when there is nothing between).
    pub(crate) fn middle_steps(&self, keep_steps: usize) -> Vec<SessionEvent> {
        let Some(turn) = self.turns.last() else {
            return Vec::new();
        };
        let all = steps(turn);
        let end = all
            .len()
            .saturating_sub(keep_steps.max(1))
            .min(self.first_waiting(&all))
            .max(1);
        all[1..end].iter().flatten().cloned().collect()
    }

    /// Keeps the pinned messages, `synthetic`, the preamble, and of the
    /// newest turn its user message and newest `keep_steps` steps; every
    /// earlier turn and the steps between leave.
    pub(crate) fn cut_last_turn_steps(
        &self,
        synthetic: Vec<SessionEvent>,
        keep_steps: usize,
    ) -> Cut {
        let last = self.turns.len().saturating_sub(1);
        let Some(turn) = self.turns.last() else {
            return self.cut_with(0, synthetic, true);
        };
        let all = steps(turn);
        let end = all
            .len()
            .saturating_sub(keep_steps.max(1))
            .min(self.first_waiting(&all))
            .max(1);
        let mut context = self.head(&synthetic, true);
        context.extend(all[0].iter().cloned());
        context.extend(all[end..].iter().flatten().cloned());
        let mut archived = self.superseded.clone();
        archived.extend(self.turns[..last].iter().flatten().cloned());
        archived.extend(all[1..end].iter().flatten().cloned());
        Cut { context, archived }.paired()
    }
}

/// A turn cut at step boundaries: `[0]` is the user message (with anything
/// before the first assistant message), then one step per assistant message
/// with the tool results and other events that follow it. A result whose
/// call sits in an earlier step joins that step and everything between, so
/// a call and its result are never in different steps.
pub(crate) fn steps(turn: &[SessionEvent]) -> Vec<Vec<SessionEvent>> {
    let mut out: Vec<Vec<SessionEvent>> = vec![Vec::new()];
    let mut call_step: HashMap<&str, usize> = HashMap::new();
    for e in turn {
        if e.role() == Role::Assistant && !out[0].is_empty() {
            out.push(Vec::new());
        }
        if let Message::Tool { tool_call_id, .. } = &e.message {
            let here = out.len() - 1;
            if let Some(&from) = call_step.get(tool_call_id.as_str()) {
                if from > 0 && from < here {
                    let merged: Vec<SessionEvent> = out.drain(from..).flatten().collect();
                    out.push(merged);
                    for step in call_step.values_mut() {
                        *step = (*step).min(from);
                    }
                }
            }
        }
        let here = out.len() - 1;
        for c in e.message.tool_calls() {
            call_step.insert(c.id.as_str(), here);
        }
        out[here].push(e.clone());
    }
    out
}
