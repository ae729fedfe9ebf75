//! What callers hand the service: create and resolve requests, expiry and reset policies.

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use crate::clock::truncate_micros;
use crate::error::{Result, SessionError};
use crate::owner::Owner;
use crate::session::{default_expiry, Session, DEFAULT_APP, GROUP_USER};
use crate::state::StateMap;
use crate::validate::{validate_id, validate_name};

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
            Self::Default => default_expiry(now).map(Some),
            Self::Ttl(d) if d <= Duration::zero() => {
                Err(SessionError::invalid("ttl", "must be positive"))
            }
            Self::Ttl(d) => now
                .checked_add_signed(d)
                .map(|t| Some(truncate_micros(t)))
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

    /// Starts a request for `owner` (its user, in its app).
    pub fn for_owner(owner: &Owner) -> CreateSessionRequestBuilder {
        Self::builder(owner.user.as_str()).app(owner.app.as_str())
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

/// A daily reset: sessions last active before the latest `hour:00` in `zone` start over.
///
/// The zone is a real time zone (IANA name, e.g. `Europe/Berlin`), so a 04:00
/// reset stays at 04:00 local time across daylight-saving changes. On a day
/// whose `hour:00` falls in a spring-forward gap, the reset happens at the
/// first instant after the gap; on a day where it occurs twice (fall back), at
/// the first of the two.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DailyReset {
    /// Hour of day, 0..=23, in the zone's local time.
    pub hour: u8,
    /// The time zone whose local clock the hour is read on.
    pub zone: jiff::tz::TimeZone,
}

impl DailyReset {
    /// The most recent instant at or before `now` when the zone's clock showed `hour:00`.
    pub fn latest_before(&self, now: DateTime<Utc>) -> Result<DateTime<Utc>> {
        let out_of_range = |e: jiff::Error| {
            SessionError::invalid("daily reset", format!("{now} is out of range: {e}"))
        };
        let now_ts = jiff::Timestamp::new(
            now.timestamp(),
            now.timestamp_subsec_nanos().try_into().unwrap_or(0),
        )
        .map_err(out_of_range)?;
        let today = now_ts.to_zoned(self.zone.clone()).date();
        let hour = i8::try_from(self.hour)
            .map_err(|_| SessionError::invalid("daily reset hour", "must be 0..=23"))?;
        let at = |date: jiff::civil::Date| {
            date.at(hour, 0, 0, 0)
                .to_zoned(self.zone.clone())
                .map(|z| z.timestamp())
                .map_err(out_of_range)
        };
        let mut boundary = at(today)?;
        if boundary > now_ts {
            boundary = at(today.yesterday().map_err(out_of_range)?)?;
        }
        DateTime::from_timestamp(
            boundary.as_second(),
            boundary.subsec_nanosecond().try_into().unwrap_or(0),
        )
        .ok_or_else(|| SessionError::invalid("daily reset", format!("{boundary} is out of range")))
    }
}

/// When `resolve` starts a session over instead of returning the existing one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
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

    /// Resets daily at `hour:00` local time in `zone` (`jiff::tz::TimeZone::UTC`,
    /// `TimeZone::get("Europe/Berlin")`, a fixed offset, …).
    pub fn daily_at(mut self, hour: u8, zone: jiff::tz::TimeZone) -> Self {
        self.daily_reset = Some(DailyReset { hour, zone });
        self
    }

    /// Resets daily at `hour:00` local time in the IANA zone `zone_name`
    /// (e.g. `America/New_York`); an unknown name is `InvalidInput`.
    pub fn daily_in(self, hour: u8, zone_name: &str) -> Result<Self> {
        let zone = jiff::tz::TimeZone::get(zone_name).map_err(|e| {
            SessionError::invalid(
                "time zone",
                format!("{zone_name:?} is not a known IANA time zone: {e}"),
            )
        })?;
        Ok(self.daily_at(hour, zone))
    }

    pub(super) fn validate(&self) -> Result<()> {
        if self.daily_reset.as_ref().is_some_and(|d| d.hour > 23) {
            return Err(SessionError::invalid("daily reset hour", "must be 0..=23"));
        }
        if self.idle_timeout.is_some_and(|d| d <= Duration::zero()) {
            return Err(SessionError::invalid("idle timeout", "must be positive"));
        }
        Ok(())
    }

    /// Whether a session last active at `last_active` must be reset at `now`.
    pub fn should_reset(&self, last_active: DateTime<Utc>, now: DateTime<Utc>) -> Result<bool> {
        if self.idle_timeout.is_some_and(|t| now - last_active > t) {
            return Ok(true);
        }
        match &self.daily_reset {
            Some(d) => Ok(last_active < d.latest_before(now)?),
            None => Ok(false),
        }
    }
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

    /// The session of `owner` under `key`.
    pub fn for_owner(owner: &Owner, key: impl Into<String>) -> Self {
        Self::new(owner.app.as_str(), owner.user.as_str(), key)
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

/// The result of `rewind`.
#[derive(Debug, Clone, PartialEq)]
pub struct Rewound {
    /// The session after the rewind (shared state merged).
    pub session: Session,
    /// Events removed from the archive.
    pub removed: usize,
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

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
    }

    #[test]
    fn expiries_at_the_latest_date_resolve_or_are_invalid_input_never_overflow() {
        let max = DateTime::<Utc>::MAX_UTC;
        let now = truncate_micros(max - Duration::days(1));
        let latest = truncate_micros(max);
        let ttl = Expiry::Ttl(max.signed_duration_since(now)).resolve(now);
        assert_eq!(ttl.ok(), Some(Some(latest)), "a TTL to the latest date");
        for late in [Expiry::Default, Expiry::Ttl(Duration::days(2))] {
            let err = late.resolve(now).map_err(|e| e.kind());
            assert_eq!(err, Err(crate::ErrorKind::InvalidInput), "{late:?}");
        }
        let err = crate::NewSession::new("app", "alice", now).map_err(|e| e.kind());
        assert_eq!(err.err(), Some(crate::ErrorKind::InvalidInput));
        assert_eq!(
            Expiry::At(max).resolve(now).ok(),
            Some(Some(latest)),
            "the latest date itself, to the microsecond"
        );
    }

    fn boundary(hour: u8, zone: &str, now: DateTime<Utc>) -> DateTime<Utc> {
        let policy = ResetPolicy::never().daily_in(hour, zone).unwrap();
        policy.daily_reset.unwrap().latest_before(now).unwrap()
    }

    #[test]
    fn daily_boundary_respects_a_fixed_offset() {
        // 2026-03-10 05:00 UTC is 07:00 at UTC+2; a 06:00 local reset happened at 04:00 UTC.
        let zone = jiff::tz::TimeZone::fixed(jiff::tz::offset(2));
        let policy = ResetPolicy::never().daily_at(6, zone);
        let d = policy.daily_reset.clone().unwrap();
        let now = utc(2026, 3, 10, 5, 0);
        assert_eq!(d.latest_before(now).unwrap(), utc(2026, 3, 10, 4, 0));
        // At 03:00 UTC (05:00 local) the latest reset is yesterday's.
        assert_eq!(
            d.latest_before(utc(2026, 3, 10, 3, 0)).unwrap(),
            utc(2026, 3, 9, 4, 0)
        );
        assert!(policy.should_reset(utc(2026, 3, 10, 3, 59), now).unwrap());
        assert!(!policy.should_reset(utc(2026, 3, 10, 4, 1), now).unwrap());
    }

    #[test]
    fn a_04_00_reset_stays_at_04_00_local_across_daylight_saving_in_berlin() {
        // Berlin: CET (UTC+1) until 2026-03-29 02:00, CEST (UTC+2) until 2026-10-25 03:00.
        let z = "Europe/Berlin";
        assert_eq!(
            boundary(4, z, utc(2026, 3, 28, 12, 0)),
            utc(2026, 3, 28, 3, 0)
        );
        assert_eq!(
            boundary(4, z, utc(2026, 3, 29, 12, 0)),
            utc(2026, 3, 29, 2, 0)
        );
        assert_eq!(
            boundary(4, z, utc(2026, 3, 30, 12, 0)),
            utc(2026, 3, 30, 2, 0)
        );
        // Just before 04:00 CEST on the transition day the latest reset is the day before's, in CET.
        assert_eq!(
            boundary(4, z, utc(2026, 3, 29, 1, 59)),
            utc(2026, 3, 28, 3, 0)
        );
        assert_eq!(
            boundary(4, z, utc(2026, 10, 25, 12, 0)),
            utc(2026, 10, 25, 3, 0)
        );
        assert_eq!(
            boundary(4, z, utc(2026, 10, 24, 12, 0)),
            utc(2026, 10, 24, 2, 0)
        );
        // A fixed UTC+1 offset drifts to 05:00 CEST in summer: the reason zones exist.
        let fixed =
            ResetPolicy::never().daily_at(4, jiff::tz::TimeZone::fixed(jiff::tz::offset(1)));
        assert_eq!(
            fixed
                .daily_reset
                .unwrap()
                .latest_before(utc(2026, 3, 30, 12, 0))
                .unwrap(),
            utc(2026, 3, 30, 3, 0)
        );
    }

    #[test]
    fn a_04_00_reset_stays_at_04_00_local_across_daylight_saving_in_new_york() {
        // New York: EST (UTC-5) until 2026-03-08 02:00, EDT (UTC-4) until 2026-11-01 02:00.
        let z = "America/New_York";
        assert_eq!(
            boundary(4, z, utc(2026, 3, 7, 20, 0)),
            utc(2026, 3, 7, 9, 0)
        );
        assert_eq!(
            boundary(4, z, utc(2026, 3, 8, 20, 0)),
            utc(2026, 3, 8, 8, 0)
        );
        assert_eq!(
            boundary(4, z, utc(2026, 10, 31, 20, 0)),
            utc(2026, 10, 31, 8, 0)
        );
        assert_eq!(
            boundary(4, z, utc(2026, 11, 1, 20, 0)),
            utc(2026, 11, 1, 9, 0)
        );
    }

    #[test]
    fn a_reset_hour_inside_a_gap_or_a_fold_happens_once_that_day() {
        // 02:00 does not exist in New York on 2026-03-08: the reset is at 03:00 EDT (07:00 UTC).
        let z = "America/New_York";
        assert_eq!(
            boundary(2, z, utc(2026, 3, 8, 20, 0)),
            utc(2026, 3, 8, 7, 0)
        );
        // 01:00 happens twice on 2026-11-01: the reset is at the first, 01:00 EDT (05:00 UTC),
        // and the second 01:00 (06:00 UTC) does not reset again.
        assert_eq!(
            boundary(1, z, utc(2026, 11, 1, 5, 30)),
            utc(2026, 11, 1, 5, 0)
        );
        assert_eq!(
            boundary(1, z, utc(2026, 11, 1, 6, 30)),
            utc(2026, 11, 1, 5, 0)
        );
    }

    #[test]
    fn an_unknown_zone_is_invalid_input() {
        let err = ResetPolicy::never()
            .daily_in(4, "Mars/Olympus_Mons")
            .unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("Mars/Olympus_Mons"), "{err}");
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
        assert!(ResetPolicy::never()
            .daily_at(24, jiff::tz::TimeZone::UTC)
            .validate()
            .is_err());
        assert!(ResetPolicy::never()
            .idle(Duration::zero())
            .validate()
            .is_err());
    }
}
