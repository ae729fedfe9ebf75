//! Stored values decoded: a session from its head hash and state, a state scope from its hash.

use std::collections::HashMap;

use session_core::{stored_counter, stored_id, Session, SessionError, StateMap, MAX_VERSION};

use crate::error::corrupt;
use crate::head_fields::time;

/// A session decoded from its head hash and state.
pub(crate) fn decode_session(
    id: &str,
    f: &HashMap<String, String>,
    state: StateMap,
) -> session_core::Result<Session> {
    let get = |k: &str| f.get(k).map(String::as_str).unwrap_or_default();
    let int = |k: &str| get(k).parse::<i64>().map_err(|e| corrupt(id, k, e));
    let at = |k: &str| time(id, k, int(k)?);
    let counter = |k: &str, max: u64| stored_counter(int(k)?, max, || format!("session {id} {k}"));
    Ok(Session {
        id: stored_id(id, || format!("session {id} id"))?,
        app: stored_id(get("app"), || format!("session {id} app"))?,
        user_id: stored_id(get("user_id"), || format!("session {id} user_id"))?,
        key: match get("key") {
            "" => None,
            k => Some(stored_id(k, || format!("session {id} key"))?),
        },
        status: get("status")
            .parse()
            .map_err(|e: SessionError| corrupt(id, "status", e))?,
        created_at: at("created_at")?,
        updated_at: at("updated_at")?,
        expires_at: if get("expires_at").is_empty() {
            None
        } else {
            Some(at("expires_at")?)
        },
        metadata: serde_json::from_str(get("metadata")).map_err(|e| corrupt(id, "metadata", e))?,
        state,
        event_count: counter("event_count", u64::MAX)?,
        event_bytes: match get("event_bytes") {
            "" => 0,
            _ => counter("event_bytes", u64::MAX)?,
        },
        context_tokens: counter("context_tokens", u64::MAX)?,
        version: counter("version", MAX_VERSION)?,
    })
}

/// A hash of JSON values as a state map; `what` names it in errors.
pub(crate) fn decode_state(
    raw: HashMap<String, String>,
    what: &str,
) -> session_core::Result<StateMap> {
    let mut map = StateMap::new();
    for (k, v) in raw {
        let value = serde_json::from_str(&v)
            .map_err(|e| SessionError::serialization(format!("{what} key {k}"), e))?;
        map.insert(k, value);
    }
    Ok(map)
}
