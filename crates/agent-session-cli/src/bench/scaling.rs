//! The read workloads: W3 (full read, last 20), W4 (searches, frequent to
//! rare), and reads at growing session lengths.

use std::sync::Arc;
use std::time::Instant;

use agent_session::{
    EventFilter, EventView, SearchQuery, SessionId, SessionRepository, SessionRepositoryExt,
};
use anyhow::{bail, Result};
use indicatif::ProgressBar;
use serde_json::json;

use super::events::{event, FREQUENT, PLANTED};
use super::raw::Raw;
use super::setup::Scratch;
use super::stats::{interleaved, median, ms_per, progress, Row, Unit};
use crate::cli::BenchArgs;

/// Reads of the last 20 events timed together in one sample.
const TAIL_READS: usize = 20;

/// Events per append call when filling a session for a read workload.
const FILL_BATCH: usize = 500;

/// W3: a full read and the last 20 events of W1's session, paired with the raw engine.
pub(crate) async fn w3(scratch: &Scratch, id: &SessionId, args: &BenchArgs) -> Result<Vec<Row>> {
    let n = scratch.repo.get(id).await?.event_count;
    let rounds = args.repeat.max(1);
    let mut full = Row::new(format!("W3 full read of {n} events"), Unit::MsPerOp);
    let mut tail = Row::new(format!("W3 last 20 of {n} events"), Unit::MsPerOp);
    let bar = progress(rounds * 2, "W3 read");
    let raw = scratch.raw.as_deref();
    let repo = &scratch.repo;
    let expected = usize::try_from(n)?;
    let read = FullRead {
        repo,
        raw,
        id,
        view: EventView::Archive,
        expected,
    };
    read.paired(rounds, &mut full, &bar).await?;
    // Tails after the full reads, each sample after an untimed read (as in `scaling`).
    interleaved(
        rounds,
        raw,
        &mut tail,
        async |_| {
            repo.events(id, &EventFilter::last(20)).await?;
            let t = Instant::now();
            for _ in 0..TAIL_READS {
                repo.events(id, &EventFilter::last(20)).await?;
            }
            let took = t.elapsed();
            bar.inc(1);
            Ok(ms_per(TAIL_READS, took))
        },
        async |raw: &Raw, _| {
            raw.read(id.as_str(), Some(20)).await?;
            let t = Instant::now();
            for _ in 0..TAIL_READS {
                raw.read(id.as_str(), Some(20)).await?;
            }
            Ok(ms_per(TAIL_READS, t.elapsed()))
        },
    )
    .await?;
    bar.finish_and_clear();
    Ok(vec![full, tail])
}

/// A whole read of one session, timed on the store and on the raw engine.
struct FullRead<'a> {
    repo: &'a Arc<dyn SessionRepository>,
    raw: Option<&'a Raw>,
    id: &'a SessionId,
    view: EventView,
    /// How many events each read must return.
    expected: usize,
}

impl FullRead<'_> {
    /// `rounds` pairs of whole reads (the store's through `view`, the raw
    /// engine's), each checked to return every event, into `row`.
    async fn paired(&self, rounds: usize, row: &mut Row, bar: &ProgressBar) -> Result<()> {
        let (n, id) = (self.expected, self.id);
        interleaved(
            rounds,
            self.raw,
            row,
            async |_| {
                let t = Instant::now();
                let got = self.repo.all_events(id, self.view).await?.len();
                let took = ms_per(1, t.elapsed());
                if got != n {
                    bail!("a full read of {n} events returned {got}");
                }
                bar.inc(1);
                Ok(took)
            },
            async |raw: &Raw, _| {
                let t = Instant::now();
                let got = raw.read(id.as_str(), None).await?;
                let took = ms_per(1, t.elapsed());
                if got != n {
                    bail!("a raw full read of {n} events returned {got}");
                }
                Ok(took)
            },
        )
        .await
    }
}

/// W4: the first page of a single-word search in W1's session, for a
/// word most events hold down to one in a thousand (store only: the raw
/// engines have no search to compare with).
pub(crate) async fn w4(scratch: &Scratch, id: &SessionId, args: &BenchArgs) -> Result<Vec<Row>> {
    let words: Vec<&str> = std::iter::once(FREQUENT)
        .chain(PLANTED.iter().map(|(w, _)| *w))
        .collect();
    let rounds = args.repeat.max(1);
    let bar = progress(words.len() * rounds, "W4 search");
    let mut rows = Vec::new();
    for (n, word) in words.into_iter().enumerate() {
        let q = SearchQuery::in_session(id, word);
        let t = Instant::now();
        let total = scratch.repo.search(&q).await?.total;
        if n == 0 {
            // A store that indexes lazily pays for W1's pending tail here.
            let mut first = Row::new("W4 first search after the appends", Unit::MsPerSearch);
            first.library.push(ms_per(1, t.elapsed()));
            rows.push(first);
        }
        let hits = total.map_or_else(
            || "hits not counted".to_owned(),
            |t| format!("{}{} hits", t.count, if t.exact { "" } else { "+" }),
        );
        let mut row = Row::new(format!("W4 search {word:?} ({hits})"), Unit::MsPerSearch);
        for _ in 0..rounds {
            let t = Instant::now();
            for _ in 0..5 {
                scratch.repo.search(&q).await?;
            }
            row.library.push(ms_per(5, t.elapsed()));
            bar.inc(1);
        }
        row.extra =
            json!({"word": word, "hits": total.map(|t| t.count), "exact": total.map(|t| t.exact)});
        rows.push(row);
    }
    bar.finish_and_clear();
    Ok(rows)
}

/// Fills a new session of the store with `n` reference events, in batches.
pub(crate) async fn filled(scratch: &mut Scratch, n: usize, what: &str) -> Result<SessionId> {
    let id = scratch.session().await?;
    fill(scratch, &id, n, what).await?;
    Ok(id)
}

/// Appends `n` reference events to session `id` of the store, in batches.
async fn fill(scratch: &Scratch, id: &SessionId, n: usize, what: &str) -> Result<()> {
    let bar = progress(n, what);
    let mut i = 0;
    while i < n {
        let end = (i + FILL_BATCH).min(n);
        scratch
            .repo
            .append(id, (i..end).map(event).collect())
            .await?;
        bar.inc(u64::try_from(end - i).unwrap_or(0));
        i = end;
    }
    bar.finish_and_clear();
    Ok(())
}

/// The last 20 and a full read at each of `--sizes` session lengths; then
/// how the largest compares with the smallest (last 20) and with the one
/// ten times smaller (full read).
pub(crate) async fn scaling(scratch: &mut Scratch, args: &BenchArgs) -> Result<Vec<Row>> {
    let rounds = args.repeat.max(1);
    let mut rows = Vec::new();
    let mut tails = Vec::new();
    let mut fulls = Vec::new();
    for &n in &args.sizes {
        // The raw engine's twin first: the store's reads then follow the
        // store's own writes, as without a baseline (the tails of a file
        // store once measured at twice their time behind the writeback of
        // 100,000 fsynced raw appends).
        let id = scratch.session().await?;
        let raw = scratch.raw.as_deref();
        if let Some(raw) = raw {
            let bar = progress(n, &format!("scaling: filling the raw engine, {n}"));
            for i in 0..n {
                raw.append(id.as_str(), &event(i)).await?;
                bar.inc(1);
            }
            bar.finish_and_clear();
        }
        fill(scratch, &id, n, &format!("scaling: filling {n} events")).await?;
        let mut tail = Row::new(format!("last 20 of {n} events"), Unit::MsPerOp);
        let mut full = Row::new(format!("full read of {n} events"), Unit::MsPerOp);
        let bar = progress(rounds * 2, &format!("scaling: reading {n} events"));
        // Tails first, each sample after an untimed read: a full read in
        // between would evict the tail from the caches at large sizes only.
        for _ in 0..rounds {
            scratch.repo.events(&id, &EventFilter::last(20)).await?;
            let t = Instant::now();
            for _ in 0..TAIL_READS {
                scratch.repo.events(&id, &EventFilter::last(20)).await?;
            }
            tail.library.push(ms_per(TAIL_READS, t.elapsed()));
            bar.inc(1);
        }
        let repo = &scratch.repo;
        let read = FullRead {
            repo,
            raw,
            id: &id,
            view: EventView::Context,
            expected: n,
        };
        read.paired(rounds, &mut full, &bar).await?;
        bar.finish_and_clear();
        scratch.drop_session(&id).await?;
        tail.extra = json!({"session_events": n});
        full.extra = json!({"session_events": n});
        tails.push((n, median(&tail.library)));
        fulls.push((n, median(&full.library), median(&full.raw)));
        rows.push(tail);
        rows.push(full);
    }
    // Growth from one size to another: the store's, and the raw engine's
    // when it read the same sizes (a growth row's ratio is the store's
    // growth ÷ the raw engine's).
    let ratio = |points: &[(usize, Option<f64>, Option<f64>)],
                 from: usize,
                 to: usize,
                 target: f64,
                 what: &str| {
        let at = |n: usize| points.iter().find(|(m, _, _)| *m == n);
        let ((_, a, raw_a), (_, b, raw_b)) = (at(from)?, at(to)?);
        let mut row = Row::new(format!("{what}: {to} ÷ {from} events"), Unit::Times);
        row.library.push((*b)? / a.as_ref()?.max(1e-9));
        if let (Some(ra), Some(rb)) = (raw_a, raw_b) {
            row.raw.push(rb / ra.max(1e-9));
        }
        row.extra = json!({"target_at_most": target});
        Some(row)
    };
    let sizes = &args.sizes;
    if let (Some(&small), Some(&large)) = (sizes.iter().min(), sizes.iter().max()) {
        let tails: Vec<_> = tails.into_iter().map(|(n, t)| (n, t, None)).collect();
        rows.extend(ratio(&tails, small, large, 1.5, "last 20 growth"));
        if sizes.contains(&(large / 10)) {
            rows.extend(ratio(&fulls, large / 10, large, 12.0, "full read growth"));
        }
    }
    Ok(rows)
}
