//! `cargo fuzz run cli_args`: see `agent_session_cli::fuzz::cli_args`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_session_cli::fuzz::cli_args(data));
