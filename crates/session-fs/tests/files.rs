//! File-store specifics: paths confined to the root, torn tails, readable files.
#![allow(clippy::unwrap_used)]

use session_core::{
    ErrorKind, EventFilter, Message, NewSession, SessionEvent, SessionId, SessionRepository,
};
use session_fs::FsRepository;

async fn store() -> (tempfile::TempDir, FsRepository) {
    let dir = tempfile::tempdir().unwrap();
    let repo = FsRepository::open(dir.path().join("root")).await.unwrap();
    (dir, repo)
}

#[tokio::test(flavor = "multi_thread")]
async fn ids_that_would_leave_the_root_are_refused() {
    let (dir, repo) = store().await;
    // Session ids that would name another directory cannot be built, so
    // they never reach the store.
    for bad in ["../x", "../../etc/passwd", "/etc", "a/b", "..", "."] {
        let err = SessionId::new(bad).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad}");
        let err = NewSession::new("app", "u", chrono::Utc::now())
            .unwrap()
            .with_id(bad)
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad}");
    }
    // App names and user ids may hold `.` and `/` (`slack/T1`, `a.b`), so
    // these are valid names: their shared-state files are escaped and stay
    // inside the root.
    let s = repo
        .create(NewSession::new("../app", "../../etc/passwd", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    repo.append(
        &s.id,
        vec![SessionEvent::builder(Message::user("x"))
            .state("user:k", 1)
            .state("app:k", 2)
            .build()
            .unwrap()],
    )
    .await
    .unwrap();
    let shared = dir.path().join("root/shared");
    assert!(shared.join("app/..%2Fapp.json").is_file());
    assert!(shared
        .join("user/..%2Fapp/..%2F..%2Fetc%2Fpasswd.json")
        .is_file());
    let outside: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(outside.len(), 1, "nothing written beside the root");
}

#[tokio::test(flavor = "multi_thread")]
async fn symlinks_leading_outside_are_refused() {
    let (dir, repo) = store().await;
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    // A session directory that is a link to somewhere else.
    std::os::unix::fs::symlink(&outside, dir.path().join("root/sessions/evil")).unwrap();
    let evil = SessionId::new("evil").unwrap();
    let err = repo.get(&evil).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("symlink"), "{err}");
    let err = repo
        .append(&evil, vec![SessionEvent::new(Message::user("x"))])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let err = repo
        .create(
            NewSession::new("app", "u", chrono::Utc::now())
                .unwrap()
                .with_id("evil")
                .unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    // Shared state whose file is a link.
    std::os::unix::fs::symlink(
        outside.join("app.json"),
        dir.path().join("root/shared/app/linked.json"),
    )
    .unwrap();
    let s = repo
        .create(NewSession::new("linked", "u", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    let e = SessionEvent::builder(Message::user("x"))
        .state("app:k", 1)
        .build()
        .unwrap();
    assert_eq!(
        repo.append(&s.id, vec![e]).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "nothing written through the links"
    );
}

/// Truncating the last record at every byte offset (a crash mid-write):
/// each case opens, reads every complete record and nothing else, and the
/// next append lands cleanly after the valid prefix.
#[tokio::test(flavor = "multi_thread")]
async fn a_torn_tail_at_any_offset_keeps_every_complete_record() {
    let (dir, repo) = store().await;
    let s = repo
        .create(
            NewSession::new("app", "u", chrono::Utc::now())
                .unwrap()
                .with_id("s1")
                .unwrap(),
        )
        .await
        .unwrap();
    for text in ["first", "second", "third 🦀 with \"quotes\" and \\n"] {
        repo.append(&s.id, vec![SessionEvent::new(Message::user(text))])
            .await
            .unwrap();
    }
    let root = dir.path().join("root");
    let log = root.join("sessions/s1/events.jsonl");
    let full = std::fs::read(&log).unwrap();
    let last_start = full[..full.len() - 1]
        .iter()
        .rposition(|b| *b == b'\n')
        .unwrap()
        + 1;
    for cut in last_start..full.len() {
        let copy = tempfile::tempdir().unwrap();
        copy_dir(&root, copy.path());
        std::fs::write(copy.path().join("sessions/s1/events.jsonl"), &full[..cut]).unwrap();
        let repo = FsRepository::open(copy.path()).await.unwrap();
        let texts: Vec<String> = repo
            .events(&s.id, &EventFilter::archive())
            .await
            .unwrap()
            .items
            .iter()
            .map(|e| e.message.text().to_owned())
            .collect();
        assert_eq!(texts, ["first", "second"], "cut at {cut}");
        repo.append(&s.id, vec![SessionEvent::new(Message::user("after"))])
            .await
            .unwrap();
        let texts: Vec<String> = repo
            .events(&s.id, &EventFilter::archive())
            .await
            .unwrap()
            .items
            .iter()
            .map(|e| e.message.text().to_owned())
            .collect();
        assert_eq!(texts, ["first", "second", "after"], "cut at {cut}");
        let session = repo.get(&s.id).await.unwrap();
        assert_eq!(session.event_count, 3);
        let log_after =
            std::fs::read_to_string(copy.path().join("sessions/s1/events.jsonl")).unwrap();
        assert!(
            log_after
                .lines()
                .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()),
            "cut at {cut}"
        );
        if cut > last_start {
            assert!(
                copy.path().join("sessions/s1/events.jsonl.torn").exists(),
                "the fragment was moved aside"
            );
        }
    }
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_files_are_readable_json() {
    let (dir, repo) = store().await;
    let s = repo
        .create(
            NewSession::new("app", "u", chrono::Utc::now())
                .unwrap()
                .with_id("s1")
                .unwrap(),
        )
        .await
        .unwrap();
    let e = SessionEvent::builder(Message::user("grep me"))
        .state("user:name", "Ada")
        .build()
        .unwrap();
    repo.append(&s.id, vec![e]).await.unwrap();
    let root = dir.path().join("root");
    let session = std::fs::read_to_string(root.join("sessions/s1/session.json")).unwrap();
    assert!(
        session.contains("\n  \"session\": {"),
        "pretty-printed: {session}"
    );
    let log = std::fs::read_to_string(root.join("sessions/s1/events.jsonl")).unwrap();
    assert_eq!(log.lines().count(), 1);
    assert!(log.contains("grep me"));
    let user = std::fs::read_to_string(root.join("shared/user/app/u.json")).unwrap();
    assert!(user.contains("\"user:name\": \"Ada\""), "{user}");
}

/// A session file that no longer parses fails only that session: listings
/// of the others go on and name the damaged one as unreadable.
#[tokio::test(flavor = "multi_thread")]
async fn an_unparsable_session_file_is_reported_alone() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let repo = session_fs::FsRepository::open(&root).await.unwrap();
    let fx = session_testkit::Fixture::new(
        std::sync::Arc::new(repo),
        std::sync::Arc::new(session_core::ManualClock::new()),
    );
    session_testkit::hostile::corrupt_session_is_reported_alone(fx, |id| async move {
        std::fs::write(
            root.join("sessions").join(&*id).join("session.json"),
            b"{\"session\": {\"version\": -1",
        )
        .unwrap();
    })
    .await;
}
