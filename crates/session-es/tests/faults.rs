//! Faults on the wire: the answers Elasticsearch gives under conflict,
//! overload, outage and oversize requests (bodies from `tests/fixtures`),
//! injected into the fake node one request at a time. Each gives a typed
//! error, nothing is half-written, and a retry converges.

#![allow(clippy::unwrap_used)]

#[path = "support/fake_es.rs"]
mod fake_es;

use serde_json::Value;
use session_core::{
    ErrorKind, EventFilter, Message, NewSession, SearchQuery, SessionEvent, SessionId,
    SessionRepository, SessionRepositoryExt,
};
use session_es::EsRepository;

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

async fn setup() -> (fake_es::FakeServer, EsRepository, SessionId) {
    setup_with(|b| b).await
}

/// A node, a repository built with `tweak`, and a session holding one event.
async fn setup_with(
    tweak: impl FnOnce(session_es::EsRepositoryBuilder) -> session_es::EsRepositoryBuilder,
) -> (fake_es::FakeServer, EsRepository, SessionId) {
    let node = fake_es::FakeServer::start().await;
    let repo = tweak(EsRepository::builder(node.url()).prefix("f"))
        .connect()
        .await
        .unwrap();
    let s = repo
        .create(NewSession::new("app", "alice", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    repo.append(&s.id, vec![SessionEvent::new(Message::user("first"))])
        .await
        .unwrap();
    (node, repo, s.id)
}

fn event(id: &str, text: &str) -> SessionEvent {
    SessionEvent::builder(Message::user(text))
        .id(id)
        .build()
        .unwrap()
}

async fn archive_texts(repo: &EsRepository, id: &SessionId) -> Vec<String> {
    repo.all_events(id, session_core::EventView::Archive)
        .await
        .unwrap()
        .iter()
        .map(|e| e.message.text().to_owned())
        .collect()
}

#[tokio::test]
async fn overload_on_the_commit_is_retryable_and_leaves_nothing() {
    let (node, repo, id) = setup().await;
    for (status, body) in [
        (429, fixture("too_many_requests.json")),
        (503, fixture("unavailable_cluster_block.json")),
    ] {
        node.fake
            .fail_next("PUT", "f-sessions/_doc", status, body, 1);
        let err = repo
            .append(&id, vec![event("e2", "second")])
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{status}: {err}");
        assert!(err.is_retryable());
        assert_eq!(
            archive_texts(&repo, &id).await,
            ["first"],
            "{status}: half-written"
        );
        assert_eq!(repo.event_version(&id).await.unwrap(), 1);
    }
    // The same call again converges: written once.
    let out = repo.append(&id, vec![event("e2", "second")]).await.unwrap();
    assert_eq!((out.written, out.version), (1, 2));
    let again = repo.append(&id, vec![event("e2", "second")]).await.unwrap();
    assert_eq!((again.written, again.seqs), (0, out.seqs));
    assert_eq!(archive_texts(&repo, &id).await, ["first", "second"]);
}

#[tokio::test]
async fn a_rejected_bulk_item_is_never_ignored_and_the_next_write_repairs() {
    let (node, repo, id) = setup().await;
    // The commit succeeds; indexing the batch afterwards is rejected item by item.
    node.fake
        .fail_next("POST", "_bulk", 200, fixture("bulk_rejected_item.json"), 1);
    let out = repo.append(&id, vec![event("e2", "second")]).await.unwrap();
    assert_eq!(
        out.written, 1,
        "the commit point is the head: the append happened"
    );
    // Readers see the committed batch from the head even though it is not indexed.
    assert_eq!(archive_texts(&repo, &id).await, ["first", "second"]);
    let hits = repo
        .search(&SearchQuery::in_session(&id, "SECOND"))
        .await
        .unwrap();
    assert_eq!(hits.items.len(), 1);
    // The next writer must index it first; a rejection there fails the write, typed.
    node.fake
        .fail_next("POST", "_bulk", 200, fixture("bulk_rejected_item.json"), 1);
    let err = repo
        .append(&id, vec![event("e3", "third")])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert_eq!(archive_texts(&repo, &id).await, ["first", "second"]);
    repo.append(&id, vec![event("e3", "third")]).await.unwrap();
    assert_eq!(
        archive_texts(&repo, &id).await,
        ["first", "second", "third"]
    );
    assert_eq!(
        node.fake.doc_count("f-events"),
        3,
        "every committed event is indexed once"
    );
}

#[tokio::test]
async fn an_oversize_request_is_invalid_input_and_stores_nothing() {
    let (node, repo, id) = setup().await;
    node.fake
        .fail_next("PUT", "f-sessions/_doc", 413, Value::Null, 1);
    let err = repo
        .append(&id, vec![event("big", "huge")])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("too large"), "{err}");
    assert_eq!(archive_texts(&repo, &id).await, ["first"]);
}

#[tokio::test]
async fn a_lost_compare_and_swap_is_retried_not_reported() {
    let (node, repo, id) = setup().await;
    // Another process wrote between our read and our write: the CAS answers 409.
    node.fake.fail_next(
        "PUT",
        "f-sessions/_doc",
        409,
        fixture("version_conflict.json"),
        2,
    );
    let out = repo.append(&id, vec![event("e2", "second")]).await.unwrap();
    assert_eq!(out.written, 1);
    assert_eq!(archive_texts(&repo, &id).await, ["first", "second"]);
    // A replace whose expected version is stale says so (false), it is not an error.
    assert!(!repo.replace_context(&id, Vec::new(), 0).await.unwrap());
}

#[tokio::test]
async fn overload_on_reads_is_retryable() {
    let (node, repo, id) = setup().await;
    node.fake.fail_next(
        "POST",
        "f-events/_search",
        503,
        fixture("unavailable.json"),
        1,
    );
    let err = repo.events(&id, &EventFilter::archive()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert_eq!(archive_texts(&repo, &id).await, ["first"]);
}

#[tokio::test]
async fn corrupt_stored_documents_are_reported_not_panicked_on() {
    let (node, repo, id) = setup().await;
    let mut head = node.fake.source("f-sessions", &id).unwrap();
    head["head"] = Value::String("{not json".into());
    node.fake.put_source("f-sessions", &id, head);
    let err = repo.get(&id).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization);
    assert!(err.to_string().contains(id.as_str()), "{err}");

    let (node, repo, id) = setup().await;
    repo.append(&id, vec![event("e2", "second")]).await.unwrap(); // seq 1 leaves the head's pending batch
    let doc_id = format!(
        "{id}|{}|1",
        node.fake.source("f-sessions", &id).unwrap()["inc"]
            .as_str()
            .unwrap()
    );
    let mut doc = node.fake.source("f-events", &doc_id).unwrap();
    doc["body"] = Value::String("[]".into());
    node.fake.put_source("f-events", &doc_id, doc);
    let err = repo.events(&id, &EventFilter::archive()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization);
    assert!(err.to_string().contains("seq 1"), "{err}");
}

#[tokio::test]
async fn a_missing_index_names_itself() {
    let (node, repo, id) = setup().await;
    node.fake.fail_next(
        "GET",
        "f-sessions/_doc",
        404,
        fixture("index_not_found.json"),
        1,
    );
    let err = repo.get(&id).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Backend);
    assert!(
        err.report()
            .to_string()
            .contains("index_not_found_exception"),
        "{}",
        err.report()
    );
}

#[tokio::test]
async fn no_server_is_unavailable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let err = EsRepository::builder(format!("http://127.0.0.1:{port}"))
        .connect()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
}

#[tokio::test]
async fn requests_have_the_documented_shape() {
    let (node, repo, id) = setup().await;
    repo.append(&id, vec![event("e2", "second")]).await.unwrap();
    node.fake.record();
    repo.append(&id, vec![event("e3", "third")]).await.unwrap();
    let reqs = node.fake.requests();
    let put = reqs
        .iter()
        .find(|(m, p, _)| m == "PUT" && p.contains("f-sessions/_doc"))
        .unwrap();
    let head: Value = serde_json::from_str(&put.2).unwrap();
    assert_eq!(head["sid"], Value::String(id.to_string()));
    let bulk = reqs
        .iter()
        .find(|(m, p, _)| m == "POST" && p.ends_with("_bulk"))
        .unwrap();
    let lines: Vec<Value> = bulk
        .2
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "one action and one document");
    assert!(lines[0]["create"]["_id"].as_str().unwrap().ends_with("|3"));
    assert_eq!(lines[1]["event_id"], "e3");
    let search = reqs
        .iter()
        .find(|(m, p, _)| m == "POST" && p.ends_with("f-events/_search"))
        .unwrap();
    let body: Value = serde_json::from_str(&search.2).unwrap();
    assert!(body.get("from").is_none(), "paging is search_after only");
    assert_eq!(
        body["query"]["bool"]["filter"][3]["terms"]["event_id"][0],
        "e3"
    );
}

/// What a proxy answers when the node took too long.
fn gateway_timeout() -> Value {
    serde_json::json!({"error": "gateway timeout"})
}

/// Appends `e2` with the injected fault in the way (the append may fail,
/// retryably), checks the fault fired, then that retrying converges.
async fn append_through_the_fault(node: &fake_es::FakeServer, repo: &EsRepository, id: &SessionId) {
    if let Err(e) = repo.append(id, vec![event("e2", "second")]).await {
        assert!(e.is_retryable(), "{e}");
    }
    assert_eq!(node.fake.faults_left(), 0, "the fault fired");
    converges_after(node, repo, id).await;
}

/// After a fault that hid a write's outcome from the backend, the same
/// append again and the next one converge: every event once in the archive
/// and in the index, the head's counters and version consistent.
async fn converges_after(node: &fake_es::FakeServer, repo: &EsRepository, id: &SessionId) {
    let out = repo.append(id, vec![event("e2", "second")]).await.unwrap();
    assert_eq!(out.seqs, vec![2], "a retried append keeps its seq");
    let next = repo.append(id, vec![event("e3", "third")]).await.unwrap();
    assert_eq!(next.seqs, vec![3]);
    assert_eq!(archive_texts(repo, id).await, ["first", "second", "third"]);
    let s = repo.get(id).await.unwrap();
    assert_eq!(s.event_count, 3);
    assert_eq!(repo.event_version(id).await.unwrap(), s.version);
    let hits = repo
        .search(&SearchQuery::in_session(id, "second"))
        .await
        .unwrap();
    assert_eq!(hits.items.len(), 1, "found once");
    // One more write indexes anything still pending; then each event is indexed once.
    repo.append(id, vec![event("e4", "fourth")]).await.unwrap();
    assert_eq!(
        node.fake.doc_count("f-events"),
        4,
        "every event indexed once"
    );
}

/// The commit (the head's compare-and-swap write) is applied, but the
/// answer is lost: a proxy answers 504. The append reports a retryable
/// error or its result; retrying converges.
#[tokio::test]
async fn a_commit_applied_then_answered_504_converges() {
    let (node, repo, id) = setup().await;
    node.fake
        .fail_after_apply("PUT", "f-sessions/_doc", 504, gateway_timeout(), 1, None);
    append_through_the_fault(&node, &repo, &id).await;
}

/// The same, with the answer arriving only after the client's timeout.
#[tokio::test]
async fn a_commit_applied_then_timed_out_converges() {
    let (node, repo, id) = setup_with(|b| b.timeout(std::time::Duration::from_millis(300))).await;
    node.fake.fail_after_apply(
        "PUT",
        "f-sessions/_doc",
        200,
        Value::Null,
        1,
        Some(std::time::Duration::from_millis(1500)),
    );
    append_through_the_fault(&node, &repo, &id).await;
}

/// Indexing a committed batch is applied, but answered 504.
#[tokio::test]
async fn an_index_batch_applied_then_answered_504_converges() {
    let (node, repo, id) = setup().await;
    node.fake
        .fail_after_apply("POST", "_bulk", 504, gateway_timeout(), 1, None);
    append_through_the_fault(&node, &repo, &id).await;
}

/// A `_bulk` whose last item is rejected with 429 while the others are written.
#[tokio::test]
async fn a_bulk_with_its_last_item_rejected_converges() {
    let (node, repo, id) = setup().await;
    node.fake.reject_last_bulk_item(1);
    append_through_the_fault(&node, &repo, &id).await;
}

/// Compare-and-swap as a cluster does it: the shard numbers operations from
/// 0 (the first head is written at `_seq_no` 0 and still swapped), and a
/// write must name the primary term as well as the seq no; after a new
/// primary takes over (a higher term) the backend keeps writing, and a
/// swap naming a stale term is refused.
#[tokio::test]
async fn compare_and_swap_checks_the_primary_term_across_a_fail_over() {
    let node = fake_es::FakeServer::start().await;
    let repo = EsRepository::builder(node.url())
        .prefix("f")
        .connect()
        .await
        .unwrap();
    let s = repo
        .create(NewSession::new("app", "alice", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    let head_path = format!("/f-sessions/_doc/{}", s.id);
    let (_, head) = node.fake.call("GET", &head_path, &[], &Value::Null);
    assert_eq!(
        (head["_seq_no"].as_i64(), head["_primary_term"].as_i64()),
        (Some(0), Some(1))
    );
    repo.append(&s.id, vec![event("e1", "first")])
        .await
        .unwrap();
    node.fake.fail_over();
    repo.append(&s.id, vec![event("e2", "second")])
        .await
        .unwrap();
    let (_, head) = node.fake.call("GET", &head_path, &[], &Value::Null);
    assert_eq!(
        head["_primary_term"].as_i64(),
        Some(2),
        "written in the new term"
    );
    let seq_no = head["_seq_no"].as_i64().unwrap().to_string();
    let source = head["_source"].clone();
    node.fake.fail_over();
    let stale = node.fake.call(
        "PUT",
        &head_path,
        &[("if_seq_no", &seq_no), ("if_primary_term", "1")],
        &source,
    );
    assert_eq!(stale.0, 409, "a stale primary term is refused: {}", stale.1);
    repo.append(&s.id, vec![event("e3", "third")])
        .await
        .unwrap();
    assert_eq!(
        archive_texts(&repo, &s.id).await,
        ["first", "second", "third"]
    );
    assert_eq!(repo.get(&s.id).await.unwrap().event_count, 3);
}
