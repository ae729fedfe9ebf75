//! State scopes: session, `user:`, `app:` and `temp:` keys, applied atomically with events.

use serde_json::{json, Value};
use session_core::{CreateSessionRequest, Message, Owner, SessionEvent, SessionService};

use super::support::{map, owner, service_session};
use crate::fixture::{user, Fixture, APP};

/// Unprefixed keys are session scope: applied with the event, not shared.
pub async fn state_session_scope(fx: Fixture) {
    let svc = fx.service();
    let o = owner();
    let s1 = service_session(&fx, &o).await;
    let s2 = service_session(&fx, &o).await;
    let e = SessionEvent::builder(Message::user("set"))
        .state("counter", 5)
        .state("lang", "en")
        .build()
        .unwrap();
    svc.append_events(&o, &s1.id, vec![e]).await.unwrap();
    let e = SessionEvent::builder(Message::user("unset"))
        .state("lang", Value::Null)
        .build()
        .unwrap();
    svc.append_events(&o, &s1.id, vec![e]).await.unwrap();
    assert_eq!(
        svc.get(&o, &s1.id).await.unwrap().state,
        map(&json!({"counter": 5}))
    );
    assert!(svc.get(&o, &s2.id).await.unwrap().state.is_empty());
}

/// `user:` keys are shared by all sessions of that user in that app, not by other users.
pub async fn state_user_scope_is_per_user_per_app(fx: Fixture) {
    let svc = fx.service();
    let alice = owner();
    let bob = Owner::parse(APP, "bob").unwrap();
    let alice_elsewhere = Owner::parse("other-app", "alice").unwrap();
    let a1 = service_session(&fx, &alice).await;
    let a2 = service_session(&fx, &alice).await;
    let b1 = service_session(&fx, &bob).await;
    let x1 = service_session(&fx, &alice_elsewhere).await;
    let e = SessionEvent::builder(Message::user("I'm Alice"))
        .state("user:name", "Alice")
        .build()
        .unwrap();
    svc.append_events(&alice, &a1.id, vec![e]).await.unwrap();
    assert_eq!(
        svc.get(&alice, &a2.id)
            .await
            .unwrap()
            .state
            .get("user:name"),
        Some(&json!("Alice"))
    );
    assert!(svc.get(&bob, &b1.id).await.unwrap().state.is_empty());
    assert!(svc
        .get(&alice_elsewhere, &x1.id)
        .await
        .unwrap()
        .state
        .is_empty());
    let later = service_session(&fx, &alice).await;
    assert_eq!(
        later.state.get("user:name"),
        Some(&json!("Alice")),
        "new sessions see it too"
    );
}

/// `app:` keys are shared by all sessions of the app, not across apps.
pub async fn state_app_scope_is_per_app(fx: Fixture) {
    let svc = fx.service();
    let alice = owner();
    let bob = Owner::parse(APP, "bob").unwrap();
    let other = Owner::parse("other-app", "alice").unwrap();
    let a = service_session(&fx, &alice).await;
    let b = service_session(&fx, &bob).await;
    let c = service_session(&fx, &other).await;
    let e = SessionEvent::builder(Message::user("v"))
        .state("app:version", "1.0")
        .build()
        .unwrap();
    svc.append_events(&alice, &a.id, vec![e]).await.unwrap();
    assert_eq!(
        svc.get(&bob, &b.id).await.unwrap().state.get("app:version"),
        Some(&json!("1.0"))
    );
    assert!(svc.get(&other, &c.id).await.unwrap().state.is_empty());
    let shared = fx
        .repo
        .shared_state(&crate::app_name(APP), &crate::user_id("bob"))
        .await
        .unwrap();
    assert_eq!(shared.app, map(&json!({"app:version": "1.0"})));
    assert!(shared.user.is_empty());
}

/// `temp:` keys live only in the returned object: never stored, in state or in the event.
pub async fn state_temp_keys_are_never_persisted(fx: Fixture) {
    let svc = fx.service();
    let o = owner();
    let mut s = svc
        .create(
            CreateSessionRequest::builder("alice")
                .app(APP)
                .state("temp:boot", 1)
                .state("kept", 1)
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    let e = SessionEvent::builder(Message::user("x"))
        .state("temp:scratch", "draft")
        .state("step", 2)
        .build()
        .unwrap();
    svc.append_to(&mut s, vec![e]).await.unwrap();
    assert_eq!(
        s.state.get("temp:scratch"),
        Some(&json!("draft")),
        "visible in the returned object"
    );
    assert_eq!(s.state.get("step"), Some(&json!(2)));
    let stored = svc.get(&o, &s.id).await.unwrap();
    assert_eq!(stored.state, map(&json!({"kept": 1, "step": 2})));
    let events = fx.archive(&s.id).await;
    assert_eq!(events[0].state_delta, Some(map(&json!({"step": 2}))));
    // Through the repository directly, too.
    let e = SessionEvent::builder(Message::user("y"))
        .state("temp:only", true)
        .build()
        .unwrap();
    fx.append(&s.id, vec![e]).await;
    assert_eq!(fx.archive(&s.id).await[1].state_delta, None);
    assert_eq!(
        fx.repo.get(&s.id).await.unwrap().state,
        map(&json!({"kept": 1, "step": 2}))
    );
}

/// A delta lands in the same atomic step as its event: a rejected batch changes no state.
pub async fn state_delta_lands_atomically_with_its_event(fx: Fixture) {
    let s = fx.session("alice").await;
    let with_delta = SessionEvent::builder(Message::user("x"))
        .state("k", 1)
        .state("user:u", 1)
        .state("app:a", 1)
        .build()
        .unwrap();
    let mut bad = user("bad");
    bad.branch = Some("a..b".into());
    assert!(fx
        .repo
        .append(&s.id, vec![with_delta.clone(), bad])
        .await
        .is_err());
    assert!(fx.repo.get(&s.id).await.unwrap().state.is_empty());
    let shared = fx
        .repo
        .shared_state(&crate::app_name(APP), &crate::user_id("alice"))
        .await
        .unwrap();
    assert!(shared.user.is_empty() && shared.app.is_empty());
    let out = fx.append(&s.id, vec![with_delta]).await;
    let got = fx.repo.get(&s.id).await.unwrap();
    assert_eq!(got.version, out.version);
    assert_eq!(got.state, map(&json!({"k": 1})));
    let shared = fx
        .repo
        .shared_state(&crate::app_name(APP), &crate::user_id("alice"))
        .await
        .unwrap();
    assert_eq!(shared.user, map(&json!({"user:u": 1})));
    assert_eq!(shared.app, map(&json!({"app:a": 1})));
}
