//! The schema: migrations under an advisory lock, and tear-down.

use session_core::SessionError;

use crate::error::{map_pg, StoreError, BACKEND};
use crate::repository::PostgresRepository;
use crate::tables::Tables;

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 7;

const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("../migrations/0001_init.sql")),
    (
        2,
        include_str!("../migrations/0002_folded_text_and_metadata.sql"),
    ),
    (3, include_str!("../migrations/0003_context_base.sql")),
    (4, include_str!("../migrations/0004_context_changes.sql")),
    (5, include_str!("../migrations/0005_rank_without_index.sql")),
    (6, include_str!("../migrations/0006_event_bytes.sql")),
    (7, include_str!("../migrations/0007_activity_seconds.sql")),
];

impl PostgresRepository {
    /// Brings the schema up to [`SCHEMA_VERSION`]; idempotent, and safe when
    /// several processes start at once (a transaction-scoped advisory lock serializes them).
    pub async fn migrate(&self) -> session_core::Result<i64> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(map_pg)?;
        // One lock for every schema: the pg_trgm extension is database-wide.
        let lock_key = "agent_session:migrate";
        let run = async {
            tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&lock_key])
                .await?;
            tx.batch_execute(&format!(
                "CREATE SCHEMA IF NOT EXISTS \"{s}\"; \
                 CREATE TABLE IF NOT EXISTS \"{s}\".schema_version (version BIGINT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
                s = self.schema
            ))
            .await?;
            let current: Option<i64> = tx
                .query_one(
                    &format!(
                        "SELECT MAX(version) FROM \"{}\".schema_version",
                        self.schema
                    ),
                    &[],
                )
                .await?
                .try_get(0)?;
            let current = current.unwrap_or(0);
            if current > SCHEMA_VERSION {
                return Err(StoreError::Session(SessionError::backend(
                    BACKEND,
                    format!(
                        "schema {} has version {current}, newer than the {SCHEMA_VERSION} this build knows; upgrade agent-session",
                        self.schema
                    ),
                )));
            }
            for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
                tx.batch_execute(&sql.replace("__SCHEMA__", &format!("\"{}\"", self.schema)))
                    .await?;
                tx.execute(
                    &format!(
                        "INSERT INTO \"{}\".schema_version (version) VALUES ($1)",
                        self.schema
                    ),
                    &[version],
                )
                .await?;
                tracing::info!(backend = BACKEND, schema = %self.schema, version, "applied schema migration");
            }
            if (1..2).contains(&current) {
                self.refold_search_text(&tx).await?;
            }
            Ok(())
        };
        run.await.map_err(SessionError::from)?;
        tx.commit().await.map_err(map_pg)?;
        Ok(SCHEMA_VERSION)
    }

    /// Version 2: the rows whose search text is not ASCII (the only ones the
    /// new fold changes) get it folded again.
    async fn refold_search_text(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
    ) -> Result<(), StoreError> {
        let t = Tables::new(&self.schema);
        let rows = tx
            .query(
                &format!(
                    "SELECT session_id, seq, body FROM {} WHERE search_text ~ '[^\\x01-\\x7f]'",
                    t.events
                ),
                &[],
            )
            .await?;
        let update = format!(
            "UPDATE {} SET search_text = $3 WHERE session_id = $1 AND seq = $2",
            t.events
        );
        for row in &rows {
            let (id, seq, body): (String, i64, String) =
                (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
            // A corrupt row keeps its old text: reads report it on their own.
            if let Ok(e) = crate::events::decode_event(&id, seq, &body) {
                tx.execute(&update, &[&id, &seq, &crate::events::index_text(&e)])
                    .await?;
            }
        }
        tracing::info!(backend = BACKEND, schema = %self.schema, rows = rows.len(), "re-folded search text");
        Ok(())
    }

    /// Drops the schema and everything in it. For tests and tear-down.
    pub async fn drop_schema(&self) -> session_core::Result<()> {
        let client = self.client().await?;
        client
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
                self.schema
            ))
            .await
            .map_err(map_pg)
    }
}
