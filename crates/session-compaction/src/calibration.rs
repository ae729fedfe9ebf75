//! Learning the provider's token count from the usage it reports.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use session_core::ModelUsage;

/// Sessions a calibration remembers before it starts over.
pub(crate) const MAX_SESSIONS: usize = 10_000;

/// Per session and model, the ratio between the prompt tokens a provider
/// reported and what the store's estimator put the same prompt at, over the
/// most recent calls. Multiplying an estimate by [`UsageCalibration::factor`]
/// brings it to the provider's count.
///
/// ```
/// use session_compaction::UsageCalibration;
/// use session_core::ModelUsage;
/// let calibration = UsageCalibration::new();
/// calibration.observe("s1", &ModelUsage::new("gpt-4o", 1_100, 50).with_estimate(1_000));
/// calibration.observe("s1", &ModelUsage::new("gpt-4o", 2_300, 50).with_estimate(2_000));
/// let f = calibration.factor("s1", None).unwrap();
/// assert!((f - 3_400.0 / 3_000.0).abs() < 1e-9);
/// assert_eq!(calibration.factor("another session", None), None);
/// ```
#[derive(Debug)]
pub struct UsageCalibration {
    window: usize,
    inner: Mutex<Observed>,
}

#[derive(Debug, Default)]
struct Observed {
    /// (session, model) → the latest (estimated, reported) prompt counts.
    pairs: HashMap<(String, String), VecDeque<(u64, u64)>>,
    /// session → the model of its latest observed call.
    latest_model: HashMap<String, String>,
}

impl Default for UsageCalibration {
    fn default() -> Self {
        Self::new()
    }
}

impl UsageCalibration {
    /// Learns from the 8 most recent calls per session and model.
    pub fn new() -> Self {
        Self {
            window: 8,
            inner: Mutex::new(Observed::default()),
        }
    }

    /// Learns from the `window` most recent calls (at least 1).
    pub fn with_window(mut self, window: usize) -> Self {
        self.window = window.max(1);
        self
    }

    /// Records one call's usage; calls without an estimate, or with a zero
    /// count on either side, teach nothing.
    pub fn observe(&self, session_id: &str, usage: &ModelUsage) {
        let Some(estimated) = usage.estimated_input_tokens else {
            return;
        };
        if estimated == 0 || usage.input_tokens == 0 {
            return;
        }
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // A long-running server sees sessions without end: past the limit,
        // start over (a session relearns from its stored usage).
        if inner.latest_model.len() >= MAX_SESSIONS && !inner.latest_model.contains_key(session_id)
        {
            inner.pairs.clear();
            inner.latest_model.clear();
        }
        let pairs = inner
            .pairs
            .entry((session_id.to_owned(), usage.model.clone()))
            .or_default();
        pairs.push_back((estimated, usage.input_tokens));
        while pairs.len() > self.window {
            pairs.pop_front();
        }
        inner
            .latest_model
            .insert(session_id.to_owned(), usage.model.clone());
    }

    /// Whether anything was learnt for `session_id`.
    pub fn knows(&self, session_id: &str) -> bool {
        let inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.latest_model.contains_key(session_id)
    }

    /// The recent (estimated, reported) pairs for `session_id` and `model`
    /// (its latest model when `None`).
    fn recent(&self, session_id: &str, model: Option<&str>) -> Option<Vec<(u64, u64)>> {
        let inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let model = match model {
            Some(m) => m.to_owned(),
            None => inner.latest_model.get(session_id)?.clone(),
        };
        let pairs = inner.pairs.get(&(session_id.to_owned(), model))?;
        Some(pairs.iter().copied().collect())
    }

    /// The correction factor for `session_id` and `model` (its latest model
    /// when `None`): reported ÷ estimated prompt tokens over the recent
    /// calls, or `None` before the first usable observation.
    pub fn factor(&self, session_id: &str, model: Option<&str>) -> Option<f64> {
        let pairs = self.recent(session_id, model)?;
        let (estimated, reported) = pairs.iter().fold((0u64, 0u64), |(e, r), (pe, pr)| {
            (e.saturating_add(*pe), r.saturating_add(*pr))
        });
        if estimated == 0 {
            return None;
        }
        #[allow(clippy::cast_precision_loss)] // token counts are far below 2^52
        let f = reported as f64 / estimated as f64;
        Some(f)
    }

    /// `estimated` (a prompt's estimate) as the provider will count it for
    /// `session_id` and `model` (its latest model when `None`), anchored on
    /// the latest call: its reported count, plus the change in the estimate
    /// since then times the provider's tokens per estimated token *at the
    /// margin* (fitted on the changes between recent calls). Consecutive
    /// prompts share most of their messages, and what the provider adds to
    /// every call (tool definitions, formatting) stays in the anchor instead
    /// of being scaled with the prompt. `None` before the first usable
    /// observation.
    pub fn calibrate(&self, session_id: &str, model: Option<&str>, estimated: u64) -> Option<u64> {
        let factor = self.factor(session_id, model)?;
        let pairs = self.recent(session_id, model)?;
        #[allow(clippy::cast_precision_loss)] // token counts are far below 2^52
        let points: Vec<(f64, f64)> = pairs.iter().map(|&(e, r)| (e as f64, r as f64)).collect();
        let (last_estimated, last_reported) = *points.last()?;
        let (mut dot, mut square) = (0.0, 0.0);
        for w in points.windows(2) {
            let (de, dr) = (w[1].0 - w[0].0, w[1].1 - w[0].1);
            dot += de * dr;
            square += de * de;
        }
        let margin = if square > 0.0 {
            (dot / square).clamp(factor / 4.0, factor * 4.0)
        } else {
            factor
        };
        #[allow(clippy::cast_precision_loss)]
        let estimated = estimated as f64;
        let scaled = factor * estimated;
        let anchored = last_reported + margin * (estimated - last_estimated);
        // Within half and twice the plainly scaled estimate (a prompt that
        // shrank a lot after a compaction keeps a sane count).
        Some(scale(1, anchored.clamp(scaled / 2.0, scaled * 2.0)))
    }

    /// The latest model observed for `session_id`.
    pub fn model(&self, session_id: &str) -> Option<String> {
        let inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.latest_model.get(session_id).cloned()
    }
}

/// `tokens` scaled by `factor`, rounded up and saturating.
pub(crate) fn scale(tokens: u64, factor: f64) -> u64 {
    #[allow(clippy::cast_precision_loss)] // token counts are far below 2^52
    let scaled = (tokens as f64 * factor).ceil();
    if !scaled.is_finite() || scaled <= 0.0 {
        return 0;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )] // positive; `as` saturates at u64::MAX
    let v = scaled as u64;
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factor_follows_the_latest_window_per_model() {
        let c = UsageCalibration::new().with_window(2);
        c.observe("s", &ModelUsage::new("a", 500, 1).with_estimate(1_000));
        c.observe("s", &ModelUsage::new("a", 1_200, 1).with_estimate(1_000));
        c.observe("s", &ModelUsage::new("a", 1_200, 1).with_estimate(1_000));
        assert_eq!(c.factor("s", Some("a")), Some(1.2));
        c.observe("s", &ModelUsage::new("b", 900, 1).with_estimate(1_000));
        assert_eq!(c.factor("s", None), Some(0.9), "latest model");
        assert_eq!(c.factor("s", Some("a")), Some(1.2));
        c.observe("t", &ModelUsage::new("a", 900, 1));
        assert!(!c.knows("t"), "no estimate: nothing learnt");
    }

    #[test]
    fn calibration_keeps_a_fixed_overhead_out_of_the_scaling() {
        // The provider adds 240 tokens to every prompt (tool definitions).
        let c = UsageCalibration::new();
        c.observe("s", &ModelUsage::new("m", 1_240, 1).with_estimate(1_000));
        c.observe("s", &ModelUsage::new("m", 2_240, 1).with_estimate(2_000));
        assert_eq!(c.calibrate("s", None, 3_000), Some(3_240));
        assert_eq!(c.calibrate("s", None, 1_500), Some(1_740));
        // A plain ratio would have said 3,000 × 3,480 / 3,000 ≈ 3,480.
        assert!((c.factor("s", None).unwrap() - 3_480.0 / 3_000.0).abs() < 1e-9);
        assert_eq!(c.calibrate("other", None, 1_000), None);
    }

    #[test]
    fn a_calibration_stays_bounded_in_sessions() {
        let c = UsageCalibration::new();
        let usage = ModelUsage::new("m", 110, 1).with_estimate(100);
        for i in 0..=MAX_SESSIONS {
            c.observe(&format!("s{i}"), &usage);
        }
        assert!(
            !c.knows("s0"),
            "the oldest sessions are forgotten past the limit"
        );
        assert!(c.knows(&format!("s{MAX_SESSIONS}")));
        assert!(c.inner.lock().unwrap().latest_model.len() <= MAX_SESSIONS);
    }

    #[test]
    fn scaling_rounds_up_and_saturates() {
        assert_eq!(scale(100, 1.234), 124);
        assert_eq!(scale(u64::MAX, 2.0), u64::MAX);
        assert_eq!(scale(100, f64::NAN), 0);
    }
}
