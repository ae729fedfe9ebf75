//! Key names: one session's keys under one hash tag, the shared-state hashes and the indexes.

/// The suffixes of one session's keys, in the order the scripts receive
/// them as `KEYS`.
///
/// The names are historical and do not all say what the key holds: the
/// layout shipped with the roles shifted one place after `ids` (the
/// archive set is `sid`, the context set `arc`, the invocation hash `ctx`,
/// the delta hash `tok`, the initial state `inv`; `dl` and `init` stay
/// empty). Stores written before must read unchanged, so the names stay;
/// the role constants below are the one place that maps them. The last two
/// hold the search index (see `search_index.rs`), then `chg` the context's
/// history (a key sessions written before it simply lack).
const SESSION_KEYS: [&str; 12] = [
    "s", "st", "ev", "ids", "sid", "arc", "ctx", "tok", "inv", "dl", "init", "chg",
];

/// Hash: the session's fields (owner, times, counters, version, ...).
pub(crate) const HEAD: usize = 0;
/// Hash: session-scope state, key → JSON.
pub(crate) const STATE: usize = 1;
/// Hash: seq → event JSON.
pub(crate) const EVENTS: usize = 2;
/// Sorted set: the archive, seqs scored by seq (key `sid`).
pub(crate) const ARCHIVE: usize = 4;
/// Sorted set: the context, seqs scored by context position (key `arc`).
pub(crate) const CONTEXT: usize = 5;
/// Hash: invocation id → its first seq (key `ctx`).
pub(crate) const INVOCATIONS: usize = 6;
/// Hash: seq → the event's session-scope state delta (key `tok`).
pub(crate) const DELTAS: usize = 7;
/// Hash: the initial state, what a rewind replays from (key `inv`).
pub(crate) const INITIAL: usize = 8;

/// Hash: the search index's watermark, `through` = the last seq indexed (key `dl`).
pub(crate) const SEARCH_MARK: usize = 9;
/// Set: the names of the search index's trigram keys (key `init`).
pub(crate) const SEARCH_TRIGRAMS: usize = 10;
/// List: the context's history, one JSON [`session_core::ContextChange`]
/// per context replace, oldest first (key `chg`).
pub(crate) const CONTEXT_CHANGES: usize = 11;

/// `app/user` (or `app/key`) for a key name, with `/` inside either part
/// escaped as `%2F`: names may hold `/` but never `%`, so two owners never
/// share a key, and names without `/` keep the key they always had.
pub(crate) fn pair(a: &str, b: &str) -> String {
    format!("{}/{}", a.replace('/', "%2F"), b.replace('/', "%2F"))
}

/// The key names under one prefix.
#[derive(Debug, Clone)]
pub(crate) struct KeySpace {
    prefix: String,
}

/// One session's keys, in script order.
#[derive(Debug, Clone)]
pub(crate) struct SessionKeys(Vec<String>);

impl SessionKeys {
    /// The key of one role ([`HEAD`], [`ARCHIVE`], ...).
    pub(crate) fn get(&self, role: usize) -> &str {
        &self.0[role]
    }

    /// Every key, in the order the scripts take them.
    pub(crate) fn all(&self) -> &[String] {
        &self.0
    }
}

/// The index and shared-state keys of one owner (app, user, resolution key).
#[derive(Debug, Clone, Default)]
pub(crate) struct OwnerKeys {
    /// Every session, by activity.
    pub(crate) all: String,
    /// The owner's sessions, by activity.
    pub(crate) owner: String,
    /// The sessions of the app and resolution key, by activity (`None`: no key).
    pub(crate) key: Option<String>,
    /// Every session, by expiry.
    pub(crate) expiry: String,
    /// The owner's `user:` state.
    pub(crate) user_state: String,
    /// The app's `app:` state.
    pub(crate) app_state: String,
}

impl KeySpace {
    /// Keys under `prefix`.
    pub(crate) fn new(prefix: String) -> Self {
        Self { prefix }
    }

    /// The prefix.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The keys of session `id`, all tagged `{id}` so they share a cluster slot.
    pub(crate) fn session(&self, id: &str) -> SessionKeys {
        SessionKeys(
            SESSION_KEYS
                .iter()
                .map(|k| format!("{}:{{{id}}}:{k}", self.prefix))
                .collect(),
        )
    }

    /// One trigram's posting list in session `id`'s search index (LEB128 seqs).
    pub(crate) fn trigram(&self, id: &str, trigram: u64) -> String {
        format!("{}:{{{id}}}:x:{trigram:016x}", self.prefix)
    }

    /// The `user:` state of `user` in `app`.
    pub(crate) fn user_state(&self, app: &str, user: &str) -> String {
        format!("{}:u:{{{}}}", self.prefix, pair(app, user))
    }

    /// The `app:` state of `app`.
    pub(crate) fn app_state(&self, app: &str) -> String {
        format!("{}:a:{{{app}}}", self.prefix)
    }

    /// Every session, by activity.
    pub(crate) fn index_all(&self) -> String {
        format!("{}:idx:all", self.prefix)
    }

    /// The sessions of `user` in `app`, by activity.
    pub(crate) fn index_owner(&self, app: &str, user: &str) -> String {
        format!("{}:idx:o:{}", self.prefix, pair(app, user))
    }

    /// The sessions of resolution key `key` in `app`, by activity.
    pub(crate) fn index_key(&self, app: &str, key: &str) -> String {
        format!("{}:idx:k:{}", self.prefix, pair(app, key))
    }

    /// Every session with an expiry, by expiry.
    pub(crate) fn index_expiry(&self) -> String {
        format!("{}:idx:exp", self.prefix)
    }

    /// The index and shared-state keys of an owner (`key`: the resolution key, if any).
    pub(crate) fn owner(&self, app: &str, user: &str, key: Option<&str>) -> OwnerKeys {
        OwnerKeys {
            all: self.index_all(),
            owner: self.index_owner(app, user),
            key: key
                .filter(|k| !k.is_empty())
                .map(|k| self.index_key(app, k)),
            expiry: self.index_expiry(),
            user_state: self.user_state(app, user),
            app_state: self.app_state(app),
        }
    }
}

impl OwnerKeys {
    /// The activity indexes the session belongs to.
    pub(crate) fn activity(&self) -> impl Iterator<Item = &str> {
        [self.all.as_str(), self.owner.as_str()]
            .into_iter()
            .chain(self.key.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slashes_inside_names_never_make_two_owners_share_a_key() {
        assert_ne!(pair("a/b", "c"), pair("a", "b/c"));
        assert_eq!(pair("app", "user"), "app/user");
    }

    #[test]
    fn the_layout_keeps_its_historical_names() {
        let keys = KeySpace::new("as".into()).session("s1");
        assert_eq!(keys.get(HEAD), "as:{s1}:s");
        assert_eq!(keys.get(ARCHIVE), "as:{s1}:sid");
        assert_eq!(keys.get(CONTEXT), "as:{s1}:arc");
        assert_eq!(keys.get(INVOCATIONS), "as:{s1}:ctx");
        assert_eq!(keys.get(DELTAS), "as:{s1}:tok");
        assert_eq!(keys.get(INITIAL), "as:{s1}:inv");
        assert_eq!(keys.get(CONTEXT_CHANGES), "as:{s1}:chg");
        assert_eq!(keys.all().len(), 12);
    }
}
