//! The bodies of the `cargo fuzz` targets in `fuzz/`.
//!
//! Each takes the fuzzer's bytes and panics only when a property breaks, so
//! the same functions run the committed seeds and every crash the fuzzer
//! ever found (`fuzz/seeds/<target>/`, `fuzz/regressions/<target>/`) as
//! ordinary tests in `tests/fuzz_inputs.rs`. `cargo xtask fuzz` runs them
//! under libFuzzer for a bounded time.
//!
//! The command line's targets (`cli_args`, `store_url`) need the CLI crate,
//! so their bodies live in `agent_session_cli::fuzz`; the same test replays
//! theirs.

use std::path::Path;
use std::sync::Arc;

use session_core::{
    ErrorKind, EventView, ExportReader, ImportOutcome, InMemoryRepository, Message, NewSession,
    SearchQuery, SessionError, SessionEvent, SessionId, SessionRepository, SessionRepositoryExt,
};
use session_fs::FsRepository;
use session_sqlite::SqliteRepository;

/// A fuzz target's body: panics only when a property breaks.
pub type Target = fn(&[u8]);

/// The fuzz targets, by name: what `cargo xtask fuzz` runs and the test replays.
pub const TARGETS: &[(&str, Target)] = &[
    ("event_decode", event_decode),
    ("export_import", export_import),
    ("fs_log", fs_log),
];

fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("no tokio runtime: {e}"),
    }
}

/// A stored event body, decoded as every backend decodes one: a decoded
/// event takes the store's seq and session, encodes, and decodes again to
/// itself; anything else is a `Serialization` error naming session and seq.
pub fn event_decode(data: &[u8]) {
    let Ok(body) = std::str::from_utf8(data) else {
        return;
    };
    match SessionEvent::decode_stored("fuzz-session", 42, body) {
        Ok(event) => {
            assert_eq!((event.seq, event.session_id.as_str()), (42, "fuzz-session"));
            // Validation and token estimates must not panic on whatever decoded.
            let _ = event.validate();
            let _ = event.message.text();
            let encoded = match event.encode() {
                Ok(text) => text,
                Err(e) => panic!("a decoded event must encode: {e}"),
            };
            match SessionEvent::decode_stored("fuzz-session", 42, &encoded) {
                Ok(again) => assert_eq!(again, event, "encode then decode is the identity"),
                Err(e) => panic!("an encoded event must decode: {e}\n{encoded}"),
            }
        }
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Serialization, "{e}");
            assert!(e.to_string().contains("session fuzz-session seq 42"), "{e}");
        }
    }
}

fn kind_of<T>(r: &Result<T, SessionError>) -> Result<(), ErrorKind> {
    r.as_ref().map(|_| ()).map_err(SessionError::kind)
}

/// An export file read by [`ExportReader`] and each dump imported into the
/// reference store and SQLite: every failure is typed, both stores accept
/// or reject the same dumps alike, and what they accept reads back the same.
pub fn export_import(data: &[u8]) {
    let reader = match ExportReader::new(data) {
        Ok(r) => r,
        Err(e) => {
            assert!(
                matches!(e.kind(), ErrorKind::InvalidInput | ErrorKind::Backend),
                "{e}"
            );
            return;
        }
    };
    runtime().block_on(async {
        let memory = InMemoryRepository::new();
        let sqlite = match SqliteRepository::in_memory().await {
            Ok(s) => s,
            Err(e) => panic!("sqlite: {e}"),
        };
        for dump in reader.take(8) {
            let dump = match dump {
                Ok(d) => d,
                Err(e) => {
                    assert!(
                        matches!(e.kind(), ErrorKind::Serialization | ErrorKind::InvalidInput),
                        "{e}"
                    );
                    continue;
                }
            };
            let id = dump.session.id.clone();
            let a = memory.import_session(dump.clone()).await;
            let b = sqlite.import_session(dump).await;
            assert_eq!(
                kind_of(&a),
                kind_of(&b),
                "memory and sqlite differ on importing {id}: {a:?} / {b:?}"
            );
            if !matches!(a, Ok(ImportOutcome::Imported)) {
                continue;
            }
            let (ma, sa) = (memory.get(&id).await, sqlite.get(&id).await);
            assert_eq!(kind_of(&ma), kind_of(&sa), "get {id}: {ma:?} / {sa:?}");
            for view in [EventView::Archive, EventView::Context] {
                let seqs = |r: Result<Vec<SessionEvent>, SessionError>| {
                    r.map(|v| v.into_iter().map(|e| (e.seq, e.id)).collect::<Vec<_>>())
                        .map_err(|e| e.kind())
                };
                assert_eq!(
                    seqs(memory.all_events(&id, view).await),
                    seqs(sqlite.all_events(&id, view).await),
                    "{view:?} of {id}"
                );
            }
        }
    });
}

/// Bytes where a file store keeps a session: after a valid log of two
/// events, or instead of the log, or instead of the session file. Reads,
/// search, listing, export, appends and reopening never panic; a damaged
/// session is a typed error; bytes past the acknowledged log (a torn tail)
/// never change what is read, and the next append lands after the valid events.
pub fn fs_log(data: &[u8]) {
    let Some((&mode, bytes)) = data.split_first() else {
        return;
    };
    let Ok(dir) = tempfile::tempdir() else {
        panic!("no temp dir");
    };
    runtime().block_on(fs_log_in(dir.path(), mode % 3, bytes));
}

/// The fixed session ids the targets use.
fn sid(id: &str) -> SessionId {
    match SessionId::new(id) {
        Ok(id) => id,
        Err(e) => panic!("session id {id:?}: {e}"),
    }
}

/// A session of alice with a fixed id.
fn new_session(id: &str) -> NewSession {
    match NewSession::new("app", "alice", chrono::Utc::now()).and_then(|n| n.with_id(id)) {
        Ok(n) => n,
        Err(e) => panic!("new session {id:?}: {e}"),
    }
}

async fn open_fs(root: &Path) -> Arc<dyn SessionRepository> {
    match FsRepository::builder(root).sync(false).open().await {
        Ok(r) => Arc::new(r),
        Err(e) => panic!("open: {e}"),
    }
}

async fn fs_log_in(root: &Path, mode: u8, bytes: &[u8]) {
    let repo = open_fs(root).await;
    if let Err(e) = repo.create(new_session("s")).await {
        panic!("create: {e}");
    }
    for text in ["first needle", "second"] {
        if let Err(e) = repo
            .append(&sid("s"), vec![SessionEvent::new(Message::user(text))])
            .await
        {
            panic!("append: {e}");
        }
    }
    let dir = root.join("sessions").join("s");
    let (file, write) = match mode {
        0 => ("events.jsonl", Write::Append),
        1 => ("events.jsonl", Write::Replace),
        _ => ("session.json", Write::Replace),
    };
    let path = dir.join(file);
    let written = match write {
        Write::Append => std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, bytes)),
        Write::Replace => std::fs::write(&path, bytes),
    };
    if let Err(e) = written {
        panic!("writing {}: {e}", path.display());
    }

    for repo in [repo, open_fs(root).await] {
        let archive = repo.all_events(&sid("s"), EventView::Archive).await;
        let _ = repo.all_events(&sid("s"), EventView::Context).await;
        let _ = repo.get(&sid("s")).await;
        let _ = repo.search(&SearchQuery::in_session("s", "needle")).await;
        let _ = repo
            .search(&SearchQuery::for_user("app", "alice", "needle"))
            .await;
        let _ = repo.list(&session_core::SessionQuery::new()).await;
        let _ = repo.export_session(&sid("s")).await;
        if mode == 0 {
            // A tail past the acknowledged bytes is invisible.
            let texts: Vec<String> = match archive {
                Ok(events) => events
                    .into_iter()
                    .map(|e| e.message.text().to_owned())
                    .collect(),
                Err(e) => panic!("a torn tail made the session unreadable: {e}"),
            };
            assert_eq!(texts[..2], ["first needle", "second"]);
        }
    }
    let repo = open_fs(root).await;
    let appended = repo
        .append(&sid("s"), vec![SessionEvent::new(Message::user("after"))])
        .await;
    if mode == 0 {
        match appended {
            Ok(out) => assert_eq!(out.seqs, [3], "lands after the valid events"),
            Err(e) => panic!("append after a torn tail: {e}"),
        }
        let texts: Vec<String> = match repo.all_events(&sid("s"), EventView::Archive).await {
            Ok(events) => events
                .into_iter()
                .map(|e| e.message.text().to_owned())
                .collect(),
            Err(e) => panic!("read after repair: {e}"),
        };
        assert_eq!(texts, ["first needle", "second", "after"]);
    }
    // Other sessions are never affected.
    if let Err(e) = repo.create(new_session("other")).await {
        panic!("another session: {e}");
    }
    match repo
        .append(
            &sid("other"),
            vec![SessionEvent::new(Message::user("fine"))],
        )
        .await
    {
        Ok(out) => assert_eq!(out.seqs, [1]),
        Err(e) => panic!("another session: {e}"),
    }
}

#[derive(Clone, Copy)]
enum Write {
    Append,
    Replace,
}
