//! Keyset paging: reading a view page by page from a cursor.

use session_core::{
    Clock as _, CompactionSource, ErrorKind, EventFilter, EventView, KeyedItem, Role, SessionEvent,
    SessionRepositoryExt, SessionService as _,
};

use super::support::numbered;
use crate::fixture::{assistant, texts, user, Fixture};

/// Reads a whole view through `filter` page by page, each page starting
/// after the previous page's last event ([`session_core::Page::next_after`]).
async fn by_cursor(fx: &Fixture, id: &session_core::SessionId, filter: EventFilter) -> Vec<String> {
    let mut out = Vec::new();
    let mut f = filter;
    loop {
        let page = fx.repo.events(id, &f).await.unwrap();
        assert!(page.items.len() <= f.page_size);
        let next = page.next_after();
        assert_eq!(next.is_some(), page.has_more);
        out.extend(texts(&page.items));
        match next {
            Some(seq) => f = f.after(seq),
            None => return out,
        }
    }
}

/// Paging by `after` reads every event of a view once, in view order,
/// filtered or not, in the archive and in a compacted context (where a
/// summary comes before the older turns it kept); a cursor whose event left
/// the context is `InvalidInput`; `after` combines with `last_n` and pages.
pub async fn events_page_by_cursor_reads_the_whole_view(fx: Fixture) {
    let s = fx.session("alice").await;
    let mut events = Vec::new();
    for i in 1..=45 {
        let text = format!("m {i}");
        events.push(if i % 3 == 0 {
            assistant(&text)
        } else {
            user(&text)
        });
    }
    fx.append(&s.id, events).await;
    let all: Vec<String> = (1..=45).map(|i| format!("m {i}")).collect();

    // The archive, unfiltered and filtered.
    assert_eq!(
        by_cursor(&fx, &s.id, EventFilter::archive().page(0, 7)).await,
        all
    );
    let assistants: Vec<String> = (1..=15).map(|i| format!("m {}", i * 3)).collect();
    let f = EventFilter::archive().roles([Role::Assistant]).page(0, 4);
    assert_eq!(by_cursor(&fx, &s.id, f).await, assistants);

    // Cursor with pages and with last_n.
    let f = EventFilter::archive().after(10).page(1, 5);
    assert_eq!(fx.texts(&s.id, &f).await, all[15..20]);
    let f = EventFilter::archive().after(40).last_n(3);
    assert_eq!(fx.texts(&s.id, &f).await, all[42..45]);
    let f = EventFilter::archive().after(43).last_n(5);
    assert_eq!(fx.texts(&s.id, &f).await, all[43..45]);
    for past in [45, 1000, u64::MAX] {
        let page = fx
            .repo
            .events(&s.id, &EventFilter::archive().after(past))
            .await
            .unwrap();
        assert!(page.items.is_empty() && !page.has_more, "after {past}");
    }

    // A compacted context: summary first, then the kept turns, then appends.
    let ctx = fx.context(&s.id).await;
    let v = fx.repo.event_version(&s.id).await.unwrap();
    let [prompt, summary] = SessionEvent::summary_turn(
        "m 1 to m 35 happened",
        CompactionSource::RecursiveSummarization,
        fx.clock.now(),
    );
    let mut compacted = vec![prompt, summary];
    compacted.extend_from_slice(&ctx[35..]);
    assert!(fx.repo.replace_context(&s.id, compacted, v).await.unwrap());
    fx.append(&s.id, numbered("n", 6)).await;
    let context = texts(&fx.repo.all_events(&s.id, EventView::Context).await.unwrap());
    assert_eq!(context.len(), 2 + 10 + 6);
    assert_eq!(context[2], "m 36");
    for size in [1, 3, 5, 100] {
        let f = EventFilter::context().page(0, size);
        assert_eq!(by_cursor(&fx, &s.id, f).await, context, "pages of {size}");
    }
    let seq_of = |text: &str| {
        ctx.iter()
            .find(|e| e.message.text() == text)
            .map(|e| e.seq)
            .unwrap()
    };
    let f = EventFilter::context().after(seq_of("m 40")).page(0, 3);
    assert_eq!(fx.texts(&s.id, &f).await, ["m 41", "m 42", "m 43"]);
    let f = EventFilter::context().after(seq_of("m 36")).last_n(2);
    assert_eq!(fx.texts(&s.id, &f).await, ["n 5", "n 6"]);
    let f = EventFilter::context().roles([Role::User]).page(0, 4);
    let users: Vec<String> = fx
        .texts(
            &s.id,
            &EventFilter::context().roles([Role::User]).page(0, 100),
        )
        .await;
    assert_eq!(by_cursor(&fx, &s.id, f).await, users);

    // The archive still holds everything, in seq order.
    let archive = by_cursor(&fx, &s.id, EventFilter::archive().page(0, 8)).await;
    assert_eq!(archive.len(), 45 + 2 + 6);
    assert_eq!(archive[..45], all[..]);

    // m 10 left the context with the compaction: its cursor cannot continue the context.
    let err = fx
        .repo
        .events(&s.id, &EventFilter::context().after(seq_of("m 10")))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");

    // Pruned events leave gaps in the seqs: pages by cursor still read
    // every event left once, in seq order, whatever the page size.
    let v = fx.repo.event_version(&s.id).await.unwrap();
    let gone: Vec<u64> = (5..=12)
        .chain([20, 22])
        .map(|n| seq_of(&format!("m {n}")))
        .collect();
    let pruned = fx.repo.prune_events(&s.id, &gone, v).await.unwrap();
    assert_eq!(pruned.map(|p| p.removed), Some(10));
    let left: Vec<String> = archive
        .iter()
        .filter(|t| !(5..=12).chain([20, 22]).any(|n| **t == format!("m {n}")))
        .cloned()
        .collect();
    for size in [1, 3, 4, 8, 100] {
        let f = EventFilter::archive().page(0, size);
        assert_eq!(by_cursor(&fx, &s.id, f).await, left, "pages of {size}");
    }
}

/// What a read of the items under `key` must hold: each event's object
/// under the key, or the whole event where it has none.
fn expected_items(events: &[SessionEvent], key: &str) -> Vec<KeyedItem> {
    events
        .iter()
        .map(|e| KeyedItem::of_event(e.clone(), key))
        .collect()
}

/// An adapter's read of the items it stored under a metadata key gives,
/// for every page and view, each event's object under the key as it was
/// stored, or the whole event where there is none (a summary, an event
/// without the key, a value that is not an object); the paging is the
/// events read's, and another owner's session stays unknown.
pub async fn items_read_the_objects_stored_under_a_key(fx: Fixture) {
    let s = fx.session("alice").await;
    let mut events = Vec::new();
    for i in 1..=30 {
        let mut e = if i % 2 == 0 {
            assistant(&format!("m {i}"))
        } else {
            user(&format!("m {i}"))
        };
        match i % 7 {
            0 => {}
            3 => {
                e.metadata
                    .insert(ITEM.into(), serde_json::json!("not an object"));
            }
            _ => {
                let item =
                    serde_json::json!({"type": "message", "n": i, "text": format!("é \"{i}\"")});
                e.metadata.insert(ITEM.into(), item);
            }
        }
        e.metadata
            .insert("other".into(), serde_json::json!({"n": -i}));
        events.push(e);
    }
    fx.append(&s.id, events).await;
    fx.summarize_first(&s.id, 10).await;
    fx.append(&s.id, numbered("n", 3)).await;

    let filters = [
        EventFilter::context().page(0, 100),
        EventFilter::context().page(1, 4),
        EventFilter::context().last_n(5),
        EventFilter::context()
            .after(fx.context(&s.id).await[4].seq)
            .page(0, 6),
        EventFilter::archive().page(0, 100),
        EventFilter::context().roles([Role::User]).page(0, 100),
    ];
    for f in filters {
        let events = fx.repo.events(&s.id, &f).await.unwrap();
        let items = fx.repo.items(&s.id, ITEM, &f).await.unwrap();
        assert_eq!(items.items, expected_items(&events.items, ITEM), "{f:?}");
        assert_eq!(
            (items.page, items.page_size, items.has_more),
            (events.page, events.page_size, events.has_more),
            "{f:?}"
        );
    }
    // The stored objects themselves, in context order after the summary turn.
    let whole = fx
        .repo
        .items(&s.id, ITEM, &EventFilter::context().page(0, 100))
        .await
        .unwrap();
    let stored: Vec<i64> = whole
        .items
        .iter()
        .filter_map(|item| match item {
            KeyedItem::Value(raw) => {
                serde_json::from_str::<serde_json::Value>(raw.get()).ok()?["n"].as_i64()
            }
            KeyedItem::Event(_) => None,
        })
        .collect();
    let expected: Vec<i64> = (11..=30).filter(|i| i % 7 != 0 && i % 7 != 3).collect();
    assert_eq!(stored, expected);
    assert_eq!(whole.items.len(), 2 + 20 + 3);

    let service = fx.service();
    let bob = session_core::Owner::parse(&s.app, "bob").unwrap();
    let err = service
        .items(&bob, &s.id, ITEM, &EventFilter::context())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
}

/// The session with a page of its items, read together through the
/// service, answers what `get` and `items` answer apart (the state merged
/// across scopes, every page and view); another owner's session and an
/// unknown one are `NotFound`.
pub async fn session_items_answer_the_session_and_its_page(fx: Fixture) {
    let service = fx.service();
    let s = fx.session("alice").await;
    let alice = session_core::Owner::parse(&s.app, "alice").unwrap();
    let mut first = SessionEvent::builder(session_core::Message::user("m 0"))
        .state("user:name", "Alice")
        .state("app:tier", "gold")
        .state("step", 1)
        .build()
        .unwrap();
    first
        .metadata
        .insert(ITEM.into(), serde_json::json!({"n": 0}));
    let mut events = vec![first];
    for i in 1..=12 {
        let mut e = assistant(&format!("m {i}"));
        e.metadata.insert(ITEM.into(), serde_json::json!({"n": i}));
        events.push(e);
    }
    fx.append(&s.id, events).await;
    fx.summarize_first(&s.id, 4).await;

    let filters = [
        EventFilter::context().page(0, 100),
        EventFilter::context().last_n(5),
        EventFilter::archive().page(0, 100),
        EventFilter::context().roles([Role::User]).page(0, 100),
    ];
    for f in filters {
        let read = service
            .session_items(&alice, &s.id, ITEM, &f)
            .await
            .unwrap();
        let session = service.get(&alice, &s.id).await.unwrap();
        assert_eq!(read.session, session, "{f:?}");
        assert_eq!(
            read.session.state.get("user:name"),
            Some(&serde_json::json!("Alice"))
        );
        assert_eq!(
            read.session.state.get("app:tier"),
            Some(&serde_json::json!("gold"))
        );
        let items = service.items(&alice, &s.id, ITEM, &f).await.unwrap();
        assert_eq!(read.items.items, items.items, "{f:?}");
        assert_eq!(
            (read.items.page, read.items.page_size, read.items.has_more),
            (items.page, items.page_size, items.has_more),
            "{f:?}"
        );
    }
    let bob = session_core::Owner::parse(&s.app, "bob").unwrap();
    let err = service
        .session_items(&bob, &s.id, ITEM, &EventFilter::context())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    let unknown = session_core::SessionId::new("no-such-session").unwrap();
    let err = service
        .session_items(&alice, &unknown, ITEM, &EventFilter::context())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
}

/// The metadata key the item cases store their objects under.
const ITEM: &str = "framework_item";
