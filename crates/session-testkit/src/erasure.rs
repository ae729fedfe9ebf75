//! Erasure checked in the raw store: canaries a backend test plants, then
//! looks for in everything the engine holds (rows, keys, files, index
//! entries) before and after `erase_user`.
//!
//! A backend test calls [`plant`], dumps its raw store to text (every row of
//! every table, every key with its value, every file), checks
//! [`Planted::check_before`] on it (the dump really holds the canaries, so
//! the check can fail), erases the user, dumps again and checks
//! [`Planted::check_after`].

use chrono::{DateTime, Utc};
use serde_json::json;
use session_core::{
    AppName, Erased, ForkAt, Message, NewSession, SessionEvent, SessionRepository,
    SessionRepositoryExt, ToolCall, UserId,
};

/// The app the canaries live in.
pub const ERASURE_APP: &str = "erasure-app";
/// What must be gone after alice is erased.
pub const ALICE_CANARY: &str = "alicecanary7f3a9";
/// What must stay: another user's data.
pub const BOB_CANARY: &str = "bobcanary51c2e";

/// What [`plant`] wrote.
#[derive(Debug, Clone)]
pub struct Planted {
    /// Alice's session ids (a forked one included): no raw key or row may name them afterwards.
    pub alice_sessions: Vec<String>,
}

/// Writes alice's canary into an event's text, a tool call's arguments, a
/// tool result, session, `user:` state and metadata, across two sessions
/// and a fork; and bob's canary into a session of his.
pub async fn plant(repo: &dyn SessionRepository, now: DateTime<Utc>) -> Planted {
    let mut alice_sessions = Vec::new();
    for n in 0..2 {
        let s = repo
            .create(
                NewSession::new(ERASURE_APP, "alice", now)
                    .unwrap()
                    .with_metadata(
                        json!({"ticket": format!("{ALICE_CANARY}-{n}")})
                            .as_object()
                            .cloned()
                            .unwrap_or_default(),
                    ),
            )
            .await
            .unwrap();
        let call = ToolCall::new("call-1", "lookup", &json!({"q": ALICE_CANARY}));
        let events = vec![
            SessionEvent::builder(Message::user(format!("my code is {ALICE_CANARY}")))
                .state("user:secret", ALICE_CANARY)
                .state("note", ALICE_CANARY)
                .build()
                .unwrap(),
            SessionEvent::new(Message::assistant_tool_calls("", vec![call])),
            SessionEvent::new(Message::tool_result(
                "call-1",
                "lookup",
                format!("found {ALICE_CANARY}"),
            )),
        ];
        repo.append(&s.id, events).await.unwrap();
        alice_sessions.push(s.id.to_string());
    }
    let first = session_core::SessionId::new(&alice_sessions[0]).unwrap();
    let fork = repo.fork(&first, &ForkAt::Latest, now).await.unwrap();
    alice_sessions.push(fork.id.to_string());
    let bob = repo
        .create(NewSession::new(ERASURE_APP, "bob", now).unwrap())
        .await
        .unwrap();
    let e = SessionEvent::builder(Message::user(format!("bob says {BOB_CANARY}")))
        .state("user:name", BOB_CANARY)
        .build()
        .unwrap();
    repo.append(&bob.id, vec![e]).await.unwrap();
    Planted { alice_sessions }
}

impl Planted {
    /// The raw dump holds both users' canaries and names alice's sessions.
    pub fn check_before(&self, raw: &str) {
        assert!(
            raw.contains(ALICE_CANARY),
            "the raw dump holds alice's canary"
        );
        assert!(raw.contains(BOB_CANARY), "the raw dump holds bob's canary");
        for id in &self.alice_sessions {
            assert!(raw.contains(id.as_str()), "the raw dump names session {id}");
        }
    }

    /// Erases alice and checks the counts.
    pub async fn erase(&self, repo: &dyn SessionRepository) -> Erased {
        let erased = repo
            .erase_user(
                &AppName::new(ERASURE_APP).unwrap(),
                &UserId::new("alice").unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(
            erased,
            Erased {
                sessions: 3,
                events: 9,
                user_state: true
            }
        );
        erased
    }

    /// Nothing of alice is left in the raw dump; bob's data is.
    pub fn check_after(&self, raw: &str) {
        if let Some(line) = raw.lines().find(|l| l.contains(ALICE_CANARY)) {
            panic!("alice's canary is still stored: {line}");
        }
        for id in &self.alice_sessions {
            assert!(
                !raw.contains(id.as_str()),
                "session {id} of alice is still named in the raw store"
            );
        }
        assert!(raw.contains(BOB_CANARY), "bob's data stays");
    }
}
