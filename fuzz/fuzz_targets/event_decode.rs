//! `cargo fuzz run event_decode`: see `agent_session_scenarios::fuzz::event_decode`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_session_scenarios::fuzz::event_decode(data));
