//! The shared state: each owner's `user:` scope and each app's `app:`
//! scope, one hash of JSON values each, outside any session's slot.
//!
//! On a standalone server the write scripts change them with the session;
//! in cluster mode the client writes a plan's shared-scope changes after
//! the script ([`SharedScopes::apply`]).

use std::collections::HashMap;

use session_core::{AppName, SharedDelta, SharedState, StateMap, UserId};

use crate::conn::Conn;
use crate::decode::decode_state;
use crate::error::map_err;
use crate::keys::{KeySpace, OwnerKeys};
use crate::scripts::json;

/// The `user:` and `app:` state hashes of one key prefix.
#[derive(Clone)]
pub(crate) struct SharedScopes {
    conn: Conn,
    keys: KeySpace,
}

impl SharedScopes {
    /// The shared scopes over `conn`, under `keys`.
    pub(crate) fn new(conn: Conn, keys: KeySpace) -> Self {
        Self { conn, keys }
    }

    /// A hash of JSON values (a state scope).
    async fn read_state(&self, key: &str) -> session_core::Result<StateMap> {
        let mut c = self.conn.clone();
        let raw: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(key)
            .query_async(&mut c)
            .await
            .map_err(map_err)?;
        decode_state(raw, key)
    }

    /// The `app:` state of `app` and the `user:` state of `user_id` in it.
    pub(crate) async fn read(
        &self,
        app: &AppName,
        user_id: &UserId,
    ) -> session_core::Result<SharedState> {
        Ok(SharedState {
            app: self.read_state(&self.keys.app_state(app)).await?,
            user: self.read_state(&self.keys.user_state(app, user_id)).await?,
        })
    }

    /// Removes the `user:` state of `user_id` in `app`: whether there was one.
    pub(crate) async fn erase_user(
        &self,
        app: &AppName,
        user_id: &UserId,
    ) -> session_core::Result<bool> {
        let mut c = self.conn.clone();
        let removed: u64 = redis::cmd("DEL")
            .arg(self.keys.user_state(app.as_str(), user_id.as_str()))
            .query_async(&mut c)
            .await
            .map_err(map_err)?;
        Ok(removed > 0)
    }

    /// Cluster mode: writes `shared` into the owner's `user:` and `app:` hashes.
    pub(crate) async fn apply(
        &self,
        owner: &OwnerKeys,
        shared: &SharedDelta,
    ) -> session_core::Result<()> {
        let mut c = self.conn.clone();
        for (hash, map) in [
            (&owner.user_state, &shared.user),
            (&owner.app_state, &shared.app),
        ] {
            if map.is_empty() {
                continue;
            }
            // One hash, one slot: one pipeline.
            let mut pipe = redis::pipe();
            for (k, v) in map {
                if v.is_null() {
                    pipe.cmd("HDEL").arg(hash).arg(k).ignore();
                } else {
                    pipe.cmd("HSET").arg(hash).arg(k).arg(json(v)?).ignore();
                }
            }
            pipe.query_async::<()>(&mut c).await.map_err(map_err)?;
        }
        Ok(())
    }
}
