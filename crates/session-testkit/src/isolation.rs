//! The isolation matrix: every owner-scoped call of [`SessionService`] ×
//! (right owner, wrong user, wrong app), for a user's session and for a
//! group session.
//!
//! A wrong owner must get `NotFound` on every call that names the session,
//! exactly as for an id that does not exist (same error, same message), must
//! see nothing of it in lists and searches, and must leave it byte-for-byte
//! as it was: its export (session, archive, context, state, counters) and its
//! owner's shared `user:`/`app:` scopes are compared before and after. The
//! right owner's same call then succeeds, which proves each row exercises
//! the call rather than failing for an unrelated reason.
//!
//! [`Call::ALL`] lists the calls; `create` and `purge_expired` take no
//! owner and are covered by their own cases. A method added to
//! `SessionService` gets a variant here.

use serde_json::json;
use session_core::{
    ErrorKind, EventFilter, Message, Owner, ResetPolicy, ResolveRequest, SearchQuery, Session,
    SessionDump, SessionError, SessionEvent, SessionId, SessionQuery, SessionService,
    SessionStatus, SessionUpdate,
};

use crate::fixture::{user, Fixture, APP};

/// One owner-scoped call of the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Get,
    List,
    Update,
    Delete,
    End,
    Reopen,
    Fork,
    AppendMessage,
    AppendEvents,
    AppendTo,
    Messages,
    Events,
    SearchSession,
    SearchOwner,
    ReplaceContext,
    Rewind,
    Resolve,
    Reset,
    SetRetention,
    PruneArchive,
}

impl Call {
    const ALL: [Self; 20] = [
        Self::Get,
        Self::List,
        Self::Update,
        Self::Delete,
        Self::End,
        Self::Reopen,
        Self::Fork,
        Self::AppendMessage,
        Self::AppendEvents,
        Self::AppendTo,
        Self::Messages,
        Self::Events,
        Self::SearchSession,
        Self::SearchOwner,
        Self::ReplaceContext,
        Self::Rewind,
        Self::Resolve,
        Self::Reset,
        Self::SetRetention,
        Self::PruneArchive,
    ];

    /// Whether the call names a session by id (and so must be `NotFound`
    /// for a wrong owner) rather than listing, searching or resolving.
    fn names_session(self) -> bool {
        !matches!(
            self,
            Self::List | Self::SearchOwner | Self::Resolve | Self::Reset
        )
    }
}

/// The session under attack.
struct Target {
    session: Session,
    key: String,
    group: bool,
}

impl Target {
    fn resolve_request(&self, caller: &Owner) -> ResolveRequest {
        if self.group {
            ResolveRequest::group(&caller.app, &self.key)
        } else {
            ResolveRequest::new(&caller.app, &caller.user, &self.key)
        }
    }

    /// The session as `caller` would have to present it to `append_to`:
    /// the real one for its owner, a forged copy naming the caller otherwise.
    fn presented_by(&self, caller: &Owner) -> Session {
        let mut s = self.session.clone();
        s.app = crate::app_name(&caller.app);
        if !self.group {
            s.user_id = crate::user_id(&caller.user);
        }
        s
    }
}

/// The ids of the sessions whose data a call returned or changed.
async fn run(
    svc: &dyn SessionService,
    call: Call,
    caller: &Owner,
    target: &Target,
    id: &SessionId,
) -> Result<Vec<String>, SessionError> {
    let one = || vec![id.to_string()];
    Ok(match call {
        Call::Get => vec![svc.get(caller, id).await?.id.into_string()],
        Call::List => svc
            .list(caller, SessionQuery::new().page(0, 1000))
            .await?
            .items
            .into_iter()
            .map(|s| s.id.into_string())
            .collect(),
        Call::Update => {
            let update = SessionUpdate::new().state(
                json!({"hijacked": true})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            );
            vec![svc.update(caller, id, update).await?.id.into_string()]
        }
        Call::Delete => {
            svc.delete(caller, id).await?;
            one()
        }
        Call::End => vec![svc.end(caller, id).await?.id.into_string()],
        Call::Reopen => vec![svc.reopen(caller, id).await?.id.into_string()],
        Call::SetRetention => {
            let keep_none = session_core::retention::ArchiveRetention::keep_latest(0);
            vec![svc
                .set_retention(caller, id, Some(keep_none))
                .await?
                .id
                .into_string()]
        }
        Call::PruneArchive => {
            svc.prune_archive(caller, id).await?;
            one()
        }
        Call::Fork => vec![svc
            .fork(caller, id, &session_core::ForkAt::Latest)
            .await?
            .id
            .into_string()],
        Call::AppendMessage => {
            svc.append_message(caller, id, Message::user("injected"))
                .await?;
            one()
        }
        Call::AppendEvents => {
            let event = SessionEvent::builder(Message::user("injected"))
                .state("user:tier", "stolen")
                .state("app:banner", "stolen")
                .build()?;
            svc.append_events(caller, id, vec![event]).await?;
            one()
        }
        Call::AppendTo => {
            let mut presented = target.presented_by(caller);
            presented.id = crate::sid(id);
            let event = SessionEvent::builder(Message::user("injected"))
                .state("user:tier", "stolen")
                .build()?;
            svc.append_to(&mut presented, vec![event]).await?;
            one()
        }
        Call::Messages => {
            let messages = svc.messages(caller, id).await?;
            if messages.is_empty() {
                Vec::new()
            } else {
                one()
            }
        }
        Call::Events => {
            let page = svc.events(caller, id, &EventFilter::archive()).await?;
            if page.items.is_empty() {
                Vec::new()
            } else {
                one()
            }
        }
        Call::SearchSession => svc
            .search(caller, &SearchQuery::in_session(id.as_str(), "secret"))
            .await?
            .items
            .into_iter()
            .map(|h| h.session_id)
            .collect(),
        Call::SearchOwner => {
            let owner = &target.session;
            let mut seen = Vec::new();
            // Its own scope, then the target owner's scope named outright.
            for (app, user_id) in [
                (caller.app.as_str(), caller.user.as_str()),
                (owner.app.as_str(), owner.user_id.as_str()),
            ] {
                let query = SearchQuery::for_user(app, user_id, "secret").page(0, 1000);
                seen.extend(
                    svc.search(caller, &query)
                        .await?
                        .items
                        .into_iter()
                        .map(|h| h.session_id),
                );
            }
            seen
        }
        Call::ReplaceContext => {
            let version = target.session.version;
            let summary = SessionEvent::new(Message::assistant("overwritten"));
            svc.replace_context(caller, id, vec![summary], version)
                .await?;
            one()
        }
        Call::Rewind => vec![svc
            .rewind(
                caller,
                id,
                &session_core::RewindTo::before_invocation("inv-1").unwrap(),
            )
            .await?
            .session
            .id
            .into_string()],
        Call::Resolve => {
            let resolved = svc
                .resolve(&target.resolve_request(caller), &ResetPolicy::never())
                .await?;
            vec![resolved.session.id.into_string()]
        }
        Call::Reset => vec![svc
            .reset(&target.resolve_request(caller))
            .await?
            .id
            .into_string()],
    })
}

/// Everything stored about the target: what must not change.
async fn snapshot(fx: &Fixture, id: &SessionId) -> SessionDump {
    fx.repo.export_session(id).await.unwrap()
}

/// A fresh target with a secret message, session and `user:`/`app:` state,
/// an invocation id to rewind to and a resolve key.
async fn target(fx: &Fixture, group: bool, call: Call) -> Target {
    let svc = fx.service();
    let key = format!("chat-{call:?}");
    let request = if group {
        ResolveRequest::group(APP, &key)
    } else {
        ResolveRequest::new(APP, "alice", &key)
    };
    let session = svc
        .resolve(&request, &ResetPolicy::never())
        .await
        .unwrap()
        .session;
    let writer = Owner::parse(APP, if group { "bob" } else { "alice" }).unwrap();
    let first = SessionEvent::builder(Message::user("the secret plan"))
        .invocation_id("inv-1")
        .state("step", 1)
        .state("user:tier", "gold")
        .state("app:banner", "hello")
        .build()
        .unwrap();
    svc.append_events(&writer, &session.id, vec![first, user("more secret notes")])
        .await
        .unwrap();
    let session = fx.repo.get(&session.id).await.unwrap();
    Target {
        session,
        key,
        group,
    }
}

fn same_error_as_missing(on_target: &SessionError, on_missing: &SessionError, id: &str) -> bool {
    on_target.kind() == ErrorKind::NotFound
        && on_missing.kind() == ErrorKind::NotFound
        && on_target.to_string().replace(id, "<id>")
            == on_missing.to_string().replace("no-such-session", "<id>")
}

async fn check_call(fx: &Fixture, call: Call, group: bool) {
    let svc = fx.service();
    let t = target(fx, group, call).await;
    let id = t.session.id.clone();
    let before = snapshot(fx, &id).await;
    let (right, wrong): (Owner, Vec<(&str, Owner)>) = if group {
        // A group session is open to every user of its app, no other app.
        (
            Owner::parse(APP, "carol").unwrap(),
            vec![("wrong app", Owner::parse("other-app", "carol").unwrap())],
        )
    } else {
        (
            Owner::parse(APP, "alice").unwrap(),
            vec![
                ("wrong user", Owner::parse(APP, "mallory").unwrap()),
                ("wrong app", Owner::parse("other-app", "alice").unwrap()),
            ],
        )
    };
    let what = if group {
        "group session"
    } else {
        "user session"
    };
    for (label, caller) in &wrong {
        let msg = format!("{call:?} by the {label} on a {what}");
        let got = run(&svc, call, caller, &t, &id).await;
        if call.names_session() {
            let on_target = got.expect_err(&msg);
            let on_missing = run(
                &svc,
                call,
                caller,
                &t,
                &SessionId::new("no-such-session").unwrap(),
            )
            .await
            .expect_err(&msg);
            assert!(
                same_error_as_missing(&on_target, &on_missing, &id),
                "{msg}: {on_target} must read exactly like {on_missing}"
            );
        } else {
            let seen = got.unwrap_or_else(|e| panic!("{msg}: {e}"));
            assert!(
                !seen.contains(&id.to_string()),
                "{msg}: sees the session: {seen:?}"
            );
        }
        assert_eq!(
            snapshot(fx, &id).await,
            before,
            "{msg}: the session changed"
        );
    }
    if call == Call::List && group {
        return; // a user's list holds the user's own sessions, not the app's groups
    }
    let msg = format!("{call:?} by the owner of a {what}");
    let seen = run(&svc, call, &right, &t, &id)
        .await
        .unwrap_or_else(|e| panic!("{msg}: {e}"));
    match call {
        Call::Reset => {
            assert!(!seen.contains(&id.to_string()), "{msg}: a new session");
            let old = fx.repo.get(&id).await.unwrap();
            assert_eq!(old.status, SessionStatus::Archived, "{msg}");
        }
        Call::Delete => {
            assert_eq!(
                fx.repo.get(&id).await.unwrap_err().kind(),
                ErrorKind::NotFound,
                "{msg}"
            );
        }
        Call::SearchOwner if group => {} // groups are searched by id, not per user
        Call::Fork => {
            let fork = fx
                .repo
                .get(&session_core::SessionId::new(&seen[0]).unwrap())
                .await
                .unwrap();
            assert_eq!(
                fork.metadata.get(session_core::FORKED_FROM),
                Some(&serde_json::json!(id.as_str())),
                "{msg}: a fork of the session, of the same owner"
            );
            assert_eq!(
                (&fork.app, &fork.user_id),
                (&t.session.app, &t.session.user_id),
                "{msg}"
            );
        }
        _ => assert!(seen.contains(&id.to_string()), "{msg}: {seen:?}"),
    }
}

/// Every owner-scoped service call × (right owner, wrong user, wrong app),
/// on a user's session and on a group session: a wrong owner gets exactly
/// the `NotFound` of a missing id, sees nothing in lists and searches,
/// changes nothing stored; the right owner's same call succeeds.
pub async fn isolation_matrix_every_service_call(fx: Fixture) {
    for group in [false, true] {
        for call in Call::ALL {
            check_call(&fx, call, group).await;
        }
    }
}
