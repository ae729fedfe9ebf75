//! A model-based test of the promise: "the context stays within budget,
//! and nothing the agent needs is ever lost".
//!
//! Random agent histories run through the service over the store under
//! test: turns with tool loops, parallel calls, results that arrive a turn
//! late, calls that never get a result, root and sub-agent system prompts,
//! sub-agent work and state deltas, interleaved with compactions by every
//! strategy, rewinds and forks. A small reference model remembers what must
//! hold, and after every step the suite checks:
//!
//! 1. **Budget**: a compaction never grows the context, and a token budget
//!    is met or the outcome's typed shortfall says by exactly how much not.
//! 2. **Pairing**: the stored context never holds a tool result without its
//!    call, nor a call without its result unless that result has not
//!    arrived; the model-ready context holds complete call groups only,
//!    each result right after its call.
//! 3. **Pinned first**: the model-ready context starts with the system
//!    prompts, and the root agent never gets a sub-agent's.
//! 4. **Rewind and fork**: the stored context after a rewind to an
//!    invocation, and a fork before it, is exactly the stored context the
//!    session had just before that invocation started.
//! 5. **Nothing lost**: every event not rewound away is in the archive,
//!    and search finds it by a word only it holds.
//! 6. **State**: the session state is the replay of the surviving deltas.
//!
//! Use [`crate::promise_suite!`].

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{json, Value};
use session_compaction::StrategySpec;
use session_core::{
    ContextOptions, CreateSessionRequest, DefaultSessionService, ErrorKind, EventView, ForkAt,
    ManualClock, Message, Owner, RewindTo, Role, SearchQuery, SessionEvent, SessionId,
    SessionRepositoryExt, SessionService, SharedClock, ToolCall,
};

use crate::TestStore;

/// The sub-agent branch of the histories.
const SUB: &str = "orch.researcher";

/// One step of an agent's history.
#[derive(Debug, Clone)]
enum Op {
    /// One invocation: maybe a new system prompt (root or the sub-agent's),
    /// a question with a state delta, the late results of the previous
    /// turn, `steps` tool steps (two parallel calls when `parallel`), maybe
    /// sub-agent work, the answer. With `late`, the first result arrives
    /// in the next turn; with `pending`, the last call never gets one.
    Turn {
        system: Option<bool>,
        steps: u8,
        parallel: bool,
        late: bool,
        pending: bool,
        sub_agent: bool,
        words: u8,
    },
    /// A compaction by strategy `which` with parameter seed `param`.
    Compact { which: u8, param: u16 },
    /// A rewind to before the `back`-th invocation from the end.
    Rewind { back: u8 },
    /// A fork before the `back`-th invocation from the end.
    Fork { back: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (
            prop::option::weighted(0.25, any::<bool>()),
            0u8..4,
            any::<bool>(),
            prop::bool::weighted(0.3),
            prop::bool::weighted(0.1),
            prop::bool::weighted(0.2),
            1u8..40,
        )
            .prop_map(|(system, steps, parallel, late, pending, sub_agent, words)| Op::Turn {
                system,
                steps,
                parallel,
                late,
                pending,
                sub_agent,
                words,
            }),
        3 => (0u8..6, any::<u16>()).prop_map(|(which, param)| Op::Compact { which, param }),
        1 => (0u8..4).prop_map(|back| Op::Rewind { back }),
        1 => (0u8..4).prop_map(|back| Op::Fork { back }),
    ]
}

/// The compaction spec `which` with a parameter drawn from `param`: every
/// strategy, tight budgets included.
fn spec(which: u8, param: u16) -> Value {
    let p = u64::from(param);
    match which % 6 {
        0 => json!({"strategy": "turn_window", "max_turns": 1 + p % 3}),
        1 => json!({"strategy": "sliding_window", "max_events": 1 + p % 10}),
        2 => json!({"strategy": "token_budget", "max_tokens": 20 + p % 600}),
        3 => json!({"strategy": "summarize", "keep": p % 3}),
        4 => json!({"strategy": "tool_result_clearing", "keep": 1 + p % 2}),
        _ => json!({"strategy": "structured_summary", "keep": 1 + p % 2}),
    }
}

/// What the reference model remembers of a history.
#[derive(Default)]
struct Model {
    /// The invocations still in the session, oldest first.
    invocations: Vec<Invocation>,
    /// Every event not rewound away: its seq, id and a word only it holds.
    events: Vec<(u64, String, String)>,
    /// Results of the last turn that arrive in the next one.
    late: Vec<SessionEvent>,
    /// Each turn's state delta value, by the seq of its question.
    turns: Vec<(u64, u64)>,
    /// A counter for ids, words and call ids.
    counter: u64,
}

impl Model {
    fn word(&mut self) -> String {
        self.counter += 1;
        format!("qz{}vx", self.counter)
    }
}

/// One invocation of the history.
#[derive(Debug, Clone)]
struct Invocation {
    /// Its id.
    name: String,
    /// The stored context (seqs) just before it started.
    before: Vec<u64>,
    /// The seq of its first event.
    first: Option<u64>,
}

/// The service, the session and the clock a history runs on.
struct Run {
    service: DefaultSessionService,
    owner: Owner,
    id: SessionId,
    clock: Arc<ManualClock>,
}

type Check = Result<(), TestCaseError>;

fn fail(what: String) -> TestCaseError {
    TestCaseError::fail(what)
}

impl Run {
    async fn stored(&self, view: EventView) -> Vec<SessionEvent> {
        self.service
            .repository()
            .all_events(&self.id, view)
            .await
            .unwrap()
    }

    async fn seqs(&self, id: &SessionId) -> Vec<u64> {
        self.service
            .repository()
            .all_events(id, EventView::Context)
            .await
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect()
    }

    /// Appends `events` (each given a word of its own) in invocation `inv`.
    async fn append(&self, m: &mut Model, inv: &str, events: Vec<SessionEvent>) {
        let mut batch = Vec::with_capacity(events.len());
        for mut e in events {
            e.invocation_id = Some(inv.to_owned());
            batch.push(e);
        }
        let ids: Vec<String> = batch.iter().map(|e| e.id.clone()).collect();
        let words: Vec<String> = batch.iter().map(|e| last_word(e.message.text())).collect();
        self.clock.advance(chrono::Duration::milliseconds(5));
        let out = self
            .service
            .append_events(&self.owner, &self.id, batch)
            .await
            .unwrap();
        if let Some(current) = m.invocations.last_mut() {
            if current.first.is_none() {
                current.first = out.seqs.first().copied();
            }
        }
        for ((seq, id), word) in out.seqs.into_iter().zip(ids).zip(words) {
            m.events.push((seq, id, word));
        }
    }

    async fn turn(&self, m: &mut Model, op: &Op) {
        let Op::Turn {
            system,
            steps,
            parallel,
            late,
            pending,
            sub_agent,
            words,
        } = op
        else {
            return;
        };
        let inv = format!("inv{}", m.counter);
        m.counter += 1;
        let before = self.seqs(&self.id).await;
        m.invocations.push(Invocation {
            name: inv.clone(),
            before,
            first: None,
        });
        if let Some(root) = system {
            let w = m.word();
            let mut e = SessionEvent::new(Message::system(format!(
                "SYS-{} be brief {w}",
                if *root { "root" } else { "sub" }
            )));
            if !root {
                e.branch = Some(SUB.to_owned());
            }
            self.append(m, &inv, vec![e]).await;
        }
        let w = m.word();
        let turn_no = m.counter;
        let question = SessionEvent::builder(Message::user(format!(
            "question{} {w}",
            " about the order".repeat(usize::from(*words))
        )))
        .state("turn", turn_no)
        .build()
        .unwrap();
        let mut batch = vec![question];
        batch.append(&mut m.late);
        self.append(m, &inv, batch).await;
        if let Some((seq, _, _)) = m.events.iter().rev().find(|(_, _, word)| *word == w) {
            m.turns.push((*seq, turn_no));
        }
        for step in 0..*steps {
            let n = if *parallel { 2 } else { 1 };
            let calls: Vec<ToolCall> = (0..n)
                .map(|_| {
                    m.counter += 1;
                    ToolCall::new(format!("call{}", m.counter), "lookup", &json!({}))
                })
                .collect();
            let w = m.word();
            let mut batch = vec![SessionEvent::new(Message::assistant_tool_calls(
                format!("looking {w}"),
                calls.clone(),
            ))];
            for (i, call) in calls.iter().enumerate() {
                let w = m.word();
                let result = SessionEvent::new(Message::tool_result(
                    &call.id,
                    "lookup",
                    format!("found{} {w}", " shelf clear".repeat(usize::from(*words))),
                ));
                let last = step + 1 == *steps && i + 1 == calls.len();
                if *pending && last {
                    continue;
                }
                if *late && step == 0 && i == 0 {
                    m.late.push(result);
                } else {
                    batch.push(result);
                }
            }
            self.append(m, &inv, batch).await;
        }
        if *sub_agent {
            let (a, b) = (m.word(), m.word());
            let events = [
                Message::user(format!("task {a}")),
                Message::assistant(format!("done {b}")),
            ]
            .into_iter()
            .map(|msg| SessionEvent::builder(msg).branch(SUB).build().unwrap())
            .collect();
            self.append(m, &inv, events).await;
        }
        let w = m.word();
        self.append(
            m,
            &inv,
            vec![SessionEvent::new(Message::assistant(format!("answer {w}")))],
        )
        .await;
    }

    async fn compact(&self, which: u8, param: u16) -> Check {
        let spec_json = spec(which, param);
        let spec: StrategySpec = serde_json::from_value(spec_json.clone()).unwrap();
        let compactor = spec.compactor().unwrap();
        let done = match self
            .service
            .compact(&self.owner, &self.id, compactor.as_ref())
            .await
        {
            Ok(done) => done,
            // A budget below the pinned system prompts is refused.
            Err(e) if e.kind() == ErrorKind::InvalidInput => return Ok(()),
            Err(e) => return Err(fail(format!("{spec_json}: {e}"))),
        };
        if done.compacted && done.tokens_after >= done.tokens_before {
            return Err(fail(format!("{spec_json} grew the context: {done:?}")));
        }
        if let Some(max) = spec_json["max_tokens"].as_u64() {
            let after = done.tokens_after;
            match &done.shortfall {
                None if done.compacted && after > max => {
                    return Err(fail(format!("{spec_json} silently over budget: {done:?}")))
                }
                Some(s) if s.over_by != s.after.saturating_sub(max) || s.budget != max => {
                    return Err(fail(format!("{spec_json} shortfall is wrong: {done:?}")))
                }
                _ => {}
            }
        }
        Ok(())
    }

    async fn rewind(&self, m: &mut Model, back: u8) -> Check {
        let Some(k) = m.invocations.len().checked_sub(1 + usize::from(back)) else {
            return Ok(());
        };
        let Invocation {
            name: inv,
            before: snapshot,
            first,
        } = m.invocations[k].clone();
        self.service
            .rewind(
                &self.owner,
                &self.id,
                &RewindTo::before_invocation(&inv).unwrap(),
            )
            .await
            .unwrap();
        let now = self.seqs(&self.id).await;
        if now != snapshot {
            return Err(fail(format!(
                "rewind to {inv}: context {now:?}, it was {snapshot:?} when {inv} started"
            )));
        }
        m.invocations.truncate(k);
        let point = first.unwrap_or(u64::MAX);
        m.events.retain(|(seq, _, _)| *seq < point);
        m.turns.retain(|(seq, _)| *seq < point);
        m.late.clear();
        Ok(())
    }

    async fn fork(&self, m: &Model, back: u8) -> Check {
        let Some(k) = m.invocations.len().checked_sub(1 + usize::from(back)) else {
            return Ok(());
        };
        let Invocation {
            name: inv,
            before: snapshot,
            ..
        } = &m.invocations[k];
        let at = ForkAt::Invocation(session_core::InvocationId::new(inv.as_str()).unwrap());
        let fork = self.service.fork(&self.owner, &self.id, &at).await.unwrap();
        let got = self.seqs(&fork.id).await;
        if &got != snapshot {
            return Err(fail(format!(
                "fork before {inv}: context {got:?}, it was {snapshot:?} when {inv} started"
            )));
        }
        self.service.delete(&self.owner, &fork.id).await.unwrap();
        Ok(())
    }
}

/// The last whitespace-separated word of `text`: the word only that event holds.
fn last_word(text: &str) -> String {
    text.split_whitespace().last().unwrap_or("").to_owned()
}

/// The pairing, pinning and branch-view promises on the context as stored
/// and as the model gets it.
async fn check_context(run: &Run) -> Check {
    let stored = run.stored(EventView::Context).await;
    let archive = run.stored(EventView::Archive).await;
    let results_anywhere: HashSet<&str> = archive.iter().filter_map(result_of).collect();
    let calls: HashSet<&str> = stored
        .iter()
        .flat_map(|e| e.message.tool_calls().iter().map(|c| c.id.as_str()))
        .collect();
    let results: HashSet<&str> = stored.iter().filter_map(result_of).collect();
    for id in &results {
        if !calls.contains(id) {
            return Err(fail(format!(
                "stored context holds result {id} without its call"
            )));
        }
    }
    for id in &calls {
        if !results.contains(id) && results_anywhere.contains(id) {
            return Err(fail(format!(
                "stored context holds call {id} without its result"
            )));
        }
    }
    for viewer in [None, Some(SUB)] {
        let options = ContextOptions {
            branch: viewer.map(str::to_owned),
        };
        let messages = run
            .service
            .context(&run.owner, &run.id, &options)
            .await
            .unwrap();
        check_messages(&messages, viewer)?;
    }
    Ok(())
}

fn result_of(e: &SessionEvent) -> Option<&str> {
    match &e.message {
        Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
        _ => None,
    }
}

/// Complete call groups, each result right after its call; system prompts
/// first; no sub-agent prompt for the root agent.
fn check_messages(messages: &[Message], viewer: Option<&str>) -> Check {
    let mut open: Vec<String> = Vec::new();
    let mut past_system = false;
    for m in messages {
        match m {
            Message::Tool { tool_call_id, .. } => {
                let Some(i) = open.iter().position(|c| c == tool_call_id) else {
                    return Err(fail(format!(
                        "{viewer:?}: result {tool_call_id} not right after its call"
                    )));
                };
                open.remove(i);
                continue;
            }
            _ if !open.is_empty() => {
                return Err(fail(format!(
                    "{viewer:?}: calls {open:?} without their results"
                )));
            }
            _ => {}
        }
        open = m.tool_calls().iter().map(|c| c.id.clone()).collect();
        if m.role() == Role::System {
            if past_system {
                return Err(fail(format!(
                    "{viewer:?}: a system prompt after other messages"
                )));
            }
            if viewer.is_none() && m.text().starts_with("SYS-sub") {
                return Err(fail("the root agent got the sub-agent's prompt".to_owned()));
            }
        } else {
            past_system = true;
        }
    }
    if open.is_empty() {
        Ok(())
    } else {
        Err(fail(format!(
            "{viewer:?}: calls {open:?} without their results at the end"
        )))
    }
}

/// Nothing lost: every surviving event is archived and found by its word;
/// the state is the replay of the surviving deltas.
async fn check_nothing_lost(run: &Run, m: &Model, search: bool) -> Check {
    let archive = run.stored(EventView::Archive).await;
    let ids: HashSet<&str> = archive.iter().map(|e| e.id.as_str()).collect();
    for (seq, id, _) in &m.events {
        if !ids.contains(id.as_str()) {
            return Err(fail(format!("event {seq} is missing from the archive")));
        }
    }
    if search {
        let by_word: HashMap<&str, u64> = m
            .events
            .iter()
            .map(|(seq, _, w)| (w.as_str(), *seq))
            .collect();
        for (word, seq) in by_word {
            let query = SearchQuery::in_session(&run.id, word);
            let hits = run.service.search(&run.owner, &query).await.unwrap();
            if !hits.items.iter().any(|h| h.event.seq == seq) {
                return Err(fail(format!("search for {word} does not find seq {seq}")));
            }
        }
    }
    let state = run.service.get(&run.owner, &run.id).await.unwrap().state;
    let want = m.turns.last().map(|(_, n)| json!(n));
    if state.get("turn") != want.as_ref() {
        return Err(fail(format!(
            "state turn {:?}, the deltas say {want:?}",
            state.get("turn")
        )));
    }
    Ok(())
}

/// Runs `cases` random histories (env `PROMISE_CASES` overrides) through
/// the service over the store from `factory`, checking the promise after
/// every step.
pub fn run_promise<F, FF>(factory: F, cases: u32)
where
    F: Fn(SharedClock) -> FF,
    FF: Future<Output = Option<TestStore>>,
{
    let (rt, mut runner) = crate::model::runner("PROMISE_CASES", cases);
    let result = runner.run(&prop::collection::vec(op(), 1..16), |ops| {
        rt.block_on(run_history(&factory, &ops))
    });
    if let Err(e) = result {
        panic!("promise test failed: {e}");
    }
}

/// Runs one history through the service over the store from `factory`,
/// checking the promise after every step.
async fn run_history<F, FF>(factory: &F, ops: &[Op]) -> Result<(), TestCaseError>
where
    F: Fn(SharedClock) -> FF,
    FF: Future<Output = Option<TestStore>>,
{
    let clock = Arc::new(ManualClock::at(
        chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap(),
    ));
    let Some(store) = factory(clock.clone()).await else {
        return Ok(());
    };
    let service = DefaultSessionService::new(store.repo.clone()).with_clock(clock.clone());
    let owner = Owner::parse("app", "promise").unwrap();
    let session = service
        .create(
            CreateSessionRequest::builder("promise")
                .app("app")
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    let run = Run {
        service,
        owner,
        id: session.id,
        clock,
    };
    let mut model = Model::default();
    for (n, op) in ops.iter().enumerate() {
        let step = match op {
            Op::Turn { .. } => {
                run.turn(&mut model, op).await;
                Ok(())
            }
            Op::Compact { which, param } => run.compact(*which, *param).await,
            Op::Rewind { back } => run.rewind(&mut model, *back).await,
            Op::Fork { back } => run.fork(&model, *back).await,
        };
        let checked = match step {
            Ok(()) => match check_context(&run).await {
                Ok(()) => check_nothing_lost(&run, &model, false).await,
                e => e,
            },
            e => e,
        };
        checked.map_err(|e| fail(format!("step {n} {op:?}: {e}")))?;
    }
    check_nothing_lost(&run, &model, true).await?;
    drop(store.guard);
    Ok(())
}

/// Generates the promise's model-based test over a store factory: 32
/// random agent histories (env `PROMISE_CASES` overrides), see
/// [`crate::promise`].
#[macro_export]
macro_rules! promise_suite {
    ($factory:path) => {
        $crate::promise_suite!($factory, 32);
    };
    ($factory:path, $cases:expr) => {
        #[test]
        fn keeps_the_promise_on_random_agent_histories() {
            $crate::promise::run_promise($factory, $cases);
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use session_core::InMemoryRepository;

    fn turn(system: Option<bool>, steps: u8, parallel: bool, sub_agent: bool) -> Op {
        Op::Turn {
            system,
            steps,
            parallel,
            late: false,
            pending: false,
            sub_agent,
            words: 1,
        }
    }

    /// A history a random run once found (on SQLite): a rewind after a
    /// window compaction and a turn window restored the context out of order.
    #[test]
    fn a_rewind_after_two_compactions_restores_the_context_in_order() {
        let ops = vec![
            turn(None, 1, false, false),
            Op::Compact {
                which: 1,
                param: 21260,
            },
            turn(Some(false), 1, true, true),
            turn(None, 0, false, false),
            Op::Compact {
                which: 0,
                param: 246,
            },
            Op::Rewind { back: 0 },
            turn(None, 0, false, false),
            turn(None, 0, false, false),
            turn(None, 0, false, false),
            turn(None, 0, false, false),
            Op::Rewind { back: 0 },
        ];
        let factory = |clock: SharedClock| async move {
            Some(TestStore::new(InMemoryRepository::new().with_clock(clock)))
        };
        let rt = tokio::runtime::Runtime::new().unwrap();
        if let Err(e) = rt.block_on(run_history(&factory, &ops)) {
            panic!("{e}");
        }
    }
}
