//! [`CompactionError`]: why a compaction did not happen.

use session_core::SessionError;

impl CompactionError {
    /// A configuration the strategy or trigger cannot run with: an
    /// `InvalidInput` [`SessionError`] naming the field.
    pub fn invalid(field: &str, reason: impl Into<String>) -> Self {
        Self::Session(SessionError::invalid(field, reason))
    }

    /// A summarizer failure described by `what`, without a source.
    pub fn summarizer(what: impl Into<String>) -> Self {
        Self::Summarizer {
            what: what.into(),
            status: None,
            source: None,
        }
    }

    /// A summarizer failure described by `what`, caused by `source`.
    pub fn summarizer_caused_by(
        what: impl Into<String>,
        source: impl Into<session_core::BoxError>,
    ) -> Self {
        Self::Summarizer {
            what: what.into(),
            status: None,
            source: Some(source.into()),
        }
    }
}

/// Why a compaction did not happen. The context is always left untouched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompactionError {
    /// The summarizer failed (HTTP error, timeout, unreadable answer).
    #[error("summarizer failed: {what}")]
    Summarizer {
        /// What failed, in words that do not repeat the source.
        what: String,
        /// The HTTP status when the model server answered with an error.
        status: Option<u16>,
        /// The underlying error (transport, decoding), kept typed.
        #[source]
        source: Option<session_core::BoxError>,
    },
    /// The summarizer answered, but with nothing usable (empty, not JSON, not the schema).
    #[error("unusable summary: {reason}")]
    InvalidSummary {
        /// What was wrong with it.
        reason: String,
    },
    /// The repository failed.
    #[error(transparent)]
    Session(#[from] SessionError),
}
