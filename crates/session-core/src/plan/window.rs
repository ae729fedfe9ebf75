//! Which part of a view a read returns: decided once from the filter,
//! before a store reads anything.

use crate::filter::{EventFilter, Page};

/// The part of a view's matching events (past the filter's cursor) a read
/// returns: the newest `last_n`, or one page from an offset. A page past
/// any offset a store can address (beyond `i64::MAX`, far past
/// [`MAX_SEQ`](crate::MAX_SEQ) events) is empty without reading.
///
/// ```
/// use session_core::plan::ReadWindow;
/// use session_core::EventFilter;
/// let page = ReadWindow::of(&EventFilter::archive().page(2, 10));
/// assert_eq!(page, ReadWindow::Page { offset: 20, limit: 11 });
/// assert_eq!(page.wanted(), Some(31));
/// assert_eq!(ReadWindow::of(&EventFilter::last(5)), ReadWindow::Last(5));
/// let far = EventFilter::archive().page(usize::MAX, 10);
/// assert_eq!(ReadWindow::of(&far), ReadWindow::Empty);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadWindow {
    /// Nothing: the page starts past any event a view can hold
    /// ([`ReadWindow::empty_page`]).
    Empty,
    /// The newest `n` matching events, oldest first, then cut into the
    /// filter's page ([`Page::paginate`]).
    Last(usize),
    /// A page: skip `offset` matching events and take up to `limit`, the
    /// page size plus one, whose extra item says whether a later page has
    /// items ([`Page::from_overfetch`]).
    Page {
        /// Matching events before the page.
        offset: usize,
        /// The page size plus one.
        limit: usize,
    },
}

impl ReadWindow {
    /// The window `filter` asks for.
    pub fn of(filter: &EventFilter) -> Self {
        let Some(offset) = filter
            .page
            .checked_mul(filter.page_size)
            .filter(|o| i64::try_from(*o).is_ok())
        else {
            return Self::Empty;
        };
        match filter.last_n {
            Some(n) => Self::Last(n),
            None => Self::Page {
                offset,
                limit: filter.page_size.saturating_add(1),
            },
        }
    }

    /// How many matching events from the start (past the cursor) a page
    /// needs: its offset plus its limit (`None` for the other windows).
    pub fn wanted(&self) -> Option<usize> {
        match self {
            Self::Page { offset, limit } => Some(offset.saturating_add(*limit)),
            Self::Empty | Self::Last(_) => None,
        }
    }

    /// The empty page of `filter`, what an [`ReadWindow::Empty`] read returns.
    pub fn empty_page<T>(filter: &EventFilter) -> Page<T> {
        Page::empty(filter.page, filter.page_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offset_past_i64_is_empty_and_last_n_wins_over_paging() {
        let at = |page, size| EventFilter::archive().page(page, size);
        let fits = usize::try_from(i64::MAX).unwrap_or(usize::MAX);
        assert_eq!(
            ReadWindow::of(&at(fits, 1)),
            ReadWindow::Page {
                offset: fits,
                limit: 2
            }
        );
        assert_eq!(
            ReadWindow::of(&at(fits.saturating_add(1), 1)),
            ReadWindow::Empty
        );
        assert_eq!(
            ReadWindow::of(&at(usize::MAX, 2).last_n(3)),
            ReadWindow::Empty
        );
        assert_eq!(ReadWindow::of(&at(1, 2).last_n(3)), ReadWindow::Last(3));
    }
}
