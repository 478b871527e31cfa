//! What a batch of commands brings to the group commit: each command's events with the overview
//! change they make, and — for a command whose session's view was kept just before them — that
//! view with the events folded in memory. Both commit paths (`group_commit`, `one_statement`)
//! take them from here.

use crate::commit::recent::RecentViews;
use crate::read_side::overview::NewContribution;
use crate::read_side::views::{NewRows, SessionStateView};
use crate::store::log::NewEvent;

/// One command's events, and its session's new contribution to the study overview when the
/// command moved it.
pub(crate) type Appended<'a> = (&'a [NewEvent], Option<&'a NewContribution>);

/// A command whose kept view was the one just before its events: folded in memory.
pub(crate) struct FoldedFromKept<'a> {
    pub(crate) command: usize,
    /// The `last_seq` the fold started from, which guards the state row's write.
    pub(crate) expected: i64,
    pub(crate) view: SessionStateView,
    pub(crate) rows: NewRows,
    pub(crate) session_id: &'a str,
}

impl<'a> FoldedFromKept<'a> {
    /// Takes the kept view of command `i`'s session and folds the command's events into it —
    /// `None` (the view taken, if any, dropped) when no view is kept just before its events.
    pub(crate) fn fold(recent: &RecentViews, i: usize, events: &'a [NewEvent]) -> Option<Self> {
        let first = events.first()?;
        let mut view = recent
            .take(&first.aggregate_id)
            .filter(|view| view.last_seq + 1 == first.sequence)?;
        let expected = view.last_seq as i64;
        let mut rows = NewRows::default();
        for e in events {
            view.apply(e.sequence, &e.event, &mut rows);
        }
        Some(FoldedFromKept {
            command: i,
            expected,
            view,
            rows,
            session_id: &first.aggregate_id,
        })
    }
}
