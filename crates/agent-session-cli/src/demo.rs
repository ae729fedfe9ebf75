//! `demo`: a scripted agent conversation on the embedded store, offline, in seconds.

use std::io::Write;
use std::sync::Arc;

use agent_session::compaction::{
    CompactionPolicy, ConversationSearch, ExtractiveSummarizer, RecursiveSummarization,
    ToolContext, Trigger,
};
use agent_session::{
    Clock, DefaultSessionService, EventFilter, InvocationId, ManualClock, Message, Owner,
    ResetPolicy, ResolveRequest, RewindTo, SessionEvent, SessionId, SessionRepository,
    SessionService, ToolCall,
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

/// The demo's compaction: past 120 context tokens, all but the last two
/// turns become a summary turn (written offline).
fn compaction() -> CompactionPolicy {
    CompactionPolicy::new(
        Trigger::TokenCount(120),
        Arc::new(RecursiveSummarization::new(
            2,
            Arc::new(ExtractiveSummarizer::new()),
        )),
    )
}

/// The demo's store, clock, service and the session it tells the story of.
struct Story {
    clock: Arc<ManualClock>,
    repo: Arc<dyn SessionRepository>,
    service: Arc<dyn SessionService>,
    owner: Owner,
    key: String,
    policy: ResetPolicy,
    id: SessionId,
}

pub(crate) async fn run(url: &str, out: &mut dyn Write) -> Result<()> {
    let clock = Arc::new(ManualClock::new());
    let repo = store::open_embedded(url, clock.clone()).await?;
    let service: Arc<dyn SessionService> =
        Arc::new(DefaultSessionService::new(repo.clone()).with_clock(clock.clone()));
    let owner = Owner::parse("demo", "ada")?;
    let key = format!("demo:{}", uuid::Uuid::new_v4().simple());
    let policy = ResetPolicy::never().idle(chrono::Duration::minutes(30));

    step(out, "1. resolve a session by key")?;
    let resolved = service
        .resolve(&ResolveRequest::for_owner(&owner, &key), &policy)
        .await?;
    let id = resolved.session.id.clone();
    writeln!(out, "key {key} → session {id} (new: {})", resolved.is_new)?;
    let story = Story {
        clock,
        repo,
        service,
        owner,
        key,
        policy,
        id,
    };
    story.conversation(out).await?;
    let context = story.auto_compaction(out).await?;
    story.recall(&context, out).await?;
    story.rewind(out).await?;
    story.idle_reset(url, out).await
}

impl Story {
    /// Step 2: four turns with tool calls, a sub-agent and state.
    async fn conversation(&self, out: &mut dyn Write) -> Result<()> {
        step(
            out,
            "2. a multi-turn conversation with tool calls, a sub-agent and state",
        )?;
        let (owner, id) = (&self.owner, &self.id);
        for events in turns(self.clock.now())? {
            self.service.append_events(owner, id, events).await?;
            self.clock.advance(chrono::Duration::minutes(2));
        }
        let archive = EventFilter::archive().page(0, 100);
        for e in self.service.events(owner, id, &archive).await?.items {
            writeln!(out, "{}", event_line(&e))?;
        }
        let s = self.service.get(owner, id).await?;
        writeln!(
            out,
            "state: {}   events: {}   context tokens: {}   version: {}",
            Value::Object(s.state.clone()),
            s.event_count,
            s.context_tokens,
            s.version
        )?;
        Ok(())
    }

    /// Steps 3 and 4: a compaction policy fires after an append; the
    /// context it leaves (returned).
    async fn auto_compaction(&self, out: &mut dyn Write) -> Result<Vec<SessionEvent>> {
        step(out, "3. auto-compaction fires after an append")?;
        let (owner, id) = (&self.owner, &self.id);
        let compacting = DefaultSessionService::new(self.repo.clone())
            .with_clock(self.clock.clone())
            .with_append_hook(Arc::new(compaction()));
        let context = EventFilter::context().page(0, 100);
        let before = self.service.get(owner, id).await?;
        let before_events = self.service.events(owner, id, &context).await?.items.len() + 1;
        let last = Message::user("Thanks! One more thing: book me a train ticket.");
        // The context the trigger saw: the one before, plus this message.
        let before_tokens = before.context_tokens.saturating_add(u64::from(
            agent_session::TokenEstimator::estimate_message(
                &agent_session::HeuristicEstimator,
                &last,
            ),
        ));
        compacting.append_message(owner, id, last).await?;
        let after = self.service.get(owner, id).await?;
        let ctx = self.service.events(owner, id, &context).await?.items;
        writeln!(
            out,
            "trigger TokenCount(120) fired on the next append: context {} → {} events, {} → {} tokens; the archive keeps all {} events",
            before_events,
            ctx.len(),
            before_tokens,
            after.context_tokens,
            after.event_count
        )?;

        step(out, "4. the summary turn now opens the context")?;
        for e in &ctx {
            writeln!(out, "{}", event_line(e))?;
        }
        Ok(ctx)
    }

    /// Step 5: `conversation_search` finds what left the context.
    async fn recall(&self, context: &[SessionEvent], out: &mut dyn Write) -> Result<()> {
        step(
            out,
            "5. recall: conversation_search finds a fact compacted out of the context",
        )?;
        let search = ConversationSearch::new(self.service.clone());
        let ctx_tool = ToolContext {
            owner: self.owner.clone(),
            session_id: self.id.clone(),
        };
        let in_context = context
            .iter()
            .any(|e| !e.is_synthetic() && e.message.text().contains("4711"));
        writeln!(out, "\"4711\" in the context verbatim: {in_context}")?;
        let call =
            json!({"innerThought": "the user asks about the locker", "query": "locker code"});
        writeln!(
            out,
            "conversation_search(query=\"locker code\") →\n{}",
            search.call(&ctx_tool, &call).await?
        )?;
        Ok(())
    }

    /// Step 6: a bad run and its rewind, state replayed.
    async fn rewind(&self, out: &mut dyn Write) -> Result<()> {
        step(out, "6. rewind a bad run")?;
        let (owner, id) = (&self.owner, &self.id);
        let bad = vec![
            SessionEvent::builder(Message::user("Change my trip to the moon."))
                .invocation_id("inv-bad")
                .state("trip", "Moon")
                .build()?,
            SessionEvent::builder(Message::assistant("Booked: one-way to the Moon."))
                .invocation_id("inv-bad")
                .build()?,
        ];
        self.service.append_events(owner, id, bad).await?;
        writeln!(
            out,
            "after the bad run, trip = {}",
            state(&self.service.get(owner, id).await?.state, "trip")
        )?;
        let to = RewindTo::Invocation(InvocationId::new("inv-bad")?);
        let rewound = self.service.rewind(owner, id, &to).await?;
        writeln!(
            out,
            "rewind(before inv-bad): trip = {}, events: {}",
            state(&rewound.session.state, "trip"),
            rewound.session.event_count
        )?;
        Ok(())
    }

    /// Step 7: two idle hours later, `resolve` starts a new session.
    async fn idle_reset(&self, url: &str, out: &mut dyn Write) -> Result<()> {
        step(out, "7. an idle reset through resolve")?;
        self.clock.advance(chrono::Duration::hours(2));
        let request = ResolveRequest::for_owner(&self.owner, &self.key);
        let next = self.service.resolve(&request, &self.policy).await?;
        let old = self.service.get(&self.owner, &self.id).await?;
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
        let done = self
            .service
            .compact(&self.owner, &next.session.id, &compaction())
            .await?;
        if !done.compacted {
            writeln!(out, "\n(the new session is empty: nothing to compact)")?;
        }
        writeln!(
            out,
            "\nstore: {} at {}   try: agent-session show {} --view archive",
            self.repo.capabilities().backend,
            agent_session_cli::store_url::redact(url),
            self.id
        )?;
        Ok(())
    }
}

/// The four turns of step 2, each event with its invocation id, written at `now`.
fn turns(now: chrono::DateTime<chrono::Utc>) -> Result<Vec<Vec<SessionEvent>>> {
    let run = |inv: &str, events: Vec<SessionEvent>| {
        events
            .into_iter()
            .map(|mut e| {
                e.invocation_id = Some(inv.to_owned());
                e.timestamp = now;
                e
            })
            .collect::<Vec<_>>()
    };
    let weather = ToolCall::new("call_w1", "get_weather", &json!({"city": "Lisbon"}));
    Ok(vec![
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
    ])
}
