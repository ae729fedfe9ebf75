//! Literal search: a streaming scan of the logs in scope, keeping only matches.

use std::path::PathBuf;

use session_core::{
    contains_folded, fold_case, Page, SearchHit, SearchQuery, SearchScope, SessionId,
};

use crate::format::SessionFile;
use crate::{log, Inner, Result};

impl Inner {
    /// The matches of a checked literal query, chronological.
    pub(crate) fn search(&self, q: &SearchQuery) -> Result<Page<SearchHit>> {
        let needle = fold_case(&q.text);
        let now = self.now();
        let files: Vec<(PathBuf, SessionFile)> = match &q.scope {
            SearchScope::Session(id) => vec![self.live(&id.parse::<SessionId>()?)?],
            SearchScope::User { app, user_id } => self
                .readable_sessions()?
                .into_iter()
                .filter(|f| {
                    f.session.app == *app
                        && f.session.user_id == *user_id
                        && !f.session.is_expired_at(now)
                })
                .map(|f| Ok((self.layout.session_dir(&f.session.id)?, f)))
                .collect::<Result<_>>()?,
        };
        let multi = files.len() > 1;
        let mut hits = Vec::new();
        for (dir, f) in &files {
            // Streaming: only matching events are kept in memory.
            let scan = log::scan(&log::path(dir), f.log_bytes, &f.session.id, |e| {
                contains_folded(&e.message.search_text(), &needle).then_some(e)
            })?;
            hits.extend(scan.events);
        }
        if multi {
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
            q.page,
            q.page_size,
        ))
    }
}
