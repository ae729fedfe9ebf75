//! The `app_state` and `user_state` tables: the shared scopes.

use rusqlite::{params, Connection, OptionalExtension, Transaction};
use session_core::state::{apply_delta, decode_state, encode_state};
use session_core::{SharedDelta, SharedState, StateMap};

use crate::error::{Result, SqlResult};

const UPSERT_APP: &str = "INSERT INTO app_state (app, state) VALUES (?1, ?2) \
     ON CONFLICT (app) DO UPDATE SET state = excluded.state";
const UPSERT_USER: &str = "INSERT INTO user_state (app, user_id, state) VALUES (?1, ?2, ?3) \
     ON CONFLICT (app, user_id) DO UPDATE SET state = excluded.state";

fn app_what(app: &str) -> String {
    format!("app {app} state")
}

fn user_what(app: &str, user_id: &str) -> String {
    format!("user {user_id} state in app {app}")
}

fn read_app(conn: &Connection, app: &str) -> Result<Option<StateMap>> {
    let text: Option<String> = conn
        .prepare_cached("SELECT state FROM app_state WHERE app = ?1")
        .sql()?
        .query_row([app], |r| r.get(0))
        .optional()
        .sql()?;
    text.map(|s| decode_state(&s, || app_what(app))).transpose()
}

fn read_user(conn: &Connection, app: &str, user_id: &str) -> Result<Option<StateMap>> {
    let text: Option<String> = conn
        .prepare_cached("SELECT state FROM user_state WHERE app = ?1 AND user_id = ?2")
        .sql()?
        .query_row([app, user_id], |r| r.get(0))
        .optional()
        .sql()?;
    text.map(|s| decode_state(&s, || user_what(app, user_id)))
        .transpose()
}

fn write_app(tx: &Transaction<'_>, app: &str, state: &StateMap) -> Result<()> {
    tx.prepare_cached(UPSERT_APP)
        .sql()?
        .execute(params![app, encode_state(state, "app state")?])
        .sql()?;
    Ok(())
}

fn write_user(tx: &Transaction<'_>, app: &str, user_id: &str, state: &StateMap) -> Result<()> {
    tx.prepare_cached(UPSERT_USER)
        .sql()?
        .execute(params![app, user_id, encode_state(state, "user state")?])
        .sql()?;
    Ok(())
}

/// Applies a planned shared delta (`null` removes a key) to the scopes of
/// `user_id` in `app`; an empty side leaves its scope alone.
pub(crate) fn apply(
    tx: &Transaction<'_>,
    app: &str,
    user_id: &str,
    delta: &SharedDelta,
) -> Result<()> {
    if !delta.app.is_empty() {
        let mut state = read_app(tx, app)?.unwrap_or_default();
        apply_delta(&mut state, &delta.app);
        write_app(tx, app, &state)?;
    }
    if !delta.user.is_empty() {
        let mut state = read_user(tx, app, user_id)?.unwrap_or_default();
        apply_delta(&mut state, &delta.user);
        write_user(tx, app, user_id, &state)?;
    }
    Ok(())
}

/// Sets the scopes to exactly `shared` (for imports); an empty map leaves its scope alone.
pub(crate) fn replace(
    tx: &Transaction<'_>,
    app: &str,
    user_id: &str,
    shared: &SharedState,
) -> Result<()> {
    if !shared.app.is_empty() {
        write_app(tx, app, &shared.app)?;
    }
    if !shared.user.is_empty() {
        write_user(tx, app, user_id, &shared.user)?;
    }
    Ok(())
}

/// The shared scopes of `user_id` in `app` (empty where nothing is stored).
pub(crate) fn read(conn: &Connection, app: &str, user_id: &str) -> Result<SharedState> {
    Ok(SharedState {
        app: read_app(conn, app)?.unwrap_or_default(),
        user: read_user(conn, app, user_id)?.unwrap_or_default(),
    })
}
