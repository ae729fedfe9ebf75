//! What callers hand the service: the owner, create and resolve requests, expiry and reset policies.

use chrono::{DateTime, Duration, FixedOffset, NaiveTime, TimeZone, Utc};
use serde_json::Value;

use crate::clock::truncate_micros;
use crate::error::{Result, SessionError};
use crate::session::{default_ttl, Session, DEFAULT_APP, GROUP_USER};
use crate::state::StateMap;
use crate::validate::{validate_id, validate_name};

/// Who is calling: every service call is scoped to one (app, user).
///
/// A call naming a session of another app or user gets `NotFound`, exactly
/// as if the id did not exist. Group sessions (resolved without a user)
/// are open to every user of their app.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Owner {
    /// The app namespace.
    pub app: String,
    /// The user.
    pub user_id: String,
}

impl Owner {
    /// The owner `user_id` in `app`.
    pub fn new(app: impl Into<String>, user_id: impl Into<String>) -> Self {
        Self {
            app: app.into(),
            user_id: user_id.into(),
        }
    }

    /// `user_id` in the default app.
    pub fn user(user_id: impl Into<String>) -> Self {
        Self::new(DEFAULT_APP, user_id)
    }

    /// Whether this owner may see `session`.
    pub fn can_access(&self, session: &Session) -> bool {
        session.app == self.app && (session.user_id == self.user_id || session.is_group())
    }

    pub(super) fn validate(&self) -> Result<()> {
        validate_name("app", &self.app)?;
        validate_name("user id", &self.user_id)
    }
}

/// When a new session expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Expiry {
    /// 60 days after creation.
    #[default]
    Default,
    /// This long after creation.
    Ttl(Duration),
    /// At this instant (must be in the future).
    At(DateTime<Utc>),
    /// Never.
    Never,
}

impl Expiry {
    pub(super) fn resolve(self, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>> {
        match self {
            Self::Default => Ok(Some(now + default_ttl())),
            Self::Ttl(d) if d <= Duration::zero() => {
                Err(SessionError::invalid("ttl", "must be positive"))
            }
            Self::Ttl(d) => now
                .checked_add_signed(d)
                .map(Some)
                .ok_or_else(|| SessionError::invalid("ttl", "is too large")),
            Self::At(t) if t <= now => Err(SessionError::invalid(
                "expires_at",
                format!("{t} is not in the future"),
            )),
            Self::At(t) => Ok(Some(truncate_micros(t))),
            Self::Never => Ok(None),
        }
    }
}

/// What to create: built with [`CreateSessionRequest::builder`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CreateSessionRequest {
    /// The id; a UUID v7 is generated when `None`.
    pub id: Option<String>,
    /// The app namespace (default `default`).
    pub app: String,
    /// The owner.
    pub user_id: String,
    /// The resolution key.
    pub key: Option<String>,
    /// The expiry.
    pub expiry: Expiry,
    /// Metadata.
    pub metadata: StateMap,
    /// Initial state (`user:` and `app:` keys go to the shared scopes).
    pub state: StateMap,
}

impl CreateSessionRequest {
    /// Starts a request for `user_id`.
    ///
    /// ```
    /// use session_core::CreateSessionRequest;
    /// let req = CreateSessionRequest::builder("alice")
    ///     .id("my-session-id")
    ///     .ttl(chrono::Duration::hours(2))
    ///     .metadata("agentType", "research-assistant")
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(req.app, "default");
    /// ```
    pub fn builder(user_id: impl Into<String>) -> CreateSessionRequestBuilder {
        CreateSessionRequestBuilder {
            req: CreateSessionRequest {
                id: None,
                app: DEFAULT_APP.to_owned(),
                user_id: user_id.into(),
                key: None,
                expiry: Expiry::Default,
                metadata: StateMap::new(),
                state: StateMap::new(),
            },
        }
    }

    pub(super) fn validate(&self) -> Result<()> {
        if let Some(id) = &self.id {
            validate_id("session id", id)?;
        }
        validate_name("app", &self.app)?;
        if self.user_id != GROUP_USER {
            validate_name("user id", &self.user_id)?;
        }
        if let Some(k) = &self.key {
            validate_name("key", k)?;
        }
        Ok(())
    }
}

/// Builder of [`CreateSessionRequest`].
#[derive(Debug, Clone)]
pub struct CreateSessionRequestBuilder {
    pub(super) req: CreateSessionRequest,
}

impl CreateSessionRequestBuilder {
    /// Sets the id (default: a generated UUID v7).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.req.id = Some(id.into());
        self
    }

    /// Sets the app namespace.
    pub fn app(mut self, app: impl Into<String>) -> Self {
        self.req.app = app.into();
        self
    }

    /// Sets the resolution key.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.req.key = Some(key.into());
        self
    }

    /// Expires this long after creation.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.req.expiry = Expiry::Ttl(ttl);
        self
    }

    /// Expires at `t`; `build` rejects a past value.
    pub fn expires_at(mut self, t: DateTime<Utc>) -> Self {
        self.req.expiry = Expiry::At(t);
        self
    }

    /// Never expires.
    pub fn never_expires(mut self) -> Self {
        self.req.expiry = Expiry::Never;
        self
    }

    /// Adds a metadata entry.
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.req.metadata.insert(key.into(), value.into());
        self
    }

    /// Adds an initial state entry.
    pub fn state(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.req.state.insert(key.into(), value.into());
        self
    }

    /// Validates ids and expiry and returns the request.
    pub fn build(self) -> Result<CreateSessionRequest> {
        self.req.validate()?;
        match self.req.expiry {
            Expiry::At(t) if t <= Utc::now() => Err(SessionError::invalid(
                "expires_at",
                format!("{t} is in the past"),
            )),
            Expiry::Ttl(d) if d <= Duration::zero() => {
                Err(SessionError::invalid("ttl", "must be positive"))
            }
            _ => Ok(self.req),
        }
    }
}

/// A daily reset: sessions last active before today's `hour` (at `utc_offset_minutes`) start over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DailyReset {
    /// Hour of day, 0..=23, in the offset's local time.
    pub hour: u8,
    /// The offset from UTC in minutes (e.g. 120 for UTC+2).
    pub utc_offset_minutes: i32,
}

/// When `resolve` starts a session over instead of returning the existing one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResetPolicy {
    /// Reset when the last activity is older than this.
    pub idle_timeout: Option<Duration>,
    /// Reset when the last activity is before the latest daily reset time.
    pub daily_reset: Option<DailyReset>,
}

impl ResetPolicy {
    /// Never resets automatically.
    pub fn never() -> Self {
        Self::default()
    }

    /// Resets after `timeout` without activity.
    pub fn idle(mut self, timeout: Duration) -> Self {
        self.idle_timeout = Some(timeout);
        self
    }

    /// Resets daily at `hour` local time at `utc_offset_minutes`.
    pub fn daily_at(mut self, hour: u8, utc_offset_minutes: i32) -> Self {
        self.daily_reset = Some(DailyReset {
            hour,
            utc_offset_minutes,
        });
        self
    }

    pub(super) fn validate(&self) -> Result<()> {
        if let Some(d) = self.daily_reset {
            if d.hour > 23 {
                return Err(SessionError::invalid("daily reset hour", "must be 0..=23"));
            }
            if d.utc_offset_minutes.abs() >= 24 * 60 {
                return Err(SessionError::invalid("utc offset", "must be within ±23:59"));
            }
        }
        if self.idle_timeout.is_some_and(|d| d <= Duration::zero()) {
            return Err(SessionError::invalid("idle timeout", "must be positive"));
        }
        Ok(())
    }

    /// Whether a session last active at `last_active` must be reset at `now`.
    pub fn should_reset(&self, last_active: DateTime<Utc>, now: DateTime<Utc>) -> bool {
        if self.idle_timeout.is_some_and(|t| now - last_active > t) {
            return true;
        }
        if let Some(d) = self.daily_reset {
            if let Some(boundary) = latest_daily_boundary(d, now) {
                return last_active < boundary;
            }
        }
        false
    }
}

/// The most recent instant at or before `now` when the local clock showed `hour:00`.
fn latest_daily_boundary(d: DailyReset, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let offset = FixedOffset::east_opt(d.utc_offset_minutes * 60)?;
    let local_now = now.with_timezone(&offset);
    let time = NaiveTime::from_hms_opt(u32::from(d.hour), 0, 0)?;
    let today = local_now.date_naive().and_time(time);
    let mut boundary = offset.from_local_datetime(&today).single()?;
    if boundary > local_now {
        boundary -= Duration::days(1);
    }
    Some(boundary.with_timezone(&Utc))
}

/// What `resolve` and `reset` look up: the active session for (app, user, key).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ResolveRequest {
    /// The app.
    pub app: String,
    /// The user; `None` = a group conversation shared by everyone in the app.
    pub user_id: Option<String>,
    /// The resolution key (`telegram:chat-123:agent-a`).
    pub key: String,
    /// Expiry of a session created by the call.
    pub expiry: Expiry,
    /// Metadata of a session created by the call.
    pub metadata: StateMap,
}

impl ResolveRequest {
    /// The session of `user_id` under `key` in `app`.
    pub fn new(app: impl Into<String>, user_id: impl Into<String>, key: impl Into<String>) -> Self {
        Self {
            app: app.into(),
            user_id: Some(user_id.into()),
            key: key.into(),
            expiry: Expiry::Default,
            metadata: StateMap::new(),
        }
    }

    /// The group session under `key` in `app`, shared by all its users.
    pub fn group(app: impl Into<String>, key: impl Into<String>) -> Self {
        Self {
            user_id: None,
            ..Self::new(app, "", key)
        }
    }

    /// Sets the expiry of a newly created session.
    pub fn expiry(mut self, expiry: Expiry) -> Self {
        self.expiry = expiry;
        self
    }

    pub(super) fn owner_id(&self) -> &str {
        self.user_id.as_deref().unwrap_or(GROUP_USER)
    }
}

/// The result of `resolve`.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The active session for the key.
    pub session: Session,
    /// Whether it was created by this call.
    pub is_new: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn daily_boundary_respects_offset() {
        // 2026-03-10 05:00 UTC is 07:00 at UTC+2; a 06:00 local reset happened at 04:00 UTC.
        let now = Utc.with_ymd_and_hms(2026, 3, 10, 5, 0, 0).unwrap();
        let d = DailyReset {
            hour: 6,
            utc_offset_minutes: 120,
        };
        assert_eq!(
            latest_daily_boundary(d, now),
            Some(Utc.with_ymd_and_hms(2026, 3, 10, 4, 0, 0).unwrap())
        );
        // At 03:00 UTC (05:00 local) the latest reset is yesterday's.
        let early = Utc.with_ymd_and_hms(2026, 3, 10, 3, 0, 0).unwrap();
        assert_eq!(
            latest_daily_boundary(d, early),
            Some(Utc.with_ymd_and_hms(2026, 3, 9, 4, 0, 0).unwrap())
        );
        let policy = ResetPolicy::never().daily_at(6, 120);
        assert!(policy.should_reset(Utc.with_ymd_and_hms(2026, 3, 10, 3, 59, 0).unwrap(), now));
        assert!(!policy.should_reset(Utc.with_ymd_and_hms(2026, 3, 10, 4, 1, 0).unwrap(), now));
    }

    #[test]
    fn builder_rejects_past_expiry() {
        let past = Utc::now() - Duration::seconds(1);
        let err = CreateSessionRequest::builder("alice")
            .expires_at(past)
            .build()
            .unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
        assert!(CreateSessionRequest::builder("alice")
            .ttl(Duration::zero())
            .build()
            .is_err());
        assert!(CreateSessionRequest::builder("a b").build().is_err());
    }

    #[test]
    fn policy_validation() {
        assert!(ResetPolicy::never().daily_at(24, 0).validate().is_err());
        assert!(ResetPolicy::never()
            .daily_at(23, 24 * 60)
            .validate()
            .is_err());
        assert!(ResetPolicy::never()
            .idle(Duration::zero())
            .validate()
            .is_err());
    }
}
