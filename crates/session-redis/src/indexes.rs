//! The indexes over sessions, outside any session's slot: every session,
//! each owner's and each resolution key's sessions by activity, and every
//! session with an expiry by expiry.
//!
//! On a standalone server the write scripts maintain them; in cluster mode
//! they live in other slots than the session, and the client writes them
//! after the script ([`Indexes::touch`], [`Indexes::unindex`]).

use chrono::{DateTime, Utc};
use session_core::{AppName, SessionQuery, UserId};

use crate::conn::Conn;
use crate::error::map_err;
use crate::keys::{KeySpace, OwnerKeys};
use crate::scripts::ExpiryIndex;

/// The activity and expiry indexes of one key prefix.
#[derive(Clone)]
pub(crate) struct Indexes {
    conn: Conn,
    keys: KeySpace,
}

impl Indexes {
    /// The indexes over `conn`, under `keys`.
    pub(crate) fn new(conn: Conn, keys: KeySpace) -> Self {
        Self { conn, keys }
    }

    /// The ids in an index, in index order.
    async fn ids_in(&self, index: &str) -> session_core::Result<Vec<String>> {
        let mut c = self.conn.clone();
        redis::cmd("ZRANGE")
            .arg(index)
            .arg(0)
            .arg(-1)
            .query_async(&mut c)
            .await
            .map_err(map_err)
    }

    /// The ids the owner index of `user_id` in `app` holds (a hint: the
    /// sessions themselves say who owns them).
    pub(crate) async fn owned(
        &self,
        app: &str,
        user_id: &str,
    ) -> session_core::Result<Vec<String>> {
        self.ids_in(&self.keys.index_owner(app, user_id)).await
    }

    /// The ids of the smallest index that holds every session `query` can match.
    pub(crate) async fn listed(&self, query: &SessionQuery) -> session_core::Result<Vec<String>> {
        let index = match (&query.app, &query.user_id, &query.key) {
            (Some(a), Some(u), _) => self.keys.index_owner(a, u),
            (Some(a), None, Some(k)) => self.keys.index_key(a, k),
            _ => self.keys.index_all(),
        };
        self.ids_in(&index).await
    }

    /// Removes the owner index of `user_id` in `app` (an erasure).
    pub(crate) async fn drop_owner(
        &self,
        app: &AppName,
        user_id: &UserId,
    ) -> session_core::Result<()> {
        let mut c = self.conn.clone();
        redis::cmd("DEL")
            .arg(self.keys.index_owner(app.as_str(), user_id.as_str()))
            .query_async::<u64>(&mut c)
            .await
            .map_err(map_err)?;
        Ok(())
    }

    /// The ids the expiry index holds as expired at `now`.
    pub(crate) async fn expired(&self, now: DateTime<Utc>) -> session_core::Result<Vec<String>> {
        let mut c = self.conn.clone();
        redis::cmd("ZRANGEBYSCORE")
            .arg(self.keys.index_expiry())
            .arg("-inf")
            .arg(now.timestamp_micros())
            .query_async(&mut c)
            .await
            .map_err(map_err)
    }

    /// Removes `id` from the expiry index.
    pub(crate) async fn unexpire(&self, id: &str) -> session_core::Result<()> {
        let mut c = self.conn.clone();
        redis::cmd("ZREM")
            .arg(self.keys.index_expiry())
            .arg(id)
            .query_async::<()>(&mut c)
            .await
            .map_err(map_err)
    }

    /// Cluster mode: puts session `id` at `activity` in its owner's
    /// activity indexes (`None`: leaves them), and applies `expiry` to the
    /// expiry index.
    pub(crate) async fn touch(
        &self,
        id: &str,
        owner: &OwnerKeys,
        activity: Option<i64>,
        expiry: ExpiryIndex,
    ) -> session_core::Result<()> {
        let mut c = self.conn.clone();
        for index in owner.activity().filter(|_| activity.is_some()) {
            let activity = activity.unwrap_or_default();
            redis::cmd("ZADD")
                .arg(index)
                .arg(-activity)
                .arg(id)
                .query_async::<()>(&mut c)
                .await
                .map_err(map_err)?;
        }
        let cmd = match expiry {
            ExpiryIndex::Keep => return Ok(()),
            ExpiryIndex::Set(at) => redis::cmd("ZADD")
                .arg(&owner.expiry)
                .arg(at)
                .arg(id)
                .clone(),
            ExpiryIndex::Remove => redis::cmd("ZREM").arg(&owner.expiry).arg(id).clone(),
        };
        cmd.query_async::<()>(&mut c).await.map_err(map_err)
    }

    /// Cluster mode: removes session `id` from an owner's indexes.
    pub(crate) async fn unindex(&self, id: &str, owner: &OwnerKeys) -> session_core::Result<()> {
        let mut c = self.conn.clone();
        for index in owner.activity().chain([owner.expiry.as_str()]) {
            redis::cmd("ZREM")
                .arg(index)
                .arg(id)
                .query_async::<()>(&mut c)
                .await
                .map_err(map_err)?;
        }
        Ok(())
    }
}
