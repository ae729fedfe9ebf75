//! The error an unsuccessful HTTP answer reports.
//!
//! The server answers its own errors with a problem document that names the
//! kind ([`Problem`]); the client rebuilds that error as it was. Answers
//! without one (axum's and hyper's own refusals, a proxy in between, a
//! server newer than this client) are mapped by their status:
//!
//! | status | kind |
//! |---|---|
//! | 400, 411, 413, 414, 415, 422, 428, 431, other 4xx | `InvalidInput` |
//! | 401, 403, 407 | `Unauthorized` |
//! | 404 | `NotFound` |
//! | 405, 501 | `Unsupported` |
//! | 409, 412 | `Conflict` |
//! | 410 | `Expired` |
//! | 408, 429, 502, 503, 504 | `Unavailable` (retrying may succeed) |
//! | 500 and anything else | `Backend` |

use reqwest::StatusCode;
use session_core::{ErrorKind, SessionError};
use session_wire::Problem;

use crate::backend::BACKEND;

/// The message of an answer the server did not give a problem document.
#[derive(Debug)]
pub(crate) struct StatusError {
    status: StatusCode,
    body: String,
}

impl std::fmt::Display for StatusError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}: {}", self.status, self.body.trim())
    }
}

impl std::error::Error for StatusError {}

/// The error of an answer with `status` and `body` to a request for the URL
/// path `path`: its problem document when `is_problem` and the document
/// names a kind this client knows, else the kind its status maps to (see
/// the module docs).
pub(crate) fn error_of(
    status: StatusCode,
    path: &str,
    is_problem: bool,
    body: &[u8],
) -> SessionError {
    if is_problem {
        if let Ok(problem) = serde_json::from_slice::<Problem>(body) {
            if ErrorKind::from_name(&problem.kind).is_some() {
                return problem.into_error();
            }
        }
    }
    let cause = StatusError {
        status,
        body: String::from_utf8_lossy(body).chars().take(500).collect(),
    };
    by_status(status, path, cause)
}

/// The session an answer is about: the segment after `sessions` in the
/// path (`/v1/sessions/{id}/...`), else the path itself.
fn subject(path: &str) -> String {
    let mut segments = path.split('/');
    while let Some(segment) = segments.next() {
        if segment == "sessions" {
            if let Some(id) = segments.next().filter(|s| !s.is_empty()) {
                return id.to_owned();
            }
        }
    }
    path.to_owned()
}

/// The error an answer without a problem document reports, by its status.
fn by_status(status: StatusCode, path: &str, cause: StatusError) -> SessionError {
    let invalid = |field: &str, reason: &str, cause: StatusError| {
        SessionError::invalid_because(field, reason, cause)
    };
    match status {
        StatusCode::PAYLOAD_TOO_LARGE => {
            invalid("request body", "larger than the server accepts", cause)
        }
        StatusCode::URI_TOO_LONG => invalid(
            "request URL",
            "longer than the server accepts: the query (filter, keyword, metadata) is too long",
            cause,
        ),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => {
            invalid("request headers", "larger than the server accepts", cause)
        }
        StatusCode::UNSUPPORTED_MEDIA_TYPE => invalid(
            "request body",
            "not of a media type the server accepts",
            cause,
        ),
        StatusCode::LENGTH_REQUIRED => invalid("request body", "sent without a length", cause),
        StatusCode::PRECONDITION_REQUIRED => invalid(
            "If-Match",
            "this call swaps only at a known version: send the session's version",
            cause,
        ),
        StatusCode::UNPROCESSABLE_ENTITY => {
            invalid("request", "the server cannot process it", cause)
        }
        StatusCode::UNAUTHORIZED
        | StatusCode::FORBIDDEN
        | StatusCode::PROXY_AUTHENTICATION_REQUIRED => SessionError::Unauthorized {
            reason: cause.to_string(),
        },
        StatusCode::NOT_FOUND => SessionError::NotFound {
            what: "resource",
            id: path.to_owned(),
        },
        StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_IMPLEMENTED => {
            SessionError::unsupported(BACKEND, "this call on this server")
        }
        StatusCode::CONFLICT | StatusCode::PRECONDITION_FAILED => SessionError::Conflict {
            id: subject(path),
            expected: 0,
            actual: 0,
        },
        StatusCode::GONE => SessionError::Expired { id: subject(path) },
        StatusCode::REQUEST_TIMEOUT
        | StatusCode::TOO_MANY_REQUESTS
        | StatusCode::BAD_GATEWAY
        | StatusCode::SERVICE_UNAVAILABLE
        | StatusCode::GATEWAY_TIMEOUT => SessionError::unavailable(BACKEND, cause),
        s if s.is_client_error() => invalid("request", "refused by the server", cause),
        _ => SessionError::backend(BACKEND, cause),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16) -> StatusCode {
        StatusCode::from_u16(code).unwrap_or_else(|e| panic!("{code}: {e}"))
    }

    /// Every status the server, axum, hyper or a proxy in front can answer
    /// without a problem document, and the kind the client reports.
    const TABLE: [(u16, ErrorKind); 27] = [
        (400, ErrorKind::InvalidInput),
        (401, ErrorKind::Unauthorized),
        (403, ErrorKind::Unauthorized),
        (404, ErrorKind::NotFound),
        (405, ErrorKind::Unsupported),
        (406, ErrorKind::InvalidInput),
        (407, ErrorKind::Unauthorized),
        (408, ErrorKind::Unavailable),
        (409, ErrorKind::Conflict),
        (410, ErrorKind::Expired),
        (411, ErrorKind::InvalidInput),
        (412, ErrorKind::Conflict),
        (413, ErrorKind::InvalidInput),
        (414, ErrorKind::InvalidInput),
        (415, ErrorKind::InvalidInput),
        (422, ErrorKind::InvalidInput),
        (428, ErrorKind::InvalidInput),
        (429, ErrorKind::Unavailable),
        (431, ErrorKind::InvalidInput),
        (500, ErrorKind::Backend),
        (501, ErrorKind::Unsupported),
        (502, ErrorKind::Unavailable),
        (503, ErrorKind::Unavailable),
        (504, ErrorKind::Unavailable),
        (505, ErrorKind::Backend),
        (302, ErrorKind::Backend),
        (418, ErrorKind::InvalidInput),
    ];

    #[test]
    fn every_status_without_a_problem_document_maps_to_its_kind() {
        for (code, kind) in TABLE {
            let e = error_of(status(code), "/v1/sessions/s-1/events", false, b"refused");
            assert_eq!(e.kind(), kind, "HTTP {code}: {e}");
            assert!(
                e.report().to_string().contains(&code.to_string())
                    || matches!(
                        kind,
                        ErrorKind::NotFound
                            | ErrorKind::Conflict
                            | ErrorKind::Expired
                            | ErrorKind::Unsupported
                    ),
                "HTTP {code}: the report names the status: {}",
                e.report()
            );
        }
    }

    #[test]
    fn a_url_too_long_is_invalid_input_naming_the_url() {
        let e = error_of(status(414), "/v1/sessions/s-1/events", false, b"");
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert!(e.to_string().starts_with("invalid request URL"), "{e}");
    }

    #[test]
    fn a_session_answer_names_the_session() {
        let e = error_of(status(410), "/v1/sessions/s-9/events", false, b"");
        assert_eq!(
            e.to_string(),
            SessionError::Expired { id: "s-9".into() }.to_string()
        );
        let e = error_of(status(404), "/v1/nowhere", false, b"");
        assert!(e.to_string().contains("/v1/nowhere"), "{e}");
    }

    #[test]
    fn every_kind_the_server_sends_as_a_problem_comes_back_whatever_the_status() {
        let errors = [
            SessionError::session_not_found("s-1"),
            SessionError::Expired { id: "s-1".into() },
            SessionError::QuotaExceeded {
                id: "s-1".into(),
                quota: "events per session",
                limit: 5,
                requested: 6,
            },
            SessionError::Conflict {
                id: "s-1".into(),
                expected: 1,
                actual: 2,
            },
            SessionError::invalid("If-Match", "required"),
            SessionError::Unauthorized {
                reason: "no key".into(),
            },
            SessionError::unavailable(BACKEND, std::io::Error::other("slow")),
        ];
        for error in errors {
            let problem = Problem::from_error(&error);
            let body = serde_json::to_vec(&problem).unwrap_or_default();
            // The server answers some kinds with another status (412, 428, 429).
            for code in [problem.status, 412, 428, 429] {
                let back = error_of(status(code), "/v1/sessions/s-1", true, &body);
                assert_eq!(back.kind(), error.kind(), "HTTP {code}: {back}");
            }
        }
    }

    #[test]
    fn a_problem_of_an_unknown_kind_falls_back_to_its_status() {
        let body = br#"{"type":"x","title":"t","status":414,"detail":"long","kind":"meteor"}"#;
        let e = error_of(status(414), "/v1/sessions/s-1/events", true, body);
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        let e = error_of(status(400), "/v1/sessions/s-1", true, b"not json");
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
    }
}
