//! Persisting plans: the arguments of each write script, and cluster mode's follow-up writes.
//!
//! Every function here writes what a core plan decided; none decides
//! anything of the contract. Each returns `false` (or [`MOVED`]) when the
//! script found the head moved since it was read, for the caller to read
//! again and re-plan.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use session_core::plan::{AppendPlan, ContextPlan, EventBatch, HeadChange, NewEvent};
use session_core::state::ScopedDelta;
use session_core::{
    Limits, Session, SessionEvent, SessionId, SessionUpdate, SharedDelta, StateMap,
};

use crate::conn::Conn;
use crate::head_fields::HeadFields;
use crate::indexes::Indexes;
use crate::keys::{KeySpace, OwnerKeys};
use crate::scripts::{
    json, Call, EventRecord, ExpiryIndex, Scripts, Touch, HELD, MOVED, OVER_QUOTA,
};
use crate::shared::SharedScopes;

/// Microseconds in a second: the activity indexes are written once per
/// second of a session's activity.
const MICROS_PER_SECOND: i64 = 1_000_000;

fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

/// The physical TTL: a day after the logical expiry, when that is still ahead in real time
/// (reads check the logical expiry; the TTL only reclaims memory). An
/// expiry within a day of the latest date a `DateTime` holds (the latest
/// the API accepts) gets the latest date itself: never an overflow.
fn ttl_at(expires_at: Option<DateTime<Utc>>) -> String {
    match expires_at {
        Some(t) => {
            let at = t
                .checked_add_signed(chrono::Duration::days(1))
                .unwrap_or(DateTime::<Utc>::MAX_UTC);
            if at > Utc::now() {
                at.timestamp_millis().to_string()
            } else {
                String::new()
            }
        }
        None => String::new(),
    }
}

fn expiry_index(expires_at: Option<DateTime<Utc>>) -> ExpiryIndex {
    expires_at.map_or(ExpiryIndex::Remove, |t| ExpiryIndex::Set(micros(t)))
}

/// The session-scope part of an event's delta as stored for rewinds to replay.
fn session_delta(e: &SessionEvent) -> session_core::Result<Option<String>> {
    let Some(delta) = &e.state_delta else {
        return Ok(None);
    };
    let session = ScopedDelta::split(delta).session;
    if session.is_empty() {
        return Ok(None);
    }
    json(&session).map(Some)
}

/// The records of a plan's new events.
fn new_records<'a>(
    batch: &'a EventBatch,
    new: &[NewEvent],
) -> session_core::Result<Vec<EventRecord<'a>>> {
    let mut out = Vec::with_capacity(new.len());
    for n in new {
        let (Some(e), Some(body)) = (batch.events.get(n.index), batch.bodies.get(n.index)) else {
            continue;
        };
        out.push(EventRecord {
            seq: n.seq,
            id: &e.id,
            body,
            invocation: e.invocation_id.as_deref(),
            delta: session_delta(e)?,
        });
    }
    Ok(out)
}

/// The head hash of a whole session. Redis keeps a small hash as one list
/// searched from its start, in the order fields were first written: the
/// fields an append checks and writes come first, the metadata last.
fn session_fields(
    s: &Session,
    last_seq: u64,
    next_ctx_pos: u64,
) -> session_core::Result<Vec<(&'static str, String)>> {
    Ok(vec![
        ("version", s.version.to_string()),
        ("created_at", micros(s.created_at).to_string()),
        ("updated_at", micros(s.updated_at).to_string()),
        (
            "expires_at",
            s.expires_at
                .map(|t| micros(t).to_string())
                .unwrap_or_default(),
        ),
        ("last_seq", last_seq.to_string()),
        ("next_ctx_pos", next_ctx_pos.to_string()),
        ("event_count", s.event_count.to_string()),
        ("context_tokens", s.context_tokens.to_string()),
        ("event_bytes", s.event_bytes.to_string()),
        ("status", s.status.as_str().to_owned()),
        ("app", s.app.to_string()),
        ("user_id", s.user_id.to_string()),
        (
            "key",
            s.key.as_ref().map(ToString::to_string).unwrap_or_default(),
        ),
        ("ttl_at", ttl_at(s.expires_at)),
        ("metadata", json(&s.metadata)?),
    ])
}

/// What an append or a context replace writes, from its plan.
#[derive(Debug)]
pub(crate) struct EventsPlan<'a> {
    /// What the plan changes in the head.
    change: HeadChange<'a>,
    /// `None`: the new events join the end of the context; else the whole new context.
    context: Option<&'a [u64]>,
    /// The replace, recorded in the context's history (`None` for an append).
    replace: Option<&'a ContextPlan>,
    touch: Touch,
}

impl<'a> From<&'a AppendPlan> for EventsPlan<'a> {
    fn from(p: &'a AppendPlan) -> Self {
        Self {
            change: p.head_change(),
            context: None,
            replace: None,
            // Appends refresh the keys' TTL every 64th version only.
            touch: if p.version % 64 == 1 {
                Touch::Refresh
            } else {
                Touch::Keep
            },
        }
    }
}

impl<'a> From<&'a ContextPlan> for EventsPlan<'a> {
    fn from(p: &'a ContextPlan) -> Self {
        Self {
            change: p.head_change(),
            context: Some(&p.context),
            replace: Some(p),
            touch: Touch::Refresh,
        }
    }
}

/// A whole session written at once (a create or an import).
pub(crate) struct WholeSession<'a> {
    /// The session.
    pub(crate) session: &'a Session,
    /// Its last seq.
    pub(crate) last_seq: u64,
    /// Its initial state.
    pub(crate) initial: &'a StateMap,
    /// The owner's shared-scope changes.
    pub(crate) shared: &'a SharedDelta,
    /// Its events.
    pub(crate) events: Vec<EventRecord<'a>>,
    /// Its context as (position, seq).
    pub(crate) context: Vec<(u64, u64)>,
    /// Its context's history, encoded, oldest first.
    pub(crate) changes: Vec<String>,
    /// Whether it is a new session of its owner (counted against the
    /// sessions-per-user quota) rather than one the store holds live.
    pub(crate) new_session: bool,
}

/// The writer: persists core's plans, each with one Lua script under the
/// session's hash tag, and in cluster mode writes the shared scopes and
/// indexes the script could not.
#[derive(Clone)]
pub(crate) struct Writer {
    conn: Conn,
    keys: KeySpace,
    scripts: Arc<Scripts>,
    cluster: bool,
    max_user_sessions: Option<u64>,
    indexes: Indexes,
    shared: SharedScopes,
}

impl Writer {
    /// The writer over `conn`, under `keys`, with the sessions-per-user
    /// quota of `limits`; in `cluster` mode it follows each script up
    /// through `indexes` and `shared`.
    pub(crate) fn new(
        conn: Conn,
        keys: KeySpace,
        scripts: Arc<Scripts>,
        cluster: bool,
        limits: &Limits,
        indexes: Indexes,
        shared: SharedScopes,
    ) -> Self {
        Self {
            conn,
            keys,
            scripts,
            cluster,
            max_user_sessions: limits.max_user_sessions,
            indexes,
            shared,
        }
    }

    /// The owner keys a script writes: none in cluster mode (the client writes them).
    fn script_owner<'k>(&self, keys: &'k OwnerKeys) -> Option<&'k OwnerKeys> {
        (!self.cluster).then_some(keys)
    }

    /// The owner keys of the stored head `read`.
    fn stored_owner(&self, read: &HeadFields) -> OwnerKeys {
        let (app, user, key) = read.owner();
        self.keys.owner(app, user, key)
    }

    /// Persists an append or context plan made from `read`: the head fields
    /// it leaves, or `None` when the head moved or the session already holds
    /// one of the new events (read again and re-plan).
    pub(crate) async fn persist_events(
        &self,
        id: &SessionId,
        read: &HeadFields,
        batch: &EventBatch,
        plan: EventsPlan<'_>,
        now: DateTime<Utc>,
    ) -> session_core::Result<Option<HeadFields>> {
        let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        let next_pos = read.counter(id, "next_ctx_pos", u64::MAX)?;
        let change = &plan.change;
        let (reset, joining): (bool, Vec<u64>) = match plan.context {
            None => (false, change.new.iter().map(|n| n.seq).collect()),
            Some(context) => (true, context.to_vec()),
        };
        let events = read.counter(id, "event_count", u64::MAX)?;
        let bytes = read.event_bytes(id)?.saturating_add(change.added_bytes);
        let tokens = change
            .context_tokens
            .after(read.counter(id, "context_tokens", u64::MAX)?);
        let updated = read.updated_micros(id)?.max(micros(now));
        // In the order `append.lua` reads them.
        let head = [
            ("last_seq", change.last_seq.to_string()),
            (
                "next_ctx_pos",
                next_pos.saturating_add(count(joining.len())).to_string(),
            ),
            (
                "event_count",
                events.saturating_add(change.added_count()).to_string(),
            ),
            ("version", change.version.to_string()),
            ("updated_at", updated.to_string()),
            ("context_tokens", tokens.to_string()),
            ("event_bytes", bytes.to_string()),
        ];
        let context: Vec<(u64, u64)> = (next_pos..).zip(joining).collect();
        let changes = match plan.replace {
            Some(p) => vec![p.change(now).encode()?],
            None => Vec::new(),
        };
        // The activity indexes only hold the sessions (a listing orders
        // them by their heads' `updated_at`): an append within the second
        // of the session's last activity leaves them, unless it is the
        // session's first (which puts back an entry a create cut short on
        // a cluster left out).
        let new_second = updated.div_euclid(MICROS_PER_SECOND)
            != read.updated_micros(id)?.div_euclid(MICROS_PER_SECOND);
        let activity = (new_second || events == 0).then_some(updated);
        let shared = &change.state.shared;
        // The script writes the owner's keys only when there is something
        // to write there (never in cluster mode, where the client does).
        let owner_writes = activity.is_some() || !shared.user.is_empty() || !shared.app.is_empty();
        // The owner's key names, only where something writes them.
        let owner = (owner_writes || self.cluster).then(|| self.stored_owner(read));
        let keys = self.keys.session(id);
        let mut call = Call::new(&self.scripts.append, &keys);
        call.arg(now.timestamp_micros());
        for (_, value) in read.unchanged_since() {
            call.arg(value);
        }
        for (_, value) in &head {
            call.arg(value);
        }
        call.index(activity, ExpiryIndex::Keep)
            .touch(plan.touch)
            .arg(if reset { "1" } else { "0" })
            .events(&new_records(batch, change.new)?)
            .pairs(&context)
            .changes(&changes)
            .kv(&change.state.session)?;
        match owner
            .as_ref()
            .filter(|_| owner_writes)
            .and_then(|o| self.script_owner(o))
        {
            Some(keys) => {
                call.arg(id.as_str())
                    .owner(Some(keys))
                    .kv(&shared.user)?
                    .kv(&shared.app)?;
            }
            None => {
                call.arg("");
            }
        }
        if matches!(call.run::<i64>(&self.conn, "append").await?, MOVED | HELD) {
            return Ok(None);
        }
        if let Some(owner) = &owner {
            self.follow_up(id, owner, shared, activity, ExpiryIndex::Keep)
                .await?;
        }
        Ok(Some(read.after(&head)))
    }

    /// Persists a rewind from `from_seq` made from `read`: `None` when the head moved, else how many events left.
    pub(crate) async fn persist_rewind(
        &self,
        id: &SessionId,
        read: &HeadFields,
        from_seq: u64,
        version: u64,
        state: &StateMap,
        now: DateTime<Utc>,
    ) -> session_core::Result<Option<usize>> {
        let owner = self.stored_owner(read);
        let updated = read.updated_micros(id)?.max(micros(now));
        let keys = self.keys.session(id);
        let mut call = Call::new(&self.scripts.rewind, &keys);
        call.begin(now, read.fingerprint())
            .arg(id.as_str())
            .owner(self.script_owner(&owner))
            .arg(from_seq)
            .kv(state)?
            .fields(&[
                ("version", version.to_string()),
                ("updated_at", updated.to_string()),
            ])
            .index(Some(updated), ExpiryIndex::Keep)
            .touch(Touch::Refresh);
        let removed = call.run::<i64>(&self.conn, "rewind").await?;
        if removed == MOVED {
            return Ok(None);
        }
        self.follow_up(
            id,
            &owner,
            &SharedDelta::default(),
            Some(updated),
            ExpiryIndex::Keep,
        )
        .await?;
        Ok(Some(usize::try_from(removed).unwrap_or(0)))
    }

    /// Persists an archive prune of `seqs` planned from `read`: how many
    /// events went, or `None` when the head moved.
    pub(crate) async fn persist_prune(
        &self,
        id: &SessionId,
        read: &HeadFields,
        seqs: &[u64],
        version: u64,
        now: DateTime<Utc>,
    ) -> session_core::Result<Option<u64>> {
        let keys = self.keys.session(id);
        let mut call = Call::new(&self.scripts.prune, &keys);
        call.begin(now, read.fingerprint())
            .list(seqs)
            .fields(&[("version", version.to_string())]);
        let removed = call.run::<i64>(&self.conn, "prune").await?;
        if removed == MOVED {
            return Ok(None);
        }
        Ok(Some(u64::try_from(removed).unwrap_or(0)))
    }

    /// Persists `update` made from `read`; `updated` is the session after it.
    pub(crate) async fn persist_update(
        &self,
        id: &SessionId,
        read: &HeadFields,
        update: &SessionUpdate,
        updated: &Session,
        now: DateTime<Utc>,
    ) -> session_core::Result<bool> {
        let mut fields: Vec<(&str, String)> = Vec::new();
        if let Some(m) = &update.metadata {
            fields.push(("metadata", json(m)?));
        }
        if let Some(s) = update.status {
            fields.push(("status", s.as_str().to_owned()));
        }
        if update.expires_at.is_some() {
            let at = updated.expires_at;
            fields.push((
                "expires_at",
                at.map(|t| micros(t).to_string()).unwrap_or_default(),
            ));
            fields.push(("ttl_at", ttl_at(at)));
        }
        fields.push(("version", updated.version.to_string()));
        fields.push(("updated_at", micros(updated.updated_at).to_string()));
        let owner = self.stored_owner(read);
        let keys = self.keys.session(id);
        let mut call = Call::new(&self.scripts.update, &keys);
        call.begin(now, read.fingerprint())
            .arg(id.as_str())
            .owner(self.script_owner(&owner))
            .fields(&fields);
        match &update.state {
            Some(state) => call.arg("1").kv(state)?,
            None => call.arg("0").kv(&StateMap::new())?,
        };
        let expiry = expiry_index(updated.expires_at);
        call.index(Some(micros(updated.updated_at)), expiry)
            .touch(Touch::RefreshOrPersist);
        if call.run::<i64>(&self.conn, "update").await? == MOVED {
            return Ok(false);
        }
        self.follow_up(
            id,
            &owner,
            &SharedDelta::default(),
            Some(micros(updated.updated_at)),
            expiry,
        )
        .await?;
        Ok(true)
    }

    /// Writes a whole session over what `read` found (nothing, or a session it replaces).
    pub(crate) async fn persist_session(
        &self,
        read: &HeadFields,
        w: WholeSession<'_>,
        now: DateTime<Utc>,
    ) -> session_core::Result<bool> {
        let s = w.session;
        let id = s.id.as_str();
        let old = read.exists().then(|| self.stored_owner(read));
        let owner = self.keys.owner(&s.app, &s.user_id, s.key.as_deref());
        let next_pos = u64::try_from(w.context.len())
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        let keys = self.keys.session(id);
        let mut call = Call::new(&self.scripts.create, &keys);
        let quota = match self.max_user_sessions {
            Some(limit) if w.new_session => i64::try_from(limit).unwrap_or(i64::MAX),
            _ => -1,
        };
        call.begin(now, read.fingerprint())
            .arg(id)
            .owner(old.as_ref().and_then(|o| self.script_owner(o)))
            .owner(self.script_owner(&owner))
            .arg(quota)
            .arg(micros(now))
            .fields(&session_fields(s, w.last_seq, next_pos)?)
            .kv(&s.state)?;
        if self.cluster {
            call.kv(&StateMap::new())?.kv(&StateMap::new())?;
        } else {
            call.kv(&w.shared.user)?.kv(&w.shared.app)?;
        }
        call.kv(w.initial)?
            .events(&w.events)
            .context(false, &w.context)
            .changes(&w.changes)
            .index(Some(micros(s.updated_at)), expiry_index(s.expires_at))
            .touch(Touch::Refresh);
        match call.run::<i64>(&self.conn, "create").await? {
            MOVED => return Ok(false),
            OVER_QUOTA => {
                let limit = self.max_user_sessions.unwrap_or(0);
                return Err(session_core::SessionError::QuotaExceeded {
                    id: format!("{}/{}", s.app, s.user_id),
                    quota: "sessions per user",
                    limit,
                    requested: limit.saturating_add(1),
                });
            }
            _ => {}
        }
        if self.cluster {
            if let Some(old) = old.filter(|o| o.owner != owner.owner || o.key != owner.key) {
                self.indexes.unindex(id, &old).await?;
            }
        }
        self.follow_up(
            id,
            &owner,
            w.shared,
            Some(micros(s.updated_at)),
            expiry_index(s.expires_at),
        )
        .await?;
        Ok(true)
    }

    /// Deletes the session `read` found: 1, 0 when there is none, or [`MOVED`].
    pub(crate) async fn persist_delete(
        &self,
        id: &SessionId,
        read: &HeadFields,
        now: DateTime<Utc>,
    ) -> session_core::Result<i64> {
        let owner = self.stored_owner(read);
        let keys = self.keys.session(id);
        let mut call = Call::new(&self.scripts.delete, &keys);
        call.begin(now, read.fingerprint())
            .arg(id.as_str())
            .owner(self.script_owner(&owner));
        let out = call.run::<i64>(&self.conn, "delete").await?;
        if out == 1 && self.cluster {
            self.indexes.unindex(id, &owner).await?;
        }
        Ok(out)
    }

    /// Cluster mode: what a standalone script does for the shared scopes
    /// and the indexes, which live in other slots.
    async fn follow_up(
        &self,
        id: &str,
        owner: &OwnerKeys,
        shared: &SharedDelta,
        activity: Option<i64>,
        expiry: ExpiryIndex,
    ) -> session_core::Result<()> {
        if !self.cluster {
            return Ok(());
        }
        self.shared.apply(owner, shared).await?;
        self.indexes.touch(id, owner, activity, expiry).await
    }
}

/// The records of stored events (an import): `bodies[i]` is event `i`'s JSON.
pub(crate) fn stored_records<'a>(
    events: &'a [SessionEvent],
    bodies: &'a [String],
) -> session_core::Result<Vec<EventRecord<'a>>> {
    events
        .iter()
        .zip(bodies)
        .map(|(e, body)| {
            Ok(EventRecord {
                seq: e.seq,
                id: &e.id,
                body,
                invocation: e.invocation_id.as_deref(),
                delta: session_delta(e)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_ttl_of_an_expiry_at_the_latest_date_saturates_instead_of_panicking() {
        let max = DateTime::<Utc>::MAX_UTC;
        let latest = max.timestamp_millis().to_string();
        assert_eq!(ttl_at(Some(max)), latest);
        assert_eq!(ttl_at(Some(max - chrono::Duration::hours(1))), latest);
        let day_before = max - chrono::Duration::days(1);
        assert_eq!(ttl_at(Some(day_before)), latest);
        assert_eq!(ttl_at(None), "");
        assert_eq!(ttl_at(Some(DateTime::<Utc>::MIN_UTC)), "");
    }
}
