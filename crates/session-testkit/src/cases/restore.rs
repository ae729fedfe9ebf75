//! Rewind and fork after compaction: the context comes back exactly as it
//! was at the point, whatever strategy compacted it, through the service.

use serde_json::{json, Value};
use session_compaction::StrategySpec;
use session_core::{
    ForkAt, Message, RewindTo, Session, SessionEvent, SessionId, SessionService, ToolCall,
};

use super::support::{owner, service_session};
use crate::fixture::{texts, Fixture};

/// An event of invocation `inv`.
fn of(inv: &str, message: Message) -> SessionEvent {
    SessionEvent::builder(message)
        .invocation_id(inv)
        .build()
        .unwrap()
}

/// A session holding a system prompt and `turns` question-answer turns,
/// turn `i` in invocation `i{i}`.
async fn session_with_turns(fx: &Fixture, turns: usize) -> Session {
    let s = service_session(fx, &owner()).await;
    fx.append(&s.id, vec![of("i0", Message::system("be brief"))])
        .await;
    for i in 1..=turns {
        append_turn(fx, &s.id, i).await;
    }
    s
}

/// Turn `i`'s question and answer: long enough that a summary of a few
/// turns saves tokens.
fn turn_texts(i: usize) -> [String; 2] {
    let detail = " with some detail to remember".repeat(12);
    [
        format!("question {i}{detail}"),
        format!("answer {i}{detail}"),
    ]
}

async fn append_turn(fx: &Fixture, id: &SessionId, i: usize) {
    let inv = format!("i{i}");
    let [q, a] = turn_texts(i);
    let events = vec![of(&inv, Message::user(q)), of(&inv, Message::assistant(a))];
    fx.append(id, events).await;
}

/// The stored texts of the system prompt and then these turns.
fn prompt_and_turns(turns: &[usize]) -> Vec<String> {
    let mut out = vec!["be brief".to_owned()];
    out.extend(turns.iter().flat_map(|i| turn_texts(*i)));
    out
}

/// Compacts `id` through the service with the strategy spec `spec`.
async fn compact(fx: &Fixture, id: &SessionId, spec: Value) {
    let spec: StrategySpec = serde_json::from_value(spec).unwrap();
    let done = fx
        .service()
        .compact(&owner(), id, spec.compactor().unwrap().as_ref())
        .await
        .unwrap();
    assert!(done.compacted, "{spec:?} compacted: {done:?}");
}

async fn stored_context(fx: &Fixture, id: &SessionId) -> Vec<String> {
    texts(&fx.context(id).await)
}

/// After a compaction by any window strategy (turn window, sliding window,
/// token budget: none leaves a summary to undo), a rewind to an invocation
/// and a fork before it restore the turns the window dropped, system
/// prompt first, in their order.
pub async fn rewind_after_a_window_compaction_restores_the_dropped_turns(fx: Fixture) {
    let specs = [
        json!({"strategy": "turn_window", "max_turns": 1}),
        json!({"strategy": "sliding_window", "max_events": 2}),
        json!({"strategy": "token_budget", "max_tokens": 200}),
        json!({"strategy": "summarize", "keep": 1}),
    ];
    let expected = prompt_and_turns(&[1, 2]);
    for spec in specs {
        let s = session_with_turns(&fx, 3).await;
        compact(&fx, &s.id, spec.clone()).await;
        let service = fx.service();
        let fork = service
            .fork(&owner(), &s.id, &ForkAt::Invocation(crate::iid("i3")))
            .await
            .unwrap();
        assert_eq!(
            stored_context(&fx, &fork.id).await,
            expected,
            "fork, {spec}"
        );
        service
            .rewind(&owner(), &s.id, &RewindTo::Invocation(crate::iid("i3")))
            .await
            .unwrap();
        assert_eq!(stored_context(&fx, &s.id).await, expected, "rewind, {spec}");
        let messages = service.messages(&owner(), &s.id).await.unwrap();
        assert_eq!(messages.len(), expected.len(), "model context, {spec}");
    }
}

/// Rewinds to seqs across two compactions (a window cut, then a summary)
/// give the context each point had: after the cut and a later turn, just
/// after the cut, and before it.
pub async fn rewind_to_a_seq_after_two_compactions_restores_each_point(fx: Fixture) {
    let s = session_with_turns(&fx, 2).await;
    compact(
        &fx,
        &s.id,
        json!({"strategy": "turn_window", "max_turns": 1}),
    )
    .await;
    append_turn(&fx, &s.id, 3).await;
    append_turn(&fx, &s.id, 4).await;
    compact(&fx, &s.id, json!({"strategy": "summarize", "keep": 1})).await;
    let archive = fx.archive(&s.id).await;
    let seq_of = |i: usize| {
        let [q, _] = turn_texts(i);
        archive
            .iter()
            .find(|e| e.message.text() == q)
            .map(|e| e.seq)
            .unwrap()
    };
    let (q4, q3, q2) = (seq_of(4), seq_of(3), seq_of(2));
    let rewind = |seq| {
        let service = fx.service();
        let id = s.id.clone();
        async move {
            service
                .rewind(&owner(), &id, &RewindTo::Seq(seq))
                .await
                .unwrap();
        }
    };
    rewind(q4).await;
    assert_eq!(
        stored_context(&fx, &s.id).await,
        prompt_and_turns(&[2, 3]),
        "before turn 4: the window cut, then turn 3"
    );
    rewind(q3).await;
    assert_eq!(
        stored_context(&fx, &s.id).await,
        prompt_and_turns(&[2]),
        "just after the window cut"
    );
    rewind(q2).await;
    assert_eq!(
        stored_context(&fx, &s.id).await,
        prompt_and_turns(&[1]),
        "before the cut"
    );
}

/// Tool results cleared after a point come back in their places, next to
/// their calls, when the session is rewound to it; a fork at a seq gets
/// the same context.
pub async fn rewind_after_tool_result_clearing_restores_the_results_in_place(fx: Fixture) {
    let s = service_session(&fx, &owner()).await;
    let mut events = vec![of("i1", Message::user("look things up"))];
    for n in 1..=3 {
        let call = format!("c{n}");
        events.push(of(
            "i1",
            Message::assistant_tool_calls("", vec![ToolCall::new(&call, "lookup", &json!({}))]),
        ));
        events.push(of(
            "i1",
            Message::tool_result(&call, "lookup", format!("result {n} {}", "x".repeat(400))),
        ));
    }
    events.push(of("i1", Message::assistant("done")));
    fx.append(&s.id, events).await;
    append_turn(&fx, &s.id, 2).await;
    let before = stored_context(&fx, &s.id).await;
    compact(
        &fx,
        &s.id,
        json!({"strategy": "tool_result_clearing", "keep": 1}),
    )
    .await;
    assert_ne!(stored_context(&fx, &s.id).await, before, "results cleared");
    let point = fx.archive(&s.id).await.len();
    let point = u64::try_from(point).unwrap();
    let service = fx.service();
    let fork = service
        .fork(&owner(), &s.id, &ForkAt::Seq(point))
        .await
        .unwrap();
    assert_ne!(
        stored_context(&fx, &fork.id).await,
        before,
        "a fork after the clearing keeps the placeholders"
    );
    service
        .rewind(&owner(), &s.id, &RewindTo::Invocation(crate::iid("i2")))
        .await
        .unwrap();
    assert_eq!(
        stored_context(&fx, &s.id).await,
        before[..before.len() - 2],
        "the results back in place, turn 2 gone"
    );
}
