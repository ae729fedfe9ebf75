//! The raw Elasticsearch (or OpenSearch) baseline: one index of
//! `(session_id, seq, event)` documents on the store's node, each append
//! one `_create` of the event's document with the store's refresh policy
//! (`refresh=true` unless the URL says `refresh=wait_for`), the seq counted
//! by the client (one process owns the log); reads are one sorted `_search`
//! (the last `n`), or `search_after` pages of 10,000 (a whole session).

use std::collections::HashMap;
use std::sync::Mutex;

use agent_session::SessionEvent;
use anyhow::{anyhow, bail, Context, Result};
use percent_encoding::percent_decode_str;
use serde_json::{json, Value};

/// Documents per page of a whole-session read (the engines' default
/// `index.max_result_window`).
const PAGE: usize = 10_000;

/// How the baseline signs in: as the store URL's user, or with its `api_key`.
enum Auth {
    /// `user:password@` in the URL.
    Basic(String, String),
    /// `?api_key=…`.
    ApiKey(String),
}

/// The raw baseline on the store's Elasticsearch or OpenSearch node.
pub(crate) struct RawEs {
    http: reqwest::Client,
    /// The node's base URL (`http://host:9200`), without a trailing slash.
    base: String,
    /// The credentials the URL gives, if any.
    auth: Option<Auth>,
    /// The baseline's own index, removed afterwards.
    index: String,
    /// The `refresh` parameter of each write, as the store sends it.
    refresh: &'static str,
    /// Each session's last seq, kept by the client.
    seqs: Mutex<HashMap<String, u64>>,
}

impl RawEs {
    /// Connects to the node an `es+http(s)://` store URL names and creates
    /// the baseline's index (`tag` makes its name unique).
    pub(crate) async fn open(url: &str, tag: &str) -> Result<Self> {
        let plain = url
            .strip_prefix("es+")
            .ok_or_else(|| anyhow!("not an es+http(s) URL: {url}"))?;
        let parsed = reqwest::Url::parse(plain).with_context(|| format!("bad store URL {url}"))?;
        let mut refresh = "true";
        let mut auth = None;
        for (k, v) in parsed.query_pairs() {
            match (k.as_ref(), v.as_ref()) {
                ("refresh", "wait_for") => refresh = "wait_for",
                ("api_key", key) => auth = Some(Auth::ApiKey(key.to_owned())),
                _ => {}
            }
        }
        if !parsed.username().is_empty() {
            let decoded = |s: &str| percent_decode_str(s).decode_utf8_lossy().into_owned();
            let password = parsed.password().map(decoded).unwrap_or_default();
            auth = Some(Auth::Basic(decoded(parsed.username()), password));
        }
        let host = parsed
            .host_str()
            .ok_or_else(|| anyhow!("no host in {url}"))?;
        let base = match parsed.port() {
            Some(port) => format!("{}://{host}:{port}", parsed.scheme()),
            None => format!("{}://{host}", parsed.scheme()),
        };
        let raw = Self {
            http: reqwest::Client::new(),
            base,
            auth,
            index: format!("agent-session-bench-raw-{tag}"),
            refresh,
            seqs: Mutex::default(),
        };
        let mapping = json!({
            "settings": {"number_of_shards": 1, "number_of_replicas": 0},
            "mappings": {
                "dynamic": false,
                "properties": {"session_id": {"type": "keyword"}, "seq": {"type": "long"}}
            }
        });
        raw.call(reqwest::Method::PUT, &raw.index, Some(&mapping))
            .await
            .context("cannot create the raw baseline's index")?;
        Ok(raw)
    }

    /// Sends one request; answers the reply's JSON, or the node's refusal.
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value> {
        let mut req = self.http.request(method, format!("{}/{path}", self.base));
        match &self.auth {
            Some(Auth::Basic(user, password)) => req = req.basic_auth(user, Some(password)),
            Some(Auth::ApiKey(key)) => {
                req = req.header(reqwest::header::AUTHORIZATION, format!("ApiKey {key}"));
            }
            None => {}
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        let reply = req.send().await?;
        let status = reply.status();
        let text = reply.text().await?;
        if !status.is_success() {
            bail!("{path}: {status}: {text}");
        }
        Ok(serde_json::from_str(&text)?)
    }

    /// Writes one event as the next document of its session.
    pub(crate) async fn append(&self, id: &str, e: &SessionEvent) -> Result<()> {
        let seq = {
            let mut seqs = self
                .seqs
                .lock()
                .map_err(|_| anyhow!("a raw baseline call panicked"))?;
            let seq = seqs.entry(id.to_owned()).or_insert(0);
            *seq = seq.saturating_add(1);
            *seq
        };
        let doc = json!({"session_id": id, "seq": seq, "event": e});
        let path = format!("{}/_create/{id}-{seq}?refresh={}", self.index, self.refresh);
        self.call(reqwest::Method::PUT, &path, Some(&doc)).await?;
        Ok(())
    }

    /// The bodies of the newest `n` events of a session (all when `None`),
    /// decoded; answers how many.
    pub(crate) async fn read(&self, id: &str, n: Option<usize>) -> Result<usize> {
        let path = format!("{}/_search", self.index);
        let query = json!({"term": {"session_id": id}});
        let mut decoded = 0usize;
        if let Some(n) = n {
            let body = json!({"query": query, "sort": [{"seq": "desc"}], "size": n});
            let reply = self.call(reqwest::Method::POST, &path, Some(&body)).await?;
            return decode(&reply, &mut decoded).map(|_| decoded);
        }
        let mut after: Option<Value> = None;
        loop {
            let mut body = json!({"query": query, "sort": [{"seq": "asc"}], "size": PAGE});
            if let Some(after) = &after {
                body["search_after"] = after.clone();
            }
            let reply = self.call(reqwest::Method::POST, &path, Some(&body)).await?;
            let (hits, last) = decode(&reply, &mut decoded)?;
            if hits < PAGE {
                return Ok(decoded);
            }
            after = last;
        }
    }

    /// Drops the baseline's index.
    pub(crate) async fn cleanup(self) -> Result<()> {
        self.call(reqwest::Method::DELETE, &self.index, None)
            .await?;
        Ok(())
    }
}

/// Decodes the events of one search reply, counting them in `decoded`;
/// answers the page's hit count and the last hit's sort values.
fn decode(reply: &Value, decoded: &mut usize) -> Result<(usize, Option<Value>)> {
    let hits = reply
        .pointer("/hits/hits")
        .and_then(Value::as_array)
        .ok_or_else(|| anyhow!("a search reply without hits: {reply}"))?;
    for hit in hits {
        let event = hit
            .pointer("/_source/event")
            .ok_or_else(|| anyhow!("a raw document without its event"))?;
        let _: SessionEvent = serde_json::from_value(event.clone())?;
        *decoded = decoded.saturating_add(1);
    }
    Ok((hits.len(), hits.last().and_then(|h| h.get("sort")).cloned()))
}
