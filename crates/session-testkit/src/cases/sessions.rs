//! The session lifecycle: create, expiry, purge, list, delete and update.

use chrono::{Duration, Utc};
use serde_json::json;
use session_core::{
    Clock as _, CreateSessionRequest, ErrorKind, EventFilter, NewSession, SearchQuery,
    SessionQuery, SessionService, SessionStatus, SessionUpdate, StateMap, GROUP_USER,
};

use super::support::{kind, map, numbered, owner};
use crate::fixture::{sid, texts, user, Fixture, APP};

/// A session created with a caller-chosen id is stored under that id with
/// its owner, key, metadata and initial state, at version 0.
pub async fn create_with_given_id(fx: Fixture) {
    let now = fx.clock.now();
    let new = NewSession::new(APP, "alice", now)
        .unwrap()
        .with_id("my-session-id")
        .unwrap()
        .with_key("telegram:chat-123:agent-a")
        .unwrap()
        .with_metadata(map(&json!({"agentType": "research-assistant"})))
        .with_state(map(&json!({"counter": 0})));
    let s = fx.repo.create(new).await.unwrap();
    assert_eq!(s.id, "my-session-id");
    let got = fx.repo.get(&sid("my-session-id")).await.unwrap();
    assert_eq!(got, s);
    assert_eq!(got.app, APP);
    assert_eq!(got.user_id, "alice");
    assert_eq!(got.key.as_deref(), Some("telegram:chat-123:agent-a"));
    assert_eq!(got.status, SessionStatus::Active);
    assert_eq!(
        got.metadata,
        map(&json!({"agentType": "research-assistant"}))
    );
    assert_eq!(got.state, map(&json!({"counter": 0})));
    assert_eq!(got.created_at, now);
    assert_eq!(
        (got.version, got.event_count, got.context_tokens),
        (0, 0, 0)
    );
}

/// Without an id the service generates a UUID, distinct per session.
pub async fn create_with_generated_id(fx: Fixture) {
    let svc = fx.service();
    let a = svc
        .create(CreateSessionRequest::builder("alice").build().unwrap())
        .await
        .unwrap();
    let b = svc
        .create(CreateSessionRequest::builder("alice").build().unwrap())
        .await
        .unwrap();
    assert_ne!(a.id, b.id);
    assert!(uuid::Uuid::parse_str(&a.id).is_ok(), "{}", a.id);
    assert_eq!(fx.repo.get(&a.id).await.unwrap().id, a.id);
}

/// Creating an id that is taken is `AlreadyExists` and leaves the first session untouched.
pub async fn create_duplicate_id_is_already_exists(fx: Fixture) {
    let now = fx.clock.now();
    let first = fx
        .repo
        .create(
            NewSession::new(APP, "alice", now)
                .unwrap()
                .with_id("dup")
                .unwrap(),
        )
        .await
        .unwrap();
    fx.append(&sid("dup"), vec![user("kept")]).await;
    let err = fx
        .repo
        .create(
            NewSession::new(APP, "bob", now)
                .unwrap()
                .with_id("dup")
                .unwrap(),
        )
        .await;
    assert_eq!(kind(err), ErrorKind::AlreadyExists);
    let got = fx.repo.get(&sid("dup")).await.unwrap();
    assert_eq!(got.user_id, first.user_id);
    assert_eq!(texts(&fx.archive(&sid("dup")).await), ["kept"]);
}

/// Hostile ids are `InvalidInput` before anything is written.
pub async fn create_rejects_invalid_ids(fx: Fixture) {
    let now = fx.clock.now();
    let long = "a".repeat(129);
    // Path parts, NUL, Redis glob characters, quotes, wildcards, non-ASCII.
    let hostile = [
        "../x",
        "a/b",
        "",
        long.as_str(),
        "a\0b",
        ".",
        "..",
        "a*",
        "a?b",
        "[ab]",
        "a\\b",
        "a b",
        "a\"b",
        "a'b",
        "a%b",
        "a😀",
        "é",
    ];
    for bad in hostile {
        // The id types refuse it, so no store ever sees it.
        let err = NewSession::new(APP, "alice", now).unwrap().with_id(bad);
        assert_eq!(kind(err), ErrorKind::InvalidInput, "id {bad:?}");
        assert_eq!(
            kind(session_core::SessionId::new(bad)),
            ErrorKind::InvalidInput,
            "get {bad:?}"
        );
    }
    // Names take `/`, `@`, `|`, ... (see `chat_platform_identifiers_stay_apart`),
    // but never spaces, backslashes, `%` (the stores' escape character) or globs.
    for (app, user) in [
        ("a b", "alice"),
        (APP, "a\\b"),
        (APP, "a%2Fb"),
        ("", "alice"),
        ("*", "alice"),
        (APP, "[a-z]*"),
    ] {
        let err = NewSession::new(app, user, now);
        assert_eq!(
            kind(err),
            ErrorKind::InvalidInput,
            "app {app:?} user {user:?}"
        );
    }
    // Listing by a pattern is rejected too: no store ever matches a glob
    // (`*` alone is `GROUP_USER`, the owner of group sessions).
    fx.session("alice").await;
    for pattern in ["*", "a*", "?lice", "[a]lice"] {
        let mut queries = vec![
            SessionQuery::new().app(pattern),
            SessionQuery::new().key(pattern),
        ];
        if pattern != GROUP_USER {
            queries.push(SessionQuery::new().user(pattern));
        }
        for q in queries {
            assert_eq!(
                kind(fx.repo.list(&q).await),
                ErrorKind::InvalidInput,
                "list {q:?}"
            );
        }
    }
    let all = fx
        .repo
        .list(&SessionQuery::new().page(0, 100))
        .await
        .unwrap();
    assert_eq!(all.items.len(), 1, "nothing else written: {:?}", all.items);
}

/// With no expiry given, a session expires 60 days after creation.
pub async fn expiry_defaults_to_sixty_days(fx: Fixture) {
    let s = fx
        .service()
        .create(CreateSessionRequest::builder("alice").build().unwrap())
        .await
        .unwrap();
    assert_eq!(s.expires_at, Some(s.created_at + Duration::days(60)));
    fx.clock.advance(Duration::days(59));
    assert!(fx.repo.get(&s.id).await.is_ok());
    fx.clock.advance(Duration::days(1));
    assert_eq!(kind(fx.repo.get(&s.id).await), ErrorKind::NotFound);
}

/// `expires_at = None` never expires and is never purged.
pub async fn expiry_none_never_expires(fx: Fixture) {
    let s = fx
        .service()
        .create(
            CreateSessionRequest::builder("alice")
                .never_expires()
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(s.expires_at, None);
    fx.clock.advance(Duration::days(3650));
    assert!(fx.repo.get(&s.id).await.is_ok());
    assert_eq!(fx.repo.purge_expired(fx.clock.now()).await.unwrap(), 0);
    assert!(fx.repo.get(&s.id).await.is_ok());
}

/// A past expiry is rejected by the builder, the service and the repository.
pub async fn expiry_in_the_past_is_rejected(fx: Fixture) {
    let past = Utc::now() - Duration::minutes(1);
    let err = CreateSessionRequest::builder("alice")
        .expires_at(past)
        .build();
    assert_eq!(kind(err), ErrorKind::InvalidInput);
    let now = fx.clock.now();
    let err = fx
        .repo
        .create(
            NewSession::new(APP, "alice", now)
                .unwrap()
                .with_expires_at(Some(now - Duration::seconds(1))),
        )
        .await;
    assert_eq!(kind(err), ErrorKind::InvalidInput);
    let all = fx.repo.list(&SessionQuery::new()).await.unwrap();
    assert!(all.items.is_empty());
}

/// An expired session reads as absent (`NotFound`) everywhere; writes are `Expired`.
pub async fn expired_session_reads_as_absent(fx: Fixture) {
    let svc = fx.service();
    let s = svc
        .create(
            CreateSessionRequest::builder("alice")
                .app(APP)
                .ttl(Duration::hours(1))
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    fx.append(&s.id, vec![user("remember the blue door")]).await;
    let alice = session_core::Owner::parse(APP, "alice").unwrap();
    assert_eq!(fx.repo.owner_of(&s.id).await.unwrap(), alice);
    fx.clock.advance(Duration::hours(2));
    assert_eq!(kind(fx.repo.get(&s.id).await), ErrorKind::NotFound);
    assert_eq!(kind(fx.repo.owner_of(&s.id).await), ErrorKind::NotFound);
    assert_eq!(
        kind(fx.repo.items(&s.id, "item", &EventFilter::context()).await),
        ErrorKind::NotFound
    );
    assert_eq!(
        kind(fx.repo.event_version(&s.id).await),
        ErrorKind::NotFound
    );
    assert_eq!(
        kind(fx.repo.events(&s.id, &EventFilter::archive()).await),
        ErrorKind::NotFound
    );
    assert_eq!(
        kind(
            fx.repo
                .search(&SearchQuery::in_session(&s.id, "blue"))
                .await
        ),
        ErrorKind::NotFound
    );
    let hits = fx
        .repo
        .search(&SearchQuery::for_user(APP, "alice", "blue"))
        .await
        .unwrap();
    assert!(hits.items.is_empty());
    assert!(fx
        .repo
        .list(&SessionQuery::new())
        .await
        .unwrap()
        .items
        .is_empty());
    assert_eq!(
        kind(fx.repo.append(&s.id, vec![user("x")]).await),
        ErrorKind::Expired
    );
    assert_eq!(kind(svc.get(&owner(), &s.id).await), ErrorKind::NotFound);
}

/// `purge_expired` deletes exactly the sessions expired at `now`, events included.
pub async fn purge_expired_removes_exactly_the_expired(fx: Fixture) {
    let now = fx.clock.now();
    let short = fx
        .repo
        .create(
            NewSession::new(APP, "alice", now)
                .unwrap()
                .with_expires_at(Some(now + Duration::hours(1))),
        )
        .await
        .unwrap();
    let long = fx
        .repo
        .create(
            NewSession::new(APP, "alice", now)
                .unwrap()
                .with_expires_at(Some(now + Duration::hours(3))),
        )
        .await
        .unwrap();
    let never = fx
        .repo
        .create(
            NewSession::new(APP, "alice", now)
                .unwrap()
                .with_expires_at(None),
        )
        .await
        .unwrap();
    fx.append(&short.id, vec![user("gone")]).await;
    fx.clock.advance(Duration::hours(2));
    assert_eq!(fx.repo.purge_expired(fx.clock.now()).await.unwrap(), 1);
    assert!(
        !fx.repo.delete(&short.id).await.unwrap(),
        "purged sessions are gone"
    );
    assert!(fx.repo.get(&long.id).await.is_ok());
    assert!(fx.repo.get(&never.id).await.is_ok());
    assert_eq!(fx.repo.purge_expired(fx.clock.now()).await.unwrap(), 0);
    // The purged id can be used again.
    let again = fx
        .repo
        .create(
            NewSession::new(APP, "alice", fx.clock.now())
                .unwrap()
                .with_id(short.id.clone())
                .unwrap(),
        )
        .await
        .unwrap();
    assert!(fx.archive(&again.id).await.is_empty());
}

/// `list` filters by app, user, key and status.
pub async fn list_filters_by_app_user_key_status(fx: Fixture) {
    let now = fx.clock.now();
    let mk = |id: &str, app: &str, user: &str, key: Option<&str>| {
        let mut n = NewSession::new(app, user, now)
            .unwrap()
            .with_id(id)
            .unwrap();
        if let Some(k) = key {
            n = n.with_key(k).unwrap();
        }
        n
    };
    for n in [
        mk("a1", "app1", "alice", Some("k1")),
        mk("a2", "app1", "alice", Some("k2")),
        mk("b1", "app1", "bob", Some("k1")),
        mk("c1", "app2", "alice", Some("k1")),
    ] {
        fx.repo.create(n).await.unwrap();
    }
    fx.repo
        .update(
            &sid("a2"),
            SessionUpdate::new().status(SessionStatus::Archived),
        )
        .await
        .unwrap();
    let ids = |p: session_core::Page<session_core::Session>| {
        let mut v: Vec<String> = p.items.into_iter().map(|s| s.id.into_string()).collect();
        v.sort();
        v
    };
    let q = SessionQuery::new().page(0, 100);
    assert_eq!(
        ids(fx.repo.list(&q.clone().app("app1")).await.unwrap()),
        ["a1", "a2", "b1"]
    );
    assert_eq!(
        ids(fx
            .repo
            .list(&q.clone().app("app1").user("alice"))
            .await
            .unwrap()),
        ["a1", "a2"]
    );
    assert_eq!(
        ids(fx.repo.list(&q.clone().key("k1")).await.unwrap()),
        ["a1", "b1", "c1"]
    );
    assert_eq!(
        ids(fx
            .repo
            .list(&q.clone().status(SessionStatus::Archived))
            .await
            .unwrap()),
        ["a2"]
    );
    assert_eq!(
        ids(fx
            .repo
            .list(
                &q.clone()
                    .app("app1")
                    .user("alice")
                    .status(SessionStatus::Active)
            )
            .await
            .unwrap()),
        ["a1"]
    );
    assert!(fx.repo.list(&q.app("nope")).await.unwrap().items.is_empty());
}

/// `list` returns newest activity first (an append counts as activity), paged.
pub async fn list_is_paged_newest_activity_first(fx: Fixture) {
    let mut ids = Vec::new();
    for i in 0..5 {
        let s = fx
            .repo
            .create(
                NewSession::new(APP, "alice", fx.clock.now())
                    .unwrap()
                    .with_id(format!("s{i}"))
                    .unwrap(),
            )
            .await
            .unwrap();
        ids.push(s.id);
        fx.clock.advance(Duration::seconds(10));
    }
    // Activity on s0 makes it the newest.
    fx.append(&sid("s0"), vec![user("bump")]).await;
    let q = SessionQuery::new().app(APP);
    let p0 = fx.repo.list(&q.clone().page(0, 2)).await.unwrap();
    let p1 = fx.repo.list(&q.clone().page(1, 2)).await.unwrap();
    let p2 = fx.repo.list(&q.clone().page(2, 2)).await.unwrap();
    let order: Vec<String> = [&p0, &p1, &p2]
        .iter()
        .flat_map(|p| p.items.iter().map(|s| s.id.to_string()))
        .collect();
    assert_eq!(order, ["s0", "s4", "s3", "s2", "s1"]);
    assert!(p0.has_more && p1.has_more && !p2.has_more);
    assert!(p0.items[0].updated_at > p0.items[1].updated_at);
}

/// `delete` removes the session and every event; the id can be created again, empty.
pub async fn delete_removes_session_and_events(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(&s.id, numbered("msg", 3)).await;
    assert!(fx.repo.delete(&s.id).await.unwrap());
    assert_eq!(kind(fx.repo.get(&s.id).await), ErrorKind::NotFound);
    assert_eq!(
        kind(fx.repo.events(&s.id, &EventFilter::archive()).await),
        ErrorKind::NotFound
    );
    assert!(!fx.repo.delete(&s.id).await.unwrap());
    let again = fx
        .repo
        .create(
            NewSession::new(APP, "alice", fx.clock.now())
                .unwrap()
                .with_id(s.id.clone())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(again.version, 0);
    assert!(fx.archive(&s.id).await.is_empty());
    let out = fx.append(&s.id, vec![user("fresh")]).await;
    assert_eq!(out.seqs, [1]);
}

/// `update` changes metadata, state, status and expiry, bumps the version by
/// one, and with a stale expected version is `Conflict` and changes nothing.
pub async fn update_changes_fields_and_checks_version(fx: Fixture) {
    let s = fx.session("alice").await;
    let later = fx.clock.now() + Duration::days(1);
    let u = fx
        .repo
        .update(
            &s.id,
            SessionUpdate::new()
                .metadata(map(&json!({"tag": "x"})))
                .state(map(&json!({"step": 2})))
                .expires_at(Some(later))
                .expect_version(0),
        )
        .await
        .unwrap();
    assert_eq!(u.version, 1);
    let got = fx.repo.get(&s.id).await.unwrap();
    assert_eq!(got.metadata, map(&json!({"tag": "x"})));
    assert_eq!(got.state, map(&json!({"step": 2})));
    assert_eq!(got.expires_at, Some(later));
    let err = fx
        .repo
        .update(
            &s.id,
            SessionUpdate::new()
                .state(StateMap::new())
                .expect_version(0),
        )
        .await;
    assert_eq!(kind(err), ErrorKind::Conflict);
    assert_eq!(
        fx.repo.get(&s.id).await.unwrap().state,
        map(&json!({"step": 2}))
    );
    assert_eq!(fx.repo.event_version(&s.id).await.unwrap(), 1);
    let err = fx
        .repo
        .update(
            &s.id,
            SessionUpdate::new().expires_at(Some(fx.clock.now() - Duration::hours(1))),
        )
        .await;
    assert_eq!(kind(err), ErrorKind::InvalidInput);
}
