//! An in-process stand-in for an Elasticsearch node, served by wiremock:
//! the document APIs `session-es` uses (get, index with `op_type=create` and
//! `if_seq_no`/`if_primary_term`, delete, `_bulk`, `_mget`, `_search` with
//! sort and `search_after`, `_count`, `_delete_by_query`, `_refresh`, index
//! and template creation) and the query DSL subset it sends (`bool`, `term`,
//! `terms`, `range`, `exists`, `wildcard`, `match`), answering with the
//! response shapes of Elasticsearch 8 (see `tests/fixtures`).
//!
//! Visibility is near-real-time, as on a cluster: `GET` and `_mget` see a
//! write at once, but `_search`, `_count` and `_delete_by_query` see only
//! what the last refresh made searchable — a write sent with
//! `refresh=true|wait_for` (or an empty `refresh`), or an `_refresh` of the
//! index.
//!
//! Queries are checked as a node checks them: a field the index's mapping
//! does not index matches nothing (`index: false` is refused), a `terms`
//! query holds at most 65,536 terms and a query at most 1,024 leaf clauses.
//!
//! It lets the whole conformance suite exercise the backend's protocol
//! (commit points, pending batches, rewinds, paging) on every CI run; the
//! same suite runs against a real cluster where `ELASTICSEARCH_URL` is set.
//! Faults can be injected per request with [`FakeEs::fail_next`].

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::map_unwrap_or
)]

#[path = "fake_es_query.rs"]
mod query;
#[path = "fake_es_write.rs"]
mod write;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{json, Value};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use query::{count, delete_by_query, search};
use write::{bulk, bulk_indices, delete_doc, doc_json, put_doc};

#[derive(Debug, Clone)]
struct Doc {
    source: Value,
    seq_no: i64,
    /// The primary term the document was written in.
    term: i64,
    version: i64,
}

/// Documents and their per-session id sets.
#[derive(Debug, Default, Clone)]
struct Layer {
    docs: BTreeMap<String, Doc>,
    /// Doc ids by their `session_id` field: queries filtering on it scan only those.
    by_session: HashMap<String, BTreeSet<String>>,
}

impl Layer {
    fn insert(&mut self, id: &str, doc: Doc) {
        self.remove(id);
        if let Some(sid) = doc.source.get("session_id").and_then(Value::as_str) {
            self.by_session
                .entry(sid.to_owned())
                .or_default()
                .insert(id.to_owned());
        }
        self.docs.insert(id.to_owned(), doc);
    }

    fn remove(&mut self, id: &str) -> Option<Doc> {
        let doc = self.docs.remove(id)?;
        if let Some(sid) = doc.source.get("session_id").and_then(Value::as_str) {
            if let Some(set) = self.by_session.get_mut(sid) {
                set.remove(id);
            }
        }
        Some(doc)
    }

    /// The documents a query can match: those of one session when it filters on `session_id`.
    fn candidates<'a>(&'a self, q: &Value) -> Vec<(&'a String, &'a Doc)> {
        let sid = q
            .pointer("/bool/filter")
            .and_then(Value::as_array)
            .and_then(|f| {
                f.iter()
                    .find_map(|c| c.pointer("/term/session_id").and_then(Value::as_str))
            });
        match sid {
            Some(sid) => self
                .by_session
                .get(sid)
                .map(|ids| {
                    ids.iter()
                        .filter_map(|id| self.docs.get_key_value(id))
                        .collect()
                })
                .unwrap_or_default(),
            None => self.docs.iter().collect(),
        }
    }
}

/// An index: its live documents (what `GET` sees) and the searchable copy
/// as of the last refresh (what `_search` sees).
#[derive(Debug, Default)]
struct Index {
    live: Layer,
    searchable: Layer,
    /// Ids written or deleted since the last refresh.
    dirty: BTreeSet<String>,
    /// The index's one shard assigns sequence numbers from 0, as a cluster does.
    next_seq_no: i64,
    /// The `mappings` the index was created with (or took from a template).
    mappings: Option<Value>,
}

impl Index {
    fn insert(&mut self, id: &str, doc: Doc) {
        self.live.insert(id, doc);
        self.dirty.insert(id.to_owned());
    }

    fn remove(&mut self, id: &str) -> Option<Doc> {
        self.dirty.insert(id.to_owned());
        self.live.remove(id)
    }

    /// Whether a document fits a strict mapping: the first top-level field
    /// the mapping does not name, if any (fields of an object with
    /// `enabled: false` are not parsed, so anything may go there).
    fn unmapped_field(&self, source: &Value) -> Option<String> {
        let m = self.mappings.as_ref()?;
        if m.get("dynamic").and_then(Value::as_str) != Some("strict") {
            return None;
        }
        let props = m.get("properties").and_then(Value::as_object)?;
        source
            .as_object()?
            .keys()
            .find(|k| !props.contains_key(*k))
            .cloned()
    }

    /// The sequence number of the shard's next operation.
    fn take_seq_no(&mut self) -> i64 {
        let n = self.next_seq_no;
        self.next_seq_no += 1;
        n
    }

    /// Makes every write so far searchable.
    fn refresh(&mut self) {
        for id in std::mem::take(&mut self.dirty) {
            match self.live.docs.get(&id) {
                Some(d) => self.searchable.insert(&id, d.clone()),
                None => {
                    self.searchable.remove(&id);
                }
            }
        }
    }

    /// The searchable documents a query can match.
    fn candidates<'a>(&'a self, q: &Value) -> Vec<(&'a String, &'a Doc)> {
        self.searchable.candidates(q)
    }
}

/// A scripted failure: the next `times` requests whose method and path match get `status` and `body`.
#[derive(Debug, Clone)]
struct Fault {
    method: String,
    path_contains: String,
    status: u16,
    body: Value,
    times: usize,
    /// The request is applied first, and only its answer is replaced (a
    /// timeout at a proxy after the node wrote).
    after_apply: bool,
    /// The answer comes this late (past the client's timeout, say).
    delay: Option<std::time::Duration>,
}

#[derive(Debug, Default)]
struct State {
    indices: HashMap<String, Index>,
    /// Index templates by name: their `index_patterns` and `template`.
    templates: HashMap<String, Value>,
    /// The current primary term: 1, raised by [`FakeEs::fail_over`].
    primary_term: i64,
    faults: Vec<Fault>,
    /// `_bulk` requests whose last item is rejected (429) without being written.
    reject_last_bulk_item: usize,
    /// The delay the answer being built must wait (set by a slow fault).
    delay: Option<std::time::Duration>,
    record: bool,
    requests: Vec<Recorded>,
}

/// One request the node saw while recording.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) query: HashMap<String, String>,
    pub(crate) body: String,
}

/// The fake node: clone it to inspect state or inject faults while the backend talks to it.
#[derive(Clone, Default)]
pub(crate) struct FakeEs {
    state: Arc<Mutex<State>>,
}

/// A running fake node; the server stops when this is dropped.
pub(crate) struct FakeServer {
    pub(crate) fake: FakeEs,
    pub(crate) server: MockServer,
}

impl FakeServer {
    /// Starts a fresh node on a random local port.
    pub(crate) async fn start() -> Self {
        let server = MockServer::builder()
            .disable_request_recording()
            .start()
            .await;
        let fake = FakeEs::default();
        Mock::given(wiremock::matchers::any())
            .respond_with(fake.clone())
            .mount(&server)
            .await;
        Self { fake, server }
    }

    /// The node's URL (`http://127.0.0.1:PORT`).
    pub(crate) fn url(&self) -> String {
        self.server.uri()
    }
}

fn error(status: u16, kind: &str, reason: &str) -> (u16, Value) {
    (
        status,
        json!({
            "error": {
                "root_cause": [{"type": kind, "reason": reason}],
                "type": kind,
                "reason": reason
            },
            "status": status
        }),
    )
}

fn shards() -> Value {
    json!({"total": 2, "successful": 1, "failed": 0})
}

impl FakeEs {
    /// Makes the next `times` requests with this method whose path contains `path_contains` fail.
    pub(crate) fn fail_next(
        &self,
        method: &str,
        path_contains: &str,
        status: u16,
        body: Value,
        times: usize,
    ) {
        self.push_fault(method, path_contains, status, body, times, false, None);
    }

    /// Applies the next `times` matching requests, then answers each with
    /// `status` and `body` instead of the result, after `delay` if given:
    /// the write happened, the client does not know it.
    pub(crate) fn fail_after_apply(
        &self,
        method: &str,
        path_contains: &str,
        status: u16,
        body: Value,
        times: usize,
        delay: Option<std::time::Duration>,
    ) {
        self.push_fault(method, path_contains, status, body, times, true, delay);
    }

    #[allow(clippy::too_many_arguments)]
    fn push_fault(
        &self,
        method: &str,
        path_contains: &str,
        status: u16,
        body: Value,
        times: usize,
        after_apply: bool,
        delay: Option<std::time::Duration>,
    ) {
        self.state.lock().faults.push(Fault {
            method: method.to_owned(),
            path_contains: path_contains.to_owned(),
            status,
            body,
            times,
            after_apply,
            delay,
        });
    }

    /// How many injected faults have not fired yet.
    pub(crate) fn faults_left(&self) -> usize {
        let st = self.state.lock();
        st.faults.iter().map(|f| f.times).sum::<usize>() + st.reject_last_bulk_item
    }

    /// Rejects the last item of the next `times` `_bulk` requests with 429
    /// (`es_rejected_execution_exception`), writing every other item.
    pub(crate) fn reject_last_bulk_item(&self, times: usize) {
        self.state.lock().reject_last_bulk_item = times;
    }

    /// Starts keeping every request (see [`FakeEs::requests`]).
    pub(crate) fn record(&self) {
        self.state.lock().record = true;
    }

    /// Every request seen since [`FakeEs::record`]: (method, path, body).
    pub(crate) fn requests(&self) -> Vec<(String, String, String)> {
        self.state
            .lock()
            .requests
            .iter()
            .map(|r| (r.method.clone(), r.path.clone(), r.body.clone()))
            .collect()
    }

    /// Every request seen since [`FakeEs::record`], with its query parameters.
    pub(crate) fn recorded(&self) -> Vec<Recorded> {
        self.state.lock().requests.clone()
    }

    /// Answers one request as the node would (for tests of the node itself).
    pub(crate) fn call(
        &self,
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        body: &Value,
    ) -> (u16, Value) {
        self.call_raw(method, path, query, &body.to_string())
    }

    /// Like [`FakeEs::call`] with a body sent as is (NDJSON for `_bulk`).
    pub(crate) fn call_raw(
        &self,
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        body: &str,
    ) -> (u16, Value) {
        let query: HashMap<String, String> = query
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.handle(method, path, &query, body)
    }

    /// Every document of every index, live and searchable copies, as text
    /// (what an erasure check scans).
    #[allow(dead_code)]
    pub(crate) fn dump(&self) -> String {
        let state = self.state.lock();
        let mut out = String::new();
        for (name, index) in &state.indices {
            for layer in [&index.live, &index.searchable] {
                for (id, doc) in &layer.docs {
                    out.push_str(&format!("{name}/{id}: {}\n", doc.source));
                }
            }
        }
        out
    }

    /// How many documents an index holds.
    pub(crate) fn doc_count(&self, index: &str) -> usize {
        self.state
            .lock()
            .indices
            .get(index)
            .map_or(0, |i| i.live.docs.len())
    }

    /// A document's source, if present.
    pub(crate) fn source(&self, index: &str, id: &str) -> Option<Value> {
        self.state
            .lock()
            .indices
            .get(index)
            .and_then(|i| i.live.docs.get(id))
            .map(|d| d.source.clone())
    }

    /// A new primary takes over (as after a node failure): the primary term
    /// goes up; documents keep the term they were written in.
    pub(crate) fn fail_over(&self) {
        let mut st = self.state.lock();
        st.primary_term = st.term() + 1;
    }

    /// Overwrites a document's source (to plant corrupt data).
    pub(crate) fn put_source(&self, index: &str, id: &str, source: Value) {
        self.put_sources(index, [(id.to_owned(), source)]);
    }

    /// Writes many documents at once behind the backend's back, then refreshes.
    pub(crate) fn put_sources(&self, index: &str, docs: impl IntoIterator<Item = (String, Value)>) {
        let mut st = self.state.lock();
        let term = st.term();
        let i = st.indices.entry(index.to_owned()).or_default();
        for (id, source) in docs {
            let seq_no = i.take_seq_no();
            let doc = Doc {
                source,
                seq_no,
                term,
                version: 1,
            };
            i.insert(&id, doc);
        }
        i.refresh();
    }

    /// Deletes a document behind the backend's back.
    pub(crate) fn remove(&self, index: &str, id: &str) {
        if let Some(i) = self.state.lock().indices.get_mut(index) {
            i.remove(id);
            i.refresh();
        }
    }

    fn handle(
        &self,
        method: &str,
        path: &str,
        query: &HashMap<String, String>,
        body: &str,
    ) -> (u16, Value) {
        let mut st = self.state.lock();
        if st.record {
            st.requests.push(Recorded {
                method: method.to_owned(),
                path: path.to_owned(),
                query: query.clone(),
                body: body.to_owned(),
            });
        }
        st.delay = None;
        let replaced = match st.take_fault(method, path) {
            Some(Err(answer)) => return answer,
            Some(Ok(replaced)) => Some(replaced),
            None => None,
        };
        let segs: Vec<String> = path
            .trim_start_matches('/')
            .split('/')
            .map(percent_decode)
            .collect();
        let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
        let out = match route(&mut st, method, path, &segs, query, body) {
            Ok(answer) => answer,
            Err(refusal) => return refusal,
        };
        st.refresh_written(query, &segs, body);
        match replaced {
            Some((status, body, delay)) => {
                st.delay = delay;
                (status, body)
            }
            None => out,
        }
    }
}

/// An answer of the node: its status and body.
type Answer = (u16, Value);

/// Answers a request by its method and path, one function per endpoint.
/// `Err`: refused before anything was applied, answered as is (no refresh,
/// no scripted replacement).
fn route(
    st: &mut State,
    method: &str,
    path: &str,
    segs: &[&str],
    query: &HashMap<String, String>,
    body: &str,
) -> Result<Answer, Answer> {
    Ok(match (method, segs) {
        ("PUT", ["_index_template", name]) => put_template(st, name, body),
        ("DELETE", ["_index_template", name]) => delete_template(st, name),
        ("POST", ["_bulk"]) => bulk(st, body),
        ("PUT", [index]) => create_index(st, index, body),
        ("DELETE", [index]) => delete_index(st, index),
        ("GET", [index, "_mapping"]) => mapping(st, index),
        ("GET", [index, "_doc", id]) => get_doc(st, index, id),
        ("PUT" | "POST", [index, kind @ ("_doc" | "_create"), id]) => {
            put_doc(st, index, kind, id, query, body)?
        }
        ("DELETE", [index, "_doc", id]) => delete_doc(st, index, id, query)?,
        ("POST", [index, "_refresh"]) => refresh_index(st, index),
        ("POST" | "GET", [index, "_search"]) => {
            let req: Value = serde_json::from_str(body).unwrap_or(json!({}));
            search(st, index, &req)
        }
        ("POST" | "GET", [index, "_count"]) => count(st, index, body)?,
        ("POST" | "GET", [index, "_mget"]) => mget(st, index, body)?,
        ("POST", [index, "_delete_by_query"]) => delete_by_query(st, index, body)?,
        _ => error(
            400,
            "illegal_argument_exception",
            &format!("no handler for {method} {path}"),
        ),
    })
}

/// `PUT _index_template/{name}`.
fn put_template(st: &mut State, name: &str, body: &str) -> Answer {
    let template: Value = serde_json::from_str(body).unwrap_or(json!({}));
    st.templates.insert(name.to_owned(), template);
    (200, json!({"acknowledged": true}))
}

/// `DELETE _index_template/{name}`.
fn delete_template(st: &mut State, name: &str) -> Answer {
    if st.templates.remove(name).is_some() {
        (200, json!({"acknowledged": true}))
    } else {
        error(
            404,
            "index_template_missing_exception",
            &format!("index_template [{name}] missing"),
        )
    }
}

/// `PUT {index}`: created with the given mappings, else a matching template's.
fn create_index(st: &mut State, index: &str, body: &str) -> Answer {
    if st.indices.contains_key(index) {
        return error(
            400,
            "resource_already_exists_exception",
            &format!("index [{index}/abc] already exists"),
        );
    }
    let given: Value = serde_json::from_str(body).unwrap_or(json!({}));
    let mappings = given
        .get("mappings")
        .cloned()
        .or_else(|| template_mappings(st, index));
    st.indices.insert(
        index.to_owned(),
        Index {
            mappings,
            ..Index::default()
        },
    );
    (
        200,
        json!({"acknowledged": true, "shards_acknowledged": true, "index": index}),
    )
}

/// `DELETE {index}`.
fn delete_index(st: &mut State, index: &str) -> Answer {
    if st.indices.remove(index).is_some() {
        (200, json!({"acknowledged": true}))
    } else {
        index_missing(index)
    }
}

/// `GET {index}/_mapping`.
fn mapping(st: &State, index: &str) -> Answer {
    match st.indices.get(index) {
        None => index_missing(index),
        Some(i) => (
            200,
            json!({ index: {"mappings": i.mappings.clone().unwrap_or(json!({}))} }),
        ),
    }
}

/// `POST {index}/_refresh`.
fn refresh_index(st: &mut State, index: &str) -> Answer {
    match st.indices.get_mut(index) {
        Some(i) => {
            i.refresh();
            (200, json!({"_shards": shards()}))
        }
        None => index_missing(index),
    }
}

/// `GET {index}/_doc/{id}`: the live document (realtime).
fn get_doc(st: &State, index: &str, id: &str) -> Answer {
    match st.indices.get(index) {
        None => index_missing(index),
        Some(i) => match i.live.docs.get(id) {
            Some(d) => (200, doc_json(index, id, d)),
            None => (404, json!({"_index": index, "_id": id, "found": false})),
        },
    }
}

/// `POST {index}/_mget`: the live documents (realtime), in the order asked.
fn mget(st: &State, index: &str, body: &str) -> Result<Answer, Answer> {
    let req: Value = serde_json::from_str(body).unwrap_or(json!({}));
    let Some(i) = st.indices.get(index) else {
        return Err(index_missing(index));
    };
    let docs: Vec<Value> = req["ids"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|id| {
            let id = id.as_str().unwrap_or_default();
            match i.live.docs.get(id) {
                Some(d) => doc_json(index, id, d),
                None => json!({"_index": index, "_id": id, "found": false}),
            }
        })
        .collect();
    Ok((200, json!({ "docs": docs })))
}

impl Respond for FakeEs {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let query: HashMap<String, String> = request.url.query_pairs().into_owned().collect();
        let body = String::from_utf8_lossy(&request.body).into_owned();
        let (status, json) =
            self.handle(request.method.as_str(), request.url.path(), &query, &body);
        let mut answer = if json.is_null() {
            ResponseTemplate::new(status)
        } else {
            ResponseTemplate::new(status).set_body_json(json)
        };
        if let Some(delay) = self.state.lock().delay.take() {
            answer = answer.set_delay(delay);
        }
        answer
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

fn index_missing(index: &str) -> (u16, Value) {
    let (s, mut v) = error(
        404,
        "index_not_found_exception",
        &format!("no such index [{index}]"),
    );
    v["error"]["index"] = json!(index);
    (s, v)
}

/// The mappings of the template whose pattern matches `index` (`*` as a wildcard).
fn template_mappings(st: &State, index: &str) -> Option<Value> {
    st.templates.values().find_map(|t| {
        let matches = t["index_patterns"].as_array()?.iter().any(|p| {
            let p = p.as_str().unwrap_or_default();
            match p.strip_suffix('*') {
                Some(prefix) => index.starts_with(prefix),
                None => p == index,
            }
        });
        matches.then(|| t["template"]["mappings"].clone())
    })
}

impl State {
    /// The current primary term (1 until a fail-over).
    fn term(&self) -> i64 {
        self.primary_term.max(1)
    }

    /// The scripted fault a request meets, if any, spent once: `Err` the
    /// answer to give instead of applying the request, `Ok` the answer (and
    /// delay) to give after applying it.
    #[allow(clippy::type_complexity)]
    fn take_fault(
        &mut self,
        method: &str,
        path: &str,
    ) -> Option<Result<(u16, Value, Option<std::time::Duration>), Answer>> {
        let f = self
            .faults
            .iter_mut()
            .find(|f| f.times > 0 && f.method == method && path.contains(&f.path_contains))?;
        f.times -= 1;
        if !f.after_apply {
            return Some(Err((f.status, f.body.clone())));
        }
        Some(Ok((f.status, f.body.clone(), f.delay)))
    }

    /// A write asking for a refresh makes the indices it wrote searchable.
    fn refresh_written(&mut self, query: &HashMap<String, String>, segs: &[&str], body: &str) {
        if !matches!(
            query.get("refresh").map(String::as_str),
            Some("true" | "wait_for" | "")
        ) {
            return;
        }
        let written: Vec<String> = if segs.first() == Some(&"_bulk") {
            bulk_indices(body)
        } else {
            segs.first()
                .map(|s| vec![(*s).to_owned()])
                .unwrap_or_default()
        };
        for name in written {
            if let Some(i) = self.indices.get_mut(&name) {
                i.refresh();
            }
        }
    }
}
