//! Replays every committed fuzz input through its target: the seeds in
//! `fuzz/seeds/<target>/` and each crash the fuzzer found, kept in
//! `fuzz/regressions/<target>/` once fixed — the store targets of
//! `agent_session_scenarios::fuzz` and the command line's of
//! `agent_session_cli::fuzz`. `cargo xtask fuzz` explores further from the
//! same seeds.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use agent_session_scenarios::fuzz::Target;

/// Every fuzz target, store and command line.
fn targets() -> impl Iterator<Item = &'static (&'static str, Target)> {
    agent_session_scenarios::fuzz::TARGETS
        .iter()
        .chain(agent_session_cli::fuzz::TARGETS)
}

fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz")
        .join(kind)
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != ".gitkeep"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_seed_and_regression_input_passes_its_target() {
    for (name, target) in targets() {
        let seeds = inputs("seeds", name);
        assert!(!seeds.is_empty(), "{name} has seed inputs");
        for path in seeds.iter().chain(&inputs("regressions", name)) {
            eprintln!("{name}: {}", path.display());
            target(&std::fs::read(path).unwrap());
        }
    }
}

#[test]
fn every_target_is_a_cargo_fuzz_binary() {
    let fuzz = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let manifest = std::fs::read_to_string(fuzz.join("Cargo.toml")).unwrap();
    for (name, _) in targets() {
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml registers {name}"
        );
        let file = fuzz.join("fuzz_targets").join(format!("{name}.rs"));
        assert!(file.is_file(), "{}", file.display());
    }
}
