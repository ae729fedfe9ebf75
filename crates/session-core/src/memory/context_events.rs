//! Reading a context's events from the memory store's archive.

use std::collections::{btree_map, BTreeMap};
use std::iter::Peekable;

use crate::event::SessionEvent;

/// The archive's events at a run of context seqs, in the context's order.
///
/// Where the seqs follow each other in the archive (a context's appended
/// tail, a whole uncompacted context) it walks the archive a step each
/// rather than looking every seq up: at 100,000 events the lookups' cache
/// misses were most of a full read. A seq the walk does not hold next
/// starts a new walk there; a seq the archive lacks is skipped.
pub(super) struct ContextEvents<'a> {
    seqs: std::slice::Iter<'a, u64>,
    archive: &'a BTreeMap<u64, SessionEvent>,
    walk: Option<Peekable<btree_map::Range<'a, u64, SessionEvent>>>,
}

impl<'a> ContextEvents<'a> {
    /// The events at `seqs`, from `archive`.
    pub(super) fn new(seqs: &'a [u64], archive: &'a BTreeMap<u64, SessionEvent>) -> Self {
        Self {
            seqs: seqs.iter(),
            archive,
            walk: None,
        }
    }
}

impl<'a> Iterator for ContextEvents<'a> {
    type Item = &'a SessionEvent;

    fn next(&mut self) -> Option<&'a SessionEvent> {
        loop {
            let seq = *self.seqs.next()?;
            let is_seq = |(k, _): &(&u64, &SessionEvent)| **k == seq;
            if let Some((_, e)) = self.walk.as_mut().and_then(|w| w.next_if(is_seq)) {
                return Some(e);
            }
            let walk = self.walk.insert(self.archive.range(seq..).peekable());
            if let Some((_, e)) = walk.next_if(is_seq) {
                return Some(e);
            }
        }
    }
}

impl DoubleEndedIterator for ContextEvents<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        loop {
            let seq = self.seqs.next_back()?;
            if let Some(e) = self.archive.get(seq) {
                return Some(e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;

    fn archive(seqs: &[u64]) -> BTreeMap<u64, SessionEvent> {
        seqs.iter()
            .map(|&seq| {
                let mut e = SessionEvent::new(Message::user(format!("event {seq}")));
                e.seq = seq;
                (seq, e)
            })
            .collect()
    }

    fn seqs<'a>(events: impl Iterator<Item = &'a SessionEvent>) -> Vec<u64> {
        events.map(|e| e.seq).collect()
    }

    #[test]
    fn yields_the_context_order_across_gaps_jumps_back_and_missing_seqs() {
        let archive = archive(&[1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12]);
        // A summary (12) before older events, a gap (3..5), a seq the
        // archive lacks (9) and a jump back (2 after 11).
        let context = [12, 1, 2, 6, 7, 9, 10, 11, 2];
        let front = seqs(ContextEvents::new(&context, &archive));
        assert_eq!(front, vec![12, 1, 2, 6, 7, 10, 11, 2]);
        let mut back = seqs(ContextEvents::new(&context, &archive).rev());
        back.reverse();
        assert_eq!(back, front);
    }

    #[test]
    fn front_and_back_meet_without_yielding_an_event_twice() {
        let archive = archive(&[1, 2, 3, 4, 5]);
        let context = [1, 2, 3, 4, 5];
        let mut events = ContextEvents::new(&context, &archive);
        let got: Vec<u64> = [
            events.next(),
            events.next_back(),
            events.next(),
            events.next_back(),
            events.next(),
            events.next(),
            events.next_back(),
        ]
        .iter()
        .map(|e| e.map_or(0, |e| e.seq))
        .collect();
        assert_eq!(got, vec![1, 5, 2, 4, 3, 0, 0]);
    }
}
