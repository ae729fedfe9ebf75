//! The conformance suite through the encryption layer over the reference
//! store: sealing changes nothing an agent can observe. (`session-sqlite`
//! runs it over SQLite too.)

use session_core::{InMemoryRepository, Limits, SharedClock};
use session_encryption::{sealed_limits, EncryptedRepository, Keyring};
use session_testkit::TestStore;

fn keyring() -> Keyring {
    Keyring::parse(&format!(
        "{}\n{}",
        Keyring::generate_entry("old"),
        Keyring::generate_entry("current")
    ))
    .expect("keyring")
}

async fn encrypted_memory(clock: SharedClock) -> Option<TestStore> {
    let inner = InMemoryRepository::new()
        .with_clock(clock)
        .with_limits(sealed_limits(&Limits::default()));
    Some(TestStore::new(EncryptedRepository::new(inner, keyring())))
}

session_testkit::conformance_suite!(encrypted_memory);
session_testkit::promise_suite!(encrypted_memory, 64);
