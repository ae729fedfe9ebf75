//! `demo`: a scripted agent conversation on the embedded store, offline, in seconds.

use std::io::Write;
use std::sync::Arc;

use agent_session::compaction::{
    CompactionOutcome, CompactionPolicy, ConversationSearch, ExtractiveSummarizer,
    RecursiveSummarization, ToolContext, Trigger,
};
use agent_session::{
    Clock, DefaultSessionService, ManualClock, Message, Owner, ResetPolicy, ResolveRequest,
    SessionEvent, SessionService, ToolCall,
};
use anyhow::Result;
use serde_json::{json, Value};

use crate::output::event_line;
use crate::store;

fn step(out: &mut dyn Write, title: &str) -> std::io::Result<()> {
    writeln!(out, "\n== {title}")
}

/// A state value for the story (`null` if absent).
fn state<'a>(state: &'a serde_json::Map<String, Value>, key: &str) -> &'a Value {
    state.get(key).unwrap_or(&Value::Null)
}

pub(crate) async fn run(url: &str, out: &mut dyn Write) -> Result<()> {
    let clock = Arc::new(ManualClock::new());
    let repo = store::open_embedded(url, clock.clone()).await?;
    let service = DefaultSessionService::new(repo.clone()).with_clock(clock.clone());
    let owner = Owner::new("demo", "ada");
    let key = format!("demo:{}", uuid::Uuid::new_v4().simple());
    let policy = ResetPolicy::never().idle(chrono::Duration::minutes(30));

    step(out, "1. resolve a session by key")?;
    let resolved = service
        .resolve(
            &ResolveRequest::new(&owner.app, &owner.user_id, &key),
            &policy,
        )
        .await?;
    let id = resolved.session.id.clone();
    writeln!(out, "key {key} → session {id} (new: {})", resolved.is_new)?;

    step(
        out,
        "2. a multi-turn conversation with tool calls, a sub-agent and state",
    )?;
    let run = |inv: &str, events: Vec<SessionEvent>| {
        events
            .into_iter()
            .map(|mut e| {
                e.invocation_id = Some(inv.to_owned());
                e.timestamp = clock.now();
                e
            })
            .collect::<Vec<_>>()
    };
    let weather = ToolCall::new("call_w1", "get_weather", &json!({"city": "Lisbon"}));
    let turns = vec![
        run(
            "inv-1",
            vec![
                SessionEvent::builder(Message::user(
                    "Hi! I'm Ada. My locker code is 4711, please remember it.",
                ))
                .state("user:name", "Ada")
                .build()?,
                SessionEvent::new(Message::assistant(
                    "Nice to meet you, Ada. I'll remember locker code 4711.",
                )),
            ],
        ),
        run(
            "inv-2",
            vec![
                SessionEvent::new(Message::user("What's the weather in Lisbon?")),
                SessionEvent::new(Message::assistant_tool_calls("", vec![weather])),
                SessionEvent::new(Message::tool_result(
                    "call_w1",
                    "get_weather",
                    "{\"temp_c\": 24, \"sky\": \"clear\"}",
                )),
                SessionEvent::new(Message::assistant("24°C and clear skies in Lisbon.")),
            ],
        ),
        run(
            "inv-3",
            vec![
                SessionEvent::new(Message::user("Plan a day trip from Lisbon for me.")),
                SessionEvent::builder(Message::user("Find three day trips from Lisbon by train."))
                    .branch("planner.researcher")
                    .author("researcher")
                    .build()?,
                SessionEvent::builder(Message::assistant(
                    "Sintra (40 min), Cascais (35 min), Évora (1h30).",
                ))
                .branch("planner.researcher")
                .author("researcher")
                .build()?,
                SessionEvent::builder(Message::assistant(
                    "Go to Sintra: 40 minutes by train, palaces and forest walks.",
                ))
                .state("trip", "Sintra")
                .build()?,
            ],
        ),
        run(
            "inv-4",
            vec![
                SessionEvent::new(Message::user("Great, and what should I pack?")),
                SessionEvent::new(Message::assistant(
                    "Comfortable shoes, water, a light jacket for the hills.",
                )),
            ],
        ),
    ];
    for events in turns {
        service.append_events(&owner, &id, events).await?;
        clock.advance(chrono::Duration::minutes(2));
    }
    for e in service
        .events(
            &owner,
            &id,
            &agent_session::EventFilter::archive().page(0, 100),
        )
        .await?
        .items
    {
        writeln!(out, "{}", event_line(&e))?;
    }
    let s = service.get(&owner, &id).await?;
    writeln!(
        out,
        "state: {}   events: {}   context tokens: {}   version: {}",
        serde_json::Value::Object(s.state.clone()),
        s.event_count,
        s.context_tokens,
        s.version
    )?;

    step(out, "3. auto-compaction fires after an append")?;
    let compaction = CompactionPolicy::new(
        Trigger::TokenCount(120),
        Arc::new(RecursiveSummarization::new(
            2,
            Arc::new(ExtractiveSummarizer::new()),
        )),
    );
    let compacting = DefaultSessionService::new(repo.clone())
        .with_clock(clock.clone())
        .with_append_hook(Arc::new(compaction.clone()));
    let before = service.get(&owner, &id).await?;
    let before_events = service
        .events(
            &owner,
            &id,
            &agent_session::EventFilter::context().page(0, 100),
        )
        .await?
        .items
        .len()
        + 1;
    compacting
        .append_message(
            &owner,
            &id,
            Message::user("Thanks! One more thing: book me a train ticket."),
        )
        .await?;
    let after = service.get(&owner, &id).await?;
    let ctx = service
        .events(
            &owner,
            &id,
            &agent_session::EventFilter::context().page(0, 100),
        )
        .await?
        .items;
    writeln!(
        out,
        "trigger TokenCount(120) fired on the next append: context {} → {} events, {} → {} tokens; the archive keeps all {} events",
        before_events,
        ctx.len(),
        before.context_tokens,
        after.context_tokens,
        after.event_count
    )?;

    step(out, "4. the summary turn now opens the context")?;
    for e in &ctx {
        writeln!(out, "{}", event_line(e))?;
    }

    step(
        out,
        "5. recall: conversation_search finds a fact compacted out of the context",
    )?;
    let tools_service: Arc<dyn SessionService> =
        Arc::new(DefaultSessionService::new(repo.clone()).with_clock(clock.clone()));
    let search = ConversationSearch::new(tools_service);
    let ctx_tool = ToolContext {
        owner: owner.clone(),
        session_id: id.to_string(),
    };
    let in_context = ctx
        .iter()
        .any(|e| !e.is_synthetic() && e.message.text().contains("4711"));
    writeln!(out, "\"4711\" in the context verbatim: {in_context}")?;
    writeln!(
        out,
        "conversation_search(query=\"locker code\") →\n{}",
        search
            .call(
                &ctx_tool,
                &json!({"innerThought": "the user asks about the locker", "query": "locker code"})
            )
            .await?
    )?;

    step(out, "6. rewind a bad run")?;
    let bad = vec![
        SessionEvent::builder(Message::user("Change my trip to the moon."))
            .invocation_id("inv-bad")
            .state("trip", "Moon")
            .build()?,
        SessionEvent::builder(Message::assistant("Booked: one-way to the Moon."))
            .invocation_id("inv-bad")
            .build()?,
    ];
    service.append_events(&owner, &id, bad).await?;
    writeln!(
        out,
        "after the bad run, trip = {}",
        state(&service.get(&owner, &id).await?.state, "trip")
    )?;
    let rewound = service.rewind(&owner, &id, "inv-bad").await?;
    writeln!(
        out,
        "rewind(before inv-bad): trip = {}, events: {}",
        state(&rewound.state, "trip"),
        rewound.event_count
    )?;

    step(out, "7. an idle reset through resolve")?;
    clock.advance(chrono::Duration::hours(2));
    let next = service
        .resolve(
            &ResolveRequest::new(&owner.app, &owner.user_id, &key),
            &policy,
        )
        .await?;
    let old = repo.get(&id).await?;
    writeln!(
        out,
        "2 hours later (idle timeout 30 min): resolve → session {} (new: {}); the old one is {} and still searchable",
        next.session.id, next.is_new, old.status
    )?;
    writeln!(
        out,
        "user-scope state carried over: user:name = {}",
        state(&next.session.state, "user:name")
    )?;

    if let CompactionOutcome::NotNeeded { .. } =
        compaction.compact_now(&*repo, &next.session.id).await?
    {
        writeln!(out, "\n(the new session is empty: nothing to compact)")?;
    }
    writeln!(
        out,
        "\nstore: {} at {}   try: agent-session show {id} --view archive",
        repo.capabilities().backend,
        agent_session_cli::store_url::redact(url)
    )?;
    Ok(())
}
