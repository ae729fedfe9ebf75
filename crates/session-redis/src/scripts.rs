//! The Lua scripts (`lua/`), loaded once, and the argument lists they read in order.
//!
//! Every write script starts the same way: the client's clock, then the
//! fingerprint (the head fields the client read and planned from). When
//! the head no longer holds them, or the session has expired, the script
//! writes nothing and answers [`MOVED`]; the client reads again and
//! re-plans. Otherwise it writes exactly what the client planned.

use chrono::{DateTime, Utc};
use redis::{Cmd, ErrorKind, FromRedisValue, Script, ServerErrorKind, ToRedisArgs, Value};
use session_core::{SessionError, StateMap};

use crate::conn::Conn;
use crate::error::{bad_reply, map_err};
use crate::keys::{OwnerKeys, SessionKeys};

const TTL: &str = include_str!("../lua/ttl.lua");
const COMMON: &str = include_str!("../lua/common.lua");

/// A write script: `ttl.lua`, `common.lua`, then `body`.
fn script(body: &str) -> Script {
    Script::new(&format!("{TTL}\n{COMMON}\n{body}"))
}

/// What a write script answers when the session's head moved since the client read it.
pub(crate) const MOVED: i64 = -1;

/// What the append script answers when the session already holds the id of
/// an event the plan took for new (a plan made from a remembered head).
pub(crate) const HELD: i64 = -2;

/// What the create script answers when the owner already holds the
/// sessions-per-user quota of live sessions.
pub(crate) const OVER_QUOTA: i64 = -3;

/// The scripts, loaded once.
pub(crate) struct Scripts {
    /// The head fields and held event ids a write depends on.
    pub(crate) read: Script,
    /// An append or a context replace.
    pub(crate) append: Script,
    /// A rewind.
    pub(crate) rewind: Script,
    /// An archive prune.
    pub(crate) prune: Script,
    /// A session update.
    pub(crate) update: Script,
    /// A create or an import (a whole session written at once).
    pub(crate) create: Script,
    /// A delete.
    pub(crate) delete: Script,
    /// An extension of a session's search index (standalone, see `lua/index.lua`).
    pub(crate) index: Script,
    /// The search index following the session's expiry (standalone).
    pub(crate) index_expiry: Script,
}

impl Scripts {
    /// The scripts of `lua/`, each write script with `ttl.lua` and, but for the append's, `common.lua` in front.
    pub(crate) fn load() -> Self {
        Self {
            read: script(include_str!("../lua/read.lua")),
            // The hottest script stands alone: `common.lua`'s definitions
            // alone cost more than a command on every call.
            append: Script::new(&format!("{TTL}\n{}", include_str!("../lua/append.lua"))),
            rewind: script(include_str!("../lua/rewind.lua")),
            prune: script(include_str!("../lua/prune.lua")),
            update: script(include_str!("../lua/update.lua")),
            create: script(include_str!("../lua/create.lua")),
            delete: script(include_str!("../lua/delete.lua")),
            index: Script::new(include_str!("../lua/index.lua")),
            index_expiry: Script::new(include_str!("../lua/index_expiry.lua")),
        }
    }
}

/// How a write changes the expiry index.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ExpiryIndex {
    /// Left as it is.
    Keep,
    /// The session expires at this time (microseconds).
    Set(i64),
    /// The session never expires.
    Remove,
}

/// How a write changes the keys' physical TTL.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Touch {
    /// Left as it is.
    Keep,
    /// Every key expires at the session's TTL target, if it has one.
    Refresh,
    /// As `Refresh`, and every key is made persistent when there is no target.
    RefreshOrPersist,
}

/// One event a write script stores.
#[derive(Debug)]
pub(crate) struct EventRecord<'a> {
    /// Its seq.
    pub(crate) seq: u64,
    /// Its id.
    pub(crate) id: &'a str,
    /// Its JSON (without seq and session id).
    pub(crate) body: &'a str,
    /// Its invocation.
    pub(crate) invocation: Option<&'a str>,
    /// Its session-scope state delta as JSON, for rewinds to replay.
    pub(crate) delta: Option<String>,
}

/// One script call: the session's keys, then arguments in the order the
/// script reads them, written straight into one `EVALSHA` command (one
/// buffer, where an invocation of redis-rs keeps a buffer per argument and
/// copies them all into the command when it runs).
pub(crate) struct Call<'a> {
    script: &'a Script,
    cmd: Cmd,
}

/// A value as JSON text for a script argument.
pub(crate) fn json<T: serde::Serialize + ?Sized>(v: &T) -> session_core::Result<String> {
    serde_json::to_string(v).map_err(|e| SessionError::serialization("redis argument", e))
}

impl<'a> Call<'a> {
    /// A call of `script` on the session with `keys`.
    pub(crate) fn new(script: &'a Script, keys: &SessionKeys) -> Self {
        let keys = keys.all();
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.get_hash()).arg(keys.len());
        for k in keys {
            cmd.arg(k);
        }
        Self { script, cmd }
    }

    /// One argument.
    pub(crate) fn arg(&mut self, v: impl ToRedisArgs) -> &mut Self {
        self.cmd.arg(v);
        self
    }

    /// A count, then the items.
    pub(crate) fn list<T: ToRedisArgs>(&mut self, items: &[T]) -> &mut Self {
        self.cmd.arg(items.len());
        for i in items {
            self.cmd.arg(i);
        }
        self
    }

    /// The header of every write: the clock (microseconds) and the
    /// fingerprint (name/value pairs the head must still hold; `""` = absent).
    pub(crate) fn begin<'f>(
        &mut self,
        now: DateTime<Utc>,
        fingerprint: impl ExactSizeIterator<Item = (&'f str, &'f str)>,
    ) -> &mut Self {
        self.cmd.arg(now.timestamp_micros()).arg(fingerprint.len());
        for (name, value) in fingerprint {
            self.cmd.arg(name).arg(value);
        }
        self
    }

    /// An owner's index and shared-state keys; `None` (cluster mode, where
    /// the client writes them) makes the script skip them.
    pub(crate) fn owner(&mut self, keys: Option<&OwnerKeys>) -> &mut Self {
        match keys {
            Some(k) => self
                .cmd
                .arg(&k.all)
                .arg(&k.owner)
                .arg(k.key.as_deref().unwrap_or_default())
                .arg(&k.expiry)
                .arg(&k.user_state)
                .arg(&k.app_state),
            None => self.cmd.arg(&["", "", "", "", "", ""][..]),
        };
        self
    }

    /// A state map as a count and key/value pairs (values JSON; `null` → `""` = delete).
    pub(crate) fn kv(&mut self, map: &StateMap) -> session_core::Result<&mut Self> {
        self.cmd.arg(map.len());
        for (k, v) in map {
            let value = if v.is_null() { String::new() } else { json(v)? };
            self.cmd.arg(k).arg(value);
        }
        Ok(self)
    }

    /// Head fields to set: a count and name/value pairs.
    pub(crate) fn fields(&mut self, fields: &[(&str, String)]) -> &mut Self {
        self.cmd.arg(fields.len());
        for (k, v) in fields {
            self.cmd.arg(*k).arg(v);
        }
        self
    }

    /// Events to store: a count, then each event's seq, id, body, invocation and delta.
    pub(crate) fn events(&mut self, events: &[EventRecord<'_>]) -> &mut Self {
        self.cmd.arg(events.len());
        for e in events {
            self.cmd
                .arg(e.seq)
                .arg(e.id)
                .arg(e.body)
                .arg(e.invocation.unwrap_or_default())
                .arg(e.delta.as_deref().unwrap_or_default());
        }
        self
    }

    /// Context entries as (position, seq); `reset` replaces the whole context.
    pub(crate) fn context(&mut self, reset: bool, entries: &[(u64, u64)]) -> &mut Self {
        self.cmd.arg(if reset { "1" } else { "0" });
        self.pairs(entries)
    }

    /// A count of (position, seq) context entries, then each entry.
    pub(crate) fn pairs(&mut self, entries: &[(u64, u64)]) -> &mut Self {
        self.cmd.arg(entries.len());
        for (pos, seq) in entries {
            self.cmd.arg(*pos).arg(*seq);
        }
        self
    }

    /// Context changes to add to the context's history (JSON, oldest first).
    pub(crate) fn changes(&mut self, changes: &[String]) -> &mut Self {
        self.cmd.arg(changes.len());
        for c in changes {
            self.cmd.arg(c.as_str());
        }
        self
    }

    /// The activity score (last activity, microseconds; `None` leaves the
    /// activity indexes as they are) and the expiry index change.
    pub(crate) fn index(&mut self, activity: Option<i64>, expiry: ExpiryIndex) -> &mut Self {
        match activity {
            Some(at) => self.cmd.arg(-at),
            None => self.cmd.arg("-"),
        };
        match expiry {
            ExpiryIndex::Keep => self.cmd.arg("-"),
            ExpiryIndex::Remove => self.cmd.arg(""),
            ExpiryIndex::Set(at) => self.cmd.arg(at),
        };
        self
    }

    /// The TTL change.
    pub(crate) fn touch(&mut self, touch: Touch) -> &mut Self {
        self.cmd.arg(match touch {
            Touch::Keep => "0",
            Touch::Refresh => "1",
            Touch::RefreshOrPersist => "2",
        });
        self
    }

    /// Runs the script, loading it first where the server does not hold
    /// it (a restart, a `SCRIPT FLUSH`, a node new to the cluster); `what`
    /// names it in a reply error.
    pub(crate) async fn run<T: FromRedisValue>(
        &self,
        conn: &Conn,
        what: &str,
    ) -> session_core::Result<T> {
        let mut c = conn.clone();
        let value: Value = match self.cmd.query_async(&mut c).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                self.script.load_async(&mut c).await.map_err(map_err)?;
                self.cmd.query_async(&mut c).await.map_err(map_err)?
            }
            other => other.map_err(map_err)?,
        };
        T::from_redis_value(value).map_err(|e| bad_reply(what, e))
    }
}
