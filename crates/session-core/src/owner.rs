//! [`Owner`]: who is calling, the (app, user) every service call is scoped to.

use crate::error::Result;
use crate::ids::{AppName, UserId};
use crate::session::Session;

/// Who is calling: every service call is scoped to one (app, user).
///
/// A call naming a session of another app or user gets `NotFound`, exactly
/// as if the id did not exist. Group sessions (resolved without a user)
/// are open to every user of their app.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Owner {
    /// The app namespace.
    pub app: AppName,
    /// The user.
    pub user: UserId,
}

impl Owner {
    /// The owner `user` in `app`.
    pub fn new(app: AppName, user: UserId) -> Self {
        Self { app, user }
    }

    /// The owner a caller names as text: `InvalidInput` for an app name or
    /// user id that is not valid (what every face parses its input with).
    pub fn parse(app: &str, user: &str) -> Result<Self> {
        Ok(Self::new(AppName::new(app)?, UserId::new(user)?))
    }

    /// `user` in the default app; `InvalidInput` for an invalid user id.
    pub fn user(user: &str) -> Result<Self> {
        Ok(Self::new(AppName::default_app(), UserId::new(user)?))
    }

    /// The owner of `session`.
    pub fn of(session: &Session) -> Self {
        Self::new(session.app.clone(), session.user_id.clone())
    }

    /// Whether this owner may see `session`.
    pub fn can_access(&self, session: &Session) -> bool {
        self.may_access(&Self::of(session))
    }

    /// Whether this owner may see a session owned by `owner`: its own, or
    /// a group session of its app.
    pub fn may_access(&self, owner: &Owner) -> bool {
        owner.app == self.app && (owner.user == self.user || owner.user.is_group())
    }
}
