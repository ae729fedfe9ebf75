//! Recall tools: `conversation_search` over one session's archive,
//! `cross_session_search` over all of one user's sessions, and
//! `conversation_read`, one archived event of the session, whole.
//!
//! A page of hits is bounded by default: a hit whose text is over
//! [`DEFAULT_RECALL_HIT_TOKENS`] is cut to its search snippet (with
//! `"truncated": true` and its `seq`, for `conversation_read`), and a page
//! still over [`DEFAULT_RECALL_PAGE_TOKENS`] has its longest hits cut the
//! same way until it fits (a page of snippets alone can still be over it:
//! ask for smaller pages). Tokens are [`HeuristicEstimator`]'s, of the
//! page's JSON. `seed_exact()` gives the seed's unbounded output back.

use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::{json, Value};
use session_core::{
    EventFilter, HeuristicEstimator, MatchTerms, Owner, Page, SearchHit, SearchQuery, SessionError,
    SessionEvent, SessionId, SessionService, TokenEstimator, DEFAULT_PAGE_SIZE,
};

/// Exactly what the tools answer when nothing matches.
pub const NO_RESULTS: &str = "No results found.";

/// The most a page of recall hits takes by default, in tokens as
/// [`HeuristicEstimator`] counts the page's JSON.
pub const DEFAULT_RECALL_PAGE_TOKENS: u32 = 2_000;

/// The most one hit's text takes by default, in [`HeuristicEstimator`]
/// tokens, before the hit is cut to its search snippet.
pub const DEFAULT_RECALL_HIT_TOKENS: u32 = 500;

/// The characters of a snippet made here, for a hit whose store gave none.
const FALLBACK_SNIPPET_CHARS: usize = 160;

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
    /// Every term (the default) or any one: the optional `"match": "all" | "any"`.
    pub match_terms: MatchTerms,
    /// Only events at or after this time: the optional `"since"` (RFC 3339).
    pub since: Option<DateTime<Utc>>,
}

impl SearchArgs {
    /// Reads `{"innerThought", "query", "page"}` (a JSON object or its text),
    /// the seed's parameters, and the optional `match` and `since` that
    /// faces such as MCP offer (the tool definitions keep the seed's three).
    /// `innerThought` (or `inner_thought`) is accepted and ignored: it is
    /// never echoed back.
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
        let field = |name: &str| args.get(name).cloned().unwrap_or(Value::Null);
        let match_terms = serde_json::from_value::<Option<MatchTerms>>(field("match"))
            .map_err(|_| SessionError::invalid("match", "must be \"all\" or \"any\""))?
            .unwrap_or_default();
        let since = serde_json::from_value(field("since")).map_err(|_| {
            SessionError::invalid(
                "since",
                "must be an RFC 3339 time such as 2026-01-01T00:00:00Z",
            )
        })?;
        Ok(Self {
            query,
            page,
            match_terms,
            since,
        })
    }

    /// `query` with these arguments' mode and time bound.
    fn narrow(&self, query: SearchQuery) -> SearchQuery {
        let query = query.matching(self.match_terms);
        match self.since {
            Some(t) => query.since(t),
            None => query,
        }
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

/// One hit of a bounded page: its seq first (what `conversation_read`
/// takes), then the seed's fields, the text whole or cut to its snippet.
#[derive(Serialize)]
struct BoundedHit<'a> {
    seq: u64,
    timestamp: String,
    #[serde(rename = "type")]
    kind: &'a str,
    text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    truncated: bool,
}

/// How a page of hits is rendered: bounded (the default) or the seed's
/// exact output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Output {
    /// The most the page takes, in heuristic tokens.
    page_tokens: u32,
    /// The most one hit's text takes before it is cut to its snippet.
    hit_tokens: u32,
    /// The seed's output: whole texts, no seq, no bound.
    seed_exact: bool,
}

impl Default for Output {
    fn default() -> Self {
        Self {
            page_tokens: DEFAULT_RECALL_PAGE_TOKENS,
            hit_tokens: DEFAULT_RECALL_HIT_TOKENS,
            seed_exact: false,
        }
    }
}

/// The event's time as the seed writes it (`2025-06-01T12:00:00Z`).
fn timestamp(e: &SessionEvent) -> String {
    e.timestamp.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// `value` as the compact JSON a tool answers.
fn to_json<T: Serialize + ?Sized>(value: &T) -> Result<String, SessionError> {
    serde_json::to_string(value).map_err(|e| SessionError::serialization("recall tool answer", e))
}

/// The hit's snippet, or (from a store that gave none) the start of `text`.
fn snippet_of(hit: &SearchHit, text: &str) -> String {
    if !hit.snippet.is_empty() {
        return hit.snippet.clone();
    }
    let mut cut: String = text.chars().take(FALLBACK_SNIPPET_CHARS).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

/// One hit being rendered: the whole text, the snippet, which one is
/// shown, and what its JSON costs.
struct Candidate<'a> {
    hit: &'a SearchHit,
    full: String,
    snippet: String,
    /// Whether the snippet is shorter than the text (else a cut saves nothing).
    cuttable: bool,
    truncated: bool,
    tokens: u32,
}

impl Candidate<'_> {
    fn out(&self, with_session: bool) -> BoundedHit<'_> {
        BoundedHit {
            seq: self.hit.event.seq,
            timestamp: timestamp(&self.hit.event),
            kind: self.hit.event.role().as_str(),
            text: if self.truncated {
                &self.snippet
            } else {
                &self.full
            },
            session_id: with_session.then_some(self.hit.session_id.as_str()),
            truncated: self.truncated,
        }
    }

    fn cost(&self, with_session: bool) -> Result<u32, SessionError> {
        Ok(HeuristicEstimator.estimate_text(&to_json(&self.out(with_session))?))
    }
}

impl Output {
    fn render(&self, page: &Page<SearchHit>, with_session: bool) -> Result<String, SessionError> {
        if page.items.is_empty() {
            Ok(NO_RESULTS.to_owned())
        } else if self.seed_exact {
            seed_render(page, with_session)
        } else {
            self.bounded_render(page, with_session)
        }
    }

    /// Long hits cut to their snippets, then the longest of the rest until
    /// the page fits (a page of snippets alone may still be over it).
    fn bounded_render(
        &self,
        page: &Page<SearchHit>,
        with_session: bool,
    ) -> Result<String, SessionError> {
        let estimator = HeuristicEstimator;
        let mut hits = Vec::with_capacity(page.items.len());
        for hit in &page.items {
            let full = hit.event.message.search_text();
            let snippet = snippet_of(hit, &full);
            let cuttable = snippet.chars().count() < full.chars().count();
            let mut c = Candidate {
                hit,
                truncated: cuttable && estimator.estimate_text(&full) > self.hit_tokens,
                cuttable,
                snippet,
                full,
                tokens: 0,
            };
            c.tokens = c.cost(with_session)?;
            hits.push(c);
        }
        // The brackets and commas around the hits. Every part is JSON, as
        // the page is, so rounding each part up makes the sum of their
        // estimates at least the estimate of the whole page.
        let separators = format!("[{}]", ",".repeat(hits.len().saturating_sub(1)));
        let frame = estimator.estimate_text(&separators);
        let mut total = hits
            .iter()
            .fold(frame, |sum, c| sum.saturating_add(c.tokens));
        while total > self.page_tokens {
            let Some(longest) = hits
                .iter_mut()
                .filter(|c| c.cuttable && !c.truncated)
                .max_by_key(|c| c.tokens)
            else {
                break;
            };
            longest.truncated = true;
            let before = longest.tokens;
            longest.tokens = longest.cost(with_session)?;
            total = total.saturating_sub(before).saturating_add(longest.tokens);
        }
        let items: Vec<BoundedHit<'_>> = hits.iter().map(|c| c.out(with_session)).collect();
        to_json(&items)
    }
}

/// The seed's output: every hit's whole text.
fn seed_render(page: &Page<SearchHit>, with_session: bool) -> Result<String, SessionError> {
    let items: Vec<HitOut<'_>> = page
        .items
        .iter()
        .map(|h| HitOut {
            timestamp: timestamp(&h.event),
            kind: h.event.role().as_str(),
            text: h.event.message.search_text(),
            session_id: with_session.then_some(h.session_id.as_str()),
        })
        .collect();
    to_json(&items)
}

/// What a bounded tool's description adds about cut hits.
const BOUNDED_NOTE: &str = "A long message is cut to an excerpt around the match, with \
                            \"truncated\": true; read it whole with conversation_read and its seq.";

/// The `conversation_search` tool: keyword search over the current
/// session's archive (synthetic summaries included), oldest first, each
/// page bounded (at most [`DEFAULT_RECALL_PAGE_TOKENS`] a page and
/// [`DEFAULT_RECALL_HIT_TOKENS`] a hit by default) unless
/// [`Self::seed_exact`].
#[derive(Clone)]
pub struct ConversationSearch {
    service: Arc<dyn SessionService>,
    page_size: usize,
    output: Output,
}

impl std::fmt::Debug for ConversationSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConversationSearch")
            .field("page_size", &self.page_size)
            .field("output", &self.output)
            .finish_non_exhaustive()
    }
}

impl ConversationSearch {
    /// The tool's name.
    pub const NAME: &'static str = "conversation_search";

    /// A tool over `service`, pages of 10, bounded by the default budgets.
    pub fn new(service: Arc<dyn SessionService>) -> Self {
        Self {
            service,
            page_size: DEFAULT_PAGE_SIZE,
            output: Output::default(),
        }
    }

    /// Sets the page size.
    pub fn with_page_size(mut self, size: usize) -> Self {
        self.page_size = size.max(1);
        self
    }

    /// Sets the most a page takes, in heuristic tokens (default
    /// [`DEFAULT_RECALL_PAGE_TOKENS`]); 0 is clamped to 1.
    pub fn with_page_tokens(mut self, tokens: u32) -> Self {
        self.output.page_tokens = tokens.max(1);
        self
    }

    /// Sets the most one hit's text takes before it is cut to its snippet,
    /// in heuristic tokens (default [`DEFAULT_RECALL_HIT_TOKENS`]); 0 is
    /// clamped to 1.
    pub fn with_hit_tokens(mut self, tokens: u32) -> Self {
        self.output.hit_tokens = tokens.max(1);
        self
    }

    /// The seed's exact output: `{timestamp, type, text}` with every text
    /// whole, no seq, no bound (Spring AI Session's tool, byte for byte).
    pub fn seed_exact(mut self) -> Self {
        self.output.seed_exact = true;
        self
    }

    /// The tool definition in the OpenAI function-tool shape.
    pub fn definition(&self) -> Value {
        let description = if self.output.seed_exact {
            "Search the full history of this conversation, including parts no longer in your \
             context, by keyword. Returns matching messages oldest first as JSON, or 'No results \
             found.'."
                .to_owned()
        } else {
            format!(
                "Search the full history of this conversation, including parts no longer in your \
                 context, by keyword. Returns matching messages oldest first as JSON ({{seq, \
                 timestamp, type, text}}), or 'No results found.'. {BOUNDED_NOTE}"
            )
        };
        definition(Self::NAME, &description)
    }

    /// Runs a call: the JSON array of `{seq, timestamp, type, text}` (long
    /// texts cut, with `truncated`), or with [`Self::seed_exact`] of
    /// `{timestamp, type, text}`; or exactly `No results found.`.
    pub async fn call(&self, ctx: &ToolContext, arguments: &Value) -> Result<String, SessionError> {
        let args = SearchArgs::parse(arguments)?;
        let query = SearchQuery::in_session(ctx.session_id.as_str(), args.query.as_str())
            .page(args.page, self.page_size);
        let query = args.narrow(query);
        let page = self.service.search(&ctx.owner, &query).await?;
        self.output.render(&page, false)
    }
}

/// The `cross_session_search` tool, bound to one user of one app at
/// construction: searches all of that user's sessions, and says which
/// session each hit came from; bounded as [`ConversationSearch`] is.
#[derive(Clone)]
pub struct CrossSessionSearch {
    service: Arc<dyn SessionService>,
    owner: Owner,
    page_size: usize,
    output: Output,
}

impl std::fmt::Debug for CrossSessionSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrossSessionSearch")
            .field("owner", &self.owner)
            .field("page_size", &self.page_size)
            .field("output", &self.output)
            .finish_non_exhaustive()
    }
}

impl CrossSessionSearch {
    /// The tool's name.
    pub const NAME: &'static str = "cross_session_search";

    /// A tool over all of `owner`'s sessions, bounded by the default budgets.
    pub fn new(service: Arc<dyn SessionService>, owner: Owner) -> Self {
        Self {
            service,
            owner,
            page_size: DEFAULT_PAGE_SIZE,
            output: Output::default(),
        }
    }

    /// Sets the page size.
    pub fn with_page_size(mut self, size: usize) -> Self {
        self.page_size = size.max(1);
        self
    }

    /// Sets the most a page takes, in heuristic tokens (default
    /// [`DEFAULT_RECALL_PAGE_TOKENS`]); 0 is clamped to 1.
    pub fn with_page_tokens(mut self, tokens: u32) -> Self {
        self.output.page_tokens = tokens.max(1);
        self
    }

    /// Sets the most one hit's text takes before it is cut to its snippet,
    /// in heuristic tokens (default [`DEFAULT_RECALL_HIT_TOKENS`]); 0 is
    /// clamped to 1.
    pub fn with_hit_tokens(mut self, tokens: u32) -> Self {
        self.output.hit_tokens = tokens.max(1);
        self
    }

    /// The seed's exact output: `{timestamp, type, text, session_id}` with
    /// every text whole, no seq, no bound.
    pub fn seed_exact(mut self) -> Self {
        self.output.seed_exact = true;
        self
    }

    /// The tool definition in the OpenAI function-tool shape.
    pub fn definition(&self) -> Value {
        let description = if self.output.seed_exact {
            "Search all of this user's past conversations by keyword. Returns matching messages \
             oldest first as JSON with the session each came from, or 'No results found.'."
        } else {
            "Search all of this user's past conversations by keyword. Returns matching messages \
             oldest first as JSON ({seq, timestamp, type, text, session_id}), or 'No results \
             found.'. A long message is cut to an excerpt around the match, with \"truncated\": \
             true."
        };
        definition(Self::NAME, description)
    }

    /// Runs a call: the JSON array of `{seq, timestamp, type, text,
    /// session_id}` (long texts cut, with `truncated`), or with
    /// [`Self::seed_exact`] of `{timestamp, type, text, session_id}`; or
    /// `No results found.`.
    pub async fn call(&self, arguments: &Value) -> Result<String, SessionError> {
        let args = SearchArgs::parse(arguments)?;
        let query = SearchQuery::for_user(
            self.owner.app.as_str(),
            self.owner.user.as_str(),
            args.query.as_str(),
        )
        .page(args.page, self.page_size);
        let query = args.narrow(query);
        let page = self.service.search(&self.owner, &query).await?;
        self.output.render(&page, true)
    }
}

/// One event as `conversation_read` answers it, its text whole.
#[derive(Serialize)]
struct EventOut<'a> {
    seq: u64,
    timestamp: String,
    #[serde(rename = "type")]
    kind: &'a str,
    text: String,
}

/// What `conversation_read` answers for a seq the session's archive does
/// not hold: `No event with seq N.`.
pub fn no_event(seq: u64) -> String {
    format!("No event with seq {seq}.")
}

/// Reads `{"innerThought"?, "seq"}` (a JSON object or its text): a seq
/// is a non-negative integer, or a string of one.
fn parse_seq(arguments: &Value) -> Result<u64, SessionError> {
    let owned;
    let args = if let Some(text) = arguments.as_str() {
        owned = serde_json::from_str::<Value>(text)
            .map_err(|e| SessionError::invalid_because("arguments", "not JSON", e))?;
        &owned
    } else {
        arguments
    };
    let seq = args
        .get("seq")
        .ok_or_else(|| SessionError::invalid("seq", "is required"))?;
    seq.as_u64()
        .or_else(|| seq.as_str().and_then(|s| s.trim().parse().ok()))
        .ok_or_else(|| SessionError::invalid("seq", "must be a non-negative integer"))
}

/// The `conversation_read` tool: one event of the current session's
/// archive, by the seq a search hit gave, with its whole text.
#[derive(Clone)]
pub struct ReadEvent {
    service: Arc<dyn SessionService>,
}

impl std::fmt::Debug for ReadEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadEvent").finish_non_exhaustive()
    }
}

impl ReadEvent {
    /// The tool's name.
    pub const NAME: &'static str = "conversation_read";

    /// A tool over `service`.
    pub fn new(service: Arc<dyn SessionService>) -> Self {
        Self { service }
    }

    /// The tool definition in the OpenAI function-tool shape.
    pub fn definition(&self) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": Self::NAME,
                "description": "Read one message of this conversation whole, by the seq a \
                                conversation_search hit gave (a long hit is cut to an excerpt). \
                                Returns {seq, timestamp, type, text} as JSON, or 'No event with \
                                seq N.'.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "innerThought": {
                            "type": "string",
                            "description": "Your private reasoning about why you read this message. Not shown to the user."
                        },
                        "seq": {
                            "type": "integer",
                            "minimum": 0,
                            "description": "The seq of the message, from a conversation_search hit."
                        }
                    },
                    "required": ["seq"],
                    "additionalProperties": false
                }
            }
        })
    }

    /// Runs a call: `{seq, timestamp, type, text}` with the whole text, or
    /// exactly `No event with seq N.` ([`no_event`]).
    pub async fn call(&self, ctx: &ToolContext, arguments: &Value) -> Result<String, SessionError> {
        let seq = parse_seq(arguments)?;
        let filter = match seq.checked_sub(1) {
            Some(before) => EventFilter::archive().after(before),
            // Seqs start at 1: the first event is not seq 0.
            None => EventFilter::archive(),
        }
        .page(0, 1);
        let page = self
            .service
            .events(&ctx.owner, &ctx.session_id, &filter)
            .await?;
        match page.items.first() {
            Some(e) if e.seq == seq => to_json(&EventOut {
                seq,
                timestamp: timestamp(e),
                kind: e.role().as_str(),
                text: e.message.search_text(),
            }),
            _ => Ok(no_event(seq)),
        }
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
                page: 0,
                match_terms: MatchTerms::All,
                since: None,
            }
        );
        let a = SearchArgs::parse(
            &json!({"query": "q", "match": "any", "since": "2026-01-01T01:00:00+01:00"}),
        )
        .unwrap();
        assert_eq!(a.match_terms, MatchTerms::Any);
        assert_eq!(
            a.since.map(|t| t.to_rfc3339()).as_deref(),
            Some("2026-01-01T00:00:00+00:00")
        );
        assert!(SearchArgs::parse(&json!({"query": "q", "match": "or"})).is_err());
        assert!(SearchArgs::parse(&json!({"query": "q", "since": "yesterday"})).is_err());
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

    use session_core::{
        CreateSessionRequest, DefaultSessionService, ErrorKind, InMemoryRepository, Message,
    };

    /// A session holding a question and ten ~4 KB tool outputs that all
    /// mention `ORD-77`.
    async fn ten_tool_outputs() -> (Arc<dyn SessionService>, ToolContext) {
        let service: Arc<dyn SessionService> = Arc::new(DefaultSessionService::new(
            InMemoryRepository::new().shared(),
        ));
        let owner = Owner::parse("support", "ada").unwrap();
        let create = CreateSessionRequest::for_owner(&owner).build().unwrap();
        let id = service.create(create).await.unwrap().id;
        let ask = Message::user("where is ORD-77?");
        service.append_message(&owner, &id, ask).await.unwrap();
        for i in 0..10 {
            let output = format!(
                "lookup {i}: ORD-77 is at depot {i}. {}",
                "carrier scan log line. ".repeat(180)
            );
            let m = Message::tool_result(format!("call-{i}"), "lookup", output);
            service.append_message(&owner, &id, m).await.unwrap();
        }
        let ctx = ToolContext {
            owner,
            session_id: id,
        };
        (service, ctx)
    }

    fn hits(out: &str) -> Vec<Value> {
        serde_json::from_str::<Vec<Value>>(out).unwrap()
    }

    #[tokio::test]
    async fn a_page_of_long_tool_outputs_is_cut_to_snippets_with_their_seqs() {
        let (service, ctx) = ten_tool_outputs().await;
        let tool = ConversationSearch::new(service.clone()).with_page_size(20);
        let out = tool.call(&ctx, &json!({"query": "ORD-77"})).await.unwrap();
        assert!(
            HeuristicEstimator.estimate_text(&out) <= DEFAULT_RECALL_PAGE_TOKENS,
            "{} tokens",
            HeuristicEstimator.estimate_text(&out)
        );
        let page = hits(&out);
        assert_eq!(page.len(), 11);
        assert_eq!(page[0]["seq"], 1);
        assert_eq!(page[0]["text"], "where is ORD-77?");
        assert!(
            page[0].get("truncated").is_none(),
            "a short hit stays whole"
        );
        for (n, hit) in (2u64..).zip(&page[1..]) {
            assert_eq!(hit["seq"], n, "{hit}");
            assert_eq!(hit["truncated"], true, "{hit}");
            assert_eq!(hit["type"], "tool");
            let text = hit["text"].as_str().unwrap();
            assert!(
                text.contains("ORD-77") && text.chars().count() <= 170,
                "{text}"
            );
        }
        // The seed's output: every text whole, no seq.
        let seed = ConversationSearch::new(service)
            .with_page_size(20)
            .seed_exact();
        let whole = hits(&seed.call(&ctx, &json!({"query": "ORD-77"})).await.unwrap());
        assert_eq!(whole.len(), 11);
        assert!(whole.iter().all(|h| h.get("seq").is_none()));
        assert!(whole[1]["text"].as_str().unwrap().len() > 4_000);
        assert_eq!(
            seed.definition()["function"]["description"],
            "Search the full history of this conversation, including parts no longer in your \
             context, by keyword. Returns matching messages oldest first as JSON, or 'No results \
             found.'."
        );
    }

    #[tokio::test]
    async fn a_page_over_its_budget_cuts_its_longest_hits_until_it_fits() {
        let (service, ctx) = ten_tool_outputs().await;
        // No hit is over the per-hit bound; the page is far over 3,000.
        let tool = ConversationSearch::new(service.clone())
            .with_hit_tokens(u32::MAX)
            .with_page_tokens(3_000)
            .with_page_size(20);
        let out = tool.call(&ctx, &json!({"query": "ORD-77"})).await.unwrap();
        assert!(HeuristicEstimator.estimate_text(&out) <= 3_000, "{out}");
        let page = hits(&out);
        let cut = |h: &Value| h.get("truncated") == Some(&json!(true));
        assert!(!cut(&page[0]), "the short hit is never cut");
        assert!(page[1..].iter().any(cut), "{out}");
        assert!(!page[1..].iter().all(cut), "cut only until it fits: {out}");
        // A zero budget is clamped to one token, which no page meets: every
        // long hit is cut, a hit its snippet would not shorten is not.
        let tiny = ConversationSearch::new(service)
            .with_hit_tokens(0)
            .with_page_tokens(0);
        let page = hits(&tiny.call(&ctx, &json!({"query": "ORD-77"})).await.unwrap());
        assert!(!cut(&page[0]) && page[1..].iter().all(cut), "{page:?}");
    }

    #[tokio::test]
    async fn a_read_by_seq_answers_the_whole_event_or_says_there_is_none() {
        let (service, ctx) = ten_tool_outputs().await;
        let read = ReadEvent::new(service);
        let event: Value =
            serde_json::from_str(&read.call(&ctx, &json!({"seq": 5})).await.unwrap()).unwrap();
        assert_eq!(
            (event["seq"].as_u64(), event["type"].as_str()),
            (Some(5), Some("tool"))
        );
        let text = event["text"].as_str().unwrap();
        assert!(
            text.starts_with("lookup 3: ORD-77") && text.len() > 4_000,
            "{text}"
        );
        let first = read.call(&ctx, &json!("{\"seq\": \"1\"}")).await.unwrap();
        assert!(first.contains("where is ORD-77?"), "{first}");
        for missing in [0, 12, u64::MAX] {
            let answer = read.call(&ctx, &json!({"seq": missing})).await.unwrap();
            assert_eq!(answer, format!("No event with seq {missing}."));
        }
        for bad in [json!({}), json!({"seq": -1}), json!({"seq": "two"})] {
            let e = read.call(&ctx, &bad).await.map_err(|e| e.kind());
            assert_eq!(e, Err(ErrorKind::InvalidInput), "{bad}");
        }
        assert_eq!(read.definition()["function"]["name"], "conversation_read");
        let elsewhere = ToolContext {
            owner: Owner::parse("support", "bob").unwrap(),
            session_id: ctx.session_id.clone(),
        };
        let hidden = read
            .call(&elsewhere, &json!({"seq": 1}))
            .await
            .map_err(|e| e.kind());
        assert_eq!(hidden, Err(ErrorKind::NotFound), "another owner's session");
    }
}
