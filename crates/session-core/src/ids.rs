//! Validated identifiers: built once at the boundary, trusted everywhere after.
//!
//! Each type can only hold a valid value (like `object_store::path::Path`):
//! constructors, `FromStr`, `TryFrom` and serde all validate, so a
//! [`crate::SessionRepository`] that takes a [`SessionId`] never checks it
//! again. They dereference to `str` for reading.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};

use crate::error::{Result, SessionError};
use crate::validate::{validate_id, validate_name};

/// The app namespace used when none is given.
pub const DEFAULT_APP: &str = "default";

/// The owner recorded on group sessions: a key resolved without a user is
/// shared by everyone in the app. `*` can never be a real user id.
pub const GROUP_USER: &str = "*";

macro_rules! identifier {
    ($(#[$doc:meta])* $name:ident, $check:expr) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Validates `value`; `InvalidInput` naming the field if it is not valid.
            pub fn new(value: impl Into<String>) -> Result<Self> {
                let value = value.into();
                let check: fn(&str) -> Result<()> = $check;
                check(&value)?;
                Ok(Self(value))
            }

            /// The identifier as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The identifier as an owned string.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            // `pad`, not `write_str`: width and alignment apply (`{:<12}`).
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl FromStr for $name {
            type Err = SessionError;
            fn from_str(s: &str) -> Result<Self> {
                Self::new(s)
            }
        }

        impl TryFrom<String> for $name {
            type Error = SessionError;
            fn try_from(s: String) -> Result<Self> {
                Self::new(s)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = SessionError;
            fn try_from(s: &str) -> Result<Self> {
                Self::new(s)
            }
        }

        impl TryFrom<&String> for $name {
            type Error = SessionError;
            fn try_from(s: &String) -> Result<Self> {
                Self::new(s.as_str())
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl From<&$name> for String {
            fn from(id: &$name) -> String {
                id.0.clone()
            }
        }

        impl From<&$name> for $name {
            fn from(id: &$name) -> $name {
                id.clone()
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::new(s).map_err(serde::de::Error::custom)
            }
        }
    };
}

identifier!(
    /// A session id: 1..=128 bytes of `[A-Za-z0-9._:-]`, not `.` or `..`.
    ///
    /// ```
    /// use session_core::SessionId;
    /// let id: SessionId = "chat-42".parse().unwrap();
    /// assert_eq!(id, "chat-42");
    /// assert!(SessionId::new("../etc").is_err());
    /// ```
    SessionId,
    |s| validate_id("session id", s)
);

identifier!(
    /// An event id: the same characters as a [`SessionId`].
    EventId,
    |s| validate_id("event id", s)
);

identifier!(
    /// An invocation id (one agent run): the same characters as a [`SessionId`].
    InvocationId,
    |s| validate_id("invocation id", s)
);

identifier!(
    /// An app namespace: 1..=128 bytes of ASCII letters, digits and `. _ : - @ + / | #`.
    AppName,
    |s| validate_name("app", s)
);

identifier!(
    /// A session owner: a user id of the [`AppName`] characters, or
    /// [`UserId::group`] (`*`) for group sessions shared by an app's users.
    ///
    /// ```
    /// use session_core::UserId;
    /// assert!(UserId::new("ada@example.com").is_ok());
    /// assert!(UserId::group().is_group());
    /// assert!(UserId::new("a b").is_err());
    /// ```
    UserId,
    |s| {
        if s == GROUP_USER {
            Ok(())
        } else {
            validate_name("user id", s)
        }
    }
);

identifier!(
    /// A resolution key (`telegram:chat-123:agent-a`): the [`AppName`] characters.
    Key,
    |s| validate_name("key", s)
);

impl UserId {
    /// The owner of group sessions: every user of the app.
    pub fn group() -> Self {
        Self(GROUP_USER.to_owned())
    }

    /// Whether this is the group owner.
    pub fn is_group(&self) -> bool {
        self.0 == GROUP_USER
    }
}

impl AppName {
    /// The default app namespace, [`DEFAULT_APP`].
    pub fn default_app() -> Self {
        Self(DEFAULT_APP.to_owned())
    }
}

impl SessionId {
    /// A new time-ordered id (UUID v7).
    pub fn generate() -> Self {
        Self(uuid::Uuid::now_v7().to_string())
    }
}

impl EventId {
    /// A new time-ordered id (UUID v7), as [`crate::SessionEvent::new`] gives.
    pub fn generate() -> Self {
        Self(uuid::Uuid::now_v7().to_string())
    }
}

/// Reads an identifier a store kept: a value that is not valid (a damaged
/// row, a hand-edited file) is a `Serialization` error naming `what`, not
/// bad input from the caller.
pub fn stored_id<T: FromStr<Err = SessionError>>(
    raw: &str,
    what: impl FnOnce() -> String,
) -> Result<T> {
    raw.parse()
        .map_err(|e: SessionError| SessionError::serialization(what(), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_can_only_hold_valid_values() {
        assert!(SessionId::new("a/b").is_err());
        assert!(SessionId::new("").is_err());
        assert!("..".parse::<SessionId>().is_err());
        assert!(AppName::new("slack/T1").is_ok());
        assert!(Key::new("a*b").is_err());
        assert!(UserId::new("*").unwrap().is_group());
        assert!(AppName::new("*").is_err());
        let bad: std::result::Result<SessionId, _> = serde_json::from_str("\"a b\"");
        assert!(bad.is_err(), "serde validates too");
        let good: SessionId = serde_json::from_str("\"s-1\"").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            serde_json::to_string(&good).ok().as_deref(),
            Some("\"s-1\"")
        );
    }

    #[test]
    fn display_takes_width_and_alignment() {
        let app = AppName::new("app").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(format!("[{app:<6}]"), "[app   ]");
        assert_eq!(format!("[{app:>6}]"), "[   app]");
        assert_eq!(app.to_string(), "app");
    }

    #[test]
    fn errors_name_the_field() {
        let e = InvocationId::new("a b").expect_err("space");
        assert!(e.to_string().starts_with("invalid invocation id"), "{e}");
    }
}
