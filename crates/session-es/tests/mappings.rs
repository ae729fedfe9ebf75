//! Mappings as a cluster enforces them: the fake node keeps the mapping an
//! index was created with (or took from a template), and a `dynamic:
//! strict` mapping refuses a document with a field it does not name, alone
//! or as one item of a `_bulk`. The backend's indices are all strict, and
//! every document it writes fits them.

#![allow(clippy::unwrap_used)]

#[path = "support/fake_es.rs"]
mod fake_es;

use serde_json::{json, Value};
use session_core::{Message, NewSession, SessionEvent, SessionRepository};
use session_es::EsRepository;

#[tokio::test]
async fn the_fake_node_refuses_fields_a_strict_mapping_does_not_name() {
    let node = fake_es::FakeServer::start().await;
    let fake = &node.fake;
    let mapping = json!({"mappings": {"dynamic": "strict", "properties": {
        "a": {"type": "keyword"},
        "blob": {"type": "object", "enabled": false}
    }}});
    assert_eq!(fake.call("PUT", "/idx", &[], &mapping).0, 200);
    let ok = fake.call(
        "PUT",
        "/idx/_doc/1",
        &[],
        &json!({"a": "x", "blob": "anything at all"}),
    );
    assert_eq!(ok.0, 201, "{}", ok.1);
    let (status, err) = fake.call("PUT", "/idx/_doc/2", &[], &json!({"a": "x", "b": 1}));
    assert_eq!(status, 400);
    assert_eq!(err["error"]["type"], "strict_dynamic_mapping_exception");
    let bulk = concat!(
        "{\"create\":{\"_index\":\"idx\",\"_id\":\"3\"}}\n{\"a\":\"y\"}\n",
        "{\"create\":{\"_index\":\"idx\",\"_id\":\"4\"}}\n{\"c\":true}\n"
    );
    let (_, out) = fake.call_raw("POST", "/_bulk", &[], bulk);
    assert_eq!(out["errors"], true);
    assert_eq!(out["items"][0]["create"]["status"], 201);
    assert_eq!(out["items"][1]["create"]["status"], 400);
    assert_eq!(
        out["items"][1]["create"]["error"]["type"],
        "strict_dynamic_mapping_exception"
    );
    assert_eq!(fake.doc_count("idx"), 2, "the refused item is not written");
    // An index created by its first write takes the mapping of a matching template.
    let template = json!({"index_patterns": ["tpl-*"], "template": mapping});
    fake.call("PUT", "/_index_template/t", &[], &template);
    let (status, _) = fake.call("PUT", "/tpl-1/_doc/1", &[], &json!({"zzz": 1}));
    assert_eq!(status, 400);
}

#[tokio::test]
async fn the_backend_creates_strict_indices_and_every_document_fits_them() {
    let node = fake_es::FakeServer::start().await;
    node.fake.record();
    let repo = EsRepository::builder(node.url())
        .prefix("m")
        .connect()
        .await
        .unwrap();
    let s = repo
        .create(
            NewSession::new("app", "alice", chrono::Utc::now())
                .unwrap()
                .with_key("chat-1")
                .unwrap(),
        )
        .await
        .unwrap();
    let rich = SessionEvent::builder(Message::user("with everything"))
        .branch("orch.researcher")
        .invocation_id("inv-1")
        .state("user:k", 1)
        .state("app:t", "x")
        .state("k", true)
        .build()
        .unwrap();
    repo.append(
        &s.id,
        vec![rich, SessionEvent::new(Message::assistant("plain"))],
    )
    .await
    .unwrap();
    let created: Vec<Value> = node
        .fake
        .recorded()
        .into_iter()
        .filter(|r| {
            r.method == "PUT" && !r.path.contains("/_doc/") && !r.path.contains("_index_template")
        })
        .map(|r| serde_json::from_str(&r.body).unwrap())
        .collect();
    assert!(!created.is_empty(), "the backend creates its indices");
    for body in &created {
        assert_eq!(body["mappings"]["dynamic"], "strict", "{body}");
    }
    // Every write went through the strict mappings: the events are indexed
    // (a search of the archive reads them), the head is stored.
    let found = repo
        .search(&session_core::SearchQuery::in_session(&s.id, "everything"))
        .await
        .unwrap();
    assert_eq!(found.items.len(), 1);
    assert_eq!(node.fake.doc_count("m-sessions"), 1);
}
