//! `cargo fuzz run store_url`: see `agent_session_cli::fuzz::store_url`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_session_cli::fuzz::store_url(data));
