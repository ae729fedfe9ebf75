//! The search index keys: built by the first search, extended by later
//! ones, expiring with the session, and gone with it.
#![allow(clippy::unwrap_used)]

use chrono::Duration;
use session_core::{
    Clock as _, ManualClock, Message, NewSession, SearchQuery, SessionEvent, SessionRepository,
};
use session_redis::RedisRepository;

fn url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

fn keys(prefix: &str, pattern: &str) -> Vec<String> {
    let mut c = redis::Client::open(url())
        .unwrap()
        .get_connection()
        .unwrap();
    redis::cmd("KEYS")
        .arg(format!("{prefix}:{pattern}"))
        .query(&mut c)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn index_keys_follow_the_session() {
    let prefix = format!("x{}", uuid::Uuid::new_v4().simple());
    let clock = std::sync::Arc::new(ManualClock::new());
    let repo = match RedisRepository::builder(url())
        .prefix(&prefix)
        .clock(clock.clone())
        .connect()
        .await
    {
        Ok(r) => r,
        Err(e) => {
            let _: Option<()> =
                session_testkit::skip("redis", &format!("no Redis at {}: {e}", url()), false);
            return;
        }
    };
    let s = repo
        .create(
            NewSession::new("app", "u", clock.now())
                .unwrap()
                .with_expires_at(Some(clock.now() + Duration::hours(1))),
        )
        .await
        .unwrap();
    let batch = (0..1200)
        .map(|i| SessionEvent::new(Message::user(format!("note {i} about kiwi"))))
        .collect();
    repo.append(&s.id, batch).await.unwrap();
    assert!(
        keys(&prefix, "*:x:*").is_empty(),
        "appends leave the index alone"
    );
    let q = SearchQuery::in_session(s.id.as_str(), "note 1042 kiwi");
    let hits = repo.search(&q).await.unwrap();
    assert_eq!(hits.items.len(), 1);
    let trigram_keys = keys(&prefix, "*:x:*");
    assert!(!trigram_keys.is_empty());
    let mut c = redis::Client::open(url())
        .unwrap()
        .get_connection()
        .unwrap();
    for k in trigram_keys.iter().take(20) {
        let ttl: i64 = redis::cmd("PTTL").arg(k).query(&mut c).unwrap();
        assert!(ttl > 0, "{k} expires with the session");
    }
    // A later append is indexed by the next search.
    repo.append(&s.id, vec![SessionEvent::new(Message::user("late mango"))])
        .await
        .unwrap();
    let hits = repo
        .search(&SearchQuery::in_session(s.id.as_str(), "mango"))
        .await
        .unwrap();
    assert_eq!(hits.items.len(), 1);
    // Deleting the session removes every key of its index.
    assert!(repo.delete(&s.id).await.unwrap());
    assert_eq!(keys(&prefix, "*"), Vec::<String>::new());
}
