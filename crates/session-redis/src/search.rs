//! Queries over many sessions: search of archives through their indexes, and listings from the activity indexes.

use session_core::search::{page_of_first_matches, read_limit};
use session_core::{
    page_of_matches, ErrorKind, EventView, Page, RankStats, SearchHit, SearchQuery, SearchScope,
    Session, SessionId, SessionQuery,
};

use crate::read::{decode_session, CHUNK};
use crate::RedisRepository;

impl RedisRepository {
    /// Search: per session in scope, candidates from its trigram index
    /// (brought up to date first), checked with the reference matcher.
    pub(crate) async fn search_archives(
        &self,
        query: &SearchQuery,
    ) -> session_core::Result<Page<SearchHit>> {
        let parsed = query.parsed()?;
        let ids: Vec<(String, u64)> = match &query.scope {
            SearchScope::Session(id) => {
                let id = SessionId::new(id.as_str())?;
                let (_, s) = self.live(&id).await?;
                vec![(id.into_string(), s.event_count)]
            }
            SearchScope::User { app, user_id } => {
                let now = self.now();
                let mut out = Vec::new();
                for id in self.ids_in(&self.keys.index_owner(app, user_id)).await? {
                    if let Some((f, st)) = self.raw_session(&id).await? {
                        // The index is a hint: the session itself says who owns it.
                        let s = decode_session(&id, &f, st)?;
                        if !s.is_expired_at(now) && s.app == *app && s.user_id == *user_id {
                            out.push((id, s.event_count));
                        }
                    }
                }
                out
            }
        };
        let mut matches = Vec::new();
        let mut unreadable = Vec::new();
        let mut stats = RankStats::for_query(&parsed);
        let limit = read_limit(query, ids.len());
        let (in_order, enough) = (limit.is_some(), limit.unwrap_or(usize::MAX));
        let mut complete = true;
        for (id, events) in &ids {
            let found = self.candidates(id, &parsed).await?;
            stats.docs = stats.docs.saturating_add(*events);
            for (df, n) in stats.doc_freq.iter_mut().zip(&found.doc_freq) {
                *df = df.saturating_add(n.unwrap_or(0));
            }
            let seqs = match found.seqs {
                Some(seqs) => seqs,
                None => self.seqs(id, EventView::Archive).await?,
            };
            let mut chunks = seqs.chunks(CHUNK);
            while matches.len() < enough {
                let Some(chunk) = chunks.next() else { break };
                let (events, bad) = self.fetch_existing(id, chunk).await?;
                unreadable.extend(bad);
                matches.extend(
                    events
                        .into_iter()
                        .filter(|e| parsed.matches(&e.message.search_text())),
                );
            }
            complete &= chunks.next().is_none();
        }
        let mut page = if in_order {
            page_of_first_matches(query, &parsed, matches, complete)
        } else {
            page_of_matches(query, &parsed, matches, Some(&stats))
        };
        page.unreadable = unreadable;
        Ok(page)
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
