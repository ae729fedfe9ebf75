//! The shared-state files: `shared/app/<app>.json` and `shared/user/<app>/<user>.json`.

use std::fs;
use std::path::Path;

use session_core::state::apply_delta;
use session_core::{AppName, SharedDelta, SharedState, StateMap, UserId};

use crate::error::{io_err, Result};
use crate::files::{read_json, to_pretty, write_atomic, Lock};
use crate::layout::Layout;

/// How a write changes a shared-state file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Write {
    /// Applies the changes to what the file holds (`null` removes a key).
    Merge,
    /// Replaces what the file holds (an import of the owner's scopes).
    Replace,
}

/// Reads a shared-state file; an absent one is empty.
fn read(path: &Path) -> Result<StateMap> {
    Ok(read_json::<StateMap>(path, "shared state")?.unwrap_or_default())
}

/// The shared scopes of one (app, user).
pub(crate) fn load(layout: &Layout, app: &AppName, user: &UserId) -> Result<SharedState> {
    Ok(SharedState {
        app: read(&layout.app_state(app)?)?,
        user: read(&layout.user_state(app, user)?)?,
    })
}

/// Writes `app:` and `user:` changes under the store-wide shared-state
/// lock; a scope without changes is left alone.
pub(crate) fn write(
    layout: &Layout,
    sync: bool,
    (app, user): (&AppName, &UserId),
    changes: &SharedDelta,
    how: Write,
) -> Result<()> {
    if changes.is_empty() {
        return Ok(());
    }
    let _lock = Lock::exclusive(&layout.shared_lock())?;
    for (path, delta) in [
        (layout.app_state(app)?, &changes.app),
        (layout.user_state(app, user)?, &changes.user),
    ] {
        if delta.is_empty() {
            continue;
        }
        let mut state = match how {
            Write::Merge => read(&path)?,
            Write::Replace => StateMap::new(),
        };
        apply_delta(&mut state, delta);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|e| io_err(parent, e))?;
        }
        write_atomic(&path, &to_pretty(&state)?, sync)?;
    }
    Ok(())
}
