//! What the CLI test files share: a temporary SQLite store and the binary run against it.
#![allow(dead_code, clippy::unwrap_used)]

use assert_cmd::Command;

/// A temporary store: its directory (removed when dropped) and URL.
pub(crate) struct Store {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) url: String,
}

/// A new empty SQLite store in a temporary directory.
pub(crate) fn store() -> Store {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("s.db").display());
    Store { dir, url }
}

/// The binary with `--store` set to `store`.
pub(crate) fn cli(store: &Store) -> Command {
    let mut c = Command::cargo_bin("agent-session").unwrap();
    c.arg("--store")
        .arg(&store.url)
        .env_remove("AGENT_SESSION_STORE");
    c
}

/// Runs, expects success, and returns stdout trimmed.
pub(crate) fn out(c: &mut Command) -> String {
    let o = c.assert().success().get_output().stdout.clone();
    String::from_utf8(o).unwrap().trim().to_owned()
}

/// `create --user ada` with `args`; the new session's id.
pub(crate) fn create(s: &Store, args: &[&str]) -> String {
    out(cli(s).arg("create").args(["--user", "ada"]).args(args))
}

/// `append ID` with `args`.
pub(crate) fn append(s: &Store, id: &str, args: &[&str]) -> String {
    out(cli(s).args(["append", id]).args(args))
}
