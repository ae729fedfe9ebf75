//! The bodies of the owner-scoped calls (the server's
//! `/v1/apps/{app}/users/{user}/…` routes and the Python package), and the
//! service requests they stand for.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use session_core::{
    CreateSessionRequest, Expiry, ForkAt, InvocationId, Owner, ResetPolicy, ResolveRequest, Result,
    Session, SessionError, StateMap,
};

/// What to create (everything optional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct CreateBody {
    /// The id; generated when absent.
    pub id: Option<String>,
    /// The resolution key.
    pub key: Option<String>,
    /// Time to live in seconds (default 60 days).
    pub ttl_secs: Option<u64>,
    /// Expiry instant, instead of a time to live.
    pub expires_at: Option<DateTime<Utc>>,
    /// Never expires.
    pub never_expires: bool,
    /// Metadata.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub metadata: StateMap,
    /// Initial state (`user:` and `app:` keys go to the shared scopes).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub state: StateMap,
}

/// The expiry a body asks for; `InvalidInput` when it names two.
fn expiry(ttl_secs: Option<u64>, at: Option<DateTime<Utc>>, never: bool) -> Result<Expiry> {
    match (ttl_secs, at, never) {
        (None, None, false) => Ok(Expiry::Default),
        (Some(secs), None, false) => i64::try_from(secs)
            .ok()
            .and_then(chrono::Duration::try_seconds)
            .map(Expiry::Ttl)
            .ok_or_else(|| SessionError::invalid("ttl_secs", "is too large")),
        (None, Some(at), false) => Ok(Expiry::At(at)),
        (None, None, true) => Ok(Expiry::Never),
        _ => Err(SessionError::invalid(
            "expiry",
            "give at most one of ttl_secs, expires_at and never_expires",
        )),
    }
}

impl CreateBody {
    /// The request to create this session for `owner`.
    pub fn into_request(self, owner: &Owner) -> Result<CreateSessionRequest> {
        let mut request = CreateSessionRequest::for_owner(owner);
        if let Some(id) = self.id {
            request = request.id(id);
        }
        if let Some(key) = self.key {
            request = request.key(key);
        }
        request = match expiry(self.ttl_secs, self.expires_at, self.never_expires)? {
            Expiry::Ttl(d) => request.ttl(d),
            Expiry::At(t) => request.expires_at(t),
            Expiry::Never => request.never_expires(),
            Expiry::Default => request,
        };
        for (k, v) in self.metadata {
            request = request.metadata(k, v);
        }
        for (k, v) in self.state {
            request = request.state(k, v);
        }
        request.build()
    }
}

/// The active session of a key, reset by policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct ResolveBody {
    /// The resolution key (`telegram:chat-123:agent-a`).
    pub key: String,
    /// The app's group session for the key, shared by all its users.
    pub group: bool,
    /// Start over after this many idle seconds.
    pub idle_timeout_secs: Option<u64>,
    /// Start over daily at this hour (0–23) ...
    pub daily_reset_hour: Option<u8>,
    /// ... in this IANA time zone (default UTC).
    pub daily_reset_zone: Option<String>,
    /// Time to live in seconds of a session the call creates.
    pub ttl_secs: Option<u64>,
    /// Metadata of a session the call creates.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub metadata: StateMap,
}

impl ResolveBody {
    /// The resolve request for `owner` (or its app's group session), and
    /// the reset policy it names.
    pub fn into_request(self, owner: &Owner) -> Result<(ResolveRequest, ResetPolicy)> {
        let mut request = if self.group {
            ResolveRequest::group(owner.app.as_str(), self.key)
        } else {
            ResolveRequest::for_owner(owner, self.key)
        }
        .expiry(expiry(self.ttl_secs, None, false)?);
        request.metadata = self.metadata;
        let mut policy = ResetPolicy::never();
        if let Some(secs) = self.idle_timeout_secs {
            let idle = i64::try_from(secs)
                .ok()
                .and_then(chrono::Duration::try_seconds)
                .ok_or_else(|| SessionError::invalid("idle_timeout_secs", "is too large"))?;
            policy = policy.idle(idle);
        }
        if let Some(hour) = self.daily_reset_hour {
            let zone = self.daily_reset_zone.as_deref().unwrap_or("UTC");
            policy = policy.daily_in(hour, zone)?;
        }
        Ok((request, policy))
    }
}

/// Start a key over: archive its active session (if any) and create a new one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct ResetBody {
    /// The resolution key (`telegram:chat-123:agent-a`).
    pub key: String,
    /// The app's group session for the key, shared by all its users.
    pub group: bool,
    /// Time to live in seconds of the new session.
    pub ttl_secs: Option<u64>,
    /// Metadata of the new session.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub metadata: StateMap,
}

impl ResetBody {
    /// The request naming the key of `owner` (or its app's group session).
    pub fn into_request(self, owner: &Owner) -> Result<ResolveRequest> {
        let mut request = if self.group {
            ResolveRequest::group(owner.app.as_str(), self.key)
        } else {
            ResolveRequest::for_owner(owner, self.key)
        }
        .expiry(expiry(self.ttl_secs, None, false)?);
        request.metadata = self.metadata;
        Ok(request)
    }
}

/// What `resolve` answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ResolvedBody {
    /// The active session for the key.
    pub session: Session,
    /// Whether this call created it.
    pub is_new: bool,
}

/// Rewind before an invocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RewindBody {
    /// Everything from this invocation's first event on goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub invocation_id: Option<InvocationId>,
    /// Or: the event at this seq and everything after it go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
}

impl RewindBody {
    /// Where the rewind goes back to: `InvalidInput` unless exactly one of
    /// `invocation_id` and `seq` is given.
    pub fn target(self) -> session_core::Result<session_core::RewindTo> {
        match (self.invocation_id, self.seq) {
            (Some(inv), None) => Ok(session_core::RewindTo::Invocation(inv)),
            (None, Some(seq)) => Ok(session_core::RewindTo::Seq(seq)),
            _ => Err(session_core::SessionError::invalid(
                "rewind",
                "give exactly one of invocation_id and seq",
            )),
        }
    }
}

/// Fork a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ForkBody {
    /// Where the fork branches off.
    pub at: ForkAt,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ada() -> Owner {
        Owner::parse("support", "ada").unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_create_body_names_at_most_one_expiry() {
        let body = CreateBody {
            ttl_secs: Some(60),
            never_expires: true,
            ..CreateBody::default()
        };
        let e = body.into_request(&ada()).err();
        assert!(e.is_some_and(|e| e.to_string().contains("at most one")));
        let ok = CreateBody {
            ttl_secs: Some(60),
            ..CreateBody::default()
        };
        assert!(ok.into_request(&ada()).is_ok());
    }

    #[test]
    fn a_reset_body_names_the_key_and_refuses_unknown_fields() {
        let body: ResetBody = serde_json::from_str(r#"{"key": "chat-1", "ttl_secs": 60}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        let request = body.into_request(&ada()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (request.key.as_str(), request.user_id.as_deref()),
            ("chat-1", Some("ada"))
        );
        assert!(matches!(request.expiry, Expiry::Ttl(_)));
        let unknown = serde_json::from_str::<ResetBody>(r#"{"key": "k", "idle_timeout_secs": 5}"#);
        assert!(unknown.is_err(), "a reset takes no policy");
    }

    #[test]
    fn a_resolve_body_builds_its_policy() {
        let body = ResolveBody {
            key: "chat-1".into(),
            idle_timeout_secs: Some(u64::MAX),
            ..ResolveBody::default()
        };
        assert!(body.into_request(&ada()).is_err(), "too large");
        let body = ResolveBody {
            key: "chat-1".into(),
            daily_reset_hour: Some(4),
            daily_reset_zone: Some("Europe/Paris".into()),
            ..ResolveBody::default()
        };
        let (request, policy) = body.into_request(&ada()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(request.key, "chat-1");
        assert!(policy.daily_reset.is_some());
    }
}
