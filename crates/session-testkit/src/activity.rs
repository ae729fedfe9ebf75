//! Activity in whole seconds: stores whose activity indexes hold the
//! activity time's whole seconds (`active_at`, SQLite and PostgreSQL) run
//! [`seconds_follow_each_append`] with a reader of their stored columns.

use session_core::{
    Clock as _, ManualClock, Message, NewSession, SessionEvent, SessionId, SessionQuery,
    SessionRepository,
};

/// Three new sessions of `app` (users `a`, `b`, `c`) created at `clock`'s time, in that order.
pub async fn three_sessions(
    repo: &dyn SessionRepository,
    clock: &ManualClock,
    app: &str,
) -> Vec<SessionId> {
    let mut ids = Vec::new();
    for user in ["a", "b", "c"] {
        let new = NewSession::new(app, user, clock.now()).expect("a valid session");
        ids.push(repo.create(new).await.expect("create").id);
    }
    ids
}

/// Appends to each of `ids` (oldest first, 0.7 s apart on `clock`), checks
/// after each that the stored whole seconds (`stored`: `active_at` and
/// `updated_at` in microseconds, as the store holds them) follow
/// `updated_at`, and that a list of `app` gives `ids` in their order, the
/// newest activity first. `ids` must be every session of `app`.
pub async fn seconds_follow_each_append(
    repo: &dyn SessionRepository,
    clock: &ManualClock,
    app: &str,
    ids: &[SessionId],
    stored: impl AsyncFn(&SessionId) -> (i64, i64),
) {
    for (step, id) in ids.iter().enumerate().rev() {
        clock.advance(chrono::Duration::milliseconds(700));
        let event = SessionEvent::new(Message::user(format!("step {step}")));
        repo.append(id, vec![event]).await.expect("append");
        let (active, updated) = stored(id).await;
        assert_eq!(active, updated.div_euclid(1_000_000), "session {step}");
    }
    let listed: Vec<SessionId> = repo
        .list(&SessionQuery::default().app(app))
        .await
        .expect("list")
        .items
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(listed, ids, "newest activity first");
}
