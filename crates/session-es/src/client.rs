//! The HTTP layer: one call shape over the official client's transport.

use std::time::Duration;

use elasticsearch::http::headers::HeaderMap;
use elasticsearch::http::transport::Transport;
use elasticsearch::http::Method;
use serde_json::Value;
use session_core::SessionError;

use crate::error::{transport_error, EsError};

/// An answer: its status and its parsed body (`Null` when empty).
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) body: Value,
}

impl Reply {
    /// Whether the status is 2xx.
    pub(crate) fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The error this answer stands for.
    pub(crate) fn error(&self) -> EsError {
        EsError::from_body(self.status, &self.body)
    }

    /// The body if 2xx, else the mapped error.
    pub(crate) fn success(self, session_id: &str) -> session_core::Result<Value> {
        if self.ok() {
            Ok(self.body)
        } else {
            Err(self.error().into_session_error(session_id))
        }
    }
}

/// The official client's transport with the request shape every call uses.
#[derive(Clone)]
pub(crate) struct Client {
    transport: Transport,
    timeout: Duration,
}

impl Client {
    pub(crate) fn new(transport: Transport, timeout: Duration) -> Self {
        Self { transport, timeout }
    }

    /// Sends one request and reads the answer, whatever its status.
    pub(crate) async fn send(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<String>,
    ) -> session_core::Result<Reply> {
        tracing::trace!(?method, path, "elasticsearch request");
        let response = self
            .transport
            .send(
                method,
                path,
                HeaderMap::new(),
                Some(query),
                body,
                Some(self.timeout),
            )
            .await
            .map_err(transport_error)?;
        let status = response.status_code().as_u16();
        let bytes = response.bytes().await.map_err(transport_error)?;
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            match serde_json::from_slice(&bytes) {
                Ok(v) => v,
                // Proxies and some 413/5xx answers are not JSON: keep the text as the reason.
                Err(_) if !(200..300).contains(&status) => {
                    Value::String(String::from_utf8_lossy(&bytes).into_owned())
                }
                Err(e) => return Err(SessionError::serialization("elasticsearch response", e)),
            }
        };
        Ok(Reply { status, body })
    }
}

/// What one `_bulk` item did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ItemResult {
    /// Written.
    Done,
    /// `create` found the document already there (409).
    Exists,
    /// Failed for another reason.
    Failed(EsError),
}

/// Reads every item of a `_bulk` answer; per-item failures are never dropped.
pub(crate) fn bulk_items(body: &Value) -> session_core::Result<Vec<ItemResult>> {
    let items = body
        .get("items")
        .and_then(Value::as_array)
        .ok_or_else(|| SessionError::serialization("bulk response", "no `items` array"))?;
    items
        .iter()
        .map(|item| {
            let (action, op) = item
                .as_object()
                .and_then(|o| o.iter().next())
                .ok_or_else(|| SessionError::serialization("bulk response", "empty item"))?;
            let status = op.get("status").and_then(Value::as_u64).ok_or_else(|| {
                SessionError::serialization("bulk response", "item without status")
            })?;
            let status = u16::try_from(status).unwrap_or(500);
            Ok(match status {
                200..=299 => ItemResult::Done,
                // Deleting what is not there is not a failure (`errors` stays false).
                404 if action == "delete" => ItemResult::Done,
                409 => ItemResult::Exists,
                _ => ItemResult::Failed(EsError::from_body(status, op)),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    //! Bulk answers parsed as Elasticsearch documents them (`tests/fixtures`,
    //! sources in its README).

    use super::*;
    use session_core::ErrorKind;

    fn fixture(name: &str) -> Value {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn bulk_items_report_every_outcome() {
        assert!(bulk_items(&fixture("bulk_ok.json"))
            .unwrap()
            .iter()
            .all(|i| *i == ItemResult::Done));
        let mixed = bulk_items(&fixture("bulk_mixed.json")).unwrap();
        assert_eq!(mixed, vec![ItemResult::Exists, ItemResult::Done]);
        for name in [
            "bulk_rejected_item.json",
            "bulk_rejected_item_opensearch2.json",
        ] {
            let items = bulk_items(&fixture(name)).unwrap();
            let failed: Vec<&EsError> = items
                .iter()
                .filter_map(|i| match i {
                    ItemResult::Failed(e) => Some(e),
                    _ => None,
                })
                .collect();
            assert!(!failed.is_empty(), "{name}: the rejected item was dropped");
            assert_eq!(failed[0].status, 429);
            assert!(failed[0].kind.contains("rejected_execution_exception"));
            let err = failed[0].clone().into_session_error("s1");
            assert_eq!(err.kind(), ErrorKind::Unavailable, "{name}");
            assert!(err.is_retryable());
        }
        let missing = bulk_items(&fixture("bulk_missing_docs.json")).unwrap();
        assert!(missing
            .iter()
            .any(|i| matches!(i, ItemResult::Failed(e) if e.status == 404)));
        assert!(bulk_items(&json_without_items()).is_err());
    }

    fn json_without_items() -> Value {
        serde_json::json!({"took": 1, "errors": false})
    }
}
