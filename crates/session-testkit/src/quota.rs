//! Quotas: cases run by each backend's tests on a store built with
//! [`quota_limits`] (the conformance stores use the default: no quotas).

use std::sync::Arc;

use session_core::{
    ErrorKind, EventView, Limits, Message, NewSession, SessionEvent, SessionRepository,
    SessionRepositoryExt,
};

use crate::{texts, user};

/// The events a session may hold in [`quota_limits`].
pub const MAX_SESSION_EVENTS: u64 = 5;

/// The limits a backend test builds its store with for [`events_per_session`].
pub fn quota_limits() -> Limits {
    Limits::default().with_max_session_events(MAX_SESSION_EVENTS)
}

/// An append past the events quota is `QuotaExceeded` and writes nothing
/// (a batch is refused whole); a retried append of held events still
/// answers; 16 writers racing for the last places get exactly the quota
/// between them, never one more.
pub async fn events_per_session(repo: Arc<dyn SessionRepository>) {
    let now = chrono::Utc::now();
    let s = repo
        .create(NewSession::new("quota-app", "alice", now).unwrap())
        .await
        .unwrap();
    let first = user("one");
    repo.append(&s.id, vec![first.clone(), user("two"), user("three")])
        .await
        .unwrap();
    let version = repo.event_version(&s.id).await.unwrap();
    let err = repo
        .append(&s.id, vec![user("four"), user("five"), user("six")])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::QuotaExceeded);
    assert!(
        err.to_string().contains(s.id.as_str()) && err.to_string().contains("limit of 5"),
        "{err}"
    );
    assert_eq!(
        repo.event_version(&s.id).await.unwrap(),
        version,
        "nothing written"
    );
    let again = repo.append(&s.id, vec![first]).await.unwrap();
    assert_eq!(
        (again.seqs, again.written),
        (vec![1], 0),
        "a retry still answers"
    );
    repo.append(&s.id, vec![user("four"), user("five")])
        .await
        .unwrap();
    assert_eq!(
        repo.append(&s.id, vec![user("six")])
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::QuotaExceeded
    );
    let all = repo.all_events(&s.id, EventView::Archive).await.unwrap();
    assert_eq!(texts(&all), ["one", "two", "three", "four", "five"]);

    let race = repo
        .create(NewSession::new("quota-app", "alice", now).unwrap())
        .await
        .unwrap();
    let mut writers = Vec::new();
    for w in 0..16 {
        let repo = repo.clone();
        let id = race.id.clone();
        writers.push(tokio::spawn(async move {
            let e = SessionEvent::new(Message::user(format!("writer {w}")));
            match repo.append(&id, vec![e]).await {
                Ok(_) => true,
                Err(e) if e.kind() == ErrorKind::QuotaExceeded => false,
                Err(e) => panic!("append failed: {e}"),
            }
        }));
    }
    let mut landed = 0u64;
    for w in writers {
        if w.await.unwrap() {
            landed += 1;
        }
    }
    assert_eq!(landed, MAX_SESSION_EVENTS, "exactly the quota landed");
    let stored = repo.all_events(&race.id, EventView::Archive).await.unwrap();
    assert_eq!(u64::try_from(stored.len()).unwrap(), MAX_SESSION_EVENTS);
    assert_eq!(
        repo.get(&race.id).await.unwrap().event_count,
        MAX_SESSION_EVENTS
    );
}
