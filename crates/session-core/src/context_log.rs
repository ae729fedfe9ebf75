//! The history of a session's context: when each event left it.
//!
//! Every context replace (a compaction, a restoring rewind) records one
//! [`ContextChange`]: its version, its time, the last seq the session held
//! before it, and the seqs of the new context as ranges. An append only
//! adds to the end of the context and a rewind only removes events from
//! the archive, so these changes are the whole history: from them
//! [`ContextLog::exit_of`] tells when an archived event left the context
//! and which replace took it out, without touching the event's own record.
//! A backend stores the changes as they come (one small record per
//! replace, never an update of the events it moved) and annotates archive
//! reads with [`ContextLog::annotate`].

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Result, SessionError};
use crate::event::{ContextExit, SessionEvent};
use crate::validate::{MAX_SEQ, MAX_VERSION};

/// One context replace: when, at which version, and what the context became.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ContextChange {
    /// The session's version after the replace: names the compaction.
    pub version: u64,
    /// When the replace was written (the store's clock).
    pub at: DateTime<Utc>,
    /// The highest seq before the replace: the events that could leave the context.
    pub before_seq: u64,
    /// The seqs of the new context, as sorted, disjoint, inclusive ranges.
    pub context: Vec<[u64; 2]>,
    /// The same seqs in context order, as inclusive runs (`[a, b]` is
    /// `a..=b` ascending): what a rewind or fork to a point after this
    /// change restores. A summary turn may lead the turns it follows, a
    /// placeholder keeps its result's place. Empty when the context is
    /// one run in seq order, and in changes written before stores kept
    /// the order (a context with gaps then has no recorded order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order: Vec<[u64; 2]>,
}

/// `seqs` as runs of consecutive ascending seqs.
fn runs(seqs: impl IntoIterator<Item = u64>) -> Vec<[u64; 2]> {
    let mut out: Vec<[u64; 2]> = Vec::new();
    for seq in seqs {
        match out.last_mut() {
            Some(last) if last[1].checked_add(1) == Some(seq) => last[1] = seq,
            _ => out.push([seq, seq]),
        }
    }
    out
}

impl ContextChange {
    /// The change of a replace at `version` and `at` that left `context`
    /// (seqs in any order) in a session whose highest seq was `before_seq`.
    pub fn new(version: u64, at: DateTime<Utc>, before_seq: u64, context: &[u64]) -> Self {
        let mut seqs = context.to_vec();
        seqs.sort_unstable();
        seqs.dedup();
        let in_seq_order = context.windows(2).all(|w| w[0] < w[1]);
        let ranges = runs(seqs);
        // An empty order reads as "not recorded" when the context has
        // gaps (a change from before stores kept the order), so a context
        // in seq order with gaps records its runs: a restore then keeps
        // its order instead of guessing compaction's.
        let order = if !in_seq_order {
            runs(context.iter().copied())
        } else if ranges.len() > 1 {
            ranges.clone()
        } else {
            Vec::new()
        };
        Self {
            version,
            at,
            before_seq,
            context: ranges,
            order,
        }
    }

    /// The context's seqs in context order (seq order when [`Self::order`]
    /// is empty).
    pub fn in_order(&self) -> Vec<u64> {
        let ranges = if self.order.is_empty() {
            &self.context
        } else {
            &self.order
        };
        ranges.iter().flat_map(|r| r[0]..=r[1]).collect()
    }

    /// Whether the change records its context's order: written by a store
    /// that keeps it, or in seq order.
    pub fn has_order(&self) -> bool {
        !self.order.is_empty() || self.context.len() <= 1
    }

    /// The highest seq the change knew of: its `before_seq`, or a summary
    /// the replace itself added.
    pub fn last_seq(&self) -> u64 {
        self.context
            .last()
            .map_or(self.before_seq, |r| r[1].max(self.before_seq))
    }

    /// Whether `seq` is in the context this change left.
    pub fn keeps(&self, seq: u64) -> bool {
        let i = self.context.partition_point(|r| r[1] < seq);
        self.context.get(i).is_some_and(|r| r[0] <= seq)
    }

    /// Encodes the change as one line of JSON, as stores keep it.
    pub fn encode(&self) -> Result<String> {
        serde_json::to_string(self).map_err(|e| SessionError::serialization("context change", e))
    }

    /// Decodes a change stored for session `session_id`, checking it: a
    /// `Serialization` error naming the session if it is not one.
    pub fn decode(session_id: &str, json: &str) -> Result<Self> {
        let what = || format!("session {session_id} context change");
        let change: Self =
            serde_json::from_str(json).map_err(|e| SessionError::serialization(what(), e))?;
        change
            .validate()
            .map_err(|e| SessionError::serialization(what(), e))?;
        Ok(change)
    }

    /// Checks the change is well formed: version and seqs in range, ranges sorted and disjoint.
    pub fn validate(&self) -> Result<()> {
        if self.version == 0 || self.version > MAX_VERSION {
            return Err(SessionError::invalid(
                "context change",
                format!("version {} is outside 1..={MAX_VERSION}", self.version),
            ));
        }
        if self.before_seq > MAX_SEQ {
            return Err(SessionError::invalid(
                "context change",
                format!(
                    "before_seq {} is over the maximum of {MAX_SEQ}",
                    self.before_seq
                ),
            ));
        }
        let mut after = 0;
        for r in &self.context {
            if r[0] <= after || r[1] < r[0] || r[1] > MAX_SEQ {
                return Err(SessionError::invalid(
                    "context change",
                    "context ranges must be sorted, disjoint and within 1..=MAX_SEQ",
                ));
            }
            after = r[1].saturating_add(1);
        }
        if !self.order.is_empty() {
            self.check_order()?;
        }
        Ok(())
    }

    /// Checks [`Self::order`] names exactly the context's seqs, each once.
    fn check_order(&self) -> Result<()> {
        let bad = || {
            SessionError::invalid(
                "context change",
                "order must hold exactly the context's seqs, in ascending runs",
            )
        };
        let size = |ranges: &[[u64; 2]]| {
            ranges.iter().try_fold(0u64, |n, r| {
                r[1].checked_sub(r[0])
                    .and_then(|d| d.checked_add(1))
                    .and_then(|d| n.checked_add(d))
            })
        };
        let total = size(&self.context).ok_or_else(bad)?;
        if total > MAX_ORDERED_CONTEXT || size(&self.order) != Some(total) {
            return Err(bad());
        }
        let mut ordered: Vec<u64> = self.order.iter().flat_map(|r| r[0]..=r[1]).collect();
        ordered.sort_unstable();
        if runs(ordered) != self.context {
            return Err(bad());
        }
        Ok(())
    }
}

/// The most seqs a change's [`ContextChange::order`] may name: far more
/// than any context holds, and a bound on what checking it allocates.
const MAX_ORDERED_CONTEXT: u64 = 10_000_000;

/// A session's context changes, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextLog {
    changes: Vec<ContextChange>,
}

impl ContextLog {
    /// The log of these changes (in any order; sorted by version here).
    pub fn new(mut changes: Vec<ContextChange>) -> Self {
        changes.sort_by_key(|c| c.version);
        Self { changes }
    }

    /// The log of changes a store read for session `session_id` as values
    /// (not through [`ContextChange::decode`]), checked: a malformed one is
    /// a `Serialization` error naming the session.
    pub fn checked(session_id: &str, changes: Vec<ContextChange>) -> Result<Self> {
        for c in &changes {
            c.validate().map_err(|e| {
                SessionError::serialization(format!("session {session_id} context change"), e)
            })?;
        }
        Ok(Self::new(changes))
    }

    /// The changes, oldest first.
    pub fn changes(&self) -> &[ContextChange] {
        &self.changes
    }

    /// The changes, oldest first, taken out of the log.
    pub fn into_changes(self) -> Vec<ContextChange> {
        self.changes
    }

    /// The latest replace made before the event at `point` was appended:
    /// the last change whose [`ContextChange::last_seq`] is below it.
    pub fn base_before(&self, point: u64) -> Option<&ContextChange> {
        self.changes.iter().rev().find(|c| c.last_seq() < point)
    }

    /// Records a new replace (its version is above every recorded one).
    pub fn push(&mut self, change: ContextChange) {
        self.changes.push(change);
    }

    /// When the event at `seq` left the context: the first replace of the
    /// latest run of replaces that each left it out. `None` while it is in
    /// the context, and for an event the log has no record of leaving (it
    /// left before its store kept context changes).
    pub fn exit_of(&self, seq: u64) -> Option<ContextExit> {
        let mut exit = None;
        for c in self.changes.iter().filter(|c| c.before_seq >= seq) {
            if c.keeps(seq) {
                exit = None;
            } else if exit.is_none() {
                exit = Some(ContextExit {
                    at: c.at,
                    version: c.version,
                });
            }
        }
        exit
    }

    /// Sets each event's [`SessionEvent::left_context`] from the log.
    pub fn annotate(&self, events: &mut [SessionEvent]) {
        if self.changes.is_empty() {
            return;
        }
        for e in events {
            e.left_context = self.exit_of(e.seq);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn at(minute: u32) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(&format!("2026-01-01T10:{minute:02}:00Z"))
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn a_change_keeps_its_context_as_merged_ranges() {
        let c = ContextChange::new(3, at(0), 9, &[10, 7, 8, 2, 9]);
        assert_eq!(c.context, vec![[2, 2], [7, 10]]);
        assert!(c.keeps(2) && c.keeps(8) && !c.keeps(3) && !c.keeps(11));
        assert_eq!(ContextChange::decode("s", &c.encode().unwrap()).unwrap(), c);
    }

    #[test]
    fn an_event_left_at_the_first_replace_that_dropped_it_for_good() {
        // Events 1..=6; v3 cuts 1..=4 (summary 7); v5 cuts 5 (summary 8);
        // v6 restores 1..=4; v8 cuts them again.
        let log = ContextLog::new(vec![
            ContextChange::new(5, at(2), 7, &[8, 6, 7]),
            ContextChange::new(3, at(1), 6, &[7, 5, 6]),
            ContextChange::new(6, at(3), 8, &[1, 2, 3, 4, 6, 7, 8]),
            ContextChange::new(8, at(4), 8, &[6, 7, 8]),
        ]);
        let exit = |seq| log.exit_of(seq).map(|e| (e.version, e.at));
        assert_eq!(
            exit(1),
            Some((8, at(4))),
            "re-entered at v6, left again at v8"
        );
        assert_eq!(exit(5), Some((5, at(2))), "left at v5, never back");
        assert_eq!(exit(6), None, "in the context");
        assert_eq!(exit(7), None, "the v3 summary, kept since");
        assert_eq!(exit(9), None, "appended after every replace");
    }

    #[test]
    fn malformed_changes_are_refused_when_decoded() {
        for bad in [
            r#"{"version":0,"at":"2026-01-01T00:00:00Z","before_seq":1,"context":[]}"#,
            r#"{"version":2,"at":"2026-01-01T00:00:00Z","before_seq":1,"context":[[3,2]]}"#,
            r#"{"version":2,"at":"2026-01-01T00:00:00Z","before_seq":1,"context":[[1,4],[3,5]]}"#,
            r#"{"version":2,"at":"2026-01-01T00:00:00Z","before_seq":1,"context":[[0,1]]}"#,
            "not json",
        ] {
            let e = ContextChange::decode("s1", bad).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Serialization, "{bad}");
            assert!(e.to_string().contains("session s1"), "{e}");
        }
    }
}
