#![doc = include_str!("../README.md")]

mod body;
mod client;
mod store;

pub use store::{EsRepository, EsRepositoryBuilder, Refresh};
