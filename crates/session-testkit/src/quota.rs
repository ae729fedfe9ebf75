//! Quotas: cases run by each backend's tests on a store built with
//! [`quota_limits`] (the conformance stores use the default: no quotas).

use std::sync::Arc;

use session_core::{
    ErrorKind, EventView, ImportOutcome, InMemoryRepository, Limits, Message, NewSession, RewindTo,
    SessionDump, SessionEvent, SessionId, SessionQuery, SessionRepository, SessionRepositoryExt,
};

use crate::fixture::{texts, user};

/// The events a session may hold in [`quota_limits`].
pub const MAX_SESSION_EVENTS: u64 = 5;

/// The bytes a session's events may take as stored in [`quota_limits`].
pub const MAX_SESSION_BYTES: u64 = 4096;

/// The live sessions a user may hold in an app in [`quota_limits`].
pub const MAX_USER_SESSIONS: u64 = 5;

/// The limits a backend test builds its store with for
/// [`events_per_session`], [`bytes_per_session`] and [`sessions_per_user`].
pub fn quota_limits() -> Limits {
    Limits::default()
        .with_max_session_events(MAX_SESSION_EVENTS)
        .with_max_session_bytes(MAX_SESSION_BYTES)
        .with_max_user_sessions(MAX_USER_SESSIONS)
}

/// Every quota check, on one store built with [`quota_limits`] (they use
/// different users).
pub async fn all(repo: Arc<dyn SessionRepository>) {
    events_per_session(repo.clone()).await;
    bytes_per_session(repo.clone()).await;
    imports_are_held_to_the_session_quotas_and_the_event_size_limit(repo.clone()).await;
    sessions_per_user(repo).await;
}

/// 16 writers each appending one event `event(w)` to session `id` at once:
/// how many landed (the others must be refused by a quota).
async fn race(
    repo: &Arc<dyn SessionRepository>,
    id: &SessionId,
    event: fn(u32) -> SessionEvent,
) -> u64 {
    let mut writers = Vec::new();
    for w in 0..16 {
        let repo = repo.clone();
        let id = id.clone();
        writers.push(tokio::spawn(async move {
            match repo.append(&id, vec![event(w)]).await {
                Ok(_) => true,
                Err(e) if e.kind() == ErrorKind::QuotaExceeded => false,
                Err(e) => panic!("append failed: {e}"),
            }
        }));
    }
    let mut landed = 0u64;
    for w in writers {
        if w.await.unwrap() {
            landed += 1;
        }
    }
    landed
}

/// An event of about 900 bytes as stored, the same size for every `n` below 100.
fn sized_event(n: u32) -> SessionEvent {
    SessionEvent::new(Message::user(format!("w{n:02} {}", "b".repeat(760))))
}

/// 16 writers racing with events of about 900 bytes get exactly the four
/// that fit in [`MAX_SESSION_BYTES`] between them; a fifth is
/// `QuotaExceeded` naming the bytes quota and writes nothing, while a small
/// event still fits; a rewind frees its bytes for new events.
pub async fn bytes_per_session(repo: Arc<dyn SessionRepository>) {
    let size = sized_event(0).stored_bytes().unwrap();
    assert!(
        4 * size + 300 <= MAX_SESSION_BYTES && 5 * size > MAX_SESSION_BYTES,
        "an event of {size} bytes: four must fit with room to spare, five must not"
    );
    let s = repo
        .create(NewSession::new("quota-app", "erin", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    let landed = race(&repo, &s.id, sized_event).await;
    assert_eq!(landed, 4, "exactly what fits landed");
    let held = repo.get(&s.id).await.unwrap();
    assert_eq!(held.event_count, 4);
    assert!(
        held.event_bytes >= 4 * size && held.event_bytes <= MAX_SESSION_BYTES,
        "{} bytes held",
        held.event_bytes
    );

    let err = repo.append(&s.id, vec![sized_event(50)]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::QuotaExceeded);
    assert!(
        err.to_string().contains("bytes per session")
            && err
                .to_string()
                .contains(&format!("limit of {MAX_SESSION_BYTES}")),
        "{err}"
    );
    assert_eq!(
        repo.event_version(&s.id).await.unwrap(),
        held.version,
        "nothing written"
    );
    repo.append(&s.id, vec![user("short")]).await.unwrap();
    let last = repo.get(&s.id).await.unwrap();
    assert!(last.event_bytes > held.event_bytes);

    repo.rewind_to(&s.id, &RewindTo::Seq(4)).await.unwrap();
    let rewound = repo.get(&s.id).await.unwrap();
    assert!(rewound.event_bytes <= last.event_bytes.saturating_sub(size));
    repo.append(&s.id, vec![sized_event(51)]).await.unwrap();
}

/// An append past the events quota is `QuotaExceeded` and writes nothing
/// (a batch is refused whole); a retried append of held events still
/// answers; 16 writers racing for the last places get exactly the quota
/// between them, never one more.
pub async fn events_per_session(repo: Arc<dyn SessionRepository>) {
    let now = chrono::Utc::now();
    let s = repo
        .create(NewSession::new("quota-app", "alice", now).unwrap())
        .await
        .unwrap();
    let first = user("one");
    repo.append(&s.id, vec![first.clone(), user("two"), user("three")])
        .await
        .unwrap();
    let version = repo.event_version(&s.id).await.unwrap();
    let err = repo
        .append(&s.id, vec![user("four"), user("five"), user("six")])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::QuotaExceeded);
    assert!(
        err.to_string().contains(s.id.as_str()) && err.to_string().contains("limit of 5"),
        "{err}"
    );
    assert_eq!(
        repo.event_version(&s.id).await.unwrap(),
        version,
        "nothing written"
    );
    let again = repo.append(&s.id, vec![first]).await.unwrap();
    assert_eq!(
        (again.seqs, again.written),
        (vec![1], 0),
        "a retry still answers"
    );
    repo.append(&s.id, vec![user("four"), user("five")])
        .await
        .unwrap();
    assert_eq!(
        repo.append(&s.id, vec![user("six")])
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::QuotaExceeded
    );
    let all = repo.all_events(&s.id, EventView::Archive).await.unwrap();
    assert_eq!(texts(&all), ["one", "two", "three", "four", "five"]);

    let raced = repo
        .create(NewSession::new("quota-app", "alice", now).unwrap())
        .await
        .unwrap();
    let landed = race(&repo, &raced.id, |w| {
        SessionEvent::new(Message::user(format!("writer {w}")))
    })
    .await;
    assert_eq!(landed, MAX_SESSION_EVENTS, "exactly the quota landed");
    let stored = repo
        .all_events(&raced.id, EventView::Archive)
        .await
        .unwrap();
    assert_eq!(u64::try_from(stored.len()).unwrap(), MAX_SESSION_EVENTS);
    assert_eq!(
        repo.get(&raced.id).await.unwrap().event_count,
        MAX_SESSION_EVENTS
    );
}

/// 16 creators racing for a user's last places get exactly the quota
/// between them; a create or an import of a new session past it is
/// `QuotaExceeded` naming the owner and writes nothing; other users and
/// other apps are not counted; re-importing a held session is not a new
/// one; deleting a session frees its place.
pub async fn sessions_per_user(repo: Arc<dyn SessionRepository>) {
    let now = chrono::Utc::now();
    let new = |app: &str, user: &str| NewSession::new(app, user, now).unwrap();
    let mut creators = Vec::new();
    for _ in 0..16 {
        let repo = repo.clone();
        let session = new("quota-app", "carol");
        creators.push(tokio::spawn(async move {
            match repo.create(session).await {
                Ok(s) => Some(s.id),
                Err(e) if e.kind() == ErrorKind::QuotaExceeded => None,
                Err(e) => panic!("create failed: {e}"),
            }
        }));
    }
    let mut created: Vec<SessionId> = Vec::new();
    for c in creators {
        created.extend(c.await.unwrap());
    }
    assert_eq!(
        u64::try_from(created.len()).unwrap(),
        MAX_USER_SESSIONS,
        "exactly the quota was created"
    );
    let held = repo
        .list(
            &SessionQuery::new()
                .app("quota-app")
                .user("carol")
                .page(0, 100),
        )
        .await
        .unwrap();
    assert_eq!(u64::try_from(held.items.len()).unwrap(), MAX_USER_SESSIONS);
    let err = repo.create(new("quota-app", "carol")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::QuotaExceeded);
    assert!(
        err.to_string().contains("quota-app/carol")
            && err.to_string().contains("sessions per user"),
        "{err}"
    );
    repo.create(new("quota-app", "dave")).await.unwrap();
    repo.create(new("other-app", "carol")).await.unwrap();

    let dump = repo.export_session(&created[0]).await.unwrap();
    assert_eq!(
        repo.import_session(dump.clone()).await.unwrap(),
        ImportOutcome::Unchanged,
        "a held session is not a new one"
    );
    let mut copy = dump;
    copy.session.id = SessionId::generate();
    let err = repo.import_session(copy.clone()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::QuotaExceeded);
    assert_eq!(
        repo.get(&copy.session.id).await.unwrap_err().kind(),
        ErrorKind::NotFound,
        "nothing written"
    );
    assert!(repo.delete(&created[0]).await.unwrap());
    repo.create(new("quota-app", "carol")).await.unwrap();
}

/// The export of a session of `events`, written in a store without limits.
async fn dump_of(user: &str, events: Vec<SessionEvent>) -> SessionDump {
    let source = InMemoryRepository::new().with_limits(Limits::unlimited());
    let s = source
        .create(NewSession::new("quota-app", user, chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    source.append(&s.id, events).await.unwrap();
    source.export_session(&s.id).await.unwrap()
}

/// An import that must be refused with `kind`, its message naming the
/// session and holding `says`, and write nothing: the store then holds
/// the session as `held` (absent when `None`).
async fn refused_import(
    repo: &Arc<dyn SessionRepository>,
    dump: SessionDump,
    kind: ErrorKind,
    says: &str,
    held: Option<&session_core::Session>,
) {
    let id = dump.session.id.clone();
    let err = repo.import_session(dump).await.unwrap_err();
    assert_eq!(err.kind(), kind, "{err}");
    let text = err.to_string();
    assert!(text.contains(id.as_str()) && text.contains(says), "{text}");
    match held {
        None => assert_eq!(
            repo.get(&id).await.unwrap_err().kind(),
            ErrorKind::NotFound,
            "nothing written: {text}"
        ),
        Some(before) => {
            let after = repo.get(&id).await.unwrap();
            assert_eq!(
                (after.version, after.event_count, after.event_bytes),
                (before.version, before.event_count, before.event_bytes),
                "the held copy stays: {text}"
            );
        }
    }
}

/// Imports go through the limits appends do: a session of more events
/// than [`MAX_SESSION_EVENTS`] or more bytes than [`MAX_SESSION_BYTES`]
/// is `QuotaExceeded` naming the session and its quota, an event over the
/// event size limit (4 MiB) is `InvalidInput` naming the session and the
/// event, and nothing of the session is written (a held copy stays as it
/// was); a session within the limits imports.
pub async fn imports_are_held_to_the_session_quotas_and_the_event_size_limit(
    repo: Arc<dyn SessionRepository>,
) {
    let small = |n: u64| -> Vec<SessionEvent> {
        (0..n)
            .map(|i| SessionEvent::new(Message::user(format!("import {i}"))))
            .collect()
    };
    let too_many = dump_of("frank", small(MAX_SESSION_EVENTS + 1)).await;
    refused_import(
        &repo,
        too_many,
        ErrorKind::QuotaExceeded,
        &format!("events per session is over the limit of {MAX_SESSION_EVENTS}"),
        None,
    )
    .await;

    let heavy = dump_of("frank", (0..5).map(sized_event).collect()).await;
    assert!(heavy.session.event_count <= MAX_SESSION_EVENTS);
    refused_import(
        &repo,
        heavy,
        ErrorKind::QuotaExceeded,
        &format!("bytes per session is over the limit of {MAX_SESSION_BYTES}"),
        None,
    )
    .await;

    let limit = Limits::default().max_event_bytes;
    let huge = SessionEvent::new(Message::user("h".repeat(limit.saturating_add(1024))));
    let huge_id = huge.id.clone();
    let oversized = dump_of("frank", vec![huge]).await;
    refused_import(
        &repo,
        oversized,
        ErrorKind::InvalidInput,
        &format!("event {huge_id}"),
        None,
    )
    .await;

    // A session within the limits imports; a later copy of it past the
    // events quota leaves the held one as it was.
    let source = InMemoryRepository::new().with_limits(Limits::unlimited());
    let s = source
        .create(NewSession::new("quota-app", "frank", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    source
        .append(&s.id, small(MAX_SESSION_EVENTS))
        .await
        .unwrap();
    let fits = source.export_session(&s.id).await.unwrap();
    assert_eq!(
        repo.import_session(fits).await.unwrap(),
        ImportOutcome::Imported
    );
    let held = repo.get(&s.id).await.unwrap();
    assert_eq!(held.event_count, MAX_SESSION_EVENTS);
    source.append(&s.id, small(1)).await.unwrap();
    let grown = source.export_session(&s.id).await.unwrap();
    assert!(grown.session.version > held.version);
    refused_import(
        &repo,
        grown,
        ErrorKind::QuotaExceeded,
        "events per session",
        Some(&held),
    )
    .await;
}
