//! `cargo fuzz run fs_log`: see `agent_session_scenarios::fuzz::fs_log`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_session_scenarios::fuzz::fs_log(data));
