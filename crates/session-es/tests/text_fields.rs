//! What the backend does where an engine lacks a module, on every engine:
//! the `keyword` text field (Elasticsearch's test distribution has no
//! `wildcard` type) with long texts stored in overlapping pieces and long
//! terms narrowed then checked, and the deletes that replace
//! `_delete_by_query` (which needs the `reindex` module): after a delete, a
//! rewind, a prune and an erasure, no event document of what went is left.
//! Each on the fake node, Elasticsearch (`ELASTICSEARCH_URL`) and OpenSearch
//! (`OPENSEARCH_URL`), with each text field type the engine has.

#![allow(clippy::unwrap_used)]

#[path = "support/fake_es.rs"]
mod fake_es;
#[path = "support/real.rs"]
mod real;

use elasticsearch::http::headers::HeaderMap;
use elasticsearch::http::transport::Transport;
use elasticsearch::http::Method;
use serde_json::{json, Value};
use session_core::{
    AppName, ErrorKind, EventFilter, Message, NewSession, RewindTo, SearchQuery, SessionEvent,
    SessionRepository, UserId,
};
use session_es::{EsRepository, EsRepositoryBuilder, TextField};

/// Every store to check: (where, builder, node URL), one per engine and text field.
fn stores(fake_url: &str) -> Vec<(String, EsRepositoryBuilder, String)> {
    let prefix = || format!("t{}", uuid::Uuid::new_v4().simple());
    let mut out = Vec::new();
    for field in [TextField::Wildcard, TextField::Keyword] {
        out.push((
            format!("fake node, {field:?}"),
            EsRepository::builder(fake_url)
                .prefix(prefix())
                .text_field(field),
            fake_url.to_owned(),
        ));
    }
    for engine in [real::Engine::Elasticsearch, real::Engine::OpenSearch] {
        let fields: &[TextField] = match engine {
            // The test distribution has no `wildcard` type: detection gives `keyword`.
            real::Engine::Elasticsearch => &[TextField::Detect],
            real::Engine::OpenSearch => &[TextField::Detect, TextField::Keyword],
        };
        for field in fields {
            out.push((
                format!("{}, {field:?}", engine.name()),
                engine.builder().text_field(*field),
                engine.url(),
            ));
        }
    }
    out
}

/// How many event documents of `session` the node's events index holds.
async fn event_docs(url: &str, repo: &EsRepository, session: &str) -> u64 {
    let t = Transport::single_node(url).unwrap();
    let index = format!("{}-events", repo.prefix());
    t.send(
        Method::Post,
        &format!("{index}/_refresh"),
        HeaderMap::new(),
        None::<&()>,
        None::<String>,
        None,
    )
    .await
    .unwrap();
    let body = json!({"query": {"term": {"session_id": session}}}).to_string();
    let r = t
        .send(
            Method::Post,
            &format!("{index}/_count"),
            HeaderMap::new(),
            None::<&()>,
            Some(body),
            None,
        )
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    v["count"].as_u64().unwrap()
}

fn user(text: &str) -> SessionEvent {
    SessionEvent::new(Message::user(text))
}

async fn found(repo: &EsRepository, session: &str, text: &str) -> Vec<u64> {
    repo.search(&SearchQuery::in_session(session, text))
        .await
        .unwrap()
        .items
        .iter()
        .map(|h| h.event.seq)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn long_texts_are_found_on_every_text_field() {
    let node = fake_es::FakeServer::start().await;
    // 20,000 distinct-ish characters: pieces start every 4,000 on a keyword field.
    let text: String = (0..20_000u32)
        .map(|i| char::from_u32(0x61 + (i * 7 + i / 26) % 26).unwrap_or('x'))
        .collect();
    let chars: Vec<char> = text.chars().collect();
    let piece = |from: usize, len: usize| -> String { chars[from..from + len].iter().collect() };
    for (name, builder, _) in stores(&node.url()) {
        let Some(repo) = real_or_fake(&name, builder).await else {
            return;
        };
        let guard = real::DropIndices(repo.clone());
        let s = repo
            .create(NewSession::new("app", "alice", chrono::Utc::now()).unwrap())
            .await
            .unwrap();
        repo.append(&s.id, vec![user(&text), user("short one")])
            .await
            .unwrap();
        repo.append(&s.id, vec![user("after the batch")])
            .await
            .unwrap();
        // Across the boundaries of pieces, and at the very end.
        for at in [3_990, 7_995, 12_001, 19_970] {
            assert_eq!(
                found(&repo, &s.id, &piece(at, 30)).await,
                vec![1],
                "{name} at {at}"
            );
        }
        // Longer than a keyword field answers exactly: narrowed, then checked.
        let long = piece(100, TextField::EXACT_CHARS + 500);
        assert_eq!(found(&repo, &s.id, &long).await, vec![1], "{name}");
        let mut wrong = long.clone();
        wrong.push('!');
        assert!(found(&repo, &s.id, &wrong).await.is_empty(), "{name}");
        // A long exclusion leaves the long event out, keeps the others.
        let q = format!("e -{long}");
        assert_eq!(found(&repo, &s.id, &q).await, vec![2, 3], "{name}");
        // The events view's keyword filter comes from the engine: a long one
        // is refused on a keyword field, answered on a wildcard field.
        let filter = EventFilter::archive().keyword(long.clone());
        match repo.events(&s.id, &filter).await {
            Ok(page) => {
                assert!(!name.contains("Keyword") && !name.starts_with("elasticsearch"));
                assert_eq!(page.items.len(), 1, "{name}");
            }
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Unsupported, "{name}: {e}");
            }
        }
        drop(guard);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn what_goes_leaves_no_event_document() {
    let node = fake_es::FakeServer::start().await;
    for (name, builder, url) in stores(&node.url()) {
        let Some(repo) = real_or_fake(&name, builder).await else {
            return;
        };
        let guard = real::DropIndices(repo.clone());
        let new = || NewSession::new("app", "bob", chrono::Utc::now()).unwrap();
        // A rewind drops the documents from the rewound seq on.
        let s = repo.create(new()).await.unwrap();
        for i in 0..3 {
            let e = SessionEvent::builder(Message::user(format!("turn {i}")))
                .invocation_id(format!("inv-{i}"))
                .build()
                .unwrap();
            repo.append(&s.id, vec![e, user("reply")]).await.unwrap();
        }
        assert_eq!(event_docs(&url, &repo, &s.id).await, 6, "{name}");
        repo.rewind_to(&s.id, &RewindTo::Seq(3)).await.unwrap();
        assert_eq!(event_docs(&url, &repo, &s.id).await, 2, "{name}");
        // A prune drops the documents it names.
        let v = repo.event_version(&s.id).await.unwrap();
        repo.replace_context(&s.id, vec![user("summary")], v)
            .await
            .unwrap();
        let v = repo.event_version(&s.id).await.unwrap();
        if let Some(pruned) = repo.prune_events(&s.id, &[2], v).await.unwrap() {
            assert_eq!(pruned.removed, 1, "{name}");
            assert_eq!(event_docs(&url, &repo, &s.id).await, 2, "{name}");
        }
        // A delete drops them all.
        assert!(repo.delete(&s.id).await.unwrap());
        assert_eq!(event_docs(&url, &repo, &s.id).await, 0, "{name}");
        // An erasure checks they are all gone, over every session of the user.
        let a = repo.create(new()).await.unwrap();
        let b = repo.create(new()).await.unwrap();
        for id in [&a.id, &b.id] {
            repo.append(id, vec![user("x"), user("y")]).await.unwrap();
        }
        let erased = repo
            .erase_user(&AppName::new("app").unwrap(), &UserId::new("bob").unwrap())
            .await
            .unwrap();
        assert_eq!(erased.sessions, 2, "{name}");
        for id in [&a.id, &b.id] {
            assert_eq!(event_docs(&url, &repo, id).await, 0, "{name}");
        }
        drop(guard);
    }
}

/// Connects a store: the fake node always answers; a real one may skip.
async fn real_or_fake(name: &str, builder: EsRepositoryBuilder) -> Option<EsRepository> {
    if name.starts_with("fake") {
        return Some(builder.connect().await.unwrap());
    }
    let engine = if name.starts_with("elasticsearch") {
        real::Engine::Elasticsearch
    } else {
        real::Engine::OpenSearch
    };
    engine.connect(builder).await
}
