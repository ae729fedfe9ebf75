//! The backend's name, shared by the repository and the error mapping.

/// The backend name a remote store reports for its own failures.
pub const BACKEND: &str = "http";
