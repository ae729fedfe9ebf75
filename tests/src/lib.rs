//! Cross-crate scenario tests of agent-session: see the `tests/` folder of this package.
