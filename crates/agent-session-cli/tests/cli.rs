//! The `agent-session` binary, command by command, including bad input.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

mod support;

use support::{append, cli, create, out, store};

#[test]
fn create_append_show_search_round_trip() {
    let s = store();
    let id = create(
        &s,
        &[
            "--id", "s1", "--key", "cli:1", "--ttl", "2h", "--meta", "tag=demo", "--meta", "n=3",
        ],
    );
    assert_eq!(id, "s1");
    assert_eq!(
        append(
            &s,
            "s1",
            &[
                "--role",
                "user",
                "--text",
                "My locker code is 4711",
                "--state",
                "user:name=\"Ada\""
            ]
        ),
        "1"
    );
    assert_eq!(
        append(
            &s,
            "s1",
            &[
                "--role",
                "assistant",
                "--text",
                "Noted",
                "--invocation",
                "inv-1"
            ]
        ),
        "2"
    );
    assert_eq!(
        append(
            &s,
            "s1",
            &[
                "--role",
                "tool",
                "--text",
                "ok",
                "--tool-call-id",
                "c1",
                "--tool-name",
                "f",
                "--branch",
                "orch.x"
            ]
        ),
        "3"
    );

    let shown = out(cli(&s).args(["--json", "show", "s1", "--view", "archive"]));
    let lines: Vec<Value> = shown
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["seq"], 1);
    assert_eq!(lines[0]["role"], "user");
    assert_eq!(lines[1]["invocation"], "inv-1");
    assert_eq!(lines[2]["branch"], "orch.x");
    assert_eq!(lines[2]["synthetic"], false);
    let last = out(cli(&s).args(["show", "s1", "--last", "1"]));
    assert!(last.contains("#3") && !last.contains("#2"), "{last}");

    let hits: Value =
        serde_json::from_str(&out(cli(&s).args(["search", "s1", "LOCKER", "--tool"]))).unwrap();
    assert_eq!(hits[0]["type"], "user");
    assert_eq!(hits[0]["text"], "My locker code is 4711");
    assert_eq!(hits[0]["seq"], 1, "the bounded output names each hit's seq");
    let seed: Value = serde_json::from_str(&out(cli(&s).args([
        "search",
        "s1",
        "LOCKER",
        "--tool",
        "--seed-exact",
    ])))
    .unwrap();
    assert_eq!(seed[0]["text"], "My locker code is 4711");
    assert!(seed[0].get("seq").is_none(), "the seed's shape: {seed}");
    assert_eq!(
        out(cli(&s).args(["search", "s1", "zebra", "--tool"])),
        "No results found."
    );
    assert_eq!(
        out(cli(&s).args(["search", "s1", "locker", "--page", "-3"]))
            .matches("4711")
            .count(),
        1
    );
    // Words in any order, each hit with its seq and role, then the count.
    let found = out(cli(&s).args(["search", "s1", "4711 locker"]));
    assert!(
        found.starts_with("#1 ") && found.contains(" user "),
        "{found}"
    );
    assert!(found.ends_with("1 of 1 hits"), "{found}");
    assert_eq!(
        out(cli(&s).args(["search", "s1", "zebra"])),
        "no hits for \"zebra\""
    );
    let page: Value = serde_json::from_str(&out(
        cli(&s).args(["--json", "search", "s1", "locker", "--ranked"])
    ))
    .unwrap();
    assert_eq!(page["hits"][0]["seq"], 1);
    assert_eq!(page["hits"][0]["role"], "user");
    assert!(page["hits"][0]["score"].as_f64().is_some());
    assert_eq!(page["total"]["count"], 1);
    assert_eq!(page["has_more"], false);

    let listed = out(cli(&s).args(["--json", "list", "--user", "ada"]));
    let session: Value = serde_json::from_str(listed.lines().next().unwrap()).unwrap();
    assert_eq!(session["id"], "s1");
    assert_eq!(session["key"], "cli:1");
    assert_eq!(session["metadata"]["n"], 3);
    assert!(out(cli(&s).arg("list")).contains("s1"));
}

#[test]
fn compact_rewind_end_delete_and_stats() {
    let s = store();
    create(&s, &["--id", "s1"]);
    // Turns long enough that a summary of one saves tokens.
    let detail = " about the order, its delivery and the refund".repeat(4);
    for i in 0..4 {
        append(
            &s,
            "s1",
            &[
                "--role",
                "user",
                "--text",
                &format!("question {i}{detail}"),
                "--invocation",
                &format!("inv-{i}"),
            ],
        );
        append(
            &s,
            "s1",
            &[
                "--role",
                "assistant",
                "--text",
                &format!("answer {i}{detail}"),
            ],
        );
    }
    let c = out(cli(&s).args([
        "compact",
        "s1",
        "--strategy",
        "turn-window",
        "--max-turns",
        "2",
    ]));
    assert!(c.starts_with("compacted: 8 → 4 events"), "{c}");
    // The archive view says when the first two turns left the context.
    let archive = out(cli(&s).args(["show", "s1", "--view", "archive"]));
    let left: Vec<&str> = archive
        .lines()
        .filter(|l| l.contains("(left context "))
        .collect();
    assert_eq!(left.len(), 4, "{archive}");
    assert!(
        left[0].starts_with("#1 ") && left[3].starts_with("#4 "),
        "{archive}"
    );
    let shown = out(cli(&s).args(["--json", "show", "s1", "--view", "archive"]));
    let exits: Vec<Value> = shown
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["left_context"].clone())
        .collect();
    assert!(exits[..4].iter().all(|x| x["version"] == 9), "{shown}");
    assert!(exits[4..].iter().all(Value::is_null), "{shown}");
    let c = out(cli(&s).args([
        "--json",
        "compact",
        "s1",
        "--strategy",
        "summarize",
        "--keep",
        "1",
    ]));
    let v: Value = serde_json::from_str(&c).unwrap();
    assert_eq!(v["compacted"], true);
    assert!(v["summary"].as_str().unwrap().contains("question 2"));
    assert_eq!(
        out(cli(&s).args([
            "compact",
            "s1",
            "--strategy",
            "sliding-window",
            "--max-events",
            "100"
        ])),
        "nothing to compact: 2 events fit the window of 100"
    );
    cli(&s)
        .args(["compact", "s1", "--strategy", "token-budget"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("--max-tokens"));

    // A fork before invocation 3 holds what came before it; the source keeps everything.
    let forked = out(cli(&s).args(["fork", "s1", "--before-invocation", "inv-3"]));
    let fork_id = forked.split_whitespace().next().unwrap().to_owned();
    assert!(forked.ends_with("(forked from s1: 6 events)"), "{forked}");
    let listed = out(cli(&s).args(["list", "--forks-of", "s1"]));
    assert!(
        listed.contains(&fork_id) && !listed.contains("s1 "),
        "{listed}"
    );
    let fork_events = out(cli(&s).args(["show", &fork_id, "--view", "archive"]));
    assert_eq!(fork_events.lines().count(), 6, "{fork_events}");
    cli(&s)
        .args(["fork", "s1", "--seq", "999"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("seq not found"));

    let r = out(cli(&s).args(["rewind", "s1", "--before-invocation", "inv-3"]));
    assert!(r.starts_with("removed 4 events"), "{r}");
    assert_eq!(out(cli(&s).args(["end", "s1"])), "ended s1");
    let stats: Value = serde_json::from_str(&out(cli(&s).args(["--json", "stats"]))).unwrap();
    assert_eq!(stats["archived"], 1);
    // An ended session takes no appends: exit code 8 and a hint naming `reopen`.
    cli(&s)
        .args(["append", "s1", "--role", "user", "--text", "too late"])
        .assert()
        .code(8)
        .stderr(predicate::str::contains("has ended"))
        .stderr(predicate::str::contains("agent-session reopen"));
    assert_eq!(out(cli(&s).args(["reopen", "s1"])), "reopened s1");
    append(&s, "s1", &["--role", "user", "--text", "back again"]);
    assert_eq!(
        out(cli(&s).args(["--json", "end", "s1"])),
        r#"{"ended":"s1"}"#
    );
    assert_eq!(stats["backend"], "sqlite");
    assert_eq!(out(cli(&s).args(["delete", "s1"])), "deleted s1");
    assert_eq!(
        out(cli(&s).arg("purge-expired")),
        "purged 0 expired sessions"
    );
}

#[test]
fn export_import_and_migrate_reproduce_sessions() {
    let s = store();
    create(&s, &["--id", "s1", "--app", "a1"]);
    create(&s, &["--id", "s2", "--app", "a2"]);
    for id in ["s1", "s2"] {
        append(
            &s,
            id,
            &[
                "--role",
                "user",
                "--text",
                "hello",
                "--state",
                "k=1",
                "--invocation",
                "i1",
            ],
        );
        append(&s, id, &["--role", "assistant", "--text", "hi"]);
    }
    cli(&s)
        .args(["rewind", "s1", "--before-invocation", "i1"])
        .assert()
        .success();
    append(&s, "s1", &["--role", "user", "--text", "again"]);
    let file = s.dir.path().join("export.jsonl");
    cli(&s)
        .args(["export", "--all", "--out"])
        .arg(&file)
        .assert()
        .success();
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), 3, "header + two sessions");

    let t = store();
    assert_eq!(
        out(cli(&t).arg("import").arg(&file)),
        "imported 2 sessions (0 already up to date)"
    );
    assert_eq!(
        out(cli(&t).arg("import").arg(&file)),
        "imported 0 sessions (2 already up to date)"
    );
    let a = out(cli(&s).args(["--json", "show", "s1", "--view", "archive"]));
    let b = out(cli(&t).args(["--json", "show", "s1", "--view", "archive"]));
    assert_eq!(a, b);
    assert!(
        a.contains("\"seq\":3"),
        "the seq after the rewind is kept: {a}"
    );
    // The exported single session streams to stdout.
    let one = out(cli(&s).args(["export", "s2"]));
    assert_eq!(one.lines().count(), 2);

    let m = store();
    let msg = out(cli(&s).args(["migrate", "--to", &m.url, "--app", "a1"]));
    assert!(
        msg.contains("migrated 1 sessions") && msg.contains("verified"),
        "{msg}"
    );
    assert_eq!(
        out(cli(&m).args(["--json", "show", "s1", "--view", "archive"])),
        a
    );
    cli(&m).args(["show", "s2"]).assert().failure();
}

#[test]
fn bench_reports_every_workload_next_to_the_raw_engine() {
    let s = store();
    let v: Value = serde_json::from_str(&out(cli(&s).args([
        "--json",
        "bench",
        "--events",
        "40",
        "--sessions",
        "3",
        "--repeat",
        "2",
        "--compare",
        "raw",
        "--sizes",
        "30,300",
    ])))
    .unwrap();
    assert_eq!(v["store"], "sqlite");
    assert!(
        v["raw"].as_str().unwrap().starts_with("SQLite"),
        "{}",
        v["raw"]
    );
    let results = v["results"].as_array().unwrap();
    let names: Vec<&str> = results
        .iter()
        .map(|r| r["workload"].as_str().unwrap())
        .collect();
    for prefix in [
        "W1 append",
        "W2 append: 3 sessions",
        "W3 full read",
        "W3 last 20",
        "W4 search",
        "last 20 of 300",
        "full read growth",
        "compaction: first, 1000 events",
        "compaction: rolling, summary + 50 events",
        "compaction: rolling, without the summarizer",
        "offline summarizer throughput",
    ] {
        assert!(
            names.iter().any(|n| n.starts_with(prefix)),
            "{prefix} missing from {names:?}"
        );
    }
    let w1 = &results[0];
    assert_eq!(w1["unit"], "events/s");
    assert_eq!(w1["library_samples"].as_array().unwrap().len(), 2);
    assert_eq!(w1["raw_samples"].as_array().unwrap().len(), 2);
    let ratio = &w1["ratio"];
    assert!(ratio["min"].as_f64().unwrap() <= ratio["median"].as_f64().unwrap());
    assert!(ratio["median"].as_f64().unwrap() <= ratio["max"].as_f64().unwrap());
    assert_eq!(ratio["pairs"], 2);
    let searches: Vec<&Value> = results
        .iter()
        .filter(|r| r["workload"].as_str().unwrap().starts_with("W4 search"))
        .collect();
    assert_eq!(searches.len(), 4, "a frequent word and three planted ones");
    let first_search = results
        .iter()
        .find(|r| r["workload"] == "W4 first search after the appends")
        .expect("the first search after the appends, timed apart");
    assert_eq!(first_search["unit"], "ms/search");
    assert_eq!(first_search["library_samples"].as_array().unwrap().len(), 1);
    assert!(searches[0]["extra"]["hits"].as_u64() > searches[3]["extra"]["hits"].as_u64());
    let row = |prefix: &str| {
        results
            .iter()
            .find(|r| r["workload"].as_str().unwrap().starts_with(prefix))
            .unwrap()
    };
    let rolling = row("compaction: rolling, summary");
    assert_eq!(
        rolling["library_samples"].as_array().unwrap().len(),
        2 * 10,
        "10 a round"
    );
    let (whole, without) = (
        rolling["library"].as_f64().unwrap(),
        row("compaction: rolling, without")["library"]
            .as_f64()
            .unwrap(),
    );
    assert!(0.0 < without && without < whole, "{without} of {whole}");
    assert_eq!(row("offline summarizer")["unit"], "MB/s");
    let stats: Value = serde_json::from_str(&out(cli(&s).args(["--json", "stats"]))).unwrap();
    assert_eq!(stats["sessions"], 0, "bench cleans up after itself");
    let leftovers: Vec<_> = std::fs::read_dir(s.dir.path())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains("-raw-"))
        .collect();
    assert!(leftovers.is_empty(), "the raw baseline removes its file");
}

#[test]
fn demo_runs_offline_and_tells_the_story() {
    let s = store();
    let o = out(cli(&s).arg("demo"));
    for needle in [
        "1. resolve a session by key",
        "→ get_weather(",
        "[planner.researcher]",
        "fired on the next append",
        "(summary)",
        "\"4711\" in the context verbatim: false",
        "My locker code is 4711",
        "trip = \"Sintra\"",
        "(new: true); the old one is archived",
    ] {
        assert!(o.contains(needle), "missing {needle:?} in:\n{o}");
    }
    let again = out(cli(&s).arg("demo"));
    assert_ne!(
        o.lines().nth(1),
        again.lines().nth(1),
        "a fresh session each run"
    );
}

/// A tool-using conversation built from the command line (a question, a
/// tool call, its result, the answer) and shown readably and as JSON.
#[test]
fn a_tool_using_conversation_is_built_and_shown() {
    let s = store();
    let id = create(&s, &["--id", "tools"]);
    append(&s, &id, &["--role", "user", "--text", "Weather in Lisbon?"]);
    let call = append(
        &s,
        &id,
        &[
            "--tool-call",
            "get_weather",
            "--args",
            r#"{"city":"Lisbon"}"#,
            "--call-id",
            "call_1",
        ],
    );
    assert_eq!(call, "2 call_1", "the seq and the call id");
    let generated = append(&s, &id, &["--tool-call", "get_time"]);
    let (_, generated_id) = generated.split_once(' ').unwrap();
    assert!(generated_id.starts_with("call_"), "{generated}");
    append(
        &s,
        &id,
        &[
            "--tool-result",
            "call_1",
            "--tool-name",
            "get_weather",
            "--text",
            "22°C, sunny",
        ],
    );
    append(&s, &id, &["--tool-result", generated_id, "--text", "14:05"]);
    append(
        &s,
        &id,
        &["--role", "assistant", "--text", "22°C and sunny."],
    );
    let shown = out(cli(&s).args(["show", &id]));
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines.len(), 6, "{shown}");
    assert!(
        lines[1].contains(r#"→ get_weather({"city":"Lisbon"}) [call_1]"#),
        "{shown}"
    );
    assert!(
        lines[3].contains("← get_weather [call_1]: 22°C, sunny"),
        "{shown}"
    );
    assert!(
        lines[4].contains(&format!("← result [{generated_id}]: 14:05")),
        "{shown}"
    );
    let json = out(cli(&s).args(["--json", "show", &id]));
    let events: Vec<Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events[1]["tool_calls"][0]["name"], "get_weather");
    assert_eq!(
        events[1]["tool_calls"][0]["arguments"],
        r#"{"city":"Lisbon"}"#
    );
    assert_eq!(events[3]["tool_call_id"], "call_1");
    assert_eq!(events[3]["tool_name"], "get_weather");
    // Bad input is refused with a clear message and stores nothing.
    cli(&s)
        .args(["append", &id, "--tool-call", "f", "--args", "{not json"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("--args").and(predicate::str::contains("not JSON")));
    cli(&s)
        .args(["append", &id, "--text", "who?"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("--role"));
    assert_eq!(out(cli(&s).args(["show", &id])).lines().count(), 6);
}

/// `watch` prints the last events, then each new one as it arrives.
#[test]
fn watch_follows_a_session() {
    let s = store();
    let id = create(&s, &["--id", "w"]);
    append(&s, &id, &["--role", "user", "--text", "one"]);
    append(&s, &id, &["--role", "assistant", "--text", "two"]);
    let mut watcher = std::process::Command::new(assert_cmd::cargo::cargo_bin("agent-session"))
        .args([
            "--store",
            &s.url,
            "watch",
            &id,
            "--last",
            "1",
            "--interval",
            "100ms",
            "--exit-after",
            "3",
        ])
        .env_remove("AGENT_SESSION_STORE")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watcher.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.contains("two"), "{first}");
    append(&s, &id, &["--role", "user", "--text", "three"]);
    append(&s, &id, &["--role", "assistant", "--text", "four"]);
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    assert!(watcher.wait().unwrap().success());
    assert_eq!(rest.len(), 2, "{rest:?}");
    assert!(
        rest[0].contains("three") && rest[1].contains("four"),
        "{rest:?}"
    );
}

/// `list` says when there is more, and pages or lists everything.
/// `search --any` finds events holding any one word (exclusions still
/// hold), through the tool too; `--since` keeps events from a time on; a
/// time that does not parse is bad input (exit 2) naming the flag.
#[test]
fn search_any_of_and_since() {
    let s = store();
    create(&s, &["--id", "s1"]);
    for text in ["a ripe plum", "a green pear", "plum and pear, cancelled"] {
        append(&s, "s1", &["--role", "user", "--text", text]);
    }
    assert_eq!(
        out(cli(&s).args(["search", "s1", "plum pear -cancelled"])),
        "no hits for \"plum pear -cancelled\""
    );
    let page: Value = serde_json::from_str(&out(cli(&s).args([
        "--json",
        "search",
        "s1",
        "plum pear -cancelled",
        "--any",
    ])))
    .unwrap();
    let texts: Vec<&str> = page["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["a ripe plum", "a green pear"]);
    let tool: Value = serde_json::from_str(&out(cli(&s).args([
        "search",
        "s1",
        "PEAR plum",
        "--any",
        "--tool",
    ])))
    .unwrap();
    assert_eq!(tool.as_array().map(Vec::len), Some(3), "{tool}");
    let since_then = out(cli(&s).args(["search", "s1", "plum", "--since", "2000-01-01"]));
    assert!(since_then.ends_with("2 of 2 hits"), "{since_then}");
    let later = [
        "search",
        "s1",
        "plum",
        "--any",
        "--since",
        "2999-01-01T00:00:00Z",
    ];
    assert_eq!(out(cli(&s).args(later)), "no hits for \"plum\"");
    assert_eq!(
        out(cli(&s).args(["search", "s1", "plum", "--tool", "--since", "2999-01-01"])),
        "No results found."
    );
    cli(&s)
        .args(["search", "s1", "plum", "--since", "yesterday"])
        .assert()
        .failure()
        .code(2)
        .stderr(predicate::str::contains("--since \"yesterday\""));
}

#[test]
fn list_says_there_is_more_and_pages() {
    let s = store();
    for i in 0..25 {
        create(&s, &["--id", &format!("s{i:02}")]);
    }
    let first = out(cli(&s).arg("list"));
    let lines: Vec<&str> = first.lines().collect();
    assert_eq!(lines.len(), 1 + 20 + 1, "{first}");
    assert!(
        lines[21].contains("more sessions — use --page 1"),
        "{first}"
    );
    let second = out(cli(&s).args(["list", "--page", "1"]));
    assert_eq!(second.lines().count(), 1 + 5, "{second}");
    assert!(!second.contains("more sessions"));
    let all = out(cli(&s).args(["list", "--all", "--limit", "7"]));
    assert_eq!(all.lines().count(), 1 + 25, "{all}");
    let a = cli(&s).args(["--json", "list"]).assert().success();
    let stdout = String::from_utf8(a.get_output().stdout.clone()).unwrap();
    let stderr = String::from_utf8(a.get_output().stderr.clone()).unwrap();
    assert_eq!(stdout.lines().count(), 20, "JSON lines only on stdout");
    assert!(stderr.contains("use --page 1"), "{stderr}");
}

/// Shell completions and the man page come from the argument definitions,
/// and need no store.
#[test]
fn completions_and_the_man_page_are_generated() {
    let dir = tempfile::tempdir().unwrap();
    for (shell, needle) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef agent-session"),
        ("fish", "complete -c agent-session"),
    ] {
        let a = Command::cargo_bin("agent-session")
            .unwrap()
            .current_dir(dir.path())
            .env_remove("AGENT_SESSION_STORE")
            .args(["completions", shell])
            .assert()
            .success();
        let script = String::from_utf8(a.get_output().stdout.clone()).unwrap();
        assert!(script.contains(needle), "{shell}");
        assert!(script.contains("watch"), "{shell}: every command");
        assert!(a.get_output().stderr.is_empty(), "no store announced");
    }
    let man = Command::cargo_bin("agent-session")
        .unwrap()
        .current_dir(dir.path())
        .arg("man")
        .assert()
        .success();
    let page = String::from_utf8(man.get_output().stdout.clone()).unwrap();
    assert!(page.contains(".TH agent-session 1") && page.contains("completions"));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no store created"
    );
    // A reader that stops after the first line is no failure.
    let mut head = std::process::Command::new(assert_cmd::cargo::cargo_bin("agent-session"))
        .current_dir(dir.path())
        .args(["completions", "bash"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(head.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let done = head.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// `-v`/`-q` set how much is logged on stderr, `--log-format json` writes
/// one JSON object per line, and no log line holds message content.
#[test]
fn logs_follow_the_flags_and_never_hold_message_content() {
    let s = store();
    create(&s, &["--id", "s1"]);
    let canary = "canary-7f3a9 secret text";
    let a = cli(&s)
        .args([
            "-vvv",
            "--log-format",
            "json",
            "append",
            "s1",
            "--role",
            "user",
            "--text",
            canary,
        ])
        .env_remove("RUST_LOG")
        .assert()
        .success();
    let logs = String::from_utf8(a.get_output().stderr.clone()).unwrap();
    assert!(!logs.is_empty(), "-vvv logs");
    for line in logs.lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v["level"].is_string(), "{line}");
    }
    assert!(logs.contains("\"op\":\"append\""), "{logs}");
    assert!(
        !logs.contains("canary-7f3a9"),
        "message content in the logs: {logs}"
    );
    // Text logs into a pipe (not a terminal) carry no colour codes.
    let text = cli(&s)
        .args(["-vvv", "show", "s1"])
        .env_remove("RUST_LOG")
        .assert()
        .success();
    let text = String::from_utf8(text.get_output().stderr.clone()).unwrap();
    assert!(text.contains("INFO") || text.contains("DEBUG"), "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "ANSI codes in piped logs: {text:?}"
    );
    let quiet = cli(&s)
        .args(["-q", "show", "s1"])
        .env_remove("RUST_LOG")
        .assert()
        .success();
    assert!(quiet.get_output().stderr.is_empty());
    cli(&s)
        .args(["-q", "-v", "show", "s1"])
        .assert()
        .failure()
        .code(2);
}
