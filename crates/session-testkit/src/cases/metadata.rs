//! Finding sessions by metadata: key = value filters on `list`.

use serde_json::json;
use session_core::{Clock as _, ErrorKind, NewSession, SessionQuery, SessionUpdate, StateMap};

use super::support::kind;
use crate::fixture::{Fixture, APP};

fn map(v: serde_json::Value) -> StateMap {
    match v {
        serde_json::Value::Object(m) => m,
        _ => StateMap::new(),
    }
}

/// `list` keeps the sessions whose metadata holds every filtered key with
/// exactly that value (type included: `2` is not `"2"`); an update of the
/// metadata moves a session in or out; a null or object value is `InvalidInput`.
pub async fn list_filters_by_metadata(fx: Fixture) {
    let mut ids = Vec::new();
    for meta in [
        json!({"ticket": "T-1", "channel": "email", "priority": 2, "vip": true}),
        json!({"ticket": "T-2", "channel": "email", "priority": "2"}),
        json!({"ticket": "T-3", "channel": "chat", "vip": false}),
        json!({}),
    ] {
        let s = fx
            .repo
            .create(
                NewSession::new(APP, "alice", fx.clock.now())
                    .unwrap()
                    .with_metadata(map(meta)),
            )
            .await
            .unwrap();
        ids.push(s.id.to_string());
    }
    let found = |q: SessionQuery| {
        let fx = &fx;
        let ids = ids.clone();
        async move {
            let mut got: Vec<usize> = fx
                .repo
                .list(&q.app(APP).page(0, 50))
                .await
                .unwrap()
                .items
                .iter()
                .filter_map(|s| ids.iter().position(|i| *i == s.id.as_str()))
                .collect();
            got.sort_unstable();
            got
        }
    };
    assert_eq!(
        found(SessionQuery::new().metadata("ticket", "T-1")).await,
        [0]
    );
    assert_eq!(
        found(SessionQuery::new().metadata("channel", "email")).await,
        [0, 1]
    );
    assert_eq!(
        found(SessionQuery::new().metadata("priority", 2)).await,
        [0]
    );
    assert_eq!(
        found(SessionQuery::new().metadata("priority", "2")).await,
        [1]
    );
    assert_eq!(found(SessionQuery::new().metadata("vip", true)).await, [0]);
    assert_eq!(found(SessionQuery::new().metadata("vip", false)).await, [2]);
    assert_eq!(
        found(
            SessionQuery::new()
                .metadata("channel", "email")
                .metadata("vip", true)
        )
        .await,
        [0]
    );
    assert!(found(SessionQuery::new().metadata("channel", "fax"))
        .await
        .is_empty());
    assert!(found(SessionQuery::new().metadata("absent", "x"))
        .await
        .is_empty());
    let id = session_core::SessionId::new(ids[3].as_str()).unwrap();
    fx.repo
        .update(
            &id,
            SessionUpdate::new().metadata(map(json!({"channel": "email"}))),
        )
        .await
        .unwrap();
    assert_eq!(
        found(SessionQuery::new().metadata("channel", "email")).await,
        [0, 1, 3]
    );
    let id = session_core::SessionId::new(ids[0].as_str()).unwrap();
    fx.repo
        .update(
            &id,
            SessionUpdate::new().metadata(map(json!({"channel": "chat"}))),
        )
        .await
        .unwrap();
    assert_eq!(
        found(SessionQuery::new().metadata("channel", "email")).await,
        [1, 3]
    );
    assert!(found(SessionQuery::new().metadata("ticket", "T-1"))
        .await
        .is_empty());
    for bad in [json!(null), json!({"a": 1}), json!([1])] {
        let q = SessionQuery::new().app(APP).metadata("ticket", bad);
        assert_eq!(kind(fx.repo.list(&q).await), ErrorKind::InvalidInput);
    }
}
