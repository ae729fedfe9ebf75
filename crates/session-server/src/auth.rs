//! API keys: who may call the server, and on which app and users.
//!
//! A key file holds one key per line, stored as its SHA-256 hash (the
//! secret itself is never kept on the server):
//!
//! ```text
//! # name     app        role[:user]   hash
//! support-1  support    agent         sha256:4f1c…
//! ops        *          admin         sha256:9ab0…
//! bot-ada    support    agent:ada     sha256:77de…
//! ```
//!
//! - `admin` keys of an app may act for any user of the app; an `admin`
//!   key of `*` is an operator's key, and only it may use the store routes
//!   (`/v1/sessions/…`, the unscoped view the remote store speaks).
//! - `agent` keys act only on the owner routes (`/v1/apps/{app}/users/{user}/…`)
//!   of their app: for the user the path names, or only for the one user
//!   they are bound to (`agent:ada`).
//!
//! [`ApiKeys::generate`] makes a new secret and the line to add for it.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine as _;
use session_core::{AppName, Result, SessionError, UserId};
use sha2::{Digest, Sha256};

/// What a key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRole {
    /// Any user of the key's app (every app for an operator key, app `*`).
    Admin,
    /// One user of the key's app at a time: the one the request names, or the bound one.
    Agent,
}

/// One API key as the server holds it (its hash, never its secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// The key's name, for logs.
    pub name: String,
    /// The app the key acts in; `None` for `*` (every app).
    pub app: Option<AppName>,
    /// What it may do.
    pub role: KeyRole,
    /// The one user an agent key is bound to.
    pub user: Option<UserId>,
}

impl ApiKey {
    /// Whether this is an operator's key (admin of every app).
    pub fn is_operator(&self) -> bool {
        self.role == KeyRole::Admin && self.app.is_none()
    }

    /// Whether the key may act for `user` in `app`.
    pub fn may_act_for(&self, app: &str, user: &str) -> bool {
        let app_ok = self.app.as_ref().is_none_or(|a| a.as_str() == app);
        let user_ok = match (self.role, &self.user) {
            (KeyRole::Admin, _) | (KeyRole::Agent, None) => true,
            (KeyRole::Agent, Some(bound)) => bound.as_str() == user,
        };
        app_ok && user_ok
    }
}

/// The keys a server accepts, by the hash of their secret.
#[derive(Debug, Clone, Default)]
pub struct ApiKeys {
    by_hash: HashMap<[u8; 32], Arc<ApiKey>>,
}

/// The prefix of every generated secret, so a leaked one is recognizable.
const SECRET_PREFIX: &str = "ask_";

fn hash(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn parse_hash(text: &str) -> Option<[u8; 32]> {
    let hex = text.strip_prefix("sha256:")?;
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        let pair = hex.get(i * 2..i * 2 + 2)?;
        *byte = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(out)
}

impl ApiKeys {
    /// No keys: a server without keys answers everyone (for a loopback
    /// listener and tests only).
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// How many keys there are.
    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// Reads a key file's text; `InvalidInput` naming the line that is not a key.
    pub fn parse(text: &str) -> Result<Self> {
        let mut keys = Self::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = |reason: &str| {
                SessionError::invalid("API key file", format!("line {}: {reason}", n + 1))
            };
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [name, app, role, hash] = fields.as_slice() else {
                return Err(at("expected `NAME APP ROLE sha256:HASH`"));
            };
            let app = if *app == "*" {
                None
            } else {
                Some(AppName::new(*app).map_err(|e| at(&e.to_string()))?)
            };
            let (role, user) = match role.split_once(':') {
                Some(("agent", user)) => (
                    KeyRole::Agent,
                    Some(UserId::new(user).map_err(|e| at(&e.to_string()))?),
                ),
                None if *role == "agent" => (KeyRole::Agent, None),
                None if *role == "admin" => (KeyRole::Admin, None),
                _ => return Err(at("the role is `admin`, `agent` or `agent:USER`")),
            };
            let hash =
                parse_hash(hash).ok_or_else(|| at("the hash is `sha256:` and 64 hex digits"))?;
            let key = ApiKey {
                name: (*name).to_owned(),
                app,
                role,
                user,
            };
            if keys.by_hash.insert(hash, Arc::new(key)).is_some() {
                return Err(at("the same secret is listed twice"));
            }
        }
        Ok(keys)
    }

    /// Reads a key file.
    pub fn from_file(path: &std::path::Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            SessionError::invalid_because(
                "API key file",
                format!("cannot read {}", path.display()),
                e,
            )
        })?;
        Self::parse(&text)
    }

    /// The key whose secret is `secret`, if the server holds it.
    pub fn authenticate(&self, secret: &str) -> Option<Arc<ApiKey>> {
        self.by_hash.get(&hash(secret)).cloned()
    }

    /// A new random secret and the key file line that accepts it as `key`.
    pub fn generate(key: &ApiKey) -> Result<(String, String)> {
        let mut random = [0u8; 32];
        getrandom::getrandom(&mut random).map_err(|e| SessionError::Backend {
            backend: "http",
            source: Box::new(std::io::Error::other(e.to_string())),
        })?;
        let secret = format!(
            "{SECRET_PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random)
        );
        let app = key.app.as_ref().map_or("*", AppName::as_str);
        let role = match (key.role, &key.user) {
            (KeyRole::Admin, _) => "admin".to_owned(),
            (KeyRole::Agent, None) => "agent".to_owned(),
            (KeyRole::Agent, Some(user)) => format!("agent:{user}"),
        };
        let line = format!("{} {app} {role} sha256:{}", key.name, hex(&hash(&secret)));
        Ok((secret, line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(app: Option<&str>, role: KeyRole, user: Option<&str>) -> ApiKey {
        ApiKey {
            name: "k".into(),
            app: app.map(|a| AppName::new(a).unwrap_or_else(|e| panic!("{e}"))),
            role,
            user: user.map(|u| UserId::new(u).unwrap_or_else(|e| panic!("{e}"))),
        }
    }

    #[test]
    fn a_generated_secret_authenticates_as_its_key_and_nothing_else_does() {
        let wanted = key(Some("support"), KeyRole::Agent, Some("ada"));
        let (secret, line) = ApiKeys::generate(&wanted).unwrap_or_else(|e| panic!("{e}"));
        assert!(!line.contains(&secret), "the file never holds the secret");
        let keys = ApiKeys::parse(&format!("# keys\n\n{line}\n")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(keys.authenticate(&secret).as_deref(), Some(&wanted));
        assert!(keys.authenticate("ask_guess").is_none());
        assert!(keys.authenticate("").is_none());
    }

    #[test]
    fn scopes_follow_app_role_and_bound_user() {
        let agent = key(Some("support"), KeyRole::Agent, None);
        assert!(agent.may_act_for("support", "ada"));
        assert!(!agent.may_act_for("billing", "ada"));
        let bound = key(Some("support"), KeyRole::Agent, Some("ada"));
        assert!(bound.may_act_for("support", "ada"));
        assert!(!bound.may_act_for("support", "bob"));
        let admin = key(Some("support"), KeyRole::Admin, None);
        assert!(admin.may_act_for("support", "bob") && !admin.is_operator());
        let operator = key(None, KeyRole::Admin, None);
        assert!(operator.may_act_for("billing", "bob") && operator.is_operator());
    }

    #[test]
    fn a_bad_line_is_invalid_input_naming_it() {
        for bad in [
            "k support agent",
            "k support wizard sha256:00",
            "k a*b admin sha256:0000000000000000000000000000000000000000000000000000000000000000",
            "k support admin sha256:xyz",
        ] {
            let e = ApiKeys::parse(&format!("\n{bad}")).err();
            assert!(
                e.as_ref().is_some_and(|e| e.to_string().contains("line 2")),
                "{bad}: {e:?}"
            );
        }
    }
}
