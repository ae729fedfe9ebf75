//! The context's history: when each archived event left the context.

use chrono::Duration;
use session_core::{
    Clock as _, CompactionSource, ContextExit, EventFilter, RewindTo, SessionEvent,
    SessionRepository,
};

use super::support::numbered;
use crate::fixture::{user, Fixture};

/// Each event's `left_context` in the archive view, by text.
async fn exits(fx: &Fixture, id: &session_core::SessionId) -> Vec<(String, Option<ContextExit>)> {
    fx.archive(id)
        .await
        .into_iter()
        .map(|e| (e.message.text().to_owned(), e.left_context))
        .collect()
}

/// Replaces the context at the current version, the clock moved on a minute first.
async fn replace(
    fx: &Fixture,
    id: &session_core::SessionId,
    events: Vec<SessionEvent>,
) -> ContextExit {
    fx.clock.advance(Duration::minutes(1));
    let v = fx.repo.event_version(id).await.unwrap();
    assert!(fx.repo.replace_context(id, events, v).await.unwrap());
    ContextExit {
        at: fx.clock.now(),
        version: v + 1,
    }
}

/// An event read through the archive view carries when it left the context
/// and the version of the replace that took it out (`left_context`); events
/// in the context carry none. A later replace that leaves it out again does
/// not move the time; one that brings it back clears it, and the next that
/// drops it sets a new one. Paged and tail reads agree with whole reads, a
/// rewind keeps the history of the events it keeps, a value sent with an
/// append is never stored, and export and import carry the history.
pub async fn archived_events_carry_when_they_left_the_context(fx: Fixture) {
    let s = fx.session("alice").await;
    fx.append(&s.id, numbered("m", 6)).await;
    let ctx = fx.context(&s.id).await;
    let mut first = SessionEvent::summary_turn(
        "m 1 to m 4 happened",
        CompactionSource::RecursiveSummarization,
        fx.clock.now(),
    )
    .to_vec();
    first.extend_from_slice(&ctx[4..]);
    let c1 = replace(&fx, &s.id, first).await;
    let got = exits(&fx, &s.id).await;
    let want_first: Vec<Option<ContextExit>> = [Some(c1); 4].into_iter().chain([None; 4]).collect();
    assert_eq!(
        got.iter().map(|(_, e)| *e).collect::<Vec<_>>(),
        want_first,
        "m 1..4 left at the first replace; m 5, m 6 and the summary are in the context: {got:?}"
    );
    assert!(
        fx.context(&s.id)
            .await
            .iter()
            .all(|e| e.left_context.is_none()),
        "the context view carries no exit"
    );

    // A second compaction drops the first summary and m 5; m 1..4 keep their time.
    let ctx = fx.context(&s.id).await;
    let mut second = SessionEvent::summary_turn(
        "m 1 to m 5 happened",
        CompactionSource::RecursiveSummarization,
        fx.clock.now(),
    )
    .to_vec();
    second.extend_from_slice(&ctx[3..]);
    let c2 = replace(&fx, &s.id, second).await;
    let got = exits(&fx, &s.id).await;
    let want_second = [
        Some(c1),
        Some(c1),
        Some(c1),
        Some(c1),
        Some(c2),
        None,
        Some(c2),
        Some(c2),
        None,
        None,
    ];
    assert_eq!(
        got.iter().map(|(_, e)| *e).collect::<Vec<_>>(),
        want_second,
        "{got:?}"
    );

    // m 1 comes back into the context, then leaves again.
    let archive = fx.archive(&s.id).await;
    let m1 = archive[0].clone();
    let mut back = vec![m1];
    back.extend(fx.context(&s.id).await);
    replace(&fx, &s.id, back).await;
    assert_eq!(
        exits(&fx, &s.id).await[0].1,
        None,
        "m 1 is back in the context"
    );
    let without_m1: Vec<SessionEvent> = fx.context(&s.id).await.split_off(1);
    let c4 = replace(&fx, &s.id, without_m1).await;
    let got = exits(&fx, &s.id).await;
    assert_eq!(got[0].1, Some(c4), "m 1 left again: {got:?}");
    assert_eq!(got[1].1, Some(c1), "m 2 never came back: {got:?}");

    // An exit sent with an append is not stored: the new event is in the context.
    let mut forged = user("m 7");
    forged.left_context = Some(c1);
    fx.append(&s.id, vec![forged]).await;
    let whole = fx.archive(&s.id).await;
    assert_eq!(whole.last().map(|e| e.left_context), Some(None));

    // Paged, cursor and tail reads annotate exactly as the whole read.
    let mut paged = Vec::new();
    let mut after = None;
    loop {
        let mut f = EventFilter::archive().page(0, 3);
        if let Some(a) = after {
            f = f.after(a);
        }
        let page = fx.repo.events(&s.id, &f).await.unwrap();
        after = page.items.last().map(|e| e.seq);
        let done = page.items.len() < 3;
        paged.extend(page.items);
        if done {
            break;
        }
    }
    assert_eq!(paged, whole, "cursor pages of the archive");
    let tail = fx
        .repo
        .events(&s.id, &EventFilter::archive().last_n(4))
        .await
        .unwrap()
        .items;
    assert_eq!(tail, whole[whole.len() - 4..], "last_n of the archive");

    // Export and import carry the history.
    let dump = fx.repo.export_session(&s.id).await.unwrap();
    assert_eq!(dump.context_log.len(), 4, "one change per replace");
    assert!(
        dump.events.iter().all(|e| e.left_context.is_none()),
        "events are exported as stored"
    );
    assert!(fx.repo.delete(&s.id).await.unwrap());
    fx.repo.import_session(dump).await.unwrap();
    assert_eq!(fx.archive(&s.id).await, whole, "after export and import");

    // A rewind keeps the history of the events it keeps.
    let m7 = whole.last().map(|e| e.seq).unwrap();
    fx.repo.rewind_to(&s.id, &RewindTo::Seq(m7)).await.unwrap();
    assert_eq!(
        fx.archive(&s.id).await,
        whole[..whole.len() - 1],
        "after a rewind"
    );
}
