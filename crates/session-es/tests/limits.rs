//! The limits a cluster puts on one query, as the fake node enforces them:
//! at most 65,536 terms in one `terms` query (`index.max_terms_count`) and
//! at most 1,024 leaf clauses in one query, nested `bool`s included
//! (`indices.query.bool.max_clause_count`). The backend never builds a
//! query past them: a cross-session search over an owner of more sessions
//! than one `terms` query may name, and a session rewound more times than
//! one query may leave out, still read and search every event.

#![allow(clippy::unwrap_used)]

#[path = "support/fake_es.rs"]
mod fake_es;

use serde_json::{json, Value};
use session_core::{
    EventFilter, EventView, Message, NewSession, RewindTo, SearchQuery, SessionEvent, SessionId,
    SessionRepository, SessionRepositoryExt,
};
use session_es::EsRepository;

async fn repo(node: &fake_es::FakeServer) -> EsRepository {
    EsRepository::builder(node.url())
        .prefix("l")
        .connect()
        .await
        .unwrap()
}

fn event(id: &str, text: &str) -> SessionEvent {
    SessionEvent::builder(Message::user(text))
        .id(id)
        .build()
        .unwrap()
}

/// A search of index `idx` for `query`: the status and the hit count or error type.
fn search(fake: &fake_es::FakeEs, query: &Value) -> (u16, Value) {
    let (status, body) = fake.call("POST", "/idx/_search", &[], &json!({ "query": query }));
    if status == 200 {
        (status, body["hits"]["total"]["value"].clone())
    } else {
        (status, body["error"]["type"].clone())
    }
}

#[tokio::test]
async fn the_fake_node_enforces_the_terms_and_clause_limits() {
    let node = fake_es::FakeServer::start().await;
    let fake = &node.fake;
    fake.call("PUT", "/idx", &[], &json!({}));
    fake.call(
        "PUT",
        "/idx/_doc/1",
        &[("refresh", "true")],
        &json!({"k": "t7", "n": 5}),
    );
    let terms = |n: usize| -> Value {
        let list: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
        json!({"terms": {"k": list}})
    };
    assert_eq!(search(fake, &terms(65_536)), (200, json!(1)));
    assert_eq!(
        search(fake, &terms(65_537)),
        (400, json!("illegal_argument_exception"))
    );
    let ranges = |n: u64| -> Vec<Value> {
        (0..n)
            .map(|i| json!({"range": {"n": {"gte": 100 + i, "lte": 100 + i}}}))
            .collect()
    };
    let flat = |n: u64| json!({"bool": {"must_not": ranges(n)}});
    assert_eq!(search(fake, &flat(1_024)), (200, json!(1)));
    assert_eq!(
        search(fake, &flat(1_025)),
        (400, json!("too_many_nested_clauses"))
    );
    // Nested `bool`s count their leaves together.
    let nested = json!({"bool": {"filter": [{"term": {"k": "t7"}}, flat(1_023)]}});
    assert_eq!(search(fake, &nested), (200, json!(1)));
    let nested = json!({"bool": {"filter": [{"term": {"k": "t7"}}, flat(1_024)]}});
    assert_eq!(
        search(fake, &nested),
        (400, json!("too_many_nested_clauses"))
    );
}

/// Fields a mapping does not index match nothing, a field mapped
/// `index: false` cannot be queried, and sorting needs a mapped field.
#[tokio::test]
async fn the_fake_node_queries_only_indexed_fields() {
    let node = fake_es::FakeServer::start().await;
    let fake = &node.fake;
    let mapping = json!({"mappings": {"dynamic": "strict", "properties": {
        "a": {"type": "keyword"},
        "hidden": {"type": "keyword", "index": false},
        "blob": {"type": "object", "enabled": false}
    }}});
    fake.call("PUT", "/idx", &[], &mapping);
    let doc = json!({"a": "x", "hidden": "y", "blob": {"k": "v"}});
    let (status, _) = fake.call("PUT", "/idx/_doc/1", &[("refresh", "true")], &doc);
    assert_eq!(status, 201);
    assert_eq!(search(fake, &json!({"term": {"a": "x"}})), (200, json!(1)));
    for unindexed in [
        json!({"term": {"blob.k": "v"}}),
        json!({"exists": {"field": "blob"}}),
        json!({"term": {"nowhere": "x"}}),
    ] {
        assert_eq!(search(fake, &unindexed), (200, json!(0)), "{unindexed}");
    }
    assert_eq!(
        search(fake, &json!({"term": {"hidden": "y"}})),
        (400, json!("query_shard_exception"))
    );
    let (status, body) = fake.call(
        "POST",
        "/idx/_search",
        &[],
        &json!({"sort": [{"blob.k": "asc"}]}),
    );
    assert_eq!(status, 400, "{body}");
}

/// A user-scope search over an owner of 70,000 sessions: more incarnations
/// than one `terms` query may name. Both sessions holding the word are
/// found, the one past the first 65,536 included.
#[tokio::test]
async fn a_search_across_an_owner_of_70000_sessions_finds_every_match() {
    let node = fake_es::FakeServer::start().await;
    let repo = repo(&node).await;
    let first = repo
        .create(NewSession::new("app", "alice", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    // 69,999 more sessions of the same owner, planted as copies of the first head.
    let template = node.fake.source("l-sessions", first.id.as_str()).unwrap();
    let head: Value = serde_json::from_str(template["head"].as_str().unwrap()).unwrap();
    let copies = (1..70_000).map(|i| {
        let id = format!("s{i:05}");
        let inc = format!("inc{i:05}");
        let mut head = head.clone();
        head["session"]["id"] = json!(id);
        head["inc"] = json!(inc);
        let mut doc = template.clone();
        doc["sid"] = json!(id);
        doc["inc"] = json!(inc);
        doc["head"] = json!(head.to_string());
        (id, doc)
    });
    node.fake.put_sources("l-sessions", copies);
    let last = SessionId::new("s69999").unwrap();
    repo.append(&first.id, vec![event("a", "the needle in the first")])
        .await
        .unwrap();
    repo.append(&last, vec![event("b", "the needle in the last")])
        .await
        .unwrap();
    repo.append(&last, vec![event("c", "hay")]).await.unwrap();
    let hits = repo
        .search(&SearchQuery::for_user("app", "alice", "needle"))
        .await
        .unwrap();
    let mut found: Vec<&str> = hits.items.iter().map(|h| h.session_id.as_str()).collect();
    found.sort_unstable();
    assert_eq!(found, [first.id.as_str(), "s69999"]);
}

/// A session rewound 1,030 times: more rewound ranges than one query may
/// leave out. Reads of every view and shape, the idempotency check of an
/// append, a further rewind and the search all skip exactly the rewound
/// events. The first 1,028 rewinds are planted in the head (each a real
/// rewind reads the whole session, which makes the test slow), the last two
/// go through the backend.
#[tokio::test]
async fn a_session_rewound_past_the_clause_limit_reads_and_searches_exactly() {
    const PLANTED: u64 = 1_028;
    const ROUNDS: u64 = PLANTED + 2;
    let node = fake_es::FakeServer::start().await;
    let repo = repo(&node).await;
    let s = repo
        .create(NewSession::new("app", "alice", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    let round = |k: u64| {
        vec![
            event(&format!("keep-{k}"), &format!("kept {k}")),
            event(&format!("drop-{k}"), &format!("dropped {k}")),
        ]
    };
    repo.append(&s.id, (1..=PLANTED).flat_map(round).collect())
        .await
        .unwrap();
    // Round k wrote `kept k` at seq 2k-1 and `dropped k` at 2k; each `dropped` is rewound.
    let all = repo.all_events(&s.id, EventView::Archive).await.unwrap();
    let kept_tokens: u64 = all
        .iter()
        .filter(|e| e.seq % 2 == 1)
        .map(|e| u64::from(e.token_estimate))
        .sum();
    let mut doc = node.fake.source("l-sessions", s.id.as_str()).unwrap();
    let mut head: Value = serde_json::from_str(doc["head"].as_str().unwrap()).unwrap();
    head["dead"] = json!((1..=PLANTED).map(|k| [2 * k, 2 * k]).collect::<Vec<_>>());
    head["session"]["event_count"] = json!(PLANTED);
    head["session"]["context_tokens"] = json!(kept_tokens);
    doc["head"] = json!(head.to_string());
    node.fake.put_source("l-sessions", s.id.as_str(), doc);
    for k in PLANTED + 1..=ROUNDS {
        let out = repo.append(&s.id, round(k)).await.unwrap();
        repo.rewind_to(&s.id, &RewindTo::Seq(out.seqs[1]))
            .await
            .unwrap();
    }
    let kept: Vec<String> = (1..=ROUNDS).map(|k| format!("kept {k}")).collect();
    let texts = |events: &[SessionEvent]| -> Vec<String> {
        events.iter().map(|e| e.message.text().to_owned()).collect()
    };
    for view in [EventView::Archive, EventView::Context] {
        assert_eq!(texts(&repo.all_events(&s.id, view).await.unwrap()), kept);
    }
    let page = repo
        .events(&s.id, &EventFilter::archive().page(7, 100))
        .await
        .unwrap();
    assert_eq!(texts(&page.items), kept[700..800]);
    let last = repo
        .events(&s.id, &EventFilter::archive().last_n(3))
        .await
        .unwrap();
    assert_eq!(texts(&last.items), kept[1027..]);
    let past = repo
        .events(&s.id, &EventFilter::archive().after(1_500).page(0, 2))
        .await
        .unwrap();
    assert_eq!(texts(&past.items), ["kept 751", "kept 752"]);
    // The same event id again is recognised, not stored twice.
    let again = repo
        .append(&s.id, vec![event("keep-5", "kept 5")])
        .await
        .unwrap();
    assert_eq!((again.written, again.seqs.clone()), (0, vec![9]));
    let dropped = repo
        .search(&SearchQuery::in_session(s.id.as_str(), "dropped"))
        .await
        .unwrap();
    assert!(dropped.items.is_empty());
    let found = repo
        .search(&SearchQuery::in_session(s.id.as_str(), "kept 1030"))
        .await
        .unwrap();
    assert_eq!(found.items.len(), 1);
    assert_eq!(repo.get(&s.id).await.unwrap().event_count, ROUNDS);
}
