//! Values at the edge of what the API accepts: owner names that equal a
//! store's reserved or escaped forms. Every store keeps them apart or
//! refuses them with a typed error.

use serde_json::json;
use session_core::{
    ErrorKind, ResetPolicy, ResolveRequest, SearchQuery, SessionError, SessionEvent, SessionId,
    SessionQuery, SessionRepository as _, SessionService as _, StateMap, GROUP_USER,
};

use crate::{Fixture, APP};

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
