//! Appending events: gapless seqs, atomic batches, versions, idempotency, concurrent appends.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use session_core::{
    DropFailedToolCalls, DropSystemPrompts, ErrorKind, FilterAction, FilterFn, Limits, Message,
    SessionEvent, SessionService, ToolCall, Verdict, TOOL_ERROR_KEY,
};

use super::support::{kind, numbered, owner};
use crate::fixture::{assistant, sid, texts, user, Fixture, APP};

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

/// Re-sending an event id returns its existing seq and writes nothing;
/// the batch's new events are written.
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
    let mixed = fx.append(&s.id, vec![e1, e3.clone(), e3.clone()]).await;
    assert_eq!(mixed.seqs, [1, 3, 3]);
    assert_eq!(mixed.written, 1);
    // A new event ahead of a held one in the batch: the new one is
    // written, whatever a store tried before it found the held one.
    let late = fx.append(&s.id, vec![user("fourth"), e3]).await;
    assert_eq!((late.seqs, late.written), (vec![4, 3], 1));
    assert_eq!(
        texts(&fx.archive(&s.id).await),
        ["first", "second", "third", "fourth"]
    );
    assert_eq!(fx.repo.get(&s.id).await.unwrap().event_count, 4);
}

/// An empty batch, or a batch whose every event is already held, writes
/// nothing: no version bump and no new `updated_at`, also right after a
/// context replace or a write from the same handle.
pub async fn an_append_that_adds_nothing_changes_nothing(fx: Fixture) {
    let s = fx.session("alice").await;
    let sent = vec![user("one"), assistant("two")];
    fx.append(&s.id, sent.clone()).await;
    fx.summarize_first(&s.id, 1).await;
    let before = fx.repo.get(&s.id).await.unwrap();
    fx.clock.advance(chrono::Duration::hours(1));
    let empty = fx.append(&s.id, Vec::new()).await;
    assert_eq!((empty.written, empty.version), (0, before.version));
    let resent = fx.append(&s.id, sent).await;
    assert_eq!(resent.seqs, [1, 2]);
    assert_eq!((resent.written, resent.version), (0, before.version));
    let after = fx.repo.get(&s.id).await.unwrap();
    assert_eq!(after.updated_at, before.updated_at, "nothing written");
    assert_eq!(after.version, before.version);
    assert_eq!(after.event_count, before.event_count);
}

/// Appending to an id that does not exist is `NotFound`, and creates nothing.
pub async fn append_to_unknown_session_is_not_found(fx: Fixture) {
    assert_eq!(
        kind(fx.repo.append(&sid("ghost"), vec![user("x")]).await),
        ErrorKind::NotFound
    );
    assert_eq!(kind(fx.repo.get(&sid("ghost")).await), ErrorKind::NotFound);
    assert_eq!(
        kind(fx.repo.replace_context(&sid("ghost"), vec![], 0).await),
        ErrorKind::NotFound
    );
}

/// `append_owned` writes for the session's owner (and for any user of the
/// app into a group session); another owner's, an absent or an expired
/// session is `NotFound` and keeps what it held.
pub async fn append_owned_checks_the_owner(fx: Fixture) {
    let s = fx.session("alice").await;
    let bob = session_core::Owner::parse(APP, "bob").unwrap();
    let elsewhere = session_core::Owner::parse("other-app", "alice").unwrap();
    for stranger in [&bob, &elsewhere] {
        let refused = fx.repo.append_owned(stranger, &s.id, vec![user("x")]).await;
        assert_eq!(kind(refused), ErrorKind::NotFound, "{stranger:?}");
        // Unknown whatever the events: the owner is judged first.
        let mut twice = vec![user("x"), user("y")];
        let first = twice[0].id.clone();
        twice[1].id = first;
        let refused = fx.repo.append_owned(stranger, &s.id, twice).await;
        assert_eq!(
            kind(refused),
            ErrorKind::NotFound,
            "{stranger:?}, invalid batch"
        );
    }
    assert!(fx.archive(&s.id).await.is_empty(), "nothing was written");
    let out = fx
        .repo
        .append_owned(&owner(), &s.id, vec![user("mine")])
        .await
        .unwrap();
    assert_eq!(out.seqs, [1]);
    assert_eq!(texts(&fx.archive(&s.id).await), ["mine"]);
    let group = fx.session(session_core::GROUP_USER).await;
    let into_group = fx.repo.append_owned(&bob, &group.id, vec![user("hi all")]);
    assert_eq!(
        into_group.await.unwrap().seqs,
        [1],
        "a group session takes any user of its app"
    );
    assert_eq!(
        kind(
            fx.repo
                .append_owned(&owner(), &sid("ghost"), vec![user("x")])
                .await
        ),
        ErrorKind::NotFound
    );
    fx.clock.advance(chrono::Duration::days(61));
    assert_eq!(
        kind(
            fx.repo
                .append_owned(&owner(), &s.id, vec![user("late")])
                .await
        ),
        ErrorKind::NotFound,
        "an expired session is absent to its owner too"
    );
}

// ---------------------------------------------------------------- concurrency

/// 16 tasks × 250 appends to one session (fewer where the store asks:
/// [`Fixture::appends_per_writer`]): 4,000 events, seqs 1..=4000, no
/// duplicates, every version 1..=4000 handed out once, and a concurrent
/// reader never sees the version go down.
pub async fn concurrent_appends_lose_nothing(fx: Fixture) {
    let per_writer = fx.appends_per_writer;
    let total = 16 * per_writer;
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
            let mut versions = Vec::new();
            for i in 0..per_writer {
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
    assert_eq!(versions, (1..=total).collect::<Vec<u64>>());
    let archive = fx.archive(&s.id).await;
    let seqs: Vec<u64> = archive.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=total).collect::<Vec<u64>>());
    let unique: HashSet<&str> = archive.iter().map(|e| e.message.text()).collect();
    assert_eq!(u64::try_from(unique.len()).unwrap(), total);
    // Each writer's events are in its own order.
    for t in 0..16 {
        let prefix = format!("t{t} ");
        let mine: Vec<&str> = archive
            .iter()
            .map(|e| e.message.text())
            .filter(|x| x.starts_with(&prefix))
            .collect();
        let want: Vec<String> = (0..per_writer).map(|i| format!("t{t} e{i}")).collect();
        assert_eq!(mine, want);
    }
    assert_eq!(fx.repo.get(&s.id).await.unwrap().event_count, total);
}

/// Persist filters on the service (Sentinel's pre-filtering) run before
/// the store sees the batch: a stored system prompt and a failed tool call
/// (its result and, in the same batch, the call) are dropped, a caller's
/// rule redacts a secret; the rest is stored as one batch with gapless
/// seqs, and the outcome names every event dropped or redacted. A batch
/// filtered to nothing stores nothing and keeps the version.
pub async fn append_persist_filters_drop_and_redact_before_storing(fx: Fixture) {
    let s = fx.session("alice").await;
    let redact = FilterFn::new("redact-secrets", |e: &SessionEvent, _: &[SessionEvent]| {
        if e.message.text().contains("sk-secret") {
            let mut clean = e.clone();
            clean.message = Message::user(e.message.text().replace("sk-secret", "[redacted]"));
            Verdict::Redact(Box::new(clean))
        } else {
            Verdict::Keep
        }
    });
    let svc = fx
        .service()
        .with_persist_filter(Arc::new(DropSystemPrompts))
        .with_persist_filter(Arc::new(DropFailedToolCalls))
        .with_persist_filter(Arc::new(redact));
    let call = |id: &str| ToolCall::new(id, "search", &serde_json::json!({"q": id}));
    let failed = SessionEvent::builder(Message::tool_result("bad", "search", "timeout"))
        .metadata(TOOL_ERROR_KEY, true)
        .build()
        .unwrap();
    let batch = vec![
        SessionEvent::new(Message::system("You are a shop assistant.")),
        user("my key is sk-secret"),
        SessionEvent::new(Message::assistant_tool_calls(
            "",
            vec![call("good"), call("bad")],
        )),
        SessionEvent::new(Message::tool_result("good", "search", "found")),
        failed,
        assistant("done"),
    ];
    let ids: Vec<String> = batch.iter().map(|e| e.id.clone()).collect();
    let out = svc.append_events(&owner(), &s.id, batch).await.unwrap();
    assert_eq!((out.written, out.seqs.clone()), (4, vec![1, 2, 3, 4]));
    let reported: Vec<(&str, &str, FilterAction)> = out
        .filtered
        .iter()
        .map(|f| (f.event_id.as_str(), f.filter.as_str(), f.action))
        .collect();
    assert_eq!(
        reported,
        [
            (
                ids[0].as_str(),
                "drop-system-prompts",
                FilterAction::Dropped
            ),
            (
                ids[2].as_str(),
                "drop-failed-tool-calls",
                FilterAction::Redacted
            ),
            (
                ids[4].as_str(),
                "drop-failed-tool-calls",
                FilterAction::Dropped
            ),
            (ids[1].as_str(), "redact-secrets", FilterAction::Redacted),
        ]
    );
    let stored = fx.archive(&s.id).await;
    assert_eq!(
        texts(&stored),
        ["my key is [redacted]", "", "found", "done"]
    );
    assert_eq!(stored[0].id, ids[1], "a redacted event keeps its id");
    let calls: Vec<&str> = stored[1]
        .message
        .tool_calls()
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(calls, ["search"], "only the call that succeeded");
    assert_eq!(stored[1].message.tool_calls()[0].id, "good");
    // Everything filtered out: nothing stored, the version unchanged.
    let version = fx.repo.get(&s.id).await.unwrap().version;
    let out = svc
        .append_events(
            &owner(),
            &s.id,
            vec![SessionEvent::new(Message::system("again"))],
        )
        .await
        .unwrap();
    assert_eq!(
        (out.written, out.version, out.filtered.len()),
        (0, version, 1)
    );
    assert_eq!(fx.archive(&s.id).await.len(), 4);
}
