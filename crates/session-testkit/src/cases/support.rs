//! The helpers the cases share: error kinds, state maps, numbered events,
//! the owner most cases act as, and a session created through the service.

use serde_json::Value;
use session_core::{
    CreateSessionRequest, ErrorKind, Owner, SessionError, SessionEvent, SessionService, StateMap,
};

use crate::fixture::{user, Fixture, APP};

pub(super) fn kind<T: std::fmt::Debug>(r: Result<T, SessionError>) -> ErrorKind {
    r.expect_err("expected an error").kind()
}

pub(super) fn map(v: &Value) -> StateMap {
    v.as_object().cloned().unwrap()
}

pub(super) fn numbered(prefix: &str, n: usize) -> Vec<SessionEvent> {
    (1..=n).map(|i| user(&format!("{prefix} {i}"))).collect()
}

pub(super) fn owner() -> Owner {
    Owner::parse(APP, "alice").unwrap()
}

pub(super) async fn service_session(fx: &Fixture, owner: &Owner) -> session_core::Session {
    fx.service()
        .create(
            CreateSessionRequest::builder(&owner.user)
                .app(&owner.app)
                .build()
                .unwrap(),
        )
        .await
        .unwrap()
}
