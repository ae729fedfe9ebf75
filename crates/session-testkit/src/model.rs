//! Model-based testing: random operation sequences applied to a backend and
//! to the reference `InMemoryRepository`; after every step the observable
//! results must be equal. Use [`crate::model_suite!`].

use std::future::Future;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use session_core::{
    Clock as _, CompactionSource, ErrorKind, EventFilter, EventView, InMemoryRepository,
    ManualClock, Message, NewSession, SearchQuery, SessionError, SessionEvent, SessionRepository,
    SessionRepositoryExt, SharedClock,
};

use crate::TestStore;

/// One step of a random history.
#[derive(Debug, Clone)]
enum Op {
    /// Create session `s` for user `u` (maybe expiring in an hour).
    Create { s: u8, u: u8, short: bool },
    /// Append a batch of `n` events (words from a small vocabulary, some with state, branch, invocation).
    Append { s: u8, n: u8, seed: u16 },
    /// Re-send the last batch appended to `s` (idempotency).
    Resend { s: u8 },
    /// Replace the context with a summary plus the last `keep` events, at the current or a stale version.
    Replace { s: u8, keep: u8, stale: bool },
    /// Rewind to invocation `i`.
    Rewind { s: u8, i: u8 },
    /// Search for a word.
    Search { s: u8, w: u8 },
    /// Delete.
    Delete { s: u8 },
    /// Move the clock forward by `hours`.
    Advance { hours: u8 },
    /// Purge expired sessions.
    Purge,
}

const WORDS: [&str; 6] = ["apple", "Banana", "cherry", "APPLE pie", "date", "fig"];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (0u8..3, 0u8..2, any::<bool>()).prop_map(|(s, u, short)| Op::Create { s, u, short }),
        4 => (0u8..3, 1u8..4, any::<u16>()).prop_map(|(s, n, seed)| Op::Append { s, n, seed }),
        1 => (0u8..3).prop_map(|s| Op::Resend { s }),
        1 => (0u8..3, 0u8..4, any::<bool>()).prop_map(|(s, keep, stale)| Op::Replace { s, keep, stale }),
        1 => (0u8..3, 0u8..4).prop_map(|(s, i)| Op::Rewind { s, i }),
        1 => (0u8..3, 0u8..6).prop_map(|(s, w)| Op::Search { s, w }),
        1 => (0u8..3).prop_map(|s| Op::Delete { s }),
        1 => (0u8..3).prop_map(|hours| Op::Advance { hours }),
        1 => Just(Op::Purge),
    ]
}

/// What one step showed, in a comparable form.
#[derive(Debug, PartialEq)]
enum Seen {
    Err(ErrorKind),
    Value(String),
}

fn seen<T: std::fmt::Debug>(r: Result<T, SessionError>) -> Seen {
    match r {
        Ok(v) => Seen::Value(format!("{v:?}")),
        Err(e) => Seen::Err(e.kind()),
    }
}

struct World {
    last_batch: [Vec<SessionEvent>; 3],
    counter: u64,
}

fn batch(world: &mut World, clock: &ManualClock, n: u8, seed: u16) -> Vec<SessionEvent> {
    (0..n)
        .map(|k| {
            world.counter += 1;
            let r = usize::from(seed) + usize::from(k) * 7;
            let msg = if r % 3 == 0 {
                Message::assistant(format!("answer about {}", WORDS[r % WORDS.len()]))
            } else {
                Message::user(format!("tell me about {}", WORDS[r % WORDS.len()]))
            };
            let mut b = SessionEvent::builder(msg)
                .id(format!("e{}", world.counter))
                .timestamp(clock.now())
                .invocation_id(format!("i{}", r % 4));
            if r % 4 == 1 {
                b = b.state("k", r % 10).state("user:u", r % 5);
            }
            if r % 5 == 2 {
                b = b.branch("orch.sub");
            }
            b.build().unwrap()
        })
        .collect()
}

async fn step(
    repo: &dyn SessionRepository,
    clock: &ManualClock,
    world: &mut World,
    op: &Op,
    ctx: &[SessionEvent],
) -> Vec<Seen> {
    let sid = |s: u8| crate::sid(&format!("s{s}"));
    match op {
        Op::Create { s, u, short } => {
            let now = clock.now();
            let mut n = NewSession::new("app", format!("u{u}"), now)
                .unwrap()
                .with_id(sid(*s))
                .unwrap();
            if *short {
                n = n.with_expires_at(Some(now + chrono::Duration::hours(1)));
            }
            vec![seen(repo.create(n).await)]
        }
        Op::Append { s, .. } | Op::Resend { s } => {
            let events = ctx.to_vec();
            world.last_batch[usize::from(*s)].clone_from(&events);
            vec![seen(repo.append(&sid(*s), events).await)]
        }
        Op::Replace { s, keep, stale } => {
            let v = repo.event_version(&sid(*s)).await;
            let Ok(v) = v else { return vec![seen(v)] };
            let mut new_ctx: Vec<SessionEvent> = SessionEvent::summary_turn(
                "summary",
                CompactionSource::RecursiveSummarization,
                clock.now(),
            )
            .into_iter()
            .enumerate()
            .map(|(i, mut e)| {
                e.id = format!("sum{}-{i}", world.counter);
                e
            })
            .collect();
            world.counter += 1;
            let current = repo
                .all_events(&sid(*s), EventView::Context)
                .await
                .unwrap_or_default();
            let skip = current.len().saturating_sub(usize::from(*keep));
            new_ctx.extend(current.into_iter().skip(skip));
            let expected = if *stale { v.saturating_sub(1) } else { v };
            vec![seen(
                repo.replace_context(&sid(*s), new_ctx, expected).await,
            )]
        }
        Op::Rewind { s, i } => vec![seen(
            repo.rewind(&sid(*s), &crate::iid(&format!("i{i}"))).await,
        )],
        Op::Search { s, w } => vec![
            seen(
                repo.search(
                    &SearchQuery::in_session(sid(*s).into_string(), WORDS[usize::from(*w)])
                        .page(0, 100),
                )
                .await,
            ),
            seen(
                repo.search(
                    &SearchQuery::for_user("app", "u0", WORDS[usize::from(*w)]).page(0, 100),
                )
                .await,
            ),
        ],
        Op::Delete { s } => vec![seen(repo.delete(&sid(*s)).await)],
        Op::Advance { hours } => {
            clock.advance(chrono::Duration::hours(i64::from(*hours)));
            vec![]
        }
        Op::Purge => vec![seen(repo.purge_expired(clock.now()).await)],
    }
}

/// Everything observable about the store after a step.
async fn observe(repo: &dyn SessionRepository) -> Vec<Seen> {
    let mut out = Vec::new();
    for s in 0..3 {
        let id = crate::sid(&format!("s{s}"));
        out.push(seen(repo.get(&id).await));
        out.push(seen(
            repo.events(&id, &EventFilter::archive().page(0, 1000))
                .await,
        ));
        out.push(seen(
            repo.events(&id, &EventFilter::context().page(0, 1000))
                .await,
        ));
        out.push(seen(
            repo.events(&id, &EventFilter::last(2).branch("orch.other"))
                .await,
        ));
    }
    out.push(seen(
        repo.shared_state(&crate::app_name("app"), &crate::user_id("u0"))
            .await,
    ));
    out
}

/// A two-thread runtime and a proptest runner of `cases` cases (the env
/// variable `var` overrides), without failure files: what the model-based
/// suites run their histories on.
pub(crate) fn runner(var: &str, cases: u32) -> (tokio::runtime::Runtime, TestRunner) {
    let cases = std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    (rt, runner)
}

/// Runs `cases` random histories (env `MODEL_CASES` overrides) against the
/// backend from `factory` and the reference, comparing after every step.
pub fn run_model<F, FF>(factory: F, cases: u32)
where
    F: Fn(SharedClock) -> FF,
    FF: Future<Output = Option<TestStore>>,
{
    let (rt, mut runner) = runner("MODEL_CASES", cases);
    let result = runner.run(&prop::collection::vec(op(), 1..24), |ops| {
        rt.block_on(async {
            let clock = Arc::new(ManualClock::at(
                chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap(),
            ));
            let Some(store) = factory(clock.clone()).await else {
                return Ok(());
            };
            let reference = InMemoryRepository::new().with_clock(clock.clone());
            let mut wa = World {
                last_batch: Default::default(),
                counter: 0,
            };
            let mut wb = World {
                last_batch: Default::default(),
                counter: 0,
            };
            for (n, op) in ops.iter().enumerate() {
                // Both stores get the very same events.
                let ctx = match op {
                    Op::Append { n: count, seed, .. } => batch(&mut wa, &clock, *count, *seed),
                    Op::Resend { s } => wa.last_batch[usize::from(*s)].clone(),
                    _ => Vec::new(),
                };
                wb.counter = wa.counter;
                let a = step(&reference, &clock, &mut wa, op, &ctx).await;
                let b = step(&*store.repo, &clock, &mut wb, op, &ctx).await;
                if a != b {
                    return Err(TestCaseError::fail(format!(
                        "step {n} {op:?}: reference {a:?}, backend {b:?}"
                    )));
                }
                wa.counter = wa.counter.max(wb.counter);
                let (oa, ob) = (observe(&reference).await, observe(&*store.repo).await);
                if oa != ob {
                    let diff: Vec<String> = oa
                        .iter()
                        .zip(&ob)
                        .filter(|(x, y)| x != y)
                        .map(|(x, y)| format!("reference {x:?}\n backend {y:?}"))
                        .collect();
                    return Err(TestCaseError::fail(format!(
                        "after step {n} {op:?}:\n{}",
                        diff.join("\n")
                    )));
                }
            }
            Ok(())
        })
    });
    if let Err(e) = result {
        panic!("model test failed: {e}");
    }
}

/// Generates a model-based test comparing a backend with the reference
/// after every step of 256 random histories (env `MODEL_CASES` overrides).
#[macro_export]
macro_rules! model_suite {
    ($factory:path) => {
        #[test]
        fn behaves_like_the_reference_on_random_histories() {
            $crate::model::run_model($factory, 256);
        }
    };
}
