//! The three context-engine probes, scripted through the command line on
//! SQLite as a user would run them: a long tool loop compacted within
//! budget, a rewind after compaction, a pinned system prompt.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use serde_json::Value;

fn cli(url: &str) -> Command {
    let mut c = Command::cargo_bin("agent-session").unwrap();
    c.arg("--store").arg(url).env_remove("AGENT_SESSION_STORE");
    c
}

fn run(url: &str, args: &[&str]) -> String {
    let o = cli(url)
        .args(args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    String::from_utf8(o).unwrap().trim().to_owned()
}

fn context(url: &str, id: &str) -> Vec<Value> {
    run(url, &["--json", "show", id])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn store() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("s.db").display());
    (dir, url)
}

/// Session `id` of ada with one long turn: "fix the build", then 20
/// assistant steps of ~330 characters each.
fn one_long_turn(url: &str, id: &str) {
    run(url, &["create", "--user", "ada", "--id", id]);
    run(
        url,
        &["append", id, "--role", "user", "--text", "fix the build"],
    );
    let step = "lorem ipsum dolor sit amet ".repeat(12);
    for i in 1..=20 {
        let text = format!("step {i}: {step}");
        run(url, &["append", id, "--role", "assistant", "--text", &text]);
    }
}

#[test]
fn probe_one_long_turn_compacts_within_budget() {
    let (_dir, url) = store();
    one_long_turn(&url, "long");
    let out = run(
        &url,
        &[
            "--json",
            "compact",
            "long",
            "--strategy",
            "token-budget",
            "--max-tokens",
            "120",
        ],
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["compacted"], true, "{out}");
    assert!(v["tokens_after"].as_u64().unwrap() <= 120, "{out}");
    assert!(v.get("shortfall").is_none(), "{out}");
    let ctx = context(&url, "long");
    assert_eq!(ctx[0]["text"], "fix the build");
    assert!(ctx.last().unwrap()["text"]
        .as_str()
        .unwrap()
        .starts_with("step 20:"));
    for (strategy, flag, value) in [
        ("sliding-window", "--max-events", "4"),
        ("summarize", "--keep", "0"),
    ] {
        let (_d, url) = store();
        one_long_turn(&url, "l");
        let out = run(
            &url,
            &[
                "--json",
                "compact",
                "l",
                "--strategy",
                strategy,
                flag,
                value,
            ],
        );
        assert!(out.contains("\"compacted\":true"), "{strategy}: {out}");
    }
}

/// Three invocations, a compaction by each strategy, then a rewind (and a
/// fork) before the third: turns 1 and 2 are the context again.
#[test]
fn probe_two_rewind_after_compaction_keeps_the_earlier_turns() {
    let (_dir, url) = store();
    let detail = " with the details of the order and the delivery".repeat(4);
    let strategies: [&[&str]; 4] = [
        &["--strategy", "summarize", "--keep", "1"],
        &["--strategy", "turn-window", "--max-turns", "1"],
        &["--strategy", "sliding-window", "--max-events", "2"],
        &["--strategy", "token-budget", "--max-tokens", "120"],
    ];
    for (n, strategy) in strategies.iter().enumerate() {
        let id = format!("rw{n}");
        run(&url, &["create", "--user", "ada", "--id", &id]);
        for i in 1..=3 {
            let inv = format!("i{i}");
            for (role, text) in [("user", "question"), ("assistant", "answer")] {
                let text = format!("{text} {i}{detail}");
                run(
                    &url,
                    &[
                        "append",
                        &id,
                        "--role",
                        role,
                        "--text",
                        &text,
                        "--invocation",
                        &inv,
                    ],
                );
            }
        }
        let mut compact = vec!["compact", id.as_str()];
        compact.extend_from_slice(strategy);
        let said = run(&url, &compact);
        assert!(said.starts_with("compacted"), "{strategy:?}: {said}");
        let forked = run(&url, &["fork", &id, "--before-invocation", "i3"]);
        let fork_id = forked.split_whitespace().next().unwrap().to_owned();
        run(&url, &["rewind", &id, "--before-invocation", "i3"]);
        for session in [&id, &fork_id] {
            let texts: Vec<String> = context(&url, session)
                .iter()
                .map(|e| {
                    let t = e["text"].as_str().unwrap();
                    t.split(" with").next().unwrap().to_owned()
                })
                .collect();
            assert_eq!(
                texts,
                ["question 1", "answer 1", "question 2", "answer 2"],
                "{strategy:?}, {session}"
            );
        }
    }
}

/// A token budget the pinned system prompt and the newest turn alone are
/// over: the older turns go, and the CLI says how far over it still is.
#[test]
fn probe_four_a_budget_that_cannot_be_met_says_by_how_much() {
    let (_dir, url) = store();
    run(&url, &["create", "--user", "ada", "--id", "b"]);
    run(
        &url,
        &[
            "append",
            "b",
            "--role",
            "system",
            "--text",
            "You are a careful assistant who answers briefly.",
        ],
    );
    for i in 1..=4 {
        for (role, text) in [("user", "question"), ("assistant", "answer")] {
            run(
                &url,
                &[
                    "append",
                    "b",
                    "--role",
                    role,
                    "--text",
                    &format!("{text} {i}"),
                ],
            );
        }
    }
    let said = run(
        &url,
        &[
            "compact",
            "b",
            "--strategy",
            "token-budget",
            "--max-tokens",
            "20",
        ],
    );
    assert!(said.starts_with("compacted"), "{said}");
    assert!(
        said.contains("still over the budget:") && said.contains("over the budget of 20"),
        "{said}"
    );
    let json = run(
        &url,
        &[
            "--json",
            "compact",
            "b",
            "--strategy",
            "token-budget",
            "--max-tokens",
            "20",
        ],
    );
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["shortfall"]["unit"], "tokens", "{v}");
    assert_eq!(v["shortfall"]["budget"], 20, "{v}");
}

#[test]
fn probe_three_the_system_prompt_stays_first_and_is_never_archived() {
    let (_dir, url) = store();
    run(&url, &["create", "--user", "ada", "--id", "sys"]);
    run(
        &url,
        &[
            "append",
            "sys",
            "--role",
            "system",
            "--text",
            "You are a careful agent.",
        ],
    );
    for i in 1..=4 {
        run(
            &url,
            &[
                "append",
                "sys",
                "--role",
                "user",
                "--text",
                &format!("question {i}"),
            ],
        );
        run(
            &url,
            &[
                "append",
                "sys",
                "--role",
                "assistant",
                "--text",
                &format!("answer {i}"),
            ],
        );
    }
    for (strategy, flag, value) in [
        ("turn-window", "--max-turns", "1"),
        ("token-budget", "--max-tokens", "20"),
        ("summarize", "--keep", "1"),
    ] {
        run(
            &url,
            &["compact", "sys", "--strategy", strategy, flag, value],
        );
        let ctx = context(&url, "sys");
        assert_eq!(ctx[0]["role"], "system", "{strategy}");
        assert_eq!(ctx[0]["text"], "You are a careful agent.", "{strategy}");
    }
}

#[test]
fn nothing_to_compact_says_why() {
    let (_dir, url) = store();
    run(&url, &["create", "--user", "ada", "--id", "s"]);
    for i in 1..=2 {
        run(
            &url,
            &["append", "s", "--role", "user", "--text", &format!("q{i}")],
        );
        run(
            &url,
            &[
                "append",
                "s",
                "--role",
                "assistant",
                "--text",
                &format!("a{i}"),
            ],
        );
    }
    let out = run(
        &url,
        &[
            "compact",
            "s",
            "--strategy",
            "turn-window",
            "--max-turns",
            "5",
        ],
    );
    assert_eq!(
        out,
        "nothing to compact: the context holds 2 turns, within the limit of 5"
    );
    let out = run(
        &url,
        &[
            "--json",
            "compact",
            "s",
            "--strategy",
            "token-budget",
            "--max-tokens",
            "5000",
        ],
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["compacted"], false);
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("fit the budget of 5000"),
        "{out}"
    );
}

/// `compact s --strategy summarize --keep 1` with an OpenAI-compatible endpoint at `server`.
fn summarize_with(url: &str, server: &str) -> Command {
    let mut c = cli(url);
    c.args(["compact", "s", "--strategy", "summarize", "--keep", "1"])
        .args(["--summarizer", "openai", "--model", "m"])
        .args(["--base-url", &format!("{server}/v1")])
        .env_remove("OPENAI_API_KEY");
    c
}

/// `--summarizer openai` writes the summary with any OpenAI-compatible
/// endpoint; an empty answer leaves the context exactly as it was.
#[tokio::test(flavor = "multi_thread")]
async fn summarize_with_an_openai_compatible_endpoint() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let good = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "choices": [{"message": {"role": "assistant", "content": "The user asked three questions about lockers."}}]
        })))
        .mount(&good)
        .await;
    let empty = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "choices": [{"message": {"role": "assistant", "content": "  "}}]
        })))
        .mount(&empty)
        .await;
    let (_dir, url) = store();
    run(&url, &["create", "--user", "ada", "--id", "s"]);
    // Turns long enough that the summary saves tokens.
    let detail = " about the lockers at the station and their sizes".repeat(3);
    for i in 1..=3 {
        run(
            &url,
            &[
                "append",
                "s",
                "--role",
                "user",
                "--text",
                &format!("question {i}{detail}"),
            ],
        );
        run(
            &url,
            &[
                "append",
                "s",
                "--role",
                "assistant",
                "--text",
                &format!("answer {i}{detail}"),
            ],
        );
    }
    let before = context(&url, "s");
    let failed = summarize_with(&url, &empty.uri()).assert().failure();
    let err = String::from_utf8(failed.get_output().stderr.clone()).unwrap();
    assert!(err.contains("empty summary"), "{err}");
    assert_eq!(context(&url, "s"), before, "the context is unchanged");
    let out = summarize_with(&url, &good.uri())
        .arg("--json")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_str(String::from_utf8(out).unwrap().trim()).unwrap();
    assert_eq!(
        v["summary"],
        "The user asked three questions about lockers."
    );
    cli(&url)
        .args([
            "compact",
            "s",
            "--strategy",
            "summarize",
            "--summarizer",
            "openai",
        ])
        .assert()
        .failure();
}

#[test]
fn stats_of_a_session_show_its_usage_per_invocation_and_its_counts() {
    let (dir, url) = store();
    let usage = |input: u64, output: u64| {
        serde_json::json!({"usage": {"model": "gpt-4o", "input_tokens": input, "output_tokens": output,
                                     "cached_tokens": 64, "estimated_input_tokens": input - 10}})
    };
    let event = |seq: u64, role: &str, text: &str, inv: &str, metadata: Value| {
        serde_json::json!({"id": format!("e{seq}"), "session_id": "s1", "seq": seq,
            "timestamp": "2026-11-01T10:00:00Z", "message": {"role": role, "content": text},
            "invocation_id": inv, "token_estimate": 5, "metadata": metadata})
    };
    let lines = [
        serde_json::json!({"format": "agent-session-export", "version": 1}),
        serde_json::json!({
            "session": {"id": "s1", "app": "default", "user_id": "ada", "key": null, "status": "active",
                "created_at": "2026-11-01T10:00:00Z", "updated_at": "2026-11-01T10:00:00Z",
                "expires_at": null, "metadata": {}, "state": {}, "event_count": 4,
                "context_tokens": 20, "version": 1},
            "initial_state": {}, "last_seq": 4,
            "events": [
                event(1, "user", "Where is my order ORD-58213?", "run-1", serde_json::json!({})),
                event(2, "assistant", "It ships tomorrow.", "run-1", usage(120, 8)),
                event(3, "user", "Thanks!", "run-2", serde_json::json!({})),
                event(4, "assistant", "You are welcome.", "run-2", usage(140, 5)),
            ],
            "context": [1, 2, 3, 4], "shared": {"app": {}, "user": {}}
        }),
    ];
    let file = dir.path().join("usage.ndjson");
    std::fs::write(
        &file,
        lines
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap();
    run(&url, &["import", file.to_str().unwrap()]);
    let out = run(&url, &["--json", "stats", "s1", "--model", "gpt-4o"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["usage"]["total"]["calls"], 2, "{out}");
    assert_eq!(v["usage"]["total"]["input_tokens"], 260, "{out}");
    assert_eq!(
        v["usage"]["by_invocation"][1]["invocation_id"], "run-2",
        "{out}"
    );
    assert_eq!(
        v["usage"]["by_invocation"][1]["usage"]["output_tokens"], 5,
        "{out}"
    );
    assert!(
        v["estimator"].as_str().unwrap().starts_with("heuristic"),
        "{out}"
    );
    assert_eq!(v["model_count"]["estimator"], "bpe o200k_base", "{out}");
    assert!(v["model_count"]["tokens"].as_u64().unwrap() > 0, "{out}");
    let text = run(&url, &["stats", "s1"]);
    assert!(
        text.contains("run-1: 1 call, 120 input (64 cached), 8 output tokens"),
        "{text}"
    );
}
