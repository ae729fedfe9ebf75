//! Export and import: a dumped session round-trips exactly.

use serde_json::json;
use session_core::{
    Clock as _, CompactionSource, CreateSessionRequest, ErrorKind, Message, SessionEvent,
    SessionService,
};

use super::support::{kind, owner};
use crate::fixture::{assistant, user, Fixture, APP};

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
    svc.rewind(
        &o,
        &s.id,
        &session_core::RewindTo::before_invocation("i2").unwrap(),
    )
    .await
    .unwrap(); // leaves a gap: seq 4 is never reused
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
    let after = svc
        .rewind(
            &o,
            &s.id,
            &session_core::RewindTo::before_invocation("i1").unwrap(),
        )
        .await
        .unwrap()
        .session;
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
