//! The CLI's answers to bad input, unusable stores, corrupt data and
//! closed pipes: one clear line on stderr, a typed exit code, never a panic.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use assert_cmd::Command;
use serde_json::Value;

mod support;

use support::{append, cli, create, out, store, Store};

#[test]
fn bad_input_gets_one_clear_line_and_a_failure() {
    let s = store();
    create(&s, &["--id", "s1"]);
    for (args, needle, code) in [
        (vec!["show", "nope"], "session not found: nope", 3),
        (
            vec!["append", "nope", "--role", "user", "--text", "x"],
            "session not found: nope",
            3,
        ),
        (
            vec![
                "append", "s1", "--role", "user", "--text", "x", "--state", "k={oops",
            ],
            "not JSON",
            2,
        ),
        (
            vec!["append", "s1", "--role", "tool", "--text", "x"],
            "--tool-call-id",
            2,
        ),
        (
            vec!["create", "--user", "ada", "--id", "../etc"],
            "invalid session id",
            2,
        ),
        (
            vec!["create", "--user", "ada", "--ttl", "2 fortnights"],
            "--ttl",
            2,
        ),
        (
            vec!["create", "--user", "ada", "--ttl", "106751991167d"],
            "out of range",
            2,
        ),
        (
            vec!["rewind", "s1", "--before-invocation", "never"],
            "invocation not found",
            3,
        ),
        (vec!["delete", "nope"], "session not found", 3),
        (vec!["import", "/nonexistent/file"], "cannot open", 1),
    ] {
        let a = cli(&s).args(&args).assert().failure().code(code);
        let err = String::from_utf8(a.get_output().stderr.clone()).unwrap();
        assert!(
            err.starts_with("error: ") && err.contains(needle),
            "{args:?}: {err}"
        );
        assert_one_error(&err);
    }
}

/// An error is one `error:` line, then at most one `hint:` line, and no
/// line (nor any cause within the error line) is printed twice.
fn assert_one_error(err: &str) {
    let lines: Vec<&str> = err.trim().lines().collect();
    assert!(lines[0].starts_with("error: "), "{err}");
    assert!(lines.len() <= 2, "{err}");
    if let Some(h) = lines.get(1) {
        assert!(h.starts_with("hint: "), "{err}");
    }
    let causes: Vec<&str> = lines[0].split(": ").collect();
    for (i, c) in causes.iter().enumerate() {
        assert!(
            !causes[i + 1..]
                .iter()
                .any(|later| later == c && c.len() > 12),
            "a cause printed twice: {err}"
        );
    }
    assert!(!err.contains("panicked") && !err.contains("backtrace"));
}

#[test]
fn unusable_stores_are_clear_errors() {
    for (url, needle, code, hint) in [
        (
            "postgres://nobody@127.0.0.1:1/none",
            "unavailable",
            5,
            "start the server",
        ),
        (
            "ftp://example",
            "unknown scheme",
            2,
            "a store URL looks like",
        ),
        ("redis://127.0.0.1:1", "unavailable", 5, "start the server"),
        (
            "es+http://127.0.0.1:1",
            "unavailable",
            5,
            "start the server",
        ),
    ] {
        let a = Command::cargo_bin("agent-session")
            .unwrap()
            .args(["--store", url, "list"])
            .assert()
            .failure()
            .code(code);
        let err = String::from_utf8(a.get_output().stderr.clone()).unwrap();
        assert!(
            err.starts_with("error: cannot open store") && err.contains(needle),
            "{url}: {err}"
        );
        assert_one_error(&err);
        assert!(err.contains(hint), "{url}: {err}");
    }
    // Every scheme the store facade knows is named.
    let a = Command::cargo_bin("agent-session")
        .unwrap()
        .args(["--store", "ftp://example", "list"])
        .assert()
        .failure();
    let err = String::from_utf8(a.get_output().stderr.clone()).unwrap();
    for scheme in [
        "memory://",
        "sqlite://",
        "fs://",
        "redis+cluster://",
        "postgresql://",
        "es+https://",
    ] {
        assert!(err.contains(scheme), "{scheme}: {err}");
    }
}

#[test]
fn the_default_store_is_announced_once() {
    let dir = tempfile::tempdir().unwrap();
    let run = || {
        Command::cargo_bin("agent-session")
            .unwrap()
            .current_dir(dir.path())
            .env_remove("AGENT_SESSION_STORE")
            .arg("list")
            .assert()
            .success()
            .get_output()
            .stderr
            .clone()
    };
    assert!(String::from_utf8(run())
        .unwrap()
        .contains("creating agent-sessions.db"));
    assert!(String::from_utf8(run()).unwrap().is_empty());
    assert!(dir.path().join("agent-sessions.db").exists());
}

/// The stderr of a failed run: exit code `code` (not 101, a panic), no panic text.
fn failure(c: &mut Command, code: i32) -> String {
    let a = c.assert().failure().code(code);
    let err = String::from_utf8(a.get_output().stderr.clone()).unwrap();
    assert!(
        !err.contains("panicked") && !err.contains("internal error"),
        "{err}"
    );
    err
}

#[test]
fn ttl_out_of_range_is_a_clear_error_not_a_panic() {
    let s = store();
    for ttl in [
        "106751991167d",
        "999999999999h",
        "99999999999999m",
        "9223372036854775807s",
        "18446744073709551616s",
        "300000y",
        // humantime's own parser panics on this sum; ours does not.
        "18446744073709551615s 500ms 500ms",
    ] {
        let err = failure(cli(&s).args(["create", "--user", "ada", "--ttl", ttl]), 2);
        assert!(
            err.starts_with(&format!(
                "error: --ttl {ttl:?}: out of range: a TTL is 1s to "
            )),
            "{ttl}: {err}"
        );
        assert!(err.contains("or never"), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    let err = failure(cli(&s).args(["create", "--user", "ada", "--ttl", "0s"]), 2);
    assert!(err.contains("at least 1s"), "{err}");
    assert_eq!(
        out(cli(&s).arg("list")),
        "no sessions",
        "nothing was created"
    );
}

#[test]
fn ttl_takes_the_old_forms_and_humantime_ones() {
    let s = store();
    for (ttl, seconds) in [
        ("45s", Some(45)),
        ("90m", Some(90 * 60)),
        ("12h", Some(12 * 3600)),
        ("30d", Some(30 * 86_400)),
        ("1h30m", Some(90 * 60)),
        ("2 weeks", Some(14 * 86_400)),
        ("1y", Some(31_557_600)),
        ("never", None),
    ] {
        let before = chrono::Utc::now();
        let created: Value = serde_json::from_str(&out(
            cli(&s).args(["--json", "create", "--user", "ada", "--ttl", ttl])
        ))
        .unwrap();
        let expires = &created["expires_at"];
        match seconds {
            None => assert!(expires.is_null(), "{ttl}: {created}"),
            Some(secs) => {
                let at: chrono::DateTime<chrono::Utc> = expires.as_str().unwrap().parse().unwrap();
                let got = (at - before).num_seconds();
                assert!((secs..secs + 60).contains(&got), "{ttl}: {got}s");
            }
        }
    }
}

#[test]
fn huge_counts_are_refused_or_clamped_not_a_panic() {
    let s = store();
    create(&s, &["--id", "s1"]);
    append(&s, "s1", &["--role", "user", "--text", "hello"]);
    let a = cli(&s)
        .args(["bench", "--events", "18446744073709551615"])
        .assert()
        .failure()
        .code(2);
    let err = String::from_utf8(a.get_output().stderr.clone()).unwrap();
    assert!(
        err.contains("--events") && err.contains("0..=1000000") && !err.contains("panicked"),
        "{err}"
    );
    let max = "18446744073709551615";
    for args in [
        vec!["show", "s1", "--last", max],
        vec!["list", "--limit", max],
        vec!["search", "s1", "hello", "--page", "9223372036854775807"],
        vec!["search", "s1", "hello", "--page", "-9223372036854775808"],
        vec!["search", "s1", "hello", "--page-size", max],
        vec![
            "compact",
            "s1",
            "--strategy",
            "sliding-window",
            "--max-events",
            max,
        ],
        vec![
            "compact",
            "s1",
            "--strategy",
            "turn-window",
            "--max-turns",
            max,
        ],
        vec![
            "compact",
            "s1",
            "--strategy",
            "token-budget",
            "--max-tokens",
            max,
        ],
        vec!["compact", "s1", "--strategy", "summarize", "--keep", max],
    ] {
        cli(&s).args(&args).assert().success();
    }
}

/// Runs the binary with stdout piped, reads one line, closes the pipe and
/// waits: the run must end quietly.
fn read_one_line_then_close(s: &Store, args: &[&str]) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_agent-session"))
        .arg("--store")
        .arg(&s.url)
        .args(args)
        .env_remove("AGENT_SESSION_STORE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(!line.is_empty(), "{args:?}");
    drop(reader);
    let done = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&done.stderr);
    assert_ne!(done.status.code(), Some(101), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert!(done.status.success(), "{args:?}: {:?} {err}", done.status);
    assert!(err.is_empty(), "{args:?}: {err}");
}

#[test]
fn a_closed_stdout_ends_quietly() {
    let s = store();
    create(&s, &["--id", "s1"]);
    create(&s, &["--id", "s2"]);
    // Far more than a pipe holds, so the writer meets the closed pipe.
    let big = "x".repeat(60_000);
    for id in ["s1", "s2"] {
        for _ in 0..4 {
            append(&s, id, &["--role", "user", "--text", &big]);
        }
    }
    read_one_line_then_close(&s, &["show", "s1", "--view", "archive"]);
    read_one_line_then_close(&s, &["--json", "show", "s1"]);
    read_one_line_then_close(&s, &["export", "--all"]);
    read_one_line_then_close(&s, &["demo"]);
}

/// Makes one stored event of `id` undecodable, as a damaged disk would.
fn corrupt_events_of(s: &Store, id: &str) {
    let db = rusqlite::Connection::open(s.dir.path().join("s.db")).unwrap();
    let n = db
        .execute(
            "UPDATE events SET body = '{\"damaged' WHERE session_id = ?1",
            [id],
        )
        .unwrap();
    assert!(n > 0);
}

#[test]
fn export_all_reports_a_corrupt_session_and_keeps_going() {
    let s = store();
    for id in ["s1", "s2", "s3"] {
        create(&s, &["--id", id]);
        append(
            &s,
            id,
            &["--role", "user", "--text", &format!("hello from {id}")],
        );
    }
    corrupt_events_of(&s, "s2");

    // list and stats read no events: every session still shows.
    assert_eq!(out(cli(&s).args(["--json", "list"])).lines().count(), 3);
    let stats: Value = serde_json::from_str(&out(cli(&s).args(["--json", "stats"]))).unwrap();
    assert_eq!(stats["sessions"], 3);

    let a = cli(&s).args(["export", "--all"]).assert().failure().code(1);
    let stdout = String::from_utf8(a.get_output().stdout.clone()).unwrap();
    let err = String::from_utf8(a.get_output().stderr.clone()).unwrap();
    let exported: Vec<&str> = stdout.lines().collect();
    assert_eq!(exported.len(), 3, "header + s1 + s3: {stdout}");
    assert!(exported[1..].iter().all(|l| !l.contains("\"s2\"")));
    assert!(
        err.contains("error: cannot export session s2: ") && err.contains("serialization"),
        "{err}"
    );
    assert!(
        err.trim_end()
            .ends_with("error: 1 of 3 sessions could not be exported (each is named above)"),
        "{err}"
    );
    assert!(!err.contains("panicked"));

    let file = s.dir.path().join("partial.jsonl");
    let err = failure(cli(&s).args(["export", "--all", "--out"]).arg(&file), 1);
    assert!(err.contains("exported 2 sessions to"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 3);

    // Named sessions, one missing: the others are still written.
    let err = failure(cli(&s).args(["export", "s1", "nope", "s3"]), 1);
    assert!(
        err.contains("cannot export session nope: session not found"),
        "{err}"
    );

    let m = store();
    let err = failure(cli(&s).args(["migrate", "--to", &m.url]), 1);
    assert!(err.contains("error: cannot copy session s2: "), "{err}");
    assert!(
        err.contains("1 of 3 sessions could not be migrated"),
        "{err}"
    );
    assert_eq!(out(cli(&m).args(["--json", "list"])).lines().count(), 2);
}

#[test]
fn import_reports_a_bad_line_and_imports_the_rest() {
    let s = store();
    for id in ["s1", "s2"] {
        create(&s, &["--id", id]);
        append(&s, id, &["--role", "user", "--text", "hi"]);
    }
    let good = out(cli(&s).args(["export", "--all"]));
    let mut lines: Vec<&str> = good.lines().collect();
    lines.insert(2, "{\"not\": \"a dump\"}");
    let file = s.dir.path().join("damaged.jsonl");
    std::fs::write(&file, lines.join("\n")).unwrap();

    let t = store();
    let a = cli(&t).arg("import").arg(&file).assert().failure().code(1);
    let stdout = String::from_utf8(a.get_output().stdout.clone()).unwrap();
    let err = String::from_utf8(a.get_output().stderr.clone()).unwrap();
    assert_eq!(stdout.trim(), "imported 2 sessions (0 already up to date)");
    assert!(err.contains("export line 3"), "{err}");
    assert!(err.contains("1 entries of"), "{err}");
    assert_eq!(out(cli(&t).args(["--json", "list"])).lines().count(), 2);
}

/// Compacting an ended session is refused like any other write to it:
/// exit code 8 and a hint naming `reopen`, as the exit-code table says.
#[test]
fn compact_on_an_ended_session_exits_8() {
    let s = store();
    create(&s, &["--id", "s1"]);
    append(&s, "s1", &["--role", "user", "--text", "hi"]);
    out(cli(&s).args(["end", "s1"]));
    let err = failure(
        cli(&s).args([
            "compact",
            "s1",
            "--strategy",
            "turn-window",
            "--max-turns",
            "1",
        ]),
        8,
    );
    assert!(err.contains("reopen"), "{err}");
}
