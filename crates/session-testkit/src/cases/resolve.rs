//! `resolve` and `end`: fresh sessions, idle/daily/manual resets, group keys, archiving.

use chrono::{Duration, TimeZone, Utc};
use session_core::{
    ErrorKind, Message, Owner, ResetPolicy, ResolveRequest, SearchQuery, SessionService,
    SessionStatus, GROUP_USER,
};

use super::support::{kind, owner};
use crate::fixture::{texts, Fixture, APP};

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

/// Sessions last active before today's reset hour (in the policy's time zone) start over,
/// and the hour stays local across a daylight-saving change.
pub async fn resolve_daily_reset(fx: Fixture) {
    let svc = fx.service();
    // Berlin moves from UTC+1 to UTC+2 at 01:00 UTC on 2026-03-29: 04:00 local is then 02:00 UTC.
    let policy = ResetPolicy::never().daily_in(4, "Europe/Berlin").unwrap();
    fx.clock
        .set(Utc.with_ymd_and_hms(2026, 3, 28, 22, 0, 0).unwrap()); // 23:00 CET, March 28
    let req = ResolveRequest::new(APP, "alice", "chat:daily");
    let first = svc.resolve(&req, &policy).await.unwrap().session;
    fx.clock
        .set(Utc.with_ymd_and_hms(2026, 3, 29, 1, 30, 0).unwrap()); // 03:30 CEST
    assert!(!svc.resolve(&req, &policy).await.unwrap().is_new);
    fx.clock
        .set(Utc.with_ymd_and_hms(2026, 3, 29, 2, 30, 0).unwrap()); // 04:30 CEST (03:30 at UTC+1)
    let next = svc.resolve(&req, &policy).await.unwrap();
    assert!(
        next.is_new,
        "the 04:00 local reset passed since the last activity, in summer time"
    );
    assert_eq!(
        fx.repo.get(&first.id).await.unwrap().status,
        SessionStatus::Archived
    );
    fx.clock
        .set(Utc.with_ymd_and_hms(2026, 3, 29, 20, 0, 0).unwrap());
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
        &Owner::parse(APP, "alice").unwrap(),
        &id,
        Message::user("hi from alice"),
    )
    .await
    .unwrap();
    svc.append_message(
        &Owner::parse(APP, "bob").unwrap(),
        &id,
        Message::user("hi from bob"),
    )
    .await
    .unwrap();
    assert_eq!(
        svc.messages(&Owner::parse(APP, "carol").unwrap(), &id)
            .await
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        kind(
            svc.messages(&Owner::parse("other-app", "alice").unwrap(), &id)
                .await
        ),
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
