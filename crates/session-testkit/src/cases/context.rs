//! Rewriting the context: `replace_context` (compare-and-swap, concurrent replaces) and rewind.

use std::sync::Arc;

use serde_json::json;
use session_core::{
    Clock as _, CompactionSource, CreateSessionRequest, ErrorKind, Message, RewindTo, SessionEvent,
    SessionRepository, SessionRepositoryExt, SessionService,
};

use super::support::{kind, numbered, owner};
use crate::fixture::{assistant, iid, texts, user, Fixture, APP};

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
    // Verbatim: the same events, each now saying when it left the context.
    let after: Vec<SessionEvent> = fx
        .archive(&s.id)
        .await
        .into_iter()
        .map(|mut e| {
            assert!(e.left_context.is_some(), "seq {} left the context", e.seq);
            e.left_context = None;
            e
        })
        .collect();
    assert_eq!(after, original);
    let dup = vec![original[0].clone(), original[0].clone()];
    assert_eq!(
        kind(fx.repo.replace_context(&s.id, dup, v + 1).await),
        ErrorKind::InvalidInput
    );
}

// ---------------------------------------------------------------- concurrency

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
    let after = svc
        .rewind(&o, &s.id, &RewindTo::before_invocation("inv-2").unwrap())
        .await
        .unwrap()
        .session;
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
    let after = svc
        .rewind(&o, &s.id, &RewindTo::before_invocation("inv-1").unwrap())
        .await
        .unwrap()
        .session;
    assert_eq!(after.state.get("counter"), Some(&json!(0)));
    assert!(fx.archive(&s.id).await.is_empty());
}

/// Rewinding to an invocation the session never had is `NotFound` and changes nothing.
pub async fn rewind_unknown_invocation_is_not_found(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(&s.id, vec![user("x")]).await;
    let before = fx.repo.get(&s.id).await.unwrap();
    assert_eq!(
        kind(fx.repo.rewind(&s.id, &iid("inv-nope")).await),
        ErrorKind::NotFound
    );
    assert_eq!(fx.repo.get(&s.id).await.unwrap(), before);
}

/// A rewind after a compaction leaves the context as it was when the
/// rewound invocation started: the summary written after it goes, and the
/// turns it replaced (marked with `REPLACES_KEY`, as compaction writes it)
/// come back in seq order; the archive loses only what the rewind removes.
pub async fn rewind_after_compaction_restores_the_replaced_turns(fx: Fixture) {
    let s = fx.session("alice").await;
    for i in 1..=3 {
        let events = ["question", "answer"]
            .into_iter()
            .map(|what| {
                let m = if what == "question" {
                    Message::user(format!("{what} {i}"))
                } else {
                    Message::assistant(format!("{what} {i}"))
                };
                SessionEvent::builder(m)
                    .invocation_id(format!("i{i}"))
                    .build()
                    .unwrap()
            })
            .collect();
        fx.append(&s.id, events).await;
    }
    fx.summarize_first(&s.id, 4).await;
    let out = fx
        .repo
        .rewind_restoring(&s.id, &RewindTo::Invocation(iid("i3")))
        .await
        .unwrap();
    assert_eq!(out.removed, 4, "turn 3 and the summary written after it");
    assert_eq!(
        texts(&fx.context(&s.id).await),
        ["question 1", "answer 1", "question 2", "answer 2"]
    );
    assert_eq!(fx.archive(&s.id).await.len(), 4);
    assert_eq!(fx.repo.event_version(&s.id).await.unwrap(), out.version);
}

/// A rewind to a seq removes that event and every later one, replays the
/// state, and refuses a seq the session never assigned.
pub async fn rewind_to_a_seq_removes_it_and_later_events(fx: Fixture) {
    let s = fx.session("alice").await;
    let events = (1..=5)
        .map(|i| {
            SessionEvent::builder(Message::user(format!("m{i}")))
                .state("step", i)
                .build()
                .unwrap()
        })
        .collect();
    fx.append(&s.id, events).await;
    let out = fx.repo.rewind_to(&s.id, &RewindTo::Seq(4)).await.unwrap();
    assert_eq!(out.removed, 2);
    assert_eq!(texts(&fx.archive(&s.id).await), ["m1", "m2", "m3"]);
    assert_eq!(texts(&fx.context(&s.id).await), ["m1", "m2", "m3"]);
    let got = fx.repo.get(&s.id).await.unwrap();
    assert_eq!(
        got.state.get("step"),
        Some(&json!(3)),
        "state replayed to seq 3"
    );
    assert_eq!(got.version, out.version);
    for bad in [0, 6] {
        assert_eq!(
            kind(fx.repo.rewind_to(&s.id, &RewindTo::Seq(bad)).await),
            ErrorKind::NotFound,
            "seq {bad}"
        );
    }
    let next = fx.append(&s.id, vec![user("m6")]).await;
    assert_eq!(next.seqs, vec![6], "seqs are never reused after a rewind");
}
