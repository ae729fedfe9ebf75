//! Argument values the command line parses itself: durations (`--ttl`),
//! times (`--since`) and `K=V` pairs (`--state`, `--meta`).
//!
//! Every function here is total: any string gives a value or an
//! [`ArgError`] naming the flag, the value and what is allowed, never a
//! panic (the `cli_args` fuzz target holds them to that).

use std::fmt;
use std::time::Duration as StdDuration;

use agent_session::StateMap;
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::Value;

/// A refused argument value: which flag, what was given, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError {
    flag: String,
    value: String,
    reason: String,
}

impl ArgError {
    /// `value` of `flag` refused for `reason`.
    pub fn new(flag: &str, value: &str, reason: impl Into<String>) -> Self {
        Self {
            flag: flag.to_owned(),
            value: value.to_owned(),
            reason: reason.into(),
        }
    }

    /// The flag whose value was refused (`--ttl`).
    pub fn flag(&self) -> &str {
        &self.flag
    }

    /// The value as given.
    pub fn value(&self) -> &str {
        &self.value
    }
}

impl fmt::Display for ArgError {
    /// One line: the value is quoted and escaped, so a newline in it cannot
    /// break the message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?}: {}", self.flag, self.value, self.reason)
    }
}

impl std::error::Error for ArgError {}

/// The forms `--ttl` takes, for messages.
pub const TTL_FORMS: &str = "e.g. 30m, 12h, 30d, 1h30m, 2weeks or never";

/// The shortest duration a flag takes.
const MIN_DURATION: StdDuration = StdDuration::from_secs(1);

/// Why a duration did not parse.
enum DurationError {
    /// Not a duration at all.
    Syntax(String),
    /// A duration, but too large for `std::time::Duration` (or a fraction
    /// finer than a nanosecond).
    TooLarge,
}

/// Parses a duration the way `humantime` does (`30d`, `12h`, `90m`, `45s`,
/// `1h30m`, `2 weeks`, `1.5h`, units from `ns` to `y`), one term at a time.
///
/// A `--max-age` value (`12h`, `30d`, `2weeks`): how old archived events may get.
pub fn parse_max_age(value: &str) -> Result<StdDuration, ArgError> {
    const FLAG: &str = "--max-age";
    human_duration(value).map_err(|e| match e {
        DurationError::TooLarge => ArgError::new(FLAG, value, "out of range: at most 100 years"),
        DurationError::Syntax(why) => {
            ArgError::new(FLAG, value, format!("{why}; use e.g. 12h, 30d or 2weeks"))
        }
    })
}

/// `humantime::parse_duration` panics when the terms of one value add up to
/// exactly `u64::MAX` seconds plus a carried second; each term alone cannot
/// panic, so the sum is taken here with checked arithmetic.
fn human_duration(value: &str) -> Result<StdDuration, DurationError> {
    let terms = terms(value);
    let mut total = StdDuration::ZERO;
    for &(start, term) in &terms {
        // humantime reads a lone "0" as zero; inside a longer value it is a
        // number without a unit, as humantime reads the whole value.
        if term == "0" && terms.len() > 1 {
            return Err(DurationError::Syntax(
                "the last number has no unit, e.g. 0s".to_owned(),
            ));
        }
        let d = humantime::parse_duration(term).map_err(|e| describe(&e, value, start))?;
        total = total.checked_add(d).ok_or(DurationError::TooLarge)?;
    }
    Ok(total)
}

/// Splits a duration into its terms (`1h 30m` → `1h `, `30m`) with their
/// byte offsets: a term starts at a digit that follows unit letters,
/// whitespace between them allowed, which is where humantime starts a new
/// number.
fn terms(value: &str) -> Vec<(usize, &str)> {
    let mut starts = vec![0];
    let mut after_unit = false;
    for (i, c) in value.char_indices() {
        if c.is_ascii_digit() && after_unit {
            starts.push(i);
        }
        if !c.is_whitespace() {
            after_unit = c.is_ascii_alphabetic() || c == 'µ';
        }
    }
    let mut out = Vec::with_capacity(starts.len());
    for (n, &start) in starts.iter().enumerate() {
        let end = starts.get(n + 1).copied().unwrap_or(value.len());
        if let Some(term) = value.get(start..end) {
            out.push((start, term));
        }
    }
    out
}

/// A humantime error in words, with positions in the whole value.
fn describe(e: &humantime::DurationError, value: &str, start: usize) -> DurationError {
    let at = |off: usize| {
        value
            .get(start + off..)
            .and_then(|rest| rest.chars().next())
            .map_or_else(|| "the end".to_owned(), |c| format!("{c:?}"))
    };
    DurationError::Syntax(match e {
        humantime::DurationError::Empty => "it is empty".to_owned(),
        humantime::DurationError::InvalidCharacter(off) => {
            format!("unexpected {}", at(*off))
        }
        humantime::DurationError::NumberExpected(off) => {
            format!("expected a number at {}", at(*off))
        }
        humantime::DurationError::UnknownUnit { unit, value, .. } if unit.is_empty() => {
            format!("{value} needs a unit, e.g. {value}d")
        }
        humantime::DurationError::UnknownUnit { unit, .. } => {
            format!("unknown unit {unit:?} (s, m, h, d, w, M or y)")
        }
        humantime::DurationError::NumberOverflow => return DurationError::TooLarge,
    })
}

/// Parses a positive duration for `flag`: at least one second, at most
/// what a `chrono::TimeDelta` holds.
pub fn parse_duration(flag: &str, value: &str) -> Result<TimeDelta, ArgError> {
    let out_of_range = || {
        ArgError::new(
            flag,
            value,
            format!(
                "out of range: a duration is 1s to {}d",
                TimeDelta::MAX.num_days()
            ),
        )
    };
    let d = match human_duration(value) {
        Ok(d) => d,
        Err(DurationError::TooLarge) => return Err(out_of_range()),
        Err(DurationError::Syntax(why)) => {
            return Err(ArgError::new(
                flag,
                value,
                format!("{why}; use e.g. 30m, 12h or 30d"),
            ))
        }
    };
    if d < MIN_DURATION {
        return Err(ArgError::new(flag, value, "must be at least 1s"));
    }
    TimeDelta::from_std(d).map_err(|_| out_of_range())
}

/// Parses a polling interval for `flag`: 50 ms to one hour (`500ms`, `2s`).
pub fn parse_interval(flag: &str, value: &str) -> Result<StdDuration, ArgError> {
    let d = match human_duration(value) {
        Ok(d) => d,
        Err(DurationError::TooLarge) => StdDuration::MAX,
        Err(DurationError::Syntax(why)) => {
            return Err(ArgError::new(
                flag,
                value,
                format!("{why}; use e.g. 500ms or 2s"),
            ))
        }
    };
    if !(StdDuration::from_millis(50)..=StdDuration::from_secs(3600)).contains(&d) {
        return Err(ArgError::new(flag, value, "must be 50ms to 1h"));
    }
    Ok(d)
}

/// Parses a point in time (`--since`): RFC 3339 (`2026-01-01T00:00:00Z`,
/// any offset) or a date (`2026-01-01`, midnight UTC).
pub fn parse_time(flag: &str, value: &str) -> Result<DateTime<Utc>, ArgError> {
    if let Ok(t) = DateTime::parse_from_rfc3339(value.trim()) {
        return Ok(t.with_timezone(&Utc));
    }
    chrono::NaiveDate::parse_from_str(value.trim(), "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
        .ok_or_else(|| {
            ArgError::new(
                flag,
                value,
                "not a time: use RFC 3339 such as 2026-01-01T00:00:00Z, or a date such as 2026-01-01",
            )
        })
}

/// Parses `--ttl` into an expiry: `never` is `None`, a duration is `now`
/// plus it. Refuses durations under a second and expiries past the last
/// date a `chrono::DateTime` holds.
pub fn parse_ttl(value: &str, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, ArgError> {
    const FLAG: &str = "--ttl";
    if value == "never" {
        return Ok(None);
    }
    let out_of_range = || {
        let room = DateTime::<Utc>::MAX_UTC.signed_duration_since(now);
        ArgError::new(
            FLAG,
            value,
            format!(
                "out of range: a TTL is 1s to {}d from now (expiry by {}), or never",
                room.num_days(),
                DateTime::<Utc>::MAX_UTC.format("%Y-%m-%d")
            ),
        )
    };
    let d = match human_duration(value) {
        Ok(d) => d,
        Err(DurationError::TooLarge) => return Err(out_of_range()),
        Err(DurationError::Syntax(why)) => {
            return Err(ArgError::new(
                FLAG,
                value,
                format!("{why}; use {TTL_FORMS}"),
            ))
        }
    };
    if d < MIN_DURATION {
        return Err(ArgError::new(FLAG, value, "must be at least 1s (or never)"));
    }
    let d = TimeDelta::from_std(d).map_err(|_| out_of_range())?;
    now.checked_add_signed(d).map(Some).ok_or_else(out_of_range)
}

/// Parses one `K=V` pair. The key is what precedes the first `=` and may
/// not be empty. With `json_values` (`--state`) V must be JSON; else
/// (`--meta`) V is JSON when it parses and text otherwise.
pub fn parse_pair(flag: &str, pair: &str, json_values: bool) -> Result<(String, Value), ArgError> {
    let Some((k, v)) = pair.split_once('=') else {
        return Err(ArgError::new(flag, pair, "is not K=V"));
    };
    if k.is_empty() {
        return Err(ArgError::new(flag, pair, "has an empty key"));
    }
    let value = match serde_json::from_str::<Value>(v) {
        Ok(v) => v,
        Err(e) if json_values => {
            return Err(ArgError::new(
                flag,
                pair,
                format!(
                    "the value is not JSON ({e}); quote strings, e.g. {}='\"text\"'",
                    k.escape_debug()
                ),
            ))
        }
        Err(_) => Value::String(v.to_owned()),
    };
    Ok((k.to_owned(), value))
}

/// Parses every `K=V` pair of a repeated flag; a later key wins.
pub fn parse_pairs(flag: &str, pairs: &[String], json_values: bool) -> Result<StateMap, ArgError> {
    let mut out = StateMap::new();
    for p in pairs {
        let (k, v) = parse_pair(flag, p, json_values)?;
        out.insert(k, v);
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ttl(s: &str) -> Result<Option<TimeDelta>, ArgError> {
        let now = Utc::now();
        parse_ttl(s, now).map(|t| t.map(|t| t - now))
    }

    #[test]
    fn ttl_keeps_the_old_forms_and_takes_humantime_ones() {
        assert_eq!(ttl("2h").unwrap(), Some(TimeDelta::hours(2)));
        assert_eq!(ttl("30d").unwrap(), Some(TimeDelta::days(30)));
        assert_eq!(ttl("90m").unwrap(), Some(TimeDelta::minutes(90)));
        assert_eq!(ttl("45s").unwrap(), Some(TimeDelta::seconds(45)));
        assert_eq!(ttl("007h").unwrap(), Some(TimeDelta::hours(7)));
        assert_eq!(ttl("never").unwrap(), None);
        assert_eq!(ttl("1h30m").unwrap(), Some(TimeDelta::minutes(90)));
        assert_eq!(ttl("1h 30m").unwrap(), Some(TimeDelta::minutes(90)));
        assert_eq!(ttl("2 weeks").unwrap(), Some(TimeDelta::days(14)));
        assert_eq!(ttl("1.5h").unwrap(), Some(TimeDelta::minutes(90)));
        assert_eq!(ttl("1500ms").unwrap(), Some(TimeDelta::milliseconds(1500)));
    }

    #[test]
    fn ttl_refuses_nonsense_with_the_flag_and_value() {
        for bad in [
            "2 fortnights",
            "h",
            "",
            "  ",
            "+5h",
            "5",
            "1h 0",
            "1h30",
            "5h-",
            "1e3s",
            "Never",
        ] {
            let e = ttl(bad).unwrap_err();
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("--ttl {bad:?}: ")), "{msg}");
            assert!(!msg.contains('\n'), "{msg}");
        }
        for short in ["0h", "0", "0s", "999ms", "1ns"] {
            assert!(
                ttl(short).unwrap_err().to_string().contains("at least 1s"),
                "{short}"
            );
        }
    }

    #[test]
    fn ttl_out_of_range_is_an_error_naming_the_range() {
        for big in [
            "106751991167d",
            "999999999999h",
            "99999999999999m",
            "9223372036854775807s",
            "18446744073709551615s",
            "18446744073709551616s",
            "300000y",
            // humantime alone panics on this one (its sum carries past u64::MAX).
            "18446744073709551615s 500ms 500ms",
            "18446744073709551615s 1000000000ns",
        ] {
            let msg = ttl(big).unwrap_err().to_string();
            assert!(
                msg.contains("out of range") && msg.contains("1s to "),
                "{big}: {msg}"
            );
        }
        // The last representable day is accepted, the next one is not.
        let now = Utc::now();
        let room = DateTime::<Utc>::MAX_UTC
            .signed_duration_since(now)
            .num_days();
        assert!(parse_ttl(&format!("{}d", room - 1), now).unwrap().is_some());
        assert!(parse_ttl(&format!("{}d", room + 1), now).is_err());
    }

    #[test]
    fn terms_match_humantime_on_safe_values() {
        for s in [
            "1h30m",
            "1 h 30 m",
            "2h37min",
            "1y 2M 3w 4d 5h 6m 7s 8ms 9us 10ns",
            "1.5h",
            "1 2 h",
            " 30d ",
            "0",
            "1h 5",
            "1h x",
            "h5",
            "1h.5h",
            "3 days 4 hours",
        ] {
            let ours = human_duration(s).ok();
            assert_eq!(ours, humantime::parse_duration(s).ok(), "{s:?}");
        }
    }

    #[test]
    fn durations_for_other_flags_are_bounded_too() {
        assert_eq!(
            parse_duration("--idle", "30m").unwrap(),
            TimeDelta::minutes(30)
        );
        let e = parse_duration("--idle", "18446744073709551615s").unwrap_err();
        assert!(e.to_string().starts_with("--idle ") && e.to_string().contains("out of range"));
        assert!(parse_duration("--idle", "0s").is_err());
    }

    #[test]
    fn pairs_parse_json_or_text() {
        let m = parse_pairs(
            "--meta",
            &["a=1".into(), "b=hello".into(), "c=x=y".into()],
            false,
        )
        .unwrap();
        assert_eq!(m["a"], json!(1));
        assert_eq!(m["b"], json!("hello"));
        assert_eq!(m["c"], json!("x=y"));
        let m = parse_pairs(
            "--state",
            &["user:name=\"Ada\"".into(), "n=null".into()],
            true,
        )
        .unwrap();
        assert_eq!(m["user:name"], json!("Ada"));
        assert_eq!(m["n"], Value::Null);
        let e = parse_pairs("--state", &["a={oops".into()], true).unwrap_err();
        assert!(e.to_string().contains("not JSON"), "{e}");
        assert!(parse_pairs("--state", &["novalue".into()], true).is_err());
        assert!(parse_pairs("--meta", &["=v".into()], false).is_err());
        // Found by the cli_args fuzz target: a key with a newline broke the one-line error.
        let e = parse_pair("--state", "a\nb=\"x", true)
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\n') && e.contains("a\\nb="), "{e}");
    }
}
