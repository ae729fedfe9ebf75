//! Concurrency stress cases: many writers on several sessions with readers,
//! and compaction racing appends. Heavier than the conformance suite, so a
//! backend opts in with [`stress_suite!`](crate::stress_suite).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use session_core::{EventFilter, EventView, SessionRepository, SessionRepositoryExt};

use crate::fixture::{assistant, user, Fixture};

/// Writers per session in [`writers_on_four_sessions_lose_nothing`].
pub const WRITERS: usize = 16;
/// Appends per writer per session (env `STRESS_APPENDS` overrides).
pub const APPENDS: usize = 500;

fn appends() -> usize {
    std::env::var("STRESS_APPENDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(APPENDS)
}

/// 16 writers × 500 appends on each of 4 sessions, with readers polling
/// versions and contexts: no event lost or duplicated, seqs gapless, each
/// writer's events in its own order, versions never seen going backwards.
pub async fn writers_on_four_sessions_lose_nothing(fx: Fixture) {
    let n = appends();
    let mut sessions = Vec::new();
    for _ in 0..4 {
        sessions.push(fx.session("alice").await.id);
    }
    let done = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for id in &sessions {
        let (repo, id, done) = (fx.repo.clone(), id.clone(), done.clone());
        readers.push(tokio::spawn(async move {
            let (mut last, mut reads) = (0, 0u64);
            while !done.load(Ordering::Relaxed) {
                let v = repo.event_version(&id).await.unwrap();
                assert!(v >= last, "version went back from {last} to {v}");
                let page = repo.events(&id, &EventFilter::last(20)).await.unwrap();
                let seqs: Vec<u64> = page.items.iter().map(|e| e.seq).collect();
                assert!(
                    seqs.windows(2).all(|w| w[0] < w[1]),
                    "context out of order: {seqs:?}"
                );
                last = v;
                reads += 1;
                tokio::task::yield_now().await;
            }
            reads
        }));
    }
    let mut writers = Vec::new();
    for id in &sessions {
        for t in 0..WRITERS {
            let (repo, id) = (fx.repo.clone(), id.clone());
            writers.push(tokio::spawn(async move {
                for i in 0..n {
                    repo.append(&id, vec![user(&format!("t{t} e{i}"))])
                        .await
                        .unwrap();
                }
            }));
        }
    }
    for w in writers {
        w.await.unwrap();
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.await.unwrap() > 0, "a reader never ran");
    }
    let total = (WRITERS * n) as u64;
    for id in &sessions {
        let archive = fx.repo.all_events(id, EventView::Archive).await.unwrap();
        let seqs: Vec<u64> = archive.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=total).collect::<Vec<u64>>(), "seqs of {id}");
        let unique: HashSet<&str> = archive.iter().map(|e| e.message.text()).collect();
        assert_eq!(unique.len() as u64, total, "duplicates in {id}");
        for t in 0..WRITERS {
            let prefix = format!("t{t} ");
            let mine: Vec<&str> = archive
                .iter()
                .map(|e| e.message.text())
                .filter(|x| x.starts_with(&prefix))
                .collect();
            let want: Vec<String> = (0..n).map(|i| format!("t{t} e{i}")).collect();
            assert_eq!(mine, want, "writer {t} of {id}");
        }
        let s = fx.repo.get(id).await.unwrap();
        assert_eq!((s.event_count, s.version), (total, total));
    }
}

/// Compactions (context replaces at the version they read) racing appends:
/// every appended event is in the archive, and the final context is a
/// compacted context plus the appends after it, or the old one plus all
/// appends; a replace only wins at the version it read.
pub async fn compaction_racing_appends_keeps_every_event(fx: Fixture) {
    let s = fx.session("alice").await;
    let id = s.id.clone();
    for i in 0..20 {
        fx.append(&id, vec![user(&format!("seed {i}"))]).await;
    }
    let appender = {
        let (repo, id) = (fx.repo.clone(), id.clone());
        tokio::spawn(async move {
            for i in 0..200 {
                repo.append(&id, vec![user(&format!("live {i}"))])
                    .await
                    .unwrap();
            }
        })
    };
    let compactor = {
        let (repo, id) = (fx.repo.clone(), id.clone());
        tokio::spawn(async move {
            let mut wins = 0;
            for round in 0..30 {
                let v = repo.event_version(&id).await.unwrap();
                let ctx = repo.all_events(&id, EventView::Context).await.unwrap();
                let keep = ctx.len().saturating_sub(3);
                let mut new_ctx = vec![assistant(&format!("summary {round}"))];
                new_ctx.extend_from_slice(&ctx[keep..]);
                if repo.replace_context(&id, new_ctx, v).await.unwrap() {
                    wins += 1;
                }
                tokio::task::yield_now().await;
            }
            wins
        })
    };
    appender.await.unwrap();
    let wins = compactor.await.unwrap();
    let archive = fx.repo.all_events(&id, EventView::Archive).await.unwrap();
    let texts: Vec<&str> = archive.iter().map(|e| e.message.text()).collect();
    for i in 0..200 {
        let want = format!("live {i}");
        assert_eq!(
            texts.iter().filter(|t| **t == want).count(),
            1,
            "{want} lost or duplicated in the archive"
        );
    }
    let summaries = texts.iter().filter(|t| t.starts_with("summary ")).count();
    assert_eq!(
        summaries, wins,
        "each winning compaction archived its summary once"
    );
    let ctx = fx.repo.all_events(&id, EventView::Context).await.unwrap();
    let ctx_texts: Vec<&str> = ctx.iter().map(|e| e.message.text()).collect();
    if wins == 0 {
        assert_eq!(
            ctx.len(),
            220,
            "no compaction won: the old context plus every append"
        );
    } else {
        // The context starts with the last winning summary, then events in seq order, ending with the last append.
        assert!(ctx_texts[0].starts_with("summary "), "{ctx_texts:?}");
        assert!(ctx[1..].windows(2).all(|w| w[0].seq < w[1].seq));
        assert_eq!(ctx_texts.last().copied(), Some("live 199"));
        // Every append after the winner's version is in the context.
        let first_live_after = ctx_texts
            .iter()
            .skip(1)
            .find_map(|t| {
                t.strip_prefix("live ")
                    .and_then(|n| n.parse::<usize>().ok())
            })
            .unwrap_or(199);
        for i in first_live_after..200 {
            assert!(
                ctx_texts.contains(&format!("live {i}").as_str()),
                "live {i} missing from the context"
            );
        }
    }
}

/// Generates the stress tests for a backend: `$factory` as for
/// [`conformance_suite!`](crate::conformance_suite).
#[macro_export]
macro_rules! stress_suite {
    ($factory:path) => {
        #[test]
        fn stress_writers_on_four_sessions_lose_nothing() {
            $crate::run_case(
                $factory,
                $crate::stress::writers_on_four_sessions_lose_nothing,
            );
        }

        #[test]
        fn stress_compaction_racing_appends_keeps_every_event() {
            $crate::run_case(
                $factory,
                $crate::stress::compaction_racing_appends_keeps_every_event,
            );
        }
    };
}
