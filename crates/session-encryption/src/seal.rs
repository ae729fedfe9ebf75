//! What is sealed and how: the values of one session under its data key,
//! shared-scope values under keys derived per scope.
//!
//! A sealed value is a JSON string: `asenc1:` and the base64 of nonce and
//! ciphertext for a session's own values (message content, tool arguments,
//! error text, session state, metadata), bound to the session id;
//! `asenc1@<key id>:` and the same for a `user:` or `app:` value, bound to
//! its scope. A value without the prefix was stored before encryption and
//! reads as it is.

use std::cell::Cell;

use serde_json::{json, Value};
use session_core::{
    Content, ContentPart, Message, Result, Session, SessionEvent, SharedState, StateMap,
    FORKED_AT_SEQ, FORKED_FROM,
};

use crate::keyring::{failure, Key, Keyring};

/// The prefix of a value sealed under its session's data key.
const SESSION_PREFIX: &str = "asenc1:";
/// The prefix of a value sealed under a shared scope's key (`asenc1@kid:`).
const SHARED_PREFIX: &str = "asenc1@";

/// The metadata key of a session's wrapped data key.
pub const KEY_RECORD: &str = "_encryption";

/// Metadata that stays plain: ids and numbers core filters on, and the key record.
pub(crate) fn plain_metadata(key: &str) -> bool {
    matches!(key, KEY_RECORD | FORKED_FROM | FORKED_AT_SEQ)
        || key == session_core::retention::RETENTION_KEY
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
    fn binding(self) -> Vec<u8> {
        match self {
            Self::App(app) => format!("app\u{0}{app}").into_bytes(),
            Self::User(app, user) => format!("user\u{0}{app}\u{0}{user}").into_bytes(),
        }
    }
}

/// Seals a shared-scope value under the current key's derived scope key.
pub(crate) fn seal_shared(ring: &Keyring, scope: Scope<'_>, v: &Value) -> Result<Value> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    let kid = ring.current_id();
    let key = ring.derived(kid, &scope.binding(), "shared state")?;
    let sealed = key.seal(&scope.binding(), v.to_string().as_bytes());
    Ok(Value::String(format!("{SHARED_PREFIX}{kid}:{sealed}")))
}

/// Opens a shared-scope value (a plain one reads as it is).
pub(crate) fn open_shared(
    ring: &Keyring,
    scope: Scope<'_>,
    v: Value,
    context: &str,
) -> Result<Value> {
    let Value::String(s) = &v else { return Ok(v) };
    let Some(rest) = s.strip_prefix(SHARED_PREFIX) else {
        return Ok(v);
    };
    let (kid, sealed) = rest
        .split_once(':')
        .ok_or_else(|| failure(context, "the sealed value names no key"))?;
    let key = ring.derived(kid, &scope.binding(), context)?;
    let bytes = key.open(&scope.binding(), sealed, context)?;
    serde_json::from_slice(&bytes).map_err(|_| failure(context, "the opened value is not JSON"))
}

/// Seals and opens the values of one session.
pub(crate) struct SessionSeal<'a> {
    ring: &'a Keyring,
    key: Option<Key>,
    id: String,
    app: String,
    user: String,
    /// Set when a plain (never sealed) value was read: the session needs a rekey.
    pub(crate) saw_plain: Cell<bool>,
}

impl<'a> SessionSeal<'a> {
    /// The seal of a session with data key `key` (`None`: the session was
    /// stored before encryption and has none yet).
    pub(crate) fn new(ring: &'a Keyring, key: Option<Key>, session: &Session) -> Self {
        Self::of_owner(
            ring,
            key,
            [session.id.as_str(), &session.app, &session.user_id],
        )
    }

    /// The seal of session `id` of `user` in `app` (`[id, app, user]`).
    pub(crate) fn of_owner(
        ring: &'a Keyring,
        key: Option<Key>,
        [id, app, user]: [&str; 3],
    ) -> Self {
        Self {
            ring,
            key,
            id: id.to_owned(),
            app: app.to_owned(),
            user: user.to_owned(),
            saw_plain: Cell::new(false),
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

    fn seal_str(&self, s: &str) -> Result<String> {
        Ok(format!(
            "{SESSION_PREFIX}{}",
            self.key()?.seal(self.id.as_bytes(), s.as_bytes())
        ))
    }

    fn open_str(&self, s: &str, what: &str) -> Result<Option<Vec<u8>>> {
        let Some(sealed) = s.strip_prefix(SESSION_PREFIX) else {
            if !s.is_empty() {
                self.saw_plain.set(true);
            }
            return Ok(None);
        };
        let context = self.context(what);
        let key = self
            .key
            .as_ref()
            .ok_or_else(|| failure(&context, "the session has no data key"))?;
        key.open(self.id.as_bytes(), sealed, &context).map(Some)
    }

    /// A session value sealed (`null` stays: it removes a key).
    fn seal_value(&self, v: &Value) -> Result<Value> {
        if v.is_null() {
            return Ok(Value::Null);
        }
        Ok(Value::String(self.seal_str(&v.to_string())?))
    }

    fn open_value(&self, v: Value, what: &str) -> Result<Value> {
        let Value::String(s) = &v else {
            self.saw_plain.set(!v.is_null() || self.saw_plain.get());
            return Ok(v);
        };
        match self.open_str(s, what)? {
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
                    Some(scope) => seal_shared(self.ring, scope, v)?,
                    None => self.seal_value(v)?,
                };
                Ok((k.clone(), sealed))
            })
            .collect()
    }

    pub(crate) fn open_state(&self, state: StateMap, what: &str) -> Result<StateMap> {
        state
            .into_iter()
            .map(|(k, v)| {
                let context = format!("{} {what} {k}", self.context(""));
                let opened = match self.scope_of(&k) {
                    Some(scope) => open_shared(self.ring, scope, v, &context)?,
                    None => self.open_value(v, &format!("{what} {k}"))?,
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
                    self.seal_value(v)?
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
                    self.open_value(v, &format!("metadata {k}"))?
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

    /// An event with its content, tool arguments, error text and state delta sealed.
    pub(crate) fn seal_event(&self, mut e: SessionEvent) -> Result<SessionEvent> {
        let content = content_mut(&mut e.message);
        if !content.text.is_empty() || !content.parts.is_empty() {
            let plain = json!({"text": content.text, "parts": content.parts}).to_string();
            *content = Content::text(self.seal_str(&plain)?);
        }
        if let Message::Assistant { tool_calls, .. } = &mut e.message {
            for call in tool_calls {
                call.arguments = self.seal_str(&call.arguments)?;
            }
        }
        if let Some(m) = &e.error_message {
            e.error_message = Some(self.seal_str(m)?);
        }
        if let Some(delta) = &e.state_delta {
            e.state_delta = Some(self.seal_state(delta)?);
        }
        Ok(e)
    }

    /// An event as it was appended.
    pub(crate) fn open_event(&self, mut e: SessionEvent) -> Result<SessionEvent> {
        let what = format!("seq {}", e.seq);
        let content = content_mut(&mut e.message);
        if content.parts.is_empty() {
            if let Some(bytes) = self.open_str(&content.text, &format!("{what} content"))? {
                *content = decode_content(&bytes).ok_or_else(|| {
                    failure(&self.context(&what), "the opened content is not a message")
                })?;
            }
        } else {
            self.saw_plain.set(true);
        }
        if let Message::Assistant { tool_calls, .. } = &mut e.message {
            for call in tool_calls {
                if let Some(bytes) =
                    self.open_str(&call.arguments, &format!("{what} tool arguments"))?
                {
                    call.arguments = utf8(bytes, &self.context(&what))?;
                }
            }
        }
        if let Some(m) = &e.error_message {
            if let Some(bytes) = self.open_str(m, &format!("{what} error"))? {
                e.error_message = Some(utf8(bytes, &self.context(&what))?);
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
            app: seal_map(shared.app.iter(), |v| seal_shared(self.ring, app, v))?,
            user: seal_map(shared.user.iter(), |v| seal_shared(self.ring, user, v))?,
        })
    }
}

fn seal_map<'v>(
    entries: impl Iterator<Item = (&'v String, &'v Value)>,
    seal: impl Fn(&Value) -> Result<Value>,
) -> Result<StateMap> {
    entries.map(|(k, v)| Ok((k.clone(), seal(v)?))).collect()
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
                Ok((k, open_shared(ring, scope, v, &context)?))
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
/// with the keyring's current key) for the session's metadata.
pub(crate) fn new_data_key(ring: &Keyring, id: &str) -> Result<(Key, Value)> {
    let key = Key::random();
    let (kid, sealed) = ring.wrap(&key, &wrap_binding(id))?;
    Ok((key, json!({"kid": kid, "key": sealed})))
}

/// What a session's wrapped data key is bound to.
pub(crate) fn wrap_binding(id: &str) -> Vec<u8> {
    format!("agent-session data key\u{0}{id}").into_bytes()
}

/// The key id and wrapped key of a session's record, if it has one.
pub(crate) fn record_of(metadata: &StateMap) -> Option<(&str, &str)> {
    let r = metadata.get(KEY_RECORD)?;
    Some((r.get("kid")?.as_str()?, r.get("key")?.as_str()?))
}
