//! Search: candidates from each session's trigram index, read from the log
//! by offset and checked with the reference matcher.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use session_core::search::{page_of_first_matches, read_limit};
use session_core::{
    page_of_matches, Page, ParsedQuery, RankStats, SearchHit, SearchQuery, SearchScope,
    SessionEvent, SessionId,
};

use crate::error::{io_err, Result};
use crate::format::{count, SessionFile};
use crate::log;
use crate::repository::Inner;
use crate::search_index::LogIndex;

/// The events at `seqs` (candidates of the index), read by offset, that
/// `q` admits; at most `enough` of them, and whether every candidate was read.
fn read_candidates(
    dir: &Path,
    file: &SessionFile,
    index: &LogIndex,
    seqs: &[u64],
    q: &SearchQuery,
    parsed: &ParsedQuery,
    enough: usize,
) -> Result<(Vec<SessionEvent>, bool)> {
    let log_path = log::path(dir);
    let mut reader = BufReader::new(File::open(&log_path).map_err(|e| io_err(&log_path, e))?);
    let mut out = Vec::new();
    let mut line = Vec::new();
    for (i, seq) in seqs.iter().enumerate() {
        if out.len() >= enough {
            return Ok((out, i == seqs.len()));
        }
        let Some(at) = index.offset_of(*seq) else {
            continue;
        };
        if at >= file.log_bytes {
            continue;
        }
        reader
            .seek(SeekFrom::Start(at))
            .map_err(|e| io_err(&log_path, e))?;
        line.clear();
        reader
            .read_until(b'\n', &mut line)
            .map_err(|e| io_err(&log_path, e))?;
        let Ok(mut e) = serde_json::from_slice::<SessionEvent>(&line) else {
            continue;
        };
        if e.seq == *seq && q.admits(parsed, &e) {
            file.session.id.as_str().clone_into(&mut e.session_id);
            out.push(e);
        }
    }
    Ok((out, true))
}

impl Inner {
    /// The hits of a checked query.
    pub(crate) fn search(&self, q: &SearchQuery) -> Result<Page<SearchHit>> {
        let parsed = q.parsed()?;
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
        let mut matches = Vec::new();
        let mut stats = RankStats::for_query(&parsed);
        let limit = read_limit(q, files.len());
        let (in_order, enough) = (limit.is_some(), limit.unwrap_or(usize::MAX));
        let mut complete = true;
        let mut indexes = self.search_indexes.lock();
        for (dir, f) in &files {
            let index = indexes.get(dir, &f.session.id, f.log_bytes, self.sync)?;
            stats.docs = stats.docs.saturating_add(count(index.len()));
            for (df, term) in stats.doc_freq.iter_mut().zip(parsed.include()) {
                *df = df.saturating_add(index.trigrams.doc_freq(term).unwrap_or(0));
            }
            if let Some(seqs) = index.trigrams.candidates(&parsed) {
                let (found, all) = read_candidates(dir, f, index, &seqs, q, &parsed, enough)?;
                matches.extend(found);
                complete &= all;
            } else {
                // No term long enough to narrow: a streaming scan keeps only matches.
                let scan = log::scan(&log::path(dir), f.log_bytes, &f.session.id, |e| {
                    q.admits(&parsed, &e).then_some(e)
                })?;
                matches.extend(scan.events);
            }
        }
        drop(indexes);
        if in_order {
            return Ok(page_of_first_matches(q, &parsed, matches, complete));
        }
        Ok(page_of_matches(q, &parsed, matches, Some(&stats)))
    }
}
