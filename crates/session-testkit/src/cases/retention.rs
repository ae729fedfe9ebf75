//! Retention inside a live session: archive prunes keep what must stay and
//! leave seqs, search and export consistent.

use std::collections::HashSet;

use chrono::Duration;
use serde_json::json;
use session_core::retention::{prune_archive, ArchiveRetention, RetentionRules, RETENTION_KEY};
use session_core::{
    Clock as _, ErrorKind, EventView, InMemoryRepository, Message, Owner, RewindTo, SearchQuery,
    SessionEvent, SessionId, SessionRepository, SessionRepositoryExt, SessionService,
    SessionStatus, SessionUpdate, StateMap,
};

use crate::fixture::{assistant, iid, texts, user, Fixture, APP};

fn seqs(events: &[SessionEvent]) -> Vec<u64> {
    events.iter().map(|e| e.seq).collect()
}

/// Keeping the latest 3 of 10 archived events removes the old ones outside
/// the context, but never a context event, a system message or a state
/// change; the version goes up once, `updated_at` stays, seqs continue,
/// search forgets the removed events, ids of kept events stay idempotent,
/// the export imports elsewhere, a stale version removes nothing and a
/// second run removes nothing more.
pub async fn retention_keeps_the_latest_events_and_what_must_stay(fx: Fixture) {
    let s = fx.session("alice").await;
    let mut events = vec![
        SessionEvent::new(Message::system("be brief")),
        user("zebra one"),
        assistant("zebra two"),
        SessionEvent::builder(Message::user("zebra three"))
            .state("plan", "B")
            .build()
            .unwrap(),
        assistant("zebra four"),
        user("zebra five"),
    ];
    events.extend((7..=10).map(|i| user(&format!("kept {i}"))));
    let sent = events.clone();
    fx.append(&s.id, events).await;
    let archive = fx.archive(&s.id).await;
    let context: Vec<SessionEvent> = std::iter::once(archive[0].clone())
        .chain(archive[6..].iter().cloned())
        .collect();
    let v = fx.repo.event_version(&s.id).await.unwrap();
    assert!(fx.repo.replace_context(&s.id, context, v).await.unwrap());
    let before = fx.repo.get(&s.id).await.unwrap();
    fx.clock.advance(Duration::hours(1));

    let stale = fx.repo.prune_events(&s.id, &[2], before.version - 1).await;
    assert_eq!(stale.unwrap(), None, "a stale version removes nothing");
    assert_eq!(fx.archive(&s.id).await.len(), 10);

    let policy = ArchiveRetention::keep_latest(3);
    let pruned = prune_archive(&*fx.repo, &s.id, &policy, fx.clock.now())
        .await
        .unwrap();
    assert_eq!(pruned.removed, 4, "seqs 2, 3, 5 and 6 go");
    assert_eq!(pruned.version, before.version + 1);
    assert_eq!(seqs(&fx.archive(&s.id).await), [1, 4, 7, 8, 9, 10]);
    assert_eq!(
        texts(&fx.context(&s.id).await),
        ["be brief", "kept 7", "kept 8", "kept 9", "kept 10"]
    );
    let after = fx.repo.get(&s.id).await.unwrap();
    assert_eq!(after.event_count, 6);
    assert_eq!(after.version, before.version + 1);
    assert_eq!(
        after.updated_at, before.updated_at,
        "a prune is not activity"
    );
    assert_eq!(after.context_tokens, before.context_tokens);
    assert_eq!(after.state, before.state, "the state change stays");

    let hits = fx
        .repo
        .search(&SearchQuery::in_session(&s.id, "zebra"))
        .await
        .unwrap();
    assert_eq!(
        hits.items.iter().map(|h| h.event.seq).collect::<Vec<_>>(),
        [4],
        "search finds only the kept zebra"
    );

    let dump = fx.repo.export_session(&s.id).await.unwrap();
    assert_eq!(seqs(&dump.events), [1, 4, 7, 8, 9, 10]);
    let elsewhere = InMemoryRepository::new();
    elsewhere.import_session(dump).await.unwrap();
    assert_eq!(elsewhere.get(&s.id).await.unwrap().event_count, 6);

    let resent = fx.append(&s.id, vec![sent[8].clone()]).await;
    assert_eq!((resent.seqs, resent.written), (vec![9], 0));
    assert_eq!(fx.append(&s.id, vec![user("next")]).await.seqs, [11]);
    let again = prune_archive(&*fx.repo, &s.id, &policy, fx.clock.now())
        .await
        .unwrap();
    assert_eq!(again.removed, 0, "everything left must stay");
}

/// An age policy removes the leading events older than the age, also on an
/// ended session (retention is storage upkeep, not a write of content);
/// an unknown session is `NotFound`.
pub async fn retention_by_age_removes_the_old_head_of_the_archive(fx: Fixture) {
    let s = fx.session("alice").await;
    let now = fx.clock.now();
    let at = |days: i64, text: &str| {
        SessionEvent::builder(Message::user(text))
            .timestamp(now - Duration::days(days))
            .build()
            .unwrap()
    };
    fx.append(
        &s.id,
        vec![
            at(5, "old a"),
            at(4, "old b"),
            at(0, "new c"),
            at(0, "new d"),
        ],
    )
    .await;
    let ctx = fx.context(&s.id).await;
    let v = fx.repo.event_version(&s.id).await.unwrap();
    assert!(fx
        .repo
        .replace_context(&s.id, ctx[3..].to_vec(), v)
        .await
        .unwrap());
    fx.repo
        .update(&s.id, SessionUpdate::new().status(SessionStatus::Archived))
        .await
        .unwrap();
    let policy =
        ArchiveRetention::younger_than(std::time::Duration::from_secs(2 * 86_400)).unwrap();
    let pruned = prune_archive(&*fx.repo, &s.id, &policy, now).await.unwrap();
    assert_eq!(pruned.removed, 2);
    assert_eq!(texts(&fx.archive(&s.id).await), ["new c", "new d"]);
    let gone: HashSet<u64> = [1, 2].into();
    assert!(fx
        .archive(&s.id)
        .await
        .iter()
        .all(|e| !gone.contains(&e.seq)));
    let ghost = session_core::SessionId::new("ghost").unwrap();
    assert_eq!(
        fx.repo
            .prune_events(&ghost, &[1], 0)
            .await
            .unwrap_err()
            .kind(),
        session_core::ErrorKind::NotFound
    );
}

/// Appends six events and leaves only the last one in the context.
async fn six_events_one_in_context(fx: &Fixture, id: &session_core::SessionId) {
    fx.append(id, (1..=6).map(|i| user(&format!("m{i}"))).collect())
        .await;
    let ctx = fx.context(id).await;
    let v = fx.repo.event_version(id).await.unwrap();
    assert!(fx
        .repo
        .replace_context(id, ctx[5..].to_vec(), v)
        .await
        .unwrap());
}

/// Through the service: a session's own policy (in its metadata) wins over
/// its app's default, setting one prunes nothing until a purge runs the
/// policies over the store, a session without any keeps everything, an
/// unreadable policy is `InvalidInput` for its session and does not stop
/// the purge, and with prune-on-append an append runs the policy.
pub async fn retention_policies_run_on_purge_and_on_append(fx: Fixture) {
    let rules = RetentionRules::new().app(APP, ArchiveRetention::keep_latest(4));
    let svc = fx.service().with_retention(rules);
    let owner = Owner::parse(APP, "alice").unwrap();
    let own = fx.session("alice").await;
    let by_app = fx.session("alice").await;
    let other = fx.session_in("other", "alice").await;
    let broken = fx.session("alice").await;
    for s in [&own, &by_app, &other, &broken] {
        six_events_one_in_context(&fx, &s.id).await;
    }
    let set = svc
        .set_retention(&owner, &own.id, Some(ArchiveRetention::keep_latest(2)))
        .await
        .unwrap();
    assert_eq!(
        ArchiveRetention::of_session(&set).unwrap(),
        Some(ArchiveRetention::keep_latest(2))
    );
    assert_eq!(fx.archive(&own.id).await.len(), 6, "setting prunes nothing");
    let mut meta = StateMap::new();
    meta.insert(RETENTION_KEY.into(), json!("forever"));
    fx.repo
        .update(&broken.id, SessionUpdate::new().metadata(meta))
        .await
        .unwrap();
    assert_eq!(
        svc.prune_archive(&owner, &broken.id)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidInput
    );

    let report = svc.prune_archives().await.unwrap();
    assert_eq!(
        (report.sessions, report.pruned_sessions, report.removed),
        (2, 2, 6)
    );
    assert_eq!(seqs(&fx.archive(&own.id).await), [5, 6]);
    assert_eq!(seqs(&fx.archive(&by_app.id).await), [3, 4, 5, 6]);
    assert_eq!(fx.archive(&other.id).await.len(), 6, "no policy, no prune");
    assert_eq!(fx.archive(&broken.id).await.len(), 6);

    let cleared = svc.set_retention(&owner, &own.id, None).await.unwrap();
    assert_eq!(ArchiveRetention::of_session(&cleared).unwrap(), None);

    let everywhere = RetentionRules::new().every_app(ArchiveRetention::keep_latest(3));
    let svc = fx
        .service()
        .with_retention(everywhere)
        .with_prune_on_append();
    let other_owner = Owner::parse("other", "alice").unwrap();
    svc.append_message(&other_owner, &other.id, Message::user("m7"))
        .await
        .unwrap();
    assert_eq!(
        seqs(&fx.archive(&other.id).await),
        [5, 6, 7],
        "the append ran the policy"
    );
}

/// After a prune, a rewind to an invocation starts at its first event
/// still held: an invocation with nothing left is `NotFound` and removes
/// nothing; one whose first event went rewinds from its next one, keeping
/// an event of another invocation in between.
pub async fn a_rewind_after_a_prune_starts_at_what_is_left(fx: Fixture) {
    let s = fx.session("alice").await;
    let turn = |inv: &str, text: &str| {
        SessionEvent::builder(Message::user(text))
            .invocation_id(inv)
            .build()
            .unwrap()
    };
    fx.append(
        &s.id,
        vec![
            turn("inv-a", "a1"),
            turn("inv-a", "a2"),
            turn("inv-b", "b1"),
            turn("inv-x", "x"),
            turn("inv-b", "b2"),
            turn("inv-c", "c1"),
            turn("inv-c", "c2"),
        ],
    )
    .await;
    let archive = fx.archive(&s.id).await;
    let mut context = vec![SessionEvent::new(Message::assistant("summary"))];
    context.extend(archive[5..].iter().cloned());
    let v = fx.repo.event_version(&s.id).await.unwrap();
    assert!(fx.repo.replace_context(&s.id, context, v).await.unwrap());
    let v = fx.repo.event_version(&s.id).await.unwrap();
    let pruned = fx.repo.prune_events(&s.id, &[1, 2, 3], v).await.unwrap();
    assert_eq!(pruned.map(|p| p.removed), Some(3));

    let gone = fx
        .repo
        .rewind_to(&s.id, &RewindTo::Invocation(iid("inv-a")))
        .await;
    assert_eq!(gone.unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(seqs(&fx.archive(&s.id).await), [4, 5, 6, 7, 8]);

    let out = fx
        .repo
        .rewind_to(&s.id, &RewindTo::Invocation(iid("inv-b")))
        .await
        .unwrap();
    assert_eq!(out.removed, 4);
    assert_eq!(texts(&fx.archive(&s.id).await), ["x"]);
}

/// `prune_events` removes only archived events outside the context: a seq
/// in the context, or one the archive does not hold (never assigned, or
/// already pruned), is `InvalidInput` naming the seq and nothing is
/// pruned; a stale version is still `None` first; seqs named twice go
/// once; the context, reads and the export stay whole (it imports
/// elsewhere).
pub async fn prune_refuses_context_events_and_seqs_the_archive_lacks(fx: Fixture) {
    let s = fx.session("alice").await;
    six_events_one_in_context(&fx, &s.id).await;
    let v = fx.repo.event_version(&s.id).await.unwrap();
    refused(&fx, &s.id, v, &[1, 6], 6).await;
    refused(&fx, &s.id, v, &[6], 6).await;
    refused(&fx, &s.id, v, &[2, 99], 99).await;
    refused(&fx, &s.id, v, &[0], 0).await;
    refused(&fx, &s.id, v, &[u64::MAX], u64::MAX).await;
    assert_eq!(
        fx.repo.prune_events(&s.id, &[6], v - 1).await.unwrap(),
        None,
        "a stale version changes nothing before the seqs are looked at"
    );

    let pruned = fx.repo.prune_events(&s.id, &[1, 2, 1], v).await.unwrap();
    assert_eq!(
        pruned.map(|p| (p.removed, p.version)),
        Some((2, v + 1)),
        "seqs named twice go once"
    );
    let err = fx.repo.prune_events(&s.id, &[2], v + 1).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "already pruned: {err}");
    assert_eq!(seqs(&fx.archive(&s.id).await), [3, 4, 5, 6]);
    assert_eq!(texts(&fx.context(&s.id).await), ["m6"]);

    let dump = fx.repo.export_session(&s.id).await.unwrap();
    let elsewhere = InMemoryRepository::new();
    elsewhere.import_session(dump).await.unwrap();
    let context = elsewhere
        .all_events(&s.id, EventView::Context)
        .await
        .unwrap();
    assert_eq!(texts(&context), ["m6"], "the export imports elsewhere");
}

/// `prune_events` never removes what rewind and fork replay, as the
/// retention policy never does: a stored system message or an event that
/// changed session state is `InvalidInput` naming it, nothing is pruned,
/// and the state a rewind replays stays whole; an archived plain event
/// beside them goes.
pub async fn prune_never_removes_what_rewind_replays(fx: Fixture) {
    let s = fx.session("alice").await;
    let with_state = SessionEvent::builder(Message::user("plan"))
        .state("step", 1)
        .build()
        .unwrap();
    let events = vec![
        SessionEvent::new(Message::system("be brief")),
        with_state,
        user("m3"),
        user("m4"),
    ];
    fx.append(&s.id, events).await;
    let ctx = fx.context(&s.id).await;
    let v = fx.repo.event_version(&s.id).await.unwrap();
    assert!(fx
        .repo
        .replace_context(&s.id, ctx[3..].to_vec(), v)
        .await
        .unwrap());
    let v = fx.repo.event_version(&s.id).await.unwrap();
    for seq in [1, 2] {
        let err = fx.repo.prune_events(&s.id, &[3, seq], v).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "seq {seq}: {err}");
        assert!(
            err.to_string().contains(&format!(
                "seq {seq} of session {} is a system message or a state change",
                s.id
            )),
            "{err}"
        );
        assert_eq!(fx.archive(&s.id).await.len(), 4, "nothing pruned");
        assert_eq!(fx.repo.event_version(&s.id).await.unwrap(), v);
    }
    let pruned = fx.repo.prune_events(&s.id, &[3], v).await.unwrap();
    assert_eq!(pruned.map(|p| p.removed), Some(1));
    assert_eq!(seqs(&fx.archive(&s.id).await), [1, 2, 4]);
    assert_eq!(fx.repo.get(&s.id).await.unwrap().state["step"], 1);
}

/// A prune of `asked` at `version` that must be `InvalidInput` naming seq
/// `named` and change nothing (six events archived, only the sixth in the context).
async fn refused(fx: &Fixture, id: &SessionId, version: u64, asked: &[u64], named: u64) {
    let err = fx.repo.prune_events(id, asked, version).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{asked:?}: {err}");
    assert!(
        err.to_string().contains(&format!("seq {named}")),
        "{asked:?}: the error names seq {named}: {err}"
    );
    assert_eq!(
        fx.repo.event_version(id).await.unwrap(),
        version,
        "{asked:?}"
    );
    assert_eq!(fx.archive(id).await.len(), 6, "{asked:?}: nothing pruned");
    assert_eq!(seqs(&fx.context(id).await), [6], "{asked:?}");
}
