//! The shared state part ([`SharedScopes`]): the `app:` and `user:` scope
//! documents, each written by compare-and-swap.

use elasticsearch::http::Method;
use serde_json::{json, Value};
use session_core::state::{apply_delta, SharedDelta, SharedState};
use session_core::{SessionError, StateMap};

use crate::index::{Index, Refresh};
use crate::locks::backoff;

/// The shared state documents (`{prefix}-state`): one per app and one per
/// user of an app.
#[derive(Clone)]
pub(crate) struct SharedScopes {
    index: Index,
    refresh: Refresh,
}

impl SharedScopes {
    /// The scope documents of the state index `index`, written with `refresh`.
    pub(crate) fn new(index: Index, refresh: Refresh) -> Self {
        Self { index, refresh }
    }

    /// `u|app|user` or `a|app`, with `|` inside a name escaped as `%7C`
    /// (names may hold `|` but never `%`), so two owners never share a
    /// document; names without `|` keep the id they always had.
    fn doc_id(app: &str, user_id: Option<&str>) -> String {
        let esc = |s: &str| s.replace('|', "%7C");
        match user_id {
            Some(u) => format!("u|{}|{}", esc(app), esc(u)),
            None => format!("a|{}", esc(app)),
        }
    }

    /// The app and user scopes of one owner (empty where there is no document).
    pub(crate) async fn read(&self, app: &str, user_id: &str) -> session_core::Result<SharedState> {
        let app_state = self
            .read_doc(&Self::doc_id(app, None))
            .await?
            .map(|(m, _, _)| m)
            .unwrap_or_default();
        let user_state = self
            .read_doc(&Self::doc_id(app, Some(user_id)))
            .await?
            .map(|(m, _, _)| m)
            .unwrap_or_default();
        Ok(SharedState {
            app: app_state,
            user: user_state,
        })
    }

    /// Reads one scope document with its compare-and-swap coordinates; `None` when absent.
    async fn read_doc(&self, doc_id: &str) -> session_core::Result<Option<(StateMap, i64, i64)>> {
        let reply = self.index.doc(Method::Get, doc_id, &[], None).await?;
        if reply.status == 404 && reply.body.get("found") == Some(&Value::Bool(false)) {
            return Ok(None);
        }
        let body = reply.success("")?;
        let what = || format!("shared state {doc_id}");
        let text = body
            .get("_source")
            .and_then(|s| s.get("json"))
            .and_then(Value::as_str)
            .ok_or_else(|| SessionError::serialization(what(), "no json"))?;
        let map = session_core::state::decode_state(text, what)?;
        let seq_no = body.get("_seq_no").and_then(Value::as_i64).unwrap_or(-1);
        let term = body
            .get("_primary_term")
            .and_then(Value::as_i64)
            .unwrap_or(-1);
        Ok(Some((map, seq_no, term)))
    }

    /// Deletes the user scope document of one owner; `false` when there was none.
    pub(crate) async fn delete_user(&self, app: &str, user_id: &str) -> session_core::Result<bool> {
        let doc_id = Self::doc_id(app, Some(user_id));
        let reply = self
            .index
            .doc(Method::Delete, &doc_id, &[self.refresh.query()], None)
            .await?;
        if reply.status == 404 {
            return Ok(false);
        }
        reply.success("")?;
        Ok(true)
    }

    /// Applies (`replace = false`) or sets (`replace = true`) one shared scope, with a CAS loop.
    async fn write_doc(
        &self,
        doc_id: &str,
        delta: &StateMap,
        replace: bool,
    ) -> session_core::Result<()> {
        let mut attempt = 0;
        loop {
            backoff(&mut attempt).await;
            let current = self.read_doc(doc_id).await?;
            let mut query = vec![self.refresh.query()];
            let mut map = if let Some((map, seq_no, term)) = current {
                query.push(("if_seq_no", seq_no.to_string()));
                query.push(("if_primary_term", term.to_string()));
                map
            } else {
                query.push(("op_type", "create".to_owned()));
                StateMap::new()
            };
            if replace {
                map = delta.clone();
            } else {
                apply_delta(&mut map, delta);
            }
            let json = session_core::state::encode_state(&map, "shared state")?;
            let reply = self
                .index
                .doc(
                    Method::Put,
                    doc_id,
                    &query,
                    Some(json!({ "json": json }).to_string()),
                )
                .await?;
            if reply.status == 409 {
                continue;
            }
            reply.success("")?;
            return Ok(());
        }
    }

    /// Applies the shared parts of a batch's state deltas to the owner's scopes.
    pub(crate) async fn apply(
        &self,
        app: &str,
        user_id: &str,
        d: &SharedDelta,
    ) -> session_core::Result<()> {
        if !d.app.is_empty() {
            self.write_doc(&Self::doc_id(app, None), &d.app, false)
                .await?;
        }
        if !d.user.is_empty() {
            self.write_doc(&Self::doc_id(app, Some(user_id)), &d.user, false)
                .await?;
        }
        Ok(())
    }

    /// Sets the owner's scopes to an imported `shared` (empty scopes are left alone).
    pub(crate) async fn replace(
        &self,
        app: &str,
        user_id: &str,
        shared: &SharedState,
    ) -> session_core::Result<()> {
        if !shared.app.is_empty() {
            self.write_doc(&Self::doc_id(app, None), &shared.app, true)
                .await?;
        }
        if !shared.user.is_empty() {
            self.write_doc(&Self::doc_id(app, Some(user_id)), &shared.user, true)
                .await?;
        }
        Ok(())
    }
}
