//! Queries over many sessions: literal search of archives, and listings from the activity indexes.

use session_core::{
    contains_folded, fold_case, ErrorKind, EventView, Page, SearchHit, SearchQuery, SearchScope,
    Session, SessionId, SessionQuery,
};

use crate::read::{decode_session, CHUNK};
use crate::RedisRepository;

impl RedisRepository {
    /// Literal search: the archives of the scope, scanned in chunks and matched on the client.
    pub(crate) async fn search_archives(
        &self,
        query: &SearchQuery,
    ) -> session_core::Result<Page<SearchHit>> {
        let needle = fold_case(&query.text);
        let ids: Vec<String> = match &query.scope {
            SearchScope::Session(id) => {
                let id = SessionId::new(id.as_str())?;
                self.live(&id).await?;
                vec![id.into_string()]
            }
            SearchScope::User { app, user_id } => {
                let now = self.now();
                let mut out = Vec::new();
                for id in self.ids_in(&self.keys.index_owner(app, user_id)).await? {
                    if let Some((f, st)) = self.raw_session(&id).await? {
                        // The index is a hint: the session itself says who owns it.
                        let s = decode_session(&id, &f, st)?;
                        if !s.is_expired_at(now) && s.app == *app && s.user_id == *user_id {
                            out.push(id);
                        }
                    }
                }
                out
            }
        };
        let mut hits = Vec::new();
        for id in &ids {
            let seqs = self.seqs(id, EventView::Archive).await?;
            for chunk in seqs.chunks(CHUNK) {
                for e in self.fetch(id, chunk).await? {
                    if contains_folded(&e.message.search_text(), &needle) {
                        hits.push(e);
                    }
                }
            }
        }
        if ids.len() > 1 {
            hits.sort_by(|a, b| {
                (a.timestamp, &a.session_id, a.seq).cmp(&(b.timestamp, &b.session_id, b.seq))
            });
        }
        Ok(Page::paginate(
            hits.into_iter().map(|e| SearchHit {
                session_id: e.session_id.clone(),
                event: e,
                score: None,
            }),
            query.page,
            query.page_size,
        ))
    }

    /// Sessions matching `query`, read through the smallest matching index.
    pub(crate) async fn list_sessions(
        &self,
        query: &SessionQuery,
    ) -> session_core::Result<Page<Session>> {
        let index = match (&query.app, &query.user_id, &query.key) {
            (Some(a), Some(u), _) => self.keys.index_owner(a, u),
            (Some(a), None, Some(k)) => self.keys.index_key(a, k),
            _ => self.keys.index_all(),
        };
        let now = self.now();
        let mut found = Vec::new();
        let mut unreadable = Vec::new();
        for id in self.ids_in(&index).await? {
            let read = match self.raw_session(&id).await {
                Ok(None) => continue,
                Ok(Some((f, st))) => decode_session(&id, &f, st),
                Err(e) if e.kind() == ErrorKind::Serialization => Err(e),
                Err(e) => return Err(e),
            };
            match read {
                Ok(s) if !s.is_expired_at(now) && query.matches(&s) => found.push(s),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(id = %id, kind = ?e.kind(), "unreadable session left out of the list");
                    unreadable.push(id);
                }
            }
        }
        found.sort_by(|a, b| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        let mut page = Page::paginate(found, query.page, query.page_size);
        // Named only where the index read is the asker's own (owner index) or
        // an operator's unfiltered listing, so no owner sees another's ids.
        let own_index = query.app.is_some() && query.user_id.is_some();
        if query.page == 0 && (own_index || query.is_unfiltered()) {
            page.unreadable = unreadable;
        }
        Ok(page)
    }
}
