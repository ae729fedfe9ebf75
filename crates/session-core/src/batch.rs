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
    let mut encoded = Vec::with_capacity(events.len());
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
        let json = e.encode()?;
        let len = json.len();
        if len > limits.max_event_bytes {
            return Err(SessionError::invalid(
                "event",
                format!(
                    "event {} is {len} bytes serialized; the limit is {}",
                    e.id, limits.max_event_bytes
                ),
            ));
        }
        encoded.push(json);
    }
    Ok(encoded)
}
