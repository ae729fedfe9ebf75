//! One function per behaviour of the contract. Each takes a fresh [`Fixture`].

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use chrono::{Duration, TimeZone, Utc};
use serde_json::{json, Value};
use session_core::{
    turn_count, Clock as _, CompactionSource, ContentPart, CreateSessionRequest, ErrorKind,
    EventFilter, EventView, Expiry, Limits, Message, NewSession, Owner, ResetPolicy,
    ResolveRequest, Role, SearchQuery, SessionError, SessionEvent, SessionQuery, SessionRepository,
    SessionService, SessionStatus, SessionUpdate, StateMap, SyntheticFilter, ToolCall, GROUP_USER,
};

pub use crate::hostile::{
    chat_platform_identifiers_stay_apart, concurrent_identical_imports_write_once,
    counters_at_the_maximum_refuse_writes_and_keep_data, extreme_pages_are_empty,
    import_refuses_counters_past_the_maximum,
};
pub use crate::isolation::isolation_matrix_every_service_call;
use crate::{assistant, texts, user, Fixture, APP};

fn kind<T: std::fmt::Debug>(r: Result<T, SessionError>) -> ErrorKind {
    r.expect_err("expected an error").kind()
}

fn map(v: &Value) -> StateMap {
    v.as_object().cloned().unwrap()
}

fn numbered(prefix: &str, n: usize) -> Vec<SessionEvent> {
    (1..=n).map(|i| user(&format!("{prefix} {i}"))).collect()
}

fn owner() -> Owner {
    Owner::new(APP, "alice")
}

async fn service_session(fx: &Fixture, owner: &Owner) -> session_core::Session {
    fx.service()
        .create(
            CreateSessionRequest::builder(&owner.user_id)
                .app(&owner.app)
                .build()
                .unwrap(),
        )
        .await
        .unwrap()
}

// ---------------------------------------------------------------- sessions

/// A session created with a caller-chosen id is stored under that id with
/// its owner, key, metadata and initial state, at version 0.
pub async fn create_with_given_id(fx: Fixture) {
    let now = fx.clock.now();
    let new = NewSession::new(APP, "alice", now)
        .with_id("my-session-id")
        .with_key("telegram:chat-123:agent-a")
        .with_metadata(map(&json!({"agentType": "research-assistant"})))
        .with_state(map(&json!({"counter": 0})));
    let s = fx.repo.create(new).await.unwrap();
    assert_eq!(s.id, "my-session-id");
    let got = fx.repo.get("my-session-id").await.unwrap();
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
        .create(NewSession::new(APP, "alice", now).with_id("dup"))
        .await
        .unwrap();
    fx.append("dup", vec![user("kept")]).await;
    let err = fx
        .repo
        .create(NewSession::new(APP, "bob", now).with_id("dup"))
        .await;
    assert_eq!(kind(err), ErrorKind::AlreadyExists);
    let got = fx.repo.get("dup").await.unwrap();
    assert_eq!(got.user_id, first.user_id);
    assert_eq!(texts(&fx.archive("dup").await), ["kept"]);
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
        let err = fx
            .repo
            .create(NewSession::new(APP, "alice", now).with_id(bad))
            .await;
        assert_eq!(kind(err), ErrorKind::InvalidInput, "id {bad:?}");
        assert_eq!(
            kind(fx.repo.get(bad).await),
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
        let err = fx.repo.create(NewSession::new(app, user, now)).await;
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
            NewSession::new(APP, "alice", now).with_expires_at(Some(now - Duration::seconds(1))),
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
    fx.clock.advance(Duration::hours(2));
    assert_eq!(kind(fx.repo.get(&s.id).await), ErrorKind::NotFound);
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
        .create(NewSession::new(APP, "alice", now).with_expires_at(Some(now + Duration::hours(1))))
        .await
        .unwrap();
    let long = fx
        .repo
        .create(NewSession::new(APP, "alice", now).with_expires_at(Some(now + Duration::hours(3))))
        .await
        .unwrap();
    let never = fx
        .repo
        .create(NewSession::new(APP, "alice", now).with_expires_at(None))
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
        .create(NewSession::new(APP, "alice", fx.clock.now()).with_id(short.id.clone()))
        .await
        .unwrap();
    assert!(fx.archive(&again.id).await.is_empty());
}

/// `list` filters by app, user, key and status.
pub async fn list_filters_by_app_user_key_status(fx: Fixture) {
    let now = fx.clock.now();
    let mk = |id: &str, app: &str, user: &str, key: Option<&str>| {
        let mut n = NewSession::new(app, user, now).with_id(id);
        if let Some(k) = key {
            n = n.with_key(k);
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
        .update("a2", SessionUpdate::new().status(SessionStatus::Archived))
        .await
        .unwrap();
    let ids = |p: session_core::Page<session_core::Session>| {
        let mut v: Vec<String> = p.items.into_iter().map(|s| s.id).collect();
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
            .create(NewSession::new(APP, "alice", fx.clock.now()).with_id(format!("s{i}")))
            .await
            .unwrap();
        ids.push(s.id);
        fx.clock.advance(Duration::seconds(10));
    }
    // Activity on s0 makes it the newest.
    fx.append("s0", vec![user("bump")]).await;
    let q = SessionQuery::new().app(APP);
    let p0 = fx.repo.list(&q.clone().page(0, 2)).await.unwrap();
    let p1 = fx.repo.list(&q.clone().page(1, 2)).await.unwrap();
    let p2 = fx.repo.list(&q.clone().page(2, 2)).await.unwrap();
    let order: Vec<String> = [&p0, &p1, &p2]
        .iter()
        .flat_map(|p| p.items.iter().map(|s| s.id.clone()))
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
        .create(NewSession::new(APP, "alice", fx.clock.now()).with_id(s.id.clone()))
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

// ---------------------------------------------------------------- append

/// Seqs start at 1 and are strictly increasing and gapless across calls and batches.
pub async fn append_assigns_gapless_increasing_seqs(fx: Fixture) {
    let s = fx.session("alice").await;
    let a = fx.append(&s.id, vec![user("one")]).await;
    let b = fx.append(&s.id, numbered("batch", 3)).await;
    let c = fx.append(&s.id, vec![assistant("five")]).await;
    assert_eq!(a.seqs, [1]);
    assert_eq!(b.seqs, [2, 3, 4]);
    assert_eq!(c.seqs, [5]);
    let seqs: Vec<u64> = fx.archive(&s.id).await.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    let other = fx.session("alice").await;
    assert_eq!(
        fx.append(&other.id, vec![user("x")]).await.seqs,
        [1],
        "seqs are per session"
    );
}

/// A batch with one bad event writes nothing: no events, no version bump, no state.
pub async fn append_batch_is_atomic(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(&s.id, vec![user("before")]).await;
    let good = SessionEvent::builder(Message::user("good"))
        .state("k", 1)
        .build()
        .unwrap();
    let mut bad = user("bad");
    bad.id = "not/valid".into();
    assert_eq!(
        kind(fx.repo.append(&s.id, vec![good.clone(), bad]).await),
        ErrorKind::InvalidInput
    );
    let huge = user(&"x".repeat(Limits::default().max_event_bytes + 1));
    assert_eq!(
        kind(fx.repo.append(&s.id, vec![good, huge]).await),
        ErrorKind::InvalidInput
    );
    assert_eq!(texts(&fx.archive(&s.id).await), ["before"]);
    let got = fx.repo.get(&s.id).await.unwrap();
    assert_eq!(got.version, 1);
    assert!(got.state.is_empty());
    assert_eq!(got.event_count, 1);
}

/// Each successful append call bumps the version by exactly one, whatever the batch size.
pub async fn append_bumps_version_once_per_call(fx: Fixture) {
    let s = fx.session("alice").await;
    assert_eq!(fx.repo.event_version(&s.id).await.unwrap(), 0);
    assert_eq!(fx.append(&s.id, vec![user("a")]).await.version, 1);
    assert_eq!(fx.append(&s.id, numbered("b", 5)).await.version, 2);
    assert_eq!(fx.repo.event_version(&s.id).await.unwrap(), 2);
    let got = fx.repo.get(&s.id).await.unwrap();
    assert_eq!(got.version, 2);
    assert_eq!(got.event_count, 6);
}

/// Re-sending an event id returns its existing seq and writes nothing.
pub async fn append_is_idempotent_by_event_id(fx: Fixture) {
    let s = fx.session("alice").await;
    let e1 = user("first");
    let e2 = assistant("second");
    let first = fx.append(&s.id, vec![e1.clone(), e2.clone()]).await;
    assert_eq!((first.seqs.clone(), first.written), (vec![1, 2], 2));
    let again = fx.append(&s.id, vec![e1.clone(), e2]).await;
    assert_eq!(again.seqs, [1, 2]);
    assert_eq!(again.written, 0);
    assert_eq!(again.version, first.version, "nothing written, no bump");
    let e3 = user("third");
    let mixed = fx.append(&s.id, vec![e1, e3.clone(), e3]).await;
    assert_eq!(mixed.seqs, [1, 3, 3]);
    assert_eq!(mixed.written, 1);
    assert_eq!(
        texts(&fx.archive(&s.id).await),
        ["first", "second", "third"]
    );
    assert_eq!(fx.repo.get(&s.id).await.unwrap().event_count, 3);
}

/// Appending to an id that does not exist is `NotFound`, and creates nothing.
pub async fn append_to_unknown_session_is_not_found(fx: Fixture) {
    assert_eq!(
        kind(fx.repo.append("ghost", vec![user("x")]).await),
        ErrorKind::NotFound
    );
    assert_eq!(kind(fx.repo.get("ghost").await), ErrorKind::NotFound);
    assert_eq!(
        kind(fx.repo.replace_context("ghost", vec![], 0).await),
        ErrorKind::NotFound
    );
}

// ---------------------------------------------------------------- events

/// The context is what compaction left plus later appends; the archive keeps everything.
pub async fn events_context_and_archive_views(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(&s.id, numbered("m", 4)).await;
    let ctx = fx.context(&s.id).await;
    let v = fx.repo.event_version(&s.id).await.unwrap();
    assert!(fx
        .repo
        .replace_context(&s.id, ctx[2..].to_vec(), v)
        .await
        .unwrap());
    fx.append(&s.id, vec![user("m 5")]).await;
    assert_eq!(texts(&fx.context(&s.id).await), ["m 3", "m 4", "m 5"]);
    assert_eq!(
        texts(&fx.archive(&s.id).await),
        ["m 1", "m 2", "m 3", "m 4", "m 5"]
    );
    assert_eq!(fx.texts(&s.id, &EventFilter::context()).await.len(), 3);
}

/// `last_n` returns the most recent N matching events, oldest first.
pub async fn events_last_n_returns_most_recent_oldest_first(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(&s.id, numbered("m", 30)).await;
    assert_eq!(
        fx.texts(&s.id, &EventFilter::last(3)).await,
        ["m 28", "m 29", "m 30"]
    );
    assert_eq!(
        fx.texts(&s.id, &EventFilter::last(3).view(EventView::Archive))
            .await,
        ["m 28", "m 29", "m 30"]
    );
    assert_eq!(fx.texts(&s.id, &EventFilter::last(100)).await.len(), 30);
    // last_n then paging: page 1 of the last 5 in pages of 2.
    let f = EventFilter::context().last_n(5).page(1, 2);
    assert_eq!(fx.texts(&s.id, &f).await, ["m 28", "m 29"]);
}

/// An agent on `orch.researcher` sees root events, `orch` and its own branch; not `orch.writer`.
pub async fn events_branch_visibility(fx: Fixture) {
    let s = fx.session("alice").await;
    let on = |b: &str, t: &str| {
        SessionEvent::builder(Message::assistant(t))
            .branch(b)
            .build()
            .unwrap()
    };
    fx.append(
        &s.id,
        vec![
            user("root"),
            on("orch", "orchestrator"),
            on("orch.researcher", "research"),
            on("orch.writer", "writing"),
            on("orch.researcher.deep", "deeper"),
        ],
    )
    .await;
    let f = EventFilter::archive()
        .branch("orch.researcher")
        .page(0, 100);
    assert_eq!(
        fx.texts(&s.id, &f).await,
        ["root", "orchestrator", "research"]
    );
    let f = EventFilter::archive().branch("orch").page(0, 100);
    assert_eq!(fx.texts(&s.id, &f).await, ["root", "orchestrator"]);
    assert_eq!(
        fx.texts(&s.id, &EventFilter::archive().page(0, 100))
            .await
            .len(),
        5
    );
}

/// A time range keeps events with `from <= timestamp < to`.
pub async fn events_time_range(fx: Fixture) {
    let s = fx.session("alice").await;
    let t0 = Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap();
    let at = |min: i64, t: &str| {
        SessionEvent::builder(Message::user(t))
            .timestamp(t0 + Duration::minutes(min))
            .build()
            .unwrap()
    };
    fx.append(
        &s.id,
        vec![at(0, "a"), at(10, "b"), at(20, "c"), at(30, "d")],
    )
    .await;
    let f = EventFilter::archive().between(
        Some(t0 + Duration::minutes(10)),
        Some(t0 + Duration::minutes(30)),
    );
    assert_eq!(fx.texts(&s.id, &f).await, ["b", "c"]);
    let f = EventFilter::archive().between(Some(t0 + Duration::minutes(15)), None);
    assert_eq!(fx.texts(&s.id, &f).await, ["c", "d"]);
}

/// A role filter keeps only the given roles.
pub async fn events_role_filter(fx: Fixture) {
    let s = fx.session("alice").await;
    let call = ToolCall::new("c1", "lookup", &json!({"q": "x"}));
    fx.append(
        &s.id,
        vec![
            SessionEvent::new(Message::system("sys")),
            user("q"),
            SessionEvent::new(Message::assistant_tool_calls("calling", vec![call])),
            SessionEvent::new(Message::tool_result("c1", "lookup", "result")),
            assistant("answer"),
        ],
    )
    .await;
    let f = EventFilter::archive().roles([Role::User, Role::Tool]);
    assert_eq!(fx.texts(&s.id, &f).await, ["q", "result"]);
    let f = EventFilter::archive().roles([Role::Assistant]);
    let page = fx.repo.events(&s.id, &f).await.unwrap();
    assert_eq!(texts(&page.items), ["calling", "answer"]);
    assert_eq!(page.items[0].message.tool_calls()[0].name, "lookup");
}

/// Synthetic events can be included, excluded or selected alone.
pub async fn events_synthetic_in_out_only(fx: Fixture) {
    let s = fx.session("alice").await;
    let [p, a] = SessionEvent::summary_turn(
        "the summary",
        CompactionSource::RecursiveSummarization,
        fx.clock.now(),
    );
    fx.append(&s.id, vec![p, a, user("real")]).await;
    let all = EventFilter::archive();
    assert_eq!(fx.texts(&s.id, &all).await.len(), 3);
    assert_eq!(
        fx.texts(&s.id, &all.clone().synthetic(SyntheticFilter::Exclude))
            .await,
        ["real"]
    );
    let only = fx
        .repo
        .events(&s.id, &all.synthetic(SyntheticFilter::Only))
        .await
        .unwrap();
    assert_eq!(
        texts(&only.items),
        [session_core::SUMMARY_PROMPT, "the summary"]
    );
    assert!(only
        .items
        .iter()
        .all(|e| e.compaction_source == Some(CompactionSource::RecursiveSummarization)));
}

/// Filters apply before paging: page 1 holds the 11th..20th matching event.
pub async fn events_filter_before_paging(fx: Fixture) {
    let s = fx.session("alice").await;
    let mut batch = Vec::new();
    for i in 1..=30 {
        batch.push(user(&format!("q{i}")));
        batch.push(assistant(&format!("a{i}")));
    }
    fx.append(&s.id, batch).await;
    let f = EventFilter::archive().roles([Role::User]).page(1, 10);
    let page = fx.repo.events(&s.id, &f).await.unwrap();
    let want: Vec<String> = (11..=20).map(|i| format!("q{i}")).collect();
    assert_eq!(texts(&page.items), want);
    assert!(page.has_more);
    let last = fx
        .repo
        .events(
            &s.id,
            &EventFilter::archive().roles([Role::User]).page(2, 10),
        )
        .await
        .unwrap();
    assert_eq!(last.items.len(), 10);
    assert!(!last.has_more);
    let default = fx
        .repo
        .events(&s.id, &EventFilter::archive())
        .await
        .unwrap();
    assert_eq!(default.items.len(), 10, "default page size is 10");
}

/// The keyword filter is a case-insensitive literal substring.
pub async fn events_keyword_filter_is_literal(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(
        &s.id,
        vec![user("Paris is 100% lovely"), user("parish"), user("London")],
    )
    .await;
    let f = EventFilter::archive().keyword("PARIS");
    assert_eq!(
        fx.texts(&s.id, &f).await,
        ["Paris is 100% lovely", "parish"]
    );
    let f = EventFilter::archive().keyword("100%");
    assert_eq!(fx.texts(&s.id, &f).await, ["Paris is 100% lovely"]);
    let f = EventFilter::archive().keyword("_");
    assert!(fx.texts(&s.id, &f).await.is_empty());
}

/// Every field of an event survives storage exactly.
pub async fn events_round_trip_every_field(fx: Fixture) {
    let s = fx.session("alice").await;
    let t = Utc.with_ymd_and_hms(2026, 5, 4, 3, 2, 1).unwrap() + Duration::microseconds(123_456);
    let e = SessionEvent::builder(Message::User {
        content: session_core::Content::text("look").with_part(ContentPart::Json {
            json: json!({"nested": [1, 2, {"k": null}]}),
        }),
        name: Some("ada".into()),
    })
    .id("evt-1")
    .timestamp(t)
    .branch("orch.researcher")
    .invocation_id("inv-1")
    .author("researcher")
    .state("k", json!({"deep": true}))
    .metadata("model", "gpt-4o")
    .metadata("latencyMs", 230)
    .token_estimate(42)
    .build()
    .unwrap();
    let call = SessionEvent::new(Message::assistant_tool_calls(
        "",
        vec![ToolCall {
            id: "c1".into(),
            name: "f".into(),
            arguments: "{not json".into(),
        }],
    ));
    let syn = SessionEvent::builder(Message::assistant("s"))
        .synthetic(CompactionSource::Custom("mine".into()))
        .build()
        .unwrap();
    fx.append(&s.id, vec![e.clone(), call.clone(), syn.clone()])
        .await;
    let got = fx.archive(&s.id).await;
    let mut want = vec![e, call, syn];
    for (i, w) in want.iter_mut().enumerate() {
        w.seq = i as u64 + 1;
        w.session_id.clone_from(&s.id);
    }
    assert_eq!(got, want);
    let ctx = fx.context(&s.id).await;
    assert_eq!(ctx, want);
}

/// Turn count counts only root-level, non-synthetic user messages.
pub async fn turn_count_counts_root_real_user_messages(fx: Fixture) {
    let s = fx.session("alice").await;
    let [p, a] = SessionEvent::summary_turn(
        "sum",
        CompactionSource::RecursiveSummarization,
        fx.clock.now(),
    );
    let sub = SessionEvent::builder(Message::user("sub-agent prompt"))
        .branch("orch.researcher")
        .build()
        .unwrap();
    fx.append(
        &s.id,
        vec![
            p,
            a,
            user("q1"),
            assistant("a1"),
            sub,
            user("q2"),
            assistant("a2"),
        ],
    )
    .await;
    assert_eq!(turn_count(&fx.context(&s.id).await), 2);
}

// ---------------------------------------------------------------- replace_context

/// A replace with the current version succeeds: the context is exactly the
/// new list in order (summary first), the version bumps, token totals follow.
pub async fn replace_context_with_current_version(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(&s.id, numbered("m", 4)).await;
    let ctx = fx.context(&s.id).await;
    let v = fx.repo.event_version(&s.id).await.unwrap();
    let [p, a] = SessionEvent::summary_turn(
        "m 1 and m 2 happened",
        CompactionSource::RecursiveSummarization,
        fx.clock.now(),
    );
    let mut new_ctx = vec![p, a];
    new_ctx.extend_from_slice(&ctx[2..]);
    let want_tokens: u64 = new_ctx.iter().map(|e| u64::from(e.token_estimate)).sum();
    assert!(fx.repo.replace_context(&s.id, new_ctx, v).await.unwrap());
    assert_eq!(fx.repo.event_version(&s.id).await.unwrap(), v + 1);
    let got = fx.context(&s.id).await;
    assert_eq!(
        texts(&got),
        [
            session_core::SUMMARY_PROMPT,
            "m 1 and m 2 happened",
            "m 3",
            "m 4"
        ]
    );
    assert!(got[0].is_synthetic() && got[1].is_synthetic());
    assert_eq!(got[0].seq, 5, "new summary events get new seqs");
    assert_eq!(got[2].seq, 3, "kept events keep their seqs");
    let session = fx.repo.get(&s.id).await.unwrap();
    assert_eq!(session.context_tokens, want_tokens);
    assert_eq!(session.event_count, 6);
    fx.append(&s.id, vec![user("m 5")]).await;
    assert_eq!(
        texts(&fx.context(&s.id).await).last().map(String::as_str),
        Some("m 5")
    );
}

/// A stale version returns `false` and changes nothing.
pub async fn replace_context_with_stale_version_changes_nothing(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(&s.id, numbered("m", 3)).await;
    let v = fx.repo.event_version(&s.id).await.unwrap();
    fx.append(&s.id, vec![user("m 4")]).await;
    let before = fx.repo.get(&s.id).await.unwrap();
    let ok = fx
        .repo
        .replace_context(&s.id, vec![assistant("summary")], v)
        .await
        .unwrap();
    assert!(!ok);
    assert_eq!(
        texts(&fx.context(&s.id).await),
        ["m 1", "m 2", "m 3", "m 4"]
    );
    assert_eq!(fx.archive(&s.id).await.len(), 4, "nothing archived either");
    assert_eq!(fx.repo.get(&s.id).await.unwrap(), before);
}

/// Every original event stays in the archive after a replace, verbatim.
pub async fn replace_context_keeps_the_archive(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(&s.id, numbered("m", 5)).await;
    let original = fx.archive(&s.id).await;
    let v = fx.repo.event_version(&s.id).await.unwrap();
    assert!(fx.repo.replace_context(&s.id, vec![], v).await.unwrap());
    assert!(fx.context(&s.id).await.is_empty());
    assert_eq!(fx.repo.get(&s.id).await.unwrap().context_tokens, 0);
    assert_eq!(fx.archive(&s.id).await, original);
    let dup = vec![original[0].clone(), original[0].clone()];
    assert_eq!(
        kind(fx.repo.replace_context(&s.id, dup, v + 1).await),
        ErrorKind::InvalidInput
    );
}

// ---------------------------------------------------------------- search

/// Search is a case-insensitive substring over the archive, synthetic summaries included.
pub async fn search_is_case_insensitive_over_the_archive(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(
        &s.id,
        vec![user("My cat is called Zebedee"), assistant("Nice name.")],
    )
    .await;
    let v = fx.repo.event_version(&s.id).await.unwrap();
    let [p, a] = SessionEvent::summary_turn(
        "User has a cat named ZEBEDEE.",
        CompactionSource::RecursiveSummarization,
        fx.clock.now(),
    );
    assert!(fx.repo.replace_context(&s.id, vec![p, a], v).await.unwrap());
    fx.append(&s.id, vec![user("unrelated")]).await;
    let hits = fx
        .repo
        .search(&SearchQuery::in_session(&s.id, "zebedee"))
        .await
        .unwrap();
    let got: Vec<String> = hits
        .items
        .iter()
        .map(|h| h.event.message.text().to_owned())
        .collect();
    assert_eq!(
        got,
        ["My cat is called Zebedee", "User has a cat named ZEBEDEE."]
    );
    assert!(hits.items.iter().all(|h| h.session_id == s.id));
    assert!(hits.items[1].event.is_synthetic());
    let hits = fx
        .repo
        .search(&SearchQuery::in_session(&s.id, "ebed"))
        .await
        .unwrap();
    assert_eq!(hits.items.len(), 2, "substrings match, not only words");
}

/// Results are chronological and paged (default page size 10).
pub async fn search_is_chronological_and_paged(fx: Fixture) {
    let s = fx.session("alice").await;
    let batch: Vec<SessionEvent> = (1..=25)
        .flat_map(|i| [user(&format!("needle {i}")), assistant("hay")])
        .collect();
    fx.append(&s.id, batch).await;
    let q = SearchQuery::in_session(&s.id, "NEEDLE");
    let p0 = fx.repo.search(&q).await.unwrap();
    assert_eq!(p0.items.len(), 10);
    assert!(p0.has_more);
    let p2 = fx.repo.search(&q.clone().page(2, 10)).await.unwrap();
    let got: Vec<String> = p2
        .items
        .iter()
        .map(|h| h.event.message.text().to_owned())
        .collect();
    let want: Vec<String> = (21..=25).map(|i| format!("needle {i}")).collect();
    assert_eq!(got, want);
    assert!(!p2.has_more);
    let seqs: Vec<u64> = p0.items.iter().map(|h| h.event.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
}

/// `%`, `_`, `*`, quotes, backslashes, parentheses, FTS and regex operators match literally.
pub async fn search_special_characters_match_literally(fx: Fixture) {
    let s = fx.session("alice").await;
    let hostile = [
        "100%",
        "a_b",
        "2*3",
        "say \"hi\"",
        "C:\\path",
        "f(x)",
        "cats NEAR dogs",
        "a.*b",
        "[abc]",
        "x?y",
        "it's",
        "^start$",
        "{1,2}",
        "a|b",
        "-neg",
        "col:val",
        "+plus",
        // FTS5 and Lucene query syntax, taken literally.
        "fox AND hound",
        "NOT owl",
        "OR",
        "near/3",
        "fuzzy~2",
        "boost^4",
        "/regex.*/",
        "a||b",
        "!bang",
        "title:(x)",
        "2026-01-01T00:00:00",
        "a\\*b",
        "0x00\u{0}nul",
        "emoji 😀 here",
    ];
    let batch: Vec<SessionEvent> = hostile.iter().map(|t| user(&format!("<{t}>"))).collect();
    fx.append(&s.id, batch).await;
    let decoy = "1000 aXb 23 say hi path fx cats dogs ab abc xy its start 12 ab neg colval plus \
                 fox hound owl near 3 fuzzy 2 boost 4 regex bang title x";
    fx.append(&s.id, vec![user(decoy)]).await;
    let stored: Vec<String> = hostile.iter().map(|t| format!("<{t}>")).collect();
    // Whole strings, and each special character on its own.
    let singles: Vec<String> = "%_*?[]\"\\()^$|{}:+-~!/'"
        .chars()
        .map(String::from)
        .collect();
    for t in hostile.iter().map(|t| (*t).to_owned()).chain(singles) {
        let hits = fx
            .repo
            .search(&SearchQuery::in_session(&s.id, &t).page(0, 100))
            .await
            .unwrap();
        let got: Vec<String> = hits
            .items
            .iter()
            .map(|h| h.event.message.text().to_owned())
            .collect();
        let mut want: Vec<String> = stored
            .iter()
            .filter(|text| text.to_lowercase().contains(&t.to_lowercase()))
            .cloned()
            .collect();
        if decoy.to_lowercase().contains(&t.to_lowercase()) {
            want.push(decoy.to_owned());
        }
        assert!(!want.is_empty(), "{t:?} is stored");
        assert_eq!(got, want, "query {t:?}");
    }
}

/// No match is an empty page, not an error; an empty query is `InvalidInput`.
pub async fn search_without_match_is_empty(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(&s.id, vec![user("hello")]).await;
    let hits = fx
        .repo
        .search(&SearchQuery::in_session(&s.id, "absent"))
        .await
        .unwrap();
    assert!(hits.items.is_empty());
    assert!(!hits.has_more);
    assert_eq!(
        kind(fx.repo.search(&SearchQuery::in_session(&s.id, "")).await),
        ErrorKind::InvalidInput
    );
}

/// A user-scoped search covers all that user's sessions in the app, and only those.
pub async fn search_across_a_users_sessions(fx: Fixture) {
    let a1 = fx.session_in("app1", "alice").await;
    let a2 = fx.session_in("app1", "alice").await;
    let b = fx.session_in("app1", "bob").await;
    let other_app = fx.session_in("app2", "alice").await;
    let t0 = fx.clock.now();
    let at = |min: i64, t: &str| {
        SessionEvent::builder(Message::user(t))
            .timestamp(t0 + Duration::minutes(min))
            .build()
            .unwrap()
    };
    fx.append(&a1.id, vec![at(1, "orange one"), at(3, "orange three")])
        .await;
    fx.append(&a2.id, vec![at(2, "orange two")]).await;
    fx.append(&b.id, vec![at(0, "orange bob")]).await;
    fx.append(&other_app.id, vec![at(0, "orange elsewhere")])
        .await;
    let hits = fx
        .repo
        .search(&SearchQuery::for_user("app1", "alice", "orange"))
        .await
        .unwrap();
    let got: Vec<(String, String)> = hits
        .items
        .iter()
        .map(|h| (h.session_id.clone(), h.event.message.text().to_owned()))
        .collect();
    assert_eq!(
        got,
        [
            (a1.id.clone(), "orange one".to_owned()),
            (a2.id.clone(), "orange two".to_owned()),
            (a1.id.clone(), "orange three".to_owned()),
        ]
    );
}

// ---------------------------------------------------------------- state

/// Unprefixed keys are session scope: applied with the event, not shared.
pub async fn state_session_scope(fx: Fixture) {
    let svc = fx.service();
    let o = owner();
    let s1 = service_session(&fx, &o).await;
    let s2 = service_session(&fx, &o).await;
    let e = SessionEvent::builder(Message::user("set"))
        .state("counter", 5)
        .state("lang", "en")
        .build()
        .unwrap();
    svc.append_events(&o, &s1.id, vec![e]).await.unwrap();
    let e = SessionEvent::builder(Message::user("unset"))
        .state("lang", Value::Null)
        .build()
        .unwrap();
    svc.append_events(&o, &s1.id, vec![e]).await.unwrap();
    assert_eq!(
        svc.get(&o, &s1.id).await.unwrap().state,
        map(&json!({"counter": 5}))
    );
    assert!(svc.get(&o, &s2.id).await.unwrap().state.is_empty());
}

/// `user:` keys are shared by all sessions of that user in that app, not by other users.
pub async fn state_user_scope_is_per_user_per_app(fx: Fixture) {
    let svc = fx.service();
    let alice = owner();
    let bob = Owner::new(APP, "bob");
    let alice_elsewhere = Owner::new("other-app", "alice");
    let a1 = service_session(&fx, &alice).await;
    let a2 = service_session(&fx, &alice).await;
    let b1 = service_session(&fx, &bob).await;
    let x1 = service_session(&fx, &alice_elsewhere).await;
    let e = SessionEvent::builder(Message::user("I'm Alice"))
        .state("user:name", "Alice")
        .build()
        .unwrap();
    svc.append_events(&alice, &a1.id, vec![e]).await.unwrap();
    assert_eq!(
        svc.get(&alice, &a2.id)
            .await
            .unwrap()
            .state
            .get("user:name"),
        Some(&json!("Alice"))
    );
    assert!(svc.get(&bob, &b1.id).await.unwrap().state.is_empty());
    assert!(svc
        .get(&alice_elsewhere, &x1.id)
        .await
        .unwrap()
        .state
        .is_empty());
    let later = service_session(&fx, &alice).await;
    assert_eq!(
        later.state.get("user:name"),
        Some(&json!("Alice")),
        "new sessions see it too"
    );
}

/// `app:` keys are shared by all sessions of the app, not across apps.
pub async fn state_app_scope_is_per_app(fx: Fixture) {
    let svc = fx.service();
    let alice = owner();
    let bob = Owner::new(APP, "bob");
    let other = Owner::new("other-app", "alice");
    let a = service_session(&fx, &alice).await;
    let b = service_session(&fx, &bob).await;
    let c = service_session(&fx, &other).await;
    let e = SessionEvent::builder(Message::user("v"))
        .state("app:version", "1.0")
        .build()
        .unwrap();
    svc.append_events(&alice, &a.id, vec![e]).await.unwrap();
    assert_eq!(
        svc.get(&bob, &b.id).await.unwrap().state.get("app:version"),
        Some(&json!("1.0"))
    );
    assert!(svc.get(&other, &c.id).await.unwrap().state.is_empty());
    let shared = fx.repo.shared_state(APP, "bob").await.unwrap();
    assert_eq!(shared.app, map(&json!({"app:version": "1.0"})));
    assert!(shared.user.is_empty());
}

/// `temp:` keys live only in the returned object: never stored, in state or in the event.
pub async fn state_temp_keys_are_never_persisted(fx: Fixture) {
    let svc = fx.service();
    let o = owner();
    let mut s = svc
        .create(
            CreateSessionRequest::builder("alice")
                .app(APP)
                .state("temp:boot", 1)
                .state("kept", 1)
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    let e = SessionEvent::builder(Message::user("x"))
        .state("temp:scratch", "draft")
        .state("step", 2)
        .build()
        .unwrap();
    svc.append_to(&mut s, vec![e]).await.unwrap();
    assert_eq!(
        s.state.get("temp:scratch"),
        Some(&json!("draft")),
        "visible in the returned object"
    );
    assert_eq!(s.state.get("step"), Some(&json!(2)));
    let stored = svc.get(&o, &s.id).await.unwrap();
    assert_eq!(stored.state, map(&json!({"kept": 1, "step": 2})));
    let events = fx.archive(&s.id).await;
    assert_eq!(events[0].state_delta, Some(map(&json!({"step": 2}))));
    // Through the repository directly, too.
    let e = SessionEvent::builder(Message::user("y"))
        .state("temp:only", true)
        .build()
        .unwrap();
    fx.append(&s.id, vec![e]).await;
    assert_eq!(fx.archive(&s.id).await[1].state_delta, None);
    assert_eq!(
        fx.repo.get(&s.id).await.unwrap().state,
        map(&json!({"kept": 1, "step": 2}))
    );
}

/// A delta lands in the same atomic step as its event: a rejected batch changes no state.
pub async fn state_delta_lands_atomically_with_its_event(fx: Fixture) {
    let s = fx.session("alice").await;
    let with_delta = SessionEvent::builder(Message::user("x"))
        .state("k", 1)
        .state("user:u", 1)
        .state("app:a", 1)
        .build()
        .unwrap();
    let mut bad = user("bad");
    bad.branch = Some("a..b".into());
    assert!(fx
        .repo
        .append(&s.id, vec![with_delta.clone(), bad])
        .await
        .is_err());
    assert!(fx.repo.get(&s.id).await.unwrap().state.is_empty());
    let shared = fx.repo.shared_state(APP, "alice").await.unwrap();
    assert!(shared.user.is_empty() && shared.app.is_empty());
    let out = fx.append(&s.id, vec![with_delta]).await;
    let got = fx.repo.get(&s.id).await.unwrap();
    assert_eq!(got.version, out.version);
    assert_eq!(got.state, map(&json!({"k": 1})));
    let shared = fx.repo.shared_state(APP, "alice").await.unwrap();
    assert_eq!(shared.user, map(&json!({"user:u": 1})));
    assert_eq!(shared.app, map(&json!({"app:a": 1})));
}

// ---------------------------------------------------------------- rewind

/// Rewind removes the invocation's events and all later ones from context and
/// archive, replays session state from the rest, and bumps the version.
pub async fn rewind_removes_invocation_and_later_events(fx: Fixture) {
    let svc = fx.service();
    let o = owner();
    let s = svc
        .create(
            CreateSessionRequest::builder("alice")
                .app(APP)
                .state("counter", 0)
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    let step = |inv: &str, text: &str, counter: i64| {
        SessionEvent::builder(Message::user(text))
            .invocation_id(inv)
            .state("counter", counter)
            .build()
            .unwrap()
    };
    svc.append_events(&o, &s.id, vec![step("inv-1", "one", 1)])
        .await
        .unwrap();
    svc.append_events(
        &o,
        &s.id,
        vec![step("inv-2", "two", 2), assistant("two done")],
    )
    .await
    .unwrap();
    svc.append_events(&o, &s.id, vec![step("inv-3", "three", 100)])
        .await
        .unwrap();
    let v = fx.repo.event_version(&s.id).await.unwrap();
    let after = svc.rewind(&o, &s.id, "inv-2").await.unwrap();
    assert_eq!(after.state.get("counter"), Some(&json!(1)));
    assert_eq!(after.version, v + 1);
    assert_eq!(texts(&fx.archive(&s.id).await), ["one"]);
    assert_eq!(texts(&fx.context(&s.id).await), ["one"]);
    assert_eq!(after.event_count, 1);
    // Seqs are never reused.
    let out = svc
        .append_message(&o, &s.id, Message::user("four"))
        .await
        .unwrap();
    assert_eq!(out.seqs, [5]);
    // Rewinding the first invocation restores the initial state.
    let after = svc.rewind(&o, &s.id, "inv-1").await.unwrap();
    assert_eq!(after.state.get("counter"), Some(&json!(0)));
    assert!(fx.archive(&s.id).await.is_empty());
}

/// Rewinding to an invocation the session never had is `NotFound` and changes nothing.
pub async fn rewind_unknown_invocation_is_not_found(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(&s.id, vec![user("x")]).await;
    let before = fx.repo.get(&s.id).await.unwrap();
    assert_eq!(
        kind(fx.repo.rewind(&s.id, "inv-nope").await),
        ErrorKind::NotFound
    );
    assert_eq!(fx.repo.get(&s.id).await.unwrap(), before);
}

// ---------------------------------------------------------------- isolation
// The matrix of every service call x owner is in `isolation.rs`.

// ---------------------------------------------------------------- limits and text

/// An event over the size limit is `InvalidInput` and nothing is written.
pub async fn oversize_event_is_rejected(fx: Fixture) {
    let s = fx.session("alice").await;
    let limit = Limits::default().max_event_bytes;
    let err = fx.repo.append(&s.id, vec![user(&"x".repeat(limit))]).await;
    assert_eq!(kind(err), ErrorKind::InvalidInput);
    assert!(fx.archive(&s.id).await.is_empty());
    assert_eq!(fx.repo.event_version(&s.id).await.unwrap(), 0);
    let fits = user(&"y".repeat(limit - 4096));
    fx.append(&s.id, vec![fits.clone()]).await;
    assert_eq!(fx.archive(&s.id).await[0].message, fits.message);
    fx.append(&s.id, vec![user("")]).await;
    assert_eq!(fx.archive(&s.id).await[1].message.text(), "");
}

/// NUL characters and every Unicode plane round-trip exactly, and are searchable.
pub async fn nul_and_astral_text_round_trips(fx: Fixture) {
    let s = fx.session("alice").await;
    let nasty = "nul:\0: bmp:é中: astral:𝄞🦀\u{10FFFF}: rtl:\u{202E}x: bom:\u{FEFF}: cr:\r\n:";
    let e = SessionEvent::builder(Message::user(nasty))
        .state("k\0ey", "v\0al🦀")
        .metadata("m", "\0")
        .build()
        .unwrap();
    fx.append(&s.id, vec![e.clone()]).await;
    let got = &fx.archive(&s.id).await[0];
    assert_eq!(got.message.text(), nasty);
    assert_eq!(got.state_delta, e.state_delta);
    assert_eq!(got.metadata, e.metadata);
    assert_eq!(
        fx.repo.get(&s.id).await.unwrap().state.get("k\0ey"),
        Some(&json!("v\0al🦀"))
    );
    let hits = fx
        .repo
        .search(&SearchQuery::in_session(&s.id, "𝄞🦀"))
        .await
        .unwrap();
    assert_eq!(hits.items.len(), 1);
    let hits = fx
        .repo
        .search(&SearchQuery::in_session(&s.id, "nul:\0:"))
        .await
        .unwrap();
    assert_eq!(hits.items.len(), 1);
}

/// Page sizes of 0 and over the maximum are `InvalidInput`; huge pages are empty.
pub async fn page_size_limits(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(&s.id, numbered("m", 3)).await;
    for size in [0, 1001, 1_000_000_000] {
        assert_eq!(
            kind(
                fx.repo
                    .events(&s.id, &EventFilter::archive().page(0, size))
                    .await
            ),
            ErrorKind::InvalidInput,
            "events page size {size}"
        );
        assert_eq!(
            kind(
                fx.repo
                    .search(&SearchQuery::in_session(&s.id, "m").page(0, size))
                    .await
            ),
            ErrorKind::InvalidInput
        );
        assert_eq!(
            kind(fx.repo.list(&SessionQuery::new().page(0, size)).await),
            ErrorKind::InvalidInput
        );
    }
    let far = fx
        .repo
        .events(&s.id, &EventFilter::archive().page(usize::MAX / 2, 1000))
        .await
        .unwrap();
    assert!(far.items.is_empty());
    assert_eq!(
        fx.texts(&s.id, &EventFilter::archive().page(0, 1000))
            .await
            .len(),
        3
    );
}

/// A session of 100,000 events (20 batches of 5,000): counters, the last
/// page, a deep page, the context's tail and a search for one event are right.
pub async fn session_of_100k_events_pages_and_searches(fx: Fixture) {
    const N: usize = 100_000;
    let s = fx.session("alice").await;
    for b in 0..20 {
        let batch: Vec<SessionEvent> = (0..5000)
            .map(|i| user(&format!("e{}", b * 5000 + i)))
            .collect();
        fx.append(&s.id, batch).await;
    }
    let got = fx.repo.get(&s.id).await.unwrap();
    assert_eq!((got.event_count, got.version), (N as u64, 20));
    let page = fx
        .repo
        .events(&s.id, &EventFilter::archive().page(99, 1000))
        .await
        .unwrap();
    assert_eq!(page.items.len(), 1000);
    assert!(!page.has_more);
    assert_eq!(page.items[0].message.text(), "e99000");
    assert_eq!(page.items[999].seq, N as u64);
    let deep = fx
        .repo
        .events(&s.id, &EventFilter::archive().page(73, 1000))
        .await
        .unwrap();
    assert_eq!(deep.items[0].seq, 73_001);
    assert!(deep.has_more);
    assert!(fx
        .repo
        .events(&s.id, &EventFilter::archive().page(100, 1000))
        .await
        .unwrap()
        .items
        .is_empty());
    assert_eq!(
        fx.texts(&s.id, &EventFilter::last(3)).await,
        ["e99997", "e99998", "e99999"]
    );
    let hits = fx
        .repo
        .search(&SearchQuery::in_session(&s.id, "e77777"))
        .await
        .unwrap();
    let found: Vec<u64> = hits.items.iter().map(|h| h.event.seq).collect();
    assert_eq!(found, [77_778]);
}

/// The injectable clock jumping back an hour, then forward a day: seqs and
/// versions still increase and nothing reorders; a session last active "in
/// the future" is not reset by an idle policy; expiry follows the clock.
pub async fn clock_jumps_back_and_forward(fx: Fixture) {
    let svc = fx.service();
    let o = owner();
    let req =
        ResolveRequest::new(APP, "alice", "clock-jumps").expiry(Expiry::Ttl(Duration::hours(12)));
    let policy = ResetPolicy::never().idle(Duration::minutes(30));
    let s = svc.resolve(&req, &policy).await.unwrap().session;
    let first = svc
        .append_message(&o, &s.id, Message::user("before the jump"))
        .await
        .unwrap();
    fx.clock.advance(Duration::hours(-1));
    let again = svc.resolve(&req, &policy).await.unwrap();
    assert!(!again.is_new, "last activity in the future is not idle");
    assert_eq!(again.session.id, s.id);
    let second = svc
        .append_message(&o, &s.id, Message::user("after going back"))
        .await
        .unwrap();
    assert_eq!(second.seqs, [first.seqs[0] + 1]);
    assert_eq!(second.version, first.version + 1);
    let both = ["before the jump", "after going back"];
    assert_eq!(texts(&fx.archive(&s.id).await), both);
    assert_eq!(texts(&fx.context(&s.id).await), both);
    let hits = svc
        .search(&o, &SearchQuery::in_session(&s.id, "jump"))
        .await
        .unwrap();
    assert_eq!(hits.items.len(), 1);

    // A day later, past the 12 h expiry.
    fx.clock.advance(Duration::hours(24));
    assert_eq!(kind(fx.repo.get(&s.id).await), ErrorKind::NotFound);
    assert_eq!(
        kind(fx.repo.append(&s.id, vec![user("late")]).await),
        ErrorKind::Expired
    );
    let fresh = svc.resolve(&req, &policy).await.unwrap();
    assert!(fresh.is_new);
    assert_ne!(fresh.session.id, s.id);
    let out = svc
        .append_message(&o, &fresh.session.id, Message::user("a new day"))
        .await
        .unwrap();
    assert_eq!(out.seqs, [1]);
    assert_eq!(fx.repo.purge_expired(fx.clock.now()).await.unwrap(), 1);
    assert_eq!(texts(&fx.archive(&fresh.session.id).await), ["a new day"]);
}

// ---------------------------------------------------------------- concurrency

/// 16 tasks × 250 appends to one session: 4,000 events, seqs 1..=4000, no
/// duplicates, every version 1..=4000 handed out once, and a concurrent
/// reader never sees the version go down.
pub async fn concurrent_appends_lose_nothing(fx: Fixture) {
    let s = fx.session("alice").await;
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let repo = fx.repo.clone();
        let id = s.id.clone();
        let done = done.clone();
        tokio::spawn(async move {
            let mut last = 0;
            let mut reads = 0u64;
            while !done.load(Ordering::Relaxed) {
                let v = repo.event_version(&id).await.unwrap();
                assert!(v >= last, "version went back from {last} to {v}");
                last = v;
                reads += 1;
                tokio::task::yield_now().await;
            }
            reads
        })
    };
    let mut writers = Vec::new();
    for t in 0..16 {
        let repo = fx.repo.clone();
        let id = s.id.clone();
        writers.push(tokio::spawn(async move {
            let mut versions = Vec::with_capacity(250);
            for i in 0..250 {
                let out = repo
                    .append(&id, vec![user(&format!("t{t} e{i}"))])
                    .await
                    .unwrap();
                versions.push(out.version);
            }
            versions
        }));
    }
    let mut versions = Vec::new();
    for w in writers {
        versions.extend(w.await.unwrap());
    }
    done.store(true, Ordering::Relaxed);
    assert!(reader.await.unwrap() > 0);
    versions.sort_unstable();
    assert_eq!(versions, (1..=4000).collect::<Vec<u64>>());
    let archive = fx.archive(&s.id).await;
    let seqs: Vec<u64> = archive.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=4000).collect::<Vec<u64>>());
    let unique: HashSet<&str> = archive.iter().map(|e| e.message.text()).collect();
    assert_eq!(unique.len(), 4000);
    // Each writer's events are in its own order.
    for t in 0..16 {
        let prefix = format!("t{t} ");
        let mine: Vec<&str> = archive
            .iter()
            .map(|e| e.message.text())
            .filter(|x| x.starts_with(&prefix))
            .collect();
        let want: Vec<String> = (0..250).map(|i| format!("t{t} e{i}")).collect();
        assert_eq!(mine, want);
    }
    assert_eq!(fx.repo.get(&s.id).await.unwrap().event_count, 4000);
}

/// 8 concurrent replaces on the same version: exactly one wins.
pub async fn concurrent_replace_exactly_one_wins(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(&s.id, numbered("m", 10)).await;
    let v = fx.repo.event_version(&s.id).await.unwrap();
    let ctx = fx.context(&s.id).await;
    let mut tasks = Vec::new();
    for t in 0..8 {
        let repo: Arc<dyn SessionRepository> = fx.repo.clone();
        let id = s.id.clone();
        let mut new_ctx = vec![assistant(&format!("summary by {t}"))];
        new_ctx.extend_from_slice(&ctx[5..]);
        tasks.push(tokio::spawn(async move {
            repo.replace_context(&id, new_ctx, v).await.unwrap()
        }));
    }
    let mut wins = 0;
    for t in tasks {
        if t.await.unwrap() {
            wins += 1;
        }
    }
    assert_eq!(wins, 1);
    assert_eq!(fx.repo.event_version(&s.id).await.unwrap(), v + 1);
    let got = fx.context(&s.id).await;
    assert_eq!(got.len(), 6);
    assert!(got[0].message.text().starts_with("summary by "));
    assert_eq!(
        fx.archive(&s.id).await.len(),
        11,
        "only the winner's summary was archived"
    );
}

// ---------------------------------------------------------------- resolve and end

/// `resolve` creates a session for a new key (`is_new`), then returns it (`!is_new`).
pub async fn resolve_returns_fresh_session(fx: Fixture) {
    let svc = fx.service();
    let req = ResolveRequest::new(APP, "alice", "telegram:chat-1:agent-a");
    let first = svc.resolve(&req, &ResetPolicy::never()).await.unwrap();
    assert!(first.is_new);
    assert_eq!(
        first.session.key.as_deref(),
        Some("telegram:chat-1:agent-a")
    );
    fx.clock.advance(Duration::minutes(5));
    let second = svc.resolve(&req, &ResetPolicy::never()).await.unwrap();
    assert!(!second.is_new);
    assert_eq!(second.session.id, first.session.id);
    let bob = svc
        .resolve(
            &ResolveRequest::new(APP, "bob", "telegram:chat-1:agent-a"),
            &ResetPolicy::never(),
        )
        .await
        .unwrap();
    assert!(bob.is_new, "keys are per user");
    assert_ne!(bob.session.id, first.session.id);
}

/// Past the idle timeout, `resolve` archives the old session and creates a new one.
pub async fn resolve_idle_timeout_starts_over(fx: Fixture) {
    let svc = fx.service();
    let policy = ResetPolicy::never().idle(Duration::minutes(30));
    let req = ResolveRequest::new(APP, "alice", "chat:1");
    let first = svc.resolve(&req, &policy).await.unwrap().session;
    fx.clock.advance(Duration::minutes(20));
    svc.append_message(&owner(), &first.id, Message::user("still here"))
        .await
        .unwrap();
    fx.clock.advance(Duration::minutes(20));
    let same = svc.resolve(&req, &policy).await.unwrap();
    assert!(!same.is_new, "activity 20 minutes ago keeps it alive");
    fx.clock.advance(Duration::minutes(31));
    let next = svc.resolve(&req, &policy).await.unwrap();
    assert!(next.is_new);
    assert_ne!(next.session.id, first.id);
    let old = fx.repo.get(&first.id).await.unwrap();
    assert_eq!(old.status, SessionStatus::Archived);
    assert_eq!(texts(&fx.archive(&first.id).await), ["still here"]);
}

/// Sessions last active before today's reset hour (at the policy's offset) start over.
pub async fn resolve_daily_reset(fx: Fixture) {
    let svc = fx.service();
    // 04:00 local at UTC+2 is 02:00 UTC.
    let policy = ResetPolicy::never().daily_at(4, 120);
    fx.clock
        .set(Utc.with_ymd_and_hms(2026, 6, 1, 23, 0, 0).unwrap()); // 01:00 local, June 2
    let req = ResolveRequest::new(APP, "alice", "chat:daily");
    let first = svc.resolve(&req, &policy).await.unwrap().session;
    fx.clock
        .set(Utc.with_ymd_and_hms(2026, 6, 2, 1, 30, 0).unwrap()); // 03:30 local
    assert!(!svc.resolve(&req, &policy).await.unwrap().is_new);
    fx.clock
        .set(Utc.with_ymd_and_hms(2026, 6, 2, 2, 30, 0).unwrap()); // 04:30 local
    let next = svc.resolve(&req, &policy).await.unwrap();
    assert!(
        next.is_new,
        "the 04:00 local reset passed since the last activity"
    );
    assert_eq!(
        fx.repo.get(&first.id).await.unwrap().status,
        SessionStatus::Archived
    );
    fx.clock
        .set(Utc.with_ymd_and_hms(2026, 6, 2, 20, 0, 0).unwrap());
    assert!(!svc.resolve(&req, &policy).await.unwrap().is_new);
}

/// A manual reset archives the active session and creates a new one on demand.
pub async fn resolve_manual_reset(fx: Fixture) {
    let svc = fx.service();
    let req = ResolveRequest::new(APP, "alice", "chat:manual");
    let first = svc
        .resolve(&req, &ResetPolicy::never())
        .await
        .unwrap()
        .session;
    let fresh = svc.reset(&req).await.unwrap();
    assert_ne!(fresh.id, first.id);
    assert_eq!(
        fx.repo.get(&first.id).await.unwrap().status,
        SessionStatus::Archived
    );
    let again = svc.resolve(&req, &ResetPolicy::never()).await.unwrap();
    assert!(!again.is_new);
    assert_eq!(again.session.id, fresh.id);
}

/// A key resolved without a user is one session shared by every user of the app.
pub async fn resolve_group_key_is_shared(fx: Fixture) {
    let svc = fx.service();
    let req = ResolveRequest::group(APP, "discord:channel-123");
    let first = svc.resolve(&req, &ResetPolicy::never()).await.unwrap();
    assert!(first.is_new);
    assert_eq!(first.session.user_id, GROUP_USER);
    let again = svc.resolve(&req, &ResetPolicy::never()).await.unwrap();
    assert!(!again.is_new);
    assert_eq!(again.session.id, first.session.id);
    let id = first.session.id;
    svc.append_message(
        &Owner::new(APP, "alice"),
        &id,
        Message::user("hi from alice"),
    )
    .await
    .unwrap();
    svc.append_message(&Owner::new(APP, "bob"), &id, Message::user("hi from bob"))
        .await
        .unwrap();
    assert_eq!(
        svc.messages(&Owner::new(APP, "carol"), &id)
            .await
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        kind(svc.messages(&Owner::new("other-app", "alice"), &id).await),
        ErrorKind::NotFound
    );
    let other = svc
        .resolve(
            &ResolveRequest::group("other-app", "discord:channel-123"),
            &ResetPolicy::never(),
        )
        .await
        .unwrap();
    assert_ne!(other.session.id, id, "groups are per app");
}

/// `end` archives: still readable and searchable, never returned by `resolve`.
pub async fn end_archives_but_keeps_readable(fx: Fixture) {
    let svc = fx.service();
    let o = owner();
    let req = ResolveRequest::new(APP, "alice", "chat:end");
    let s = svc
        .resolve(&req, &ResetPolicy::never())
        .await
        .unwrap()
        .session;
    svc.append_message(&o, &s.id, Message::user("the launch code is tulip"))
        .await
        .unwrap();
    let ended = svc.end(&o, &s.id).await.unwrap();
    assert_eq!(ended.status, SessionStatus::Archived);
    assert_eq!(svc.messages(&o, &s.id).await.unwrap().len(), 1);
    let hits = svc
        .search(&o, &SearchQuery::in_session(&s.id, "TULIP"))
        .await
        .unwrap();
    assert_eq!(hits.items.len(), 1);
    let next = svc.resolve(&req, &ResetPolicy::never()).await.unwrap();
    assert!(next.is_new);
    assert_ne!(next.session.id, s.id);
}

// ---------------------------------------------------------------- export and import

/// A dumped session re-imported into an empty store is identical: ids, seqs
/// (gaps after a rewind included), timestamps, version, context order,
/// state and shared scopes. Importing again changes nothing, and appends
/// continue after the last seq ever used.
pub async fn export_import_round_trips(fx: Fixture) {
    let svc = fx.service();
    let o = owner();
    let s = svc
        .create(
            CreateSessionRequest::builder("alice")
                .app(APP)
                .key("chat:export")
                .state("counter", 0)
                .metadata("tag", "x")
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    let step = |inv: &str, text: &str| {
        SessionEvent::builder(Message::user(text))
            .invocation_id(inv)
            .state("counter", 1)
            .state("user:name", "Ada")
            .state("app:v", 2)
            .build()
            .unwrap()
    };
    svc.append_events(
        &o,
        &s.id,
        vec![step("i1", "one"), assistant("two"), user("three")],
    )
    .await
    .unwrap();
    svc.append_events(&o, &s.id, vec![step("i2", "four")])
        .await
        .unwrap();
    svc.rewind(&o, &s.id, "i2").await.unwrap(); // leaves a gap: seq 4 is never reused
    svc.append_events(&o, &s.id, vec![user("five")])
        .await
        .unwrap();
    let ctx = fx.context(&s.id).await;
    let v = fx.repo.event_version(&s.id).await.unwrap();
    let [p, a] = SessionEvent::summary_turn(
        "one to three",
        CompactionSource::RecursiveSummarization,
        fx.clock.now(),
    );
    let mut new_ctx = vec![p, a];
    new_ctx.push(ctx[3].clone());
    assert!(fx.repo.replace_context(&s.id, new_ctx, v).await.unwrap());

    let dump = fx.repo.export_session(&s.id).await.unwrap();
    assert_eq!(
        dump.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1, 2, 3, 5, 6, 7]
    );
    assert_eq!(dump.context, [6, 7, 5]);
    assert_eq!(dump.last_seq, 7);
    assert_eq!(dump.shared.user.get("user:name"), Some(&json!("Ada")));
    // Round trip through JSON, as export files do.
    let text = serde_json::to_string(&dump).unwrap();
    let back: session_core::SessionDump = serde_json::from_str(&text).unwrap();
    assert_eq!(back, dump);

    assert!(fx.repo.delete(&s.id).await.unwrap());
    assert_eq!(
        fx.repo.import_session(back.clone()).await.unwrap(),
        session_core::ImportOutcome::Imported
    );
    assert_eq!(fx.repo.export_session(&s.id).await.unwrap(), dump);
    assert_eq!(fx.repo.get(&s.id).await.unwrap(), dump.session);
    assert_eq!(
        fx.repo.import_session(back).await.unwrap(),
        session_core::ImportOutcome::Unchanged
    );
    let out = fx.append(&s.id, vec![user("six")]).await;
    assert_eq!(out.seqs, [8]);
    assert_eq!(out.version, dump.session.version + 1);
    // Rewind still replays from the imported initial state.
    let after = svc.rewind(&o, &s.id, "i1").await.unwrap();
    assert_eq!(after.state.get("counter"), Some(&json!(0)));
    // Inconsistent dumps are refused before anything is written: a context
    // naming a seq the archive lacks, or naming one seq twice.
    let before = fx.repo.export_session(&s.id).await.unwrap();
    let mut missing = dump.clone();
    missing.context.push(99);
    let mut twice = dump.clone();
    twice.context.push(5);
    twice.session.version += 10; // newer, so it would be imported if valid
    for bad in [missing, twice] {
        assert_eq!(
            kind(fx.repo.import_session(bad).await),
            ErrorKind::InvalidInput
        );
    }
    assert_eq!(fx.repo.export_session(&s.id).await.unwrap(), before);
}
