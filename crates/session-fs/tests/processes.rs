//! Several processes on one store directory, and writers killed with
//! SIGKILL mid-append (the shared harness in `session_testkit::process`).
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use session_core::SessionRepository;
use session_fs::FsRepository;

async fn open(path: String) -> Arc<dyn SessionRepository> {
    Arc::new(FsRepository::open(&path).await.unwrap())
}

fn location(dir: &std::path::Path) -> String {
    dir.join("store").display().to_string()
}

/// Every session file in the store parses.
fn files_parse(path: &str) {
    for entry in std::fs::read_dir(std::path::Path::new(path).join("sessions")).unwrap() {
        let p = entry.unwrap().path();
        if p.file_name().unwrap().to_str().unwrap().starts_with('.') {
            continue;
        }
        let text = std::fs::read_to_string(p.join("session.json")).unwrap();
        let _: serde_json::Value = serde_json::from_str(&text).unwrap();
    }
}

session_testkit::process_suite!(open, location, files_parse);

/// A process remembers the event ids of each log it appended to; when
/// another process rewinds the session (rewriting the log) and appends
/// past the remembered length, the ids are read again: an event the
/// rewind removed, sent again, is appended, not taken for held.
#[tokio::test]
async fn a_rewind_by_another_process_is_seen_by_the_next_append() {
    use session_core::{
        EventView, Message, NewSession, RewindTo, SessionEvent, SessionRepositoryExt,
    };
    let dir = tempfile::tempdir().unwrap();
    let path = location(dir.path());
    let a = open(path.clone()).await;
    let b = open(path).await;
    let s = a
        .create(NewSession::new("app", "alice", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    let events: Vec<SessionEvent> = ["one", "two", "three"]
        .into_iter()
        .map(|t| SessionEvent::new(Message::user(t)))
        .collect();
    a.append(&s.id, events.clone()).await.unwrap();
    b.rewind_to(&s.id, &RewindTo::Seq(2)).await.unwrap();
    b.append(
        &s.id,
        vec![SessionEvent::new(Message::user("x".repeat(2000)))],
    )
    .await
    .unwrap();
    let again = a.append(&s.id, events[1..].to_vec()).await.unwrap();
    assert_eq!((again.written, again.seqs), (2, vec![5, 6]));
    let texts: Vec<String> = a
        .all_events(&s.id, EventView::Archive)
        .await
        .unwrap()
        .iter()
        .map(|e| e.message.text().chars().take(5).collect())
        .collect();
    assert_eq!(texts, ["one", "xxxxx", "two", "three"]);
}
