//! An event's timestamp written as `chrono`'s serde writes it, formatted on the stack.
//!
//! Every store encodes each event it appends, and the memory store sizes
//! each one by its encoding; `chrono` writes a timestamp through the
//! formatting machinery a character at a time. This writes the same bytes
//! (RFC 3339, `Z`, the fraction in 0, 3, 6 or 9 digits as the value needs)
//! directly, and leaves years outside 0–9999, which `chrono` writes with a
//! sign, to `chrono`. Reading is `chrono`'s, unchanged.

use chrono::{DateTime, Datelike, Timelike, Utc};
use serde::{Serialize, Serializer};

/// The longest form written here: `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`.
const LONGEST: usize = 30;

/// Writes `value`'s last `width` decimal digits at `buf[at..at + width]`.
fn digits(buf: &mut [u8; LONGEST], at: usize, width: usize, mut value: u32) {
    for slot in buf[at..at + width].iter_mut().rev() {
        *slot = b'0' + u8::try_from(value % 10).unwrap_or(0);
        value /= 10;
    }
}

/// `t` as `chrono` writes it for years 0–9999 (`None` outside them).
fn rfc3339(t: &DateTime<Utc>, buf: &mut [u8; LONGEST]) -> Option<usize> {
    let year = u32::try_from(t.year()).ok().filter(|y| *y <= 9999)?;
    let mut nano = t.nanosecond();
    let mut second = t.second();
    // A leap second: `chrono` holds it as a nanosecond past 10^9.
    if nano >= 1_000_000_000 {
        second += 1;
        nano -= 1_000_000_000;
    }
    digits(buf, 0, 4, year);
    buf[4] = b'-';
    digits(buf, 5, 2, t.month());
    buf[7] = b'-';
    digits(buf, 8, 2, t.day());
    buf[10] = b'T';
    digits(buf, 11, 2, t.hour());
    buf[13] = b':';
    digits(buf, 14, 2, t.minute());
    buf[16] = b':';
    digits(buf, 17, 2, second);
    let (fraction, width) = if nano == 0 {
        (0, 0)
    } else if nano % 1_000_000 == 0 {
        (nano / 1_000_000, 3)
    } else if nano % 1_000 == 0 {
        (nano / 1_000, 6)
    } else {
        (nano, 9)
    };
    let mut end = 19;
    if width > 0 {
        buf[19] = b'.';
        digits(buf, 20, width, fraction);
        end = 20 + width;
    }
    buf[end] = b'Z';
    Some(end + 1)
}

/// Serializes `t` as `chrono`'s `Serialize` does, byte for byte.
pub(crate) fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    let mut buf = [0u8; LONGEST];
    match rfc3339(t, &mut buf).and_then(|n| std::str::from_utf8(&buf[..n]).ok()) {
        Some(text) => s.serialize_str(text),
        None => t.serialize(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `t` through [`serialize`].
    fn ours(t: &DateTime<Utc>) -> String {
        let mut out = Vec::new();
        serialize(t, &mut serde_json::Serializer::new(&mut out)).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn at(secs: i64, nanos: u32) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(secs, nanos).unwrap()
    }

    #[test]
    fn timestamps_are_written_as_chrono_writes_them() {
        let mut cases = vec![
            at(0, 0),
            at(1_764_427_200, 0),
            at(1_764_427_200, 120_000_000),
            at(1_764_427_200, 123_456_000),
            at(1_764_427_200, 123_456_789),
            at(1_764_427_200, 100),
            // A leap second (23:59:60).
            at(1_483_228_799, 1_500_000_000),
            // The first and last instants of 4-digit years, then chrono's signed years.
            DateTime::parse_from_rfc3339("0000-01-01T00:00:00Z")
                .unwrap()
                .to_utc(),
            DateTime::parse_from_rfc3339("9999-12-31T23:59:59.999999999Z")
                .unwrap()
                .to_utc(),
            DateTime::<Utc>::MAX_UTC,
            DateTime::<Utc>::MIN_UTC,
            at(-1, 999_000_000),
        ];
        // Spread over 0..=9999 and every fraction width.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let secs = i64::try_from(x % 315_537_897_600).unwrap() - 62_167_219_200;
            let r = x >> 24;
            let nanos = match x % 4 {
                0 => 0,
                1 => r % 1_000 * 1_000_000,
                2 => r % 1_000_000 * 1_000,
                _ => r % 1_000_000_000,
            };
            cases.push(at(secs, u32::try_from(nanos).unwrap()));
        }
        for t in &cases {
            assert_eq!(ours(t), serde_json::to_string(t).unwrap(), "{t:?}");
        }
    }
}
