//! The parts of the `agent-session` command line that stand on their own:
//! parsing of argument values ([`args`]) and showing store URLs
//! ([`store_url`]). The binary uses them; so do the fuzz targets in
//! `fuzz/`, whose bodies live in [`fuzz`].

pub mod args;
pub mod fuzz;
pub mod store_url;
