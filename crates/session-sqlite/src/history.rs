//! The `context_changes` table: one row per context replace, read back as
//! the session's [`ContextLog`] to annotate archive reads.

use rusqlite::{params, Connection, Transaction};
use session_core::{ContextChange, ContextLog};

use crate::error::{Result, SqlResult};
use crate::sql::sql_int;

/// Records one context replace of `session_id`.
pub(crate) fn record(tx: &Transaction<'_>, session_id: &str, change: &ContextChange) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO context_changes (session_id, version, body) VALUES (?1, ?2, ?3)",
    )
    .sql()?
    .execute(params![
        session_id,
        sql_int(change.version),
        change.encode()?
    ])
    .sql()?;
    Ok(())
}

/// The context changes of `session_id`, oldest first; a corrupt row is a
/// `Serialization` error naming the session.
pub(crate) fn read(conn: &Connection, session_id: &str) -> Result<ContextLog> {
    let mut stmt = conn
        .prepare_cached("SELECT body FROM context_changes WHERE session_id = ?1 ORDER BY version")
        .sql()?;
    let bodies = stmt
        .query_map([session_id], |r| r.get::<_, String>(0))
        .sql()?;
    let mut changes = Vec::new();
    for body in bodies {
        changes.push(ContextChange::decode(session_id, &body.sql()?)?);
    }
    Ok(ContextLog::new(changes))
}

/// Removes the context changes of `session_id` (with its session).
pub(crate) fn purge(tx: &Transaction<'_>, session_id: &str) -> Result<()> {
    tx.prepare_cached("DELETE FROM context_changes WHERE session_id = ?1")
        .sql()?
        .execute([session_id])
        .sql()?;
    Ok(())
}
