//! State scopes: session, `user:`, `app:` and `temp:` keys.

use serde_json::Value;

/// A JSON object: state, state deltas and metadata.
pub type StateMap = serde_json::Map<String, Value>;
use serde::{Deserialize, Serialize};

/// Prefix of keys shared by all sessions of one user in one app.
pub const USER_PREFIX: &str = "user:";
/// Prefix of keys shared by all sessions of one app.
pub const APP_PREFIX: &str = "app:";
/// Prefix of keys that live only in the returned object and are never persisted.
pub const TEMP_PREFIX: &str = "temp:";

/// Where a state key lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StateScope {
    /// This session only (no prefix).
    Session,
    /// All sessions of the user in the app (`user:`).
    User,
    /// All sessions of the app (`app:`).
    App,
    /// Never persisted (`temp:`).
    Temp,
}

impl StateScope {
    /// The scope of `key`, by its prefix.
    pub fn of(key: &str) -> Self {
        if key.starts_with(USER_PREFIX) {
            Self::User
        } else if key.starts_with(APP_PREFIX) {
            Self::App
        } else if key.starts_with(TEMP_PREFIX) {
            Self::Temp
        } else {
            Self::Session
        }
    }
}

/// A state delta split by scope; `temp:` keys are dropped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScopedDelta {
    /// Session-scope changes.
    pub session: StateMap,
    /// `user:` changes (keys keep their prefix).
    pub user: StateMap,
    /// `app:` changes (keys keep their prefix).
    pub app: StateMap,
}

impl ScopedDelta {
    /// Splits `delta` by key prefix.
    pub fn split(delta: &StateMap) -> Self {
        let mut out = Self::default();
        for (k, v) in delta {
            let target = match StateScope::of(k) {
                StateScope::Session => &mut out.session,
                StateScope::User => &mut out.user,
                StateScope::App => &mut out.app,
                StateScope::Temp => continue,
            };
            target.insert(k.clone(), v.clone());
        }
        out
    }

    /// Whether nothing is to be persisted.
    pub fn is_empty(&self) -> bool {
        self.session.is_empty() && self.user.is_empty() && self.app.is_empty()
    }
}

/// `app:` and `user:` changes accumulated over a batch, in order: a later
/// value for a key wins, and `null` is kept so that it removes the key when applied.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SharedDelta {
    /// `app:` changes.
    pub app: StateMap,
    /// `user:` changes.
    pub user: StateMap,
}

impl SharedDelta {
    /// Adds the shared parts of one event's split delta.
    pub fn add(&mut self, split: &ScopedDelta) {
        for (k, v) in &split.app {
            self.app.insert(k.clone(), v.clone());
        }
        for (k, v) in &split.user {
            self.user.insert(k.clone(), v.clone());
        }
    }

    /// Applies one event's delta: the session part to `session_state` at
    /// once, the shared parts collected here for the caller to write.
    pub fn apply_event(&mut self, session_state: &mut StateMap, delta: &StateMap) {
        let split = ScopedDelta::split(delta);
        apply_delta(session_state, &split.session);
        self.add(&split);
    }

    /// Whether nothing shared changes.
    pub fn is_empty(&self) -> bool {
        self.app.is_empty() && self.user.is_empty()
    }
}

/// Encodes a state map as JSON text (for backends that store it as text).
pub fn encode_state(map: &StateMap, what: &str) -> crate::Result<String> {
    serde_json::to_string(map).map_err(|e| crate::SessionError::serialization(what.to_owned(), e))
}

/// Decodes stored state JSON; `what` names it in the error (which session, which field).
pub fn decode_state(text: &str, what: impl FnOnce() -> String) -> crate::Result<StateMap> {
    serde_json::from_str(text).map_err(|e| crate::SessionError::serialization(what(), e))
}

/// Stored session-state JSON, parsed on first use, so that writes carrying
/// no state delta never parse or rewrite it.
#[derive(Debug, Clone)]
pub struct LazyState {
    json: String,
    parsed: Option<StateMap>,
    session_id: String,
}

impl LazyState {
    /// Session `session_id`'s state stored as `json`.
    pub fn new(json: String, session_id: &str) -> Self {
        Self {
            json,
            parsed: None,
            session_id: session_id.to_owned(),
        }
    }

    /// The state, parsed now if it was not yet.
    pub fn get_mut(&mut self) -> crate::Result<&mut StateMap> {
        if self.parsed.is_none() {
            let id = &self.session_id;
            self.parsed = Some(decode_state(&self.json, || format!("session {id} state"))?);
        }
        Ok(self.parsed.get_or_insert_with(StateMap::new))
    }

    /// The JSON to write back, if anything touched the state.
    pub fn changed(&self) -> crate::Result<Option<String>> {
        self.parsed
            .as_ref()
            .map(|s| encode_state(s, "state"))
            .transpose()
    }
}

/// The shared scopes of one (app, user): returned by
/// [`crate::SessionRepository::shared_state`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SharedState {
    /// `app:` keys of the app.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub app: StateMap,
    /// `user:` keys of the user in the app.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub user: StateMap,
}

/// A session's state, one map per scope, and the session's version: what
/// [`crate::SessionService::state`] answers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ScopedState {
    /// The session's own keys.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub session: StateMap,
    /// The owner's `user:` keys in the app.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub user: StateMap,
    /// The app's `app:` keys.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub app: StateMap,
    /// The session's version (the HTTP routes answer it as the `ETag`).
    #[serde(default)]
    pub version: u64,
}

/// Applies `delta` to `target`: each key is set, and a `null` value removes it.
pub fn apply_delta(target: &mut StateMap, delta: &StateMap) {
    for (k, v) in delta {
        if v.is_null() {
            target.remove(k);
        } else {
            target.insert(k.clone(), v.clone());
        }
    }
}

/// Removes `temp:` keys from a delta and returns them.
pub fn take_temp(delta: &mut StateMap) -> StateMap {
    let temp_keys: Vec<String> = delta
        .keys()
        .filter(|k| StateScope::of(k) == StateScope::Temp)
        .cloned()
        .collect();
    let mut out = StateMap::new();
    for k in temp_keys {
        if let Some(v) = delta.remove(&k) {
            out.insert(k, v);
        }
    }
    out
}

/// The session-scope state produced by `initial` plus `deltas`, in order.
pub fn replay_deltas<'a>(
    initial: &StateMap,
    deltas: impl IntoIterator<Item = &'a StateMap>,
) -> StateMap {
    let mut state = ScopedDelta::split(initial).session;
    for d in deltas {
        apply_delta(&mut state, &ScopedDelta::split(d).session);
    }
    state
}

/// Merges session, user and app scopes into one map (session keys unprefixed, shared keys prefixed).
pub fn merge_scopes(session: &StateMap, shared: &SharedState) -> StateMap {
    let mut out = session.clone();
    for (k, v) in shared.user.iter().chain(shared.app.iter()) {
        out.insert(k.clone(), v.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn map(v: &Value) -> StateMap {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn split_by_prefix_drops_temp() {
        let d = ScopedDelta::split(&map(
            &json!({"a": 1, "user:n": "x", "app:v": 2, "temp:t": 3}),
        ));
        assert_eq!(d.session, map(&json!({"a": 1})));
        assert_eq!(d.user, map(&json!({"user:n": "x"})));
        assert_eq!(d.app, map(&json!({"app:v": 2})));
    }

    #[test]
    fn null_removes_a_key() {
        let mut s = map(&json!({"a": 1, "b": 2}));
        apply_delta(&mut s, &map(&json!({"a": null, "c": 3})));
        assert_eq!(s, map(&json!({"b": 2, "c": 3})));
    }
}
