//! Reading a view: pages and tails straight from a view's sorted set.
//!
//! The archive set scores each seq by itself and the context set by its
//! position, so a keyset cursor ([`EventFilter::after`]) is a score range
//! and a page costs O(log n + page) however far into the session it is.
//! A filtered read fetches bodies in chunks from the cursor (or from the
//! end, for `last_n`) until the page is full, so it reads no further than
//! the matches it needs.

use session_core::plan::ReadWindow;
use session_core::{EventFilter, EventView, Page, SessionEvent, SyntheticFilter};

use crate::error::map_err;
use crate::RedisRepository;

/// Bodies fetched per round trip by a filtered read.
const CHUNK: usize = 256;

/// The score range of a view past an optional cursor: `ZRANGE … BYSCORE` bounds.
struct Range {
    key: String,
    /// Exclusive lower bound (`(score`) or `-inf`.
    min: String,
}

impl RedisRepository {
    /// The page of a session's view a filter asks for (the session is live).
    pub(crate) async fn events_page(
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
                    let mut found = self.matching(id, filter, seqs.rchunks(CHUNK), n).await?;
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
            self.matching(id, filter, seqs.chunks(CHUNK), wanted)
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
