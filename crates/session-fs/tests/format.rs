//! The on-disk format stays the one of v0.1: the fixture store of
//! `tests/data/v0.1/files` (written by the version before the one-contract
//! redesign) reads back as its export, and the same history written now
//! gives the same files, byte for byte.
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{TimeZone, Utc};
use session_core::{
    EventView, ManualClock, Message, SearchQuery, SessionDump, SessionEvent, SessionId,
    SessionRepository, SessionRepositoryExt,
};
use session_fs::FsRepository;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/v0.1")
}

#[path = "../../../tests/data/v0.1/history.rs"]
mod history;

use history::{write_history, SESSIONS};

fn sid(id: &str) -> SessionId {
    SessionId::new(id).unwrap()
}

fn expected() -> Vec<SessionDump> {
    std::fs::read_to_string(fixtures().join("expected.ndjson"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
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

/// Every file under `root`, by relative path, with its bytes.
fn files_under(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn the_v0_1_fixture_store_reads_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixtures().join("files"), dir.path());
    let repo = FsRepository::open(dir.path()).await.unwrap();
    for want in expected() {
        let got = repo.export_session(&want.session.id).await.unwrap();
        assert_eq!(
            got, want,
            "session {} differs from the old export",
            want.session.id
        );
        let context = repo
            .all_events(&want.session.id, EventView::Context)
            .await
            .unwrap();
        let seqs: Vec<u64> = context.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, want.context);
    }
    let found = repo
        .search(&SearchQuery::in_session(SESSIONS[0], "4711"))
        .await
        .unwrap();
    assert_eq!(
        found.items.len(),
        3,
        "recall still finds the archived turns"
    );
    let next = repo
        .append_one(
            &sid(SESSIONS[1]),
            SessionEvent::new(Message::user("and now?")),
        )
        .await
        .unwrap();
    assert_eq!(next, 4, "the next seq follows the stored ones");
}

/// A log with the commit member taken off the lines that begin with one.
fn strip_commits(log: &str) -> String {
    let mut out = String::new();
    for line in log.split_inclusive('\n') {
        match line.strip_prefix("{\"commit\":") {
            Some(rest) => {
                let end = rest.find("},").unwrap();
                out.push('{');
                out.push_str(&rest[end + 2..]);
            }
            None => out.push_str(line),
        }
    }
    out
}

/// The `session` object of a session file.
fn head_of(file: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(file).unwrap();
    v["session"].clone()
}

/// A session file without the lines of the head an append commit carries.
fn without_head_lines(file: &str) -> String {
    const HEAD: [&str; 6] = [
        "    \"updated_at\": ",
        "    \"event_count\": ",
        "    \"context_tokens\": ",
        "    \"version\": ",
        "  \"last_seq\": ",
        "  \"log_bytes\": ",
    ];
    file.split_inclusive('\n')
        .filter(|l| !HEAD.iter().any(|h| l.starts_with(h)))
        .collect()
}

/// Removes from `text` the line that `marker` (starting with a separator
/// and a newline) leads into, with the separator; whether it was there.
fn cut_line(text: &mut String, marker: &str) -> bool {
    let Some(at) = text.find(marker) else {
        return false;
    };
    let from = at + marker.find('\n').unwrap() + 1;
    let end = text[from..].find('\n').map_or(text.len(), |n| from + n);
    text.replace_range(at..end, "");
    true
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_history_written_now_gives_the_v0_1_files_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::at(
        Utc.with_ymd_and_hms(2026, 11, 1, 9, 0, 0).unwrap(),
    ));
    let repo = FsRepository::builder(dir.path())
        .clock(clock.clone())
        .open()
        .await
        .unwrap();
    write_history(&repo, &clock).await;
    let want = files_under(&fixtures().join("files"));
    let got = files_under(dir.path());
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "the same files"
    );
    let mut histories = 0;
    let mut counted = 0;
    let mut generations = 0;
    let mut commits = 0;
    for (path, bytes) in &want {
        let mut written = String::from_utf8_lossy(&got[path]).into_owned();
        let mut wanted = String::from_utf8_lossy(bytes).into_owned();
        if path.ends_with("events.jsonl") {
            // Since v0.1 the last line of a plain append begins with the
            // session's head after it (its commit); the events are as v0.1 wrote them.
            commits += written.matches("{\"commit\":").count();
            written = strip_commits(&written);
        }
        if path.ends_with("session.json") {
            // Since v0.1 a plain append commits by its log line and leaves
            // the session file as it was: the head is compared as read below.
            let head = head_of(&wanted);
            let id = sid(head["id"].as_str().unwrap());
            let read = serde_json::to_value(repo.get(&id).await.unwrap()).unwrap();
            for key in ["version", "updated_at", "event_count", "context_tokens"] {
                assert_eq!(read[key], head[key], "{path}: {key} as read");
            }
            written = without_head_lines(&written);
            wanted = without_head_lines(&wanted);
        }
        // Since v0.1 a session file ends with its log's generation, and a
        // session records the bytes its events take.
        if cut_line(&mut written, ",\n  \"log_generation\": ") {
            generations += 1;
        }
        if cut_line(&mut written, "\n    \"event_bytes\": ") {
            counted += 1;
        }
        // Since v0.1 a session file also ends with its context history, the
        // one addition: every byte before it is as v0.1 wrote it.
        if let Some(at) = written.find(",\n  \"context_changes\": ") {
            let tail = written.split_off(at);
            let changes: serde_json::Value =
                serde_json::from_str(&format!("{{{}", &tail[1..])).unwrap();
            assert_eq!(changes["context_changes"][0]["version"], 3, "{tail}");
            written.push_str("\n}\n");
            histories += 1;
        }
        assert_eq!(written, wanted, "{path} differs");
    }
    assert!(commits > 0, "plain appends commit by their last log line");
    assert_eq!(histories, 1, "the compacted session records its compaction");
    assert!(counted > 0, "session files record their event bytes");
    assert!(
        generations > 0,
        "session files record their log's generation"
    );
}
