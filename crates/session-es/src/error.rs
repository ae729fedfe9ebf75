//! The mapping of Elasticsearch's answers and transport failures onto [`SessionError`].

use std::fmt;

use serde_json::Value;
use session_core::SessionError;

/// The backend's name in errors and capabilities.
pub(crate) const BACKEND: &str = "elasticsearch";

/// An error answer from Elasticsearch: the status, the error type and its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EsError {
    pub(crate) status: u16,
    pub(crate) kind: String,
    pub(crate) reason: String,
}

impl fmt::Display for EsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.reason.is_empty() {
            write!(f, "HTTP {} {}", self.status, self.kind)
        } else {
            write!(f, "HTTP {} {}: {}", self.status, self.kind, self.reason)
        }
    }
}

impl std::error::Error for EsError {}

impl EsError {
    /// Reads the `error` object of an error body (or of a bulk item).
    pub(crate) fn from_body(status: u16, body: &Value) -> Self {
        let err = body.get("error").unwrap_or(body);
        let (kind, reason) = match err {
            Value::String(s) => (String::new(), s.clone()),
            Value::Object(_) => (
                err.get("type")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                err.get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            ),
            _ => (String::new(), String::new()),
        };
        let kind = if kind.is_empty() {
            match status {
                413 => "request_entity_too_large".to_owned(),
                _ => "error".to_owned(),
            }
        } else {
            kind
        };
        Self {
            status,
            kind,
            reason,
        }
    }

    /// Documents a search keeps finding after their deletion reported them gone.
    pub(crate) fn stuck(index: &str, found: usize) -> Self {
        Self {
            status: 200,
            kind: "deleted_documents_still_found".to_owned(),
            reason: format!("{found} documents of {index} are still found after their deletion"),
        }
    }

    /// The typed error a caller gets for this answer.
    pub(crate) fn into_session_error(self, session_id: &str) -> SessionError {
        match self.status {
            409 => SessionError::Conflict {
                id: session_id.to_owned(),
                expected: 0,
                actual: 0,
            },
            429 | 502 | 503 | 504 => SessionError::unavailable(BACKEND, self),
            413 => SessionError::invalid(
                "request",
                format!(
                    "Elasticsearch refused the request as too large ({self}); \
                     append smaller batches or raise http.max_content_length"
                ),
            ),
            _ => SessionError::backend(BACKEND, self),
        }
    }
}

/// A transport failure (no answer): connection refused or reset, timeout.
pub(crate) fn transport_error(e: elasticsearch::Error) -> SessionError {
    if e.is_json() {
        SessionError::serialization("elasticsearch response", e)
    } else {
        SessionError::unavailable(BACKEND, e)
    }
}

/// The HTTP client could not be set up (its TLS backend or system
/// configuration failed): the error stays the source.
pub(crate) fn build_error(e: elasticsearch::http::transport::BuildError) -> SessionError {
    SessionError::backend(BACKEND, e)
}

#[cfg(test)]
mod tests {
    //! Error mapping against Elasticsearch's documented response bodies
    //! (`tests/fixtures`, sources in its README).

    use super::*;
    use session_core::ErrorKind;

    fn fixture(name: &str) -> Value {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn kind_of(status: u16, name: &str) -> ErrorKind {
        EsError::from_body(status, &fixture(name))
            .into_session_error("s1")
            .kind()
    }

    #[test]
    fn error_bodies_map_to_actionable_kinds() {
        assert_eq!(kind_of(409, "version_conflict.json"), ErrorKind::Conflict);
        assert_eq!(kind_of(409, "create_conflict.json"), ErrorKind::Conflict);
        assert_eq!(
            kind_of(429, "too_many_requests.json"),
            ErrorKind::Unavailable
        );
        assert_eq!(
            kind_of(429, "too_many_requests_rejected_execution.json"),
            ErrorKind::Unavailable
        );
        assert_eq!(kind_of(503, "unavailable.json"), ErrorKind::Unavailable);
        assert_eq!(
            kind_of(503, "unavailable_cluster_block.json"),
            ErrorKind::Unavailable
        );
        assert_eq!(kind_of(404, "index_not_found.json"), ErrorKind::Backend);
        assert_eq!(kind_of(400, "mapper_parsing.json"), ErrorKind::Backend);
        assert_eq!(
            kind_of(400, "mapper_parsing_opensearch2.json"),
            ErrorKind::Backend
        );
        assert_eq!(
            kind_of(406, "content_type_not_supported_opensearch2.json"),
            ErrorKind::Backend
        );
        // A 413 comes with an empty body (Elasticsearch, OpenSearch) or a JSON `Message` (AWS).
        let too_large = EsError::from_body(413, &Value::Null);
        assert_eq!(too_large.kind, "request_entity_too_large");
        let err = too_large.into_session_error("s1");
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(err.to_string().contains("http.max_content_length"), "{err}");
        let aws =
            fixture("request_too_large.json")["variants"]["aws_opensearch_service"]["body"].clone();
        assert_eq!(
            EsError::from_body(413, &aws)
                .into_session_error("s1")
                .kind(),
            ErrorKind::InvalidInput
        );
    }

    #[test]
    fn error_messages_keep_type_and_reason() {
        let e = EsError::from_body(404, &fixture("index_not_found.json"));
        assert_eq!(e.kind, "index_not_found_exception");
        assert!(e.to_string().contains("no such index"), "{e}");
        let e = EsError::from_body(409, &fixture("version_conflict.json"));
        assert_eq!(e.kind, "version_conflict_engine_exception");
        let e = EsError::from_body(406, &fixture("content_type_not_supported_opensearch2.json"));
        assert!(e.reason.contains("Content-Type"), "{e}");
    }
}
