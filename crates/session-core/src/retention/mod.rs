//! Retention inside a live session: an archive policy that removes old
//! archived events while the session goes on.
//!
//! An [`ArchiveRetention`] keeps the latest N events and/or the events
//! younger than a duration. It works on the oldest end of the archive: an
//! event goes when it is among the archive's first `event_count - N`
//! events, or when it and every event before it are older than the
//! duration. Whatever the policy says, these stay:
//!
//! - events in the context (what the agent sends to its model);
//! - stored system messages (the pinned instructions);
//! - events that changed session state (rewind and fork replay the state
//!   from the events' deltas).
//!
//! Seqs never move: the archive simply has gaps where events went, the
//! next append continues after the highest seq ever assigned, search no
//! longer finds the removed events, and an export holds what is left (and
//! imports elsewhere as it is). A rewind or fork into the removed part
//! cannot bring those events back.
//!
//! A session's own policy lives in its metadata under [`RETENTION_KEY`];
//! [`RetentionRules`] add defaults per app and for every app.
//! [`prune_archive`] runs a policy on one session, [`prune_archives`] on
//! every session of a store (what `agent-session purge` does), and
//! [`PruneOnAppend`] after every append.
//!
//! ```
//! use session_core::retention::{prune_archive, ArchiveRetention};
//! use session_core::{InMemoryRepository, Message, NewSession, SessionEvent, SessionRepository};
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let repo = InMemoryRepository::new();
//! let now = chrono::Utc::now();
//! let s = repo.create(NewSession::new("app", "alice", now)?).await?;
//! for i in 0..5 {
//!     repo.append(&s.id, vec![SessionEvent::new(Message::user(format!("m{i}")))]).await?;
//! }
//! // Keep the context to the last two events, then keep the latest three archived.
//! let context: Vec<SessionEvent> = repo.events(&s.id, &Default::default()).await?.items;
//! let v = repo.event_version(&s.id).await?;
//! repo.replace_context(&s.id, context[3..].to_vec(), v).await?;
//! let pruned = prune_archive(&repo, &s.id, &ArchiveRetention::keep_latest(3), now).await?;
//! assert_eq!(pruned.removed, 2);
//! assert_eq!(repo.get(&s.id).await?.event_count, 3);
//! # Ok::<(), session_core::SessionError>(())
//! # }).unwrap();
//! ```

mod policy;
mod run;

pub use policy::{
    replayed, ArchiveRetention, PrunePlan, Pruned, RetentionReport, RetentionRules, Standing,
    RETENTION_KEY,
};
pub use run::{prune_archive, prune_archives, prune_if_due, PruneOnAppend};
