//! Lifecycle checks that need a store of their own: `erase_user` leaves
//! nothing of the user in any file under the store's root; the events quota holds.
#![allow(clippy::unwrap_used)]

use session_encryption::{EncryptedRepository, Keyring};
use std::path::Path;

use session_fs::FsRepository;
use session_testkit::erasure::plant;

/// Every file under `dir`, its path and its bytes as text.
fn raw_files(dir: &Path) -> String {
    let mut out = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.push_str(&raw_files(&path));
        } else {
            out.push_str(&format!("== {}\n", path.display()));
            out.push_str(&String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
            out.push('\n');
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn erase_user_leaves_no_file_of_the_user() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let repo = FsRepository::open(&root).await.unwrap();
    let planted = plant(&repo, chrono::Utc::now()).await;
    planted.check_before(&raw_files(&root));
    planted.erase(&repo).await;
    planted.check_after(&raw_files(&root));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_quotas_hold_under_racing_writers() {
    let dir = tempfile::tempdir().unwrap();
    let repo = FsRepository::builder(dir.path())
        .limits(session_testkit::quota::quota_limits())
        .open()
        .await
        .unwrap();
    session_testkit::quota::all(std::sync::Arc::new(repo)).await;
}

/// Behind the encryption layer, no file (logs, session files, search
/// indexes, state files) holds a canary in plain text.
/// Values moved, swapped or replaced in the store do not open.
#[tokio::test(flavor = "multi_thread")]
async fn encrypted_sessions_leave_no_plain_canary_in_any_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let repo = FsRepository::open(&root).await.unwrap();
    let sealed = EncryptedRepository::new(repo, Keyring::generate("k1").unwrap());
    session_testkit::sealed::plant(&sealed, chrono::Utc::now()).await;
    session_testkit::sealed::moved_or_replaced_values_are_refused(&sealed, sealed.inner()).await;
    session_testkit::sealed::check_sealed(&raw_files(&root));
}
