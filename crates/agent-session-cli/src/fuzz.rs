//! The bodies of the command line's `cargo fuzz` targets in `fuzz/`
//! (`cli_args`, `store_url`).
//!
//! Each takes the fuzzer's bytes and panics only when a property breaks, so
//! the committed seeds (`fuzz/seeds/<target>/`) and every crash the fuzzer
//! found (`fuzz/regressions/<target>/`) replay as ordinary tests in this
//! crate's `tests/fuzz_inputs.rs`.

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::Value;

use crate::args::{parse_duration, parse_pair, parse_time, parse_ttl, ArgError};
use crate::store_url::redact;

/// A fuzz target's body: panics only when a property breaks.
pub type Target = fn(&[u8]);

/// The command line's fuzz targets, by name.
pub const TARGETS: &[(&str, Target)] = &[("cli_args", cli_args), ("store_url", store_url)];

/// A fixed "now", so a run is reproducible.
fn now() -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(1_750_000_000, 0).unwrap_or_default()
}

fn one_line(e: &ArgError, flag: &str) {
    let msg = e.to_string();
    assert_eq!(e.flag(), flag);
    assert!(msg.starts_with(flag), "{msg}");
    assert!(!msg.contains('\n'), "an error is one line: {msg:?}");
}

/// One argument value through every parser of the command line: `--ttl`,
/// a duration flag, `--since`, `--state` and `--meta` pairs. Nothing panics; a refused
/// value is a one-line error naming the flag; an accepted duration is at
/// least a second and formats back (humantime) to itself; an accepted TTL
/// lands after now by that duration; an accepted pair has a non-empty key
/// without `=`, writes back as `K=JSON` to itself, and its state delta goes
/// through event validation without a panic.
pub fn cli_args(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let now = now();

    let duration = parse_duration("--fuzz", text);
    match &duration {
        Ok(d) => {
            assert!(*d >= TimeDelta::seconds(1), "{text:?} → {d}");
            let std = match d.to_std() {
                Ok(s) => s,
                Err(e) => panic!("{text:?} → {d}: {e}"),
            };
            let formatted = humantime::format_duration(std).to_string();
            match parse_duration("--fuzz", &formatted) {
                Ok(again) => assert_eq!(again, *d, "{text:?} → {formatted:?}"),
                Err(e) => panic!("{text:?} → {formatted:?} does not parse back: {e}"),
            }
        }
        Err(e) => one_line(e, "--fuzz"),
    }

    match parse_ttl(text, now) {
        Ok(None) => assert_eq!(text, "never"),
        Ok(Some(at)) => {
            assert!(at > now, "{text:?} → {at}");
            match &duration {
                Ok(d) => assert_eq!(at - now, *d, "{text:?}"),
                Err(e) => panic!("{text:?} is a TTL but not a duration: {e}"),
            }
        }
        Err(e) => one_line(&e, "--ttl"),
    }

    match parse_time("--since", text) {
        Ok(t) => match parse_time("--since", &t.to_rfc3339()) {
            Ok(again) => assert_eq!(again, t, "{text:?} → {t}"),
            Err(e) => panic!("{text:?} → {t} does not parse back: {e}"),
        },
        Err(e) => one_line(&e, "--since"),
    }

    for (flag, json_values) in [("--state", true), ("--meta", false)] {
        match parse_pair(flag, text, json_values) {
            Ok((k, v)) => {
                assert!(!k.is_empty() && !k.contains('='), "{text:?} → key {k:?}");
                let again = format!("{k}={v}");
                match parse_pair("--state", &again, true) {
                    Ok((k2, v2)) => {
                        assert_eq!(k2, k, "{again:?}");
                        assert!(same(&v, &v2), "{text:?} → {v} → {v2}");
                    }
                    Err(e) => panic!("{text:?} → {again:?} does not parse back: {e}"),
                }
                let mut delta = agent_session::StateMap::new();
                delta.insert(k, v);
                let _ = agent_session::SessionEvent::builder(agent_session::Message::user("x"))
                    .state_delta(delta.clone())
                    .build();
                if let Ok(new) = agent_session::NewSession::new("app", "user", now) {
                    let _ = new.with_metadata(delta).validate(now);
                }
            }
            Err(e) => one_line(&e, flag),
        }
    }
}

/// JSON values equal up to the last bit of a float (serde_json's default
/// float parsing may differ from the shortest printed form by one ulp).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if x.is_f64() || y.is_f64() {
                match (x.as_f64(), y.as_f64()) {
                    (Some(x), Some(y)) => (x - y).abs() <= x.abs().max(y.abs()) * 1e-15,
                    _ => false,
                }
            } else {
                x == y
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// The scheme of a store URL as `agent_session::open` reads it: what
/// precedes `://`, else the first `:`.
fn scheme(url: &str) -> Option<String> {
    url.split_once("://")
        .or_else(|| url.split_once(':'))
        .map(|(s, _)| s.to_ascii_lowercase())
}

/// Whether `agent_session::open(url)` stays in memory: `memory:`,
/// `sqlite::memory:`, and URLs it refuses before touching a file or the
/// network (no scheme, an unknown one, a sqlite URL without a path).
fn stays_in_memory(url: &str) -> bool {
    const OUTSIDE: &[&str] = &[
        "fs",
        "file",
        "redis",
        "rediss",
        "redis+cluster",
        "postgres",
        "postgresql",
        "es+http",
        "es+https",
    ];
    match scheme(url).as_deref() {
        None | Some("memory") => true,
        Some("sqlite") => url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            // A scheme in other case is refused by the sqlite backend itself.
            .is_none_or(|rest| matches!(rest.split('?').next(), Some(":memory:" | ""))),
        Some(s) => !OUTSIDE.contains(&s),
    }
}

/// A store URL: [`redact`] never panics and hides a password; the
/// Elasticsearch URL parser (pure) never panics; and `agent_session::open`,
/// for the URLs that stay in memory, opens a memory or SQLite store or
/// refuses the URL as `InvalidInput`.
pub fn store_url(data: &[u8]) {
    let Ok(url) = std::str::from_utf8(data) else {
        return;
    };
    let shown = redact(url);
    if let (Some(s), Some(at)) = (url.find("://"), url.rfind('@')) {
        if at > s && url[s + 3..at].contains(':') {
            assert!(shown.contains(":***@"), "{url:?} → {shown:?}");
            assert!(shown.len() <= url.len() + 3, "{url:?} → {shown:?}");
        }
    }
    if let Ok((base, params)) = agent_session::split_url_query(url, "fuzz", &["prefix"]) {
        assert!(url.starts_with(base), "{url:?} → {base:?}");
        assert!(params.len() <= 1 && params.iter().all(|(n, _)| n == "prefix"));
    }
    if let Ok(builder) = agent_session::EsRepository::builder_from_url(url) {
        let _ = format!("{builder:?}");
    }
    if !stays_in_memory(url) {
        return;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("no tokio runtime: {e}"),
    };
    runtime.block_on(async {
        match agent_session::open(url).await {
            Ok(repo) => {
                let backend = repo.capabilities().backend;
                assert!(
                    matches!(backend, "memory" | "sqlite"),
                    "{url:?} → {backend}"
                );
            }
            Err(e) => assert_eq!(
                e.kind(),
                agent_session::ErrorKind::InvalidInput,
                "{url:?}: {e}"
            ),
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_in_memory_urls_are_opened() {
        for url in [
            "memory://",
            "MEMORY:",
            "sqlite::memory:",
            "sqlite://:memory:?x",
            "sqlite://",
            "SQLITE://x.db",
            "nope",
            "ftp://x",
            "",
        ] {
            assert!(stays_in_memory(url), "{url}");
        }
        for url in [
            "sqlite://x.db",
            "sqlite:x.db",
            "fs://d",
            "FILE://d",
            "redis://h",
            "redis+cluster://a,b",
            "postgres://h/db",
            "postgresql:x",
            "es+https://h",
        ] {
            assert!(!stays_in_memory(url), "{url}");
        }
    }
}
