//! The read side: how events fold into the stored views (`views`) and the columns they are
//! written and checked in (`columns`), the study overview's counts (`overview`), what a
//! researcher reads folded from the log on request (`widget_history`, `decision_log`), the
//! participant's stream (`stream`) and the queries the routes run (`read`).

pub mod columns;
pub mod decision_log;
pub mod overview;
pub mod read;
pub mod stream;
pub mod views;
pub mod widget_history;
