//! Compaction as a running agent meets it: the first compaction of a
//! 1,000-event context, then the steady state, where each compaction
//! summarizes the previous summary and the events since (50 new events a
//! round), timed end to end and without the summarizer; and the offline
//! summarizer's throughput.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_session::compaction::{
    CompactionError, CompactionOutcome, CompactionPolicy, RecursiveSummarization, Summarizer,
    SummarizerChoice, SummaryRequest, Trigger,
};
use agent_session::SessionId;
use anyhow::{bail, Result};
use async_trait::async_trait;
use serde_json::json;

use super::events::event;
use super::scaling::filled;
use super::setup::Scratch;
use super::stats::{ms_per, progress, Row, Unit};
use crate::cli::BenchArgs;

/// The events of the first compaction's context.
const FIRST: usize = 1000;
/// The events appended between two compactions of the steady state.
const SINCE: usize = 50;
/// Steady-state compactions per session.
const ROLLING: usize = 10;
/// The turns each compaction keeps verbatim.
const KEEP_TURNS: usize = 2;

/// The offline summarizer, with the time it spent and the prompts it was given.
#[derive(Debug)]
struct Metered {
    inner: Arc<dyn Summarizer>,
    /// Time spent summarizing, and the bytes of the prompts it was given.
    spent: Mutex<(Duration, usize)>,
}

impl Metered {
    /// What was spent since the last call, and zeroes it.
    fn take(&self) -> (Duration, usize) {
        self.spent
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default()
    }
}

#[async_trait]
impl Summarizer for Metered {
    async fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, CompactionError> {
        let start = Instant::now();
        let out = self.inner.summarize(request).await;
        // The prompt: the transcript of the events, the previous summary in it.
        let read = request.user_prompt.len();
        if let Ok(mut s) = self.spent.lock() {
            s.0 += start.elapsed();
            s.1 += read;
        }
        out
    }
}

/// Compacts `id` now, timed: (milliseconds end to end, summarizer time, bytes it read).
async fn compact(
    scratch: &Scratch,
    policy: &CompactionPolicy,
    metered: &Metered,
    id: &SessionId,
) -> Result<(f64, Duration, usize)> {
    metered.take();
    let t = Instant::now();
    let outcome = policy.compact_now(&*scratch.repo, id).await?;
    let took = t.elapsed();
    if !matches!(outcome, CompactionOutcome::Compacted(_)) {
        bail!("the compaction workload compacted nothing: {outcome:?}");
    }
    let (spent, read) = metered.take();
    Ok((ms_per(1, took), spent, read))
}

/// The compaction rows: the first compaction of 1,000 events, the steady
/// state end to end and without the summarizer, the summarizer's MB/s.
pub(crate) async fn compaction(scratch: &mut Scratch, args: &BenchArgs) -> Result<Vec<Row>> {
    let rounds = args.repeat.max(1);
    let mut first = Row::new(
        format!("compaction: first, {FIRST} events, keep {KEEP_TURNS} turns"),
        Unit::MsPerOp,
    );
    let mut rolling = Row::new(
        format!("compaction: rolling, summary + {SINCE} events"),
        Unit::MsPerOp,
    );
    let mut without = Row::new("compaction: rolling, without the summarizer", Unit::MsPerOp);
    let mut throughput = Row::new("offline summarizer throughput", Unit::MbPerSec);
    let metered = Arc::new(Metered {
        inner: SummarizerChoice::Extractive.build(),
        spent: Mutex::new((Duration::ZERO, 0)),
    });
    let policy = CompactionPolicy::new(
        Trigger::Always,
        Arc::new(RecursiveSummarization::new(KEEP_TURNS, metered.clone())),
    );
    let mut rates = |spent: Duration, read: usize| {
        #[allow(clippy::cast_precision_loss)] // sizes far below 2^52
        let mb = read as f64 / 1e6;
        throughput.library.push(mb / spent.as_secs_f64().max(1e-9));
    };
    for r in 0..rounds {
        let id = filled(scratch, FIRST, &format!("compaction {}/{rounds}", r + 1)).await?;
        let (ms, spent, read) = compact(scratch, &policy, &metered, &id).await?;
        first.library.push(ms);
        rates(spent, read);
        let bar = progress(ROLLING, "compaction: rolling");
        for k in 0..ROLLING {
            let from = FIRST + k * SINCE;
            scratch
                .repo
                .append(&id, (from..from + SINCE).map(event).collect())
                .await?;
            let (ms, spent, read) = compact(scratch, &policy, &metered, &id).await?;
            rolling.library.push(ms);
            without.library.push(ms - spent.as_secs_f64() * 1e3);
            rates(spent, read);
            bar.inc(1);
        }
        bar.finish_and_clear();
        scratch.drop_session(&id).await?;
    }
    rolling.extra =
        json!({"target_at_most": 5.0, "new_events": SINCE, "compactions": rounds * ROLLING});
    without.extra = json!({"target_at_most": 2.0});
    Ok(vec![first, rolling, without, throughput])
}
