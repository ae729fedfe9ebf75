//! The context at a point of a session's past, as a rewind or fork restores it.
//!
//! Appends only add to the end of the context, and every replace (a
//! compaction, a restoring rewind) records the whole context it left in the
//! session's [`ContextLog`]. So the context just before the event at seq
//! `point` was appended is the context of the latest replace made before
//! it (its *base*), less what has left the archive since, followed by the
//! events appended after that replace and before the point. That holds
//! after any mix of strategies, restores, rewinds and prunes, and is what
//! [`context_at`] computes; it reads no event content.

use std::collections::BTreeMap;

use crate::context_log::ContextLog;
use crate::event::SessionEvent;
use crate::message::Role;

/// What restoring a context needs of one archived event.
pub trait Restorable {
    /// Its seq.
    fn seq(&self) -> u64;
    /// Whether compaction wrote it (a summary).
    fn synthetic(&self) -> bool;
    /// Whether it is a stored system message (one a compaction pins first).
    fn system(&self) -> bool;
}

impl Restorable for SessionEvent {
    fn seq(&self) -> u64 {
        self.seq
    }
    fn synthetic(&self) -> bool {
        self.is_synthetic()
    }
    fn system(&self) -> bool {
        !self.is_synthetic() && self.role() == Role::System
    }
}

impl<T: Restorable> Restorable for &T {
    fn seq(&self) -> u64 {
        (**self).seq()
    }
    fn synthetic(&self) -> bool {
        (**self).synthetic()
    }
    fn system(&self) -> bool {
        (**self).system()
    }
}

/// The context at a point, as far as the session's history tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restore {
    /// The context's seqs, in context order.
    Context(Vec<u64>),
    /// The history cannot tell: the session was compacted before its store
    /// kept context changes. The caller falls back to what the removed
    /// summaries say they replaced.
    Unknown,
}

/// The context just before the event at `point` was appended, from the
/// session's `log` and its `archive` (every archived event, in any order;
/// those at or after `point` are ignored).
///
/// Events the archive no longer holds (rewound, pruned) are left out. A
/// replace recorded without its context order (by a store from before
/// order was kept) is put in the order compaction writes: pinned system
/// messages, summaries, then the rest by seq.
pub fn context_at<T: Restorable>(log: &ContextLog, archive: &[T], point: u64) -> Restore {
    let alive: BTreeMap<u64, &T> = archive
        .iter()
        .filter(|e| e.seq() < point)
        .map(|e| (e.seq(), e))
        .collect();
    let Some(base) = log.base_before(point) else {
        if alive.values().any(Restorable::synthetic) {
            return Restore::Unknown;
        }
        return Restore::Context(alive.keys().copied().collect());
    };
    let ordered = if base.has_order() {
        base.in_order()
    } else {
        let known: Vec<&T> = base
            .in_order()
            .into_iter()
            .filter_map(|s| alive.get(&s).copied())
            .collect();
        compaction_order(known)
            .iter()
            .map(Restorable::seq)
            .collect()
    };
    let mut context: Vec<u64> = ordered
        .into_iter()
        .filter(|s| alive.contains_key(s))
        .collect();
    if let Some(from) = base.last_seq().checked_add(1) {
        context.extend(alive.range(from..).map(|(s, _)| *s));
    }
    Restore::Context(context)
}

/// `context` in the order compaction writes it: stored system messages
/// first, then summaries, then every other event by seq; each group keeps
/// its seq order. What a restore without a recorded order uses.
pub fn compaction_order<T: Restorable>(mut context: Vec<T>) -> Vec<T> {
    context.sort_by_key(|e| {
        let group = if e.system() {
            0u8
        } else if e.synthetic() {
            1
        } else {
            2
        };
        (group, e.seq())
    });
    context
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;
    use crate::context_log::ContextChange;

    #[derive(Debug, Clone, Copy)]
    struct E(u64, bool, bool);

    impl Restorable for E {
        fn seq(&self) -> u64 {
            self.0
        }
        fn synthetic(&self) -> bool {
            self.1
        }
        fn system(&self) -> bool {
            self.2
        }
    }

    fn user(seq: u64) -> E {
        E(seq, false, false)
    }

    fn change(version: u64, before_seq: u64, context: &[u64]) -> ContextChange {
        let at = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        ContextChange::new(version, at, before_seq, context)
    }

    fn at(log: &ContextLog, archive: &[E], point: u64) -> Vec<u64> {
        match context_at(log, archive, point) {
            Restore::Context(seqs) => seqs,
            Restore::Unknown => panic!("the log should tell"),
        }
    }

    #[test]
    fn a_window_cut_is_undone_at_a_point_before_it() {
        // System 1, turns 2-3, 4-5, 6-7; a window keeps the system and the last turn.
        let mut archive = vec![E(1, false, true)];
        archive.extend((2..=7).map(user));
        let log = ContextLog::new(vec![change(8, 7, &[1, 6, 7])]);
        assert_eq!(at(&log, &archive, 6), vec![1, 2, 3, 4, 5], "before turn 3");
        assert_eq!(at(&log, &archive, 8), vec![1, 6, 7], "after the cut");
        archive.push(user(8));
        assert_eq!(at(&log, &archive, 9), vec![1, 6, 7, 8], "appended since");
    }

    #[test]
    fn a_summary_leads_the_turns_it_follows_and_order_survives() {
        // A summary (seq 6) of 2..=3 placed after the system message.
        let archive = [
            E(1, false, true),
            user(2),
            user(3),
            user(4),
            user(5),
            E(6, true, false),
            user(7),
        ];
        let log = ContextLog::new(vec![change(3, 5, &[1, 6, 4, 5])]);
        assert_eq!(at(&log, &archive, 8), vec![1, 6, 4, 5, 7]);
        assert_eq!(at(&log, &archive, 7), vec![1, 6, 4, 5]);
        assert_eq!(
            at(&log, &archive, 5),
            vec![1, 2, 3, 4],
            "before the summary"
        );
    }

    #[test]
    fn a_second_compaction_and_a_rewind_in_between_are_followed() {
        // Events 1..=6; v3 summarises 1..=4 into 7; rewind to 6 restored
        // nothing new; 8, 9 appended; v6 cuts to 9 only.
        let archive = [
            user(1),
            user(2),
            user(5),
            E(7, true, false),
            user(8),
            user(9),
        ];
        let log = ContextLog::new(vec![change(3, 6, &[7, 5, 6]), change(6, 9, &[9])]);
        assert_eq!(at(&log, &archive, 9), vec![7, 5, 8], "6 was rewound away");
        assert_eq!(at(&log, &archive, 10), vec![9]);
        assert_eq!(at(&log, &archive, 5), vec![1, 2], "3 and 4 were pruned");
    }

    #[test]
    fn a_change_without_its_order_gets_the_order_compaction_writes() {
        let archive = [E(1, false, true), user(2), user(3), E(4, true, false)];
        let mut old = change(2, 3, &[4, 1, 3]);
        old.order.clear();
        let log = ContextLog::new(vec![old]);
        assert_eq!(at(&log, &archive, 5), vec![1, 4, 3]);
    }

    #[test]
    fn a_summary_without_a_recorded_replace_is_unknown() {
        let archive = [user(1), E(2, true, false), user(3)];
        let log = ContextLog::new(vec![change(4, 5, &[3])]);
        assert_eq!(context_at(&log, &archive, 3), Restore::Unknown);
        assert_eq!(
            context_at(&ContextLog::default(), &[user(1), user(2)], 3),
            Restore::Context(vec![1, 2])
        );
    }

    #[test]
    fn compaction_order_puts_system_then_summaries_then_the_rest() {
        let ordered =
            compaction_order(vec![user(5), E(9, true, false), user(2), E(1, false, true)]);
        let seqs: Vec<u64> = ordered.iter().map(Restorable::seq).collect();
        assert_eq!(seqs, vec![1, 9, 2, 5]);
    }
}
