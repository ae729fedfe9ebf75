//! The qualified table names of one schema, and which schema names are
//! safe to quote into SQL.

/// The qualified table names of one schema.
#[derive(Debug, Clone)]
pub(crate) struct Tables {
    pub(crate) sessions: String,
    pub(crate) events: String,
    pub(crate) app_state: String,
    pub(crate) user_state: String,
    pub(crate) context_changes: String,
}

impl Tables {
    pub(crate) fn new(schema: &str) -> Self {
        let q = |t: &str| format!("\"{schema}\".{t}");
        Self {
            sessions: q("sessions"),
            events: q("events"),
            app_state: q("app_state"),
            user_state: q("user_state"),
            context_changes: q("context_changes"),
        }
    }
}

/// Whether `schema` is a name this crate will quote into SQL: 1..=63
/// characters of `[a-z0-9_]`, starting with a letter or `_`.
pub(crate) fn valid_schema_name(schema: &str) -> bool {
    !schema.is_empty()
        && schema.len() <= 63
        && schema.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && schema
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}
