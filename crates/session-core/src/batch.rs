//! Checks of a batch of events before anything is planned or written.

use crate::error::{Result, SessionError};
use crate::event::SessionEvent;
use crate::state::take_temp;
use crate::validate::Limits;

/// Checks and normalizes an append or replace batch: ids valid, each event
/// within `limits.max_event_bytes`, batch within `limits.max_batch_events`,
/// `temp:` keys stripped from state deltas (empty deltas become `None`).
///
/// Returns each event's JSON encoding as checked against the size limit
/// (`seq` and `session_id` are left out while unset), which a backend may
/// store as is instead of encoding again.
pub fn prepare_events(events: &mut [SessionEvent], limits: &Limits) -> Result<Vec<String>> {
    check_each(events, limits, |e| {
        let json = e.encode()?;
        let len = json.len();
        Ok((json, len))
    })
}

/// [`prepare_events`] for a store that keeps the events themselves: the
/// same checks and normalization, answering each event's encoded size in
/// bytes (what the size limit and the bytes quota measure) without
/// keeping the encoding.
pub fn size_events(events: &mut [SessionEvent], limits: &Limits) -> Result<Vec<u64>> {
    check_each(events, limits, |e| {
        let len = e.encoded_len()?;
        Ok((u64::try_from(len).unwrap_or(u64::MAX), len))
    })
}

/// Checks and normalizes each event, then measures it: `measure` answers
/// what to keep of the event and its encoded length, checked against the
/// size limit.
fn check_each<T>(
    events: &mut [SessionEvent],
    limits: &Limits,
    measure: impl Fn(&SessionEvent) -> Result<(T, usize)>,
) -> Result<Vec<T>> {
    if events.len() > limits.max_batch_events {
        return Err(SessionError::invalid(
            "events",
            format!(
                "a batch of {} events is over the maximum of {}",
                events.len(),
                limits.max_batch_events
            ),
        ));
    }
    let mut measured = Vec::with_capacity(events.len());
    for e in events.iter_mut() {
        e.validate()?;
        if let Some(delta) = &mut e.state_delta {
            take_temp(delta);
            if delta.is_empty() {
                e.state_delta = None;
            }
        }
        e.seq = 0;
        e.session_id.clear();
        e.left_context = None;
        let (kept, len) = measure(e)?;
        if len > limits.max_event_bytes {
            return Err(SessionError::invalid(
                "event",
                format!(
                    "event {} is {len} bytes serialized; the limit is {}",
                    e.id, limits.max_event_bytes
                ),
            ));
        }
        measured.push(kept);
    }
    Ok(measured)
}
