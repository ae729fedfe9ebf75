//! Encryption at rest checked in the raw store: a backend test puts its
//! store behind the encryption layer, plants the [`crate::erasure`]
//! canaries through it (event text, tool arguments and results, session,
//! `user:` state and metadata, a fork), checks they read back through the
//! layer, dumps its raw store to text and checks [`check_sealed`]: no
//! canary anywhere, sealed values present. Then
//! [`moved_or_replaced_values_are_refused`] changes sealed values in the
//! raw store as an attacker would and checks the layer refuses them.

use chrono::{DateTime, Utc};
use serde_json::Value;
use session_core::{
    AppName, ErrorKind, EventView, ImportOutcome, Message, NewSession, SearchQuery, Session,
    SessionDump, SessionEvent, SessionId, SessionRepository, SessionRepositoryExt, StateMap,
    ToolCall, UserId, ENCRYPTION_RECORD,
};

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
    assert!(raw.contains("asenc2"), "the raw dump holds sealed values");
    for canary in [ALICE_CANARY, BOB_CANARY] {
        if let Some(line) = raw.lines().find(|l| l.contains(canary)) {
            panic!("a canary is stored in plain text: {line}");
        }
    }
}

/// How an attacker with write access to the store changes a sealed session.
type Tamper = fn(&mut SessionDump, &SessionDump);

/// The changes [`moved_or_replaced_values_are_refused`] makes: each one
/// moves, swaps or replaces sealed values inside the store, and names
/// what the error must name.
fn tampers() -> Vec<(&'static str, Tamper, &'static str)> {
    fn content(d: &SessionDump, i: usize) -> String {
        d.events[i].message.text().to_owned()
    }
    fn set_content(d: &mut SessionDump, i: usize, text: String) {
        let e = &mut d.events[i];
        e.message = match &e.message {
            Message::User { .. } => Message::user(text),
            Message::Assistant { tool_calls, .. } => {
                Message::assistant_tool_calls(text, tool_calls.clone())
            }
            Message::Tool {
                tool_call_id, name, ..
            } => Message::Tool {
                tool_call_id: tool_call_id.clone(),
                name: name.clone(),
                content: text.into(),
            },
            Message::System { .. } => Message::system(text),
        };
    }
    vec![
        (
            "content swapped between two events of the session",
            |d, _| {
                let (a, b) = (content(d, 0), content(d, 2));
                set_content(d, 0, b);
                set_content(d, 2, a);
            },
            "event 1 content",
        ),
        (
            "content copied from another session's event",
            |d, other| set_content(d, 0, content(other, 0)),
            "event 1 content",
        ),
        (
            "content replaced by plain text",
            |d, _| set_content(d, 2, "forged answer".to_owned()),
            "event 3 content",
        ),
        (
            "content emptied",
            |d, _| set_content(d, 2, String::new()),
            "event 3 content",
        ),
        (
            "tool arguments copied from the same event's text",
            |d, _| {
                let text = content(d, 1);
                if let Message::Assistant { tool_calls, .. } = &mut d.events[1].message {
                    tool_calls[0].arguments = text;
                }
            },
            "event 2 tool arguments",
        ),
        (
            "a state value moved to another key",
            |d, _| {
                let v = d.session.state["note"].clone();
                d.session.state.insert("plan".to_owned(), v);
            },
            "state plan",
        ),
        (
            "a metadata value moved into the state",
            |d, _| {
                let v = d.session.metadata["ticket"].clone();
                d.session.state.insert("note".to_owned(), v);
            },
            "state note",
        ),
        (
            "the data key record downgraded to the first format",
            |d, _| {
                if let Some(Value::Object(record)) = d.session.metadata.get_mut(ENCRYPTION_RECORD) {
                    record.remove("v");
                }
            },
            "data key",
        ),
    ]
}

/// A session written through `sealed`: a question, a tool call and its
/// result, session state and metadata.
async fn sealed_session(sealed: &dyn SessionRepository, user: &str) -> Session {
    let mut metadata = StateMap::new();
    metadata.insert("ticket".to_owned(), Value::from("T-1 refund"));
    let s = sealed
        .create(
            NewSession::new("tamper", user, Utc::now())
                .unwrap()
                .with_metadata(metadata),
        )
        .await
        .unwrap();
    let call = ToolCall::new("call_1", "lookup", &serde_json::json!({"order": 4711}));
    let events = vec![
        SessionEvent::builder(Message::user("where is order 4711?"))
            .state("note", "asked about 4711")
            .state("plan", "look it up")
            .build()
            .unwrap(),
        SessionEvent::new(Message::assistant_tool_calls("checking", vec![call])),
        SessionEvent::new(Message::tool_result(
            "call_1",
            "lookup",
            "shipped on monday",
        )),
    ];
    sealed.append(&s.id, events).await.unwrap();
    s
}

/// Sealed values are bound to where they sit: each change an attacker
/// with write access to the store would make (values moved, swapped,
/// replaced or emptied, the key record downgraded), made in `inner` (the
/// raw store under `sealed`), makes the session's read through `sealed`
/// an `Encryption` error naming the session and the event or field, never
/// a value returned as authentic. Sessions nobody changed read as before.
pub async fn moved_or_replaced_values_are_refused(
    sealed: &dyn SessionRepository,
    inner: &dyn SessionRepository,
) {
    let other = sealed_session(sealed, "mallory").await;
    let other_dump = inner.export_session(&other.id).await.unwrap();
    for (what, tamper, names) in tampers() {
        let s = sealed_session(sealed, "alice").await;
        let mut dump = inner.export_session(&s.id).await.unwrap();
        tamper(&mut dump, &other_dump);
        dump.session.version = dump.session.version.saturating_add(1);
        assert_eq!(
            inner.import_session(dump).await.unwrap(),
            ImportOutcome::Imported,
            "{what}: the tampered session is stored"
        );
        let read = async {
            sealed.get(&s.id).await?;
            sealed.all_events(&s.id, EventView::Archive).await
        };
        let e = match read.await {
            Ok(events) => panic!("{what}: read back as authentic: {events:?}"),
            Err(e) => e,
        };
        assert_eq!(e.kind(), ErrorKind::Encryption, "{what}: {e}");
        let said = e.to_string();
        assert!(
            said.contains(&format!("session {}", s.id)),
            "{what}: {said}"
        );
        assert!(said.contains(names), "{what}: {said} (expected {names:?})");
    }
    let events = sealed
        .all_events(&other.id, EventView::Archive)
        .await
        .unwrap();
    assert_eq!(events[2].message.text(), "shipped on monday");
}
