//! Key-encryption keys (KEKs): named 256-bit keys, the last one current.
//!
//! A keyring is text, one key per line (or comma-separated in an
//! environment variable): `id:base64-of-32-bytes`. New data keys are
//! wrapped with the last key; older keys stay to open what they wrapped
//! until `rekey` has moved everything to the current one. Blank lines and
//! lines starting with `#` are skipped.

use std::path::Path;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hkdf::Hkdf;
use session_core::{Result, SessionError};
use sha2::Sha256;
use zeroize::Zeroizing;

/// The environment variable holding the keyring inline (`k1:…,k2:…`).
pub const KEYS_ENV: &str = "AGENT_SESSION_KEYS";
/// The environment variable naming a keyring file.
pub const KEYS_FILE_ENV: &str = "AGENT_SESSION_KEYS_FILE";

/// Bytes of a key.
const KEY_LEN: usize = 32;
/// Bytes of an XChaCha20-Poly1305 nonce.
const NONCE_LEN: usize = 24;

/// A 256-bit key, wiped from memory when dropped.
#[derive(Clone)]
pub(crate) struct Key(Zeroizing<[u8; KEY_LEN]>);

impl Key {
    /// A fresh random key.
    pub(crate) fn random() -> Self {
        let k = XChaCha20Poly1305::generate_key(&mut OsRng);
        let mut bytes = Zeroizing::new([0_u8; KEY_LEN]);
        bytes.copy_from_slice(&k);
        Self(bytes)
    }

    fn from_slice(bytes: &[u8]) -> Option<Self> {
        let mut out = Zeroizing::new([0_u8; KEY_LEN]);
        if bytes.len() != KEY_LEN {
            return None;
        }
        out.copy_from_slice(bytes);
        Some(Self(out))
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(self.0.as_slice().into())
    }

    /// Encrypts `plain` bound to `aad`: nonce and ciphertext, base64.
    pub(crate) fn seal(&self, aad: &[u8], plain: &[u8]) -> String {
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        // Encryption into a Vec fails only past the cipher's length limit
        // (256 GiB), far beyond any event the store accepts.
        let sealed = self
            .cipher()
            .encrypt(&nonce, Payload { msg: plain, aad })
            .unwrap_or_default();
        let mut out = Vec::with_capacity(NONCE_LEN + sealed.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        STANDARD.encode(out)
    }

    /// Opens what [`Self::seal`] made with the same key and `aad`; an
    /// `Encryption` error naming `context` otherwise.
    pub(crate) fn open(&self, aad: &[u8], sealed: &str, context: &str) -> Result<Vec<u8>> {
        let bytes = STANDARD
            .decode(sealed)
            .map_err(|_| failure(context, "the ciphertext is not base64"))?;
        if bytes.len() < NONCE_LEN {
            return Err(failure(context, "the ciphertext is cut short"));
        }
        let (nonce, body) = bytes.split_at(NONCE_LEN);
        self.cipher()
            .decrypt(XNonce::from_slice(nonce), Payload { msg: body, aad })
            .map_err(|_| {
                failure(
                    context,
                    "it does not open with its key here (a wrong key, or a value damaged, moved or replaced in the store)",
                )
            })
    }
}

/// An `Encryption` error.
pub(crate) fn failure(context: &str, reason: &str) -> SessionError {
    SessionError::Encryption {
        context: context.to_owned(),
        reason: reason.to_owned(),
    }
}

/// Named key-encryption keys; the last is the one new data keys are wrapped with.
#[derive(Clone)]
pub struct Keyring {
    keys: Vec<(String, Key)>,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring")
            .field("ids", &self.ids().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Keyring {
    /// Reads a keyring from text: `id:base64` per line or comma-separated.
    /// Ids are 1 to 64 letters, digits, `-` or `_`, each once; a key is
    /// exactly 32 bytes. `InvalidInput` names the entry (never the key).
    pub fn parse(text: &str) -> Result<Self> {
        let mut keys: Vec<(String, Key)> = Vec::new();
        for (n, entry) in text
            .split(['\n', ','])
            .map(str::trim)
            .enumerate()
            .filter(|(_, e)| !e.is_empty() && !e.starts_with('#'))
        {
            let entry_no = n.saturating_add(1);
            let (id, b64) = entry.split_once(':').ok_or_else(|| {
                SessionError::invalid(
                    "keyring",
                    format!("entry {entry_no} is not `id:base64-key`"),
                )
            })?;
            let id_ok = !id.is_empty()
                && id.len() <= 64
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if !id_ok {
                return Err(SessionError::invalid(
                    "keyring",
                    format!("entry {entry_no}: a key id is 1 to 64 letters, digits, - or _"),
                ));
            }
            if keys.iter().any(|(k, _)| k == id) {
                return Err(SessionError::invalid(
                    "keyring",
                    format!("key id {id} appears twice"),
                ));
            }
            let key = STANDARD
                .decode(b64.trim())
                .ok()
                .and_then(|b| Key::from_slice(&Zeroizing::new(b)))
                .ok_or_else(|| {
                    SessionError::invalid("keyring", format!("key {id} is not 32 bytes in base64"))
                })?;
            keys.push((id.to_owned(), key));
        }
        if keys.is_empty() {
            return Err(SessionError::invalid("keyring", "it holds no key"));
        }
        Ok(Self { keys })
    }

    /// Reads a keyring file (see [`Self::parse`]).
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = Zeroizing::new(std::fs::read_to_string(path).map_err(|e| {
            SessionError::invalid_because("keyring", format!("cannot read {}", path.display()), e)
        })?);
        Self::parse(&text)
    }

    /// The keyring the environment gives: [`KEYS_ENV`] inline, else the
    /// file [`KEYS_FILE_ENV`] names; `None` when neither is set.
    pub fn from_env() -> Result<Option<Self>> {
        if let Ok(inline) = std::env::var(KEYS_ENV) {
            return Self::parse(&Zeroizing::new(inline)).map(Some);
        }
        match std::env::var_os(KEYS_FILE_ENV) {
            Some(path) => Self::from_file(Path::new(&path)).map(Some),
            None => Ok(None),
        }
    }

    /// A new random key as a keyring entry `id:base64`.
    pub fn generate_entry(id: &str) -> String {
        let key = Key::random();
        format!("{id}:{}", STANDARD.encode(key.0.as_slice()))
    }

    /// A keyring of one fresh random key named `id` (for tests and quick
    /// starts: the key lives only in memory, so what it seals is lost with
    /// it). `InvalidInput` for an id a keyring file could not hold.
    pub fn generate(id: &str) -> Result<Self> {
        Self::parse(&Self::generate_entry(id))
    }

    /// The key ids, oldest first; the last is current.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|(id, _)| id.as_str())
    }

    /// The id of the key new data keys are wrapped with.
    pub fn current_id(&self) -> &str {
        self.keys.last().map_or("", |(id, _)| id.as_str())
    }

    fn key(&self, id: &str, context: &str) -> Result<&Key> {
        self.keys
            .iter()
            .find(|(k, _)| k == id)
            .map(|(_, key)| key)
            .ok_or_else(|| {
                failure(
                    context,
                    &format!(
                        "key {id} is not in the keyring (it holds {})",
                        self.ids().collect::<Vec<_>>().join(", ")
                    ),
                )
            })
    }

    fn current(&self) -> Result<&Key> {
        let id = self.current_id();
        self.key(id, "the keyring")
    }

    /// Wraps a data key with the current key, bound to `aad`: (key id, sealed key).
    pub(crate) fn wrap(&self, data_key: &Key, aad: &[u8]) -> Result<(String, String)> {
        let sealed = self.current()?.seal(aad, data_key.0.as_slice());
        Ok((self.current_id().to_owned(), sealed))
    }

    /// Unwraps a data key that key `id` wrapped bound to `aad`.
    pub(crate) fn unwrap(&self, id: &str, sealed: &str, aad: &[u8], context: &str) -> Result<Key> {
        let bytes = Zeroizing::new(self.key(id, context)?.open(aad, sealed, context)?);
        Key::from_slice(&bytes).ok_or_else(|| failure(context, "the data key is not 32 bytes"))
    }

    /// The data key of a shared scope (`scope` names it), derived from key
    /// `id` with HKDF-SHA256: the same for every writer, so it needs no
    /// storing and no coordination.
    pub(crate) fn derived(&self, id: &str, scope: &[u8], context: &str) -> Result<Key> {
        let kek = self.key(id, context)?;
        let hk = Hkdf::<Sha256>::new(Some(b"agent-session shared state v1"), kek.0.as_slice());
        let mut out = Zeroizing::new([0_u8; KEY_LEN]);
        hk.expand(scope, out.as_mut_slice())
            .map_err(|_| failure(context, "the key cannot be derived"))?;
        Ok(Key(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_entries_and_refuses_bad_ones_without_echoing_keys() {
        let a = Keyring::generate_entry("k1");
        let b = Keyring::generate_entry("k2");
        let ring = Keyring::parse(&format!("# keys\n{a}\n\n{b}\n")).unwrap();
        assert_eq!(ring.ids().collect::<Vec<_>>(), ["k1", "k2"]);
        assert_eq!(ring.current_id(), "k2");
        assert_eq!(
            Keyring::parse(&format!("{a},{b}")).unwrap().current_id(),
            "k2"
        );
        for bad in ["", "k1", "k1:c2hvcnQ=", "bad id:AAAA", &format!("{a}\n{a}")] {
            let err = Keyring::parse(bad).unwrap_err();
            assert_eq!(err.kind(), session_core::ErrorKind::InvalidInput, "{bad}");
            let key = a.split_once(':').unwrap().1;
            assert!(!err.to_string().contains(key), "{err}");
        }
        assert!(!format!("{ring:?}").contains(a.split_once(':').unwrap().1));
    }

    #[test]
    fn a_sealed_value_opens_only_with_its_key_and_binding() {
        let key = Key::random();
        let sealed = key.seal(b"s1", b"secret");
        assert_eq!(key.open(b"s1", &sealed, "v").unwrap(), b"secret");
        let other = Key::random();
        let e = other.open(b"s1", &sealed, "v").unwrap_err();
        assert_eq!(e.kind(), session_core::ErrorKind::Encryption);
        assert!(
            key.open(b"s2", &sealed, "v").is_err(),
            "bound to its session"
        );
        assert!(key.open(b"s1", "!!", "v").is_err());
        assert!(key.open(b"s1", "AAAA", "v").is_err());
    }
}
