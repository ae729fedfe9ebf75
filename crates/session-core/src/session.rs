//! `Session`: the metadata of one conversation.

use std::fmt;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Result, SessionError};
use crate::ids::{AppName, Key, SessionId, UserId};
pub use crate::ids::{DEFAULT_APP, GROUP_USER};
use crate::state::StateMap;
use crate::validate::Limits;

/// How long a session lives when no expiry is given: 60 days.
pub fn default_ttl() -> Duration {
    Duration::days(60)
}

/// `now` plus [`default_ttl`]; `InvalidInput` when that is past the latest
/// date a timestamp holds (a clock set within 60 days of it), never an overflow.
pub(crate) fn default_expiry(now: DateTime<Utc>) -> Result<DateTime<Utc>> {
    now.checked_add_signed(default_ttl()).ok_or_else(|| {
        SessionError::invalid(
            "expires_at",
            format!(
                "{now} plus the default 60 days is past the latest date a timestamp holds ({}); give an expiry, or none",
                DateTime::<Utc>::MAX_UTC
            ),
        )
    })
}

/// Whether a session is in use or retired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum SessionStatus {
    /// In use: appended to and returned by `resolve`.
    Active,
    /// Ended or reset: still readable and searchable, never resolved again.
    Archived,
}

impl SessionStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Archived => "archived",
        }
    }
}

impl fmt::Display for SessionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl SessionStatus {
    /// Reads a status a store holds: an unknown name is a `Serialization`
    /// error naming `context` (e.g. "session s1 status").
    pub fn stored(value: &str, context: impl FnOnce() -> String) -> Result<Self> {
        value.parse().map_err(|_| {
            SessionError::serialization(context(), format!("unknown status {value:?}"))
        })
    }
}

impl std::str::FromStr for SessionStatus {
    type Err = SessionError;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "active" => Ok(Self::Active),
            "archived" => Ok(Self::Archived),
            other => Err(SessionError::invalid(
                "status",
                format!("{other:?} is not one of active, archived"),
            )),
        }
    }
}

/// The metadata of one conversation. Cheap to clone; the event log is fetched on demand.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Session {
    /// The session id.
    pub id: SessionId,
    /// The app namespace.
    pub app: AppName,
    /// The owning user ([`GROUP_USER`] for group sessions).
    pub user_id: UserId,
    /// The resolution key (`telegram:chat-123:agent-a`), if any.
    pub key: Option<Key>,
    /// Active or archived.
    pub status: SessionStatus,
    /// When the session was created.
    pub created_at: DateTime<Utc>,
    /// Last activity: creation, append, replace, rewind or update.
    pub updated_at: DateTime<Utc>,
    /// When it expires; `None` = never.
    pub expires_at: Option<DateTime<Utc>>,
    /// Free-form metadata.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub metadata: StateMap,
    /// State. From a repository: session scope only. From a service: session,
    /// `user:` and `app:` scopes merged (and `temp:` keys of the call).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub state: StateMap,
    /// Events in the archive.
    pub event_count: u64,
    /// Bytes the archive's events take as stored (their JSON encoding,
    /// sealed when the store is encrypted): what the bytes quota counts.
    #[serde(default)]
    pub event_bytes: u64,
    /// Sum of the token estimates of the events in the context.
    pub context_tokens: u64,
    /// Bumped by exactly one on every successful mutation; never goes back.
    pub version: u64,
}

impl Session {
    /// Whether the session has expired at `now`.
    pub fn is_expired_at(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|t| t <= now)
    }

    /// Whether this session is live at `now` and has the owner (app and
    /// user) of `other`: what the sessions-per-user quota counts.
    pub fn counts_for_owner_of(&self, other: &Session, now: DateTime<Utc>) -> bool {
        self.app == other.app && self.user_id == other.user_id && !self.is_expired_at(now)
    }

    /// Whether this is a group session shared by all users of its app.
    pub fn is_group(&self) -> bool {
        self.user_id.is_group()
    }

    /// Whether the session was sealed by the encryption layer: its
    /// metadata holds a wrapped data key under [`ENCRYPTION_RECORD`]. Its
    /// content, state and metadata values are ciphertext that only the
    /// keyring opens.
    pub fn is_sealed(&self) -> bool {
        self.metadata.contains_key(ENCRYPTION_RECORD)
    }
}

/// The metadata key under which the encryption layer keeps a session's
/// wrapped data key; a session holding it is sealed ([`Session::is_sealed`]).
pub const ENCRYPTION_RECORD: &str = "_encryption";

/// A fully resolved session to store: what [`crate::SessionRepository::create`] takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NewSession {
    /// The id.
    pub id: SessionId,
    /// The app namespace.
    pub app: AppName,
    /// The owner.
    pub user_id: UserId,
    /// The resolution key.
    pub key: Option<Key>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Expiry; `None` = never.
    pub expires_at: Option<DateTime<Utc>>,
    /// Metadata.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub metadata: StateMap,
    /// Initial state, applied like an event's state delta (`user:` and `app:`
    /// keys go to the shared scopes, `temp:` keys are dropped).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub state: StateMap,
}

// The per-owner quota needs a session; `Limits` itself sits below
// sessions (validate.rs), so this one check lives here.
impl Limits {
    /// `QuotaExceeded` when the owner of `session` already holds `live`
    /// sessions (expired ones not counted) and the quota allows no more;
    /// a store calls it with the count it read atomically with the insert.
    pub fn check_user_sessions(&self, session: &Session, live: u64) -> Result<()> {
        match self.max_user_sessions {
            Some(limit) if live >= limit => Err(SessionError::QuotaExceeded {
                id: format!("{}/{}", session.app, session.user_id),
                quota: "sessions per user",
                limit,
                requested: live.saturating_add(1),
            }),
            _ => Ok(()),
        }
    }
}

impl NewSession {
    /// A session for `user_id` in `app` with a generated id, created now,
    /// expiring in 60 days; `InvalidInput` if the app or user id is not valid.
    ///
    /// ```
    /// use session_core::NewSession;
    /// let now = chrono::Utc::now();
    /// let s = NewSession::new("support", "ada@example.com", now).unwrap();
    /// assert_eq!(s.app, "support");
    /// assert!(NewSession::new("support", "a b", now).is_err());
    /// ```
    pub fn new(
        app: impl TryInto<AppName, Error: Into<SessionError>>,
        user_id: impl TryInto<UserId, Error: Into<SessionError>>,
        now: DateTime<Utc>,
    ) -> Result<Self> {
        Ok(Self {
            id: SessionId::generate(),
            app: app.try_into().map_err(Into::into)?,
            user_id: user_id.try_into().map_err(Into::into)?,
            key: None,
            created_at: now,
            expires_at: Some(default_expiry(now)?),
            metadata: StateMap::new(),
            state: StateMap::new(),
        })
    }

    /// Sets the id; `InvalidInput` if it is not valid.
    pub fn with_id(
        mut self,
        id: impl TryInto<SessionId, Error: Into<SessionError>>,
    ) -> Result<Self> {
        self.id = id.try_into().map_err(Into::into)?;
        Ok(self)
    }

    /// Sets the resolution key; `InvalidInput` if it is not valid.
    pub fn with_key(mut self, key: impl TryInto<Key, Error: Into<SessionError>>) -> Result<Self> {
        self.key = Some(key.try_into().map_err(Into::into)?);
        Ok(self)
    }

    /// Sets the expiry.
    pub fn with_expires_at(mut self, at: Option<DateTime<Utc>>) -> Self {
        self.expires_at = at;
        self
    }

    /// Sets the metadata.
    pub fn with_metadata(mut self, metadata: StateMap) -> Self {
        self.metadata = metadata;
        self
    }

    /// Sets the initial state.
    pub fn with_state(mut self, state: StateMap) -> Self {
        self.state = state;
        self
    }

    /// The session as a repository first stores it: version 0, no events,
    /// the session-scope part of the initial state, last activity `now` (or
    /// the creation time, if that is later).
    pub fn to_session(&self, now: DateTime<Utc>) -> Session {
        Session {
            id: self.id.clone(),
            app: self.app.clone(),
            user_id: self.user_id.clone(),
            key: self.key.clone(),
            status: SessionStatus::Active,
            created_at: self.created_at,
            updated_at: now.max(self.created_at),
            expires_at: self.expires_at,
            metadata: self.metadata.clone(),
            state: crate::state::ScopedDelta::split(&self.state).session,
            event_count: 0,
            event_bytes: 0,
            context_tokens: 0,
            version: 0,
        }
    }

    /// Checks the expiry (the identifiers are valid by construction);
    /// the create planner calls this before a store writes.
    pub fn validate(&self, now: DateTime<Utc>) -> Result<()> {
        if let Some(at) = self.expires_at {
            if at <= now {
                return Err(SessionError::invalid(
                    "expires_at",
                    format!("{at} is not in the future"),
                ));
            }
        }
        Ok(())
    }
}

/// Reads a field that is present (possibly `null`) as `Some`: absent stays
/// `None` through `#[serde(default)]`.
fn present_value<'de, D, T>(deserializer: D) -> std::result::Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// A change to a session's metadata, state, status or expiry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionUpdate {
    /// Replaces the metadata.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub metadata: Option<StateMap>,
    /// Replaces the session-scope state.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub state: Option<StateMap>,
    /// Sets the status.
    pub status: Option<SessionStatus>,
    /// Sets the expiry (`Some(None)` = never expires). On the wire: absent
    /// leaves it, `null` clears it, a time sets it.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_value"
    )]
    pub expires_at: Option<Option<DateTime<Utc>>>,
    /// Applies only if the session's version equals this; else `Conflict`.
    pub expected_version: Option<u64>,
}

impl SessionUpdate {
    /// An empty update.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the metadata.
    pub fn metadata(mut self, metadata: StateMap) -> Self {
        self.metadata = Some(metadata);
        self
    }

    /// Replaces the session-scope state.
    pub fn state(mut self, state: StateMap) -> Self {
        self.state = Some(state);
        self
    }

    /// Sets the status.
    pub fn status(mut self, status: SessionStatus) -> Self {
        self.status = Some(status);
        self
    }

    /// Sets the expiry.
    pub fn expires_at(mut self, at: Option<DateTime<Utc>>) -> Self {
        self.expires_at = Some(at);
        self
    }

    /// Requires the session's current version to be `version`.
    pub fn expect_version(mut self, version: u64) -> Self {
        self.expected_version = Some(version);
        self
    }

    /// Whether the update changes what the session holds (metadata or
    /// state), as opposed to only its status or expiry; an ended session
    /// refuses such an update unless the same update reopens it.
    pub fn writes_content(&self) -> bool {
        self.metadata.is_some() || self.state.is_some()
    }

    /// Applies the update to a session held in memory: checks the expected
    /// version (`Conflict`), sets the fields, bumps the version and the activity time.
    pub fn apply_to(self, session: &mut Session, now: DateTime<Utc>) -> Result<()> {
        if let Some(expected) = self.expected_version {
            if session.version != expected {
                return Err(SessionError::Conflict {
                    id: session.id.to_string(),
                    expected,
                    actual: session.version,
                });
            }
        }
        let version = crate::validate::next_version(session.version)?;
        if let Some(m) = self.metadata {
            session.metadata = m;
        }
        if let Some(st) = self.state {
            session.state = st;
        }
        if let Some(status) = self.status {
            session.status = status;
        }
        if let Some(exp) = self.expires_at {
            session.expires_at = exp;
        }
        session.version = version;
        session.updated_at = session.updated_at.max(now);
        Ok(())
    }

    /// Checks the update; repositories call this before writing.
    pub fn validate(&self, now: DateTime<Utc>) -> Result<()> {
        if let Some(Some(at)) = self.expires_at {
            if at <= now {
                return Err(SessionError::invalid(
                    "expires_at",
                    format!("{at} is not in the future"),
                ));
            }
        }
        if let Some(state) = &self.state {
            if let Some(k) = state
                .keys()
                .find(|k| crate::state::StateScope::of(k) != crate::state::StateScope::Session)
            {
                return Err(SessionError::invalid(
                    "state",
                    format!(
                        "key {k:?} is not session scope; shared state changes through event deltas"
                    ),
                ));
            }
        }
        Ok(())
    }
}
