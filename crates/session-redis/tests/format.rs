//! The key layout does not change: `tests/data/v0.1/store.json` holds every
//! key (type, TTL set or not, content) and the export of each session that
//! the previous version (0.1, whose scripts decided every write) wrote for
//! the scenario below. A store loaded from it reads unchanged, and the
//! same scenario written now produces the same keys, byte for byte.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{json, Value};
use session_core::{
    AppName, InvocationId, ManualClock, Message, NewSession, SessionEvent, SessionId, SessionQuery,
    SessionRepository, SessionUpdate, StateMap, UserId,
};
use session_redis::RedisRepository;

fn url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

fn fixture() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v0.1/store.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2031, 1, 1, 0, 0, 0).unwrap()
}

fn map(v: Value) -> StateMap {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

fn sid(id: &str) -> SessionId {
    SessionId::new(id).unwrap()
}

fn ev(id: &str, inv: Option<&str>, delta: Option<Value>, tokens: u32) -> SessionEvent {
    let mut b = SessionEvent::builder(Message::user(format!("text of {id}")))
        .id(id)
        .timestamp(t0())
        .token_estimate(tokens);
    if let Some(i) = inv {
        b = b.invocation_id(i);
    }
    if let Some(d) = delta {
        b = b.state_delta(map(d));
    }
    b.build().unwrap()
}

/// A repository under a fresh prefix, or `None` (the test is skipped) without a server.
async fn repo(clock: Arc<ManualClock>) -> Option<(RedisRepository, String)> {
    let prefix = format!("f{}", uuid::Uuid::new_v4().simple());
    match RedisRepository::builder(url())
        .prefix(&prefix)
        .clock(clock)
        .connect()
        .await
    {
        Ok(r) => Some((r, prefix)),
        Err(e) => session_testkit::skip("redis", &format!("no Redis at {}: {e}", url()), false),
    }
}

fn conn() -> redis::Connection {
    redis::Client::open(url())
        .unwrap()
        .get_connection()
        .unwrap()
}

/// Every key under `prefix` (renamed `P`), with its type, whether it has a TTL, and its content.
fn dump(prefix: &str) -> BTreeMap<String, Value> {
    let mut c = conn();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query(&mut c)
        .unwrap();
    let mut out = BTreeMap::new();
    for k in keys {
        let t: String = redis::cmd("TYPE").arg(&k).query(&mut c).unwrap();
        let ttl: i64 = redis::cmd("PTTL").arg(&k).query(&mut c).unwrap();
        let content = match t.as_str() {
            "hash" => {
                let h: BTreeMap<String, String> =
                    redis::cmd("HGETALL").arg(&k).query(&mut c).unwrap();
                json!(h)
            }
            "zset" => {
                let z: Vec<(String, String)> = redis::cmd("ZRANGE")
                    .arg(&k)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query(&mut c)
                    .unwrap();
                json!(z)
            }
            other => json!(other),
        };
        out.insert(
            k.replacen(prefix, "P", 1),
            json!({"type": t, "ttl": ttl > 0, "content": content}),
        );
    }
    out
}

fn drop_prefix(prefix: &str) {
    let mut c = conn();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query(&mut c)
        .unwrap();
    if !keys.is_empty() {
        let _: () = redis::cmd("DEL").arg(keys).query(&mut c).unwrap();
    }
}

/// The two sessions' exports, without the context history (which v0.1
/// did not keep; the write test checks it on its own).
async fn exports(repo: &RedisRepository) -> Value {
    let mut out = BTreeMap::new();
    for id in ["s-1", "s-2"] {
        let dump = repo.export_session(&sid(id)).await.unwrap();
        let mut value = serde_json::to_value(dump).unwrap();
        if let Some(fields) = value.as_object_mut() {
            fields.remove("context_log");
            // Added since v0.1 (sessions written before count from 0).
            if let Some(session) = fields.get_mut("session").and_then(Value::as_object_mut) {
                session.remove("event_bytes");
            }
        }
        out.insert(id, value);
    }
    json!(out)
}

/// The scenario the fixture was written with: owner names holding `/`,
/// state in every scope (and `temp:`), re-sent ids, a context replace, a
/// rewind, updates of metadata, state and expiry.
async fn scenario(repo: &RedisRepository, clock: &ManualClock) {
    let new = NewSession::new("app/x", "u1", t0())
        .unwrap()
        .with_id("s-1")
        .unwrap()
        .with_key("k/1")
        .unwrap()
        .with_expires_at(None)
        .with_metadata(map(json!({"m": 1})))
        .with_state(map(json!({"a": 1, "user:u": 2, "app:p": 3, "temp:t": 4})));
    repo.create(new).await.unwrap();
    let s1 = sid("s-1");
    clock.advance(Duration::seconds(1));
    let delta = json!({"a": 2, "user:u": null, "b": "x"});
    repo.append(
        &s1,
        vec![
            ev("e1", Some("inv1"), Some(delta), 3),
            ev("e2", Some("inv1"), None, 4),
        ],
    )
    .await
    .unwrap();
    clock.advance(Duration::seconds(1));
    let delta = json!({"app:p": null, "c": [1, 2]});
    repo.append(&s1, vec![ev("e3", Some("inv2"), Some(delta), 5)])
        .await
        .unwrap();
    repo.append(
        &s1,
        vec![
            ev("e2", Some("inv1"), None, 4),
            ev("e4", Some("inv2"), None, 6),
        ],
    )
    .await
    .unwrap();
    clock.advance(Duration::seconds(1));
    let v = repo.event_version(&s1).await.unwrap();
    let context = vec![
        ev("sum1", None, Some(json!({"s": 1})), 7),
        ev("e4", Some("inv2"), None, 6),
    ];
    assert!(repo.replace_context(&s1, context, v).await.unwrap());
    let delta = json!({"d": true, "user:w": 1});
    repo.append(&s1, vec![ev("e5", Some("inv3"), Some(delta), 8)])
        .await
        .unwrap();
    clock.advance(Duration::seconds(1));
    repo.update(&s1, SessionUpdate::new().metadata(map(json!({"m": 2}))))
        .await
        .unwrap();
    repo.rewind(&s1, &InvocationId::new("inv3").unwrap())
        .await
        .unwrap();
    let new = NewSession::new("app/x", "u1", t0())
        .unwrap()
        .with_id("s-2")
        .unwrap()
        .with_expires_at(Some(t0() + Duration::days(10)));
    repo.create(new).await.unwrap();
    let s2 = sid("s-2");
    repo.append(&s2, vec![ev("f1", None, Some(json!({"app:q": "z"})), 2)])
        .await
        .unwrap();
    let update = SessionUpdate::new()
        .state(map(json!({"x": 1})))
        .expires_at(Some(t0() + Duration::days(20)));
    repo.update(&s2, update).await.unwrap();
}

#[tokio::test]
async fn a_store_written_by_v0_1_reads_unchanged() {
    let clock = Arc::new(ManualClock::at(t0() + Duration::seconds(4)));
    let Some((repo, prefix)) = repo(clock).await else {
        return;
    };
    let fixture = fixture();
    let mut c = conn();
    for (name, key) in fixture["keys"].as_object().unwrap() {
        let name = name.replacen('P', &prefix, 1);
        match key["type"].as_str().unwrap() {
            "hash" => {
                for (field, value) in key["content"].as_object().unwrap() {
                    let _: () = redis::cmd("HSET")
                        .arg(&name)
                        .arg(field)
                        .arg(value.as_str().unwrap())
                        .query(&mut c)
                        .unwrap();
                }
            }
            "zset" => {
                for entry in key["content"].as_array().unwrap() {
                    let _: () = redis::cmd("ZADD")
                        .arg(&name)
                        .arg(entry[1].as_str().unwrap())
                        .arg(entry[0].as_str().unwrap())
                        .query(&mut c)
                        .unwrap();
                }
            }
            other => panic!("unexpected key type {other}"),
        }
    }
    assert_eq!(exports(&repo).await, fixture["exports"]);
    let listed = repo
        .list(&SessionQuery::new().app("app/x").user("u1"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 2);
    let shared = repo
        .shared_state(&AppName::new("app/x").unwrap(), &UserId::new("u1").unwrap())
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(shared).unwrap(),
        fixture["exports"]["s-1"]["shared"]
    );
    // And it keeps being written in the same layout.
    let out = repo
        .append(&sid("s-1"), vec![ev("e6", Some("inv4"), None, 1)])
        .await
        .unwrap();
    assert_eq!((out.seqs, out.version), (vec![7], 8));
    let counted = repo.get(&sid("s-1")).await.unwrap().event_bytes;
    assert!(counted > 0, "a v0.1 session counts the bytes it gains");
    drop_prefix(&prefix);
}

#[tokio::test]
async fn writes_keep_the_v0_1_layout() {
    let clock = Arc::new(ManualClock::at(t0()));
    let Some((repo, prefix)) = repo(clock.clone()).await else {
        return;
    };
    scenario(&repo, &clock).await;
    let fixture = fixture();
    let mut keys = dump(&prefix);
    // The one key added since v0.1: the history of s-1's context replace.
    let history = keys.remove("P:{s-1}:chg");
    assert_eq!(
        history.map(|h| h["type"].clone()),
        Some(json!("list")),
        "the replace is recorded in a list"
    );
    let dumped = repo.export_session(&sid("s-1")).await.unwrap();
    assert_eq!(dumped.context_log.len(), 1);
    // The one head field added since v0.1: the stored bytes of the events.
    for (session, id) in [("P:{s-1}:s", "s-1"), ("P:{s-2}:s", "s-2")] {
        let bytes = keys
            .get_mut(session)
            .and_then(|k| k["content"].as_object_mut())
            .and_then(|fields| fields.remove("event_bytes"));
        let stored = repo.get(&sid(id)).await.unwrap().event_bytes;
        assert_eq!(bytes, Some(json!(stored.to_string())), "{session}");
        assert!(stored > 0);
    }
    let expected: BTreeMap<String, Value> =
        serde_json::from_value(fixture["keys"].clone()).unwrap();
    for (name, key) in &expected {
        assert_eq!(keys.get(name), Some(key), "key {name}");
    }
    assert_eq!(
        keys.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    assert_eq!(exports(&repo).await, fixture["exports"]);
    drop_prefix(&prefix);
}
