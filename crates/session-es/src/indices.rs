//! The indices part ([`Indices`]): the three indices' names, templates and
//! mappings, their creation and removal, and the text field type the events
//! index has.

use std::sync::Arc;

use elasticsearch::http::Method;
use serde_json::Value;
use session_core::SessionError;

use crate::body;
use crate::client::{Client, Reply};
use crate::engine::{lacks_wildcard_type, TextField, TextFieldCell};
use crate::index::Index;

/// The three indices under one prefix (`{prefix}-sessions`, `{prefix}-events`,
/// `{prefix}-state`): creating and checking them, and the text field cell
/// the parts writing and searching events share.
#[derive(Clone)]
pub(crate) struct Indices {
    client: Client,
    prefix: String,
    /// The field type of the literal search text, as the events index has it.
    text_field: Arc<TextFieldCell>,
}

impl Indices {
    /// The indices under `prefix`, with the text field asked for in `text_field`.
    pub(crate) fn new(client: Client, prefix: String, text_field: Arc<TextFieldCell>) -> Self {
        Self {
            client,
            prefix,
            text_field,
        }
    }

    /// The index prefix.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The text field cell (shared with the parts that write and search events).
    pub(crate) fn text_field(&self) -> &Arc<TextFieldCell> {
        &self.text_field
    }

    /// The name of one of the three indices: `{prefix}-{which}`.
    fn name(&self, which: &str) -> String {
        format!("{}-{which}", self.prefix)
    }

    /// A handle on one of the three indices (`sessions`, `events`, `state`).
    pub(crate) fn index(&self, which: &str) -> Index {
        Index::new(self.client.clone(), &self.prefix, which)
    }

    /// Creates (or updates) the index templates and creates the three
    /// indices if missing, then reads which text field type the events
    /// index has (see [`TextField`]). Safe to run concurrently and repeatedly.
    pub(crate) async fn migrate(&self) -> session_core::Result<()> {
        let first = match self.text_field.asked() {
            TextField::Keyword => TextField::Keyword,
            TextField::Detect | TextField::Wildcard => TextField::Wildcard,
        };
        let mut events = first;
        for which in ["sessions", "events", "state"] {
            let name = self.name(which);
            let mut mapping = match which {
                "sessions" => body::sessions_mapping(),
                "events" => body::events_mapping(events),
                _ => body::state_mapping(),
            };
            let reply = self.put_template(&name, &mapping).await?;
            if which == "events"
                && self.text_field.asked() == TextField::Detect
                && lacks_wildcard_type(reply.status, &reply.body)
            {
                // No `wildcard` field type on this engine: the `keyword` layout.
                tracing::info!(index = %name, "no wildcard field type: literal search uses a keyword field");
                events = TextField::Keyword;
                mapping = body::events_mapping(events);
                self.put_template(&name, &mapping).await?.success("")?;
            } else {
                reply.success("")?;
            }
            let reply = self
                .client
                .send(Method::Put, &name, &[], Some(mapping.to_string()))
                .await?;
            if !reply.ok() {
                let err = reply.error();
                if err.kind != "resource_already_exists_exception" {
                    return Err(err.into_session_error(""));
                }
            }
        }
        self.read_text_field().await?;
        Ok(())
    }

    /// Puts the index template of one index.
    async fn put_template(&self, name: &str, mapping: &Value) -> session_core::Result<Reply> {
        let template = body::index_template(name, mapping);
        self.client
            .send(
                Method::Put,
                &format!("_index_template/{name}"),
                &[],
                Some(template.to_string()),
            )
            .await
    }

    /// Deletes the three indices and their templates (everything under the prefix).
    pub(crate) async fn drop_all(&self) -> session_core::Result<()> {
        for which in ["sessions", "events", "state"] {
            let name = self.name(which);
            for path in [name.clone(), format!("_index_template/{name}")] {
                let reply = self.client.send(Method::Delete, &path, &[], None).await?;
                if !reply.ok() && reply.status != 404 {
                    return Err(reply.error().into_session_error(""));
                }
            }
        }
        Ok(())
    }

    /// Reads the type of `text_lc` from the events index's mapping and
    /// writes for it from now on. An index that does not exist yet leaves
    /// the type asked for.
    pub(crate) async fn read_text_field(&self) -> session_core::Result<TextField> {
        let index = self.name("events");
        let reply = self
            .client
            .send(Method::Get, &format!("{index}/_mapping"), &[], None)
            .await?;
        if reply.status == 404 {
            return Ok(self.text_field.get());
        }
        let body = reply.success("")?;
        let found = body
            .as_object()
            .and_then(|m| m.values().next())
            .and_then(|i| i.pointer("/mappings/properties/text_lc/type"))
            .and_then(Value::as_str);
        let field = match found {
            Some("wildcard") => TextField::Wildcard,
            Some("keyword") => TextField::Keyword,
            other => {
                return Err(SessionError::serialization(
                    format!("index {index} mapping"),
                    format!("text_lc is {other:?}, expected wildcard or keyword"),
                ))
            }
        };
        if self.text_field.asked() != TextField::Detect && self.text_field.asked() != field {
            tracing::warn!(
                index = %index,
                asked = ?self.text_field.asked(),
                found = ?field,
                "the events index keeps the text field type it was created with"
            );
        }
        self.text_field.set(field);
        Ok(field)
    }
}
