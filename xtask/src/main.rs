//! `cargo xtask <task>`: the one entry point for checks, used by CI and by hand.

mod bench_report;
mod bench_tables;

use std::env;
use std::process::{Command, ExitCode};
use std::time::Instant;

/// One named step: a cargo invocation (or another program's) and extra environment.
struct Step {
    name: String,
    /// `None`: the cargo running xtask.
    program: Option<String>,
    args: Vec<String>,
    env: Vec<(&'static str, &'static str)>,
    hint: &'static str,
}

fn step(name: impl Into<String>, args: &[&str], hint: &'static str) -> Step {
    Step {
        name: name.into(),
        program: None,
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
    (
        "publish-check",
        "cargo publish --dry-run of every crate in dependency order (packages, then builds each from its package); not in ci",
    ),
    (
        "bench-report",
        "draw docs/bench/*.svg and print the tables of docs/performance.md from the bench JSON in docs/bench/; not in ci",
    ),
    (
        "fuzz",
        "cargo fuzz on every target (or `fuzz <target>`) for FUZZ_SECONDS each (default 60); not in ci",
    ),
];

/// The fuzz targets: the files in `fuzz/fuzz_targets/`.
fn fuzz_targets() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir("fuzz/fuzz_targets")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".rs"))
                .map(str::to_owned)
        })
        .collect();
    names.sort();
    names
}

fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Installs cargo-fuzz if missing, then runs each target for a bounded
/// time from its seeds (`fuzz/seeds/<target>`), keeping what it learns in
/// `fuzz/corpus/<target>`. Uses a nightly toolchain when rustup has one,
/// else the stable compiler with `RUSTC_BOOTSTRAP=1` (sanitizers need `-Z`).
fn fuzz_steps(only: Option<&str>) -> Result<Vec<Step>, String> {
    let all = fuzz_targets();
    let targets: Vec<&str> = match only {
        None => all.iter().map(String::as_str).collect(),
        Some(t) if all.iter().any(|a| a == t) => vec![t],
        Some(t) => return Err(format!("no fuzz target {t:?}; targets: {all:?}")),
    };
    if targets.is_empty() {
        return Err(
            "no fuzz targets in fuzz/fuzz_targets/ (run from the workspace root)".to_owned(),
        );
    }
    let seconds = env::var("FUZZ_SECONDS").unwrap_or_else(|_| "60".to_owned());
    if seconds.parse::<u32>().is_err() {
        return Err(format!(
            "FUZZ_SECONDS must be a number of seconds, not {seconds:?}"
        ));
    }
    let mut steps = Vec::new();
    if !succeeds("cargo", &["fuzz", "--version"]) {
        steps.push(step(
            "install cargo-fuzz",
            &["install", "cargo-fuzz", "--locked"],
            "cargo-fuzz did not install: see the error above",
        ));
    }
    let nightly = succeeds("rustup", &["run", "nightly", "rustc", "--version"]);
    for t in targets {
        let corpus = format!("fuzz/corpus/{t}");
        if let Err(e) = std::fs::create_dir_all(&corpus) {
            return Err(format!("cannot create {corpus}: {e}"));
        }
        let mut args: Vec<String> = Vec::new();
        if nightly {
            args.push("+nightly".to_owned());
        }
        args.extend(
            [
                "fuzz",
                "run",
                t,
                &corpus,
                &format!("fuzz/seeds/{t}"),
                "--",
                &format!("-max_total_time={seconds}"),
                "-rss_limit_mb=4096",
            ]
            .iter()
            .map(|s| (*s).to_owned()),
        );
        steps.push(Step {
            name: format!("fuzz {t} for {seconds}s"),
            // The rustup proxy, so `+nightly` picks the toolchain.
            program: Some("cargo".to_owned()),
            args,
            env: if nightly {
                Vec::new()
            } else {
                vec![("RUSTC_BOOTSTRAP", "1")]
            },
            hint: "the fuzzer found a failing input, saved under fuzz/artifacts/<target>/: \
                   replay it with `cargo fuzz run <target> <file>`, fix the bug, then copy the \
                   file into fuzz/regressions/<target>/ so `cargo test -p agent-session-scenarios \
                   --test fuzz_inputs` replays it from now on",
        });
    }
    Ok(steps)
}

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
            program: None,
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

/// Removes the sources an earlier `cargo publish --dry-run` unpacked from
/// this workspace's own packages. Cargo unpacks each packaged crate into
/// `$CARGO_HOME/registry/src/-<hash of the workspace path>/<name>-<version>`
/// and, finding that directory again on the next run of the same version,
/// builds the stale sources instead of the new package.
fn forget_unpacked_packages() -> Result<(), String> {
    let home = env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cargo")))
        .ok_or("neither CARGO_HOME nor HOME is set")?;
    let ours: Vec<String> = std::fs::read_dir("crates")
        .map_err(|e| format!("cannot list crates/ (run from the workspace root): {e}"))?
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(|n| format!("{n}-")))
        .collect();
    let Ok(registries) = std::fs::read_dir(home.join("registry").join("src")) else {
        return Ok(()); // nothing unpacked yet
    };
    for registry in registries.flatten() {
        // Local overlays are named `-<hash>`; crates.io's sources are left alone.
        if !registry.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        for unpacked in std::fs::read_dir(registry.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = unpacked.file_name().to_string_lossy().into_owned();
            let is_ours = ours.iter().any(|p| {
                name.strip_prefix(p.as_str())
                    .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
            });
            if is_ours {
                std::fs::remove_dir_all(unpacked.path())
                    .map_err(|e| format!("cannot remove {}: {e}", unpacked.path().display()))?;
            }
        }
    }
    Ok(())
}

/// Forgets what an earlier `cargo publish --dry-run` built of this
/// workspace's own packages: the verify builds share `target/debug`, where
/// cargo takes a registry crate it compiled before as fresh by name and
/// version alone, so an earlier run's build of a workspace crate would
/// stand in for the new package. Removing the workspace crates'
/// fingerprints makes cargo build them again (nothing else).
fn forget_built_packages() -> Result<(), String> {
    let ours: Vec<String> = std::fs::read_dir("crates")
        .map_err(|e| format!("cannot list crates/ (run from the workspace root): {e}"))?
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(|n| format!("{n}-")))
        .collect();
    let Ok(fingerprints) = std::fs::read_dir("target/debug/.fingerprint") else {
        return Ok(()); // nothing built yet
    };
    for built in fingerprints.flatten() {
        let name = built.file_name().to_string_lossy().into_owned();
        let is_ours = ours.iter().any(|p| {
            name.strip_prefix(p.as_str())
                .is_some_and(|hash| hash.chars().all(|c| c.is_ascii_hexdigit()))
        });
        if is_ours {
            std::fs::remove_dir_all(built.path())
                .map_err(|e| format!("cannot remove {}: {e}", built.path().display()))?;
        }
    }
    Ok(())
}

/// Packages every publishable crate and builds each from its package, in
/// dependency order, as `cargo publish` would, without uploading.
/// `--allow-dirty` so it can check a change before it is committed.
fn publish_check_steps() -> Vec<Step> {
    vec![step(
        "publish-check",
        &["publish", "--workspace", "--dry-run", "--allow-dirty"],
        "a crate does not package or build on its own: a file outside the crate, a \
         path dependency without a version, or missing metadata (see the error above)",
    )]
}

fn run(steps: Vec<Step>) -> ExitCode {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let total = Instant::now();
    for s in steps {
        eprintln!(
            "\n==> xtask: {} ({} {})",
            s.name,
            s.program.as_deref().unwrap_or("cargo"),
            s.args.join(" ")
        );
        let started = Instant::now();
        let mut cmd = Command::new(s.program.as_deref().unwrap_or(&cargo));
        cmd.args(&s.args);
        for (k, v) in &s.env {
            cmd.env(k, v);
        }
        let ok = match cmd.status() {
            Ok(status) => status.success(),
            Err(e) => {
                eprintln!(
                    "could not run {}: {e}",
                    s.program.as_deref().unwrap_or(&cargo)
                );
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
        eprintln!("  {name:<12} {what}");
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
        Some("publish-check") => {
            if let Err(e) = forget_unpacked_packages() {
                eprintln!("xtask: {e}");
                return ExitCode::FAILURE;
            }
            if let Err(e) = forget_built_packages() {
                eprintln!("xtask: {e}");
                return ExitCode::FAILURE;
            }
            publish_check_steps()
        }
        Some("bench-report") => {
            return match bench_report::run() {
                Ok(runs) => {
                    print!("{}", bench_tables::tables(&runs));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("xtask: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        Some("fuzz") => match fuzz_steps(env::args().nth(2).as_deref()) {
            Ok(steps) => steps,
            Err(e) => {
                eprintln!("xtask: {e}");
                return ExitCode::FAILURE;
            }
        },
        Some(other) => {
            eprintln!("xtask: unknown task {other:?}\n");
            usage();
            return ExitCode::FAILURE;
        }
    };
    run(steps)
}
