//! Each session's search index: one string per trigram holding the seqs of
//! the events that contain it (LEB128, appended), under the session's hash
//! tag, with a watermark (the last seq indexed) beside it.
//!
//! Appends do not touch it: a search first indexes the events above the
//! watermark (at most [`BATCH`] per script call; a script refuses a batch
//! whose watermark moved, so two searchers never index the same events
//! twice), then reads the posting lists of the query's rarest trigrams,
//! intersects them per term, intersects the terms (or, in any-of mode,
//! unites them) and checks the candidates with the reference matcher.
//! Seqs are never reused, so postings of rewound events only cost a
//! lookup. The trigram keys expire with the session (see `index_expiry.lua`).

use std::collections::BTreeMap;
use std::sync::Arc;

use redis::Value;
use session_core::search::{
    combine_term_candidates, intersect_all, page_of_first_matches, push_varint, read_limit,
    read_varint, trigrams_of, trigrams_of_folded, Trigram,
};
use session_core::{
    page_of_matches, EventView, Page, ParsedQuery, RankStats, SearchHit, SearchQuery, SessionEvent,
    SharedClock,
};

use crate::conn::Conn;
use crate::error::{bad_reply, map_err};
use crate::events::{EventLog, CHUNK};
use crate::keys::{KeySpace, ARCHIVE, EVENTS, HEAD, SEARCH_MARK, SEARCH_TRIGRAMS};
use crate::scripts::Scripts;

/// Events indexed per script call.
const BATCH: usize = 500;
/// Posting lists read per required term: its rarest trigrams (enough to
/// narrow; the matcher checks what is left).
const LISTS_PER_TERM: usize = 3;

/// The seqs of a posting list, sorted and deduplicated; a damaged tail is ignored.
fn decode(mut bytes: &[u8]) -> Vec<u64> {
    let mut out: Vec<u64> = std::iter::from_fn(|| read_varint(&mut bytes)).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Candidates of one session and, per required term, how many events hold its rarest trigrams.
struct Candidates {
    /// `None`: no term long enough to narrow (every event is a candidate).
    seqs: Option<Vec<u64>>,
    /// Per required term (in query order): an upper bound of the events holding it, if known.
    doc_freq: Vec<Option<u64>>,
}

/// The search index of every session: built on demand, read by searches.
#[derive(Clone)]
pub(crate) struct SearchIndex {
    conn: Conn,
    keys: KeySpace,
    scripts: Arc<Scripts>,
    clock: SharedClock,
    events: EventLog,
}

impl SearchIndex {
    /// The search index over `conn`, under `keys`, built with `scripts`
    /// from the bodies `events` reads.
    pub(crate) fn new(
        conn: Conn,
        keys: KeySpace,
        scripts: Arc<Scripts>,
        clock: SharedClock,
        events: EventLog,
    ) -> Self {
        Self {
            conn,
            keys,
            scripts,
            clock,
            events,
        }
    }

    /// Search of the archives of `sessions` (id, event count): per session,
    /// candidates from its trigram index (brought up to date first),
    /// checked with the reference matcher.
    pub(crate) async fn search(
        &self,
        query: &SearchQuery,
        parsed: &ParsedQuery,
        sessions: &[(String, u64)],
    ) -> session_core::Result<Page<SearchHit>> {
        let mut matches = Vec::new();
        let mut unreadable = Vec::new();
        let mut stats = RankStats::for_query(parsed);
        let limit = read_limit(query, sessions.len());
        let (in_order, enough) = (limit.is_some(), limit.unwrap_or(usize::MAX));
        let mut complete = true;
        for (id, events) in sessions {
            let found = self.candidates(id, parsed).await?;
            stats.docs = stats.docs.saturating_add(*events);
            for (df, n) in stats.doc_freq.iter_mut().zip(&found.doc_freq) {
                *df = df.saturating_add(n.unwrap_or(0));
            }
            let seqs = match found.seqs {
                Some(seqs) => seqs,
                None => self.events.seqs(id, EventView::Archive).await?,
            };
            let mut chunks = seqs.chunks(CHUNK);
            while matches.len() < enough {
                let Some(chunk) = chunks.next() else { break };
                let (events, bad) = self.events.fetch_existing(id, chunk).await?;
                unreadable.extend(bad);
                matches.extend(events.into_iter().filter(|e| query.admits(parsed, e)));
            }
            complete &= chunks.next().is_none();
        }
        let mut page = if in_order {
            page_of_first_matches(query, parsed, matches, complete)
        } else {
            page_of_matches(query, parsed, matches, Some(&stats))
        };
        page.unreadable = unreadable;
        Ok(page)
    }

    /// Brings session `id`'s index up to its archive.
    async fn index_session(&self, id: &str) -> session_core::Result<()> {
        let keys = self.keys.session(id);
        let (head, mark, set) = (
            keys.get(HEAD),
            keys.get(SEARCH_MARK),
            keys.get(SEARCH_TRIGRAMS),
        );
        let mut c = self.conn.clone();
        let now_ms = self.clock.now().timestamp_millis();
        let _: i64 = self
            .scripts
            .index_expiry
            .key(head)
            .key(mark)
            .key(set)
            .arg(now_ms)
            .invoke_async(&mut c)
            .await
            .map_err(map_err)?;
        loop {
            let through: Option<String> = redis::cmd("HGET")
                .arg(mark)
                .arg("through")
                .query_async(&mut c)
                .await
                .map_err(map_err)?;
            let from = match through.as_deref() {
                None | Some("") => "-inf".to_owned(),
                Some(s) => format!("({s}"),
            };
            let seqs: Vec<u64> = redis::cmd("ZRANGEBYSCORE")
                .arg(keys.get(ARCHIVE))
                .arg(&from)
                .arg("+inf")
                .arg("LIMIT")
                .arg(0)
                .arg(BATCH)
                .query_async(&mut c)
                .await
                .map_err(map_err)?;
            let Some(last) = seqs.last().copied() else {
                return Ok(());
            };
            let bodies: Vec<Option<String>> = redis::cmd("HMGET")
                .arg(keys.get(EVENTS))
                .arg(&seqs)
                .query_async(&mut c)
                .await
                .map_err(map_err)?;
            let mut lists: BTreeMap<Trigram, Vec<u8>> = BTreeMap::new();
            for (seq, body) in seqs.iter().zip(bodies) {
                // A missing or corrupt body is reported by reads; the index leaves it out.
                let Some(Ok(e)) = body.map(|b| SessionEvent::decode_stored(id, *seq, &b)) else {
                    tracing::warn!(session_id = %id, seq, "unreadable event left out of the search index");
                    continue;
                };
                for t in trigrams_of(&e.message.search_text()) {
                    push_varint(lists.entry(t).or_default(), *seq);
                }
            }
            let mut inv = self.scripts.index.key(head);
            inv.key(mark).key(set);
            inv.arg(through.unwrap_or_default()).arg(last);
            for (t, bytes) in &lists {
                inv.key(self.keys.trigram(id, *t)).arg(bytes.as_slice());
            }
            let _: i64 = inv.invoke_async(&mut c).await.map_err(map_err)?;
        }
    }

    /// The candidate seqs of `query` in session `id` (indexed first).
    async fn candidates(&self, id: &str, query: &ParsedQuery) -> session_core::Result<Candidates> {
        self.index_session(id).await?;
        let terms: Vec<Vec<Trigram>> = query
            .index_terms()
            .map(|t| trigrams_of_folded(&t))
            .collect();
        let keys: Vec<String> = terms
            .iter()
            .flatten()
            .map(|t| self.keys.trigram(id, *t))
            .collect();
        if keys.is_empty() {
            return Ok(Candidates {
                seqs: None,
                doc_freq: vec![None; terms.len()],
            });
        }
        let mut c = self.conn.clone();
        let mut pipe = redis::pipe();
        for k in &keys {
            pipe.cmd("STRLEN").arg(k);
        }
        let lens: Vec<u64> = pipe.query_async(&mut c).await.map_err(map_err)?;
        // Per term, the indexes (into `keys`) of its rarest trigrams.
        let mut picked: Vec<Vec<usize>> = Vec::with_capacity(terms.len());
        let mut at = 0;
        for term in &terms {
            let mut idx: Vec<usize> = (at..at + term.len()).collect();
            idx.sort_by_key(|i| lens.get(*i).copied().unwrap_or(0));
            idx.truncate(LISTS_PER_TERM);
            picked.push(idx);
            at += term.len();
        }
        let wanted: Vec<&String> = picked
            .iter()
            .flatten()
            .filter_map(|i| keys.get(*i))
            .collect();
        let raw: Vec<Value> = redis::cmd("MGET")
            .arg(&wanted)
            .query_async(&mut c)
            .await
            .map_err(map_err)?;
        let mut lists = raw.into_iter().map(|v| match v {
            Value::Nil => Ok(Vec::new()),
            other => redis::from_redis_value::<Vec<u8>>(other)
                .map(|b| decode(&b))
                .map_err(|e| bad_reply("search index", e)),
        });
        let mut per_term: Vec<Option<Vec<u64>>> = Vec::with_capacity(picked.len());
        for term in &picked {
            let mut read = Vec::with_capacity(term.len());
            for _ in term {
                read.push(lists.next().transpose()?.unwrap_or_default());
            }
            per_term.push(intersect_all(read));
        }
        let doc_freq = per_term
            .iter()
            .map(|c| {
                c.as_ref()
                    .map(|a| u64::try_from(a.len()).unwrap_or(u64::MAX))
            })
            .collect();
        let seqs = combine_term_candidates(query, per_term);
        Ok(Candidates { seqs, doc_freq })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posting_lists_round_trip_and_merge_appends() {
        let mut bytes = Vec::new();
        for s in [5, 300, 70_000, 5] {
            push_varint(&mut bytes, s);
        }
        assert_eq!(decode(&bytes), [5, 300, 70_000]);
        assert_eq!(decode(&[0x80]), Vec::<u64>::new(), "a torn tail is ignored");
    }
}
