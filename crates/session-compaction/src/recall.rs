//! Recall tools: `conversation_search` over one session's archive, and
//! `cross_session_search` over all of one user's sessions.

use std::sync::Arc;

use chrono::SecondsFormat;
use serde::Serialize;
use serde_json::{json, Value};
use session_core::{
    Owner, Page, SearchHit, SearchQuery, SessionError, SessionId, SessionService, DEFAULT_PAGE_SIZE,
};

/// Exactly what the tools answer when nothing matches.
pub const NO_RESULTS: &str = "No results found.";

/// Which session a tool call runs in: what the agent loop knows when it executes a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolContext {
    /// The caller.
    pub owner: Owner,
    /// The session the agent is in.
    pub session_id: SessionId,
}

/// The arguments the tools accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchArgs {
    /// The keyword (case-insensitive, literal).
    pub query: String,
    /// Zero-based page; negative pages were clamped to 0.
    pub page: usize,
}

impl SearchArgs {
    /// Reads `{"innerThought", "query", "page"}` (a JSON object or its text),
    /// the seed's parameters. `innerThought` (or `inner_thought`) is
    /// accepted and ignored: it is never echoed back.
    pub fn parse(arguments: &Value) -> Result<Self, SessionError> {
        let owned;
        let args = if let Some(text) = arguments.as_str() {
            owned = serde_json::from_str::<Value>(text)
                .map_err(|e| SessionError::invalid("arguments", format!("not JSON: {e}")))?;
            &owned
        } else {
            arguments
        };
        let query = args
            .get("query")
            .and_then(Value::as_str)
            .filter(|q| !q.is_empty())
            .ok_or_else(|| SessionError::invalid("query", "a non-empty string is required"))?
            .to_owned();
        let page = match args.get("page") {
            None | Some(Value::Null) => 0,
            Some(v) => {
                let n = v
                    .as_i64()
                    .or_else(|| v.as_f64().map(|f| f.trunc().clamp(-1e15, 1e15) as i64))
                    .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                    .ok_or_else(|| SessionError::invalid("page", "must be an integer"))?;
                usize::try_from(n.max(0)).unwrap_or(usize::MAX)
            }
        };
        Ok(Self { query, page })
    }
}

fn definition(name: &str, description: &str) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    "innerThought": {
                        "type": "string",
                        "description": "Your private reasoning about why you search and what you hope to find. Not shown to the user."
                    },
                    "query": {
                        "type": "string",
                        "description": "A keyword or phrase to look for, matched case-insensitively and literally."
                    },
                    "page": {
                        "type": "integer",
                        "description": "Zero-based page of results, oldest first; ask for the next page to see more. Defaults to 0."
                    }
                },
                "required": ["innerThought", "query"],
                "additionalProperties": false
            }
        }
    })
}

/// One hit as the seed writes it: `timestamp`, `type`, `text`, in that
/// order (then `session_id` for cross-session search).
#[derive(Serialize)]
struct HitOut<'a> {
    timestamp: String,
    #[serde(rename = "type")]
    kind: &'a str,
    text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<&'a str>,
}

fn render(page: &Page<SearchHit>, with_session: bool) -> String {
    if page.items.is_empty() {
        return NO_RESULTS.to_owned();
    }
    let items: Vec<HitOut<'_>> = page
        .items
        .iter()
        .map(|h| HitOut {
            timestamp: h
                .event
                .timestamp
                .to_rfc3339_opts(SecondsFormat::AutoSi, true),
            kind: h.event.role().as_str(),
            text: h.event.message.search_text(),
            session_id: with_session.then_some(h.session_id.as_str()),
        })
        .collect();
    // Plain strings and one struct: serializing cannot fail.
    serde_json::to_string(&items).unwrap_or_else(|_| NO_RESULTS.to_owned())
}

/// The `conversation_search` tool: keyword search over the current
/// session's archive (synthetic summaries included), oldest first.
#[derive(Clone)]
pub struct ConversationSearch {
    service: Arc<dyn SessionService>,
    page_size: usize,
}

impl std::fmt::Debug for ConversationSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConversationSearch")
            .field("page_size", &self.page_size)
            .finish_non_exhaustive()
    }
}

impl ConversationSearch {
    /// The tool's name.
    pub const NAME: &'static str = "conversation_search";

    /// A tool over `service`, pages of 10.
    pub fn new(service: Arc<dyn SessionService>) -> Self {
        Self {
            service,
            page_size: DEFAULT_PAGE_SIZE,
        }
    }

    /// Sets the page size.
    pub fn with_page_size(mut self, size: usize) -> Self {
        self.page_size = size.max(1);
        self
    }

    /// The tool definition in the OpenAI function-tool shape.
    pub fn definition(&self) -> Value {
        definition(
            Self::NAME,
            "Search the full history of this conversation, including parts no longer in your context, \
             by keyword. Returns matching messages oldest first as JSON, or 'No results found.'.",
        )
    }

    /// Runs a call: the JSON array of `{timestamp, type, text}`, or exactly `No results found.`.
    pub async fn call(&self, ctx: &ToolContext, arguments: &Value) -> Result<String, SessionError> {
        let args = SearchArgs::parse(arguments)?;
        let query = SearchQuery::in_session(ctx.session_id.as_str(), args.query)
            .page(args.page, self.page_size);
        let page = self.service.search(&ctx.owner, &query).await?;
        Ok(render(&page, false))
    }
}

/// The `cross_session_search` tool, bound to one user of one app at
/// construction: searches all of that user's sessions, and says which
/// session each hit came from.
#[derive(Clone)]
pub struct CrossSessionSearch {
    service: Arc<dyn SessionService>,
    owner: Owner,
    page_size: usize,
}

impl std::fmt::Debug for CrossSessionSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrossSessionSearch")
            .field("owner", &self.owner)
            .field("page_size", &self.page_size)
            .finish_non_exhaustive()
    }
}

impl CrossSessionSearch {
    /// The tool's name.
    pub const NAME: &'static str = "cross_session_search";

    /// A tool over all of `owner`'s sessions.
    pub fn new(service: Arc<dyn SessionService>, owner: Owner) -> Self {
        Self {
            service,
            owner,
            page_size: DEFAULT_PAGE_SIZE,
        }
    }

    /// Sets the page size.
    pub fn with_page_size(mut self, size: usize) -> Self {
        self.page_size = size.max(1);
        self
    }

    /// The tool definition in the OpenAI function-tool shape.
    pub fn definition(&self) -> Value {
        definition(
            Self::NAME,
            "Search all of this user's past conversations by keyword. Returns matching messages oldest \
             first as JSON with the session each came from, or 'No results found.'.",
        )
    }

    /// Runs a call: the JSON array of `{timestamp, type, text, session_id}`, or `No results found.`.
    pub async fn call(&self, arguments: &Value) -> Result<String, SessionError> {
        let args = SearchArgs::parse(arguments)?;
        let query = SearchQuery::for_user(
            self.owner.app.as_str(),
            self.owner.user.as_str(),
            args.query,
        )
        .page(args.page, self.page_size);
        let page = self.service.search(&self.owner, &query).await?;
        Ok(render(&page, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse_with_clamped_pages() {
        let a =
            SearchArgs::parse(&json!({"inner_thought": "x", "query": "cat", "page": -3})).unwrap();
        assert_eq!(
            a,
            SearchArgs {
                query: "cat".into(),
                page: 0
            }
        );
        let a = SearchArgs::parse(&json!("{\"query\": \"dog\", \"page\": 2}")).unwrap();
        assert_eq!(a.page, 2);
        assert_eq!(
            SearchArgs::parse(&json!({"query": "q", "page": "1"}))
                .unwrap()
                .page,
            1
        );
        assert!(SearchArgs::parse(&json!({"inner_thought": "x"})).is_err());
        assert!(SearchArgs::parse(&json!({"query": ""})).is_err());
        assert!(SearchArgs::parse(&json!({"query": "q", "page": "two"})).is_err());
    }
}
