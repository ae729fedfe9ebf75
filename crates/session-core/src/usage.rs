//! What a model provider reported for each call: token usage stored with the
//! answer it produced, and the per-session and per-invocation totals.
//!
//! Usage lives in the answer event's metadata under [`USAGE_KEY`], so it is
//! stored, exported, rewound and forked with the event on every backend.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::event::SessionEvent;

/// Metadata key of the [`ModelUsage`] an answer event carries.
pub const USAGE_KEY: &str = "usage";

/// The provider's token usage for one model call.
///
/// ```
/// use session_core::{Message, ModelUsage, SessionEvent};
/// let usage = ModelUsage::new("gpt-4o", 1_200, 80).with_cached(1_024).with_estimate(1_150);
/// let event = usage.attach(SessionEvent::new(Message::assistant("Done.")))?;
/// assert_eq!(ModelUsage::of(&event).transpose()?, Some(usage));
/// # Ok::<(), session_core::SessionError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModelUsage {
    /// The model that answered.
    pub model: String,
    /// Prompt tokens the provider counted (`usage.prompt_tokens` / `input_tokens`).
    pub input_tokens: u64,
    /// Answer tokens (`usage.completion_tokens` / `output_tokens`).
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    #[serde(default)]
    pub cached_tokens: u64,
    /// What the store's estimator put the same prompt at, when known: the
    /// pair calibrates the estimate towards the provider's count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_input_tokens: Option<u64>,
}

impl ModelUsage {
    /// Usage of one call of `model`.
    pub fn new(model: impl Into<String>, input_tokens: u64, output_tokens: u64) -> Self {
        Self {
            model: model.into(),
            input_tokens,
            output_tokens,
            cached_tokens: 0,
            estimated_input_tokens: None,
        }
    }

    /// With the cached share of the prompt.
    #[must_use]
    pub fn with_cached(mut self, cached_tokens: u64) -> Self {
        self.cached_tokens = cached_tokens;
        self
    }

    /// With the store's own estimate of the same prompt.
    #[must_use]
    pub fn with_estimate(mut self, estimated_input_tokens: u64) -> Self {
        self.estimated_input_tokens = Some(estimated_input_tokens);
        self
    }

    /// The event with this usage in its metadata.
    pub fn attach(&self, mut event: SessionEvent) -> crate::Result<SessionEvent> {
        let value = serde_json::to_value(self)
            .map_err(|e| crate::SessionError::serialization("encoding model usage", e))?;
        event.metadata.insert(USAGE_KEY.to_owned(), value);
        Ok(event)
    }

    /// The usage an event carries: `None` when it has none, an error when
    /// the stored value is not a usage record.
    pub fn of(event: &SessionEvent) -> Option<crate::Result<Self>> {
        event.metadata.get(USAGE_KEY).map(|v| {
            Self::deserialize(v).map_err(|e| {
                crate::SessionError::serialization(
                    format!(
                        "reading the usage of event {} (seq {})",
                        event.id, event.seq
                    ),
                    e,
                )
            })
        })
    }
}

/// Summed usage of some calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UsageTotals {
    /// Model calls.
    pub calls: u64,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Answer tokens.
    pub output_tokens: u64,
    /// Cached prompt tokens.
    pub cached_tokens: u64,
}

impl UsageTotals {
    fn add(&mut self, u: &ModelUsage) {
        self.calls = self.calls.saturating_add(1);
        self.input_tokens = self.input_tokens.saturating_add(u.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(u.output_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(u.cached_tokens);
    }
}

/// The usage of a session: in total, per invocation (agent run) and per model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UsageReport {
    /// Every recorded call.
    pub total: UsageTotals,
    /// Per invocation id, in the order the invocations first appear
    /// (calls recorded without an invocation id are under `None`).
    pub by_invocation: Vec<(Option<String>, UsageTotals)>,
    /// Per model.
    pub by_model: BTreeMap<String, UsageTotals>,
    /// Seqs of events whose usage record could not be read (left out of the totals).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<u64>,
}

impl UsageReport {
    /// Sums the usage records of `events` (an archive, in seq order).
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a SessionEvent>) -> Self {
        let mut report = Self::default();
        for e in events {
            match ModelUsage::of(e) {
                None => {}
                Some(Err(_)) => report.unreadable.push(e.seq),
                Some(Ok(u)) => {
                    report.total.add(&u);
                    report.by_model.entry(u.model.clone()).or_default().add(&u);
                    if let Some((_, t)) = report
                        .by_invocation
                        .iter_mut()
                        .find(|(id, _)| id.as_deref() == e.invocation_id.as_deref())
                    {
                        t.add(&u);
                    } else {
                        let mut t = UsageTotals::default();
                        t.add(&u);
                        report.by_invocation.push((e.invocation_id.clone(), t));
                    }
                }
            }
        }
        report
    }

    /// The usage of one invocation.
    pub fn invocation(&self, invocation_id: &str) -> Option<UsageTotals> {
        self.by_invocation
            .iter()
            .find(|(id, _)| id.as_deref() == Some(invocation_id))
            .map(|(_, t)| *t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Message;

    fn answer(invocation: &str, usage: &ModelUsage) -> SessionEvent {
        let mut e = usage
            .attach(
                SessionEvent::builder(Message::assistant("ok"))
                    .invocation_id(invocation)
                    .build()
                    .unwrap(),
            )
            .unwrap();
        e.seq = 1;
        e
    }

    #[test]
    fn report_sums_per_invocation_and_model() {
        let events = vec![
            answer("run-1", &ModelUsage::new("gpt-4o", 100, 10).with_cached(64)),
            answer("run-1", &ModelUsage::new("gpt-4o", 150, 20)),
            answer("run-2", &ModelUsage::new("gpt-4o-mini", 300, 5)),
            SessionEvent::new(Message::user("no usage here")),
        ];
        let r = UsageReport::from_events(&events);
        assert_eq!(r.total.calls, 3);
        assert_eq!(r.total.input_tokens, 550);
        assert_eq!(r.total.cached_tokens, 64);
        let run1 = r.invocation("run-1").unwrap();
        assert_eq!(
            (run1.calls, run1.input_tokens, run1.output_tokens),
            (2, 250, 30)
        );
        assert_eq!(r.by_model["gpt-4o-mini"].input_tokens, 300);
        assert_eq!(r.by_invocation.len(), 2);
    }

    #[test]
    fn a_damaged_usage_record_is_reported_not_summed() {
        let mut bad = SessionEvent::new(Message::assistant("x"));
        bad.seq = 7;
        bad.metadata
            .insert(USAGE_KEY.to_owned(), serde_json::json!({"model": 3}));
        assert!(ModelUsage::of(&bad).unwrap().is_err());
        let r = UsageReport::from_events([&bad]);
        assert_eq!(r.total, UsageTotals::default());
        assert_eq!(r.unreadable, vec![7]);
    }
}
