//! The lifecycle commands: erasing a user, archive retention.
#![allow(clippy::unwrap_used)]

mod support;

use support::{append, cli, create, out, store, Store};

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

/// Every byte the store keeps on disk, as text.
fn raw_files(dir: &std::path::Path) -> String {
    let mut out = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            out.push_str(&String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
        }
    }
    out
}

#[test]
fn an_encrypted_store_seals_content_and_rekey_rotates_its_key() {
    let s = store();
    let keys = s.dir.path().join("keys.txt");
    let k1 = out(cli(&s).args(["keygen", "k1"]));
    std::fs::write(&keys, format!("{k1}\n")).unwrap();
    let keys_flag = ["--keys-file", keys.to_str().unwrap()];
    create(&s, &["--id", "s1", keys_flag[0], keys_flag[1]]);
    append(
        &s,
        "s1",
        &[
            "--role",
            "user",
            "--text",
            "the vault code is 0451",
            keys_flag[0],
            keys_flag[1],
        ],
    );
    let shown = out(cli(&s).args(["show", "s1"]).args(keys_flag));
    assert!(shown.contains("the vault code is 0451"), "{shown}");
    assert!(!raw_files(s.dir.path()).contains("0451"), "sealed on disk");
    // Without the keyring, the sealed session refuses its content: no
    // ciphertext shown, no plain write mixed in, no "no hits".
    let hint = predicates::str::contains("this store is encrypted: give --keys-file");
    cli(&s)
        .args(["show", "s1"])
        .assert()
        .code(10)
        .stderr(hint.clone());
    cli(&s)
        .args(["append", "s1", "--role", "user", "--text", "plain write"])
        .assert()
        .code(10)
        .stderr(hint.clone());
    cli(&s)
        .args(["search", "s1", "vault"])
        .assert()
        .code(10)
        .stderr(hint);
    assert!(
        !raw_files(s.dir.path()).contains("plain write"),
        "nothing written"
    );
    let keyed = out(cli(&s).args(["show", "s1"]).args(keys_flag));
    assert!(!keyed.contains("plain write"), "{keyed}");

    let wrong = s.dir.path().join("wrong.txt");
    std::fs::write(&wrong, out(cli(&s).args(["keygen", "k1"]))).unwrap();
    cli(&s)
        .args(["show", "s1", "--keys-file", wrong.to_str().unwrap()])
        .assert()
        .code(10);

    let k2 = out(cli(&s).args(["keygen", "k2"]));
    std::fs::write(&keys, format!("{k1}\n{k2}\n")).unwrap();
    assert_eq!(
        out(cli(&s).arg("rekey").args(keys_flag)),
        "rekeyed 1 sessions to key k2 (0 already up to date, 0 busy, 0 failed)"
    );
    std::fs::write(&keys, format!("{k2}\n")).unwrap();
    let shown = out(cli(&s).args(["show", "s1"]).args(keys_flag));
    assert!(shown.contains("the vault code is 0451"), "{shown}");
    cli(&s).arg("rekey").assert().code(2);
    cli(&s).args(["keygen", "bad id"]).assert().code(2);
}

#[test]
fn a_store_url_sets_the_quotas() {
    let s = store();
    let quota = Store {
        url: format!("{}?max_session_events=2", s.url),
        dir: tempfile::tempdir().unwrap(),
    };
    let with_quota = || cli(&quota);
    out(with_quota().args(["create", "--user", "ada", "--id", "s1"]));
    for text in ["one", "two"] {
        out(with_quota().args(["append", "s1", "--role", "user", "--text", text]));
    }
    with_quota()
        .args(["append", "s1", "--role", "user", "--text", "three"])
        .assert()
        .code(9)
        .stderr(predicates::str::contains("events per session"));
    // Without the setting the store takes more.
    append(&s, "s1", &["--role", "user", "--text", "three"]);
    let bad = Store {
        url: format!("{}?max_session_events=many", s.url),
        dir: tempfile::tempdir().unwrap(),
    };
    cli(&bad).arg("list").assert().code(2);
    let one_each = Store {
        url: format!("{}?max_user_sessions=2", s.url),
        dir: tempfile::tempdir().unwrap(),
    };
    // ada holds s1 already: one more, then the quota.
    out(cli(&one_each).args(["create", "--user", "ada", "--id", "s2"]));
    cli(&one_each)
        .args(["create", "--user", "ada", "--id", "s3"])
        .assert()
        .code(9)
        .stderr(predicates::str::contains("sessions per user"));
    out(cli(&one_each).args(["create", "--user", "grace", "--id", "s4"]));

    let small = Store {
        url: format!("{}?max_session_bytes=1KiB", s.url),
        dir: tempfile::tempdir().unwrap(),
    };
    out(cli(&small).args(["create", "--user", "ada", "--id", "s5"]));
    out(cli(&small).args(["append", "s5", "--role", "user", "--text", "short"]));
    let long = "x".repeat(1100);
    cli(&small)
        .args(["append", "s5", "--role", "user", "--text", &long])
        .assert()
        .code(9)
        .stderr(predicates::str::contains(
            "bytes per session is over the limit of 1024",
        ));
    let stats = out(cli(&small).args(["stats", "s5"]));
    assert!(stats.contains("bytes stored"), "{stats}");
    let big = Store {
        url: format!("{}?max_session_bytes=1TB", s.url),
        dir: tempfile::tempdir().unwrap(),
    };
    cli(&big).arg("list").assert().code(2);
}

#[test]
fn list_lines_up_its_columns() {
    let s = store();
    create(&s, &["--id", "s1", "--app", "a1"]);
    let listed = out(cli(&s).args(["list"]));
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines[0].find("status"), lines[1].find("active"), "{listed}");
}
