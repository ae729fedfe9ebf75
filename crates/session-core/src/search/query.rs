//! The query and hit types: where a search looks, in which order, and
//! what it finds.

use serde::{Deserialize, Serialize};

use super::terms::ParsedQuery;
use crate::error::Result;
use crate::event::SessionEvent;
use crate::filter::DEFAULT_PAGE_SIZE;
use crate::validate::{validate_id, validate_name, Limits};

/// Where a search looks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum SearchScope {
    /// The archive of one session.
    Session(String),
    /// The archives of all of one user's sessions in one app.
    User {
        /// The app.
        app: String,
        /// The user.
        user_id: String,
    },
}

/// The order of the matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum SearchMode {
    /// Every match, chronological (the seed's order). Every backend.
    #[default]
    Literal,
    /// The same matches, best first (BM25 or the engine's own relevance);
    /// only where [`crate::Capabilities::ranked_search`].
    Ranked,
}

/// A keyword search over the archive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SearchQuery {
    /// Where to look.
    pub scope: SearchScope,
    /// The text to find, in the query language of [`ParsedQuery`].
    pub text: String,
    /// Chronological or by relevance.
    #[serde(default)]
    pub mode: SearchMode,
    /// Zero-based page.
    #[serde(default)]
    pub page: usize,
    /// Page size (default 10).
    #[serde(default = "default_page_size")]
    pub page_size: usize,
}

/// The page size of a query that names none.
fn default_page_size() -> usize {
    DEFAULT_PAGE_SIZE
}

impl SearchQuery {
    /// A literal search of one session's archive, first page of 10.
    pub fn in_session(session_id: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            scope: SearchScope::Session(session_id.into()),
            text: text.into(),
            mode: SearchMode::Literal,
            page: 0,
            page_size: DEFAULT_PAGE_SIZE,
        }
    }

    /// A literal search of all of a user's sessions in an app.
    pub fn for_user(
        app: impl Into<String>,
        user_id: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        Self {
            scope: SearchScope::User {
                app: app.into(),
                user_id: user_id.into(),
            },
            ..Self::in_session("", text)
        }
    }

    /// Sets page and page size.
    pub fn page(mut self, page: usize, page_size: usize) -> Self {
        self.page = page;
        self.page_size = page_size;
        self
    }

    /// Sets the mode.
    pub fn mode(mut self, mode: SearchMode) -> Self {
        self.mode = mode;
        self
    }

    /// The query text parsed: `InvalidInput` for an empty query (see [`ParsedQuery::parse`]).
    pub fn parsed(&self) -> Result<ParsedQuery> {
        ParsedQuery::parse(&self.text)
    }

    /// Checks sizes, ids and the query text.
    pub fn check(&self, limits: &Limits) -> Result<()> {
        limits.check_page_size(self.page_size)?;
        self.parsed()?;
        match &self.scope {
            SearchScope::Session(id) => validate_id("session id", id),
            SearchScope::User { app, user_id } => {
                validate_name("app", app)?;
                if user_id == crate::session::GROUP_USER {
                    Ok(())
                } else {
                    validate_name("user id", user_id)
                }
            }
        }
    }
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SearchHit {
    /// The session the event belongs to.
    pub session_id: String,
    /// The matching event.
    pub event: SessionEvent,
    /// Relevance in ranked mode (higher is better); `None` in literal mode.
    pub score: Option<f64>,
    /// A short excerpt of the event's text around the first match (see [`ParsedQuery::snippet`]).
    #[serde(default)]
    pub snippet: String,
}

impl SearchHit {
    /// A hit for `event`, its snippet cut for `query`.
    pub fn new(event: SessionEvent, query: &ParsedQuery, score: Option<f64>) -> Self {
        Self {
            session_id: event.session_id.clone(),
            snippet: query.snippet(&event.message.search_text()),
            event,
            score,
        }
    }
}
