//! A summarizer on any OpenAI-compatible chat-completions endpoint.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::error::CompactionError;
use crate::summarize::{Summarizer, SummaryRequest};

/// Calls `POST {base_url}/chat/completions` to write summaries.
///
/// Retries 429 and 5xx answers with exponential backoff; every request has
/// a timeout. The API key never appears in `Debug` output or logs.
#[derive(Clone)]
pub struct OpenAiSummarizer {
    client: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    model: String,
    temperature: f64,
    max_tokens: u32,
    retries: u32,
    backoff: Duration,
}

impl std::fmt::Debug for OpenAiSummarizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiSummarizer")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl OpenAiSummarizer {
    /// A summarizer for `model` at `base_url` (e.g. `https://api.openai.com/v1`).
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            client: reqwest::Client::new(),
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            api_key: None,
            model: model.into(),
            temperature: 0.3,
            max_tokens: 1024,
            retries: 3,
            backoff: Duration::from_millis(250),
        }
        .with_timeout(Duration::from_secs(60))
    }

    /// Base URL from `OPENAI_BASE_URL` (default `https://api.openai.com/v1`), key from `OPENAI_API_KEY`.
    pub fn from_env(model: impl Into<String>) -> Self {
        let base = std::env::var("OPENAI_BASE_URL")
            .unwrap_or_else(|_| "https://api.openai.com/v1".to_owned());
        let mut s = Self::new(base, model);
        s.api_key = std::env::var("OPENAI_API_KEY")
            .ok()
            .filter(|k| !k.is_empty());
        s
    }

    /// Sends `Authorization: Bearer <key>`.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Sampling temperature (default 0.3, as the seeds use).
    pub fn with_temperature(mut self, t: f64) -> Self {
        self.temperature = t;
        self
    }

    /// Most tokens in the answer (default 1024).
    pub fn with_max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = n;
        self
    }

    /// Per-request timeout (default 60 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        self
    }

    /// Retries after 429/5xx (default 3) and the first backoff (default 250 ms, doubling).
    pub fn with_retries(mut self, retries: u32, backoff: Duration) -> Self {
        self.retries = retries;
        self.backoff = backoff;
        self
    }

    /// The request body for a summary request.
    pub fn request_body(&self, request: &SummaryRequest<'_>) -> Value {
        let mut body = json!({
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "messages": [
                {"role": "system", "content": request.system_prompt},
                {"role": "user", "content": request.user_prompt},
            ],
        });
        if let Some(schema) = request.schema {
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": {"name": "session_summary", "strict": true, "schema": schema},
            });
        }
        body
    }
}

#[async_trait]
impl Summarizer for OpenAiSummarizer {
    async fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, CompactionError> {
        let url = format!("{}/chat/completions", self.base_url);
        let body = self.request_body(request);
        let mut attempt = 0;
        loop {
            let mut req = self.client.post(&url).json(&body);
            if let Some(key) = &self.api_key {
                req = req.bearer_auth(key);
            }
            let response = req.send().await;
            let retry_after = match response {
                Err(e) if e.is_timeout() || e.is_connect() => {
                    CompactionError::summarizer_caused_by("the request failed", e)
                }
                Err(e) => {
                    return Err(CompactionError::summarizer_caused_by(
                        "the request failed",
                        e,
                    ))
                }
                Ok(resp) => {
                    let status = resp.status();
                    if status.is_success() {
                        let v: Value = resp.json().await.map_err(|e| {
                            CompactionError::summarizer_caused_by("the answer is unreadable", e)
                        })?;
                        return v["choices"][0]["message"]["content"]
                            .as_str()
                            .map(str::to_owned)
                            .ok_or_else(|| {
                                CompactionError::summarizer(
                                    "the answer has no choices[0].message.content",
                                )
                            });
                    }
                    let text = resp.text().await.unwrap_or_default();
                    let message = serde_json::from_str::<Value>(&text)
                        .ok()
                        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
                        .unwrap_or(text);
                    let error = CompactionError::Summarizer {
                        what: format!("HTTP {status}: {message}"),
                        status: Some(status.as_u16()),
                        source: None,
                    };
                    if status.as_u16() == 429 || status.is_server_error() {
                        error
                    } else {
                        return Err(error);
                    }
                }
            };
            attempt += 1;
            if attempt > self.retries {
                return Err(match retry_after {
                    CompactionError::Summarizer {
                        what,
                        status,
                        source,
                    } => CompactionError::Summarizer {
                        what: format!("gave up after {attempt} attempts; the last: {what}"),
                        status,
                        source,
                    },
                    other => other,
                });
            }
            tracing::warn!(attempt, "summarizer request failed; retrying");
            tokio::time::sleep(self.backoff * 2u32.saturating_pow(attempt - 1)).await;
        }
    }
}

/// Which summarizer writes summaries, as one setting a command line, a
/// config file or the environment can carry: `extractive` (offline) or
/// `openai:MODEL` (any OpenAI-compatible endpoint; base URL from the
/// setting or `OPENAI_BASE_URL`, key from `OPENAI_API_KEY`).
///
/// ```
/// use session_compaction::SummarizerChoice;
/// let choice: SummarizerChoice = "openai:gpt-4o-mini".parse()?;
/// assert_eq!(choice, SummarizerChoice::OpenAi { model: "gpt-4o-mini".into(), base_url: None });
/// assert!("openai:".parse::<SummarizerChoice>().is_err());
/// let _summarizer = SummarizerChoice::Extractive.build();
/// # Ok::<(), session_compaction::CompactionError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SummarizerChoice {
    /// [`crate::ExtractiveSummarizer`]: offline and deterministic.
    #[default]
    Extractive,
    /// [`OpenAiSummarizer`] for `model`.
    OpenAi {
        /// The model.
        model: String,
        /// The endpoint (default `OPENAI_BASE_URL`, else `https://api.openai.com/v1`).
        base_url: Option<String>,
    },
}

impl SummarizerChoice {
    /// An OpenAI-compatible endpoint: `model` must not be empty, `base_url` must be http(s).
    pub fn openai(
        model: impl Into<String>,
        base_url: Option<String>,
    ) -> Result<Self, CompactionError> {
        let model = model.into();
        if model.trim().is_empty() {
            return Err(CompactionError::invalid("model", "must not be empty"));
        }
        if let Some(url) = &base_url {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(CompactionError::invalid(
                    "base url",
                    format!("{url:?} is not an http:// or https:// URL"),
                ));
            }
        }
        Ok(Self::OpenAi { model, base_url })
    }

    /// From `AGENT_SESSION_SUMMARIZER` (`extractive` when unset).
    pub fn from_env() -> Result<Self, CompactionError> {
        match std::env::var("AGENT_SESSION_SUMMARIZER") {
            Ok(v) if !v.trim().is_empty() => v.parse(),
            _ => Ok(Self::Extractive),
        }
    }

    /// The summarizer (an OpenAI one reads `OPENAI_API_KEY` now).
    pub fn build(&self) -> std::sync::Arc<dyn Summarizer> {
        match self {
            Self::Extractive => std::sync::Arc::new(crate::ExtractiveSummarizer::new()),
            Self::OpenAi { model, base_url } => {
                let mut s = OpenAiSummarizer::from_env(model.clone());
                if let Some(url) = base_url {
                    url.trim_end_matches('/').clone_into(&mut s.base_url);
                }
                std::sync::Arc::new(s)
            }
        }
    }
}

impl std::str::FromStr for SummarizerChoice {
    type Err = CompactionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().split_once(':') {
            None if s.trim() == "extractive" => Ok(Self::Extractive),
            Some(("openai", model)) => Self::openai(model.trim(), None),
            _ => Err(CompactionError::invalid(
                "summarizer",
                format!("{s:?} is neither `extractive` nor `openai:MODEL`"),
            )),
        }
    }
}
