//! `cargo fuzz run export_import`: see `agent_session_scenarios::fuzz::export_import`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_session_scenarios::fuzz::export_import(data));
