//! What compaction costs and what it keeps.
//!
//! `cargo bench -p session-compaction --bench compaction` prints:
//! 1. per corpus conversation, `summarize --keep 2` with the offline
//!    summarizer: tokens before and after, planted facts in the summary and
//!    reachable by recall (the table in docs/compaction.md);
//! 2. compaction end to end (read the context, plan, summarize, write the
//!    new context) of a 1,000-event session on SQLite, interleaved in pairs
//!    with the raw engine doing the least any compaction must (plain SQL on
//!    the same file: read the context's bodies, move the session's context
//!    base past them, insert a summary row), as median, spread and ratio.
#![allow(missing_docs, clippy::unwrap_used, clippy::cast_precision_loss)]

#[path = "../tests/corpus/measure.rs"]
mod measure;

use std::sync::Arc;
use std::time::{Duration, Instant};

use session_compaction::{
    CompactionOutcome, CompactionPolicy, ExtractiveSummarizer, RecursiveSummarization, Summarizer,
    SummaryRequest, Trigger,
};
use session_core::{
    EventView, NewSession, SessionEvent, SessionId, SessionRepository, SessionRepositoryExt,
};
use session_sqlite::SqliteRepository;
use session_testkit::corpus;

const EVENTS: usize = 1_000;
const PAIRS: usize = 15;

/// 1,000 events of the corpus (support, then coding, then research), with fresh ids.
fn thousand_events() -> Vec<SessionEvent> {
    corpus::all()
        .into_iter()
        .flat_map(|c| c.events)
        .take(EVENTS)
        .enumerate()
        .map(|(i, mut e)| {
            e.id = format!("bench-{i}");
            e
        })
        .collect()
}

async fn session_with(repo: &SqliteRepository, events: &[SessionEvent]) -> SessionId {
    let s = repo
        .create(NewSession::new("bench", "alice", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    repo.append(&s.id, events.to_vec()).await.unwrap();
    // Index the new events for search now (SQLite batches that work into
    // later writes or the next search): it is the appends' cost, not the
    // compaction's.
    repo.search(&session_core::SearchQuery::in_session(
        s.id.to_string(),
        "x",
    ))
    .await
    .unwrap();
    s.id
}

/// A summarizer that answers at once: stands in for the model call.
#[derive(Debug)]
struct Canned;

#[async_trait::async_trait]
impl Summarizer for Canned {
    async fn summarize(
        &self,
        _request: &SummaryRequest<'_>,
    ) -> Result<String, session_compaction::CompactionError> {
        Ok(
            "The user reported a damaged monitor (order ORD-58213); a replacement ships."
                .to_owned(),
        )
    }
}

/// What a compaction must do at least, straight on the engine.
fn raw_compaction(raw: &rusqlite::Connection, id: &SessionId) {
    let mut read = raw
        .prepare_cached(
            "SELECT body FROM events WHERE session_id = ?1 \
             AND ctx_pos >= (SELECT ctx_base FROM sessions WHERE id = ?1) ORDER BY ctx_pos",
        )
        .unwrap();
    let bodies: Vec<String> = read
        .query_map([id.as_str()], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(bodies.len(), EVENTS);
    raw.execute_batch("BEGIN IMMEDIATE").unwrap();
    // The schema's cheapest way out of the context: move the session's
    // context base past every event, then add the summary above it.
    raw.execute(
        "UPDATE sessions SET ctx_base = next_ctx_pos, next_ctx_pos = next_ctx_pos + 1 WHERE id = ?1",
        [id.as_str()],
    )
    .unwrap();
    raw.execute(
        "INSERT INTO events (session_id, seq, id, ctx_pos, timestamp, role, synthetic, token_estimate, body) \
         VALUES (?1, 1000000, 'raw-summary', (SELECT ctx_base FROM sessions WHERE id = ?1), 0, 'assistant', 1, 500, ?2)",
        rusqlite::params![id.as_str(), "x".repeat(16_000)],
    )
    .unwrap();
    raw.execute_batch("COMMIT").unwrap();
}

fn median_and_spread(mut v: Vec<Duration>) -> (Duration, Duration, Duration) {
    v.sort();
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        println!("## What `summarize --keep 2` keeps (offline extractive summarizer)\n");
        println!("{}", measure::HEADER);
        let mut example = String::new();
        for c in corpus::all() {
            let f = measure::summarize_keep_2(&c, measure::extractive()).await;
            println!("{}", f.row());
            if example.is_empty() {
                example = f.summary.lines().take(8).collect::<Vec<_>>().join("\n");
            }
        }
        println!("\nThe first lines of the first summary:\n\n```text\n{example}\n```");

        println!(
            "\n## Compaction of a {EVENTS}-event context on SQLite ({PAIRS} interleaved pairs)\n"
        );
        let dir = tempfile::tempdir().unwrap();
        let repo = SqliteRepository::open(dir.path().join("bench.db"))
            .await
            .unwrap();
        let events = thousand_events();
        let policy = CompactionPolicy::new(
            Trigger::token_count(1).unwrap(),
            Arc::new(RecursiveSummarization::new(
                2,
                Arc::new(ExtractiveSummarizer::new()),
            )),
        );
        // The raw engine on the same file: what any compaction must do at
        // least, in plain SQL — read the context's bodies, then move the
        // context base past them and add a summary row, in one transaction.
        let raw = rusqlite::Connection::open(dir.path().join("bench.db")).unwrap();
        raw.pragma_update(None, "synchronous", "NORMAL").unwrap();
        // The model call the target excludes, as an instant canned answer:
        // what is left is the library's own work (read, plan, write).
        let canned = CompactionPolicy::new(
            Trigger::token_count(1).unwrap(),
            Arc::new(RecursiveSummarization::new(2, Arc::new(Canned))),
        );
        let (mut reads, mut summaries, mut compactions, mut raws, mut ratios) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut without_model, mut without_ratios) = (Vec::new(), Vec::new());
        for _ in 0..PAIRS {
            let floor = session_with(&repo, &events).await;
            let t = Instant::now();
            raw_compaction(&raw, &floor);
            let raw_time = t.elapsed();

            let id = session_with(&repo, &events).await;
            let t = Instant::now();
            let context = repo.all_events(&id, EventView::Context).await.unwrap();
            let read = t.elapsed();
            assert_eq!(context.len(), EVENTS);
            let request = SummaryRequest {
                system_prompt: "",
                user_prompt: String::new(),
                previous_summary: None,
                events: &context,
                schema: None,
            };
            let t = Instant::now();
            let summary = ExtractiveSummarizer::new()
                .summarize(&request)
                .await
                .unwrap();
            summaries.push(t.elapsed());
            assert!(!summary.is_empty());
            let t = Instant::now();
            let outcome = policy.compact_now(&repo, &id).await.unwrap();
            let compact = t.elapsed();
            assert!(matches!(outcome, CompactionOutcome::Compacted(_)));
            let other = session_with(&repo, &events).await;
            let t = Instant::now();
            let outcome = canned.compact_now(&repo, &other).await.unwrap();
            let plain = t.elapsed();
            assert!(matches!(outcome, CompactionOutcome::Compacted(_)));
            without_ratios.push(plain.as_secs_f64() / raw_time.as_secs_f64());
            without_model.push(plain);
            ratios.push(compact.as_secs_f64() / raw_time.as_secs_f64());
            raws.push(raw_time);
            reads.push(read);
            compactions.push(compact);
        }
        let (rm, rlo, rhi) = median_and_spread(reads);
        let (cm, clo, chi) = median_and_spread(compactions);
        let (sm, slo, shi) = median_and_spread(summaries);
        let (wm, wlo, whi) = median_and_spread(raws);
        let (pm, plo, phi) = median_and_spread(without_model);
        without_ratios.sort_by(f64::total_cmp);
        ratios.sort_by(f64::total_cmp);
        println!("| measure | median | fastest | slowest |\n|---|---|---|---|");
        println!("| read the {EVENTS}-event context | {rm:.2?} | {rlo:.2?} | {rhi:.2?} |");
        println!("| summarize it alone (offline summarizer) | {sm:.2?} | {slo:.2?} | {shi:.2?} |");
        println!(
            "| compact it (read + plan + summarize + write) | {cm:.2?} | {clo:.2?} | {chi:.2?} |"
        );
        println!(
            "| raw SQLite: read the bodies, move the context base, insert a summary row | {wm:.2?} | {wlo:.2?} | {whi:.2?} |"
        );
        println!(
            "| compact with the summary call excluded (a canned summary) | {pm:.2?} | {plo:.2?} | {phi:.2?} |"
        );
        println!(
            "| that ÷ raw SQLite (per pair) | {:.1}× | {:.1}× | {:.1}× |",
            without_ratios[without_ratios.len() / 2],
            without_ratios[0],
            without_ratios[without_ratios.len() - 1]
        );
        println!(
            "| compact ÷ raw SQLite (per pair) | {:.1}× | {:.1}× | {:.1}× |",
            ratios[ratios.len() / 2],
            ratios[0],
            ratios[ratios.len() - 1]
        );
    });
}
