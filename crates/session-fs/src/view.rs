//! A view of a session's log through a filter: pages from a keyset cursor,
//! tails from the end of the log, never a scan of the whole log.
//!
//! A view is an explicit part (the seqs the last context replace set, in
//! context order; empty for the archive) followed by the log's records past
//! a seq (the events appended since). A page reads the explicit part chunk
//! by chunk and then the log forwards from the cursor; `last_n` reads the
//! log backwards and then the explicit part from its end, each stopping as
//! soon as it holds what the page needs.

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::path::Path;

use session_core::plan::ReadWindow;
use session_core::{EventFilter, EventView, Page, SessionEvent};

use crate::error::Result;
use crate::format::SessionFile;
use crate::{log, log_read};

/// Explicit context seqs read per pass.
const CHUNK: usize = 512;

/// The page of the session's view that `filter` asks for.
pub(crate) fn page(
    dir: &Path,
    file: &SessionFile,
    filter: &EventFilter,
) -> Result<Page<SessionEvent>> {
    let window = ReadWindow::of(filter);
    if window == ReadWindow::Empty {
        return Ok(ReadWindow::empty_page(filter));
    }
    let path = log::path(dir);
    let id = &file.session.id;
    let m = filter.matcher();
    let (explicit, tail_after) = parts(file, filter)?;
    if let ReadWindow::Last(n) = window {
        let mut newest = Vec::new();
        log_read::backwards(&path, file.log_bytes, id, |e| {
            if e.seq <= tail_after {
                return ControlFlow::Break(());
            }
            if m.matches(&e) {
                newest.push(e);
            }
            if newest.len() >= n {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })?;
        'explicit: for chunk in explicit.rchunks(CHUNK) {
            if newest.len() >= n {
                break;
            }
            for e in by_seq(&path, file, chunk)?.into_iter().rev() {
                if m.matches(&e) {
                    newest.push(e);
                    if newest.len() >= n {
                        break 'explicit;
                    }
                }
            }
        }
        newest.reverse();
        return Ok(Page::paginate(newest, filter.page, filter.page_size));
    }
    let ReadWindow::Page { offset, limit } = window else {
        return Ok(ReadWindow::empty_page(filter));
    };
    let wanted = offset.saturating_add(limit);
    let mut found = Vec::new();
    'explicit: for chunk in explicit.chunks(CHUNK) {
        for e in by_seq(&path, file, chunk)? {
            if m.matches(&e) {
                found.push(e);
                if found.len() >= wanted {
                    break 'explicit;
                }
            }
        }
    }
    if found.len() < wanted {
        let from = match tail_after {
            0 => 0,
            after => log_read::offset_after(&path, file.log_bytes, after)?,
        };
        log_read::forwards(&path, from, file.log_bytes, id, |e, _| {
            if e.seq > tail_after && m.matches(&e) {
                found.push(e);
            }
            if found.len() >= wanted {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })?;
    }
    found.drain(..offset.min(found.len()));
    Ok(Page::from_overfetch(found, filter.page, filter.page_size))
}

/// The view past the filter's cursor: its explicit seqs, and the seq after
/// which the log's records belong to it.
fn parts<'a>(file: &'a SessionFile, filter: &EventFilter) -> Result<(&'a [u64], u64)> {
    let ctx = &file.context;
    Ok(match (filter.view, filter.after) {
        (EventView::Archive, after) => (&[], after.unwrap_or(0)),
        (EventView::Context, None) => (&ctx.seqs, ctx.through),
        (EventView::Context, Some(a)) => match ctx.seqs.iter().position(|s| *s == a) {
            Some(i) => (
                ctx.seqs.get(i.saturating_add(1)..).unwrap_or_default(),
                ctx.through,
            ),
            None if a > ctx.through => (&[], a),
            None => return Err(filter.cursor_left_context()),
        },
    })
}

/// The events with these seqs, in the order given (a seq the log lacks is
/// left out), read from the log between the smallest and the largest.
fn by_seq(path: &Path, file: &SessionFile, seqs: &[u64]) -> Result<Vec<SessionEvent>> {
    let (Some(min), Some(max)) = (seqs.iter().min(), seqs.iter().max()) else {
        return Ok(Vec::new());
    };
    let wanted: HashSet<u64> = seqs.iter().copied().collect();
    let mut held: HashMap<u64, SessionEvent> = HashMap::with_capacity(seqs.len());
    let from = log_read::offset_after(path, file.log_bytes, min.saturating_sub(1))?;
    log_read::forwards(path, from, file.log_bytes, &file.session.id, |e, _| {
        if e.seq > *max {
            return ControlFlow::Break(());
        }
        if wanted.contains(&e.seq) {
            held.insert(e.seq, e);
        }
        ControlFlow::Continue(())
    })?;
    Ok(seqs.iter().filter_map(|s| held.remove(s)).collect())
}
