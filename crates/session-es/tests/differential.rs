//! The fake node against the real ones: the request shapes the backend
//! sends (index templates and indices, mappings, creates, compare-and-swap
//! writes and deletes, `_bulk` creates and deletes, `_mget`, `_search` with
//! its query subset, sort and `search_after`, `_count`, `_refresh`), sent in
//! the same order to the fake node (`support/fake_es.rs`), to Elasticsearch
//! at `ELASTICSEARCH_URL` and to OpenSearch at `OPENSEARCH_URL`, each under
//! its own random prefix. What the backend reads of each answer (status,
//! error type, `found`, `result`, hits in order, sort values, counts, item
//! statuses) must be the same everywhere, so the fake cannot drift from the
//! engines the fault tests stand in for. The one intended difference, the
//! `wildcard` field type (absent from Elasticsearch's test distribution),
//! is asserted as such.

#![allow(clippy::unwrap_used)]

#[path = "support/fake_es.rs"]
mod fake_es;
#[path = "support/real.rs"]
mod real;

use elasticsearch::http::headers::HeaderMap;
use elasticsearch::http::transport::Transport;
use elasticsearch::http::Method;
use serde_json::{json, Value};

/// One node under test and the prefix of its indices.
struct Target {
    name: &'static str,
    transport: Transport,
    prefix: String,
}

impl Target {
    fn new(name: &'static str, url: &str) -> Self {
        Self {
            name,
            transport: Transport::single_node(url).unwrap(),
            prefix: format!("d{}", uuid::Uuid::new_v4().simple()),
        }
    }

    /// Sends one request (`{p}` in the path stands for the prefix); the status and the parsed body.
    async fn send(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<String>,
    ) -> (u16, Value) {
        let path = path.replace("{p}", &self.prefix);
        let body = body.map(|b| b.replace("{p}", &self.prefix));
        let r = self
            .transport
            .send(method, &path, HeaderMap::new(), Some(query), body, None)
            .await
            .unwrap_or_else(|e| panic!("{}: {path}: {}", self.name, real::chain(&e)));
        let status = r.status_code().as_u16();
        let bytes = r.bytes().await.unwrap();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        (status, body)
    }
}

/// What the backend reads of an answer: its status and error type, and the
/// fields named (by JSON pointer) where present.
fn essence(status: u16, body: &Value, fields: &[&str]) -> Value {
    let mut out = serde_json::Map::new();
    out.insert("status".into(), json!(status));
    if let Some(t) = body.pointer("/error/type") {
        out.insert("error".into(), t.clone());
    }
    for f in fields {
        out.insert(
            (*f).to_owned(),
            body.pointer(f).cloned().unwrap_or(Value::Null),
        );
    }
    Value::Object(out)
}

/// The hits of a search answer: ids (prefix-free) and sort values, in order.
fn hits(body: &Value) -> Value {
    let hits = body
        .pointer("/hits/hits")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    Value::Array(
        hits.iter()
            .map(|h| json!({"id": h["_id"], "sort": h.get("sort").cloned().unwrap_or(Value::Null)}))
            .collect(),
    )
}

/// The hit ids of a search answer as a sorted set (for answers whose order is the engine's).
fn hit_set(body: &Value) -> Value {
    let mut ids: Vec<String> = body
        .pointer("/hits/hits")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|h| h["_id"].as_str().map(str::to_owned))
        .collect();
    ids.sort();
    json!(ids)
}

/// Each item of a `_bulk` answer: action, status, result, error type.
fn items(body: &Value) -> Value {
    let items = body
        .get("items")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    Value::Array(
        items
            .iter()
            .map(|i| {
                let (op, v) = i.as_object().unwrap().iter().next().unwrap();
                json!({"op": op, "status": v["status"], "result": v.get("result"),
                       "error": v.pointer("/error/type")})
            })
            .collect(),
    )
}

/// The events mapping the backend creates, with `text_lc` of `text_type`.
fn events_index(text_type: &str) -> Value {
    json!({
        "settings": {"number_of_shards": 1},
        "mappings": {
            "dynamic": "strict",
            "properties": {
                "session_id": {"type": "keyword"},
                "inc": {"type": "keyword"},
                "seq": {"type": "long"},
                "event_id": {"type": "keyword"},
                "app": {"type": "keyword"},
                "user_id": {"type": "keyword"},
                "ts_us": {"type": "long"},
                "role": {"type": "keyword"},
                "synthetic": {"type": "boolean"},
                "branch": {"type": "keyword"},
                "invocation_id": {"type": "keyword"},
                "tokens": {"type": "long"},
                "has_delta": {"type": "boolean"},
                "text_lc": {"type": text_type},
                "text": {"type": "text"},
                "delta": {"type": "object", "enabled": false},
                "body": {"type": "object", "enabled": false}
            }
        }
    })
}

fn event(session: &str, seq: u64, text: &str, role: &str, branch: Option<&str>) -> Value {
    let mut doc = json!({
        "session_id": session, "inc": "i1", "seq": seq, "event_id": format!("e{seq}"),
        "app": "app", "user_id": "alice", "ts_us": 1_700_000_000_000_000_i64 + i64::try_from(seq).unwrap(),
        "role": role, "synthetic": false, "tokens": 3, "has_delta": false,
        "text_lc": text.to_lowercase(), "text": text, "body": format!("{{\"seq\":{seq}}}")
    });
    if let Some(b) = branch {
        doc["branch"] = json!(b);
    }
    doc
}

/// The events index of a target (`{p}` stands for its prefix).
const EV: &str = "{p}-events";

/// The first event's document id, written alone and again in a `_bulk`.
const ID1: &str = "s1|i1|1";

/// The path of one event document.
fn doc(id: &str) -> String {
    format!("{EV}/_doc/{}", id.replace('|', "%7C"))
}

/// The filter of one session's events in seqs 1 to 10, as the backend shapes it.
fn session(sid: &str) -> Value {
    json!([{"term": {"session_id": sid}}, {"term": {"inc": "i1"}},
           {"range": {"seq": {"gt": 0, "lte": 10}}}])
}

/// What each step of the script compares of its answer, in order.
#[derive(Default)]
struct Steps(Vec<(String, Value)>);

impl Steps {
    fn step(&mut self, name: &str, v: Value) {
        self.0.push((name.to_owned(), v));
    }
}

/// The script: each step's request and what is compared of its answer.
async fn run(t: &Target) -> Vec<(String, Value)> {
    let mut out = Steps::default();
    create_index(t, &mut out).await;
    one_document(t, &mut out).await;
    bulk_create(t, &mut out).await;
    multi_get(t, &mut out).await;
    searches(t, &mut out).await;
    count_and_window(t, &mut out).await;
    deletes(t, &mut out).await;
    missing_indices(t, &mut out).await;
    out.0
}

/// The events index: its template, created (twice), its mapping read.
async fn create_index(t: &Target, out: &mut Steps) {
    let template = json!({"index_patterns": ["{p}-events"], "priority": 200,
        "template": events_index("keyword"), "_meta": {"created_by": "agent-session"}});
    let (s, b) = t
        .send(
            Method::Put,
            "_index_template/{p}-events",
            &[],
            Some(template.to_string()),
        )
        .await;
    out.step("put template", essence(s, &b, &["/acknowledged"]));
    let (s, b) = t
        .send(
            Method::Put,
            EV,
            &[],
            Some(events_index("keyword").to_string()),
        )
        .await;
    out.step("create index", essence(s, &b, &["/acknowledged"]));
    let (s, b) = t
        .send(
            Method::Put,
            EV,
            &[],
            Some(events_index("keyword").to_string()),
        )
        .await;
    out.step("create index again", essence(s, &b, &[]));
    let (s, b) = t
        .send(Method::Get, &format!("{EV}/_mapping"), &[], None)
        .await;
    let text_type = b
        .as_object()
        .and_then(|m| m.values().next())
        .and_then(|i| i.pointer("/mappings/properties/text_lc/type"))
        .cloned();
    out.step("read mapping", json!({"status": s, "text_lc": text_type}));
}

/// One document: create, create again, get, compare-and-swap.
async fn one_document(t: &Target, out: &mut Steps) {
    let d1 = event("s1", 1, "Book a table in Lyon", "user", None).to_string();
    let (s, b) = t
        .send(
            Method::Put,
            &doc(ID1),
            &[("op_type", "create"), ("refresh", "true")],
            Some(d1.clone()),
        )
        .await;
    out.step("create", essence(s, &b, &["/result", "/_version"]));
    let (s, b) = t
        .send(
            Method::Put,
            &doc(ID1),
            &[("op_type", "create"), ("refresh", "true")],
            Some(d1.clone()),
        )
        .await;
    out.step("create again", essence(s, &b, &[]));
    let (s, b) = t.send(Method::Get, &doc(ID1), &[], None).await;
    let (seq_no, term) = (b["_seq_no"].clone(), b["_primary_term"].clone());
    out.step(
        "get",
        json!({"status": s, "found": b["found"], "seq": b.pointer("/_source/seq"),
               "has_cas": seq_no.is_i64() && term.is_i64()}),
    );
    let (s, b) = t.send(Method::Get, &doc("s1|i1|404"), &[], None).await;
    out.step("get missing", essence(s, &b, &["/found"]));
    compare_and_swap(t, out, &d1, &seq_no.to_string(), &term.to_string()).await;
}

/// Conditional writes of the document `d1`, last read at `seq_no` and
/// `term`; then a document the strict mapping refuses.
async fn compare_and_swap(t: &Target, out: &mut Steps, d1: &str, seq_no: &str, term: &str) {
    let cas = [
        ("if_seq_no", seq_no),
        ("if_primary_term", term),
        ("refresh", "true"),
    ];
    let (s, b) = t
        .send(Method::Put, &doc(ID1), &cas, Some(d1.to_owned()))
        .await;
    out.step(
        "compare-and-swap",
        essence(s, &b, &["/result", "/_version"]),
    );
    let (s, b) = t
        .send(Method::Put, &doc(ID1), &cas, Some(d1.to_owned()))
        .await;
    out.step("stale compare-and-swap", essence(s, &b, &[]));
    let (s, b) = t
        .send(
            Method::Put,
            &doc("s1|i1|99"),
            &[
                ("if_seq_no", "0"),
                ("if_primary_term", "1"),
                ("refresh", "true"),
            ],
            Some(d1.to_owned()),
        )
        .await;
    out.step(
        "compare-and-swap of a missing document",
        essence(s, &b, &[]),
    );
    let (s, b) = t
        .send(
            Method::Put,
            &doc("s1|i1|98"),
            &[("refresh", "true")],
            Some(json!({"nope": 1}).to_string()),
        )
        .await;
    out.step("unmapped field", essence(s, &b, &[]));
}

/// `_bulk` creates: one already there, the rest new; a long text as pieces.
async fn bulk_create(t: &Target, out: &mut Steps) {
    let long: Vec<String> = vec!["x".repeat(10), "lyon and more".into()];
    let mut bulk = String::new();
    let mut add = |id: &str, d: Value| {
        bulk.push_str(&json!({"create": {"_index": "{p}-events", "_id": id}}).to_string());
        bulk.push('\n');
        bulk.push_str(&d.to_string());
        bulk.push('\n');
    };
    add(ID1, event("s1", 1, "Book a table in Lyon", "user", None));
    add(
        "s1|i1|2",
        event("s1", 2, "Which day? *?\\ 100%", "assistant", None),
    );
    add("s1|i1|3", event("s1", 3, "Friday", "user", Some("orch.r")));
    let mut pieces = event("s1", 4, "", "tool", Some("other"));
    pieces["text_lc"] = json!(long);
    add("s1|i1|4", pieces);
    add("s2|i1|1", event("s2", 1, "lyon again", "user", None));
    let (s, b) = t
        .send(Method::Post, "_bulk", &[("refresh", "true")], Some(bulk))
        .await;
    out.step(
        "bulk create",
        json!({"status": s, "errors": b["errors"], "items": items(&b)}),
    );
}

/// `_mget` of documents there and not.
async fn multi_get(t: &Target, out: &mut Steps) {
    let ids = json!({"ids": ["s1|i1|1", "s1|i1|404", "s1|i1|3"]}).to_string();
    let (s, b) = t
        .send(Method::Post, &format!("{EV}/_mget"), &[], Some(ids))
        .await;
    let found: Vec<Value> = b["docs"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|d| json!([d["_id"], d["found"]]))
        .collect();
    out.step("mget", json!({"status": s, "found": found}));
}

/// The searches the backend sends: name, request, and whether the hits'
/// order is compared (else the engine's own, compared as a set).
fn search_requests() -> Vec<(&'static str, Value, bool)> {
    vec![
        (
            "session in seq order",
            json!({"query": {"bool": {"filter": session("s1"), "must_not": []}},
            "sort": [{"seq": "asc"}], "size": 2, "_source": ["seq", "body"]}),
            true,
        ),
        (
            "next page",
            json!({"query": {"bool": {"filter": session("s1"), "must_not": []}},
            "sort": [{"seq": "asc"}], "size": 2, "search_after": [2], "_source": ["seq", "body"]}),
            true,
        ),
        (
            "newest first, rewound range out",
            json!({"query": {"bool": {"filter": session("s1"),
            "must_not": [{"range": {"seq": {"gte": 2, "lte": 3}}}]}},
            "sort": [{"seq": "desc"}], "size": 10, "_source": ["seq"]}),
            true,
        ),
        (
            "branch visibility",
            json!({"query": {"bool": {"filter": [{"term": {"session_id": "s1"}},
            {"bool": {"should": [{"bool": {"must_not": {"exists": {"field": "branch"}}}},
            {"terms": {"branch": ["orch", "orch.r"]}}], "minimum_should_match": 1}}], "must_not": []}},
            "sort": [{"seq": "asc"}], "size": 10, "_source": ["seq"]}),
            true,
        ),
        (
            "roles and time",
            json!({"query": {"bool": {"filter": [{"term": {"session_id": "s1"}},
            {"terms": {"role": ["user", "tool"]}}, {"range": {"ts_us": {"gte": 1_700_000_000_000_001_i64,
            "lt": 1_700_000_000_000_004_i64}}}, {"term": {"synthetic": false}}], "must_not": []}},
            "sort": [{"seq": "asc"}], "size": 10, "_source": ["seq"]}),
            true,
        ),
        (
            "literal text, escaped",
            json!({"query": {"bool": {"filter": [{"term": {"session_id": "s1"}},
            {"wildcard": {"text_lc": {"value": "*\\*\\?\\\\ 100%*"}}}], "must_not": []}},
            "sort": [{"seq": "asc"}], "size": 10, "_source": ["seq"]}),
            true,
        ),
        (
            "literal text across sessions, in pieces",
            json!({"query": {"bool": {"must": [
            {"wildcard": {"text_lc": {"value": "*lyon*"}}}, {"terms": {"inc": ["i1"]}}],
            "must_not": [{"wildcard": {"text_lc": {"value": "*again*"}}}]}},
            "sort": [{"ts_us": "asc"}, {"session_id": "asc"}, {"seq": "asc"}], "size": 10,
            "_source": ["seq", "body", "session_id", "inc"]}),
            true,
        ),
        (
            "ranked",
            json!({"query": {"bool": {"must": [{"terms": {"inc": ["i1"]}}],
            "must_not": [], "should": [{"match": {"text": {"query": "lyon"}}}]}},
            "sort": [{"_score": "desc"}, {"ts_us": "asc"}, {"session_id": "asc"}, {"seq": "asc"}],
            "size": 10, "_source": ["seq"]}),
            false,
        ),
        (
            "ids to delete",
            json!({"query": {"term": {"session_id": "s2"}}, "size": 1000,
            "sort": ["_doc"], "_source": false}),
            false,
        ),
        (
            "unindexed field",
            json!({"query": {"term": {"body": "x"}}, "size": 10}),
            true,
        ),
    ]
}

/// Searches as the backend shapes them.
async fn searches(t: &Target, out: &mut Steps) {
    for (name, req, ordered) in search_requests() {
        let (s, b) = t
            .send(
                Method::Post,
                &format!("{EV}/_search"),
                &[],
                Some(req.to_string()),
            )
            .await;
        let got = if s == 200 {
            if ordered {
                hits(&b)
            } else {
                hit_set(&b)
            }
        } else {
            Value::Null
        };
        out.step(
            name,
            json!({"status": s, "error": b.pointer("/error/type"), "hits": got}),
        );
    }
}

/// A `_count`, and a search past the result window.
async fn count_and_window(t: &Target, out: &mut Steps) {
    let count = json!({"query": {"bool": {"filter": session("s1"), "must_not": []}}}).to_string();
    let (s, b) = t
        .send(Method::Post, &format!("{EV}/_count"), &[], Some(count))
        .await;
    out.step("count", essence(s, &b, &["/count"]));
    let (s, b) = t
        .send(
            Method::Post,
            &format!("{EV}/_search"),
            &[],
            Some(json!({"size": 10_001}).to_string()),
        )
        .await;
    out.step("result window", essence(s, &b, &[]));
}

/// Deletes: by compare-and-swap, of what is not there, in bulk.
async fn deletes(t: &Target, out: &mut Steps) {
    let (s, b) = t
        .send(
            Method::Delete,
            &doc("s1|i1|3"),
            &[("if_seq_no", "100000"), ("if_primary_term", "1")],
            None,
        )
        .await;
    out.step("stale delete", essence(s, &b, &[]));
    let (s, b) = t
        .send(
            Method::Delete,
            &doc("s1|i1|404"),
            &[("refresh", "true")],
            None,
        )
        .await;
    out.step("delete missing", essence(s, &b, &["/result"]));
    let mut bulk = String::new();
    for id in ["s2|i1|1", "s2|i1|404"] {
        bulk.push_str(&json!({"delete": {"_index": "{p}-events", "_id": id}}).to_string());
        bulk.push('\n');
    }
    let (s, b) = t
        .send(Method::Post, "_bulk", &[("refresh", "true")], Some(bulk))
        .await;
    out.step(
        "bulk delete",
        json!({"status": s, "errors": b["errors"], "items": items(&b)}),
    );
    let (s, b) = t
        .send(Method::Post, &format!("{EV}/_refresh"), &[], None)
        .await;
    out.step("refresh", essence(s, &b, &[]));
    let again = json!({"query": {"term": {"session_id": "s2"}}, "size": 1000, "sort": ["_doc"], "_source": false});
    let (s, b) = t
        .send(
            Method::Post,
            &format!("{EV}/_search"),
            &[],
            Some(again.to_string()),
        )
        .await;
    out.step(
        "deleted ids are gone",
        json!({"status": s, "hits": hit_set(&b)}),
    );
}

/// Indices and templates that are not there.
async fn missing_indices(t: &Target, out: &mut Steps) {
    for (name, method, path) in [
        ("get from a missing index", Method::Get, "{p}-nope/_doc/x"),
        ("search a missing index", Method::Post, "{p}-nope/_search"),
        ("delete the index", Method::Delete, "{p}-events"),
        ("delete it again", Method::Delete, "{p}-events"),
        (
            "delete the template",
            Method::Delete,
            "_index_template/{p}-events",
        ),
        (
            "delete it again",
            Method::Delete,
            "_index_template/{p}-events",
        ),
    ] {
        let (s, b) = t.send(method, path, &[], None).await;
        out.step(name, essence(s, &b, &[]));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_fake_node_answers_as_both_engines_do() {
    let node = fake_es::FakeServer::start().await;
    let mut targets = vec![Target::new("fake", &node.url())];
    for engine in [real::Engine::Elasticsearch, real::Engine::OpenSearch] {
        // Connecting checks the node answers (skips or, under CI=true, fails otherwise).
        let Some(repo) = engine.connect(engine.builder().migrate(false)).await else {
            return;
        };
        drop(repo);
        targets.push(Target::new(engine.name(), &engine.url()));
    }
    let fake = run(&targets[0]).await;
    let mut differences = Vec::new();
    for t in &targets[1..] {
        let got = run(t).await;
        assert_eq!(got.len(), fake.len());
        for ((step, want), (_, have)) in fake.iter().zip(&got) {
            if want != have {
                differences.push(format!("{step}:\n  fake: {want}\n  {}: {have}", t.name));
            }
        }
    }
    assert!(
        differences.is_empty(),
        "the fake node differs from the engines:\n{}",
        differences.join("\n")
    );
}

/// The one difference the backend detects: the `wildcard` field type is
/// refused by Elasticsearch's test distribution (no x-pack `wildcard`
/// module) and taken by OpenSearch and the fake node. The backend then
/// creates a `keyword` text field there, which the conformance suite covers.
#[tokio::test(flavor = "multi_thread")]
async fn the_wildcard_field_type_is_where_the_backend_expects_it() {
    let node = fake_es::FakeServer::start().await;
    let mut checks = vec![(Target::new("fake", &node.url()), true)];
    for engine in [real::Engine::Elasticsearch, real::Engine::OpenSearch] {
        let Some(repo) = engine.connect(engine.builder().migrate(false)).await else {
            return;
        };
        drop(repo);
        checks.push((
            Target::new(engine.name(), &engine.url()),
            engine == real::Engine::OpenSearch,
        ));
    }
    for (t, has_wildcard) in &checks {
        let template = json!({"index_patterns": ["{p}-events"], "priority": 200,
            "template": events_index("wildcard")});
        let (s, b) = t
            .send(
                Method::Put,
                "_index_template/{p}-events",
                &[],
                Some(template.to_string()),
            )
            .await;
        if *has_wildcard {
            assert_eq!(s, 200, "{}: {b}", t.name);
            t.send(Method::Delete, "_index_template/{p}-events", &[], None)
                .await;
        } else {
            assert_eq!(s, 400, "{}: {b}", t.name);
            assert!(b.to_string().contains("[wildcard]"), "{}: {b}", t.name);
        }
    }
}
