//! The three indices: names, templates and mappings, creation and removal, document paths.

use elasticsearch::http::Method;
use serde_json::{json, Value};

use session_core::SessionError;

use crate::body;
use crate::client::{bulk_items, ItemResult, Reply};
use crate::engine::{lacks_wildcard_type, TextField};
use crate::error::{EsError, BACKEND};
use crate::repository::EsRepository;

/// The path of one document, its id percent-encoded (ids may hold `:` and `|`).
pub(crate) fn doc_path(index: &str, id: &str) -> String {
    let mut out = format!("{index}/_doc/");
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl EsRepository {
    /// The name of one of the three indices: `{prefix}-{which}`.
    pub(crate) fn index(&self, which: &str) -> String {
        format!("{}-{which}", self.prefix)
    }

    /// The `refresh` parameter of every write.
    pub(crate) fn refresh_param(&self) -> (&'static str, String) {
        self.refresh.query()
    }

    /// Creates (or updates) the index templates and creates the three
    /// indices if missing, then reads which text field type the events
    /// index has (see [`TextField`]). Safe to run concurrently and repeatedly.
    pub async fn migrate(&self) -> session_core::Result<()> {
        let first = match self.text_field.asked() {
            TextField::Keyword => TextField::Keyword,
            TextField::Detect | TextField::Wildcard => TextField::Wildcard,
        };
        let mut events = first;
        for which in ["sessions", "events", "state"] {
            let name = self.index(which);
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
    pub async fn drop_indices(&self) -> session_core::Result<()> {
        for which in ["sessions", "events", "state"] {
            let name = self.index(which);
            for path in [name.clone(), format!("_index_template/{name}")] {
                let reply = self.client.send(Method::Delete, &path, &[], None).await?;
                if !reply.ok() && reply.status != 404 {
                    return Err(reply.error().into_session_error(""));
                }
            }
        }
        Ok(())
    }

    /// Deletes documents by id (`_bulk` delete items, refreshed: searches
    /// stop seeing them). How many were there to delete.
    pub(crate) async fn delete_ids(
        &self,
        which: &str,
        ids: &[String],
        session_id: &str,
    ) -> session_core::Result<usize> {
        let index = self.index(which);
        let mut deleted = 0usize;
        for chunk in ids.chunks(DELETE_CHUNK) {
            let mut lines = String::new();
            for id in chunk {
                body::bulk_line(&mut lines, "delete", &index, id, None);
            }
            let reply = self
                .client
                .send(
                    Method::Post,
                    "_bulk",
                    &[("refresh", "true".to_owned())],
                    Some(lines),
                )
                .await?;
            let answer = reply.success(session_id)?;
            for item in bulk_items(&answer)? {
                if let ItemResult::Failed(e) = item {
                    return Err(e.into_session_error(session_id));
                }
            }
            deleted = deleted.saturating_add(deleted_items(&answer));
        }
        Ok(deleted)
    }

    /// Deletes every document matching `query` from an index, reporting a
    /// failure: the ids found by `_search`, deleted by `_bulk`, again until
    /// none is found. Every node can do this (`_delete_by_query` needs the
    /// `reindex` module, which an Elasticsearch test distribution lacks).
    pub(crate) async fn delete_matching(
        &self,
        which: &str,
        query: &Value,
        session_id: &str,
    ) -> session_core::Result<()> {
        let index = self.index(which);
        // Documents written without a refresh become visible first.
        self.client
            .send(Method::Post, &format!("{index}/_refresh"), &[], None)
            .await?
            .success(session_id)?;
        let request = json!({
            "query": query,
            "size": DELETE_CHUNK,
            "sort": ["_doc"],
            "_source": false,
        });
        loop {
            let reply = self
                .client
                .send(
                    Method::Post,
                    &format!("{index}/_search"),
                    &[],
                    Some(request.to_string()),
                )
                .await?;
            let answer = reply.success(session_id)?;
            let ids: Vec<String> = answer
                .pointer("/hits/hits")
                .and_then(Value::as_array)
                .ok_or_else(|| {
                    SessionError::serialization("search response", "no hits.hits array")
                })?
                .iter()
                .filter_map(|h| h.get("_id").and_then(Value::as_str).map(str::to_owned))
                .collect();
            if ids.is_empty() {
                return Ok(());
            }
            if self.delete_ids(which, &ids, session_id).await? == 0 {
                // Found again though already gone: the search does not see the deletes.
                return Err(SessionError::backend(
                    BACKEND,
                    EsError::stuck(&index, ids.len()),
                ));
            }
        }
    }

    /// [`EsRepository::delete_matching`] as cleanup: a failure is logged,
    /// the documents stay hidden by the head.
    pub(crate) async fn delete_matching_quietly(
        &self,
        which: &str,
        query: &Value,
        session_id: &str,
    ) {
        if let Err(e) = self.delete_matching(which, query, session_id).await {
            tracing::warn!(backend = BACKEND, error = %e, "cleanup of unreachable documents failed; they stay hidden");
        }
    }
}

/// Documents deleted per `_bulk` request, and ids found per `_search` round.
const DELETE_CHUNK: usize = 1000;

/// How many items of a `_bulk` answer deleted a document (`result: deleted`).
fn deleted_items(answer: &Value) -> usize {
    answer
        .get("items")
        .and_then(Value::as_array)
        .map_or(0, |items| {
            items
                .iter()
                .filter(|i| i.pointer("/delete/result").and_then(Value::as_str) == Some("deleted"))
                .count()
        })
}

impl EsRepository {
    /// Reads the type of `text_lc` from the events index's mapping and
    /// writes for it from now on. An index that does not exist yet leaves
    /// the type asked for.
    pub(crate) async fn read_text_field(&self) -> session_core::Result<TextField> {
        let index = self.index("events");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_paths_escape_ids() {
        assert_eq!(
            doc_path("p-state", "u|app|bob"),
            "p-state/_doc/u%7Capp%7Cbob"
        );
        assert_eq!(
            doc_path("p-sessions", "chat:1.a_b-c"),
            "p-sessions/_doc/chat%3A1.a_b-c"
        );
    }
}
