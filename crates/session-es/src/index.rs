//! The three indices: names, templates and mappings, creation and removal, document paths.

use elasticsearch::http::Method;
use serde_json::{json, Value};

use crate::body;
use crate::client::BACKEND;
use crate::EsRepository;

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
    /// indices if missing. Safe to run concurrently and repeatedly.
    pub async fn migrate(&self) -> session_core::Result<()> {
        for (which, mapping) in [
            ("sessions", body::sessions_mapping()),
            ("events", body::events_mapping()),
            ("state", body::state_mapping()),
        ] {
            let name = self.index(which);
            let template = body::index_template(&name, &mapping);
            self.client
                .send(
                    Method::Put,
                    &format!("_index_template/{name}"),
                    &[],
                    Some(template.to_string()),
                )
                .await?
                .success("")?;
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
        Ok(())
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

    /// Deletes documents matching `query` from an index (best effort: used for cleanup only).
    pub(crate) async fn delete_by_query(&self, which: &str, query: Value) {
        if let Err(e) = self.delete_by_query_checked(which, query).await {
            tracing::warn!(backend = BACKEND, error = %e, "cleanup of unreachable documents failed; they stay hidden");
        }
    }

    /// Deletes documents matching `query` from an index, reporting a failure
    /// (what an erasure needs: documents must be gone, not only hidden).
    pub(crate) async fn delete_by_query_checked(
        &self,
        which: &str,
        query: Value,
    ) -> session_core::Result<()> {
        self.client
            .send(
                Method::Post,
                &format!("{}/_delete_by_query", self.index(which)),
                &[
                    ("conflicts", "proceed".to_owned()),
                    ("refresh", "true".to_owned()),
                ],
                Some(json!({ "query": query }).to_string()),
            )
            .await?
            .success("")?;
        Ok(())
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
