//! What an owner route costs in store round trips, now that the service
//! does the work: a state patch and a compaction, counted with a
//! `StoreObserver` on the store under the service, next to the sequence the
//! faces used to run before the one-door redesign (replayed call for
//! call: the owner check through the service, then the raw store).
//! Run with `--nocapture` to see the figures.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_session::compaction::{StrategyName, StrategySpec};
use agent_session::layer::{StoreObserver, TracingLayer};
use agent_session::{
    state::apply_delta, CreateSessionRequest, DefaultSessionService, ErrorKind, EventView,
    InMemoryRepository, Message, Owner, SessionEvent, SessionId, SessionRepository,
    SessionRepositoryExt, SessionService, SessionUpdate, StateMap, ToolCall,
};
use serde_json::json;

/// Counts the calls that reach the store.
#[derive(Default)]
struct Calls(Mutex<Vec<&'static str>>);

impl StoreObserver for Calls {
    fn observe(&self, _: &'static str, op: &'static str, _: Duration, _: Option<ErrorKind>) {
        self.0.lock().unwrap().push(op);
    }
}

impl Calls {
    fn take(&self) -> Vec<&'static str> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

struct World {
    calls: Arc<Calls>,
    repo: Arc<dyn SessionRepository>,
    service: DefaultSessionService,
    owner: Owner,
    id: SessionId,
}

/// A session holding a tool loop of `steps` steps in one turn.
async fn world(steps: usize) -> World {
    let calls = Arc::new(Calls::default());
    let repo: Arc<dyn SessionRepository> =
        Arc::new(TracingLayer::new(InMemoryRepository::new()).with_observer(calls.clone()));
    let service = DefaultSessionService::new(repo.clone());
    let owner = Owner::parse("support", "ada").unwrap();
    let id = service
        .create(CreateSessionRequest::for_owner(&owner).build().unwrap())
        .await
        .unwrap()
        .id;
    let mut events = vec![SessionEvent::new(Message::user("Where is ORD-17?"))];
    for i in 0..steps {
        let call = ToolCall::new(format!("c{i}"), "lookup", &json!({ "i": i }));
        events.push(SessionEvent::new(Message::assistant_tool_calls(
            "",
            vec![call],
        )));
        events.push(SessionEvent::new(Message::tool_result(
            format!("c{i}"),
            "lookup",
            format!("warehouse {i}: not here"),
        )));
    }
    service.append_events(&owner, &id, events).await.unwrap();
    calls.take();
    World {
        calls,
        repo,
        service,
        owner,
        id,
    }
}

/// The state patch the HTTP route and the Python package ran before: read
/// the scopes (owner check, then the store), update through the service,
/// read the scopes again.
async fn patch_as_before(w: &World, patch: &StateMap) {
    let read = || async {
        let session = w.service.get(&w.owner, &w.id).await.unwrap();
        let stored = w.repo.get(&session.id).await.unwrap();
        w.repo
            .shared_state(&session.app, &session.user_id)
            .await
            .unwrap();
        stored
    };
    let stored = read().await;
    let mut state = stored.state;
    apply_delta(&mut state, patch);
    let update = SessionUpdate::new()
        .state(state)
        .expect_version(stored.version);
    w.service.update(&w.owner, &w.id, update).await.unwrap();
    read().await;
}

/// The compaction the HTTP route and the Python package ran before: the
/// owner check through the service, the policy over the raw store, then
/// the version read again for the `ETag`.
async fn compact_as_before(w: &World, spec: &StrategySpec) {
    let session = w.service.get(&w.owner, &w.id).await.unwrap();
    let policy = agent_session::compaction::CompactionPolicy::new(
        agent_session::compaction::Trigger::TurnCount(0),
        spec.build().unwrap(),
    );
    policy
        .compact_now(w.repo.as_ref(), &session.id)
        .await
        .unwrap();
    w.repo.event_version(&session.id).await.unwrap();
}

#[tokio::test]
async fn a_state_patch_costs_three_store_calls() {
    let w = world(2).await;
    let patch: StateMap = [("step".to_owned(), json!(2))].into_iter().collect();
    patch_as_before(&w, &patch).await;
    let before = w.calls.take();
    w.service
        .patch_state(&w.owner, &w.id, &patch, None)
        .await
        .unwrap();
    let now = w.calls.take();
    eprintln!(
        "state patch: {} store calls before {before:?}, {} now {now:?}",
        before.len(),
        now.len()
    );
    assert_eq!(now, ["get", "update", "shared_state"]);
}

#[tokio::test]
async fn a_compaction_reads_the_session_once_and_the_context_once() {
    let spec = StrategySpec::new(StrategyName::Summarize);
    let w = world(25).await;
    let first_page = w
        .repo
        .events(&w.id, &agent_session::EventFilter::context())
        .await
        .unwrap();
    assert!(
        first_page.has_more,
        "the context spans more than one page of 10"
    );
    w.calls.take();
    compact_as_before(&w, &spec).await;
    let before = w.calls.take();
    let w = world(25).await;
    let compactor = spec.compactor().unwrap();
    let done = w
        .service
        .compact(&w.owner, &w.id, compactor.as_ref())
        .await
        .unwrap();
    assert!(done.compacted);
    let now = w.calls.take();
    eprintln!(
        "compaction: {} store calls before {before:?}, {} now {now:?}",
        before.len(),
        now.len()
    );
    assert_eq!(now, ["get", "events", "replace_context"]);
    assert!(now.len() < before.len());
    let context = w.repo.all_events(&w.id, EventView::Context).await.unwrap();
    assert_eq!(
        u64::try_from(context.len()).unwrap(),
        u64::try_from(done.events_after).unwrap()
    );
}
