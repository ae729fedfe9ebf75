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
