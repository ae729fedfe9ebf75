#![doc = include_str!("../README.md")]
//!
//! # Modules
//!
//! - `repository`: [`FsRepository`], its options and the state its clones share;
//! - `repo`: the [`SessionRepository`](session_core::SessionRepository) implementation: read the session
//!   file under its lock, ask `session_core::plan` for the plan, write it;
//! - `error`: I/O errors mapped onto [`SessionError`](session_core::SessionError);
//! - `layout`: paths under the root and shared-state file names;
//! - `format`: the `session.json` format;
//! - `files`: atomic rewrites, JSON files, advisory locks;
//! - `commit`: appends committed by their last log line, and settling a session file up to them;
//! - `log`: the `events.jsonl` log, its recovery and the id index;
//! - `log_read`: part of a log, from a seq forwards (by bisection) or from the end backwards;
//! - `view`: a page or tail of a session's view, read from the cursor or the end;
//! - `shared`: the `app:` and `user:` state files;
//! - `search`: search through each session's trigram index;
//! - `search_index`: that index, kept in memory and in `search.idx` beside the log.

mod commit;
mod error;
mod files;
mod format;
mod layout;
mod log;
mod log_read;
mod repo;
mod repository;
mod search;
mod search_index;
mod shared;
mod view;

pub use repository::{FsRepository, FsRepositoryBuilder};
