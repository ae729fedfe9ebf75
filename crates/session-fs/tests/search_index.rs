//! The search index file beside each log: saved once enough is new, used
//! by another repository over the same directory (another process), and
//! rebuilt when it is damaged or the log was rewritten under it.
#![allow(clippy::unwrap_used)]

use session_core::{
    Message, NewSession, RewindTo, SearchQuery, SessionEvent, SessionId, SessionRepository,
};
use session_fs::FsRepository;

async fn texts(repo: &FsRepository, id: &SessionId, q: &str) -> Vec<String> {
    repo.search(&SearchQuery::in_session(id.as_str(), q).page(0, 100))
        .await
        .unwrap()
        .items
        .iter()
        .map(|h| h.event.message.text().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_index_file_is_shared_checked_and_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let a = FsRepository::open(dir.path()).await.unwrap();
    let s = a
        .create(NewSession::new("app", "u", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    let batch = (0..1200)
        .map(|i| SessionEvent::new(Message::user(format!("event {i} kiwi{}", i % 7))))
        .collect();
    a.append(&s.id, batch).await.unwrap();
    assert_eq!(texts(&a, &s.id, "event 1199").await, ["event 1199 kiwi2"]);
    let file = dir
        .path()
        .join("sessions")
        .join(s.id.as_str())
        .join("search.idx");
    assert!(file.exists(), "1,200 new events are saved beside the log");

    // Another repository over the same directory: it reads the file, then the log's new tail.
    let b = FsRepository::open(dir.path()).await.unwrap();
    a.append(&s.id, vec![SessionEvent::new(Message::user("late kiwi9"))])
        .await
        .unwrap();
    assert_eq!(texts(&b, &s.id, "kiwi9").await, ["late kiwi9"]);

    // A rewind through `a` rewrites the log; `b`'s index no longer fits and is rebuilt.
    a.rewind_to(&s.id, &RewindTo::Seq(1000)).await.unwrap();
    a.append(
        &s.id,
        vec![SessionEvent::new(Message::user("after rewind kiwi9"))],
    )
    .await
    .unwrap();
    assert_eq!(texts(&b, &s.id, "kiwi9").await, ["after rewind kiwi9"]);
    assert_eq!(texts(&b, &s.id, "event 1100").await, Vec::<String>::new());

    // A damaged file is ignored and rebuilt from the log.
    std::fs::write(&file, b"ASIDX01\n\xff\xff\xff").unwrap();
    let c = FsRepository::open(dir.path()).await.unwrap();
    assert_eq!(texts(&c, &s.id, "event 998").await, ["event 998 kiwi4"]);
}
