//! Forward-only schema migrations, kept in `migrations/*.sql`.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};
use session_core::SessionError;

use crate::error::{map_err, BACKEND};

/// Every migration, in order: (version, SQL).
pub(crate) const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("../migrations/0001_init.sql")),
    (2, include_str!("../migrations/0002_folded_index.sql")),
    (3, include_str!("../migrations/0003_context_base.sql")),
    (4, include_str!("../migrations/0004_context_changes.sql")),
    (5, include_str!("../migrations/0005_event_bytes.sql")),
    (6, include_str!("../migrations/0006_activity_seconds.sql")),
    (7, include_str!("../migrations/0007_events_rowid.sql")),
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 7;

/// Brings the schema up to [`SCHEMA_VERSION`]; idempotent, and safe when
/// several processes open the same file at once (`BEGIN IMMEDIATE` serializes them).
pub(crate) fn migrate(conn: &mut Connection) -> session_core::Result<i64> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(map_err)?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL, applied_at TEXT NOT NULL)",
    )
    .map_err(map_err)?;
    let current: i64 = tx
        .query_row("SELECT MAX(version) FROM schema_version", [], |r| {
            r.get::<_, Option<i64>>(0)
        })
        .optional()
        .map_err(map_err)?
        .flatten()
        .unwrap_or(0);
    if current > SCHEMA_VERSION {
        return Err(SessionError::backend(
            BACKEND,
            format!(
                "the database has schema version {current}, newer than the {SCHEMA_VERSION} this build knows; upgrade agent-session"
            ),
        ));
    }
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        tx.execute_batch(sql).map_err(map_err)?;
        tx.execute(
            "INSERT INTO schema_version (version, applied_at) VALUES (?1, datetime('now'))",
            [version],
        )
        .map_err(map_err)?;
        tracing::info!(backend = BACKEND, version, "applied schema migration");
    }
    if (1..2).contains(&current) {
        // Version 2 emptied the trigram index: fill it with folded text again.
        crate::search::index_pending(&tx, 1)?;
    }
    crate::search::configure_index(&tx)?;
    tx.commit().map_err(map_err)?;
    Ok(SCHEMA_VERSION)
}
