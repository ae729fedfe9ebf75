//! Keys: what the raw store holds, a wrong or missing key, rotation with
//! `rekey`, and sessions stored before encryption was on.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use session_core::{
    ErrorKind, EventView, InMemoryRepository, Message, NewSession, SessionEvent, SessionRepository,
    SessionRepositoryExt,
};
use session_encryption::{EncryptedRepository, Keyring, Rekeyed, KEY_RECORD};

fn ring(entries: &[&str]) -> Keyring {
    Keyring::parse(&entries.join("\n")).unwrap()
}

fn said(text: &str) -> SessionEvent {
    SessionEvent::builder(Message::user(text))
        .state("plan", text)
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_store_holds_no_plain_canary() {
    let inner = Arc::new(InMemoryRepository::new());
    let sealed = EncryptedRepository::new(inner.clone(), ring(&[&Keyring::generate_entry("k1")]));
    session_testkit::sealed::plant(&sealed, chrono::Utc::now()).await;
    // The in-memory store's Debug form prints every session, event and state value.
    session_testkit::sealed::check_sealed(&format!("{inner:?}"));
    session_testkit::sealed::moved_or_replaced_values_are_refused(&sealed, &inner).await;
}

#[tokio::test]
async fn a_wrong_or_missing_key_is_an_encryption_error_never_garbage() {
    let inner = Arc::new(InMemoryRepository::new());
    let k1 = Keyring::generate_entry("k1");
    let writer = EncryptedRepository::new(inner.clone(), ring(&[&k1]));
    let s = writer
        .create(NewSession::new("app", "alice", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    writer
        .append(&s.id, vec![said("the vault code is 0451")])
        .await
        .unwrap();

    let other_k1 = EncryptedRepository::new(inner.clone(), ring(&[&Keyring::generate_entry("k1")]));
    let e = other_k1.get(&s.id).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Encryption, "{e}");
    assert!(e.to_string().contains("wrong key"), "{e}");
    let e = other_k1
        .all_events(&s.id, EventView::Archive)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Encryption);

    let without_k1 =
        EncryptedRepository::new(inner.clone(), ring(&[&Keyring::generate_entry("k2")]));
    let e = without_k1.get(&s.id).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Encryption);
    assert!(
        e.to_string().contains("key k1 is not in the keyring"),
        "{e}"
    );

    let read = writer.all_events(&s.id, EventView::Archive).await.unwrap();
    assert_eq!(read[0].message.text(), "the vault code is 0451");
}

#[tokio::test]
async fn rekey_moves_sessions_to_the_current_key_and_the_old_key_can_go() {
    let inner = Arc::new(InMemoryRepository::new());
    let (k1, k2) = (Keyring::generate_entry("k1"), Keyring::generate_entry("k2"));
    let first = EncryptedRepository::new(inner.clone(), ring(&[&k1]));
    let s = first
        .create(NewSession::new("app", "alice", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    first
        .append(&s.id, vec![said("before rotation")])
        .await
        .unwrap();

    let rotated = EncryptedRepository::new(inner.clone(), ring(&[&k1, &k2]));
    rotated
        .append(&s.id, vec![said("during rotation")])
        .await
        .unwrap();
    assert_eq!(rotated.rekey(&s.id).await.unwrap(), Rekeyed::Rekeyed);
    assert_eq!(rotated.rekey(&s.id).await.unwrap(), Rekeyed::UpToDate);
    let stored = inner.get(&s.id).await.unwrap();
    assert_eq!(stored.metadata[KEY_RECORD]["kid"], "k2");
    assert_eq!(stored.version, s.version + 3, "two appends and the rekey");

    let only_k2 = EncryptedRepository::new(inner.clone(), ring(&[&k2]));
    let texts: Vec<String> = only_k2
        .all_events(&s.id, EventView::Archive)
        .await
        .unwrap()
        .iter()
        .map(|e| e.message.text().to_owned())
        .collect();
    assert_eq!(texts, ["before rotation", "during rotation"]);
    assert_eq!(
        only_k2.get(&s.id).await.unwrap().state["plan"],
        "during rotation"
    );
    only_k2.append(&s.id, vec![said("after")]).await.unwrap();
}

#[tokio::test]
async fn a_session_stored_before_encryption_reads_and_rekey_seals_it() {
    let inner = Arc::new(InMemoryRepository::new());
    let s = inner
        .create(NewSession::new("app", "alice", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    inner
        .append(&s.id, vec![said("written in plain")])
        .await
        .unwrap();
    let sealed = EncryptedRepository::new(inner.clone(), ring(&[&Keyring::generate_entry("k1")]));
    let read = sealed.all_events(&s.id, EventView::Archive).await.unwrap();
    assert_eq!(read[0].message.text(), "written in plain");
    let e = sealed.append(&s.id, vec![said("more")]).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Encryption);
    assert!(e.to_string().contains("rekey"), "{e}");

    assert_eq!(sealed.rekey(&s.id).await.unwrap(), Rekeyed::Rekeyed);
    assert!(!format!("{inner:?}").contains("written in plain"));
    sealed.append(&s.id, vec![said("more")]).await.unwrap();
    let read = sealed.all_events(&s.id, EventView::Archive).await.unwrap();
    assert_eq!(read.len(), 2);
    assert_eq!(read[0].message.text(), "written in plain");
}
