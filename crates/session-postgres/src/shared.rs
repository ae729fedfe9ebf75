//! The `app:` and `user:` scopes: deltas merged under row locks, dumps written, scopes read.

use deadpool_postgres::{Client, Transaction};
use session_core::state::{apply_delta, decode_state, encode_state};
use session_core::{SessionError, SharedDelta, SharedState, StateMap};
use tokio_postgres::types::ToSql;

use crate::error::{BACKEND, R};
use crate::quiet::Quiet;
use crate::tables::Tables;

/// One shared-scope row: its table, key columns and key values.
struct Scope<'a> {
    table: &'a str,
    cols: &'static str,
    cond: &'static str,
    marks: &'static str,
    key: Vec<&'a str>,
    what: String,
}

fn app_scope<'a>(t: &'a Tables, app: &'a str) -> Scope<'a> {
    Scope {
        table: &t.app_state,
        cols: "app",
        cond: "app = $1",
        marks: "$1",
        key: vec![app],
        what: format!("app {app} state"),
    }
}

fn user_scope<'a>(t: &'a Tables, app: &'a str, user_id: &'a str) -> Scope<'a> {
    Scope {
        table: &t.user_state,
        cols: "app, user_id",
        cond: "app = $1 AND user_id = $2",
        marks: "$1, $2",
        key: vec![app, user_id],
        what: format!("user {user_id} state in app {app}"),
    }
}

impl Scope<'_> {
    /// The key values as statement parameters, then `extra`.
    fn params<'p>(&'p self, extra: Option<&'p (dyn ToSql + Sync)>) -> Vec<&'p (dyn ToSql + Sync)> {
        let mut params: Vec<&(dyn ToSql + Sync)> = self
            .key
            .iter()
            .map(|k| -> &(dyn ToSql + Sync) { k })
            .collect();
        params.extend(extra);
        params
    }

    /// Applies `delta` to the row under its lock; a missing row starts empty.
    async fn merge(&self, tx: &Transaction<'_>, delta: &StateMap) -> R<()> {
        let n = self.key.len() + 1;
        let select = tx
            .prepare_cached(&format!(
                "SELECT state FROM {} WHERE {} FOR UPDATE",
                self.table, self.cond
            ))
            .await?;
        let update = tx
            .prepare_cached(&format!(
                "UPDATE {} SET state = ${n} WHERE {}",
                self.table, self.cond
            ))
            .await?;
        let insert = tx
            .prepare_cached(&format!(
                "INSERT INTO {} ({}, state) VALUES ({}, ${n}) ON CONFLICT DO NOTHING",
                self.table, self.cols, self.marks
            ))
            .await?;
        // A row another transaction inserts between our read and our insert
        // makes the insert write nothing: read it again, locked this time.
        for _ in 0..2 {
            let row = tx.fetch_opt(&select, &self.params(None)).await?;
            let exists = row.is_some();
            let mut state = match row {
                Some(row) => decode_state(row.try_get(0)?, || self.what.clone())?,
                None => StateMap::new(),
            };
            apply_delta(&mut state, delta);
            let json = encode_state(&state, &self.what)?;
            let params = self.params(Some(&json));
            if exists {
                tx.run(&update, &params).await?;
                return Ok(());
            }
            if tx.run(&insert, &params).await? == 1 {
                return Ok(());
            }
        }
        Err(SessionError::backend(
            BACKEND,
            format!("{} was neither readable nor insertable", self.what),
        )
        .into())
    }

    /// Replaces the row's state (an import).
    async fn replace(&self, tx: &Transaction<'_>, state: &StateMap) -> R<()> {
        let n = self.key.len() + 1;
        let stmt = tx
            .prepare_cached(&format!(
                "INSERT INTO {table} ({cols}, state) VALUES ({marks}, ${n}) \
                 ON CONFLICT ({cols}) DO UPDATE SET state = EXCLUDED.state",
                table = self.table,
                cols = self.cols,
                marks = self.marks,
            ))
            .await?;
        let json = encode_state(state, "shared state")?;
        tx.run(&stmt, &self.params(Some(&json))).await?;
        Ok(())
    }

    async fn read(&self, c: &Client) -> R<StateMap> {
        let stmt = c
            .prepare_cached(&format!(
                "SELECT state FROM {} WHERE {}",
                self.table, self.cond
            ))
            .await?;
        match c.fetch_opt(&stmt, &self.params(None)).await? {
            Some(row) => Ok(decode_state(row.try_get(0)?, || self.what.clone())?),
            None => Ok(StateMap::new()),
        }
    }
}

/// Writes a write's shared-scope changes under row locks (app, then user).
pub(crate) async fn merge(
    tx: &Transaction<'_>,
    t: &Tables,
    app: &str,
    user_id: &str,
    delta: &SharedDelta,
) -> R<()> {
    if !delta.app.is_empty() {
        app_scope(t, app).merge(tx, &delta.app).await?;
    }
    if !delta.user.is_empty() {
        user_scope(t, app, user_id).merge(tx, &delta.user).await?;
    }
    Ok(())
}

/// Writes a dump's shared scopes as they are (the non-empty ones).
pub(crate) async fn replace(
    tx: &Transaction<'_>,
    t: &Tables,
    app: &str,
    user_id: &str,
    shared: &SharedState,
) -> R<()> {
    if !shared.app.is_empty() {
        app_scope(t, app).replace(tx, &shared.app).await?;
    }
    if !shared.user.is_empty() {
        user_scope(t, app, user_id)
            .replace(tx, &shared.user)
            .await?;
    }
    Ok(())
}

/// The shared scopes of one user in one app (empty when never written).
pub(crate) async fn read(c: &Client, t: &Tables, app: &str, user_id: &str) -> R<SharedState> {
    Ok(SharedState {
        app: app_scope(t, app).read(c).await?,
        user: user_scope(t, app, user_id).read(c).await?,
    })
}
