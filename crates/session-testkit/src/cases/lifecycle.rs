//! The session lifecycle: an ended session takes no writes until reopened; forks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use chrono::Duration;
use serde_json::json;
use session_core::{
    Clock as _, Erased, ErrorKind, ForkAt, Message, NewSession, Owner, ResetPolicy, ResolveRequest,
    RewindTo, SearchQuery, SessionEvent, SessionId, SessionQuery, SessionService, SessionStatus,
    SessionUpdate, FORKED_AT_SEQ, FORKED_FROM,
};

use super::support::{kind, map, owner, service_session};
use crate::fixture::{app_name, assistant, iid, texts, user, user_id, Fixture, APP};

/// After `end`, appends, context replaces, rewinds and state or metadata
/// updates are `SessionEnded` and write nothing; a retried append of an
/// event already held still answers as before; status and expiry changes
/// work; `reopen` makes it writable again and `resolve` may return it.
pub async fn an_ended_session_refuses_writes_until_reopened(fx: Fixture) {
    let svc = fx.service();
    let o = owner();
    let req = ResolveRequest::new(APP, "alice", "chat:ended");
    let s = svc
        .resolve(&req, &ResetPolicy::never())
        .await
        .unwrap()
        .session;
    let held = user("before the end");
    let first = fx.repo.append(&s.id, vec![held.clone()]).await.unwrap();
    let ended = svc.end(&o, &s.id).await.unwrap();
    assert_eq!(ended.status, SessionStatus::Archived);

    let refused = svc
        .append_message(&o, &s.id, Message::user("after the end"))
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::SessionEnded);
    assert!(
        refused.to_string().contains(s.id.as_str()) && refused.to_string().contains("reopen"),
        "the message names the session and the way out: {refused}"
    );
    let again = fx.repo.append(&s.id, vec![held.clone()]).await.unwrap();
    assert_eq!(
        (again.seqs.clone(), again.written),
        (first.seqs.clone(), 0),
        "a retried append of a held event is still idempotent"
    );
    assert_eq!(
        kind(
            fx.repo
                .append(&s.id, vec![held.clone(), user("one more")])
                .await
        ),
        ErrorKind::SessionEnded
    );
    assert_eq!(
        kind(
            fx.repo
                .replace_context(&s.id, vec![user("summary")], ended.version)
                .await
        ),
        ErrorKind::SessionEnded
    );
    assert_eq!(
        kind(fx.repo.rewind_to(&s.id, &RewindTo::Seq(1)).await),
        ErrorKind::SessionEnded
    );
    let state = SessionUpdate::new().state(map(&json!({"step": 2})));
    assert_eq!(
        kind(svc.update(&o, &s.id, state.clone()).await),
        ErrorKind::SessionEnded
    );
    assert_eq!(
        kind(
            svc.update(
                &o,
                &s.id,
                SessionUpdate::new().metadata(map(&json!({"k": 1})))
            )
            .await
        ),
        ErrorKind::SessionEnded
    );
    let unchanged = fx.repo.get(&s.id).await.unwrap();
    assert_eq!(unchanged.version, ended.version, "nothing was written");
    assert_eq!(texts(&fx.archive(&s.id).await), ["before the end"]);
    assert!(unchanged.state.is_empty());

    // Ending again and changing the expiry are allowed.
    svc.end(&o, &s.id).await.unwrap();
    svc.update(&o, &s.id, SessionUpdate::new().expires_at(None))
        .await
        .unwrap();
    assert!(
        svc.resolve(&req, &ResetPolicy::never())
            .await
            .unwrap()
            .is_new
    );

    let reopened = svc.reopen(&o, &s.id).await.unwrap();
    assert_eq!(reopened.status, SessionStatus::Active);
    let out = svc
        .append_message(&o, &s.id, Message::user("after the reopen"))
        .await
        .unwrap();
    assert_eq!(out.seqs, [2], "seqs go on where they stopped");
    svc.update(&o, &s.id, state).await.unwrap();
    let back = svc.resolve(&req, &ResetPolicy::never()).await.unwrap();
    assert!(!back.is_new);
    assert_eq!(
        back.session.id, s.id,
        "the most recently active session of the key is the one resolved"
    );
}

/// Appends racing an `end`: every acknowledged append is kept, none is
/// acknowledged after the end (its version is below the end's), and once
/// `end` returns, every append is `SessionEnded`.
pub async fn appends_racing_an_end_land_before_it_or_not_at_all(fx: Fixture) {
    const WRITERS: usize = 4;
    let svc = Arc::new(fx.service());
    let o = owner();
    let s = fx.session("alice").await;
    let landed = Arc::new(AtomicUsize::new(0));
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let repo = fx.repo.clone();
        let id = s.id.clone();
        let landed = landed.clone();
        writers.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            for i in 0..100_000 {
                match repo.append(&id, vec![user(&format!("w{w} e{i}"))]).await {
                    Ok(out) => {
                        acked.push((format!("w{w} e{i}"), out.version));
                        landed.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) if e.kind() == ErrorKind::SessionEnded => return acked,
                    Err(e) => panic!("append failed: {e}"),
                }
                tokio::task::yield_now().await;
            }
            panic!("writer {w} never saw the end");
        }));
    }
    // End while the writers are in full flow.
    while landed.load(Ordering::Relaxed) < 2 * WRITERS {
        tokio::task::yield_now().await;
    }
    let ended = svc.end(&o, &s.id).await.unwrap();
    let mut acked = Vec::new();
    for w in writers {
        acked.extend(w.await.unwrap());
    }
    for (text, version) in &acked {
        assert!(
            *version < ended.version,
            "{text} was acknowledged at version {version}, after the end at {}",
            ended.version
        );
    }
    let mut stored = texts(&fx.archive(&s.id).await);
    let mut want: Vec<String> = acked.into_iter().map(|(t, _)| t).collect();
    stored.sort();
    want.sort();
    assert_eq!(stored, want, "exactly the acknowledged appends are stored");
    assert_eq!(
        kind(fx.repo.append(&s.id, vec![user("late")]).await),
        ErrorKind::SessionEnded
    );
}

/// A fork holds the source's archive up to the fork point, the context the
/// source had there (turns a later summary replaced come back), the state
/// replayed to it and a reference to its parent; the source is untouched,
/// appends and searches of either never show in the other, and `list`
/// finds a session's forks.
pub async fn fork_copies_up_to_the_point_and_never_shares_appends(fx: Fixture) {
    let svc = fx.service();
    let o = owner();
    let s = fx.session("alice").await;
    let turn = |i: u64| -> Vec<SessionEvent> {
        [
            Message::user(format!("question {i}")),
            Message::assistant(format!("answer {i}")),
        ]
        .into_iter()
        .map(|m| {
            SessionEvent::builder(m)
                .invocation_id(format!("i{i}"))
                .state("step", i)
                .build()
                .unwrap()
        })
        .collect()
    };
    for i in 1..=3 {
        fx.append(&s.id, turn(i)).await;
    }
    // Turns 1 and 2 compacted into a summary (seqs 7 and 8), then turn 4 (9, 10).
    fx.summarize_first(&s.id, 4).await;
    fx.append(&s.id, turn(4)).await;
    let source_before = fx.repo.export_session(&s.id).await.unwrap();
    let summary_texts: Vec<String> = texts(&fx.context(&s.id).await)[..2].to_vec();

    // Before turn 4: the compacted context, as the source had it then.
    let a = svc
        .fork(&o, &s.id, &ForkAt::Invocation(iid("i4")))
        .await
        .unwrap();
    assert_ne!(a.id, s.id);
    assert_eq!((a.app.as_str(), a.user_id.as_str()), (APP, "alice"));
    assert_eq!(a.status, SessionStatus::Active);
    assert_eq!(a.metadata.get(FORKED_FROM), Some(&json!(s.id.as_str())));
    assert_eq!(a.metadata.get(FORKED_AT_SEQ), Some(&json!(8)));
    assert_eq!(
        a.state.get("step"),
        Some(&json!(3)),
        "state replayed to the fork point"
    );
    let a_archive = fx.archive(&a.id).await;
    assert_eq!(a_archive.len(), 8);
    assert!(
        a_archive[..4].iter().all(|e| e.left_context.is_some())
            && a_archive[4..].iter().all(|e| e.left_context.is_none()),
        "the fork keeps when its compacted turns left the context"
    );
    let mut want = summary_texts.clone();
    want.extend(["question 3".to_owned(), "answer 3".to_owned()]);
    assert_eq!(texts(&fx.context(&a.id).await), want);

    // Through seq 6, before the summary: the replaced turns are back.
    let b = svc.fork(&o, &s.id, &ForkAt::Seq(6)).await.unwrap();
    assert_eq!(
        texts(&fx.context(&b.id).await),
        [
            "question 1",
            "answer 1",
            "question 2",
            "answer 2",
            "question 3",
            "answer 3"
        ]
    );
    assert_eq!(fx.archive(&b.id).await.len(), 6);
    assert!(
        fx.archive(&b.id)
            .await
            .iter()
            .all(|e| e.left_context.is_none()),
        "in the fork, no event ever left the context"
    );
    let c = svc.fork(&o, &s.id, &ForkAt::Latest).await.unwrap();
    assert_eq!(fx.archive(&c.id).await.len(), 10);
    assert_eq!(c.state.get("step"), Some(&json!(4)));

    // The source is untouched.
    assert_eq!(fx.repo.export_session(&s.id).await.unwrap(), source_before);

    // Appends and searches stay apart.
    let out = svc
        .append_message(&o, &b.id, Message::user("only in the fork"))
        .await
        .unwrap();
    assert_eq!(out.seqs, [7], "the fork's seqs go on from its cut");
    svc.append_message(&o, &s.id, Message::user("only in the source"))
        .await
        .unwrap();
    let found = |id: &SessionId, q: &str| {
        let svc = &svc;
        let o = &o;
        let query = SearchQuery::in_session(id, q);
        async move { svc.search(o, &query).await.unwrap().items.len() }
    };
    assert_eq!(found(&b.id, "only in the fork").await, 1);
    assert_eq!(found(&s.id, "only in the fork").await, 0);
    assert_eq!(found(&b.id, "only in the source").await, 0);
    assert_eq!(found(&a.id, "only in the source").await, 0);
    assert_eq!(
        found(&b.id, "question 1").await,
        1,
        "the fork's copy is searchable"
    );

    let forks = svc
        .list(&o, SessionQuery::new().forks_of(&s.id).page(0, 10))
        .await
        .unwrap();
    let mut ids: Vec<&str> = forks.items.iter().map(|f| f.id.as_str()).collect();
    ids.sort_unstable();
    let mut want = vec![a.id.as_str(), b.id.as_str(), c.id.as_str()];
    want.sort_unstable();
    assert_eq!(ids, want);

    assert_eq!(
        kind(svc.fork(&o, &s.id, &ForkAt::Seq(99)).await),
        ErrorKind::NotFound
    );
    assert_eq!(
        kind(svc.fork(&o, &s.id, &ForkAt::Invocation(iid("nope"))).await),
        ErrorKind::NotFound
    );
    assert_eq!(
        kind(
            svc.fork(
                &Owner::parse(APP, "mallory").unwrap(),
                &s.id,
                &ForkAt::Latest
            )
            .await
        ),
        ErrorKind::NotFound
    );
    // An ended session forks into an active one.
    svc.end(&o, &s.id).await.unwrap();
    let d = svc.fork(&o, &s.id, &ForkAt::Latest).await.unwrap();
    assert_eq!(d.status, SessionStatus::Active);
    svc.append_message(&o, &d.id, Message::user("a new start"))
        .await
        .unwrap();
}

/// A fork into an id that already holds a fork of the same source (a retry
/// whose answer was lost) returns that fork and copies nothing again; an id
/// held by any other session is `AlreadyExists`. A whole-session fork holds
/// what its source holds, byte for byte as stored.
pub async fn a_repeated_fork_returns_the_fork_it_made(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(&s.id, vec![user("one"), assistant("two"), user("three")])
        .await;
    let other = fx.session("alice").await;
    let id = SessionId::generate();
    let now = fx.clock.now();
    let first = fx
        .repo
        .fork_session(&s.id, &ForkAt::Latest, id.clone(), now)
        .await
        .unwrap();
    let again = fx
        .repo
        .fork_session(&s.id, &ForkAt::Seq(1), id.clone(), now)
        .await
        .unwrap();
    assert_eq!(again, first, "the fork that landed is returned");
    assert_eq!(fx.archive(&id).await.len(), 3, "nothing copied twice");
    let source = fx.repo.get(&s.id).await.unwrap();
    assert_eq!(
        (first.event_count, first.event_bytes),
        (source.event_count, source.event_bytes)
    );
    assert_eq!(
        kind(
            fx.repo
                .fork_session(&other.id, &ForkAt::Latest, id.clone(), now)
                .await
        ),
        ErrorKind::AlreadyExists
    );
    assert_eq!(
        kind(
            fx.repo
                .fork_session(&s.id, &ForkAt::Latest, other.id.clone(), now)
                .await
        ),
        ErrorKind::AlreadyExists
    );
    assert_eq!(fx.archive(&other.id).await.len(), 0);
}

/// `erase_user` removes every session of the user in the app (active,
/// ended, expired but not purged, forks), their events and search entries,
/// and the `user:` state, and reports the counts; other users, other apps,
/// group sessions and `app:` state stay; a second call erases nothing.
pub async fn erase_user_removes_everything_of_the_user_and_nothing_else(fx: Fixture) {
    const CANARY: &str = "canary-7f3a9 the secret of alice";
    let svc = fx.service();
    let alice = owner();
    let bob = Owner::parse(APP, "bob").unwrap();
    let canary = |state: bool| {
        let b = SessionEvent::builder(Message::user(CANARY));
        if state {
            b.state("user:secret", CANARY).state("app:release", "7")
        } else {
            b
        }
        .build()
        .unwrap()
    };
    let s1 = fx.session("alice").await;
    fx.append(&s1.id, vec![canary(true), user("second")]).await;
    let ended = fx.session("alice").await;
    fx.append(&ended.id, vec![canary(false)]).await;
    svc.end(&alice, &ended.id).await.unwrap();
    let expiring = fx
        .repo
        .create(
            NewSession::new(APP, "alice", fx.clock.now())
                .unwrap()
                .with_expires_at(Some(fx.clock.now() + Duration::hours(1))),
        )
        .await
        .unwrap();
    fx.append(&expiring.id, vec![canary(false)]).await;
    let fork = svc.fork(&alice, &s1.id, &ForkAt::Latest).await.unwrap();
    let elsewhere = fx.session_in("other-app", "alice").await;
    fx.append(&elsewhere.id, vec![canary(false)]).await;
    let b1 = fx.session("bob").await;
    let bob_event = SessionEvent::builder(Message::user("bob's own words"))
        .state("user:name", "Bob")
        .build()
        .unwrap();
    fx.append(&b1.id, vec![bob_event]).await;
    let group = svc
        .resolve(
            &ResolveRequest::group(APP, "chat:team"),
            &ResetPolicy::never(),
        )
        .await
        .unwrap()
        .session;
    svc.append_message(&alice, &group.id, Message::user("said in the group"))
        .await
        .unwrap();
    fx.clock.advance(Duration::hours(2));

    let erased = svc.erase_user(&alice).await.unwrap();
    assert_eq!(
        erased,
        Erased {
            sessions: 4,
            events: 6,
            user_state: true
        },
        "s1, the ended one, the expired one and the fork"
    );
    for id in [&s1.id, &ended.id, &expiring.id, &fork.id] {
        assert_eq!(kind(fx.repo.get(id).await), ErrorKind::NotFound);
        assert_eq!(kind(fx.repo.export_session(id).await), ErrorKind::NotFound);
    }
    let app = app_name(APP);
    let shared = fx.repo.shared_state(&app, &user_id("alice")).await.unwrap();
    assert!(shared.user.is_empty(), "alice's user: state is gone");
    assert_eq!(
        shared.app.get("app:release"),
        Some(&json!("7")),
        "app: state stays"
    );
    assert!(svc
        .list(&alice, SessionQuery::new().page(0, 50))
        .await
        .unwrap()
        .items
        .is_empty());
    let across = SearchQuery::for_user(APP, "alice", "canary");
    assert!(svc.search(&alice, &across).await.unwrap().items.is_empty());

    // Everyone and everything else stays.
    assert_eq!(fx.archive(&elsewhere.id).await.len(), 1);
    assert_eq!(fx.archive(&b1.id).await.len(), 1);
    assert_eq!(
        svc.get(&bob, &b1.id).await.unwrap().state.get("user:name"),
        Some(&json!("Bob"))
    );
    assert_eq!(texts(&fx.archive(&group.id).await), ["said in the group"]);

    assert_eq!(svc.erase_user(&alice).await.unwrap(), Erased::default());
    let again = service_session(&fx, &alice).await;
    let state = svc.get(&alice, &again.id).await.unwrap().state;
    assert_eq!(
        state.get("user:secret"),
        None,
        "a new session of hers starts clean"
    );
}
