//! Values at the edge of what the API accepts: owner names that equal a
//! store's reserved or escaped forms, and expiries at the latest date the
//! API takes. Every store keeps them apart, stores them, or refuses them
//! with a typed error; none panics.

use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use session_core::{
    truncate_micros, Clock as _, CreateSessionRequest, ErrorKind, NewSession, ResetPolicy,
    ResolveRequest, SearchQuery, Session, SessionError, SessionEvent, SessionId, SessionQuery,
    SessionRepository as _, SessionService as _, SessionUpdate, StateMap, GROUP_USER,
};

use crate::fixture::{Fixture, APP};

fn kind<T: std::fmt::Debug>(r: Result<T, SessionError>) -> ErrorKind {
    r.expect_err("expected an error").kind()
}

/// Real user ids that equal what a store reserves or escapes an owner
/// into: the file store's group file name (`_group`), its stem, and names
/// next to them.
const LOOKALIKES: [&str; 4] = ["_group", "group", "_group.json", "_"];

/// Encoded forms of the group owner and of `_group` (file names, Redis keys,
/// Elasticsearch document ids): they hold `%`, `*` or a space, so no id type
/// takes them and no store ever sees them.
const ENCODED: [&str; 7] = [
    "%2A",
    "%5Fgroup",
    "%2A.json",
    "app%2F*",
    "u%7Capp%7C*",
    "app/*",
    "u|app|*",
];

/// Appends one event saying `text` that sets `user:who` to `who`.
async fn say(fx: &Fixture, id: &SessionId, text: &str, who: &str) {
    let event = SessionEvent::builder(session_core::Message::user(text))
        .state("user:who", who)
        .build()
        .unwrap();
    fx.append(id, vec![event]).await;
}

/// What one owner reads back: its `user:` state, its listed sessions and
/// the texts its cross-session search for `secret` finds.
async fn seen_by(fx: &Fixture, user: &str) -> (StateMap, Vec<SessionId>, Vec<String>) {
    let shared = fx
        .repo
        .shared_state(&crate::app_name(APP), &crate::user_id(user))
        .await
        .unwrap();
    let listed = fx
        .repo
        .list(&SessionQuery::new().app(APP).user(user).page(0, 100))
        .await
        .unwrap();
    let hits = fx
        .repo
        .search(&SearchQuery::for_user(APP, user, "secret"))
        .await
        .unwrap();
    (
        shared.user,
        listed.items.into_iter().map(|s| s.id).collect(),
        hits.items
            .iter()
            .map(|h| h.event.message.text().to_owned())
            .collect(),
    )
}

/// The group reads its own `user:` state, session and search hit, and nothing else.
async fn group_sees_only_its_own(fx: &Fixture, id: &SessionId) {
    let (state, listed, hits) = seen_by(fx, GROUP_USER).await;
    let who: StateMap = [("user:who".to_owned(), json!("the group"))]
        .into_iter()
        .collect();
    assert_eq!(state, who, "the group's user: state");
    assert_eq!(listed, std::slice::from_ref(id), "the group's sessions");
    assert_eq!(hits, ["secret of the group"], "the group's search");
}

/// Reserved owner names never collide with real ones. The group owner
/// ([`GROUP_USER`], `*`: a key resolved without a user) and real users named
/// like a store's reserved or escaped forms (`_group`, `group`,
/// `_group.json`, `_`) each keep their own `user:` state, session listing
/// and cross-session search, a real user starts with no `user:` state
/// even when the group has some, and `erase_user` of `_group` leaves the
/// group's sessions and state alone. `*` as a user id is the group itself;
/// as an app, and the encoded forms (`%2A`, `%5Fgroup`, `app/*`, `u|app|*`,
/// ...) as user ids, are `InvalidInput`.
pub async fn reserved_owner_names_never_collide_with_real_ones(fx: Fixture) {
    let group = fx
        .service()
        .resolve(
            &ResolveRequest::group(APP, "discord:reserved"),
            &ResetPolicy::never(),
        )
        .await
        .unwrap()
        .session;
    assert_eq!(group.user_id, GROUP_USER);
    say(&fx, &group.id, "secret of the group", "the group").await;
    let mut real = Vec::new();
    for user in LOOKALIKES {
        let (state, listed, hits) = seen_by(&fx, user).await;
        assert!(
            state.is_empty() && listed.is_empty() && hits.is_empty(),
            "{user:?} sees nothing before it writes: {state:?} {listed:?} {hits:?}"
        );
        let s = fx.session(user).await;
        say(&fx, &s.id, &format!("secret of {user}"), user).await;
        real.push(s.id);
    }
    group_sees_only_its_own(&fx, &group.id).await;
    for (user, id) in LOOKALIKES.iter().zip(&real) {
        let (state, listed, hits) = seen_by(&fx, user).await;
        let who: StateMap = [("user:who".to_owned(), json!(user))].into_iter().collect();
        assert_eq!(state, who, "user: state of {user:?}");
        assert_eq!(listed, std::slice::from_ref(id), "sessions of {user:?}");
        assert_eq!(hits, [format!("secret of {user}")], "search of {user:?}");
    }
    let erased = fx
        .repo
        .erase_user(&crate::app_name(APP), &crate::user_id("_group"))
        .await
        .unwrap();
    assert_eq!((erased.sessions, erased.user_state), (1, true));
    let (state, listed, hits) = seen_by(&fx, "_group").await;
    assert!(state.is_empty() && listed.is_empty() && hits.is_empty());
    fx.repo.get(&group.id).await.unwrap();
    group_sees_only_its_own(&fx, &group.id).await;
    let (state, _, _) = seen_by(&fx, "group").await;
    assert_eq!(state.get("user:who"), Some(&json!("group")));
    assert!(crate::user_id("*").is_group());
    assert_eq!(
        kind(session_core::AppName::new("*")),
        ErrorKind::InvalidInput
    );
    for encoded in ENCODED {
        assert_eq!(
            kind(session_core::UserId::new(encoded)),
            ErrorKind::InvalidInput,
            "{encoded:?}"
        );
    }
}

/// The latest expiry the API accepts: `DateTime::<Utc>::MAX_UTC` to the
/// microsecond (where `--ttl` and [`CreateSessionRequest`]'s TTL stop; one
/// microsecond later is not a date).
pub fn latest_expiry() -> DateTime<Utc> {
    truncate_micros(DateTime::<Utc>::MAX_UTC)
}

/// Reads `s` back every way a store answers with it: get, its owner's
/// listing (live, so listed) and export; a purge leaves it.
async fn reads_back(fx: &Fixture, s: &Session, at: DateTime<Utc>) {
    assert_eq!(fx.repo.get(&s.id).await.unwrap().expires_at, Some(at));
    let listed = fx
        .repo
        .list(&SessionQuery::new().app(APP).user("alice").page(0, 100))
        .await
        .unwrap();
    assert!(
        listed
            .items
            .iter()
            .any(|l| l.id == s.id && l.expires_at == Some(at)),
        "{at} listed: {:?}",
        listed.items
    );
    let dump = fx.repo.export_session(&s.id).await.unwrap();
    assert_eq!(dump.session.expires_at, Some(at));
    fx.repo.purge_expired(fx.clock.now()).await.unwrap();
    fx.repo.get(&s.id).await.unwrap();
}

/// An expiry at the latest date the API accepts ([`latest_expiry`]) and
/// one day before it is stored and read back exactly, by create (the
/// repository's and the service's, by date and by TTL), by update and by
/// an append to such a session; the session is live and no purge removes
/// it. A TTL past it is `InvalidInput`. No store panics (Redis used to add
/// a day for its key TTL and overflow).
pub async fn expiry_at_the_latest_accepted_date_is_stored(fx: Fixture) {
    let max = latest_expiry();
    let day_before = max - Duration::days(1);
    for at in [max, day_before] {
        let s = fx
            .repo
            .create(
                NewSession::new(APP, "alice", fx.clock.now())
                    .unwrap()
                    .with_expires_at(Some(at)),
            )
            .await
            .unwrap();
        reads_back(&fx, &s, at).await;
        fx.append(&s.id, vec![crate::user("still here")]).await;
        reads_back(&fx, &s, at).await;
        let svc = fx.service();
        let by_date = svc
            .create(
                CreateSessionRequest::builder("alice")
                    .app(APP)
                    .expires_at(at)
                    .build()
                    .unwrap(),
            )
            .await
            .unwrap();
        reads_back(&fx, &by_date, at).await;
        let ttl = at.signed_duration_since(fx.clock.now());
        let by_ttl = svc
            .create(
                CreateSessionRequest::builder("alice")
                    .app(APP)
                    .ttl(ttl)
                    .build()
                    .unwrap(),
            )
            .await
            .unwrap();
        reads_back(&fx, &by_ttl, at).await;
        let plain = fx.session("alice").await;
        let updated = fx
            .repo
            .update(&plain.id, SessionUpdate::new().expires_at(Some(at)))
            .await
            .unwrap();
        assert_eq!(updated.expires_at, Some(at));
        reads_back(&fx, &updated, at).await;
    }
    let past_max = fx.clock.now().checked_add_signed(Duration::MAX);
    assert_eq!(past_max, None, "no date lies past the latest");
    let too_long = CreateSessionRequest::builder("alice")
        .ttl(Duration::MAX)
        .build()
        .unwrap();
    assert_eq!(
        kind(fx.service().create(too_long).await),
        ErrorKind::InvalidInput
    );
}
