//! Scenario: a store written by an earlier version of agent-session opens
//! and reads unchanged.
//!
//! `tests/data/v0.1/` holds a SQLite file and a file-store directory written
//! by the version before the one-contract redesign, together with the
//! export (`expected.ndjson`) that version produced from them. Each test
//! copies a fixture to a temporary place (opening may migrate it), reads
//! every session back, and compares with the old export: ids, seqs,
//! timestamps, versions, context, state and shared scopes must all match.
//! Then it appends, to show the store stays writable.
//!
//! `write_fixtures` (ignored) is how the fixtures were made; it only ever
//! runs against the version whose format the fixtures pin.
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{TimeZone, Utc};
use session_core::{
    EventView, ManualClock, Message, SessionDump, SessionEvent, SessionRepository,
    SessionRepositoryExt,
};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/v0.1")
}

#[path = "../data/v0.1/history.rs"]
mod history;

use history::{write_history, SESSIONS};

fn start_clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::at(
        Utc.with_ymd_and_hms(2026, 11, 1, 9, 0, 0).unwrap(),
    ))
}

async fn export_all(repo: &dyn SessionRepository) -> String {
    let mut out = String::new();
    for id in SESSIONS {
        let dump = repo.export_session(&id.parse().unwrap()).await.unwrap();
        out.push_str(&serde_json::to_string(&dump).unwrap());
        out.push('\n');
    }
    out
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

/// Reads every fixture session, compares it with the old export, then appends.
async fn reads_unchanged(repo: &dyn SessionRepository) {
    for want in expected() {
        let mut got = repo.export_session(&want.session.id).await.unwrap();
        // Counted since: by the schema migration on SQLite (exactly what
        // the events take as stored), from the next write on files.
        let counted = std::mem::take(&mut got.session.event_bytes);
        assert!(
            counted == 0 || counted == SessionEvent::stored_bytes_of(&want.events).unwrap(),
            "session {}: {counted} bytes",
            want.session.id
        );
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
        .search(&session_core::SearchQuery::in_session(SESSIONS[0], "4711"))
        .await
        .unwrap();
    assert_eq!(
        found.items.len(),
        3,
        "recall still finds the archived turns"
    );
    let out = repo
        .append_one(
            &SESSIONS[1].parse().unwrap(),
            SessionEvent::new(Message::user("and now?")),
        )
        .await
        .unwrap();
    assert_eq!(out, 4, "the next seq follows the stored ones");
}

#[tokio::test]
async fn sqlite_store_from_the_previous_version_reads_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    std::fs::copy(fixtures().join("sessions.db"), &path).unwrap();
    let repo = session_sqlite::SqliteRepository::open(&path).await.unwrap();
    reads_unchanged(&repo).await;
}

#[tokio::test]
async fn file_store_from_the_previous_version_reads_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixtures().join("files"), dir.path());
    let repo = session_fs::FsRepository::open(dir.path()).await.unwrap();
    reads_unchanged(&repo).await;
}

/// Makes the fixtures (run once, by hand, on the version they pin):
/// `cargo test -p agent-session-scenarios --test stores_from_earlier_versions -- --ignored`.
#[tokio::test]
#[ignore = "writes the checked-in fixtures; run by hand on the version they pin"]
async fn write_fixtures() {
    let root = fixtures();
    std::fs::create_dir_all(&root).unwrap();
    let db = root.join("sessions.db");
    let _ = std::fs::remove_file(&db);
    let clock = start_clock();
    let sqlite = session_sqlite::SqliteRepository::builder(&db)
        .clock(clock.clone())
        .open()
        .await
        .unwrap();
    write_history(&sqlite, &clock).await;
    let exported = export_all(&sqlite).await;
    drop(sqlite);
    // Fold the write-ahead log into the file, so the fixture is one file.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    drop(conn);
    for suffix in ["-wal", "-shm"] {
        assert!(
            !root.join(format!("sessions.db{suffix}")).exists(),
            "closing the store checkpoints its write-ahead log into the file"
        );
    }

    let files = root.join("files");
    let _ = std::fs::remove_dir_all(&files);
    let clock = start_clock();
    let fs = session_fs::FsRepository::builder(&files)
        .clock(clock.clone())
        .open()
        .await
        .unwrap();
    write_history(&fs, &clock).await;
    assert_eq!(
        export_all(&fs).await,
        exported,
        "both stores hold the same history"
    );
    std::fs::write(root.join("expected.ndjson"), exported).unwrap();
}
