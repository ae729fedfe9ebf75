//! Store URL query parameters: parsed once, unknown names refused.

use crate::error::{Result, SessionError};
use crate::validate::Limits;

/// Splits `url` at its `?` and returns the part before it with the query's
/// `name=value` pairs, refusing a name not in `known` (or given twice) with
/// an `InvalidInput` that lists what the store takes — so a misspelt
/// option is never silently ignored.
///
/// ```
/// use session_core::split_url_query;
/// let (base, params) = split_url_query("redis://h:6379/0?prefix=app1", "redis", &["prefix"]).unwrap();
/// assert_eq!(base, "redis://h:6379/0");
/// assert_eq!(params, [("prefix".to_owned(), "app1".to_owned())]);
/// assert!(split_url_query("sqlite://s.db?mode=ro", "sqlite", &[]).is_err());
/// ```
pub fn split_url_query<'a>(
    url: &'a str,
    store: &str,
    known: &[&str],
) -> Result<(&'a str, Vec<(String, String)>)> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url, Vec::new()));
    };
    let mut params: Vec<(String, String)> = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if !known.contains(&name) {
            let takes = if known.is_empty() {
                "it takes no query parameters".to_owned()
            } else {
                format!("it takes: {}", known.join(", "))
            };
            return Err(SessionError::invalid(
                "store URL",
                format!("unknown {store} URL parameter {name:?}; {takes}"),
            ));
        }
        if params.iter().any(|(n, _)| n == name) {
            return Err(SessionError::invalid(
                "store URL",
                format!("{store} URL parameter {name:?} is given twice"),
            ));
        }
        params.push((name.to_owned(), value.to_owned()));
    }
    Ok((base, params))
}

/// The store-level quota settings any store URL takes, whatever its engine.
pub const QUOTA_PARAMS: [&str; 3] = [
    "max_session_events",
    "max_session_bytes",
    "max_user_sessions",
];

/// Takes the quota settings ([`QUOTA_PARAMS`]) out of a store URL's query:
/// the URL without them (for the engine's own parsing) and `limits` with
/// them applied. A count is a whole number; `max_session_bytes` may carry
/// a unit (`kB`, `MB`, `GB` in powers of 1000, `KiB`, `MiB`, `GiB` in
/// powers of 1024). Anything else is `InvalidInput`.
///
/// ```
/// use session_core::{limits_from_url, Limits};
/// let (url, limits) = limits_from_url(
///     "redis://h/0?prefix=a&max_session_events=500&max_session_bytes=2MiB",
///     Limits::default(),
/// ).unwrap();
/// assert_eq!(url, "redis://h/0?prefix=a");
/// assert_eq!(limits.max_session_events, Some(500));
/// assert_eq!(limits.max_session_bytes, Some(2 * 1024 * 1024));
/// ```
pub fn limits_from_url(url: &str, mut limits: Limits) -> Result<(String, Limits)> {
    let (url, quotas) = take_url_params(url, &QUOTA_PARAMS);
    for (name, value) in quotas {
        limits = match name.as_str() {
            "max_user_sessions" => limits.with_max_user_sessions(whole_url_param(&name, &value)?),
            "max_session_bytes" => limits.with_max_session_bytes(byte_size(&name, &value)?),
            _ => limits.with_max_session_events(whole_url_param(&name, &value)?),
        };
    }
    Ok((url, limits))
}

/// Takes the parameters `names` out of a URL's query: the URL without
/// them (the rest in their order, for the engine's own client) and their
/// `name=value` pairs as given.
///
/// ```
/// use session_core::take_url_params;
/// let (url, taken) = take_url_params("postgres://h/db?schema=a&sslmode=disable", &["schema"]);
/// assert_eq!(url, "postgres://h/db?sslmode=disable");
/// assert_eq!(taken, [("schema".to_owned(), "a".to_owned())]);
/// ```
pub fn take_url_params(url: &str, names: &[&str]) -> (String, Vec<(String, String)>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), Vec::new());
    };
    let mut taken = Vec::new();
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if names.contains(&name) {
            taken.push((name.to_owned(), value.to_owned()));
        } else {
            rest.push(pair);
        }
    }
    let url = if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    (url, taken)
}

/// A URL parameter's value as a whole number; anything else is
/// `InvalidInput` naming the parameter.
pub fn whole_url_param(name: &str, value: &str) -> Result<u64> {
    value.parse::<u64>().map_err(|e| {
        SessionError::invalid_because(
            "store URL",
            format!("{name}={value:?} is not a whole number"),
            e,
        )
    })
}

/// A size in bytes: a whole number with an optional decimal or binary unit.
fn byte_size(name: &str, value: &str) -> Result<u64> {
    const UNITS: [(&str, u64); 7] = [
        ("KiB", 1 << 10),
        ("MiB", 1 << 20),
        ("GiB", 1 << 30),
        ("kB", 1_000),
        ("MB", 1_000_000),
        ("GB", 1_000_000_000),
        ("B", 1),
    ];
    let (digits, unit) = UNITS
        .iter()
        .find_map(|(suffix, unit)| value.strip_suffix(suffix).map(|d| (d, *unit)))
        .unwrap_or((value, 1));
    whole_url_param(name, digits.trim())?
        .checked_mul(unit)
        .ok_or_else(|| SessionError::invalid("store URL", format!("{name}={value:?} is too large")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taken_params_leave_the_rest_in_order() {
        let take = |url: &str| take_url_params(url, &["schema", "remembered_heads"]);
        let pair = |n: &str, v: &str| (n.to_owned(), v.to_owned());
        assert_eq!(
            take("postgres://h/db?schema=t1&sslmode=disable"),
            (
                "postgres://h/db?sslmode=disable".to_owned(),
                vec![pair("schema", "t1")]
            )
        );
        assert_eq!(
            take("postgres://h/db"),
            ("postgres://h/db".to_owned(), vec![])
        );
        assert_eq!(
            take("postgres://h/db?a=1&remembered_heads=9&b=2&schema=x"),
            (
                "postgres://h/db?a=1&b=2".to_owned(),
                vec![pair("remembered_heads", "9"), pair("schema", "x")]
            )
        );
    }

    #[test]
    fn byte_quotas_take_decimal_and_binary_units() {
        let bytes = |v: &str| {
            limits_from_url(&format!("fs://d?max_session_bytes={v}"), Limits::default())
                .map(|(_, l)| l.max_session_bytes)
        };
        assert_eq!(bytes("4096").unwrap(), Some(4096));
        assert_eq!(bytes("10kB").unwrap(), Some(10_000));
        assert_eq!(bytes("3MiB").unwrap(), Some(3 << 20));
        assert_eq!(bytes("1GB").unwrap(), Some(1_000_000_000));
        for bad in ["", "ten", "5 TB", "-1MB", "99999999999GiB"] {
            assert!(bytes(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn unknown_and_repeated_parameters_are_refused() {
        let err = split_url_query("redis://h?prefx=a", "redis", &["prefix"]).unwrap_err();
        assert!(err.to_string().contains("prefx"), "{err}");
        assert!(err.to_string().contains("prefix"), "{err}");
        assert!(split_url_query("redis://h?prefix=a&prefix=b", "redis", &["prefix"]).is_err());
        let (base, p) = split_url_query("fs://./data", "fs", &[]).unwrap();
        assert_eq!((base, p.len()), ("fs://./data", 0));
    }
}
