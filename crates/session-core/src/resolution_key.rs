//! The typed composite resolution key: surface, surface id, agent and
//! optional workspace, written as one [`Key`] string in one format.

use std::fmt;
use std::str::FromStr;

use crate::service::ResolveRequest;
use crate::validate::validate_name;
use crate::{Key, Result, SessionError};

/// The surface whose conversations are shared by every user of the app
/// (a Discord channel, a Telegram group): resolved without a user.
pub const GROUP_SURFACE: &str = "group";

/// Where a conversation happens and which agent holds it, as Open Astra
/// keys its sessions: `surface` (`chat`, `telegram`, `group`, …), the
/// surface's own id for the conversation, the agent, and optionally a
/// workspace. The user is the session's owner, not part of the key.
///
/// Written as `surface:surface_id:agent_id`, then `:workspace_id` when
/// there is one; each part is 1 or more of the [`Key`] characters except
/// `:`, and the whole at most 128 bytes. [`ResolutionKey::from_str`] reads
/// exactly that format back, so two callers never build the same key two
/// ways.
///
/// ```
/// use session_core::{ResolutionKey, ResolveRequest};
/// let key = ResolutionKey::new("telegram", "chat-123", "agent-a")?.in_workspace("ws-1")?;
/// assert_eq!(key.to_string(), "telegram:chat-123:agent-a:ws-1");
/// assert_eq!("telegram:chat-123:agent-a:ws-1".parse::<ResolutionKey>()?, key);
/// // A group surface resolves one session shared by the app's users.
/// let group = ResolutionKey::new("group", "discord-channel-123", "agent-a")?;
/// assert_eq!(ResolveRequest::for_key("app", "ada", &group).user_id, None);
/// assert!(ResolutionKey::new("slack", "T1:C2", "agent-a").is_err());
/// # Ok::<(), session_core::SessionError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResolutionKey {
    surface: String,
    surface_id: String,
    agent_id: String,
    workspace_id: Option<String>,
    /// The parts written out, checked as a [`Key`].
    key: Key,
}

/// The whole key, which must itself be a valid [`Key`] (length included).
fn written(field: &str, text: String) -> Result<Key> {
    validate_name(field, &text)?;
    Key::new(text)
}

/// Checks one part of a key: the [`Key`] characters, no `:`.
fn part(field: &str, value: String) -> Result<String> {
    validate_name(field, &value)?;
    if value.contains(':') {
        return Err(SessionError::invalid(
            field,
            format!("`{value}` holds `:`, which separates the parts of a resolution key"),
        ));
    }
    Ok(value)
}

impl ResolutionKey {
    /// A key without a workspace; `InvalidInput` if a part is empty, holds
    /// a character a [`Key`] may not, or holds `:`, or the key is too long.
    pub fn new(
        surface: impl Into<String>,
        surface_id: impl Into<String>,
        agent_id: impl Into<String>,
    ) -> Result<Self> {
        let (surface, surface_id, agent_id) = (
            part("surface", surface.into())?,
            part("surface id", surface_id.into())?,
            part("agent id", agent_id.into())?,
        );
        let key = written(
            "resolution key",
            format!("{surface}:{surface_id}:{agent_id}"),
        )?;
        Ok(Self {
            surface,
            surface_id,
            agent_id,
            workspace_id: None,
            key,
        })
    }

    /// The same key scoped to a workspace.
    pub fn in_workspace(mut self, workspace_id: impl Into<String>) -> Result<Self> {
        let workspace_id = part("workspace id", workspace_id.into())?;
        self.key = written(
            "resolution key",
            format!(
                "{}:{}:{}:{workspace_id}",
                self.surface, self.surface_id, self.agent_id
            ),
        )?;
        self.workspace_id = Some(workspace_id);
        Ok(self)
    }

    /// The surface (`chat`, `telegram`, `group`, …).
    pub fn surface(&self) -> &str {
        &self.surface
    }

    /// The surface's id of the conversation.
    pub fn surface_id(&self) -> &str {
        &self.surface_id
    }

    /// The agent that holds the session.
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// The workspace, if the key is scoped to one.
    pub fn workspace_id(&self) -> Option<&str> {
        self.workspace_id.as_deref()
    }

    /// Whether the conversation is shared by every user of the app
    /// (surface [`GROUP_SURFACE`]).
    pub fn is_group(&self) -> bool {
        self.surface == GROUP_SURFACE
    }

    /// The key string sessions are stored under.
    pub fn to_key(&self) -> Key {
        self.key.clone()
    }
}

impl fmt::Display for ResolutionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key)
    }
}

impl FromStr for ResolutionKey {
    type Err = SessionError;

    /// Reads `surface:surface_id:agent_id[:workspace_id]`.
    fn from_str(s: &str) -> Result<Self> {
        let parts: Vec<&str> = s.split(':').collect();
        match parts.as_slice() {
            [surface, surface_id, agent] => Self::new(*surface, *surface_id, *agent),
            [surface, surface_id, agent, workspace] => {
                Self::new(*surface, *surface_id, *agent)?.in_workspace(*workspace)
            }
            _ => Err(SessionError::invalid(
                "resolution key",
                format!(
                    "`{s}` has {} parts; expected surface:surface_id:agent_id[:workspace_id]",
                    parts.len()
                ),
            )),
        }
    }
}

impl From<&ResolutionKey> for Key {
    fn from(key: &ResolutionKey) -> Self {
        key.to_key()
    }
}

impl From<ResolutionKey> for Key {
    fn from(key: ResolutionKey) -> Self {
        key.to_key()
    }
}

impl ResolveRequest {
    /// The session `key` names: `user_id`'s own, or for a group surface
    /// the one shared by every user of `app` (no user).
    pub fn for_key(
        app: impl Into<String>,
        user_id: impl Into<String>,
        key: &ResolutionKey,
    ) -> Self {
        if key.is_group() {
            Self::group(app, key.to_string())
        } else {
            Self::new(app, user_id, key.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_written_one_way_and_read_back() {
        let plain = ResolutionKey::new("chat", "web-7", "support").unwrap();
        assert_eq!(plain.to_string(), "chat:web-7:support");
        assert_eq!(plain.workspace_id(), None);
        let scoped = plain.clone().in_workspace("acme").unwrap();
        for key in [plain, scoped] {
            let back: ResolutionKey = key.to_string().parse().unwrap();
            assert_eq!(back, key);
            assert_eq!(Key::from(&key).as_ref(), key.to_string());
        }
    }

    #[test]
    fn parts_that_would_make_the_key_ambiguous_or_invalid_are_refused() {
        for (surface, id, agent) in [
            ("", "c", "a"),
            ("chat", "a:b", "a"),
            ("chat", "c", "bad agent"),
            ("chat", "c", &*"x".repeat(130)),
        ] {
            let err = ResolutionKey::new(surface, id, agent).unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::InvalidInput, "{err}");
        }
        let long = ResolutionKey::new("chat", "x".repeat(60), "y".repeat(60)).unwrap();
        assert!(long.in_workspace("z".repeat(20)).is_err(), "over 128 bytes");
        for bad in ["chat:c", "a:b:c:d:e", "chat::agent"] {
            assert!(bad.parse::<ResolutionKey>().is_err(), "{bad}");
        }
    }

    #[test]
    fn group_surfaces_resolve_without_a_user() {
        let group = ResolutionKey::new("group", "discord-channel-123", "bot").unwrap();
        let req = ResolveRequest::for_key("app", "ada", &group);
        assert_eq!(req.user_id, None);
        assert_eq!(req.key, "group:discord-channel-123:bot");
        let own = ResolutionKey::new("telegram", "chat-1", "bot").unwrap();
        let req = ResolveRequest::for_key("app", "ada", &own);
        assert_eq!(req.user_id.as_deref(), Some("ada"));
    }
}
