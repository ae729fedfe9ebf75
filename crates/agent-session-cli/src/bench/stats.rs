//! Figures of a benchmark run: paired samples of the store and its raw
//! engine, reported as medians and as the store's speed relative to raw.

use std::time::Duration;

use indicatif::ProgressBar;

use super::raw::Raw;
use serde_json::{json, Value};

/// What a sample measures, and so which way is faster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    /// Events written per second (higher is faster).
    EventsPerSec,
    /// Milliseconds per operation (lower is faster).
    MsPerOp,
    /// Milliseconds per search (lower is faster).
    MsPerSearch,
    /// A ratio between two of the run's own figures.
    Times,
    /// Megabytes (10^6 bytes) processed per second (higher is faster).
    MbPerSec,
}

impl Unit {
    fn label(self) -> &'static str {
        match self {
            Self::EventsPerSec => "events/s",
            Self::MsPerOp => "ms/op",
            Self::MsPerSearch => "ms/search",
            Self::Times => "×",
            Self::MbPerSec => "MB/s",
        }
    }

    /// A sample's speed: larger is faster whatever the unit.
    fn speed(self, v: f64) -> f64 {
        match self {
            Self::EventsPerSec | Self::Times | Self::MbPerSec => v,
            Self::MsPerOp | Self::MsPerSearch => 1.0 / v.max(1e-12),
        }
    }
}

/// One measured line of the report.
#[derive(Debug)]
pub(crate) struct Row {
    /// What was measured, e.g. "W1 append".
    pub(crate) workload: String,
    /// The unit of both columns.
    pub(crate) unit: Unit,
    /// The store's samples, one per pair.
    pub(crate) library: Vec<f64>,
    /// The raw engine's samples, interleaved with the store's (empty: no baseline).
    pub(crate) raw: Vec<f64>,
    /// Extra figures for the JSON (matches of a search, session length…).
    pub(crate) extra: Value,
}

impl Row {
    /// A row without samples yet.
    pub(crate) fn new(workload: impl Into<String>, unit: Unit) -> Self {
        Self {
            workload: workload.into(),
            unit,
            library: Vec::new(),
            raw: Vec::new(),
            extra: Value::Null,
        }
    }

    /// Each pair's store speed ÷ raw speed.
    fn ratios(&self) -> Vec<f64> {
        self.library
            .iter()
            .zip(&self.raw)
            .map(|(l, r)| self.unit.speed(*l) / self.unit.speed(*r))
            .collect()
    }

    /// The row as JSON: medians, the ratio's median and spread, the samples.
    pub(crate) fn to_json(&self) -> Value {
        let ratios = self.ratios();
        let spread = Spread::of(&ratios);
        json!({
            "workload": self.workload,
            "unit": self.unit.label(),
            "library": median(&self.library),
            "raw": (!self.raw.is_empty()).then(|| median(&self.raw)),
            "ratio": spread.map(|s| json!({"median": s.median, "min": s.min, "max": s.max, "pairs": ratios.len()})),
            "library_samples": self.library,
            "raw_samples": self.raw,
            "extra": self.extra,
        })
    }

    /// The row as one line of text.
    pub(crate) fn to_line(&self) -> String {
        let fmt = |v: Option<f64>| match v {
            Some(v) if self.unit == Unit::EventsPerSec => format!("{v:>9.0} {}", self.unit.label()),
            Some(v) if matches!(self.unit, Unit::Times | Unit::MbPerSec) => {
                format!("{v:>9.2} {}", self.unit.label())
            }
            Some(v) => format!("{v:>9.3} {}", self.unit.label()),
            None => format!("{:>9} {}", "—", self.unit.label()),
        };
        let ratio = Spread::of(&self.ratios()).map_or_else(
            || "—".to_owned(),
            |s| {
                format!(
                    "{:.2}× ({:.2}–{:.2}, {} pairs)",
                    s.median,
                    s.min,
                    s.max,
                    self.raw.len()
                )
            },
        );
        format!(
            "{:<46} {:>19}  {:>19}  {ratio}",
            self.workload,
            fmt(median(&self.library)),
            fmt(median(&self.raw))
        )
    }
}

/// The median and range of a set of samples.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spread {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
}

impl Spread {
    /// `None` for no samples.
    pub(crate) fn of(samples: &[f64]) -> Option<Self> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let (first, last) = (v.first()?, v.last()?);
        let mid = v.len() / 2;
        let median = if v.len() % 2 == 1 {
            v[mid]
        } else {
            f64::midpoint(v[mid - 1], v[mid])
        };
        Some(Self {
            median,
            min: *first,
            max: *last,
        })
    }
}

/// The median of samples.
pub(crate) fn median(samples: &[f64]) -> Option<f64> {
    Spread::of(samples).map(|s| s.median)
}

/// Events per second for `events` written in `took`.
pub(crate) fn rate(events: usize, took: Duration) -> f64 {
    #[allow(clippy::cast_precision_loss)] // counts far below 2^52
    let n = events as f64;
    n / took.as_secs_f64().max(1e-9)
}

/// Milliseconds per operation for `ops` operations in `took`.
pub(crate) fn ms_per(ops: usize, took: Duration) -> f64 {
    #[allow(clippy::cast_precision_loss)] // counts far below 2^52
    let n = ops.max(1) as f64;
    took.as_secs_f64() * 1e3 / n
}

/// Runs `rounds` pairs: a sample of the store (`on_store`) and, when there
/// is a raw engine, one of it (`on_raw`), alternating which goes first so
/// that both sides of a pair meet the same machine load; each closure gets
/// the round and returns its sample.
pub(crate) async fn interleaved(
    rounds: usize,
    raw: Option<&Raw>,
    row: &mut Row,
    mut on_store: impl AsyncFnMut(usize) -> anyhow::Result<f64>,
    mut on_raw: impl AsyncFnMut(&Raw, usize) -> anyhow::Result<f64>,
) -> anyhow::Result<()> {
    for r in 0..rounds {
        let order = if r % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for raw_side in order {
            match (raw_side, raw) {
                (false, _) => row.library.push(on_store(r).await?),
                (true, Some(raw)) => row.raw.push(on_raw(raw, r).await?),
                (true, None) => {}
            }
        }
    }
    Ok(())
}

/// A bench progress bar on a terminal's stderr (hidden otherwise).
pub(crate) fn progress(len: usize, what: &str) -> ProgressBar {
    crate::output::progress_bar(
        len,
        what,
        "{msg:<40} {bar:30} {pos}/{len} (elapsed {elapsed}, left ~{eta})",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_are_speed_relative_to_raw_whatever_the_unit() {
        let mut rate = Row::new("w", Unit::EventsPerSec);
        rate.library = vec![50.0, 80.0, 60.0];
        rate.raw = vec![100.0, 100.0, 100.0];
        let r = rate.to_json();
        assert_eq!(r["ratio"]["median"], 0.6);
        assert_eq!(
            (r["ratio"]["min"].as_f64(), r["ratio"]["max"].as_f64()),
            (Some(0.5), Some(0.8))
        );
        let mut time = Row::new("w", Unit::MsPerOp);
        time.library = vec![2.0, 4.0];
        time.raw = vec![1.0, 1.0];
        // Twice and four times as slow: speed ratios 0.5 and 0.25, median 0.375.
        assert_eq!(time.to_json()["ratio"]["median"], 0.375);
        let alone = Row::new("w", Unit::MsPerSearch);
        assert!(alone.to_json()["ratio"].is_null());
    }
}
