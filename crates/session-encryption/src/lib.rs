#![doc = include_str!("../README.md")]

mod keyring;
mod repo;
mod seal;

pub use keyring::{Keyring, KEYS_ENV, KEYS_FILE_ENV};
pub use repo::{sealed_limits, EncryptedRepository, Rekeyed};
pub use seal::KEY_RECORD;
