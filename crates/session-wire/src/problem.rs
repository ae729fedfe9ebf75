//! [`SessionError`] on the wire: an RFC 9457 problem details document
//! (`application/problem+json`) that carries the error's kind and its
//! fields, so a remote client rebuilds the same error a local store would
//! have returned.
//!
//! ```
//! use session_core::{ErrorKind, SessionError};
//! use session_wire::Problem;
//! let problem = Problem::from_error(&SessionError::session_not_found("s-1"));
//! assert_eq!(problem.status, 404);
//! let json = serde_json::to_string(&problem).unwrap();
//! let back: Problem = serde_json::from_str(&json).unwrap();
//! assert_eq!(back.into_error().kind(), ErrorKind::NotFound);
//! ```

use serde::{Deserialize, Serialize};

use session_core::{ErrorKind, SessionError};

/// The media type of a problem document.
pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";

/// A [`SessionError`] as a problem details document: the standard members
/// (`type`, `title`, `status`, `detail`) plus `kind` and the error's fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Problem {
    /// A URI naming the kind: `urn:agent-session:problem:<kind>`.
    #[serde(rename = "type")]
    pub type_uri: String,
    /// The kind in words ("Not found").
    pub title: String,
    /// The HTTP status the kind maps to.
    pub status: u16,
    /// The error's message with its causes.
    pub detail: String,
    /// The kind, snake case (`not_found`, `conflict`, ...).
    pub kind: String,
    /// The session, user or thing the error is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What was looked up or created (`NotFound`, `AlreadyExists`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what: Option<String>,
    /// The rejected field (`InvalidInput`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Why it was rejected (`InvalidInput`, `Encryption`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Which quota (`QuotaExceeded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<String>,
    /// The quota's limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// What the refused write would have made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<u64>,
    /// The version the caller expected (`Conflict`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<u64>,
    /// The version the store holds (`Conflict`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actual: Option<u64>,
    /// The backend that failed or refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// The operation a backend does not support.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// Where data failed to encode, decode or decrypt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

/// The message a remote error keeps as its cause: the server's detail.
#[derive(Debug)]
struct RemoteCause(String);

impl std::fmt::Display for RemoteCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RemoteCause {}

/// Each kind's wire name, title and HTTP status.
const KINDS: [(ErrorKind, &str, &str, u16); 13] = [
    (ErrorKind::NotFound, "not_found", "Not found", 404),
    (
        ErrorKind::AlreadyExists,
        "already_exists",
        "Already exists",
        409,
    ),
    (ErrorKind::Expired, "expired", "Session expired", 410),
    (
        ErrorKind::SessionEnded,
        "session_ended",
        "Session ended",
        409,
    ),
    (
        ErrorKind::QuotaExceeded,
        "quota_exceeded",
        "Quota exceeded",
        422,
    ),
    (ErrorKind::Conflict, "conflict", "Version conflict", 409),
    (
        ErrorKind::InvalidInput,
        "invalid_input",
        "Invalid input",
        400,
    ),
    (ErrorKind::Unsupported, "unsupported", "Not supported", 501),
    (ErrorKind::Backend, "backend", "Store error", 500),
    (
        ErrorKind::Serialization,
        "serialization",
        "Undecodable data",
        500,
    ),
    (
        ErrorKind::Unavailable,
        "unavailable",
        "Store unavailable",
        503,
    ),
    (ErrorKind::Encryption, "encryption", "Cannot decrypt", 500),
    (ErrorKind::Unauthorized, "unauthorized", "Unauthorized", 401),
];

/// The `&'static str` labels a rebuilt error can name; others read as the fallback.
const WHATS: [&str; 5] = ["session", "invocation", "seq", "event", "user"];
const QUOTAS: [&str; 3] = [
    "events per session",
    "bytes per session",
    "sessions per user",
];
const BACKENDS: [&str; 8] = [
    "memory",
    "sqlite",
    "postgres",
    "redis",
    "fs",
    "elasticsearch",
    "http",
    "export file",
];
const OPERATIONS: [&str; 1] = ["ranked search"];

/// `value` as one of `known`, or `fallback`.
fn label(value: Option<String>, known: &[&'static str], fallback: &'static str) -> &'static str {
    value
        .and_then(|v| known.iter().copied().find(|k| *k == v))
        .unwrap_or(fallback)
}

/// The HTTP status an error of `kind` is answered with.
pub fn http_status(kind: ErrorKind) -> u16 {
    KINDS
        .iter()
        .find(|(k, ..)| *k == kind)
        .map_or(500, |(.., status)| *status)
}

impl Problem {
    /// The problem document of `error`, its causes in `detail`.
    pub fn from_error(error: &SessionError) -> Self {
        let kind = error.kind();
        let (_, name, title, status) = KINDS
            .iter()
            .copied()
            .find(|(k, ..)| *k == kind)
            .unwrap_or((kind, "backend", "Store error", 500));
        let mut p = Self {
            type_uri: format!("urn:agent-session:problem:{name}"),
            title: title.to_owned(),
            status,
            detail: error.report().to_string(),
            kind: name.to_owned(),
            id: None,
            what: None,
            field: None,
            reason: None,
            quota: None,
            limit: None,
            requested: None,
            expected: None,
            actual: None,
            backend: None,
            operation: None,
            context: None,
        };
        match error {
            SessionError::NotFound { what, id } | SessionError::AlreadyExists { what, id } => {
                p.what = Some((*what).to_owned());
                p.id = Some(id.clone());
            }
            SessionError::Expired { id } | SessionError::SessionEnded { id } => {
                p.id = Some(id.clone());
            }
            SessionError::QuotaExceeded {
                id,
                quota,
                limit,
                requested,
            } => {
                p.id = Some(id.clone());
                p.quota = Some((*quota).to_owned());
                p.limit = Some(*limit);
                p.requested = Some(*requested);
            }
            SessionError::Conflict {
                id,
                expected,
                actual,
            } => {
                p.id = Some(id.clone());
                p.expected = Some(*expected);
                p.actual = Some(*actual);
            }
            SessionError::InvalidInput { field, reason, .. } => {
                p.field = Some(field.clone());
                p.reason = Some(reason.clone());
            }
            SessionError::Unsupported { backend, operation } => {
                p.backend = Some((*backend).to_owned());
                p.operation = Some((*operation).to_owned());
            }
            SessionError::Backend { backend, .. } | SessionError::Unavailable { backend, .. } => {
                p.backend = Some((*backend).to_owned());
            }
            SessionError::Serialization { context, .. } => p.context = Some(context.clone()),
            SessionError::Encryption { context, reason } => {
                p.context = Some(context.clone());
                p.reason = Some(reason.clone());
            }
            SessionError::Unauthorized { reason } => p.reason = Some(reason.clone()),
            // A kind added to core later: its kind and detail say enough.
            _ => {}
        }
        p
    }

    /// The error this document describes, as a local store would have
    /// returned it. The server's message becomes the cause of the kinds
    /// that carry one; a kind this build does not know is a `Backend` error.
    pub fn into_error(self) -> SessionError {
        let id = self.id.clone().unwrap_or_default();
        // The detail is the server's report: its own message, then each
        // cause after "caused by"; the rebuilt error keeps the causes.
        let detail = self.detail.clone();
        let cause = move |message: String| {
            let causes = detail
                .strip_prefix(message.as_str())
                .and_then(|rest| rest.strip_prefix("\n  caused by: "))
                .unwrap_or(&detail);
            Box::new(RemoteCause(causes.to_owned()))
        };
        let backend = label(self.backend.clone(), &BACKENDS, "http");
        match ErrorKind::from_name(&self.kind) {
            Some(ErrorKind::NotFound) => SessionError::NotFound {
                what: label(self.what, &WHATS, "session"),
                id,
            },
            Some(ErrorKind::AlreadyExists) => SessionError::AlreadyExists {
                what: label(self.what, &WHATS, "session"),
                id,
            },
            Some(ErrorKind::Expired) => SessionError::Expired { id },
            Some(ErrorKind::SessionEnded) => SessionError::SessionEnded { id },
            Some(ErrorKind::QuotaExceeded) => SessionError::QuotaExceeded {
                id,
                quota: label(self.quota, &QUOTAS, "quota"),
                limit: self.limit.unwrap_or_default(),
                requested: self.requested.unwrap_or_default(),
            },
            Some(ErrorKind::Conflict) => SessionError::Conflict {
                id,
                expected: self.expected.unwrap_or_default(),
                actual: self.actual.unwrap_or_default(),
            },
            Some(ErrorKind::InvalidInput) => SessionError::InvalidInput {
                field: self.field.unwrap_or_else(|| "request".to_owned()),
                reason: self.reason.unwrap_or(self.detail),
                source: None,
            },
            Some(ErrorKind::Unsupported) => SessionError::Unsupported {
                backend,
                operation: label(self.operation, &OPERATIONS, "this operation"),
            },
            Some(ErrorKind::Serialization) => {
                let context = self.context.unwrap_or_else(|| "response".to_owned());
                let source = cause(format!("serialization error in {context}"));
                SessionError::Serialization { context, source }
            }
            Some(ErrorKind::Encryption) => SessionError::Encryption {
                context: self.context.unwrap_or_default(),
                reason: self.reason.unwrap_or(self.detail),
            },
            Some(ErrorKind::Unauthorized) => SessionError::Unauthorized {
                reason: self.reason.unwrap_or(self.detail),
            },
            Some(ErrorKind::Unavailable) => SessionError::Unavailable {
                backend,
                source: cause(format!("{backend} backend unavailable")),
            },
            Some(_) | None => SessionError::Backend {
                backend,
                source: cause(format!("{backend} backend error")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(error: &SessionError) -> SessionError {
        let json = serde_json::to_string(&Problem::from_error(error)).unwrap_or_default();
        serde_json::from_str::<Problem>(&json)
            .map_or_else(|e| panic!("{e}: {json}"), Problem::into_error)
    }

    #[test]
    fn every_kind_comes_back_with_its_fields() {
        let io = || std::io::Error::other("disk gone");
        let errors = [
            SessionError::session_not_found("s-1"),
            SessionError::AlreadyExists {
                what: "session",
                id: "s-2".into(),
            },
            SessionError::Expired { id: "s-3".into() },
            SessionError::SessionEnded { id: "s-4".into() },
            SessionError::QuotaExceeded {
                id: "s-5".into(),
                quota: "bytes per session",
                limit: 4096,
                requested: 5000,
            },
            SessionError::Conflict {
                id: "s-6".into(),
                expected: 3,
                actual: 4,
            },
            SessionError::invalid("page_size", "must be at most 1000"),
            SessionError::unsupported("memory", "ranked search"),
            SessionError::backend("sqlite", io()),
            SessionError::serialization("session s-7 seq 3", io()),
            SessionError::unavailable("postgres", io()),
            SessionError::Encryption {
                context: "session s-8".into(),
                reason: "unknown key k2".into(),
            },
            SessionError::Unauthorized {
                reason: "no API key".into(),
            },
        ];
        for error in &errors {
            let back = round_trip(error);
            assert_eq!(back.kind(), error.kind(), "{error}");
            assert_eq!(back.to_string(), error.to_string(), "{error}");
        }
        let back = round_trip(&SessionError::backend("sqlite", io()));
        assert_eq!(
            back.report().to_string(),
            "sqlite backend error\n  caused by: disk gone",
            "the cause travels once"
        );
    }

    #[test]
    fn statuses_follow_the_kind() {
        assert_eq!(http_status(ErrorKind::NotFound), 404);
        assert_eq!(http_status(ErrorKind::InvalidInput), 400);
        assert_eq!(http_status(ErrorKind::Unavailable), 503);
        assert_eq!(ErrorKind::from_name("conflict"), Some(ErrorKind::Conflict));
        assert_eq!(ErrorKind::from_name("nonsense"), None);
    }

    #[test]
    fn an_unknown_kind_is_a_backend_error_with_the_message() {
        let p: Problem = serde_json::from_str(
            r#"{"type":"x","title":"t","status":500,"detail":"boom","kind":"meteor"}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let e = p.into_error();
        assert_eq!(e.kind(), ErrorKind::Backend);
        assert!(e.report().to_string().contains("boom"));
    }
}
