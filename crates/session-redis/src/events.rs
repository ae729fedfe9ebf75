//! The event log: each session's event bodies by seq, its archive and
//! context sets, its context's history and its initial state.
//!
//! A view's pages and tails are read straight from its sorted set.
//!
//! The archive set scores each seq by itself and the context set by its
//! position, so a keyset cursor ([`EventFilter::after`]) is a score range
//! and a page costs O(log n + page) however far into the session it is.
//! A filtered read fetches bodies in chunks from the cursor (or from the
//! end, for `last_n`) until the page is full, so it reads no further than
//! the matches it needs.

use std::collections::HashMap;

use session_core::plan::ReadWindow;
use session_core::{
    ContextChange, ContextLog, EventFilter, EventView, Page, SessionEvent, SessionId, StateMap,
    SyntheticFilter,
};

use crate::conn::Conn;
use crate::decode::decode_state;
use crate::error::{corrupt, map_err};
use crate::keys::{KeySpace, ARCHIVE, CONTEXT, CONTEXT_CHANGES, EVENTS, INITIAL};

/// Events fetched per round trip when a read scans a session.
pub(crate) const CHUNK: usize = 500;

/// Bodies fetched per round trip by a filtered read.
const FILTER_CHUNK: usize = 256;

/// The score range of a view past an optional cursor: `ZRANGE … BYSCORE` bounds.
struct Range {
    key: String,
    /// Exclusive lower bound (`(score`) or `-inf`.
    min: String,
}

/// The event log: reads of each session's events, views and context history.
#[derive(Clone)]
pub(crate) struct EventLog {
    conn: Conn,
    keys: KeySpace,
}

impl EventLog {
    /// The event log over `conn`, under `keys`.
    pub(crate) fn new(conn: Conn, keys: KeySpace) -> Self {
        Self { conn, keys }
    }

    /// The stored bodies of the events at `seqs` (`None` where absent), in bounded chunks.
    async fn bodies(&self, id: &str, seqs: &[u64]) -> session_core::Result<Vec<Option<String>>> {
        let keys = self.keys.session(id);
        let mut c = self.conn.clone();
        let mut out = Vec::with_capacity(seqs.len());
        for chunk in seqs.chunks(CHUNK) {
            let bodies: Vec<Option<String>> = redis::cmd("HMGET")
                .arg(keys.get(EVENTS))
                .arg(chunk)
                .query_async(&mut c)
                .await
                .map_err(map_err)?;
            out.extend(bodies);
        }
        Ok(out)
    }

    /// Events by seq, fetched in bounded chunks; a missing body is corrupt data.
    pub(crate) async fn fetch(
        &self,
        id: &str,
        seqs: &[u64],
    ) -> session_core::Result<Vec<SessionEvent>> {
        let bodies = self.bodies(id, seqs).await?;
        let mut out = Vec::with_capacity(seqs.len());
        for (seq, body) in seqs.iter().zip(bodies) {
            let body = body
                .ok_or_else(|| corrupt(id, &format!("seq {seq}"), "the event body is missing"))?;
            out.push(SessionEvent::decode_stored(id, *seq, &body)?);
        }
        Ok(out)
    }

    /// The sorted set of a view.
    fn view_key(&self, id: &str, view: EventView) -> String {
        let keys = self.keys.session(id);
        match view {
            EventView::Archive => keys.get(ARCHIVE).to_owned(),
            EventView::Context => keys.get(CONTEXT).to_owned(),
        }
    }

    /// Every seq of a view, in view order.
    pub(crate) async fn seqs(&self, id: &str, view: EventView) -> session_core::Result<Vec<u64>> {
        self.range(&self.view_key(id, view), 0, -1).await
    }

    /// `ZRANGE key start stop`.
    async fn range<T: redis::FromRedisValue>(
        &self,
        key: &str,
        start: i64,
        stop: i64,
    ) -> session_core::Result<Vec<T>> {
        let mut c = self.conn.clone();
        redis::cmd("ZRANGE")
            .arg(key)
            .arg(start)
            .arg(stop)
            .query_async(&mut c)
            .await
            .map_err(map_err)
    }

    /// The context's history of session `id`: a corrupt entry is a
    /// `Serialization` error naming the session.
    pub(crate) async fn context_log(&self, id: &SessionId) -> session_core::Result<ContextLog> {
        let mut c = self.conn.clone();
        let entries: Vec<String> = redis::cmd("LRANGE")
            .arg(self.keys.session(id).get(CONTEXT_CHANGES))
            .arg(0)
            .arg(-1)
            .query_async(&mut c)
            .await
            .map_err(map_err)?;
        let changes = entries
            .iter()
            .map(|json| ContextChange::decode(id, json))
            .collect::<session_core::Result<_>>()?;
        Ok(ContextLog::new(changes))
    }

    /// The events at `seqs` that still exist (a rewound seq is skipped), in
    /// chunks, and the `session/seq` names of those that do not decode.
    pub(crate) async fn fetch_existing(
        &self,
        id: &str,
        seqs: &[u64],
    ) -> session_core::Result<(Vec<SessionEvent>, Vec<String>)> {
        let bodies = self.bodies(id, seqs).await?;
        let mut out = Vec::with_capacity(seqs.len());
        let mut unreadable = Vec::new();
        for (seq, body) in seqs.iter().zip(bodies) {
            let Some(body) = body else { continue };
            match SessionEvent::decode_stored(id, *seq, &body) {
                Ok(e) => out.push(e),
                Err(err) => {
                    tracing::warn!(session_id = %id, seq, kind = ?err.kind(), "unreadable event left out of search results");
                    unreadable.push(format!("{id}/{seq}"));
                }
            }
        }
        Ok((out, unreadable))
    }

    /// The initial state of session `id`, what a rewind replays from.
    pub(crate) async fn initial_state(&self, id: &str) -> session_core::Result<StateMap> {
        let mut c = self.conn.clone();
        let initial: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(self.keys.session(id).get(INITIAL))
            .query_async(&mut c)
            .await
            .map_err(map_err)?;
        decode_state(initial, &format!("session {id} initial state"))
    }

    /// The page of a session's view a filter asks for (the session is live).
    pub(crate) async fn page(
        &self,
        id: &str,
        filter: &EventFilter,
    ) -> session_core::Result<Page<SessionEvent>> {
        // Redis takes a LIMIT offset up to i64::MAX; a page past it is
        // empty (the window says so), and no cursor is looked up for it.
        let window = ReadWindow::of(filter);
        if window == ReadWindow::Empty {
            return Ok(ReadWindow::empty_page(filter));
        }
        let range = self.range_past_cursor(id, filter).await?;
        let plain = filter.branch.is_none()
            && filter.from.is_none()
            && filter.to.is_none()
            && filter.roles.is_empty()
            && filter.synthetic == SyntheticFilter::Include
            && filter.keyword.is_none()
            && filter.invocation_id.is_none();
        let (offset, limit) = match window {
            ReadWindow::Empty => return Ok(ReadWindow::empty_page(filter)),
            ReadWindow::Page { offset, limit } => (offset, limit),
            ReadWindow::Last(n) => {
                let newest = if plain {
                    let mut seqs = self.by_score(&range, true, 0, n).await?;
                    seqs.reverse();
                    self.fetch(id, &seqs).await?
                } else {
                    let seqs = self.by_score(&range, false, 0, usize::MAX).await?;
                    let mut found = self
                        .matching(id, filter, seqs.rchunks(FILTER_CHUNK), n)
                        .await?;
                    found.reverse();
                    found
                };
                return Ok(Page::paginate(newest, filter.page, filter.page_size));
            }
        };
        let wanted = offset.saturating_add(limit);
        let mut items = if plain {
            let seqs = self.by_score(&range, false, offset, limit);
            self.fetch(id, &seqs.await?).await?
        } else {
            let seqs = self.by_score(&range, false, 0, usize::MAX).await?;
            self.matching(id, filter, seqs.chunks(FILTER_CHUNK), wanted)
                .await?
        };
        if !plain {
            items.drain(..offset.min(items.len()));
        }
        Ok(Page::from_overfetch(items, filter.page, filter.page_size))
    }

    /// The view's set and where the filter's cursor puts its start.
    async fn range_past_cursor(
        &self,
        id: &str,
        filter: &EventFilter,
    ) -> session_core::Result<Range> {
        let key = self.view_key(id, filter.view);
        let min = match (filter.after, filter.view) {
            (None, _) => "-inf".to_owned(),
            (Some(seq), EventView::Archive) => format!("({seq}"),
            (Some(seq), EventView::Context) => {
                let mut c = self.conn.clone();
                let score: Option<String> = redis::cmd("ZSCORE")
                    .arg(&key)
                    .arg(seq)
                    .query_async(&mut c)
                    .await
                    .map_err(map_err)?;
                format!("({}", score.ok_or_else(|| filter.cursor_left_context())?)
            }
        };
        Ok(Range { key, min })
    }

    /// Up to `count` seqs of a range from `offset`, ascending or (`rev`) descending.
    async fn by_score(
        &self,
        range: &Range,
        rev: bool,
        offset: usize,
        count: usize,
    ) -> session_core::Result<Vec<u64>> {
        let mut cmd = redis::cmd("ZRANGE");
        cmd.arg(&range.key);
        if rev {
            cmd.arg("+inf").arg(&range.min).arg("BYSCORE").arg("REV");
        } else {
            cmd.arg(&range.min).arg("+inf").arg("BYSCORE");
        }
        if count != usize::MAX {
            cmd.arg("LIMIT").arg(offset).arg(count);
        }
        let mut c = self.conn.clone();
        cmd.query_async(&mut c).await.map_err(map_err)
    }

    /// The first `wanted` events matching the filter, fetched chunk by chunk
    /// in the order the chunks come (each chunk's events in that direction too).
    async fn matching<'a>(
        &self,
        id: &str,
        filter: &EventFilter,
        chunks: impl DirectedChunks<'a>,
        wanted: usize,
    ) -> session_core::Result<Vec<SessionEvent>> {
        let m = filter.matcher();
        let backwards = chunks.backwards();
        let mut found = Vec::new();
        for chunk in chunks {
            let events = self.fetch(id, chunk).await?;
            let ordered: Box<dyn Iterator<Item = SessionEvent> + Send> = if backwards {
                Box::new(events.into_iter().rev())
            } else {
                Box::new(events.into_iter())
            };
            for e in ordered.filter(|e| m.matches(e)) {
                found.push(e);
                if found.len() >= wanted {
                    return Ok(found);
                }
            }
        }
        Ok(found)
    }
}

/// Chunks of a view's seqs, read forwards or backwards.
trait DirectedChunks<'a>: Iterator<Item = &'a [u64]> + Send {
    /// Whether the chunks run from the end.
    fn backwards(&self) -> bool;
}

impl<'a> DirectedChunks<'a> for std::slice::Chunks<'a, u64> {
    fn backwards(&self) -> bool {
        false
    }
}

impl<'a> DirectedChunks<'a> for std::slice::RChunks<'a, u64> {
    fn backwards(&self) -> bool {
        true
    }
}
