//! What is sealed and how: the values of one session under its data key,
//! shared-scope values under keys derived per scope.
//!
//! A sealed value is a JSON string. A session's own values (message
//! content, tool arguments, error text, session state, metadata) are
//! `asenc2:` and the base64 of nonce and ciphertext, authenticated with
//! the session id and the value's place ([`Place`]: which event and
//! field, or which state or metadata key); a `user:` or `app:` value is
//! `asenc2@<key id>:` and the same, authenticated with its scope and key.
//!
//! The first format (`asenc1`) bound a value to its session or scope
//! only. Its values still open in sessions whose key record is of that
//! format, and `rekey` reseals them; in a session of the current format a
//! value of the first format, or a plain one, is refused as moved or
//! replaced.

use std::cell::Cell;

use serde_json::{json, Value};
use session_core::{
    Content, ContentPart, Message, Result, Session, SessionEvent, SharedState, StateMap,
    ENCRYPTION_RECORD, FORKED_AT_SEQ, FORKED_FROM,
};

use crate::keyring::{failure, Key, Keyring};

/// The prefix of a session value sealed in the current format.
const SESSION_PREFIX: &str = "asenc2:";
/// The prefix of a session value sealed in the first format.
const SESSION_PREFIX_V1: &str = "asenc1:";
/// The prefix of a shared-scope value in the current format (`asenc2@kid:`).
const SHARED_PREFIX: &str = "asenc2@";
/// The prefix of a shared-scope value in the first format (`asenc1@kid:`).
const SHARED_PREFIX_V1: &str = "asenc1@";

/// The metadata key of a session's wrapped data key.
pub const KEY_RECORD: &str = ENCRYPTION_RECORD;

/// What a plain value in a session of the current format is told.
const NOT_SEALED: &str =
    "the value is not sealed, in a session whose values all are: it was replaced in the store";
/// What a value of the first format in a session of the current format is told.
const OLD_FORMAT: &str =
    "the value is sealed in the first format, in a session of the current one: it was moved or replaced in the store";

/// Metadata that stays plain: ids and numbers core filters on, and the key record.
pub(crate) fn plain_metadata(key: &str) -> bool {
    matches!(key, KEY_RECORD | FORKED_FROM | FORKED_AT_SEQ)
        || key == session_core::retention::RETENTION_KEY
}

/// The format of a session's key record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Format {
    /// No record: stored before encryption was on; values read as they are.
    Plain,
    /// The first format: values bound to the session only.
    V1,
    /// The current format: values bound to their place, all of them sealed.
    V2,
}

/// Where a session value sits: what its seal authenticates besides the session.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Place<'a> {
    /// The content (text and parts) of the event with this id.
    Content(&'a str),
    /// The arguments of the event's tool call at this index.
    ToolArguments(&'a str, usize),
    /// The error text of the event.
    Error(&'a str),
    /// The session-scope state value of this key (in the session's state
    /// and in the deltas that set it, where the store copies it as it is).
    State(&'a str),
    /// The metadata value of this key.
    Metadata(&'a str),
}

impl Place<'_> {
    fn binding(self, session: &str) -> Vec<u8> {
        let place = match self {
            Self::Content(event) => format!("event\u{0}{event}\u{0}content"),
            Self::ToolArguments(event, i) => format!("event\u{0}{event}\u{0}tool call {i}"),
            Self::Error(event) => format!("event\u{0}{event}\u{0}error"),
            Self::State(key) => format!("state\u{0}{key}"),
            Self::Metadata(key) => format!("metadata\u{0}{key}"),
        };
        format!("asenc2\u{0}{session}\u{0}{place}").into_bytes()
    }
}

/// A shared scope: `app:` values of an app, `user:` values of a user in an app.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scope<'a> {
    /// The app's `app:` state.
    App(&'a str),
    /// A user's `user:` state in an app.
    User(&'a str, &'a str),
}

impl Scope<'_> {
    /// What the scope's key is derived for (and, in the first format, what
    /// its values were bound to).
    fn binding(self) -> Vec<u8> {
        match self {
            Self::App(app) => format!("app\u{0}{app}").into_bytes(),
            Self::User(app, user) => format!("user\u{0}{app}\u{0}{user}").into_bytes(),
        }
    }

    /// What a value of state key `key` in the scope is bound to.
    fn value_binding(self, key: &str) -> Vec<u8> {
        let mut b = b"asenc2\0".to_vec();
        b.extend(self.binding());
        b.push(0);
        b.extend(key.as_bytes());
        b
    }
}

/// Seals the shared-scope value of `key` under the current key's derived scope key.
pub(crate) fn seal_shared(ring: &Keyring, scope: Scope<'_>, key: &str, v: &Value) -> Result<Value> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    let kid = ring.current_id();
    let derived = ring.derived(kid, &scope.binding(), "shared state")?;
    let sealed = derived.seal(&scope.value_binding(key), v.to_string().as_bytes());
    Ok(Value::String(format!("{SHARED_PREFIX}{kid}:{sealed}")))
}

/// Opens the shared-scope value of `key` (a plain one reads as it is).
pub(crate) fn open_shared(
    ring: &Keyring,
    scope: Scope<'_>,
    key: &str,
    v: Value,
    context: &str,
) -> Result<Value> {
    let Value::String(s) = &v else { return Ok(v) };
    let (rest, aad) = if let Some(rest) = s.strip_prefix(SHARED_PREFIX) {
        (rest, scope.value_binding(key))
    } else if let Some(rest) = s.strip_prefix(SHARED_PREFIX_V1) {
        (rest, scope.binding())
    } else {
        return Ok(v);
    };
    let (kid, sealed) = rest
        .split_once(':')
        .ok_or_else(|| failure(context, "the sealed value names no key"))?;
    let derived = ring.derived(kid, &scope.binding(), context)?;
    let bytes = derived.open(&aad, sealed, context)?;
    serde_json::from_slice(&bytes).map_err(|_| failure(context, "the opened value is not JSON"))
}

/// Seals and opens the values of one session.
pub(crate) struct SessionSeal<'a> {
    ring: &'a Keyring,
    key: Option<Key>,
    format: Format,
    id: String,
    app: String,
    user: String,
    /// Set when a value stored plain or in the first format was read: the
    /// session needs a rekey.
    pub(crate) stale: Cell<bool>,
}

impl<'a> SessionSeal<'a> {
    /// The seal of `session`, whose data key of `format` is `key` (`None`:
    /// the session was stored before encryption and has none yet).
    pub(crate) fn new(ring: &'a Keyring, key: Option<(Key, Format)>, session: &Session) -> Self {
        Self::of_owner(
            ring,
            key,
            [session.id.as_str(), &session.app, &session.user_id],
        )
    }

    /// The seal of session `id` of `user` in `app` (`[id, app, user]`).
    pub(crate) fn of_owner(
        ring: &'a Keyring,
        key: Option<(Key, Format)>,
        [id, app, user]: [&str; 3],
    ) -> Self {
        let (key, format) = match key {
            Some((k, f)) => (Some(k), f),
            None => (None, Format::Plain),
        };
        Self {
            ring,
            key,
            format,
            id: id.to_owned(),
            app: app.to_owned(),
            user: user.to_owned(),
            stale: Cell::new(false),
        }
    }

    /// The session's key, or the error a write to a session without one gets.
    fn key(&self) -> Result<&Key> {
        self.key.as_ref().ok_or_else(|| {
            failure(
                &format!("session {}", self.id),
                "it was stored before encryption was on and has no data key: run `agent-session rekey` first",
            )
        })
    }

    fn context(&self, what: &str) -> String {
        format!("session {} {what}", self.id)
    }

    fn seal_str(&self, s: &str, place: Place<'_>) -> Result<String> {
        let sealed = self.key()?.seal(&place.binding(&self.id), s.as_bytes());
        Ok(format!("{SESSION_PREFIX}{sealed}"))
    }

    /// The plain bytes of a sealed `s` at `place`; `None` for a plain value
    /// where the session's format allows one.
    fn open_str(&self, s: &str, place: Place<'_>, what: &str) -> Result<Option<Vec<u8>>> {
        let (sealed, aad) = if let Some(sealed) = s.strip_prefix(SESSION_PREFIX) {
            (sealed, place.binding(&self.id))
        } else if let Some(sealed) = s.strip_prefix(SESSION_PREFIX_V1) {
            if self.format == Format::V2 {
                return Err(failure(&self.context(what), OLD_FORMAT));
            }
            self.stale.set(true);
            (sealed, self.id.as_bytes().to_vec())
        } else {
            if self.format == Format::V2 {
                return Err(failure(&self.context(what), NOT_SEALED));
            }
            if !s.is_empty() {
                self.stale.set(true);
            }
            return Ok(None);
        };
        let context = self.context(what);
        let key = self
            .key
            .as_ref()
            .ok_or_else(|| failure(&context, "the session has no data key"))?;
        key.open(&aad, sealed, &context).map(Some)
    }

    /// A session value sealed (`null` stays: it removes a key).
    fn seal_value(&self, v: &Value, place: Place<'_>) -> Result<Value> {
        if v.is_null() {
            return Ok(Value::Null);
        }
        Ok(Value::String(self.seal_str(&v.to_string(), place)?))
    }

    fn open_value(&self, v: Value, place: Place<'_>, what: &str) -> Result<Value> {
        let Value::String(s) = &v else {
            if v.is_null() {
                return Ok(v);
            }
            if self.format == Format::V2 {
                return Err(failure(&self.context(what), NOT_SEALED));
            }
            self.stale.set(true);
            return Ok(v);
        };
        match self.open_str(s, place, what)? {
            Some(bytes) => serde_json::from_slice(&bytes)
                .map_err(|_| failure(&self.context(what), "the opened value is not JSON")),
            None => Ok(v),
        }
    }

    fn scope_of(&self, key: &str) -> Option<Scope<'_>> {
        if key.starts_with("user:") {
            Some(Scope::User(&self.app, &self.user))
        } else if key.starts_with("app:") {
            Some(Scope::App(&self.app))
        } else {
            None
        }
    }

    /// State (a delta or the session scope) with every value sealed, each
    /// under the key of its scope.
    pub(crate) fn seal_state(&self, state: &StateMap) -> Result<StateMap> {
        state
            .iter()
            .map(|(k, v)| {
                let sealed = match self.scope_of(k) {
                    Some(scope) => seal_shared(self.ring, scope, k, v)?,
                    None => self.seal_value(v, Place::State(k))?,
                };
                Ok((k.clone(), sealed))
            })
            .collect()
    }

    pub(crate) fn open_state(&self, state: StateMap, what: &str) -> Result<StateMap> {
        state
            .into_iter()
            .map(|(k, v)| {
                let what = format!("{what} {k}");
                let opened = match self.scope_of(&k) {
                    Some(scope) => open_shared(self.ring, scope, &k, v, &self.context(&what))?,
                    None => self.open_value(v, Place::State(&k), &what)?,
                };
                Ok((k, opened))
            })
            .collect()
    }

    /// Metadata with every value sealed but the plain keys.
    pub(crate) fn seal_metadata(&self, metadata: &StateMap) -> Result<StateMap> {
        metadata
            .iter()
            .filter(|(k, _)| k.as_str() != KEY_RECORD)
            .map(|(k, v)| {
                let v = if plain_metadata(k) {
                    v.clone()
                } else {
                    self.seal_value(v, Place::Metadata(k))?
                };
                Ok((k.clone(), v))
            })
            .collect()
    }

    /// Metadata opened, the key record left out.
    pub(crate) fn open_metadata(&self, metadata: StateMap) -> Result<StateMap> {
        metadata
            .into_iter()
            .filter(|(k, _)| k.as_str() != KEY_RECORD)
            .map(|(k, v)| {
                let v = if plain_metadata(&k) {
                    v
                } else {
                    self.open_value(v, Place::Metadata(&k), &format!("metadata {k}"))?
                };
                Ok((k, v))
            })
            .collect()
    }

    /// A session's metadata and state opened.
    pub(crate) fn open_session(&self, mut s: Session) -> Result<Session> {
        s.metadata = self.open_metadata(std::mem::take(&mut s.metadata))?;
        s.state = self.open_state(std::mem::take(&mut s.state), "state")?;
        Ok(s)
    }

    /// An event with its content (even empty: a value emptied in the store
    /// does not pass), tool arguments, error text and state delta sealed.
    pub(crate) fn seal_event(&self, mut e: SessionEvent) -> Result<SessionEvent> {
        let id = e.id.clone();
        let content = content_mut(&mut e.message);
        let plain = json!({"text": content.text, "parts": content.parts}).to_string();
        *content = Content::text(self.seal_str(&plain, Place::Content(&id))?);
        if let Message::Assistant { tool_calls, .. } = &mut e.message {
            for (i, call) in tool_calls.iter_mut().enumerate() {
                call.arguments = self.seal_str(&call.arguments, Place::ToolArguments(&id, i))?;
            }
        }
        if let Some(m) = &e.error_message {
            e.error_message = Some(self.seal_str(m, Place::Error(&id))?);
        }
        if let Some(delta) = &e.state_delta {
            e.state_delta = Some(self.seal_state(delta)?);
        }
        Ok(e)
    }

    /// An event as it was appended; a value moved from elsewhere, swapped
    /// or replaced is an `Encryption` error naming the session and event.
    pub(crate) fn open_event(&self, mut e: SessionEvent) -> Result<SessionEvent> {
        let id = e.id.clone();
        let what = format!("event {}", e.seq);
        let content = content_mut(&mut e.message);
        if content.parts.is_empty() {
            let at = format!("{what} content");
            if let Some(bytes) = self.open_str(&content.text, Place::Content(&id), &at)? {
                *content = decode_content(&bytes).ok_or_else(|| {
                    failure(&self.context(&at), "the opened content is not a message")
                })?;
            }
        } else if self.format == Format::V2 {
            return Err(failure(
                &self.context(&format!("{what} content")),
                NOT_SEALED,
            ));
        } else {
            self.stale.set(true);
        }
        if let Message::Assistant { tool_calls, .. } = &mut e.message {
            for (i, call) in tool_calls.iter_mut().enumerate() {
                let at = format!("{what} tool arguments");
                let place = Place::ToolArguments(&id, i);
                if let Some(bytes) = self.open_str(&call.arguments, place, &at)? {
                    call.arguments = utf8(bytes, &self.context(&at))?;
                }
            }
        }
        if let Some(m) = &e.error_message {
            let at = format!("{what} error");
            if let Some(bytes) = self.open_str(m, Place::Error(&id), &at)? {
                e.error_message = Some(utf8(bytes, &self.context(&at))?);
            }
        }
        if let Some(delta) = e.state_delta.take() {
            e.state_delta = Some(self.open_state(delta, &format!("{what} state"))?);
        }
        Ok(e)
    }

    /// The shared scopes of the session's owner, opened.
    pub(crate) fn open_shared_state(&self, shared: SharedState) -> Result<SharedState> {
        open_shared_state(self.ring, &self.app, &self.user, shared)
    }

    /// The shared scopes sealed.
    pub(crate) fn seal_shared_state(&self, shared: &SharedState) -> Result<SharedState> {
        let app = Scope::App(&self.app);
        let user = Scope::User(&self.app, &self.user);
        Ok(SharedState {
            app: seal_map(&shared.app, |k, v| seal_shared(self.ring, app, k, v))?,
            user: seal_map(&shared.user, |k, v| seal_shared(self.ring, user, k, v))?,
        })
    }
}

fn seal_map(map: &StateMap, seal: impl Fn(&str, &Value) -> Result<Value>) -> Result<StateMap> {
    map.iter()
        .map(|(k, v)| Ok((k.clone(), seal(k, v)?)))
        .collect()
}

/// The shared scopes of `user` in `app`, opened.
pub(crate) fn open_shared_state(
    ring: &Keyring,
    app: &str,
    user: &str,
    shared: SharedState,
) -> Result<SharedState> {
    let open = |scope: Scope<'_>, map: StateMap, what: &str| -> Result<StateMap> {
        map.into_iter()
            .map(|(k, v)| {
                let context = format!("{what} state {k}");
                let opened = open_shared(ring, scope, &k, v, &context)?;
                Ok((k, opened))
            })
            .collect()
    };
    Ok(SharedState {
        app: open(Scope::App(app), shared.app, &format!("app {app}"))?,
        user: open(
            Scope::User(app, user),
            shared.user,
            &format!("user {user} in {app}"),
        )?,
    })
}

/// Content as [`SessionSeal::seal_event`] encoded it.
fn decode_content(bytes: &[u8]) -> Option<Content> {
    #[derive(serde::Deserialize)]
    struct Sealed {
        text: String,
        #[serde(default)]
        parts: Vec<ContentPart>,
    }
    let s: Sealed = serde_json::from_slice(bytes).ok()?;
    let mut content = Content::text(s.text);
    content.parts = s.parts;
    Some(content)
}

fn utf8(bytes: Vec<u8>, context: &str) -> Result<String> {
    String::from_utf8(bytes).map_err(|_| failure(context, "the opened text is not UTF-8"))
}

fn content_mut(m: &mut Message) -> &mut Content {
    match m {
        Message::System { content }
        | Message::User { content, .. }
        | Message::Assistant { content, .. }
        | Message::Tool { content, .. } => content,
    }
}

/// A new random data key for session `id`, and its record (the key wrapped
/// with the keyring's current key, in the current format) for the
/// session's metadata.
pub(crate) fn new_data_key(ring: &Keyring, id: &str) -> Result<(Key, Value)> {
    let key = Key::random();
    let (kid, sealed) = ring.wrap(&key, &wrap_binding(id, Format::V2))?;
    Ok((key, json!({"kid": kid, "key": sealed, "v": 2})))
}

/// What a session's wrapped data key is bound to: the session and the
/// record's format (a record whose format was changed does not open).
pub(crate) fn wrap_binding(id: &str, format: Format) -> Vec<u8> {
    match format {
        Format::V2 => format!("agent-session data key v2\u{0}{id}").into_bytes(),
        Format::V1 | Format::Plain => format!("agent-session data key\u{0}{id}").into_bytes(),
    }
}

/// The key id, wrapped key and format of a session's record, if it has one.
pub(crate) fn record_of(metadata: &StateMap) -> Option<(&str, &str, Format)> {
    let r = metadata.get(KEY_RECORD)?;
    let format = match r.get("v") {
        None => Format::V1,
        Some(_) => Format::V2,
    };
    Some((r.get("kid")?.as_str()?, r.get("key")?.as_str()?, format))
}
