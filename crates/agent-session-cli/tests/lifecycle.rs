//! The lifecycle commands: erasing a user, archive retention.
#![allow(clippy::unwrap_used)]

mod support;

use support::{append, cli, create, out, store};

#[test]
fn erase_user_removes_the_users_sessions_and_reports_counts() {
    let s = store();
    create(&s, &["--id", "mine", "--app", "a1"]);
    create(&s, &["--id", "other-app", "--app", "a2"]);
    append(
        &s,
        "mine",
        &[
            "--role",
            "user",
            "--text",
            "hi",
            "--state",
            "user:city=\"Oslo\"",
        ],
    );
    append(&s, "mine", &["--role", "assistant", "--text", "hello"]);
    assert_eq!(
        out(cli(&s).args(["erase-user", "--app", "a1", "--user", "ada"])),
        "erased 1 sessions and 2 events of ada in a1, and their user: state"
    );
    cli(&s).args(["show", "mine"]).assert().code(3);
    assert_eq!(
        out(cli(&s).args(["--json", "erase-user", "--app", "a1", "--user", "ada"])),
        r#"{"sessions":0,"events":0,"user_state":false}"#
    );
    assert!(out(cli(&s).args(["list", "--app", "a2"])).contains("other-app"));
    cli(&s)
        .args(["erase-user", "--app", "a 1", "--user", "ada"])
        .assert()
        .code(2);
}

#[test]
fn retention_prunes_old_archived_events_outside_the_context() {
    let s = store();
    create(&s, &["--id", "s1"]);
    for i in 1..=4 {
        append(
            &s,
            "s1",
            &["--role", "user", "--text", &format!("question {i}")],
        );
        append(
            &s,
            "s1",
            &["--role", "assistant", "--text", &format!("answer {i}")],
        );
    }
    out(cli(&s).args([
        "compact",
        "s1",
        "--strategy",
        "turn-window",
        "--max-turns",
        "1",
    ]));
    assert_eq!(
        out(cli(&s).args(["retention", "s1"])),
        "s1 no retention policy: the archive keeps every event"
    );
    assert_eq!(
        out(cli(&s).args(["retention", "s1", "--keep-latest", "3"])),
        "s1 keeps the latest 3 events"
    );
    assert_eq!(
        out(cli(&s).arg("purge-expired")),
        "purged 0 expired sessions\n\
         pruned 5 archived events from 1 of 1 sessions with a retention policy"
    );
    let archive = out(cli(&s).args(["show", "s1", "--view", "archive"]));
    let seqs: Vec<&str> = archive
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(seqs, ["#6", "#7", "#8"], "{archive}");
    assert_eq!(
        out(cli(&s).args(["--json", "retention", "s1", "--clear"])),
        r#"{"retention":null,"session":"s1"}"#
    );
    // A default for sessions without their own policy; the context stays.
    assert_eq!(
        out(cli(&s).args(["--json", "purge-expired", "--keep-latest", "1"])),
        r#"{"pruned_events":1,"pruned_sessions":1,"purged":0,"sessions_with_retention":1}"#
    );
    assert_eq!(
        out(cli(&s).args(["retention", "s1", "--max-age", "1d", "--prune"])),
        "s1 keeps events younger than 1day\npruned 0 archived events"
    );
    cli(&s)
        .args(["retention", "s1", "--max-age", "soon"])
        .assert()
        .code(2);
    cli(&s)
        .args(["retention", "s1", "--keep-latest", "2", "--clear"])
        .assert()
        .code(2);
}
