//! A session's head fields as a write reads them: what it plans from and
//! what its script checks are unchanged.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use session_core::plan::Head;
use session_core::{stored_counter, SessionId, SessionStatus, MAX_SEQ, MAX_VERSION};

use crate::error::corrupt;

/// The head fields a write reads. The first [`FINGERPRINT`] of them are
/// what a write script checks are unchanged before it writes.
pub(crate) const HEAD_FIELDS: [&str; 13] = [
    "version",
    "last_seq",
    "expires_at",
    "app",
    "user_id",
    "key",
    "updated_at",
    "next_ctx_pos",
    "event_count",
    "context_tokens",
    "status",
    "event_bytes",
    "created_at",
];

/// What an append checks is unchanged: every write moves the version, and
/// a session deleted and created again under the same id has its own
/// creation time (and last activity), so these three hold exactly when
/// nothing wrote the head since it was read or remembered. (A session
/// imported again from a dump of that very head is that head.) Three
/// fields where all of them were checked: the script's check took a
/// quarter of an append's server time.
const UNCHANGED_SINCE: [&str; 3] = ["version", "created_at", "updated_at"];

/// How many of [`HEAD_FIELDS`] make the fingerprint: the version and last
/// seq the plan builds on, the expiry it was checked against and the owner
/// whose keys it names.
const FINGERPRINT: usize = 6;

/// A session's head fields as stored (`None`: absent), read before a write.
#[derive(Debug, Clone)]
pub(crate) struct HeadFields {
    values: Vec<Option<String>>,
}

impl HeadFields {
    /// The head fields as read, in the order of [`HEAD_FIELDS`].
    pub(crate) fn from_values(values: Vec<Option<String>>) -> Self {
        Self { values }
    }

    /// The head fields out of a whole head hash.
    pub(crate) fn from_map(map: &HashMap<String, String>) -> Self {
        Self {
            values: HEAD_FIELDS.iter().map(|f| map.get(*f).cloned()).collect(),
        }
    }

    /// Whether a session is stored (expired or not).
    pub(crate) fn exists(&self) -> bool {
        self.values.iter().any(Option::is_some)
    }

    /// A field as stored (`None`: absent or not a head field).
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        let i = HEAD_FIELDS.iter().position(|f| *f == name)?;
        self.values.get(i)?.as_deref()
    }

    /// What a write script checks is unchanged: name/value pairs, `""` for absent.
    pub(crate) fn fingerprint(&self) -> impl ExactSizeIterator<Item = (&str, &str)> {
        HEAD_FIELDS[..FINGERPRINT]
            .iter()
            .zip(&self.values)
            .map(|(name, value)| (*name, value.as_deref().unwrap_or_default()))
    }

    /// What an append checks is unchanged ([`UNCHANGED_SINCE`]), so a
    /// plan from a remembered head (`heads`) holds exactly when nothing
    /// wrote the head since: name/value pairs, `""` for absent.
    pub(crate) fn unchanged_since(&self) -> impl ExactSizeIterator<Item = (&str, &str)> {
        UNCHANGED_SINCE
            .iter()
            .map(|name| (*name, self.get(name).unwrap_or_default()))
    }

    /// The stored owner: app, user and resolution key, as stored (they name keys).
    pub(crate) fn owner(&self) -> (&str, &str, Option<&str>) {
        (
            self.get("app").unwrap_or_default(),
            self.get("user_id").unwrap_or_default(),
            self.get("key").filter(|k| !k.is_empty()),
        )
    }

    fn int(&self, id: &str, name: &str) -> session_core::Result<i64> {
        self.get(name)
            .unwrap_or_default()
            .parse::<i64>()
            .map_err(|e| corrupt(id, name, e))
    }

    /// A counter in `0..=max`.
    pub(crate) fn counter(&self, id: &str, name: &str, max: u64) -> session_core::Result<u64> {
        stored_counter(self.int(id, name)?, max, || format!("session {id} {name}"))
    }

    /// The bytes the archive's events take as stored (0 for a session
    /// written before they were counted).
    pub(crate) fn event_bytes(&self, id: &str) -> session_core::Result<u64> {
        match self.get("event_bytes") {
            None | Some("") => Ok(0),
            Some(_) => self.counter(id, "event_bytes", u64::MAX),
        }
    }

    /// The last activity, in microseconds.
    pub(crate) fn updated_micros(&self, id: &str) -> session_core::Result<i64> {
        self.int(id, "updated_at")
    }

    /// The expiry.
    pub(crate) fn expires_at(&self, id: &str) -> session_core::Result<Option<DateTime<Utc>>> {
        match self.get("expires_at") {
            None | Some("") => Ok(None),
            Some(_) => time(id, "expires_at", self.int(id, "expires_at")?).map(Some),
        }
    }

    /// The fields after a write set `changes` (name/value pairs) on them.
    pub(crate) fn after(&self, changes: &[(&str, String)]) -> Self {
        let mut next = self.clone();
        for (name, value) in changes {
            if let Some(i) = HEAD_FIELDS.iter().position(|f| f == name) {
                if let Some(slot) = next.values.get_mut(i) {
                    *slot = Some(value.clone());
                }
            }
        }
        next
    }

    /// The head a plan builds on. The status is not in the fingerprint:
    /// every status change bumps the version, which is.
    pub(crate) fn head(&self, id: &SessionId) -> session_core::Result<Head> {
        let status = self.get("status").unwrap_or_default();
        Ok(Head::new(
            id.clone(),
            self.counter(id, "last_seq", MAX_SEQ)?,
            self.counter(id, "version", MAX_VERSION)?,
            SessionStatus::stored(status, || format!("session {id} status"))?,
        )
        .with_event_count(self.counter(id, "event_count", MAX_SEQ)?)
        .with_event_bytes(self.event_bytes(id)?))
    }
}

/// A stored time in microseconds, as a time.
pub(crate) fn time(id: &str, field: &str, micros: i64) -> session_core::Result<DateTime<Utc>> {
    DateTime::from_timestamp_micros(micros).ok_or_else(|| corrupt(id, field, "out of range"))
}
