//! The archive's counters: what a session reports it holds.

use session_core::retention::{prune_archive, ArchiveRetention};
use session_core::{Clock as _, Message, RewindTo, SessionEvent, SessionId};

use crate::fixture::{assistant, user, Fixture};

/// A session's `event_bytes` counts what its archive holds as stored: 0
/// when created; an append adds at least its events' encodings (a store
/// that seals them adds more) and a resend adds nothing; a context replace
/// adds its new summary; a rewind gives back exactly what the rewound
/// events added; a prune lowers it; an imported copy counts the same.
pub async fn event_bytes_count_what_the_archive_holds(fx: Fixture) {
    let s = fx.session("alice").await;
    let bytes = |id: SessionId| {
        let repo = fx.repo.clone();
        async move { repo.get(&id).await.unwrap().event_bytes }
    };
    assert_eq!(bytes(s.id.clone()).await, 0);

    let first = vec![user("one"), assistant(&"long answer ".repeat(200))];
    let encoded = SessionEvent::stored_bytes_of(&first).unwrap();
    fx.append(&s.id, first.clone()).await;
    let after_first = bytes(s.id.clone()).await;
    assert!(after_first >= encoded, "{after_first} < {encoded}");
    fx.append(&s.id, first).await;
    assert_eq!(
        bytes(s.id.clone()).await,
        after_first,
        "a resend adds nothing"
    );

    let second = vec![user("two"), assistant("three"), user("four")];
    let out = fx.append(&s.id, second).await;
    let after_second = bytes(s.id.clone()).await;
    assert!(after_second > after_first);

    let context = fx.context(&s.id).await;
    let summary = SessionEvent::new(Message::assistant("summary of one to four"));
    let mut replaced = vec![summary];
    replaced.extend(context[3..].iter().cloned());
    let v = fx.repo.event_version(&s.id).await.unwrap();
    assert!(fx.repo.replace_context(&s.id, replaced, v).await.unwrap());
    let after_replace = bytes(s.id.clone()).await;
    assert!(
        after_replace > after_second,
        "the summary joins the archive"
    );

    fx.repo
        .rewind_to(&s.id, &RewindTo::Seq(out.seqs[0]))
        .await
        .unwrap();
    assert_eq!(
        bytes(s.id.clone()).await,
        after_first,
        "a rewind gives back what the rewound events added"
    );

    fx.append(&s.id, vec![user("five"), user("six"), user("seven")])
        .await;
    let before_prune = bytes(s.id.clone()).await;
    let pruned = prune_archive(
        &*fx.repo,
        &s.id,
        &ArchiveRetention::keep_latest(2),
        fx.clock.now(),
    )
    .await
    .unwrap();
    assert!(pruned.removed > 0);
    let after_prune = bytes(s.id.clone()).await;
    assert!(
        after_prune < before_prune,
        "{after_prune} >= {before_prune}"
    );
    assert!(after_prune > 0);

    let mut copy = fx.repo.export_session(&s.id).await.unwrap();
    copy.session.id = SessionId::generate();
    copy.session.event_bytes = 0;
    fx.repo.import_session(copy.clone()).await.unwrap();
    assert_eq!(
        bytes(copy.session.id).await,
        after_prune,
        "an import counts what it writes"
    );
}
