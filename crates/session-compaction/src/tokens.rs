//! Token estimators beyond core's character heuristic: exact BPE counts and calibration.

use std::sync::Arc;

use atomic::AtomicF64;
use session_core::TokenEstimator;
use tiktoken_rs::CoreBPE;

use crate::error::CompactionError;

/// Exact token counts with an OpenAI BPE encoding bundled in the build (no network).
#[derive(Clone)]
pub struct BpeEstimator {
    name: &'static str,
    bpe: Arc<CoreBPE>,
}

impl std::fmt::Debug for BpeEstimator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BpeEstimator")
            .field("encoding", &self.name)
            .finish_non_exhaustive()
    }
}

impl BpeEstimator {
    /// `cl100k_base` (GPT-4, GPT-3.5).
    pub fn cl100k() -> Result<Self, CompactionError> {
        tiktoken_rs::cl100k_base()
            .map(|bpe| Self {
                name: "cl100k_base",
                bpe: Arc::new(bpe),
            })
            .map_err(|e| {
                CompactionError::summarizer_caused_by("loading the cl100k_base tokenizer", e)
            })
    }

    /// `o200k_base` (GPT-4o and later).
    pub fn o200k() -> Result<Self, CompactionError> {
        tiktoken_rs::o200k_base()
            .map(|bpe| Self {
                name: "o200k_base",
                bpe: Arc::new(bpe),
            })
            .map_err(|e| {
                CompactionError::summarizer_caused_by("loading the o200k_base tokenizer", e)
            })
    }

    /// The encoding's name.
    pub fn encoding(&self) -> &'static str {
        self.name
    }

    /// The encoding OpenAI uses for `model` (`gpt-4o`, `gpt-4.1`, `o3`, …
    /// → `o200k_base`; `gpt-4`, `gpt-3.5-turbo`, embeddings →
    /// `cl100k_base`); `None` for a model of another provider or an older
    /// encoding.
    ///
    /// ```
    /// use session_compaction::BpeEstimator;
    /// let bpe = BpeEstimator::for_model("gpt-4o-mini")?.expect("an OpenAI model");
    /// assert_eq!(bpe.encoding(), "o200k_base");
    /// assert!(BpeEstimator::for_model("claude-sonnet-4")?.is_none());
    /// # Ok::<(), session_compaction::CompactionError>(())
    /// ```
    pub fn for_model(model: &str) -> Result<Option<Self>, CompactionError> {
        use tiktoken_rs::tokenizer::{get_tokenizer, Tokenizer};
        match get_tokenizer(model) {
            Some(Tokenizer::O200kBase | Tokenizer::O200kHarmony) => Self::o200k().map(Some),
            Some(Tokenizer::Cl100kBase) => Self::cl100k().map(Some),
            _ => Ok(None),
        }
    }
}

/// The estimator to count a prompt for `model` with: the model's BPE
/// encoding where it is an OpenAI model, otherwise the character heuristic
/// (the offline default). The second value names it, as `stats` shows it.
pub fn estimator_for_model(
    model: Option<&str>,
) -> Result<(Arc<dyn TokenEstimator>, String), CompactionError> {
    match model.map(BpeEstimator::for_model).transpose()?.flatten() {
        Some(bpe) => {
            let name = format!("bpe {}", bpe.encoding());
            Ok((Arc::new(bpe), name))
        }
        None => Ok((
            Arc::new(session_core::HeuristicEstimator),
            "heuristic (chars ÷ 4, JSON ÷ 3, code ÷ 6)".to_owned(),
        )),
    }
}

impl TokenEstimator for BpeEstimator {
    fn estimate_text(&self, text: &str) -> u32 {
        u32::try_from(self.bpe.encode_ordinary(text).len()).unwrap_or(u32::MAX)
    }
}

mod atomic {
    use std::sync::atomic::{AtomicU64, Ordering};

    /// An `f64` in an atomic cell.
    #[derive(Debug)]
    pub(crate) struct AtomicF64(AtomicU64);

    impl AtomicF64 {
        pub(crate) fn new(v: f64) -> Self {
            Self(AtomicU64::new(v.to_bits()))
        }
        pub(crate) fn load(&self) -> f64 {
            f64::from_bits(self.0.load(Ordering::Relaxed))
        }
        pub(crate) fn store(&self, v: f64) {
            self.0.store(v.to_bits(), Ordering::Relaxed);
        }
    }
}

/// Wraps an estimator and learns a per-model correction factor from the
/// prompt token counts a provider reports (`usage.prompt_tokens`).
#[derive(Debug)]
pub struct CalibratedEstimator<E> {
    inner: E,
    factor: AtomicF64,
    weight: f64,
}

impl<E: TokenEstimator> CalibratedEstimator<E> {
    /// Starts at factor 1.0; each observation moves it by `weight` (default 0.2) towards the observed ratio.
    pub fn new(inner: E) -> Self {
        Self {
            inner,
            factor: AtomicF64::new(1.0),
            weight: 0.2,
        }
    }

    /// The current correction factor.
    pub fn factor(&self) -> f64 {
        self.factor.load()
    }

    /// Records that a prompt the inner estimator put at `estimated` tokens was counted as `reported`.
    pub fn observe(&self, estimated: u32, reported: u32) {
        if estimated == 0 || reported == 0 {
            return;
        }
        let ratio = f64::from(reported) / f64::from(estimated);
        let f = self.factor.load();
        self.factor.store(f + self.weight * (ratio - f));
    }
}

impl<E: TokenEstimator> TokenEstimator for CalibratedEstimator<E> {
    fn estimate_text(&self, text: &str) -> u32 {
        let raw = f64::from(self.inner.estimate_text(text));
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // non-negative, clamped
        let v = (raw * self.factor.load())
            .ceil()
            .clamp(0.0, f64::from(u32::MAX)) as u32;
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use session_core::HeuristicEstimator;

    #[test]
    fn bpe_counts_are_exact_for_known_strings() {
        let cl = BpeEstimator::cl100k().unwrap();
        assert_eq!(cl.estimate_text("hello world"), 2);
        let o = BpeEstimator::o200k().unwrap();
        assert_eq!(o.estimate_text("hello world"), 2);
        assert_eq!(cl.estimate_text(""), 0);
    }

    #[test]
    fn calibration_moves_towards_reported_counts() {
        let c = CalibratedEstimator::new(HeuristicEstimator);
        let before = c.estimate_text(&"word ".repeat(100));
        for _ in 0..30 {
            c.observe(100, 150);
        }
        assert!((c.factor() - 1.5).abs() < 0.01, "{}", c.factor());
        let after = c.estimate_text(&"word ".repeat(100));
        assert!(after > before);
    }
}
