//! Batches larger than one held-id lookup: re-sent ids are found across
//! lookup chunks, in appends and in context replaces alike.
#![allow(clippy::unwrap_used)]

use session_core::{
    EventView, Message, NewSession, SessionEvent, SessionRepository, SessionRepositoryExt,
};
use session_sqlite::SqliteRepository;

fn event(i: usize) -> SessionEvent {
    SessionEvent::builder(Message::user(format!("event {i}")))
        .id(format!("e{i}"))
        .token_estimate(2)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_large_resent_batch_writes_only_its_new_events() {
    let repo = SqliteRepository::in_memory().await.unwrap();
    let s = repo
        .create(NewSession::new("app", "u", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    let first = repo
        .append(&s.id, (0..600).map(event).collect())
        .await
        .unwrap();
    assert_eq!((first.written, first.version), (600, 1));

    // The first 600 again (out of order, one twice), then 100 new ones.
    let mut again: Vec<SessionEvent> = (0..600).rev().map(event).collect();
    again.push(event(17));
    again.extend((600..700).map(event));
    let out = repo.append(&s.id, again).await.unwrap();
    assert_eq!((out.written, out.version), (100, 2));
    assert_eq!(out.seqs[0], 600, "e599 keeps its seq");
    assert_eq!(out.seqs[600], 18, "e17 keeps its seq");
    assert_eq!(out.seqs[601], 601);
    assert_eq!(out.seqs[700], 700);

    let got = repo.get(&s.id).await.unwrap();
    assert_eq!((got.event_count, got.context_tokens), (700, 1400));
    let noop = repo
        .append(&s.id, (0..700).map(event).collect())
        .await
        .unwrap();
    assert_eq!((noop.written, noop.version), (0, 2));

    // A context of 300 held and 300 new events, interleaved.
    let context: Vec<SessionEvent> = (0..300)
        .flat_map(|i| [event(i * 2), event(1000 + i)])
        .collect();
    assert!(repo.replace_context(&s.id, context, 2).await.unwrap());
    let view = repo.all_events(&s.id, EventView::Context).await.unwrap();
    let ids: Vec<&str> = view.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids.len(), 600);
    assert_eq!(&ids[..4], ["e0", "e1000", "e2", "e1001"]);
    assert_eq!(view[1].seq, 701, "new context events get the next seqs");
    let got = repo.get(&s.id).await.unwrap();
    assert_eq!(
        (got.event_count, got.context_tokens, got.version),
        (1000, 1200, 3)
    );
}
