//! Near-real-time visibility: the fake node, like a cluster, lets `GET` see
//! a write at once but `_search`, `_count` and `_delete_by_query` only after
//! a refresh; and the backend asks for a refresh with every write whose
//! result a later search must see.

#![allow(clippy::unwrap_used)]

#[path = "support/fake_es.rs"]
mod fake_es;

use serde_json::{json, Value};
use session_core::{
    EventFilter, Message, NewSession, RewindTo, SearchQuery, SessionEvent, SessionRepository,
    SessionRepositoryExt,
};
use session_es::EsRepository;

fn hits(fake: &fake_es::FakeEs, index: &str) -> u64 {
    let (status, body) = fake.call(
        "POST",
        &format!("/{index}/_search"),
        &[],
        &json!({"query": {"match_all": {}}}),
    );
    assert_eq!(status, 200, "{body}");
    body["hits"]["total"]["value"].as_u64().unwrap()
}

fn count(fake: &fake_es::FakeEs, index: &str) -> u64 {
    let (_, body) = fake.call("POST", &format!("/{index}/_count"), &[], &json!({}));
    body["count"].as_u64().unwrap()
}

/// A write without a refresh is read back by `GET` at once but found by
/// `_search`, `_count` and `_delete_by_query` only after `_refresh` or a
/// later write with `refresh=true`; a delete disappears from search the same way.
#[tokio::test]
async fn the_fake_node_searches_only_what_a_refresh_made_visible() {
    let node = fake_es::FakeServer::start().await;
    let fake = &node.fake;
    assert_eq!(fake.call("PUT", "/idx", &[], &json!({})).0, 200);
    let (status, _) = fake.call(
        "PUT",
        "/idx/_doc/a",
        &[],
        &json!({"session_id": "s", "n": 1}),
    );
    assert_eq!(status, 201);
    let (status, got) = fake.call("GET", "/idx/_doc/a", &[], &Value::Null);
    assert_eq!((status, got["found"].clone()), (200, json!(true)));
    assert_eq!((hits(fake, "idx"), count(fake, "idx")), (0, 0));
    let (_, gone) = fake.call(
        "POST",
        "/idx/_delete_by_query",
        &[],
        &json!({"query": {"match_all": {}}}),
    );
    assert_eq!(
        gone["deleted"], 0,
        "delete_by_query sees only searchable documents"
    );

    assert_eq!(fake.call("POST", "/idx/_refresh", &[], &Value::Null).0, 200);
    assert_eq!((hits(fake, "idx"), count(fake, "idx")), (1, 1));

    fake.call(
        "PUT",
        "/idx/_doc/b",
        &[("refresh", "true")],
        &json!({"n": 2}),
    );
    assert_eq!(hits(fake, "idx"), 2);
    fake.call(
        "PUT",
        "/idx/_doc/c",
        &[("refresh", "wait_for")],
        &json!({"n": 3}),
    );
    assert_eq!(hits(fake, "idx"), 3);

    fake.call("DELETE", "/idx/_doc/a", &[], &Value::Null);
    assert_eq!(fake.call("GET", "/idx/_doc/a", &[], &Value::Null).0, 404);
    assert_eq!(
        hits(fake, "idx"),
        3,
        "a delete is searchable only after a refresh"
    );
    let bulk = "{\"create\":{\"_index\":\"idx\",\"_id\":\"d\"}}\n{\"n\":4}\n";
    let (status, out) = node_bulk(fake, bulk);
    assert_eq!(status, 200);
    assert_eq!(out["errors"], false);
    assert_eq!(hits(fake, "idx"), 3, "c, b and d; a is gone");
}

/// Sends a `_bulk` body with `refresh=true`.
fn node_bulk(fake: &fake_es::FakeEs, body: &str) -> (u16, Value) {
    // `call` serializes a JSON value; a bulk body is NDJSON, so send it as is.
    fake.call_raw("POST", "/_bulk", &[("refresh", "true")], body)
}

/// Every write the backend sends during a session's life (create, appends
/// over several pending batches, a context replace, a rewind, an update, a
/// delete) asks for a refresh, so what it wrote is searchable when the call
/// returns; and the conformance suite passes on the near-real-time node
/// (`fake_node.rs`).
#[tokio::test]
async fn every_write_of_the_backend_asks_for_a_refresh() {
    let node = fake_es::FakeServer::start().await;
    let repo = EsRepository::builder(node.url())
        .prefix("v")
        .connect()
        .await
        .unwrap();
    node.fake.record();
    let s = repo
        .create(NewSession::new("app", "alice", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    for i in 0..40 {
        repo.append(
            &s.id,
            vec![SessionEvent::new(Message::user(format!("walrus {i}")))],
        )
        .await
        .unwrap();
    }
    let hits = repo
        .search(&SearchQuery::in_session(&s.id, "walrus"))
        .await
        .unwrap();
    assert_eq!(
        hits.total.unwrap().count,
        40,
        "every append is found at once"
    );
    let context = repo
        .all_events(&s.id, session_core::EventView::Context)
        .await
        .unwrap();
    let v = repo.event_version(&s.id).await.unwrap();
    assert!(repo
        .replace_context(&s.id, context[30..].to_vec(), v)
        .await
        .unwrap());
    repo.rewind_to(&s.id, &RewindTo::Seq(35)).await.unwrap();
    let last = repo.events(&s.id, &EventFilter::last(3)).await.unwrap();
    assert_eq!(last.items.len(), 3);
    assert!(repo.delete(&s.id).await.unwrap());

    let writes: Vec<_> = node
        .fake
        .recorded()
        .into_iter()
        .filter(|r| {
            let doc_write = ["/_doc/", "/_create/", "/_update/"]
                .iter()
                .any(|p| r.path.contains(p))
                && r.method != "GET";
            doc_write || r.path.ends_with("/_bulk") || r.path.ends_with("/_delete_by_query")
        })
        .collect();
    assert!(writes.len() > 40, "{} writes recorded", writes.len());
    let silent: Vec<String> = writes
        .iter()
        .filter(|r| {
            !matches!(
                r.query.get("refresh").map(String::as_str),
                Some("true" | "wait_for" | "")
            )
        })
        .map(|r| format!("{} {} {:?}", r.method, r.path, r.query))
        .collect();
    assert!(
        silent.is_empty(),
        "writes without a refresh:\n{}",
        silent.join("\n")
    );
}
