//! Cross-crate scenario tests of agent-session (see the `tests/` folder of
//! this package), and the bodies of its fuzz targets ([`fuzz`]), shared by
//! `cargo fuzz` and the tests that replay every input the fuzzer found.
//!
//! ```
//! // Replays one input through each fuzz target, as `tests/fuzz_inputs.rs` does.
//! for (name, target) in agent_session_scenarios::fuzz::TARGETS {
//!     target(b"\x00{\"id\":\"e\"}");
//!     println!("{name}: ok");
//! }
//! ```

pub mod fuzz;
