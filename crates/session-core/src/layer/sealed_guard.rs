//! `SealedGuard`: a store used without the keyring refuses to read or
//! write the content of sessions the encryption layer sealed.

use std::collections::HashSet;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use parking_lot::Mutex;

use crate::dump::SessionDump;
use crate::error::{ErrorKind, Result, SessionError};
use crate::event::SessionEvent;
use crate::filter::{EventFilter, Page, SessionQuery};
use crate::ids::{AppName, SessionId, UserId};
use crate::outcome::{AppendOutcome, ImportOutcome, RewindOutcome};
use crate::plan::RewindTo;
use crate::repository::{Capabilities, Erased, SessionRepository};
use crate::search::{SearchHit, SearchQuery, SearchScope};
use crate::session::{NewSession, Session, SessionUpdate};
use crate::state::SharedState;

/// Sessions remembered as plain before the set starts over.
const REMEMBERED: usize = 65_536;

/// What a caller without the keyring is told.
pub const ENCRYPTED_STORE_HINT: &str =
    "this store is encrypted: give --keys-file or AGENT_SESSION_KEYS \
     (in a program: open it behind session_encryption::EncryptedRepository)";

/// Wraps a store used **without** the keyring. A session the encryption
/// layer sealed ([`Session::is_sealed`]) refuses, with
/// [`SessionError::Encryption`] and [`ENCRYPTED_STORE_HINT`]:
///
/// - writes of content: `append`, `replace_context`, an `update` of
///   metadata or state, a native `fork_session` (whose copies would be
///   bound to the source session);
/// - reads of content: `events` and `search` (one session, or a user's
///   sessions when any of them is sealed), instead of ciphertext or "no
///   hits".
///
/// Everything that needs no key goes on: `get` and `list` (values stay
/// ciphertext), `end`/`reopen`, expiry, `delete`, `rewind`, `erase_user`,
/// retention, and `export`/`import`, which copy sealed values as they are
/// (a backup or `migrate` needs no keyring). Plain sessions are used as
/// they are.
///
/// Each session is read once (a `get`) before its first guarded call; a
/// session found plain is remembered, so later calls cost nothing more.
/// (A session that `rekey` seals while this process runs is then still
/// taken as plain by it; the encryption layer reports any plain value it
/// later finds in a sealed session. Run `rekey` with plain writers
/// stopped.) `agent_session::open` puts every store behind it.
#[derive(Debug)]
pub struct SealedGuard<R> {
    inner: R,
    plain: Mutex<HashSet<SessionId>>,
}

impl<R> SealedGuard<R> {
    /// Guards `inner`.
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            plain: Mutex::new(HashSet::new()),
        }
    }

    /// The guarded store.
    pub fn inner(&self) -> &R {
        &self.inner
    }
}

/// The error a sealed session answers a caller without the keyring.
fn refused(id: &str) -> SessionError {
    SessionError::Encryption {
        context: format!("session {id}"),
        reason: ENCRYPTED_STORE_HINT.to_owned(),
    }
}

impl<R: SessionRepository> SealedGuard<R> {
    /// `Ok` when session `id` is plain (or absent: the inner call then
    /// answers as the store does); the hint when it is sealed.
    async fn check(&self, id: &SessionId) -> Result<()> {
        self.check_for(None, id).await
    }

    /// [`Self::check`], with `owner` (when given) judged first: another
    /// owner's session is `NotFound`, sealed or not.
    async fn check_for(&self, owner: Option<&crate::owner::Owner>, id: &SessionId) -> Result<()> {
        if self.plain.lock().contains(id) {
            return Ok(());
        }
        match self.inner.get(id).await {
            Ok(s) if owner.is_some_and(|o| !o.may_access(&crate::owner::Owner::of(&s))) => {
                Err(crate::error::SessionError::session_not_found(id))
            }
            Ok(s) => self.judge(&s),
            Err(e) if e.kind() == ErrorKind::NotFound || e.kind() == ErrorKind::Expired => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Remembers `s` as plain, or refuses it as sealed.
    fn judge(&self, s: &Session) -> Result<()> {
        if s.is_sealed() {
            return Err(refused(s.id.as_str()));
        }
        let mut plain = self.plain.lock();
        if plain.len() >= REMEMBERED {
            plain.clear();
        }
        plain.insert(s.id.clone());
        Ok(())
    }

    /// The search's sessions are plain: the one it names, or every
    /// session of the user it names.
    async fn check_search(&self, query: &SearchQuery) -> Result<()> {
        match &query.scope {
            SearchScope::Session(id) => self.check(&SessionId::new(id.as_str())?).await,
            SearchScope::User { app, user_id } => {
                let mut q = SessionQuery::new()
                    .app(app.as_str())
                    .user(user_id.as_str())
                    .page(0, 1000);
                loop {
                    let page = self.inner.list(&q).await?;
                    for s in &page.items {
                        self.judge(s)?;
                    }
                    if !page.has_more {
                        return Ok(());
                    }
                    q.page = q.page.saturating_add(1);
                }
            }
        }
    }
}

#[async_trait]
impl<R: SessionRepository> SessionRepository for SealedGuard<R> {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn create(&self, session: NewSession) -> Result<Session> {
        self.inner.create(session).await
    }
    async fn get(&self, id: &SessionId) -> Result<Session> {
        self.inner.get(id).await
    }
    async fn owner_of(&self, id: &SessionId) -> Result<crate::owner::Owner> {
        self.inner.owner_of(id).await
    }
    async fn update(&self, id: &SessionId, update: SessionUpdate) -> Result<Session> {
        if update.metadata.is_some() || update.state.is_some() {
            self.check(id).await?;
        }
        self.inner.update(id, update).await
    }
    async fn delete(&self, id: &SessionId) -> Result<bool> {
        self.plain.lock().remove(id);
        self.inner.delete(id).await
    }
    async fn list(&self, query: &SessionQuery) -> Result<Page<Session>> {
        self.inner.list(query).await
    }
    async fn purge_expired(&self, now: DateTime<Utc>) -> Result<u64> {
        self.inner.purge_expired(now).await
    }
    async fn append(&self, id: &SessionId, events: Vec<SessionEvent>) -> Result<AppendOutcome> {
        self.check(id).await?;
        self.inner.append(id, events).await
    }
    async fn append_owned(
        &self,
        owner: &crate::owner::Owner,
        id: &SessionId,
        events: Vec<SessionEvent>,
    ) -> Result<AppendOutcome> {
        self.check_for(Some(owner), id).await?;
        self.inner.append_owned(owner, id, events).await
    }
    async fn events(&self, id: &SessionId, filter: &EventFilter) -> Result<Page<SessionEvent>> {
        self.check(id).await?;
        self.inner.events(id, filter).await
    }
    async fn items(
        &self,
        id: &SessionId,
        key: &str,
        filter: &EventFilter,
    ) -> Result<Page<crate::item::KeyedItem>> {
        self.check(id).await?;
        self.inner.items(id, key, filter).await
    }
    async fn session_items(
        &self,
        id: &SessionId,
        key: &str,
        filter: &EventFilter,
    ) -> Result<(crate::item::SessionItems, SharedState)> {
        self.check(id).await?;
        self.inner.session_items(id, key, filter).await
    }
    async fn event_version(&self, id: &SessionId) -> Result<u64> {
        self.inner.event_version(id).await
    }
    async fn replace_context(
        &self,
        id: &SessionId,
        events: Vec<SessionEvent>,
        expected_version: u64,
    ) -> Result<bool> {
        self.check(id).await?;
        self.inner
            .replace_context(id, events, expected_version)
            .await
    }
    async fn rewind_to(&self, id: &SessionId, to: &RewindTo) -> Result<RewindOutcome> {
        self.inner.rewind_to(id, to).await
    }
    async fn search(&self, query: &SearchQuery) -> Result<Page<SearchHit>> {
        self.check_search(query).await?;
        self.inner.search(query).await
    }
    async fn shared_state(&self, app: &AppName, user_id: &UserId) -> Result<SharedState> {
        self.inner.shared_state(app, user_id).await
    }
    async fn export_session(&self, id: &SessionId) -> Result<SessionDump> {
        self.inner.export_session(id).await
    }
    async fn context_log(&self, id: &SessionId) -> Result<crate::ContextLog> {
        self.inner.context_log(id).await
    }
    async fn erase_user(&self, app: &AppName, user_id: &UserId) -> Result<Erased> {
        self.inner.erase_user(app, user_id).await
    }
    async fn prune_events(
        &self,
        id: &SessionId,
        seqs: &[u64],
        expected_version: u64,
    ) -> Result<Option<crate::retention::Pruned>> {
        self.inner.prune_events(id, seqs, expected_version).await
    }
    async fn fork_session(
        &self,
        source: &SessionId,
        at: &crate::ForkAt,
        id: SessionId,
        now: DateTime<Utc>,
    ) -> Result<Session> {
        self.check(source).await?;
        self.inner.fork_session(source, at, id, now).await
    }
    async fn import_session(&self, dump: SessionDump) -> Result<ImportOutcome> {
        self.plain.lock().remove(&dump.session.id);
        self.inner.import_session(dump).await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{InMemoryRepository, Message, SessionRepositoryExt, ENCRYPTION_RECORD};

    fn said(text: &str) -> SessionEvent {
        SessionEvent::builder(Message::user(text)).build().unwrap()
    }

    /// A store with one plain session and one that looks sealed.
    async fn store() -> (SealedGuard<InMemoryRepository>, Session, Session) {
        let guard = SealedGuard::new(InMemoryRepository::new());
        let now = Utc::now();
        let plain = guard
            .create(NewSession::new("app", "alice", now).unwrap())
            .await
            .unwrap();
        let mut record = crate::StateMap::new();
        record.insert(
            ENCRYPTION_RECORD.to_owned(),
            json!({"kid": "k1", "key": "x"}),
        );
        let sealed = guard
            .create(
                NewSession::new("app", "alice", now)
                    .unwrap()
                    .with_metadata(record),
            )
            .await
            .unwrap();
        (guard, plain, sealed)
    }

    #[tokio::test]
    async fn a_sealed_session_refuses_plain_writes_and_reads_with_the_hint() {
        let (guard, plain, sealed) = store().await;
        let e = guard
            .append(&sealed.id, vec![said("plain write")])
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Encryption, "{e}");
        assert!(e.to_string().contains("--keys-file"), "{e}");
        let e = guard
            .all_events(&sealed.id, crate::EventView::Archive)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Encryption);
        let e = guard
            .search(&SearchQuery::in_session(sealed.id.as_str(), "plain"))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Encryption);
        let e = guard
            .search(&SearchQuery::for_user("app", "alice", "plain"))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Encryption, "a user's sealed session");
        let e = guard
            .update(
                &sealed.id,
                SessionUpdate::new().metadata(crate::StateMap::new()),
            )
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Encryption, "the key record stays");
        assert!(guard.inner().get(&sealed.id).await.unwrap().is_sealed());
        assert_eq!(guard.inner().get(&sealed.id).await.unwrap().event_count, 0);

        // What needs no key goes on, and plain sessions are used as they are.
        guard.get(&sealed.id).await.unwrap();
        guard.append(&plain.id, vec![said("hello")]).await.unwrap();
        let hits = guard
            .search(&SearchQuery::in_session(plain.id.as_str(), "hello"))
            .await
            .unwrap();
        assert_eq!(hits.items.len(), 1);
        assert!(guard.delete(&sealed.id).await.unwrap());
    }

    #[tokio::test]
    async fn an_append_to_another_owners_sealed_session_is_not_found() {
        let (guard, plain, sealed) = store().await;
        let bob = crate::owner::Owner::parse("app", "bob").unwrap();
        let alice = crate::owner::Owner::parse("app", "alice").unwrap();
        for id in [&sealed.id, &plain.id] {
            let e = guard
                .append_owned(&bob, id, vec![said("x")])
                .await
                .unwrap_err();
            assert_eq!(
                e.kind(),
                ErrorKind::NotFound,
                "{e}: sealed or not, unknown to bob"
            );
        }
        let e = guard
            .append_owned(&alice, &sealed.id, vec![said("x")])
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Encryption, "its owner gets the hint");
        guard
            .append_owned(&alice, &plain.id, vec![said("mine")])
            .await
            .unwrap();
        assert_eq!(guard.inner().get(&sealed.id).await.unwrap().event_count, 0);
    }
}
