//! What a framework adapter stored with each event, read back without
//! decoding the events around it.
//!
//! An adapter (the OpenAI Agents session, the ADK session service) keeps
//! its framework's own item whole in each event's metadata under one key
//! and reads a conversation back as those items: [`KeyedItem`] is one
//! event of such a read.
//!
//! ```
//! use session_core::{KeyedItem, Message, SessionEvent};
//! let mut event = SessionEvent::new(Message::user("hi"));
//! event.metadata.insert("item".into(), serde_json::json!({"role": "user", "content": "hi"}));
//! let body = serde_json::to_string(&event).unwrap();
//! let item = KeyedItem::decode_stored("s1", 1, &body, "item").unwrap();
//! assert_eq!(item, KeyedItem::of_event(event, "item"));
//! assert!(matches!(item, KeyedItem::Value(v) if v.get() == r#"{"content":"hi","role":"user"}"#));
//! ```

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::error::{Result, SessionError};
use crate::event::SessionEvent;
use crate::filter::Page;
use crate::session::Session;

/// One event of the context as an adapter reads it back: the JSON object
/// the adapter stored under a metadata key, or the whole event when it
/// holds no object there (a summary, an event written by other means).
#[derive(Debug, Clone)]
pub enum KeyedItem {
    /// The object under the key, as JSON text.
    Value(Box<RawValue>),
    /// The event, which has no object under the key.
    Event(Box<SessionEvent>),
}

impl PartialEq for KeyedItem {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Value(a), Self::Value(b)) => same_json(a, b),
            (Self::Event(a), Self::Event(b)) => a == b,
            _ => false,
        }
    }
}

/// Whether two JSON texts hold the same value, whatever their layout.
fn same_json(a: &RawValue, b: &RawValue) -> bool {
    let parse = |r: &RawValue| serde_json::from_str::<serde_json::Value>(r.get()).ok();
    a.get() == b.get() || parse(a).is_some_and(|x| Some(x) == parse(b))
}

/// Reads the value under `key` in a stored event body's metadata and
/// skips everything else: no map is built, the value stays borrowed.
struct ItemUnder<'k> {
    key: &'k str,
}

impl<'de> DeserializeSeed<'de> for ItemUnder<'_> {
    type Value = Option<&'de RawValue>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(BodyFields { key: self.key })
    }
}

/// The body's fields: `metadata` looked into, the others skipped.
struct BodyFields<'k> {
    key: &'k str,
}

impl<'de> Visitor<'de> for BodyFields<'_> {
    type Value = Option<&'de RawValue>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an event object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(is_metadata) = map.next_key_seed(KeyIs("metadata"))? {
            if is_metadata {
                found = map.next_value_seed(MetadataEntry { key: self.key })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// The metadata object (or `null`): the entry under `key`, the others skipped.
struct MetadataEntry<'k> {
    key: &'k str,
}

impl<'de> DeserializeSeed<'de> for MetadataEntry<'_> {
    type Value = Option<&'de RawValue>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MetadataEntry<'_> {
    type Value = Option<&'de RawValue>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a metadata object")
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(is_key) = map.next_key_seed(KeyIs(self.key))? {
            if is_key {
                found = Some(map.next_value::<&'de RawValue>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// Whether a map key is the name given, compared where it is read (a
/// key with escapes decoded first): no key is copied.
struct KeyIs<'k>(&'k str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<bool, E> {
        Ok(key == self.0)
    }
}

/// Whether a JSON text is an object.
fn is_object(raw: &RawValue) -> bool {
    raw.get().trim_start().starts_with('{')
}

impl KeyedItem {
    /// The item of `event` under `key`: the metadata value when it is a
    /// JSON object, otherwise the event itself.
    pub fn of_event(event: SessionEvent, key: &str) -> Self {
        // A JSON value always has a text: the event is the fallback in name only.
        match event.metadata.get(key).filter(|v| v.is_object()) {
            Some(value) => match serde_json::value::to_raw_value(value) {
                Ok(raw) => KeyedItem::Value(raw),
                Err(_) => KeyedItem::Event(Box::new(event)),
            },
            None => KeyedItem::Event(Box::new(event)),
        }
    }

    /// The item under `key` of an event stored as `body` (the event's JSON,
    /// as [`SessionEvent::decode_stored`] reads it): only the metadata is
    /// decoded, and the value is copied as it is stored; an event without
    /// an object there is decoded whole.
    pub fn decode_stored(session_id: &str, seq: u64, body: &str, key: &str) -> Result<Self> {
        let mut de = serde_json::Deserializer::from_str(body);
        let found = ItemUnder { key }
            .deserialize(&mut de)
            .and_then(|found| de.end().map(|()| found))
            .map_err(|err| {
                SessionError::serialization(format!("session {session_id} seq {seq}"), err)
            })?;
        match found {
            Some(raw) if is_object(raw) => Ok(KeyedItem::Value(raw.to_owned())),
            _ => SessionEvent::decode_stored(session_id, seq, body)
                .map(|e| KeyedItem::Event(Box::new(e))),
        }
    }
}

/// A session with a page of its items, read together: what an adapter's
/// read of a whole conversation needs (ADK's `get_session`).
#[derive(Debug, Clone)]
pub struct SessionItems {
    /// The session (from the service, its state merged across scopes).
    pub session: Session,
    /// The page of its items.
    pub items: Page<KeyedItem>,
}

/// A page of events as the items under `key` ([`KeyedItem::of_event`]).
pub fn keyed_page(page: Page<SessionEvent>, key: &str) -> Page<KeyedItem> {
    page.map(|e| KeyedItem::of_event(e, key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;

    fn stored(metadata: serde_json::Value) -> (SessionEvent, String) {
        let mut event = SessionEvent::new(Message::assistant("a summary"));
        if let serde_json::Value::Object(m) = metadata {
            event.metadata = m.into_iter().collect();
        }
        let body = serde_json::to_string(&event).unwrap();
        (event, body)
    }

    #[test]
    fn a_stored_object_is_copied_as_stored() {
        let (_, body) = stored(serde_json::json!({"item": {"b": [1, 2], "a": "x\"y"}, "other": 1}));
        let item = KeyedItem::decode_stored("s", 3, &body, "item").unwrap();
        let KeyedItem::Value(raw) = item else {
            panic!("expected the stored object")
        };
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(raw.get()).unwrap(),
            serde_json::json!({"a": "x\"y", "b": [1, 2]})
        );
    }

    #[test]
    fn an_event_without_an_object_under_the_key_comes_whole() {
        for metadata in [serde_json::json!({}), serde_json::json!({"item": "text"})] {
            let (mut event, body) = stored(metadata);
            let item = KeyedItem::decode_stored("s", 3, &body, "item").unwrap();
            event.seq = 3;
            "s".clone_into(&mut event.session_id);
            assert_eq!(item, KeyedItem::Event(Box::new(event)));
        }
    }

    #[test]
    fn only_the_top_level_metadata_counts() {
        // A "metadata" key inside the message, escaped field names, and a
        // null metadata: the read looks at the event's own metadata alone.
        let body = r#"{"id":"e","timestamp":"2026-01-01T00:00:00Z",
            "message":{"role":"user","content":"x","metadata":{"item":{"wrong":1}}},
            "metad\u0061ta":{"it\u0065m":{"right":2}}}"#;
        let item = KeyedItem::decode_stored("s", 1, body, "item").unwrap();
        assert!(matches!(item, KeyedItem::Value(v) if v.get() == r#"{"right":2}"#));
        let null = r#"{"id":"e","timestamp":"2026-01-01T00:00:00Z",
            "message":{"role":"user","content":"x"},"metadata":null}"#;
        // No object under the key: the event is decoded whole, which a
        // null metadata fails as any event read does.
        let whole =
            SessionEvent::decode_stored("s", 1, null).map(|e| KeyedItem::Event(Box::new(e)));
        assert_eq!(
            KeyedItem::decode_stored("s", 1, null, "item").map_err(|e| e.kind()),
            whole.map_err(|e| e.kind())
        );
    }

    #[test]
    fn a_corrupt_body_is_a_serialization_error_naming_the_event() {
        let err = KeyedItem::decode_stored("s", 9, "{not json", "item").unwrap_err();
        assert_eq!(err.kind(), crate::error::ErrorKind::Serialization);
        assert!(err.to_string().contains("s seq 9"), "{err}");
    }
}
