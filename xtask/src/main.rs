//! `cargo xtask <task>`: the one entry point for checks, used by CI and by hand.

use std::env;
use std::process::{Command, ExitCode};
use std::time::Instant;

/// One named step: a cargo invocation and extra environment.
struct Step {
    name: String,
    args: Vec<String>,
    env: Vec<(&'static str, &'static str)>,
    hint: &'static str,
}

fn step(name: impl Into<String>, args: &[&str], hint: &'static str) -> Step {
    Step {
        name: name.into(),
        args: args.iter().map(|s| (*s).to_owned()).collect(),
        env: Vec::new(),
        hint,
    }
}

const TASKS: &[(&str, &str)] = &[
    ("ci", "everything CI checks: fmt, lint, test, docs"),
    ("fmt", "cargo fmt --check over the workspace"),
    (
        "lint",
        "clippy -D warnings with no default features, each backend feature alone, and all features",
    ),
    ("test", "every test of the workspace with all features"),
    ("docs", "cargo doc with warnings denied"),
];

/// The facade's backend features, read from its manifest so new backends are linted alone automatically.
fn facade_features() -> Vec<String> {
    let manifest = std::fs::read_to_string("crates/agent-session/Cargo.toml").unwrap_or_default();
    let mut in_features = false;
    let mut out = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_features = line == "[features]";
            continue;
        }
        if in_features {
            if let Some((name, _)) = line.split_once('=') {
                let name = name.trim();
                if !name.is_empty() && name != "default" && name != "full" {
                    out.push(name.to_owned());
                }
            }
        }
    }
    out
}

fn fmt_steps() -> Vec<Step> {
    vec![step(
        "fmt",
        &["fmt", "--all", "--", "--check"],
        "run `cargo fmt --all` and commit the result",
    )]
}

fn lint_steps() -> Vec<Step> {
    let hint = "fix the clippy findings above (warnings are errors)";
    let mut steps = vec![
        step(
            "clippy (all features)",
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--all-features",
                "--",
                "-D",
                "warnings",
            ],
            hint,
        ),
        step(
            "clippy (facade, no default features)",
            &[
                "clippy",
                "-p",
                "agent-session",
                "--no-default-features",
                "--",
                "-D",
                "warnings",
            ],
            hint,
        ),
    ];
    for feature in facade_features() {
        steps.push(Step {
            name: format!("clippy (facade, feature {feature} alone)"),
            args: [
                "clippy",
                "-p",
                "agent-session",
                "--no-default-features",
                "--features",
                &feature,
                "--",
                "-D",
                "warnings",
            ]
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
            env: Vec::new(),
            hint,
        });
    }
    steps
}

fn test_steps() -> Vec<Step> {
    vec![step(
        "test",
        &["test", "--workspace", "--all-features"],
        "a test failed: its name and message are above",
    )]
}

fn docs_steps() -> Vec<Step> {
    let mut s = step(
        "docs",
        &["doc", "--workspace", "--no-deps", "--all-features"],
        "fix the rustdoc warnings above (broken links, missing docs)",
    );
    s.env.push(("RUSTDOCFLAGS", "-D warnings"));
    vec![s]
}

fn run(steps: Vec<Step>) -> ExitCode {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let total = Instant::now();
    for s in steps {
        eprintln!("\n==> xtask: {} (cargo {})", s.name, s.args.join(" "));
        let started = Instant::now();
        let mut cmd = Command::new(&cargo);
        cmd.args(&s.args);
        for (k, v) in &s.env {
            cmd.env(k, v);
        }
        let ok = match cmd.status() {
            Ok(status) => status.success(),
            Err(e) => {
                eprintln!("could not run cargo: {e}");
                false
            }
        };
        if !ok {
            eprintln!("\nxtask: step `{}` failed: {}", s.name, s.hint);
            return ExitCode::FAILURE;
        }
        eprintln!("==> xtask: {} ok in {:.0?}", s.name, started.elapsed());
    }
    eprintln!("\nxtask: all steps passed in {:.0?}", total.elapsed());
    ExitCode::SUCCESS
}

fn usage() -> ExitCode {
    eprintln!("usage: cargo xtask <task>\n\ntasks:");
    for (name, what) in TASKS {
        eprintln!("  {name:<6} {what}");
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let task = env::args().nth(1);
    let steps = match task.as_deref() {
        None | Some("help" | "--help" | "-h") => return usage(),
        Some("ci") => {
            let mut all = fmt_steps();
            all.extend(lint_steps());
            all.extend(test_steps());
            all.extend(docs_steps());
            all
        }
        Some("fmt") => fmt_steps(),
        Some("lint") => lint_steps(),
        Some("test") => test_steps(),
        Some("docs") => docs_steps(),
        Some(other) => {
            eprintln!("xtask: unknown task {other:?}\n");
            usage();
            return ExitCode::FAILURE;
        }
    };
    run(steps)
}
