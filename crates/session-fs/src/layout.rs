//! Paths under the store root: session directories and shared-state file names.

use std::fs;
use std::path::{Component, Path, PathBuf};

use session_core::{AppName, SessionError, SessionId, UserId};

use crate::error::{io_err, Result};

/// The file stem of the group owner's `user:` state (`GROUP_USER`, `*`):
/// `shared/user/<app>/_group.json`, as stores have always written it
/// (`*` itself would be `%2A`). Stores written before real names were
/// kept off it gave a user named `_group` this same file; it stays the
/// group's, and such a user now has `%5Fgroup.json` (starting empty: what
/// it wrote before is mixed with the group's state and cannot be told apart).
const GROUP_STEM: &str = "_group";

/// Paths under the root. Session ids are valid by construction (no
/// separators, never `.` or `..`) and names are escaped into one file name,
/// so every path is one component per level; each is still checked to stay
/// under the root, and symlinks are refused.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub(crate) root: PathBuf,
}

impl Layout {
    /// Creates the directories of a store at `root` if needed.
    pub(crate) fn new(root: &Path) -> Result<Self> {
        for dir in [
            root.join("sessions"),
            root.join("shared").join("app"),
            root.join("shared").join("user"),
        ] {
            fs::create_dir_all(&dir).map_err(|e| io_err(root, e))?;
        }
        let root = root.canonicalize().map_err(|e| io_err(root, e))?;
        Ok(Self { root })
    }

    /// A path under the root that must not leave it, nor be or pass through a symlink.
    fn confined(&self, path: PathBuf) -> Result<PathBuf> {
        let rel = path
            .strip_prefix(&self.root)
            .map_err(|_| SessionError::invalid("path", "outside the store root"))?;
        let mut probe = self.root.clone();
        for part in rel.components() {
            if !matches!(part, Component::Normal(_)) {
                return Err(SessionError::invalid("path", "outside the store root"));
            }
            probe.push(part);
            if let Ok(meta) = fs::symlink_metadata(&probe) {
                if meta.file_type().is_symlink() {
                    return Err(SessionError::invalid(
                        "path",
                        format!(
                            "{} is a symlink; the file store does not follow links",
                            probe.display()
                        ),
                    ));
                }
            }
        }
        Ok(path)
    }

    /// One path component from a user id or app name: every byte outside
    /// `[A-Za-z0-9._:-]` becomes `%XX`, so `slack/T1`, `ada@example.com` or
    /// `../x` stay one file name inside the root. Names made only of the
    /// old id characters keep their old file names (stores written before
    /// the wider alphabet read unchanged); `%` never occurs in a valid name,
    /// so the encoding is one to one.
    fn name_component(name: &str) -> String {
        let mut out = String::with_capacity(name.len());
        for b in name.bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-') {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    }

    /// `sessions/<id>`.
    pub(crate) fn session_dir(&self, id: &SessionId) -> Result<PathBuf> {
        self.confined(self.sessions_dir().join(id.as_str()))
    }

    /// `sessions`.
    pub(crate) fn sessions_dir(&self) -> PathBuf {
        self.root.join("sessions")
    }

    /// Where a create (`new`) or import (`import`) builds a session
    /// directory before renaming it into place; creates and imports hold the
    /// create lock, so the process id makes it unique.
    pub(crate) fn staging_dir(&self, purpose: &str, id: &SessionId) -> PathBuf {
        self.sessions_dir()
            .join(format!(".{purpose}-{id}-{}", std::process::id()))
    }

    /// A fresh name a session directory is renamed to before it is removed.
    pub(crate) fn trash_dir(&self, id: &SessionId) -> PathBuf {
        self.sessions_dir()
            .join(format!(".deleted-{id}-{}", unique()))
    }

    /// `.create.lock`: taken by creates and imports.
    pub(crate) fn create_lock(&self) -> PathBuf {
        self.root.join(".create.lock")
    }

    /// `shared/app/<app>.json`.
    pub(crate) fn app_state(&self, app: &AppName) -> Result<PathBuf> {
        let p = self
            .root
            .join("shared")
            .join("app")
            .join(format!("{}.json", Self::name_component(app)));
        self.confined(p)
    }

    /// The file stem of an owner's `user:` state: [`GROUP_STEM`] for the
    /// group owner, [`Self::name_component`] for a real user, except that
    /// a real name that would equal the group's stem has its `_` escaped
    /// (`_group` → `%5Fgroup`). `%5F` is never otherwise produced (`_`
    /// passes unescaped), so every owner has a stem of its own.
    fn user_stem(user: &UserId) -> String {
        if user.is_group() {
            return GROUP_STEM.to_owned();
        }
        let stem = Self::name_component(user);
        if stem == GROUP_STEM {
            stem.replacen('_', "%5F", 1)
        } else {
            stem
        }
    }

    /// `shared/user/<app>/<user>.json` (`_group.json` for group sessions,
    /// `%5Fgroup.json` for a real user named `_group`).
    pub(crate) fn user_state(&self, app: &AppName, user: &UserId) -> Result<PathBuf> {
        let user = Self::user_stem(user);
        let p = self
            .root
            .join("shared")
            .join("user")
            .join(Self::name_component(app))
            .join(format!("{user}.json"));
        self.confined(p)
    }

    /// `shared/.lock`: taken by every shared-state write.
    pub(crate) fn shared_lock(&self) -> PathBuf {
        self.root.join("shared").join(".lock")
    }
}

/// A suffix no other directory name of this or another process holds.
fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}-{}",
        std::process::id(),
        chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stem(user: &str) -> String {
        Layout::user_stem(&UserId::new(user).unwrap_or_else(|e| panic!("{e}")))
    }

    #[test]
    fn a_user_named_like_the_group_file_gets_a_file_of_its_own() {
        assert_eq!(Layout::user_stem(&UserId::group()), "_group");
        assert_eq!(stem("_group"), "%5Fgroup");
        assert_eq!(stem("group"), "group");
        assert_eq!(stem("_group.json"), "_group.json");
        assert_eq!(stem("slack/T1"), "slack%2FT1");
        assert!(UserId::new("%5Fgroup").is_err(), "no name holds `%`");
    }

    #[test]
    fn the_group_reads_the_file_stores_have_always_written() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let layout = Layout::new(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let app = AppName::new("app").unwrap_or_else(|e| panic!("{e}"));
        let group = layout.user_state(&app, &UserId::group());
        let group = group.unwrap_or_else(|e| panic!("{e}"));
        assert!(group.ends_with("shared/user/app/_group.json"));
        let user = layout.user_state(
            &app,
            &UserId::new("_group").unwrap_or_else(|e| panic!("{e}")),
        );
        assert_ne!(user.unwrap_or_else(|e| panic!("{e}")), group);
    }
}
