//! [`EncryptedRepository`]: any store, with content, state and metadata sealed.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use session_core::retention::Pruned;
use session_core::{
    page_of_matches, prepare_events, AppName, AppendOutcome, Capabilities, Erased, ErrorKind,
    EventFilter, EventView, ImportOutcome, Limits, NewSession, Page, Result, RewindOutcome,
    RewindTo, SearchHit, SearchQuery, SearchScope, Session, SessionDump, SessionEvent, SessionId,
    SessionQuery, SessionRepository, SessionRepositoryExt, SessionUpdate, SharedState, UserId,
};

use crate::keyring::{Key, Keyring};
use crate::seal::{
    new_data_key, open_shared_state, plain_metadata, record_of, wrap_binding, Format, SessionSeal,
    KEY_RECORD,
};

/// Unwrapped data keys kept in memory, by wrapped key and record format.
const CACHED_KEYS: usize = 4096;

/// A store whose message content, tool arguments and results, error
/// texts, state values and metadata values are sealed with
/// XChaCha20-Poly1305 before they reach the inner store, and opened on the
/// way back. Ids, seqs, timestamps, roles, token counts and event metadata
/// stay plain. See the crate docs.
pub struct EncryptedRepository<R> {
    inner: R,
    ring: Arc<Keyring>,
    keys: Mutex<HashMap<(String, Format), Key>>,
    limits: Limits,
}

/// The limits the inner store needs so that an event within `limits`
/// still fits once sealed (base64 adds a third, plus nonce, tag and prefix).
pub fn sealed_limits(limits: &Limits) -> Limits {
    let room = limits
        .max_event_bytes
        .saturating_add(limits.max_event_bytes / 2)
        .saturating_add(64 * 1024);
    (*limits).with_max_event_bytes(room)
}

impl<R> std::fmt::Debug for EncryptedRepository<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncryptedRepository")
            .field("keyring", &self.ring)
            .finish_non_exhaustive()
    }
}

/// What [`EncryptedRepository::rekey`] did to one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rekeyed {
    /// Its data key was already wrapped with the current key and every value sealed.
    UpToDate,
    /// Its data key is now wrapped with the current key, and values
    /// stored plain (before encryption was on) are sealed.
    Rekeyed,
    /// It kept changing while being rekeyed; run `rekey` again.
    Busy,
}

impl<R: SessionRepository> EncryptedRepository<R> {
    /// Seals what goes into `inner` with data keys wrapped by `keyring`.
    pub fn new(inner: R, keyring: Keyring) -> Self {
        Self {
            inner,
            ring: Arc::new(keyring),
            keys: Mutex::new(HashMap::new()),
            limits: Limits::default(),
        }
    }

    /// Checks appended events against `limits` before sealing them (the
    /// default: [`Limits::default`]); give the inner store
    /// [`sealed_limits`] of the same.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The inner store (it holds sealed values).
    pub fn inner(&self) -> &R {
        &self.inner
    }

    /// The session's data key, from its record (`None`: stored before
    /// encryption was on).
    fn data_key(&self, s: &Session) -> Result<Option<(Key, Format)>> {
        let Some((kid, wrapped, format)) = record_of(&s.metadata) else {
            return Ok(None);
        };
        let cached = (wrapped.to_owned(), format);
        if let Some(k) = self.keys.lock().get(&cached) {
            return Ok(Some((k.clone(), format)));
        }
        let key = self.ring.unwrap(
            kid,
            wrapped,
            &wrap_binding(s.id.as_str(), format),
            &format!("session {} data key", s.id),
        )?;
        let mut cache = self.keys.lock();
        if cache.len() >= CACHED_KEYS {
            cache.clear();
        }
        cache.insert(cached, key.clone());
        Ok(Some((key, format)))
    }

    fn seal_of(&self, s: &Session) -> Result<SessionSeal<'_>> {
        Ok(SessionSeal::new(&self.ring, self.data_key(s)?, s))
    }

    /// Session `id` as stored, for a write. A session the store does not
    /// show is asked for again with an empty append, so the write fails as
    /// the store fails it (`Expired`, `NotFound`, `SessionEnded`), and
    /// nothing is written unsealed.
    async fn stored_for_write(&self, id: &SessionId) -> Result<Session> {
        match self.inner.get(id).await {
            Ok(s) => Ok(s),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                self.inner.append(id, Vec::new()).await?;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// [`Self::stored_for_write`]'s seal.
    async fn seal_for(&self, id: &SessionId) -> Result<SessionSeal<'_>> {
        let s = self.stored_for_write(id).await?;
        self.seal_of(&s)
    }

    /// The seal of session `id` for a read (a session the store does not show is `NotFound`).
    async fn seal_to_read(&self, id: &SessionId) -> Result<SessionSeal<'_>> {
        let s = self.inner.get(id).await?;
        self.seal_of(&s)
    }

    /// Events checked against the plain limits, then sealed.
    fn seal_events(
        &self,
        seal: &SessionSeal<'_>,
        mut events: Vec<SessionEvent>,
    ) -> Result<Vec<SessionEvent>> {
        prepare_events(&mut events, &self.limits)?;
        events.into_iter().map(|e| seal.seal_event(e)).collect()
    }

    /// A plain dump sealed for the inner store under a fresh data key.
    fn seal_dump(&self, mut dump: SessionDump) -> Result<SessionDump> {
        let (key, record) = new_data_key(&self.ring, dump.session.id.as_str())?;
        let seal = SessionSeal::new(&self.ring, Some((key, Format::V2)), &dump.session);
        let mut metadata = seal.seal_metadata(&dump.session.metadata)?;
        metadata.insert(KEY_RECORD.to_owned(), record);
        dump.session.metadata = metadata;
        dump.session.state = seal.seal_state(&dump.session.state)?;
        dump.initial_state = seal.seal_state(&dump.initial_state)?;
        dump.shared = seal.seal_shared_state(&dump.shared)?;
        dump.events = dump
            .events
            .into_iter()
            .map(|e| seal.seal_event(e))
            .collect::<Result<_>>()?;
        Ok(dump)
    }

    /// A sealed dump opened; also whether it was fully sealed under the current key.
    fn open_dump(&self, mut dump: SessionDump) -> Result<(SessionDump, bool)> {
        let current = record_of(&dump.session.metadata)
            .is_some_and(|(kid, _, format)| kid == self.ring.current_id() && format == Format::V2);
        let seal = self.seal_of(&dump.session)?;
        dump.events = dump
            .events
            .into_iter()
            .map(|e| seal.open_event(e))
            .collect::<Result<_>>()?;
        dump.initial_state =
            seal.open_state(std::mem::take(&mut dump.initial_state), "initial state")?;
        dump.shared = seal.open_shared_state(std::mem::take(&mut dump.shared))?;
        dump.session = seal.open_session(dump.session)?;
        let sealed = current && !seal.stale.get();
        Ok((dump, sealed))
    }

    /// Wraps session `id`'s data key with the keyring's current key, and
    /// seals what was stored plain, by writing the session again at the
    /// next version: a writer that moves it in between wins and the answer
    /// is `Busy`. The owner's `user:` and `app:` state is left as it is
    /// (each value names the key it was sealed with; see the crate docs).
    pub async fn rekey(&self, id: &SessionId) -> Result<Rekeyed> {
        let raw = self.inner.export_session(id).await?;
        let version = raw.session.version;
        let (plain, up_to_date) = self.open_dump(raw)?;
        if up_to_date {
            return Ok(Rekeyed::UpToDate);
        }
        let mut sealed = self.seal_dump(plain)?;
        sealed.session.version = version.saturating_add(1);
        sealed.shared = SharedState::default();
        Ok(match self.inner.import_session(sealed).await? {
            ImportOutcome::Imported => Rekeyed::Rekeyed,
            ImportOutcome::Unchanged => Rekeyed::Busy,
        })
    }

    /// Every page of `query` read from the inner store (paging ignored).
    async fn list_all(&self, query: &SessionQuery) -> Result<Vec<Session>> {
        let mut q = query.clone().page(0, 1000);
        let mut out = Vec::new();
        loop {
            let p = self.inner.list(&q).await?;
            out.extend(p.items);
            if !p.has_more {
                return Ok(out);
            }
            q.page = q.page.saturating_add(1);
        }
    }
}

#[async_trait]
impl<R: SessionRepository> SessionRepository for EncryptedRepository<R> {
    fn capabilities(&self) -> Capabilities {
        // Search runs here over opened events: literal and ranked alike.
        let mut c = self.inner.capabilities();
        c.ranked_search = true;
        c
    }

    async fn create(&self, mut session: NewSession) -> Result<Session> {
        let (key, record) = new_data_key(&self.ring, session.id.as_str())?;
        let seal = SessionSeal::of_owner(
            &self.ring,
            Some((key, Format::V2)),
            [session.id.as_str(), &session.app, &session.user_id],
        );
        let mut metadata = seal.seal_metadata(&session.metadata)?;
        metadata.insert(KEY_RECORD.to_owned(), record);
        session.metadata = metadata;
        session.state = seal.seal_state(&session.state)?;
        let stored = self.inner.create(session).await?;
        seal.open_session(stored)
    }

    async fn get(&self, id: &SessionId) -> Result<Session> {
        let s = self.inner.get(id).await?;
        self.seal_of(&s)?.open_session(s)
    }

    /// The owner's ids are stored in the clear: the inner store reads them
    /// without the session being opened.
    async fn owner_of(&self, id: &SessionId) -> Result<session_core::Owner> {
        self.inner.owner_of(id).await
    }

    async fn update(&self, id: &SessionId, mut update: SessionUpdate) -> Result<Session> {
        let stored = self.stored_for_write(id).await?;
        let seal = self.seal_of(&stored)?;
        if let Some(m) = &update.metadata {
            let mut sealed = seal.seal_metadata(m)?;
            if let Some(record) = stored.metadata.get(KEY_RECORD) {
                sealed.insert(KEY_RECORD.to_owned(), record.clone());
            }
            update.metadata = Some(sealed);
        }
        if let Some(s) = &update.state {
            update.state = Some(seal.seal_state(s)?);
        }
        let updated = self.inner.update(id, update).await?;
        seal.open_session(updated)
    }

    async fn delete(&self, id: &SessionId) -> Result<bool> {
        self.inner.delete(id).await
    }

    async fn list(&self, query: &SessionQuery) -> Result<Page<Session>> {
        query.check(&self.limits)?;
        let sealed_filters = query.metadata.iter().any(|(k, _)| !plain_metadata(k));
        let page = if sealed_filters {
            // Sealed values match nothing in the store: filter opened ones here.
            let mut broad = query.clone();
            broad.metadata.retain(|(k, _)| plain_metadata(k));
            let mut matching = Vec::new();
            for s in self.list_all(&broad).await? {
                let s = self.seal_of(&s)?.open_session(s)?;
                if query.matches(&s) {
                    matching.push(s);
                }
            }
            return Ok(Page::paginate(matching, query.page, query.page_size));
        } else {
            self.inner.list(query).await?
        };
        let mut out = Vec::with_capacity(page.items.len());
        for s in &page.items {
            out.push(self.seal_of(s)?.open_session(s.clone())?);
        }
        Ok(Page { items: out, ..page })
    }

    async fn purge_expired(&self, now: DateTime<Utc>) -> Result<u64> {
        self.inner.purge_expired(now).await
    }

    async fn append(&self, id: &SessionId, events: Vec<SessionEvent>) -> Result<AppendOutcome> {
        let seal = self.seal_for(id).await?;
        let sealed = self.seal_events(&seal, events)?;
        self.inner.append(id, sealed).await
    }

    async fn events(&self, id: &SessionId, filter: &EventFilter) -> Result<Page<SessionEvent>> {
        filter.check(&self.limits)?;
        let seal = self.seal_to_read(id).await?;
        if filter.keyword.is_some() {
            // The store holds sealed text: the keyword is matched here, on
            // the whole view opened, and the filter applied as one.
            let all = self.inner.all_events(id, filter.view).await?;
            let opened = all
                .into_iter()
                .map(|e| seal.open_event(e))
                .collect::<Result<Vec<_>>>()?;
            return filter.apply(opened.iter());
        }
        let page = self.inner.events(id, filter).await?;
        let mut items = Vec::with_capacity(page.items.len());
        for e in page.items.iter().cloned() {
            items.push(seal.open_event(e)?);
        }
        Ok(Page { items, ..page })
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
        let seal = self.seal_for(id).await?;
        let sealed = self.seal_events(&seal, events)?;
        self.inner
            .replace_context(id, sealed, expected_version)
            .await
    }

    async fn rewind_to(&self, id: &SessionId, to: &RewindTo) -> Result<RewindOutcome> {
        self.inner.rewind_to(id, to).await
    }

    async fn search(&self, query: &SearchQuery) -> Result<Page<SearchHit>> {
        query.check(&self.limits)?;
        let parsed = query.parsed()?;
        let ids: Vec<SessionId> = match &query.scope {
            SearchScope::Session(id) => vec![SessionId::new(id.as_str())?],
            SearchScope::User { app, user_id } => {
                let q = SessionQuery::new().app(app.as_str()).user(user_id.as_str());
                self.list_all(&q).await?.into_iter().map(|s| s.id).collect()
            }
        };
        let mut matches = Vec::new();
        for id in &ids {
            let seal = self.seal_to_read(id).await?;
            for e in self.inner.all_events(id, EventView::Archive).await? {
                let e = seal.open_event(e)?;
                if query.admits(&parsed, &e) {
                    matches.push(e);
                }
            }
        }
        Ok(page_of_matches(query, &parsed, matches, None))
    }

    async fn shared_state(&self, app: &AppName, user_id: &UserId) -> Result<SharedState> {
        let shared = self.inner.shared_state(app, user_id).await?;
        open_shared_state(&self.ring, app.as_str(), user_id.as_str(), shared)
    }

    async fn export_session(&self, id: &SessionId) -> Result<SessionDump> {
        let raw = self.inner.export_session(id).await?;
        Ok(self.open_dump(raw)?.0)
    }

    async fn context_log(&self, id: &SessionId) -> Result<session_core::ContextLog> {
        self.inner.context_log(id).await
    }

    async fn import_session(&self, dump: SessionDump) -> Result<ImportOutcome> {
        let sealed = self.seal_dump(dump)?;
        self.inner.import_session(sealed).await
    }

    async fn erase_user(&self, app: &AppName, user_id: &UserId) -> Result<Erased> {
        self.inner.erase_user(app, user_id).await
    }

    async fn prune_events(
        &self,
        id: &SessionId,
        seqs: &[u64],
        expected_version: u64,
    ) -> Result<Option<Pruned>> {
        self.inner.prune_events(id, seqs, expected_version).await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;
    use session_core::{InMemoryRepository, Message, NewSession, StateMap};

    use super::*;

    /// A session as the first format (`asenc1`) stored it: its data key
    /// record without a format, each value bound to the session id only.
    async fn first_format_session(inner: &InMemoryRepository, ring: &Keyring) -> SessionId {
        let key = Key::random();
        let id = "legacy-1";
        let (kid, wrapped) = ring
            .wrap(&key, format!("agent-session data key\u{0}{id}").as_bytes())
            .unwrap();
        let v1 = |plain: &str| format!("asenc1:{}", key.seal(id.as_bytes(), plain.as_bytes()));
        let mut metadata = StateMap::new();
        metadata.insert(KEY_RECORD.to_owned(), json!({"kid": kid, "key": wrapped}));
        metadata.insert("ticket".to_owned(), json!(v1("\"T-9\"")));
        let s = inner
            .create(
                NewSession::new("app", "alice", Utc::now())
                    .unwrap()
                    .with_id(id)
                    .unwrap()
                    .with_metadata(metadata),
            )
            .await
            .unwrap();
        let content = v1(&json!({"text": "sealed in 2025", "parts": []}).to_string());
        let event = SessionEvent::builder(Message::user(content))
            .state("note", v1("\"first format\""))
            .build()
            .unwrap();
        inner.append(&s.id, vec![event]).await.unwrap();
        s.id
    }

    #[tokio::test]
    async fn data_of_the_first_format_still_reads_and_rekey_moves_it_to_the_current() {
        let inner = Arc::new(InMemoryRepository::new());
        let ring = Keyring::generate("k1").unwrap();
        let id = first_format_session(&inner, &ring).await;
        let repo = EncryptedRepository::new(inner.clone(), ring);

        let read = repo.all_events(&id, EventView::Archive).await.unwrap();
        assert_eq!(read[0].message.text(), "sealed in 2025");
        let s = repo.get(&id).await.unwrap();
        assert_eq!(s.state["note"], "first format");
        assert_eq!(s.metadata["ticket"], "T-9");
        // Writes go on in the current format until the rekey.
        repo.append(&id, vec![SessionEvent::new(Message::assistant("noted"))])
            .await
            .unwrap();

        assert_eq!(repo.rekey(&id).await.unwrap(), Rekeyed::Rekeyed);
        assert_eq!(repo.rekey(&id).await.unwrap(), Rekeyed::UpToDate);
        let raw = format!("{:?}", inner.export_session(&id).await.unwrap());
        assert!(!raw.contains("asenc1:"), "every value resealed: {raw}");
        let read = repo.all_events(&id, EventView::Archive).await.unwrap();
        assert_eq!(read[0].message.text(), "sealed in 2025");
        assert_eq!(read[1].message.text(), "noted");
        assert_eq!(repo.get(&id).await.unwrap().state["note"], "first format");
    }
}
