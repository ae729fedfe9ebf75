//! The heads part ([`Heads`]): the sessions index as a store of head
//! documents. Reads with the compare-and-swap coordinates, conditional
//! writes and deletes, and the listings of sessions (a `list` page, the
//! expired ones, one owner's).

use chrono::{DateTime, Utc};
use elasticsearch::http::Method;
use serde_json::{json, Value};
use session_core::{plan, SearchScope, Session, SessionId, SessionQuery, SharedClock};

use crate::body::{self, micros};
use crate::head::{Head, Loaded};
use crate::index::{Hit, Index, Refresh};
use crate::locks::backoff;

/// The session head documents (`{prefix}-sessions`): one per session, the
/// commit point of every write.
#[derive(Clone)]
pub(crate) struct Heads {
    index: Index,
    refresh: Refresh,
    /// Decides what is expired.
    clock: SharedClock,
}

impl Heads {
    /// The heads of the sessions index `index`, written with `refresh`.
    pub(crate) fn new(index: Index, refresh: Refresh, clock: SharedClock) -> Self {
        Self {
            index,
            refresh,
            clock,
        }
    }

    /// Reads a head with its coordinates; `None` when the session has no document.
    pub(crate) async fn load(&self, id: &str) -> session_core::Result<Option<Loaded>> {
        let reply = self.index.doc(Method::Get, id, &[], None).await?;
        if reply.status == 404 && reply.body.get("found") == Some(&Value::Bool(false)) {
            return Ok(None);
        }
        let body = reply.success(id)?;
        Loaded::from_get(id, &body).map(Some)
    }

    /// A head to read from: present and not expired, else `NotFound` (decided by the planner).
    pub(crate) async fn live(&self, id: &SessionId) -> session_core::Result<Loaded> {
        let found = self.load(id).await?.map(Loaded::with_expiry);
        plan::readable(found, id, self.clock.now())
    }

    /// A head to write over: `Expired` when expired, `NotFound` when absent (decided by the planner).
    pub(crate) async fn writable(&self, id: &SessionId) -> session_core::Result<Loaded> {
        let found = self.load(id).await?.map(Loaded::with_expiry);
        plan::writable(found, id, self.clock.now())
    }

    /// Writes a head: compare-and-swap against `old`, or create when `old` is `None`.
    /// `false` when someone else wrote (or created) first.
    pub(crate) async fn put(
        &self,
        old: Option<&Loaded>,
        head: &Head,
    ) -> session_core::Result<bool> {
        let id = &head.session.id;
        let mut query = vec![self.refresh.query()];
        match old {
            Some(l) => {
                query.push(("if_seq_no", l.seq_no.to_string()));
                query.push(("if_primary_term", l.primary_term.to_string()));
            }
            None => query.push(("op_type", "create".to_owned())),
        }
        let reply = self
            .index
            .doc(Method::Put, id, &query, Some(head.doc()?.to_string()))
            .await?;
        if reply.status == 409 {
            return Ok(false);
        }
        reply.success(id).map(|_| true)
    }

    /// Deletes a head by compare-and-swap if `still` holds for the current
    /// head (re-read after every lost race). The deleted head, or `None` when
    /// there was none or `still` stopped holding.
    pub(crate) async fn delete_if(
        &self,
        id: &str,
        still: impl Fn(&Head) -> bool,
    ) -> session_core::Result<Option<Head>> {
        let mut attempt = 0;
        loop {
            backoff(&mut attempt).await;
            let Some(cur) = self.load(id).await? else {
                return Ok(None);
            };
            if !still(&cur.head) {
                return Ok(None);
            }
            let query = [
                ("if_seq_no", cur.seq_no.to_string()),
                ("if_primary_term", cur.primary_term.to_string()),
                self.refresh.query(),
            ];
            let reply = self.index.doc(Method::Delete, id, &query, None).await?;
            match reply.status {
                409 => {}
                404 => return Ok(None),
                _ => {
                    reply.success(id)?;
                    return Ok(Some(cur.head));
                }
            }
        }
    }

    /// Every session document matching `query`, in id order, with `source` fields.
    async fn all(&self, query: &Value, source: &Value) -> session_core::Result<Vec<Hit>> {
        self.index
            .collect(
                query,
                &json!([{"sid": "asc"}]),
                source,
                0,
                usize::MAX,
                &mut |_| true,
                "",
            )
            .await
    }

    /// The sessions of a `list` page: matching `query`, newest activity
    /// first, from `offset`, one more than a page (to tell whether more follow).
    pub(crate) async fn list(
        &self,
        query: &SessionQuery,
        offset: usize,
    ) -> session_core::Result<Vec<Session>> {
        let q = body::sessions_query(query, micros(self.clock.now()));
        let sort = json!([{"updated_us": "desc"}, {"sid": "asc"}]);
        let want = query.page_size.saturating_add(1);
        let hits = if query.metadata.is_empty() {
            self.index
                .collect(&q, &sort, &json!(["head"]), offset, want, &mut |_| true, "")
                .await?
        } else {
            // Metadata is not indexed here: the heads are read and matched on the client.
            let mut keep = |h: &Hit| {
                Head::from_source(&h.id, &h.source).is_ok_and(|head| query.matches(&head.session))
            };
            let mut hits = self
                .index
                .collect(
                    &q,
                    &sort,
                    &json!(["head"]),
                    0,
                    offset.saturating_add(want),
                    &mut keep,
                    "",
                )
                .await?;
            hits.drain(..offset.min(hits.len()));
            hits
        };
        hits.iter()
            .map(|h| Head::from_source(&h.id, &h.source).map(|head| head.session))
            .collect::<session_core::Result<Vec<_>>>()
    }

    /// The ids of the sessions expired at `now`.
    pub(crate) async fn expired_ids(
        &self,
        now: DateTime<Utc>,
    ) -> session_core::Result<Vec<String>> {
        let q = json!({"range": {"expires_us": {"lte": micros(now)}}});
        let hits = self.all(&q, &json!(["sid"])).await?;
        Ok(hits.into_iter().map(|h| h.id).collect())
    }

    /// Every session document of one owner, expired ones included: their
    /// ids and heads (what `erase_user` removes).
    pub(crate) async fn every_of_owner(
        &self,
        app: &str,
        user_id: &str,
    ) -> session_core::Result<Vec<Head>> {
        let q = json!({"bool": {"filter": [
            {"term": {"app": app}},
            {"term": {"user_id": user_id}}
        ]}});
        let hits = self.all(&q, &json!(["head"])).await?;
        hits.iter()
            .map(|h| Head::from_source(&h.id, &h.source))
            .collect()
    }

    /// Live sessions of one owner (for cross-session search).
    async fn live_of_owner(&self, app: &str, user_id: &str) -> session_core::Result<Vec<Head>> {
        let q = SessionQuery::new().app(app).user(user_id);
        let query = body::sessions_query(&q, micros(self.clock.now()));
        let hits = self.all(&query, &json!(["head"])).await?;
        hits.iter()
            .map(|h| Head::from_source(&h.id, &h.source))
            .collect()
    }

    /// The live heads a search scope covers: one session's, or one owner's.
    pub(crate) async fn in_scope(&self, scope: &SearchScope) -> session_core::Result<Vec<Head>> {
        Ok(match scope {
            SearchScope::Session(id) => {
                vec![self.live(&SessionId::new(id.as_str())?).await?.head]
            }
            SearchScope::User { app, user_id } => self.live_of_owner(app, user_id).await?,
        })
    }
}
