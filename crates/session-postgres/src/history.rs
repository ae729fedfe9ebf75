//! The `context_changes` table: one row per context replace, read back as
//! the session's [`ContextLog`] to annotate archive reads. Rows go with
//! their session (`ON DELETE CASCADE`).

use deadpool_postgres::{Client, Transaction};
use session_core::{ContextChange, ContextLog, SessionId};

use crate::error::R;
use crate::quiet::Quiet;
use crate::sql::sql_int;
use crate::tables::Tables;

/// Records context replaces of `session_id`.
pub(crate) async fn record(
    tx: &Transaction<'_>,
    t: &Tables,
    session_id: &SessionId,
    changes: &[ContextChange],
) -> R<()> {
    let stmt = tx
        .prepare_cached(&format!(
            "INSERT INTO {} (session_id, version, body) VALUES ($1, $2, $3)",
            t.context_changes
        ))
        .await?;
    for change in changes {
        let body = change.encode()?;
        tx.run(
            &stmt,
            &[&session_id.as_str(), &sql_int(change.version), &body],
        )
        .await?;
    }
    Ok(())
}

/// The context changes of `session_id`, oldest first; a corrupt row is a
/// `Serialization` error naming the session.
pub(crate) async fn read(c: &Client, t: &Tables, session_id: &SessionId) -> R<ContextLog> {
    let stmt = c
        .prepare_cached(&format!(
            "SELECT body FROM {} WHERE session_id = $1 ORDER BY version",
            t.context_changes
        ))
        .await?;
    let mut changes = Vec::new();
    for row in c.fetch(&stmt, &[&session_id.as_str()]).await? {
        let body: String = row.try_get(0)?;
        changes.push(ContextChange::decode(session_id, &body)?);
    }
    Ok(ContextLog::new(changes))
}
