//! Encryption at rest checked in the raw store: a backend test puts its
//! store behind the encryption layer, plants the [`crate::erasure`]
//! canaries through it (event text, tool arguments and results, session,
//! `user:` state and metadata, a fork), checks they read back through the
//! layer, dumps its raw store to text and checks [`check_sealed`]: no
//! canary anywhere, sealed values present.

use chrono::{DateTime, Utc};
use session_core::{AppName, SearchQuery, SessionId, SessionRepository, UserId};

use crate::erasure::{Planted, ALICE_CANARY, BOB_CANARY, ERASURE_APP};

/// Plants the canaries through `sealed` (a store behind the encryption
/// layer) and checks the layer reads them back.
pub async fn plant(sealed: &dyn SessionRepository, now: DateTime<Utc>) -> Planted {
    let planted = crate::erasure::plant(sealed, now).await;
    let first = SessionId::new(&planted.alice_sessions[0]).unwrap();
    let s = sealed.get(&first).await.unwrap();
    assert!(s.metadata["ticket"]
        .as_str()
        .unwrap()
        .contains(ALICE_CANARY));
    assert_eq!(s.state["note"], ALICE_CANARY);
    let hits = sealed
        .search(&SearchQuery::for_user(ERASURE_APP, "alice", ALICE_CANARY))
        .await
        .unwrap();
    assert_eq!(hits.items.len(), 9, "search opens every session");
    let shared = sealed
        .shared_state(
            &AppName::new(ERASURE_APP).unwrap(),
            &UserId::new("alice").unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(shared.user.values().next().unwrap(), ALICE_CANARY);
    planted
}

/// The raw dump holds sealed values and neither canary.
pub fn check_sealed(raw: &str) {
    assert!(raw.contains("asenc1"), "the raw dump holds sealed values");
    for canary in [ALICE_CANARY, BOB_CANARY] {
        if let Some(line) = raw.lines().find(|l| l.contains(canary)) {
            panic!("a canary is stored in plain text: {line}");
        }
    }
}
