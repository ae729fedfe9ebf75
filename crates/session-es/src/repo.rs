//! The [`SessionRepository`] implementation: each operation reads, decides and persists through the helpers.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use session_core::state::{ScopedDelta, SharedDelta};
use session_core::{
    check_unique_ids, prepare_events, AppName, AppendOutcome, Capabilities, EventFilter,
    ImportOutcome, InvocationId, Limits, NewSession, Page, RewindOutcome, SearchHit, SearchMode,
    SearchQuery, SearchScope, Session, SessionDump, SessionError, SessionEvent, SessionId,
    SessionQuery, SessionRepository, SessionUpdate, SharedState, UserId,
};

use crate::body;
use crate::client::BACKEND;
use crate::head::{backoff, Head};
use crate::EsRepository;

#[async_trait]
impl SessionRepository for EsRepository {
    fn capabilities(&self) -> Capabilities {
        Capabilities::basic(BACKEND)
            .with_ranked_search()
            .with_durable()
            .with_multi_process()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "create", session_id = %new.id))]
    async fn create(&self, new: NewSession) -> session_core::Result<Session> {
        let now = self.now();
        new.validate(now)?;
        let split = ScopedDelta::split(&new.state);
        let mut shared = SharedDelta::default();
        shared.add(&split);
        let head = Head::new(new.to_session(now), new.state.clone());
        let _guard = self.lock(&new.id).await;
        let mut attempt = 0;
        loop {
            backoff(&mut attempt).await;
            let existing = self.heads().load(&new.id).await?;
            if let Some(l) = &existing {
                if !l.head.session.is_expired_at(now) {
                    return Err(SessionError::AlreadyExists {
                        what: "session",
                        id: new.id.into(),
                    });
                }
            }
            if self.heads().put(existing.as_ref(), &head).await? {
                if let Some(old) = existing {
                    self.drop_incarnation(&new.id, &old.head.inc).await;
                }
                self.apply_shared(&head.session.app, &head.session.user_id, &shared)
                    .await?;
                return Ok(head.session);
            }
        }
    }

    async fn get(&self, id: &SessionId) -> session_core::Result<Session> {
        Ok(self.heads().live(id).await?.head.session)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "update", session_id = %id))]
    async fn update(&self, id: &SessionId, update: SessionUpdate) -> session_core::Result<Session> {
        let now = self.now();
        update.validate(now)?;
        let memo = self.lock(id).await;
        let mut attempt = 0;
        loop {
            backoff(&mut attempt).await;
            let cur = self.heads().writable(id).await?;
            let mut head = cur.head.clone();
            head.pending.clear();
            update.clone().apply_to(&mut head.session, now)?;
            if self.commit(&memo, &cur, &head).await? {
                return Ok(head.session);
            }
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "delete", session_id = %id))]
    async fn delete(&self, id: &SessionId) -> session_core::Result<bool> {
        let _guard = self.lock(id).await;
        self.delete_head(id, |_| true).await
    }

    async fn list(&self, query: &SessionQuery) -> session_core::Result<Page<Session>> {
        query.check(&self.limits)?;
        let Some(offset) = query.page.checked_mul(query.page_size) else {
            return Ok(Page::empty(query.page, query.page_size));
        };
        let items = self.list_sessions(query, offset).await?;
        Ok(Page::from_overfetch(items, query.page, query.page_size))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "purge_expired"))]
    async fn purge_expired(&self, now: DateTime<Utc>) -> session_core::Result<u64> {
        let ids = self.expired_ids(now).await?;
        let mut n = 0;
        for id in ids {
            let _guard = self.lock(&id).await;
            // Re-checked on the current head: an expiry moved since the search keeps the session.
            if self
                .delete_head(&id, |head| head.session.is_expired_at(now))
                .await?
            {
                n += 1;
            }
        }
        Ok(n)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "append", session_id = %id, events = events.len()))]
    async fn append(
        &self,
        id: &SessionId,
        mut events: Vec<SessionEvent>,
    ) -> session_core::Result<AppendOutcome> {
        let bodies = prepare_events(&mut events, &self.limits)?;
        let mut memo = self.lock(id).await;
        let mut attempt = 0;
        loop {
            backoff(&mut attempt).await;
            let cur = self.heads().writable(id).await?;
            let mut head = cur.head.clone();
            let placed = self.place(&mut head, &events, &bodies).await?;
            let written = placed.new.len();
            if written == 0 {
                return Ok(AppendOutcome {
                    version: head.session.version,
                    seqs: placed.seqs,
                    written,
                });
            }
            head.session.context_tokens = head
                .session
                .context_tokens
                .saturating_add(placed.new.iter().map(|p| u64::from(p.tokens)).sum::<u64>());
            head.pending = placed.new;
            head.touch(self.now())?;
            if self.commit(&memo, &cur, &head).await? {
                self.after_commit(&mut memo, &head, &placed.shared).await?;
                return Ok(AppendOutcome {
                    version: head.session.version,
                    seqs: placed.seqs,
                    written,
                });
            }
        }
    }

    async fn events(
        &self,
        id: &SessionId,
        filter: &EventFilter,
    ) -> session_core::Result<Page<SessionEvent>> {
        filter.check(&self.limits)?;
        let head = self.heads().live(id).await?.head;
        self.events_page(&head, filter).await
    }

    async fn event_version(&self, id: &SessionId) -> session_core::Result<u64> {
        Ok(self.heads().live(id).await?.head.session.version)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "replace_context", session_id = %id, events = events.len()))]
    async fn replace_context(
        &self,
        id: &SessionId,
        mut events: Vec<SessionEvent>,
        expected_version: u64,
    ) -> session_core::Result<bool> {
        let bodies = prepare_events(&mut events, &self.limits)?;
        check_unique_ids(&events)?;
        let mut memo = self.lock(id).await;
        let mut attempt = 0;
        loop {
            backoff(&mut attempt).await;
            let cur = self.heads().writable(id).await?;
            if cur.head.session.version != expected_version {
                return Ok(false);
            }
            let mut head = cur.head.clone();
            let placed = self.place(&mut head, &events, &bodies).await?;
            head.set_context(&placed.seqs, &placed.tokens);
            head.pending = placed.new;
            head.touch(self.now())?;
            if self.commit(&memo, &cur, &head).await? {
                self.after_commit(&mut memo, &head, &placed.shared).await?;
                return Ok(true);
            }
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "rewind", session_id = %id))]
    async fn rewind(
        &self,
        id: &SessionId,
        before_invocation_id: &InvocationId,
    ) -> session_core::Result<RewindOutcome> {
        let memo = self.lock(id).await;
        let mut attempt = 0;
        loop {
            backoff(&mut attempt).await;
            let cur = self.heads().writable(id).await?;
            let head0 = &cur.head;
            let all = self.all_events(head0).await?;
            let Some(from) = all
                .iter()
                .find(|e| e.invocation_id.as_deref() == Some(before_invocation_id.as_str()))
                .map(|e| e.seq)
            else {
                return Err(SessionError::NotFound {
                    what: "invocation",
                    id: before_invocation_id.to_string(),
                });
            };
            let kept: Vec<&SessionEvent> = all.iter().filter(|e| e.seq < from).collect();
            let removed = all.len() - kept.len();
            let mut head = head0.clone();
            head.rewind_to(from, &kept);
            head.touch(self.now())?;
            if self.commit(&memo, &cur, &head).await? {
                self.drop_rewound(id, &head.inc, from).await;
                return Ok(RewindOutcome {
                    version: head.session.version,
                    removed,
                });
            }
        }
    }

    async fn search(&self, query: &SearchQuery) -> session_core::Result<Page<SearchHit>> {
        query.check(&self.limits)?;
        if query.mode == SearchMode::Ranked {
            return self.search_ranked(query).await;
        }
        match &query.scope {
            SearchScope::Session(id) => {
                let f = EventFilter::archive()
                    .keyword(query.text.clone())
                    .page(query.page, query.page_size);
                Ok(self
                    .events(&SessionId::new(id.as_str())?, &f)
                    .await?
                    .map(|e| SearchHit {
                        session_id: e.session_id.clone(),
                        event: e,
                        score: None,
                    }))
            }
            SearchScope::User { app, user_id } => {
                self.search_literal_all(app, user_id, query).await
            }
        }
    }

    async fn shared_state(
        &self,
        app: &AppName,
        user_id: &UserId,
    ) -> session_core::Result<SharedState> {
        let app_state = self
            .read_state_doc(&Self::state_doc_id(app, None))
            .await?
            .map(|(m, _, _)| m)
            .unwrap_or_default();
        let user_state = self
            .read_state_doc(&Self::state_doc_id(app, Some(user_id)))
            .await?
            .map(|(m, _, _)| m)
            .unwrap_or_default();
        Ok(SharedState {
            app: app_state,
            user: user_state,
        })
    }

    async fn export_session(&self, id: &SessionId) -> session_core::Result<SessionDump> {
        let head = self.heads().live(id).await?.head;
        let events = self.all_events(&head).await?;
        let context = head.context_seqs(&events);
        let shared = self
            .shared_state(&head.session.app, &head.session.user_id)
            .await?;
        Ok(SessionDump {
            session: head.session,
            initial_state: head.initial_state,
            last_seq: head.last_seq,
            events,
            context,
            shared,
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = BACKEND, op = "import", session_id = %dump.session.id))]
    async fn import_session(&self, mut dump: SessionDump) -> session_core::Result<ImportOutcome> {
        dump.validate()?;
        let id = dump.session.id.clone();
        let tokens: HashMap<u64, u32> = dump
            .events
            .iter()
            .map(|e| (e.seq, e.token_estimate))
            .collect();
        let seqs: Vec<u64> = dump.events.iter().map(|e| e.seq).collect();
        let mut session = dump.session.clone();
        session.event_count = u64::try_from(dump.events.len()).unwrap_or(u64::MAX);
        session.context_tokens = dump.context_tokens();
        let bodies = prepare_events(&mut dump.events, &Limits::unlimited())?;
        let head = Head {
            last_seq: dump.last_seq,
            base: dump
                .context
                .iter()
                .map(|s| [*s, u64::from(tokens.get(s).copied().unwrap_or(0))])
                .collect(),
            mark: dump.last_seq,
            ..Head::new(session, dump.initial_state.clone())
        };
        let mut docs = Vec::with_capacity(dump.events.len());
        for ((e, b), seq) in dump.events.iter().zip(&bodies).zip(&seqs) {
            docs.push((*seq, body::event_doc(head.owner(), *seq, e, b)?));
        }
        let mut written = false;
        let _guard = self.lock(&id).await;
        let mut attempt = 0;
        loop {
            backoff(&mut attempt).await;
            let existing = self.heads().load(&id).await?;
            if let Some(l) = &existing {
                if !l.head.session.is_expired_at(self.now())
                    && l.head.session.version >= dump.session.version
                {
                    if written {
                        self.drop_incarnation(&id, &head.inc).await;
                    }
                    return Ok(ImportOutcome::Unchanged);
                }
            }
            if !written {
                self.create_events(&head, docs.clone()).await?;
                written = true;
            }
            if self.heads().put(existing.as_ref(), &head).await? {
                if let Some(old) = existing {
                    self.drop_incarnation(&id, &old.head.inc).await;
                }
                let s = &head.session;
                self.replace_shared(&s.app, &s.user_id, &dump.shared)
                    .await?;
                return Ok(ImportOutcome::Imported);
            }
        }
    }
}
