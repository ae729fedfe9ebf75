//! The bodies and query strings of the HTTP API that the core types do not
//! already cover.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use session_core::{
    Capabilities, EventFilter, EventView, ForkAt, Result, Role, SessionError, SessionId,
    SessionQuery, SessionStatus, SyntheticFilter, DEFAULT_PAGE_SIZE,
};

/// What a store supports, as `GET /v1/capabilities` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[allow(clippy::struct_excessive_bools)] // independent yes/no facts about a backend
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CapabilitiesBody {
    /// The backend's short name behind the server.
    pub backend: String,
    /// Ranked search is supported.
    pub ranked_search: bool,
    /// Expiry is enforced by the engine itself.
    pub native_ttl: bool,
    /// Data survives the process.
    pub durable: bool,
    /// Several processes may share the store.
    pub multi_process: bool,
}

impl From<Capabilities> for CapabilitiesBody {
    fn from(c: Capabilities) -> Self {
        Self {
            backend: c.backend.to_owned(),
            ranked_search: c.ranked_search,
            native_ttl: c.native_ttl,
            durable: c.durable,
            multi_process: c.multi_process,
        }
    }
}

impl CapabilitiesBody {
    /// The capabilities a remote store over this server declares, named `backend`.
    pub fn declared_as(&self, backend: &'static str) -> Capabilities {
        let mut c = Capabilities::basic(backend);
        c.ranked_search = self.ranked_search;
        c.native_ttl = self.native_ttl;
        c.durable = self.durable;
        c.multi_process = self.multi_process;
        c
    }
}

/// `POST /v1/sessions/{id}/fork`: fork the session into `id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ForkRequest {
    /// Where the fork branches off.
    pub at: ForkAt,
    /// The new session's id.
    pub id: SessionId,
    /// The fork's creation time.
    pub now: DateTime<Utc>,
}

/// `POST /v1/sessions/{id}/prune`: remove these archived seqs (the
/// expected version travels as `If-Match`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PruneRequest {
    /// The seqs to remove.
    pub seqs: Vec<u64>,
}

/// `POST /v1/purge`: delete the sessions expired at `now`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PurgeRequest {
    /// The time expiry is judged at.
    pub now: DateTime<Utc>,
}

/// How many sessions a purge deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Purged {
    /// Sessions deleted.
    pub purged: u64,
}

/// Whether a delete found the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Deleted {
    /// `false` if there was none.
    pub deleted: bool,
}

/// A session's version (`GET /v1/sessions/{id}/version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VersionBody {
    /// The version.
    pub version: u64,
}

/// What an import did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ImportBody {
    /// Imported or unchanged.
    pub outcome: session_core::ImportOutcome,
}

/// `GET /v1/sessions`: a [`SessionQuery`] as a query string; `metadata`
/// is a JSON object of the entries every session must carry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct SessionListParams {
    /// Only this app.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    /// Only this user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// Only this resolution key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Only this status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<SessionStatus>,
    /// Last activity at or after (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_from: Option<DateTime<Utc>>,
    /// Last activity strictly before (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_to: Option<DateTime<Utc>>,
    /// Metadata entries, as a JSON object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<String>,
    /// Zero-based page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<usize>,
    /// Page size (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<usize>,
}

impl SessionListParams {
    /// The query string of `query`.
    pub fn from_query(query: &SessionQuery) -> Self {
        let metadata = (!query.metadata.is_empty()).then(|| {
            serde_json::Value::Object(query.metadata.iter().cloned().collect()).to_string()
        });
        Self {
            app: query.app.clone(),
            user_id: query.user_id.clone(),
            key: query.key.clone(),
            status: query.status,
            active_from: query.active_from,
            active_to: query.active_to,
            metadata,
            page: Some(query.page),
            page_size: Some(query.page_size),
        }
    }

    /// The query this string describes; `InvalidInput` if `metadata` is
    /// not a JSON object.
    pub fn into_query(self) -> Result<SessionQuery> {
        let metadata = match self.metadata.as_deref() {
            None | Some("") => Vec::new(),
            Some(text) => match serde_json::from_str::<serde_json::Value>(text) {
                Ok(serde_json::Value::Object(map)) => map.into_iter().collect(),
                Ok(_) => {
                    return Err(SessionError::invalid(
                        "metadata",
                        "must be a JSON object of the entries to match",
                    ))
                }
                Err(e) => {
                    return Err(SessionError::invalid_because(
                        "metadata",
                        "must be a JSON object of the entries to match",
                        e,
                    ))
                }
            },
        };
        let mut query = SessionQuery::new();
        query.app = self.app;
        query.user_id = self.user_id;
        query.key = self.key;
        query.status = self.status;
        query.active_from = self.active_from;
        query.active_to = self.active_to;
        query.metadata = metadata;
        query.page = self.page.unwrap_or(0);
        query.page_size = self.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
        Ok(query)
    }
}

/// `GET /v1/sessions/{id}/events`: an [`EventFilter`] as a query string;
/// `roles` is a comma-separated list (`user,tool`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct EventParams {
    /// `context` (default) or `archive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<EventView>,
    /// The viewing agent's branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Events at or after this time (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<DateTime<Utc>>,
    /// Events strictly before this time (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<DateTime<Utc>>,
    /// Only the most recent N matching events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_n: Option<usize>,
    /// Only these roles, comma-separated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<String>,
    /// `include` (default), `exclude` or `only` summaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synthetic: Option<SyntheticFilter>,
    /// Case-insensitive literal substring; a blank one (empty or only whitespace) is refused with 400, as a blank search is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyword: Option<String>,
    /// Only events of this invocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invocation_id: Option<String>,
    /// Keyset cursor: only events after this seq in the view's order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
    /// Zero-based page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<usize>,
    /// Page size (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<usize>,
}

impl EventParams {
    /// The query string of `filter`.
    pub fn from_filter(filter: &EventFilter) -> Self {
        let roles = (!filter.roles.is_empty()).then(|| {
            filter
                .roles
                .iter()
                .map(|r| r.as_str())
                .collect::<Vec<_>>()
                .join(",")
        });
        Self {
            view: Some(filter.view),
            branch: filter.branch.clone(),
            from: filter.from,
            to: filter.to,
            last_n: filter.last_n,
            roles,
            synthetic: Some(filter.synthetic),
            keyword: filter.keyword.clone(),
            invocation_id: filter.invocation_id.clone(),
            after: filter.after,
            page: Some(filter.page),
            page_size: Some(filter.page_size),
        }
    }

    /// The filter this string describes; `InvalidInput` for an unknown role.
    pub fn into_filter(self) -> Result<EventFilter> {
        let mut roles = Vec::new();
        for name in self.roles.iter().flat_map(|r| r.split(',')) {
            let name = name.trim();
            if name.is_empty() {
                continue;
            }
            let role = serde_json::from_value::<Role>(serde_json::Value::String(name.to_owned()))
                .map_err(|e| {
                SessionError::invalid_because(
                    "roles",
                    format!("{name:?} is not a role (system, user, assistant, tool)"),
                    e,
                )
            })?;
            roles.push(role);
        }
        let mut filter = EventFilter::default();
        filter.view = self.view.unwrap_or_default();
        filter.branch = self.branch;
        filter.from = self.from;
        filter.to = self.to;
        filter.last_n = self.last_n;
        filter.roles = roles;
        filter.synthetic = self.synthetic.unwrap_or_default();
        filter.keyword = self.keyword;
        filter.invocation_id = self.invocation_id;
        filter.after = self.after;
        filter.page = self.page.unwrap_or(0);
        // `last_n` alone reads the last n in one page, as `EventFilter::last` does.
        filter.page_size = self
            .page_size
            .unwrap_or_else(|| self.last_n.map_or(DEFAULT_PAGE_SIZE, |n| n.max(1)));
        Ok(filter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_query_survives_its_query_string() {
        let query = SessionQuery::new()
            .app("support")
            .user("ada")
            .metadata("ticket", serde_json::json!(42))
            .page(1, 25);
        let back = SessionListParams::from_query(&query).into_query();
        assert_eq!(back.ok(), Some(query));
    }

    #[test]
    fn a_metadata_string_that_is_not_an_object_is_invalid_input() {
        for bad in ["[1]", "{", "7"] {
            let params = SessionListParams {
                metadata: Some(bad.to_owned()),
                ..SessionListParams::default()
            };
            let err = params.into_query().err();
            assert_eq!(
                err.map(|e| e.kind()),
                Some(session_core::ErrorKind::InvalidInput),
                "{bad}"
            );
        }
    }

    #[test]
    fn last_n_alone_reads_the_last_n_in_one_page() {
        let params = EventParams {
            last_n: Some(20),
            ..EventParams::default()
        };
        assert_eq!(params.into_filter().ok(), Some(EventFilter::last(20)));
    }

    #[test]
    fn an_unknown_role_is_invalid_input() {
        let params = EventParams {
            roles: Some("user,wizard".to_owned()),
            ..EventParams::default()
        };
        let err = params.into_filter().err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("wizard")));
    }
}
