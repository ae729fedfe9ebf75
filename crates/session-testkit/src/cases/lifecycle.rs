//! The session lifecycle past `end`: an ended session takes no writes until reopened.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::json;
use session_core::{
    ErrorKind, Message, ResetPolicy, ResolveRequest, RewindTo, SessionService, SessionStatus,
    SessionUpdate,
};

use super::{kind, map, owner};
use crate::{texts, user, Fixture, APP};

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
