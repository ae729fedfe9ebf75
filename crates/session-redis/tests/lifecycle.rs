//! Lifecycle checks that need a store of their own: `erase_user` leaves
//! nothing of the user in any key under the store's prefix (names, hash
//! fields and values, set, sorted-set and list members); the events quota
//! holds; the remembered heads are set from the URL.
#![allow(clippy::unwrap_used)]

use session_core::Limits;
use session_encryption::{EncryptedRepository, Keyring};
use session_redis::RedisRepository;
use session_testkit::erasure::plant;

fn url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// A connection and every key under `prefix`.
fn keys_under(prefix: &str) -> (redis::Connection, Vec<String>) {
    let mut c = redis::Client::open(url())
        .unwrap()
        .get_connection()
        .unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query(&mut c)
        .unwrap();
    (c, keys)
}

/// Every key under `prefix` with everything it holds, as text.
fn raw_keys(prefix: &str) -> String {
    let (mut c, keys) = keys_under(prefix);
    let mut out = String::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE").arg(&key).query(&mut c).unwrap();
        let values: Vec<String> = match kind.as_str() {
            "string" => vec![redis::cmd("GET").arg(&key).query(&mut c).unwrap()],
            "hash" => redis::cmd("HGETALL").arg(&key).query(&mut c).unwrap(),
            "set" => redis::cmd("SMEMBERS").arg(&key).query(&mut c).unwrap(),
            "zset" => redis::cmd("ZRANGE")
                .arg(&key)
                .arg(0)
                .arg(-1)
                .query(&mut c)
                .unwrap(),
            "list" => redis::cmd("LRANGE")
                .arg(&key)
                .arg(0)
                .arg(-1)
                .query(&mut c)
                .unwrap(),
            "none" => Vec::new(),
            other => panic!("key {key} has a type the check does not read: {other}"),
        };
        out.push_str(&format!("{key} ({kind}): {}\n", values.join(" | ")));
    }
    out
}

/// A store under a fresh prefix with `limits`; `None` (after a printed
/// skip, refused under CI) when no Redis answers.
async fn store(limits: Limits) -> Option<(RedisRepository, String)> {
    let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    let connecting = RedisRepository::builder(url())
        .prefix(&prefix)
        .limits(limits)
        .connect()
        .await;
    connected(connecting).map(|repo| (repo, prefix))
}

/// The repository, or `None` after a printed skip (refused under CI) when
/// no Redis answers.
fn connected(connecting: session_core::Result<RedisRepository>) -> Option<RedisRepository> {
    match connecting {
        Ok(repo) => Some(repo),
        Err(e) => session_testkit::skip("redis", &format!("no Redis at {}: {e}", url()), false),
    }
}

/// Removes every key under `prefix`.
fn drop_prefix(prefix: &str) {
    let (mut c, keys) = keys_under(prefix);
    if !keys.is_empty() {
        let _: () = redis::cmd("DEL").arg(keys).query(&mut c).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn erase_user_leaves_no_key_or_value_of_the_user() {
    let Some((repo, prefix)) = store(Limits::default()).await else {
        return;
    };
    let planted = plant(&repo, chrono::Utc::now()).await;
    planted.check_before(&raw_keys(&prefix));
    planted.erase(&repo).await;
    let after = raw_keys(&prefix);
    drop_prefix(&prefix);
    planted.check_after(&after);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_quotas_hold_under_racing_writers() {
    let Some((repo, prefix)) = store(session_testkit::quota::quota_limits()).await else {
        return;
    };
    session_testkit::quota::all(std::sync::Arc::new(repo)).await;
    drop_prefix(&prefix);
}

/// Behind the encryption layer, no key or value (search index keys
/// included) holds a canary in plain text.
/// Values moved, swapped or replaced in the store do not open.
#[tokio::test(flavor = "multi_thread")]
async fn encrypted_sessions_leave_no_plain_canary_in_any_key() {
    let Some((repo, prefix)) = store(Limits::default()).await else {
        return;
    };
    let sealed = EncryptedRepository::new(repo, Keyring::generate("k1").unwrap());
    session_testkit::sealed::plant(&sealed, chrono::Utc::now()).await;
    session_testkit::sealed::moved_or_replaced_values_are_refused(&sealed, sealed.inner()).await;
    let raw = raw_keys(&prefix);
    drop_prefix(&prefix);
    session_testkit::sealed::check_sealed(&raw);
}

/// Redis Cluster cannot count a user's sessions atomically: the quota is
/// refused when the store is built, not ignored.
#[tokio::test]
async fn the_sessions_per_user_quota_is_refused_on_a_cluster() {
    let err = session_redis::RedisRepository::cluster_builder(vec!["redis://127.0.0.1:1".into()])
        .limits(session_testkit::quota::quota_limits())
        .connect()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), session_core::ErrorKind::Unsupported, "{err}");
}

/// The activity indexes only hold the sessions (a listing orders them by
/// their heads' `updated_at`): an append within the second of a session's
/// last activity leaves its index entries (but for its first append), one
/// in a new second moves them, and listings keep the newest activity first.
#[tokio::test(flavor = "multi_thread")]
async fn an_append_within_the_second_leaves_the_activity_indexes() {
    use chrono::TimeZone;
    use session_core::{Message, SessionEvent, SessionRepository};

    let clock = std::sync::Arc::new(session_core::ManualClock::at(
        chrono::Utc.with_ymd_and_hms(2026, 11, 1, 9, 0, 0).unwrap(),
    ));
    let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    let connecting = RedisRepository::builder(url())
        .prefix(&prefix)
        .clock(clock.clone())
        .connect()
        .await;
    let Some(repo) = connected(connecting) else {
        return;
    };
    let index = format!("{prefix}:idx:all");
    let score = |id: &str| -> i64 {
        let mut c = redis::Client::open(url())
            .unwrap()
            .get_connection()
            .unwrap();
        redis::cmd("ZSCORE")
            .arg(&index)
            .arg(id)
            .query::<i64>(&mut c)
            .unwrap()
    };
    let ids = session_testkit::activity::three_sessions(&repo, &clock, "app").await;
    // A session's first append writes its entries (it puts back one a
    // create cut short on a cluster left out).
    let created = score(ids[0].as_str());
    clock.advance(chrono::Duration::milliseconds(10));
    let first = SessionEvent::new(Message::user("first"));
    repo.append(&ids[0], vec![first]).await.unwrap();
    let before = score(ids[0].as_str());
    assert_ne!(before, created, "the first append writes the index");
    for n in 0..5 {
        clock.advance(chrono::Duration::milliseconds(10));
        let event = SessionEvent::new(Message::user(format!("m{n}")));
        repo.append(&ids[0], vec![event]).await.unwrap();
    }
    assert_eq!(
        score(ids[0].as_str()),
        before,
        "index written within the second"
    );
    let stored = async |id: &session_core::SessionId| {
        let active = (-score(id.as_str())).div_euclid(1_000_000);
        let updated = repo.get(id).await.unwrap().updated_at.timestamp_micros();
        (active, updated)
    };
    session_testkit::activity::seconds_follow_each_append(&repo, &clock, "app", &ids, stored).await;
    drop_prefix(&prefix);
}

/// An append planned from the head this repository's last append left is
/// refused when the session was deleted and created again under the same
/// id since, even at the same version and activity time (one clock, stood
/// still): the new session's creation time differs. The append reads and
/// writes after the other writer's events, which stay as they were.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_created_again_under_its_id_is_not_taken_for_the_remembered_one() {
    use chrono::TimeZone;
    use session_core::SessionRepositoryExt;
    use session_core::{EventView, NewSession, SessionRepository};

    let at = chrono::Utc.with_ymd_and_hms(2026, 11, 1, 9, 0, 0).unwrap();
    let clock = std::sync::Arc::new(session_core::ManualClock::at(at));
    let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    let open = async || {
        RedisRepository::builder(url())
            .prefix(&prefix)
            .clock(clock.clone())
            .connect()
            .await
    };
    let (repo, other) = match (open().await, open().await) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            let _: Option<()> =
                session_testkit::skip("redis", &format!("no Redis at {}: {e}", url()), false);
            return;
        }
    };
    let new = |created| {
        NewSession::new("app", "u", created)
            .unwrap()
            .with_id("again")
            .unwrap()
    };
    let s = repo.create(new(at)).await.unwrap();
    let user = session_testkit::user;
    repo.append(&s.id, vec![user("first life")]).await.unwrap();
    let remembered = repo.get(&s.id).await.unwrap();

    other.delete(&s.id).await.unwrap();
    let earlier = at - chrono::Duration::seconds(1);
    other.create(new(earlier)).await.unwrap();
    other
        .append(
            &s.id,
            vec![user("second life, one"), user("second life, two")],
        )
        .await
        .unwrap();
    let now = other.get(&s.id).await.unwrap();
    assert_eq!(
        (now.version, now.updated_at),
        (remembered.version, remembered.updated_at),
        "the same version and activity time as the head remembered"
    );

    let out = repo.append(&s.id, vec![user("after")]).await.unwrap();
    assert_eq!(out.seqs, vec![3]);
    let archive = repo.all_events(&s.id, EventView::Archive).await.unwrap();
    assert_eq!(
        session_testkit::texts(&archive),
        ["second life, one", "second life, two", "after"]
    );
    drop_prefix(&prefix);
}

/// A server that lost its scripts (a restart, `SCRIPT FLUSH`) gets them
/// loaded again by the next write, which then goes through: every write
/// script, the append's standalone one included.
#[tokio::test(flavor = "multi_thread")]
async fn writes_load_their_scripts_again_after_the_server_lost_them() {
    use session_core::{EventView, NewSession, SessionRepository, SessionRepositoryExt};

    let Some((repo, prefix)) = store(Limits::default()).await else {
        return;
    };
    let flush = || {
        let (mut c, _) = keys_under(&prefix);
        let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut c).unwrap();
    };
    let user = session_testkit::user;
    let s = repo
        .create(NewSession::new("app", "u", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    repo.append(&s.id, vec![user("before")]).await.unwrap();
    flush();
    repo.append(&s.id, vec![user("after")]).await.unwrap();
    flush();
    let other = repo
        .create(NewSession::new("app", "u", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    let archive = repo.all_events(&s.id, EventView::Archive).await.unwrap();
    assert_eq!(session_testkit::texts(&archive), ["before", "after"]);
    assert_eq!(repo.get(&other.id).await.unwrap().event_count, 0);
    drop_prefix(&prefix);
}

/// `remembered_heads=N` in the URL sets how many sessions' heads the
/// repository remembers: with none remembered every append reads its head
/// first and the seqs, versions and counts come out the same; a value that
/// is not a number is `InvalidInput` naming the parameter.
#[tokio::test(flavor = "multi_thread")]
async fn remembered_heads_from_the_url_and_none_remembered_appends_alike() {
    use session_core::{Message, NewSession, SessionEvent, SessionRepository};

    let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    let connecting =
        RedisRepository::from_url(&format!("{}?prefix={prefix}&remembered_heads=0", url())).await;
    let Some(repo) = connected(connecting) else {
        return;
    };
    let s = repo
        .create(NewSession::new("app", "alice", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    for n in 1..=5u64 {
        let out = repo
            .append(
                &s.id,
                vec![SessionEvent::new(Message::user(format!("m{n}")))],
            )
            .await
            .unwrap();
        assert_eq!((out.seqs.as_slice(), out.version), ([n].as_slice(), n));
    }
    assert_eq!(repo.get(&s.id).await.unwrap().event_count, 5);
    drop_prefix(&prefix);

    let err = RedisRepository::from_url(&format!("{}?remembered_heads=lots", url()))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), session_core::ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("remembered_heads"), "{err}");
}
