//! `SessionMemory` and the provider's usage: recording it with each answer,
//! and counting the next prompt the way the provider will.

use std::sync::Arc;

use session_core::{
    AppendOutcome, EventFilter, Message, ModelUsage, Owner, Role, SessionError, SessionEvent,
    SessionId, TokenEstimator, UsageReport,
};

use crate::calibration::UsageCalibration;
use crate::memory::SessionMemory;

/// A prompt's token count: the estimator's, and the one calibrated by the
/// provider's reported usage.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptEstimate {
    /// The estimator's count.
    pub estimated: u64,
    /// The count corrected by what the provider reported for this session
    /// (equal to `estimated` before any usage was recorded).
    pub calibrated: u64,
    /// The correction factor applied (1.0 before any usage was recorded).
    pub factor: f64,
    /// The model the factor was learnt for.
    pub model: Option<String>,
}

impl SessionMemory {
    /// Counts prompts with `estimator` (default: the character heuristic)
    /// for calibration and [`Self::estimate_prompt`].
    pub fn with_estimator(mut self, estimator: Arc<dyn TokenEstimator>) -> Self {
        self.estimator = estimator;
        self
    }

    /// Shares `calibration` (e.g. between the memories of several agents).
    pub fn with_calibration(mut self, calibration: Arc<UsageCalibration>) -> Self {
        self.calibration = calibration;
        self
    }

    /// What the recorded usage taught, per session and model.
    pub fn calibration(&self) -> &Arc<UsageCalibration> {
        &self.calibration
    }

    pub(crate) fn remember_prompt(&self, session_id: &SessionId, messages: &[Message]) {
        let estimated = self.count(messages);
        self.prompts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remember(session_id, estimated);
    }

    fn count(&self, messages: &[Message]) -> u64 {
        messages.iter().fold(0u64, |sum, m| {
            sum.saturating_add(u64::from(self.estimator.estimate_message(m)))
        })
    }

    /// Records the model's answer with the usage the provider reported for
    /// the call (input, output and cached tokens, model), then runs the
    /// compaction policy. The usage is stored in the answer's metadata
    /// ([`session_core::USAGE_KEY`]) together with this memory's estimate of
    /// the prompt [`Self::prepare`] assembled last, and teaches the
    /// calibration, so token triggers count the way the provider does.
    pub async fn record_answer(
        &self,
        owner: &Owner,
        session_id: &SessionId,
        answer: SessionEvent,
        usage: ModelUsage,
    ) -> Result<AppendOutcome, SessionError> {
        self.load_calibration(owner, session_id).await?;
        let usage = match usage.estimated_input_tokens {
            Some(_) => usage,
            None => match self.last_estimate(session_id) {
                Some(estimate) => usage.with_estimate(estimate),
                None => usage,
            },
        };
        let answer = usage.attach(answer)?;
        self.calibration.observe(session_id, &usage);
        self.record_event(owner, session_id, answer).await
    }

    fn last_estimate(&self, session_id: &SessionId) -> Option<u64> {
        self.prompts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .last_estimate(session_id)
    }

    /// Teaches the calibration the usage stored in the session's recent
    /// answers, once per session and process (a restarted agent keeps its
    /// calibration).
    async fn load_calibration(
        &self,
        owner: &Owner,
        session_id: &SessionId,
    ) -> Result<(), SessionError> {
        let first = self
            .prompts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .first_load(session_id);
        if !first || self.calibration.knows(session_id) {
            return Ok(());
        }
        let recent = self
            .service
            .events(
                owner,
                session_id,
                &EventFilter::archive()
                    .roles([Role::Assistant])
                    .last_n(200)
                    .page(0, 200),
            )
            .await?;
        for usage in recent
            .items
            .iter()
            .filter_map(ModelUsage::of)
            .filter_map(Result::ok)
        {
            self.calibration.observe(session_id, &usage);
        }
        Ok(())
    }

    /// Counts `messages` (a prompt about to be sent) with this memory's
    /// estimator, and as the provider will count them after calibration.
    pub async fn estimate_prompt(
        &self,
        owner: &Owner,
        session_id: &SessionId,
        messages: &[Message],
    ) -> Result<PromptEstimate, SessionError> {
        self.load_calibration(owner, session_id).await?;
        let estimated = self.count(messages);
        let model = self.calibration.model(session_id);
        let factor = self
            .calibration
            .factor(session_id, model.as_deref())
            .unwrap_or(1.0);
        let calibrated = self
            .calibration
            .calibrate(session_id, model.as_deref(), estimated)
            .unwrap_or(estimated);
        Ok(PromptEstimate {
            estimated,
            calibrated,
            factor,
            model,
        })
    }

    /// The usage recorded in a session: in total, per invocation and per model.
    pub async fn usage(
        &self,
        owner: &Owner,
        session_id: &SessionId,
    ) -> Result<UsageReport, SessionError> {
        self.service.usage(owner, session_id).await
    }
}
