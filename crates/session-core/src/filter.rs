//! Queries: which events, sessions and search hits to return, and the page they come in.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Result, SessionError};
use crate::event::SessionEvent;
use crate::message::Role;
use crate::search::contains_folded;
use crate::search::fold_case;
use crate::session::SessionStatus;
use crate::validate::{validate_branch, validate_id, validate_name, Limits};

/// The page size used when none is given.
pub const DEFAULT_PAGE_SIZE: usize = 10;

/// Which of a session's two views to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum EventView {
    /// What the agent sends to its model: compaction replaces it.
    #[default]
    Context,
    /// Every event ever appended, verbatim, in `seq` order.
    Archive,
}

/// Whether synthetic (compaction-written) events are returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum SyntheticFilter {
    /// Real and synthetic events.
    #[default]
    Include,
    /// Real events only.
    Exclude,
    /// Synthetic events only.
    Only,
}

/// The branches whose events an agent on `viewer` sees besides root events:
/// its ancestors and itself (`orch.researcher` → `orch`, `orch.researcher`).
pub fn visible_branches(viewer: &str) -> Vec<String> {
    let mut out: Vec<String> = viewer
        .char_indices()
        .filter(|(_, c)| *c == '.')
        .map(|(i, _)| viewer[..i].to_owned())
        .collect();
    out.push(viewer.to_owned());
    out
}

/// Criteria for reading events. Filtering happens before `last_n`, and
/// `last_n` before paging; results are chronological (context order for the
/// context view, `seq` order for the archive).
///
/// ```
/// use session_core::{EventFilter, EventView, Role};
/// let f = EventFilter::archive().roles([Role::User]).keyword("paris").page(0, 20);
/// assert_eq!(f.view, EventView::Archive);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct EventFilter {
    /// Context or archive.
    pub view: EventView,
    /// The viewing agent's branch: root events, this branch and its ancestors are visible.
    pub branch: Option<String>,
    /// Events at or after this time.
    pub from: Option<DateTime<Utc>>,
    /// Events strictly before this time.
    pub to: Option<DateTime<Utc>>,
    /// Only the most recent N matching events (returned oldest first).
    pub last_n: Option<usize>,
    /// Only these roles (empty = all).
    pub roles: Vec<Role>,
    /// Synthetic events in, out or only.
    pub synthetic: SyntheticFilter,
    /// Case-insensitive literal substring of the message's search text.
    pub keyword: Option<String>,
    /// Only events of this invocation.
    pub invocation_id: Option<String>,
    /// A keyset cursor: only events after the event with this seq in the
    /// view's order (see [`EventFilter::after`]).
    pub after: Option<u64>,
    /// Zero-based page.
    pub page: usize,
    /// Page size (default 10).
    pub page_size: usize,
}

impl Default for EventFilter {
    fn default() -> Self {
        Self {
            view: EventView::Context,
            branch: None,
            from: None,
            to: None,
            last_n: None,
            roles: Vec::new(),
            synthetic: SyntheticFilter::Include,
            keyword: None,
            invocation_id: None,
            after: None,
            page: 0,
            page_size: DEFAULT_PAGE_SIZE,
        }
    }
}

impl EventFilter {
    /// The context view, first page of 10.
    pub fn context() -> Self {
        Self::default()
    }

    /// The archive view, first page of 10.
    pub fn archive() -> Self {
        Self {
            view: EventView::Archive,
            ..Self::default()
        }
    }

    /// The most recent `n` context events, oldest first, in one page.
    pub fn last(n: usize) -> Self {
        Self {
            last_n: Some(n),
            page_size: n.max(1),
            ..Self::default()
        }
    }

    /// Sets the view.
    pub fn view(mut self, view: EventView) -> Self {
        self.view = view;
        self
    }

    /// Sets the viewing branch.
    pub fn branch(mut self, branch: impl Into<String>) -> Self {
        self.branch = Some(branch.into());
        self
    }

    /// Events in `[from, to)`.
    pub fn between(mut self, from: Option<DateTime<Utc>>, to: Option<DateTime<Utc>>) -> Self {
        self.from = from;
        self.to = to;
        self
    }

    /// Only the most recent `n` matching events.
    pub fn last_n(mut self, n: usize) -> Self {
        self.last_n = Some(n);
        self
    }

    /// Only these roles.
    pub fn roles(mut self, roles: impl IntoIterator<Item = Role>) -> Self {
        self.roles = roles.into_iter().collect();
        self
    }

    /// Synthetic events in, out or only.
    pub fn synthetic(mut self, synthetic: SyntheticFilter) -> Self {
        self.synthetic = synthetic;
        self
    }

    /// Case-insensitive literal keyword: events whose search text contains
    /// it, spaces and punctuation included (`" is "` needs the spaces).
    ///
    /// A blank keyword (empty, only whitespace, or nothing once case is
    /// folded, such as a lone combining accent) would match every event, so
    /// reads with one are `InvalidInput`, as a blank search is.
    ///
    /// ```
    /// use session_core::{EventFilter, ErrorKind, Limits};
    /// let limits = Limits::default();
    /// assert!(EventFilter::archive().keyword(" is ").check(&limits).is_ok());
    /// let blank = EventFilter::archive().keyword("   ").check(&limits);
    /// assert_eq!(blank.unwrap_err().kind(), ErrorKind::InvalidInput);
    /// ```
    pub fn keyword(mut self, keyword: impl Into<String>) -> Self {
        self.keyword = Some(keyword.into());
        self
    }

    /// Only events of one invocation.
    pub fn invocation(mut self, id: impl Into<String>) -> Self {
        self.invocation_id = Some(id.into());
        self
    }

    /// Only events after the event `seq` in the view's order: the keyset
    /// cursor that reads a view page by page at the same cost per page
    /// however far in, where `page` counts an offset from the start. Pass the
    /// last seq of the page just read ([`Page::next_after`]).
    ///
    /// In the archive view this is every event with a larger seq. In the
    /// context view it is every event after that one in context order
    /// (a summary comes before the turns it kept, whatever their seqs); when
    /// the event has left the context since the previous page (a compaction
    /// or rewind replaced it), the read is `InvalidInput`: read the context
    /// again from the start.
    ///
    /// ```
    /// use session_core::EventFilter;
    /// let next = EventFilter::archive().after(1000).page(0, 100);
    /// assert_eq!(next.after, Some(1000));
    /// ```
    pub fn after(mut self, seq: u64) -> Self {
        self.after = Some(seq);
        self
    }

    /// Sets page and page size.
    pub fn page(mut self, page: usize, page_size: usize) -> Self {
        self.page = page;
        self.page_size = page_size;
        self
    }

    /// Checks sizes and ids against `limits`.
    pub fn check(&self, limits: &Limits) -> Result<()> {
        limits.check_page_size(self.page_size)?;
        if self.last_n == Some(0) {
            return Err(SessionError::invalid("last_n", "must be at least 1"));
        }
        if let Some(b) = &self.branch {
            validate_branch(b)?;
        }
        if let Some(i) = &self.invocation_id {
            validate_id("invocation id", i)?;
        }
        self.check_keyword()?;
        if let (Some(from), Some(to)) = (self.from, self.to) {
            if from > to {
                return Err(SessionError::invalid("time range", "`from` is after `to`"));
            }
        }
        Ok(())
    }

    /// `InvalidInput` for a blank keyword (see [`EventFilter::keyword`]).
    fn check_keyword(&self) -> Result<()> {
        if self.keyword.as_deref().is_some_and(is_blank) {
            return Err(SessionError::invalid(
                "keyword",
                "is blank: give a word or phrase to filter by (a blank keyword would match every event)",
            ));
        }
        Ok(())
    }

    /// Whether the filter selects by position alone (view, cursor,
    /// `last_n`, paging): no criterion that an event's fields decide, so a
    /// store can page through its rows without decoding the events.
    pub fn selects_by_position(&self) -> bool {
        self.branch.is_none()
            && self.from.is_none()
            && self.to.is_none()
            && self.roles.is_empty()
            && self.synthetic == SyntheticFilter::Include
            && self.keyword.is_none()
            && self.invocation_id.is_none()
    }

    /// A reusable matcher for this filter's per-event criteria (everything but view, `last_n` and paging).
    pub fn matcher(&self) -> EventMatcher<'_> {
        EventMatcher {
            filter: self,
            keyword: self.keyword.as_deref().map(fold_case),
        }
    }

    /// Applies the whole filter to events already in view order: the
    /// cursor, match, `last_n`, page. Reads only as far as the page needs:
    /// forwards from the start (or the cursor) for a page, backwards from
    /// the end for `last_n`. A blank keyword is `InvalidInput` here too.
    pub fn apply<'a, I>(&self, events: I) -> Result<Page<SessionEvent>>
    where
        I: IntoIterator<Item = &'a SessionEvent>,
        I::IntoIter: DoubleEndedIterator,
    {
        // Checked here too: a layer that filters events itself (the
        // encryption layer matches keywords on opened text) refuses what
        // the stores refuse.
        self.check_keyword()?;
        let m = self.matcher();
        let Some(offset) = self.page.checked_mul(self.page_size) else {
            return Ok(Page::empty(self.page, self.page_size));
        };
        let is_cursor = |e: &SessionEvent| match (self.after, self.view) {
            (None, _) => false,
            (Some(a), EventView::Archive) => e.seq <= a,
            (Some(a), EventView::Context) => e.seq == a,
        };
        let needs_cursor = self.view == EventView::Context && self.after.is_some();
        if let Some(n) = self.last_n {
            let mut newest: Vec<&SessionEvent> = Vec::new();
            let mut seen_cursor = !needs_cursor;
            for e in events.into_iter().rev() {
                if is_cursor(e) {
                    seen_cursor = true;
                    break;
                }
                if newest.len() < n && m.matches(e) {
                    newest.push(e);
                } else if newest.len() >= n && seen_cursor {
                    break;
                }
            }
            if !seen_cursor {
                return Err(self.cursor_left_context());
            }
            newest.reverse();
            return Ok(Page::paginate(
                newest.into_iter().cloned(),
                self.page,
                self.page_size,
            ));
        }
        let mut it = events.into_iter();
        if needs_cursor && !it.by_ref().any(is_cursor) {
            return Err(self.cursor_left_context());
        }
        let wanted = offset.saturating_add(self.page_size).saturating_add(1);
        let matched: Vec<SessionEvent> = it
            .filter(|e| !is_cursor(e) && m.matches(e))
            .take(wanted)
            .skip(offset)
            .cloned()
            .collect();
        Ok(Page::from_overfetch(matched, self.page, self.page_size))
    }

    /// The error for a context cursor whose event is no longer in the context.
    pub fn cursor_left_context(&self) -> SessionError {
        SessionError::invalid(
            "after",
            format!(
                "event {} is no longer in the context (a compaction or rewind replaced it): read the context again from the start",
                self.after.unwrap_or_default()
            ),
        )
    }
}

/// Checks one event against an [`EventFilter`]'s criteria.
#[derive(Debug)]
pub struct EventMatcher<'a> {
    filter: &'a EventFilter,
    keyword: Option<String>,
}

impl EventMatcher<'_> {
    /// Whether `e` passes branch, time, role, synthetic, invocation and keyword criteria.
    pub fn matches(&self, e: &SessionEvent) -> bool {
        let f = self.filter;
        if let Some(b) = &f.branch {
            if !e.visible_to(b) {
                return false;
            }
        }
        if f.from.is_some_and(|t| e.timestamp < t) || f.to.is_some_and(|t| e.timestamp >= t) {
            return false;
        }
        if !f.roles.is_empty() && !f.roles.contains(&e.role()) {
            return false;
        }
        let synthetic_ok = match f.synthetic {
            SyntheticFilter::Include => true,
            SyntheticFilter::Exclude => !e.is_synthetic(),
            SyntheticFilter::Only => e.is_synthetic(),
        };
        if !synthetic_ok {
            return false;
        }
        if let Some(i) = &f.invocation_id {
            if e.invocation_id.as_ref() != Some(i) {
                return false;
            }
        }
        if let Some(k) = &self.keyword {
            if !contains_folded(&e.message.search_text(), k) {
                return false;
            }
        }
        true
    }
}

/// One page of results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Page<T> {
    /// The items, in result order.
    pub items: Vec<T>,
    /// The zero-based page number.
    pub page: usize,
    /// The page size asked for.
    pub page_size: usize,
    /// Whether a later page has items.
    pub has_more: bool,
    /// Ids of entries on this page the store holds but could not decode
    /// (a corrupt row): left out of `items`, logged as a warning, and
    /// reported with their error when read alone (`get`, `export_session`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<String>,
    /// How many items the whole result holds, where the store counts them
    /// (search pages); `None` where it does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<Total>,
}

/// The size of a whole result, of which a page is a part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Total {
    /// The count.
    pub count: u64,
    /// `true`: exactly `count` items; `false`: at least `count` (the store
    /// stopped counting, see the search docs).
    pub exact: bool,
}

impl Total {
    /// An exact count.
    pub fn exact(count: usize) -> Self {
        Self {
            count: u64::try_from(count).unwrap_or(u64::MAX),
            exact: true,
        }
    }

    /// A lower bound.
    pub fn at_least(count: usize) -> Self {
        Self {
            exact: false,
            ..Self::exact(count)
        }
    }
}

impl<T> Page<T> {
    /// An empty page.
    pub fn empty(page: usize, page_size: usize) -> Self {
        Self {
            items: Vec::new(),
            page,
            page_size,
            has_more: false,
            unreadable: Vec::new(),
            total: None,
        }
    }

    /// Cuts page `page` of `page_size` out of the full ordered result.
    pub fn paginate(all: impl IntoIterator<Item = T>, page: usize, page_size: usize) -> Self {
        let Some(offset) = page.checked_mul(page_size) else {
            return Self::empty(page, page_size);
        };
        let mut it = all.into_iter().skip(offset);
        let items: Vec<T> = it.by_ref().take(page_size).collect();
        let has_more = it.next().is_some();
        Self {
            items,
            page,
            page_size,
            has_more,
            unreadable: Vec::new(),
            total: None,
        }
    }

    /// Page `page` from a store that fetched up to `page_size + 1` items
    /// from the page's start: an extra item means a later page has items.
    ///
    /// ```
    /// use session_core::Page;
    /// let page = Page::from_overfetch(vec![1, 2, 3], 0, 2);
    /// assert_eq!((page.items, page.has_more), (vec![1, 2], true));
    /// ```
    pub fn from_overfetch(mut items: Vec<T>, page: usize, page_size: usize) -> Self {
        let has_more = items.len() > page_size;
        items.truncate(page_size);
        Self {
            items,
            page,
            page_size,
            has_more,
            unreadable: Vec::new(),
            total: None,
        }
    }

    /// Like [`Page::from_overfetch`], for rows decoded one by one: a row
    /// that failed to decode takes its place on the page but goes to
    /// [`Page::unreadable`] (with a warning naming it and the error kind),
    /// so one corrupt row never hides the others.
    pub fn from_overfetch_decoded(
        rows: Vec<(String, crate::error::Result<T>)>,
        page: usize,
        page_size: usize,
    ) -> Self {
        let has_more = rows.len() > page_size;
        let mut out = Self::empty(page, page_size);
        out.has_more = has_more;
        for (id, row) in rows.into_iter().take(page_size) {
            match row {
                Ok(item) => out.items.push(item),
                Err(e) => {
                    tracing::warn!(id = %id, kind = ?e.kind(), "unreadable row left out of the page");
                    out.unreadable.push(id);
                }
            }
        }
        out
    }

    /// Maps the items.
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            items: self.items.into_iter().map(f).collect(),
            page: self.page,
            page_size: self.page_size,
            has_more: self.has_more,
            unreadable: self.unreadable,
            total: self.total,
        }
    }
}

impl Page<SessionEvent> {
    /// The cursor for the next page ([`EventFilter::after`]): the seq of
    /// this page's last event, when a later page has events.
    ///
    /// ```
    /// use session_core::{Message, Page, SessionEvent};
    /// let mut e = SessionEvent::new(Message::user("hi"));
    /// e.seq = 7;
    /// assert_eq!(Page::from_overfetch(vec![e.clone(), e], 0, 1).next_after(), Some(7));
    /// ```
    pub fn next_after(&self) -> Option<u64> {
        self.items.last().filter(|_| self.has_more).map(|e| e.seq)
    }
}

/// Criteria for listing sessions: newest activity first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct SessionQuery {
    /// Only this app.
    pub app: Option<String>,
    /// Only this user.
    pub user_id: Option<String>,
    /// Only this resolution key.
    pub key: Option<String>,
    /// Only this status.
    pub status: Option<SessionStatus>,
    /// Last activity at or after.
    pub active_from: Option<DateTime<Utc>>,
    /// Last activity strictly before.
    pub active_to: Option<DateTime<Utc>>,
    /// Metadata entries that must all be present with exactly these values
    /// (strings, numbers or booleans): how agents find the sessions they
    /// tagged (a ticket id, a channel). Indexed on SQLite and PostgreSQL.
    pub metadata: Vec<(String, serde_json::Value)>,
    /// Zero-based page.
    pub page: usize,
    /// Page size (default 10).
    pub page_size: usize,
}

/// The most metadata entries one [`SessionQuery`] may require.
pub const MAX_METADATA_FILTERS: usize = 8;

impl Default for SessionQuery {
    fn default() -> Self {
        Self {
            app: None,
            user_id: None,
            key: None,
            status: None,
            active_from: None,
            active_to: None,
            metadata: Vec::new(),
            page: 0,
            page_size: DEFAULT_PAGE_SIZE,
        }
    }
}

impl SessionQuery {
    /// All sessions, first page.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only this app.
    pub fn app(mut self, app: impl Into<String>) -> Self {
        self.app = Some(app.into());
        self
    }

    /// Only this user.
    pub fn user(mut self, user_id: impl Into<String>) -> Self {
        self.user_id = Some(user_id.into());
        self
    }

    /// Only this key.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Only this status.
    pub fn status(mut self, status: SessionStatus) -> Self {
        self.status = Some(status);
        self
    }

    /// Last activity in `[from, to)`.
    pub fn active_between(
        mut self,
        from: Option<DateTime<Utc>>,
        to: Option<DateTime<Utc>>,
    ) -> Self {
        self.active_from = from;
        self.active_to = to;
        self
    }

    /// Only sessions whose metadata holds `key` with exactly `value`.
    ///
    /// ```
    /// use session_core::SessionQuery;
    /// let q = SessionQuery::new().app("support").metadata("ticket", "T-4711");
    /// assert_eq!(q.metadata.len(), 1);
    /// ```
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<serde_json::Value>) -> Self {
        self.metadata.push((key.into(), value.into()));
        self
    }

    /// Only the forks made from session `id` (their `forked_from` metadata).
    pub fn forks_of(self, id: &crate::SessionId) -> Self {
        self.metadata(crate::fork_at::FORKED_FROM, id.as_str())
    }

    /// Sets page and page size.
    pub fn page(mut self, page: usize, page_size: usize) -> Self {
        self.page = page;
        self.page_size = page_size;
        self
    }

    /// Checks sizes and ids.
    pub fn check(&self, limits: &Limits) -> Result<()> {
        limits.check_page_size(self.page_size)?;
        if let Some(a) = &self.app {
            validate_name("app", a)?;
        }
        if let Some(u) = &self.user_id {
            if u != crate::session::GROUP_USER {
                validate_name("user id", u)?;
            }
        }
        if let Some(k) = &self.key {
            validate_name("key", k)?;
        }
        if self.metadata.len() > MAX_METADATA_FILTERS {
            return Err(SessionError::invalid(
                "metadata filter",
                format!("at most {MAX_METADATA_FILTERS} entries"),
            ));
        }
        for (key, value) in &self.metadata {
            if key.is_empty() || key.len() > crate::MAX_ID_LEN || key.chars().any(char::is_control)
            {
                return Err(SessionError::invalid(
                    "metadata filter",
                    format!(
                        "key {key:?} must be 1 to {} bytes without control characters",
                        crate::MAX_ID_LEN
                    ),
                ));
            }
            if !(value.is_string() || value.is_number() || value.is_boolean()) {
                return Err(SessionError::invalid(
                    "metadata filter",
                    format!("{key:?} must be matched against a string, a number or a boolean"),
                ));
            }
        }
        Ok(())
    }

    /// Whether the query names no criterion at all (an operator's listing of everything).
    pub fn is_unfiltered(&self) -> bool {
        self.app.is_none()
            && self.metadata.is_empty()
            && self.user_id.is_none()
            && self.key.is_none()
            && self.status.is_none()
            && self.active_from.is_none()
            && self.active_to.is_none()
    }

    /// Whether `s` passes the criteria (paging aside).
    pub fn matches(&self, s: &crate::Session) -> bool {
        self.app.as_ref().is_none_or(|a| &s.app == a)
            && self.user_id.as_ref().is_none_or(|u| &s.user_id == u)
            && self
                .key
                .as_ref()
                .is_none_or(|k| s.key.as_ref().is_some_and(|sk| sk == k))
            && self.status.is_none_or(|st| s.status == st)
            && self.active_from.is_none_or(|t| s.updated_at >= t)
            && self.active_to.is_none_or(|t| s.updated_at < t)
            && self
                .metadata
                .iter()
                .all(|(k, v)| s.metadata.get(k).is_some_and(|have| have == v))
    }
}

/// Whether a keyword says nothing: empty, only whitespace, or nothing
/// left once case is folded (what a blank search query is too).
fn is_blank(keyword: &str) -> bool {
    keyword.trim().is_empty() || fold_case(keyword).trim().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blank_keyword_is_invalid_input_like_a_blank_search() {
        let limits = Limits::default();
        for blank in ["", " ", "   ", "\t\n", "\u{3000}", "\u{301}", " \u{301} "] {
            let err = EventFilter::archive().keyword(blank).check(&limits);
            assert_eq!(
                err.map_err(|e| e.kind()),
                Err(crate::ErrorKind::InvalidInput),
                "keyword {blank:?}"
            );
            let search = crate::SearchQuery::in_session("s", blank).check(&limits);
            assert_eq!(
                search.map_err(|e| e.kind()),
                Err(crate::ErrorKind::InvalidInput),
                "search {blank:?}"
            );
        }
        for fine in ["a", " is ", "100%", "_", "\u{e9}"] {
            assert!(
                EventFilter::archive().keyword(fine).check(&limits).is_ok(),
                "keyword {fine:?}"
            );
        }
    }

    #[test]
    fn paginate_reports_more_and_survives_huge_pages() {
        let p = Page::paginate(0..25, 1, 10);
        assert_eq!(p.items, (10..20).collect::<Vec<_>>());
        assert!(p.has_more);
        let p = Page::paginate(0..25, 2, 10);
        assert_eq!(p.items.len(), 5);
        assert!(!p.has_more);
        let p = Page::paginate(0..25, usize::MAX, 10);
        assert!(p.items.is_empty());
    }

    #[test]
    fn visible_branches_are_ancestors_and_self() {
        assert_eq!(visible_branches("a.b.c"), ["a", "a.b", "a.b.c"]);
        assert_eq!(visible_branches("a"), ["a"]);
    }
}
