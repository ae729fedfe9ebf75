//! The [`SessionRepository`] implementation: read the head, plan in `session_core::plan`, persist by compare-and-swap of the head.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use session_core::plan::{
    plan_update, AppendPlan, ContextPlan, CreatePlan, EventBatch, ImportPlan, RewindPlan,
};
use session_core::retention::{PrunePlan, Pruned, Standing};
use session_core::state::SharedDelta;
use session_core::{
    prepare_events, AppName, AppendOutcome, Capabilities, ContextLog, Erased, EventFilter,
    EventView, ImportOutcome, Limits, NewSession, Page, RewindOutcome, RewindTo, SearchHit,
    SearchMode, SearchQuery, Session, SessionDump, SessionEvent, SessionId, SessionQuery,
    SessionRepository, SessionUpdate, SharedState, UserId,
};

use crate::error::BACKEND;
use crate::head::{Head, Loaded};
use crate::locks::{backoff, Memo};
use crate::repository::EsRepository;

#[async_trait]
impl SessionRepository for EsRepository {
    fn capabilities(&self) -> Capabilities {
        Capabilities::basic(BACKEND)
            .with_ranked_search()
            .with_durable()
            .with_multi_process()
    }

    async fn create(&self, new: NewSession) -> session_core::Result<Session> {
        let id = new.id.clone();
        let _guard = self.locks.lock(&id).await;
        let mut attempt = 0;
        loop {
            backoff(&mut attempt).await;
            let existing = self.heads.load(&id).await?;
            let expiry = existing.as_ref().map(|l| l.head.session.expires_at);
            let plan = CreatePlan::new(new.clone(), expiry, self.now())?;
            let head = Head::new(plan.session, plan.initial_state);
            if self.heads.put(existing.as_ref(), &head).await? {
                if let Some(old) = existing {
                    // An expired session under the same id: replaced.
                    self.events.drop_incarnation(&id, &old.head.inc).await;
                }
                self.scopes
                    .apply(&head.session.app, &head.session.user_id, &plan.shared)
                    .await?;
                return Ok(head.session);
            }
        }
    }

    async fn get(&self, id: &SessionId) -> session_core::Result<Session> {
        Ok(self.heads.live(id).await?.head.session)
    }

    async fn update(&self, id: &SessionId, update: SessionUpdate) -> session_core::Result<Session> {
        let now = self.now();
        update.validate(now)?;
        let memo = self.locks.lock(id).await;
        let mut attempt = 0;
        loop {
            backoff(&mut attempt).await;
            let cur = self.heads.writable(id).await?;
            let version = plan_update(&cur.head.plan(), &update)?;
            let mut head = cur.head.clone();
            head.pending.clear();
            update.clone().apply_to(&mut head.session, now)?;
            head.stamp(version, now);
            if self.commit(&memo, &cur, &head).await? {
                return Ok(head.session);
            }
        }
    }

    async fn delete(&self, id: &SessionId) -> session_core::Result<bool> {
        let _guard = self.locks.lock(id).await;
        self.delete_head(id, |_| true).await
    }

    async fn erase_user(&self, app: &AppName, user_id: &UserId) -> session_core::Result<Erased> {
        let mut erased = Erased::default();
        for head in self
            .heads
            .every_of_owner(app.as_str(), user_id.as_str())
            .await?
        {
            let id = head.session.id.as_str();
            let _guard = self.locks.lock(id).await;
            if self.delete_head(id, |_| true).await? {
                erased.sessions = erased.sessions.saturating_add(1);
                erased.events = erased.events.saturating_add(head.session.event_count);
            }
            // The delete's own cleanup is best effort (an unreachable event
            // stays hidden); an erasure checks every event document is gone.
            self.events.erase_session(id).await?;
        }
        erased.user_state = self.scopes.delete_user(app, user_id).await?;
        Ok(erased)
    }

    async fn list(&self, query: &SessionQuery) -> session_core::Result<Page<Session>> {
        query.check(&self.limits)?;
        let Some(offset) = query.page.checked_mul(query.page_size) else {
            return Ok(Page::empty(query.page, query.page_size));
        };
        let items = self.heads.list(query, offset).await?;
        Ok(Page::from_overfetch(items, query.page, query.page_size))
    }

    async fn purge_expired(&self, now: DateTime<Utc>) -> session_core::Result<u64> {
        let ids = self.heads.expired_ids(now).await?;
        let mut n = 0;
        for id in ids {
            let _guard = self.locks.lock(&id).await;
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

    async fn append(
        &self,
        id: &SessionId,
        events: Vec<SessionEvent>,
    ) -> session_core::Result<AppendOutcome> {
        let batch = EventBatch::new(events, &self.limits)?;
        let mut memo = self.locks.lock(id).await;
        let mut attempt = 0;
        loop {
            backoff(&mut attempt).await;
            let cur = self.heads.writable(id).await?;
            let held = self.events.held(&cur.head, &batch.ids()).await?;
            let plan = AppendPlan::new(&cur.head.plan(), &batch, &held)?;
            if plan.is_noop() {
                return Ok(plan.outcome());
            }
            let mut head = cur.head.clone();
            head.add_events(&batch, &plan.new, plan.last_seq, &plan.state.session);
            // New events join the end of the context (every seq above the mark).
            head.session.context_tokens = head
                .session
                .context_tokens
                .saturating_add(plan.added_tokens);
            head.stamp(plan.version, self.now());
            if self.commit(&memo, &cur, &head).await? {
                self.after_commit(&mut memo, &head, &plan.state.shared)
                    .await?;
                return Ok(plan.outcome());
            }
        }
    }

    async fn events(
        &self,
        id: &SessionId,
        filter: &EventFilter,
    ) -> session_core::Result<Page<SessionEvent>> {
        filter.check(&self.limits)?;
        let head = self.heads.live(id).await?.head;
        let mut page = self.views.page(&head, filter).await?;
        if filter.view == EventView::Archive {
            ContextLog::checked(id, head.changes)?.annotate(&mut page.items);
        }
        Ok(page)
    }

    async fn event_version(&self, id: &SessionId) -> session_core::Result<u64> {
        Ok(self.heads.live(id).await?.head.session.version)
    }

    async fn replace_context(
        &self,
        id: &SessionId,
        events: Vec<SessionEvent>,
        expected_version: u64,
    ) -> session_core::Result<bool> {
        let batch = EventBatch::new(events, &self.limits)?;
        let mut memo = self.locks.lock(id).await;
        let mut attempt = 0;
        loop {
            backoff(&mut attempt).await;
            let cur = self.heads.writable(id).await?;
            let held = self.events.held(&cur.head, &batch.ids()).await?;
            let Some(plan) = ContextPlan::new(&cur.head.plan(), expected_version, &batch, &held)?
            else {
                return Ok(false);
            };
            let mut head = cur.head.clone();
            head.add_events(&batch, &plan.new, plan.last_seq, &plan.state.session);
            // The context is the batch, in order: each entry's seq with its token estimate.
            let context = plan
                .context
                .iter()
                .zip(&batch.events)
                .map(|(seq, e)| {
                    let tokens = held.get(&e.id).map_or(e.token_estimate, |s| s.tokens);
                    [*seq, u64::from(tokens)]
                })
                .collect();
            head.set_context(context, plan.context_tokens);
            let now = self.now();
            head.changes.push(plan.change(now));
            head.stamp(plan.version, now);
            if self.commit(&memo, &cur, &head).await? {
                self.after_commit(&mut memo, &head, &plan.state.shared)
                    .await?;
                return Ok(true);
            }
        }
    }

    async fn rewind_to(
        &self,
        id: &SessionId,
        to: &RewindTo,
    ) -> session_core::Result<RewindOutcome> {
        let memo = self.locks.lock(id).await;
        let mut attempt = 0;
        loop {
            backoff(&mut attempt).await;
            let cur = self.heads.writable(id).await?;
            let all = self.views.all(&cur.head).await?;
            let first = to.invocation().and_then(|invocation| {
                all.iter()
                    .find(|e| e.invocation_id.as_deref() == Some(invocation.as_str()))
                    .map(|e| e.seq)
            });
            let plan = RewindPlan::new(&cur.head.plan(), to, first)?;
            let kept: Vec<&SessionEvent> = all.iter().filter(|e| e.seq < plan.from_seq).collect();
            let removed = all.len() - kept.len();
            let mut head = cur.head.clone();
            head.rewind_to(plan.from_seq, &kept)?;
            head.stamp(plan.version, self.now());
            if self.commit(&memo, &cur, &head).await? {
                self.events.drop_rewound(id, &head.inc, plan.from_seq).await;
                return Ok(RewindOutcome {
                    version: plan.version,
                    removed,
                });
            }
        }
    }

    async fn prune_events(
        &self,
        id: &SessionId,
        seqs: &[u64],
        expected_version: u64,
    ) -> session_core::Result<Option<Pruned>> {
        let memo = self.locks.lock(id).await;
        let mut attempt = 0;
        loop {
            backoff(&mut attempt).await;
            let cur = self.heads.writable(id).await?;
            let all = self.views.all(&cur.head).await?;
            let archived: HashMap<u64, &SessionEvent> = all.iter().map(|e| (e.seq, e)).collect();
            let context: HashSet<u64> = cur.head.context_seqs(&all).into_iter().collect();
            let standing = |seq| match archived.get(&seq) {
                Some(e) => Standing::of_event(e, context.contains(&seq)),
                None => Standing::Absent,
            };
            let Some(plan) = PrunePlan::new(&cur.head.plan(), expected_version, seqs, standing)?
            else {
                return Ok(None);
            };
            let wanted: HashSet<u64> = plan.seqs.iter().copied().collect();
            let going: Vec<&SessionEvent> =
                all.iter().filter(|e| wanted.contains(&e.seq)).collect();
            let bytes = SessionEvent::stored_bytes_of(going.iter().copied())?;
            let gone: Vec<u64> = going.iter().map(|e| e.seq).collect();
            let mut head = cur.head.clone();
            head.prune(&gone, bytes);
            head.session.version = plan.version;
            if self.commit(&memo, &cur, &head).await? {
                self.events.drop_pruned(id, &head.inc, &gone).await;
                return Ok(Some(Pruned {
                    removed: u64::try_from(gone.len()).unwrap_or(u64::MAX),
                    version: plan.version,
                }));
            }
        }
    }

    async fn search(&self, query: &SearchQuery) -> session_core::Result<Page<SearchHit>> {
        query.check(&self.limits)?;
        self.capabilities().check_search(query)?;
        let parsed = query.parsed()?;
        let heads = self.heads.in_scope(&query.scope).await?;
        if query.mode == SearchMode::Ranked {
            // Relevance comes from the engine: every committed event must be in its index.
            for h in heads.iter().filter(|h| !h.pending.is_empty()) {
                self.events.index_pending(h).await?;
            }
        }
        self.event_search.page(query, &parsed, &heads).await
    }

    async fn shared_state(
        &self,
        app: &AppName,
        user_id: &UserId,
    ) -> session_core::Result<SharedState> {
        self.scopes.read(app, user_id).await
    }

    async fn context_log(&self, id: &SessionId) -> session_core::Result<ContextLog> {
        let head = self.heads.live(id).await?.head;
        ContextLog::checked(id, head.changes)
    }

    async fn export_session(&self, id: &SessionId) -> session_core::Result<SessionDump> {
        let head = self.heads.live(id).await?.head;
        let events = self.views.all(&head).await?;
        let context = head.context_seqs(&events);
        let shared = self
            .shared_state(&head.session.app, &head.session.user_id)
            .await?;
        Ok(SessionDump {
            context_log: ContextLog::checked(id, head.changes)?.into_changes(),
            session: head.session,
            initial_state: head.initial_state,
            last_seq: head.last_seq,
            events,
            context,
            shared,
        })
    }

    async fn import_session(&self, dump: SessionDump) -> session_core::Result<ImportOutcome> {
        let id = dump.session.id.clone();
        let _guard = self.locks.lock(&id).await;
        let mut dump = dump;
        // The new incarnation, its event documents written once (before the first commit attempt).
        let mut prepared: Option<Head> = None;
        let mut attempt = 0;
        loop {
            backoff(&mut attempt).await;
            let existing = self.heads.load(&id).await?;
            let live_version = existing
                .as_ref()
                .filter(|l| !l.head.session.is_expired_at(self.now()))
                .map(|l| l.head.session.version);
            let Some(plan) = ImportPlan::new(dump, live_version, &self.limits)? else {
                if let Some(head) = prepared {
                    self.events.drop_incarnation(&id, &head.inc).await;
                }
                return Ok(ImportOutcome::Unchanged);
            };
            let head = match prepared.take() {
                Some(head) => head,
                None => self.write_import(&plan).await?,
            };
            if self.heads.put(existing.as_ref(), &head).await? {
                if let Some(old) = existing {
                    self.events.drop_incarnation(&id, &old.head.inc).await;
                }
                let s = &head.session;
                self.scopes
                    .replace(&s.app, &s.user_id, &plan.dump.shared)
                    .await?;
                return Ok(ImportOutcome::Imported);
            }
            // Lost to another writer: planned again against the head it wrote.
            prepared = Some(head);
            dump = plan.dump;
        }
    }
}

impl EsRepository {
    /// Commits `new` over `old`: first makes sure `old`'s pending batch is
    /// indexed (it is about to leave the head), then swaps.
    async fn commit(&self, memo: &Memo, old: &Loaded, new: &Head) -> session_core::Result<bool> {
        if !old.head.pending.is_empty() && !memo.indexed(&old.head) {
            self.events.index_pending(&old.head).await?;
        }
        self.heads.put(Some(old), new).await
    }

    /// After a commit: the shared scopes, then the batch's event documents.
    /// The write is already durable; a failure here is repaired by the next
    /// write (documents) or reported (shared scopes).
    async fn after_commit(
        &self,
        memo: &mut Memo,
        head: &Head,
        shared: &SharedDelta,
    ) -> session_core::Result<()> {
        self.scopes
            .apply(&head.session.app, &head.session.user_id, shared)
            .await?;
        match self.events.index_pending(head).await {
            Ok(()) => memo.remember(head),
            Err(e) => {
                tracing::warn!(
                    backend = BACKEND,
                    session_id = %head.session.id,
                    error = %e,
                    "committed batch not indexed yet; the next write of the session indexes it"
                );
            }
        }
        Ok(())
    }

    /// Deletes a session's head by compare-and-swap if `still` holds for the
    /// current head (re-read after every lost race), then its documents.
    /// Whether this call deleted it.
    async fn delete_head(
        &self,
        id: &str,
        still: impl Fn(&Head) -> bool,
    ) -> session_core::Result<bool> {
        match self.heads.delete_if(id, still).await? {
            Some(gone) => {
                self.events.drop_incarnation(id, &gone.inc).await;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The head of an imported session (a new incarnation), after writing its event documents.
    async fn write_import(&self, plan: &ImportPlan) -> session_core::Result<Head> {
        let d = &plan.dump;
        let tokens: HashMap<u64, u32> =
            d.events.iter().map(|e| (e.seq, e.token_estimate)).collect();
        let mut events = d.events.clone();
        let bodies = prepare_events(&mut events, &Limits::unlimited())?;
        let head = Head {
            last_seq: d.last_seq,
            base: d
                .context
                .iter()
                .map(|s| [*s, u64::from(tokens.get(s).copied().unwrap_or(0))])
                .collect(),
            mark: d.last_seq,
            changes: d.context_log.clone(),
            ..Head::new(d.session.clone(), d.initial_state.clone())
        };
        let mut docs = Vec::with_capacity(events.len());
        // Encoding cleared the seqs: they come from the dump.
        for ((e, b), seq) in events
            .iter()
            .zip(&bodies)
            .zip(d.events.iter().map(|e| e.seq))
        {
            docs.push((seq, self.events.doc(&head, seq, e, b)?));
        }
        self.events.create(&head, docs).await?;
        Ok(head)
    }
}
