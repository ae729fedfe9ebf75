//! A plain append commits by its last log line: `session.json` is left as a
//! checkpoint, rewritten only by writes that change more than the head or
//! once the log has grown a megabyte past it, and a store opened afresh
//! reads every committed append.
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::{Path, PathBuf};

use session_core::{
    EventFilter, Message, NewSession, RewindTo, SessionEvent, SessionId, SessionRepository,
};
use session_fs::FsRepository;

async fn session(root: &Path) -> (FsRepository, SessionId, PathBuf) {
    let repo = FsRepository::open(root).await.unwrap();
    let s = repo
        .create(
            NewSession::new("app", "u", chrono::Utc::now())
                .unwrap()
                .with_id("s1")
                .unwrap(),
        )
        .await
        .unwrap();
    (repo, s.id, root.join("sessions/s1"))
}

/// The texts of a session's archived events, oldest first.
async fn archive_texts(repo: &FsRepository, id: &SessionId) -> Vec<String> {
    repo.events(id, &EventFilter::archive())
        .await
        .unwrap()
        .items
        .iter()
        .map(|e| e.message.text().to_owned())
        .collect()
}

fn stored_log_bytes(dir: &Path) -> u64 {
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("session.json")).unwrap()).unwrap();
    file["log_bytes"].as_u64().unwrap()
}

fn log_len(dir: &Path) -> u64 {
    std::fs::metadata(dir.join("events.jsonl")).unwrap().len()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plain_append_leaves_the_session_file_and_a_fresh_store_reads_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, id, dir) = session(tmp.path()).await;
    let checkpoint = std::fs::read(dir.join("session.json")).unwrap();
    for text in ["one", "two", "three"] {
        repo.append(&id, vec![SessionEvent::new(Message::user(text))])
            .await
            .unwrap();
    }
    let after = repo.get(&id).await.unwrap();
    assert_eq!(
        std::fs::read(dir.join("session.json")).unwrap(),
        checkpoint,
        "plain appends do not rewrite the session file"
    );
    let log = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert_eq!(log.lines().count(), 3);
    assert!(log.lines().all(|l| l.starts_with("{\"commit\":")));

    // What a restart (or a power loss after the log's fsync) finds.
    let fresh = FsRepository::open(tmp.path()).await.unwrap();
    let read = fresh.get(&id).await.unwrap();
    assert_eq!(read.event_count, 3);
    assert_eq!(read.version, after.version);
    assert_eq!(read.updated_at, after.updated_at);
    assert_eq!(read.context_tokens, after.context_tokens);
    let texts = archive_texts(&fresh, &id).await;
    assert_eq!(texts, ["one", "two", "three"]);
    let next = fresh
        .append(&id, vec![SessionEvent::new(Message::user("four"))])
        .await
        .unwrap();
    assert_eq!(next.seqs, [4]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_append_that_changes_session_state_rewrites_the_session_file() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, id, dir) = session(tmp.path()).await;
    repo.append(&id, vec![SessionEvent::new(Message::user("plain"))])
        .await
        .unwrap();
    assert_eq!(stored_log_bytes(&dir), 0);
    let e = SessionEvent::builder(Message::user("remember"))
        .state("lang", "en")
        .build()
        .unwrap();
    repo.append(&id, vec![e]).await.unwrap();
    assert_eq!(stored_log_bytes(&dir), log_len(&dir));
    let fresh = FsRepository::open(tmp.path()).await.unwrap();
    let read = fresh.get(&id).await.unwrap();
    assert_eq!(read.state["lang"], "en");
    assert_eq!(read.event_count, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_session_file_is_rewritten_once_the_log_grows_a_megabyte_past_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, id, dir) = session(tmp.path()).await;
    let big = "x".repeat(64 * 1024);
    let mut rewritten_at = None;
    for i in 0..20 {
        repo.append(&id, vec![SessionEvent::new(Message::user(big.clone()))])
            .await
            .unwrap();
        if stored_log_bytes(&dir) > 0 {
            rewritten_at = Some(i);
            break;
        }
    }
    let at = rewritten_at.expect("a checkpoint within 20 appends of 64 KiB");
    assert!(
        at >= 15,
        "not before the log is a megabyte past the file (append {at})"
    );
    assert_eq!(stored_log_bytes(&dir), log_len(&dir));
}

/// A rewind stopped after it rewrote the log and before it saved the
/// session file (as a crash would stop it; here the saved search index it
/// discards in between is a directory it cannot remove): the session file
/// left behind covers the rewritten log, so a fresh store keeps every event
/// the rewind kept and never hands out a seq again.
#[tokio::test(flavor = "multi_thread")]
async fn a_rewind_cut_short_after_the_log_rewrite_loses_nothing_it_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, id, dir) = session(tmp.path()).await;
    for n in 1..=10 {
        repo.append(&id, vec![SessionEvent::new(Message::user(format!("m{n}")))])
            .await
            .unwrap();
    }
    assert_eq!(
        stored_log_bytes(&dir),
        0,
        "the appends committed by their lines"
    );
    std::fs::create_dir_all(dir.join("search.idx").join("blocker")).unwrap();
    assert!(repo.rewind_to(&id, &RewindTo::Seq(8)).await.is_err());
    std::fs::remove_dir_all(dir.join("search.idx")).unwrap();
    let log = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert_eq!(log.lines().count(), 7, "the log was rewritten");

    let fresh = FsRepository::open(tmp.path()).await.unwrap();
    let texts = archive_texts(&fresh, &id).await;
    assert_eq!(texts, ["m1", "m2", "m3", "m4", "m5", "m6", "m7"]);
    let next = fresh
        .append(&id, vec![SessionEvent::new(Message::user("after"))])
        .await
        .unwrap();
    assert_eq!(next.seqs, [11], "no seq handed out twice");
    assert_eq!(fresh.get(&id).await.unwrap().event_count, 8);
}
