//! Open Astra's pre-compaction flush: it runs before the summarizer,
//! exactly once per compaction even when a lost compare-and-swap makes the
//! compaction plan again, and the ready-made flush turn is one model call
//! whose only tool is `memory_write`, at the seed's temperature and token
//! limit.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use session_compaction::{
    ChatModel, ChatRequest, CompactionError, CompactionPolicy, MemoryWriter,
    RecursiveSummarization, SessionMemory, Summarizer, SummaryRequest, Trigger, FLUSH_PROMPT,
    MEMORY_WRITE_TOOL,
};
use session_core::{
    CreateSessionRequest, DefaultSessionService, InMemoryRepository, Message, Owner, Session,
    SessionEvent, SessionId, SessionRepository, SessionService, ToolCall,
};

/// What happened, in order.
type Log = Arc<Mutex<Vec<String>>>;

/// What the model was asked: message count, tool names, temperature, max tokens, last message.
type Asked = (usize, Vec<String>, f64, u32, String);

/// A scripted model: answers with two `memory_write` calls and a call of a
/// tool it was not offered; remembers each request.
struct ScriptedModel {
    log: Log,
    requests: Mutex<Vec<Asked>>,
}

#[async_trait]
impl ChatModel for ScriptedModel {
    async fn complete(&self, request: &ChatRequest<'_>) -> Result<Message, CompactionError> {
        self.log.lock().push("flush".to_owned());
        let tools = request
            .tools
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
            .collect();
        let last = request.messages.last().unwrap().text().to_owned();
        self.requests.lock().push((
            request.messages.len(),
            tools,
            request.temperature,
            request.max_tokens,
            last,
        ));
        let write = |id: &str, content: &str| {
            ToolCall::new(
                id,
                MEMORY_WRITE_TOOL,
                &serde_json::json!({ "content": content }),
            )
        };
        Ok(Message::assistant_tool_calls(
            "",
            vec![
                write("w1", "Ada prefers email"),
                ToolCall::new("x", "delete_everything", &serde_json::json!({})),
                write("w2", "Order ORD-7 ships Friday"),
            ],
        ))
    }
}

struct Notes {
    saved: Mutex<Vec<(String, String)>>,
}

#[async_trait]
impl MemoryWriter for Notes {
    async fn write(&self, session: &Session, content: &str) -> Result<(), CompactionError> {
        self.saved
            .lock()
            .push((session.user_id.to_string(), content.to_owned()));
        Ok(())
    }
}

/// Summarizes; the first time, a concurrent write lands first, so the
/// compaction's compare-and-swap is lost and it plans again.
struct RacingSummarizer {
    log: Log,
    repo: Arc<dyn SessionRepository>,
    session: Mutex<Option<SessionId>>,
}

impl std::fmt::Debug for RacingSummarizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RacingSummarizer")
    }
}

#[async_trait]
impl Summarizer for RacingSummarizer {
    async fn summarize(&self, _request: &SummaryRequest<'_>) -> Result<String, CompactionError> {
        let first = {
            let mut log = self.log.lock();
            log.push("summarize".to_owned());
            log.iter().filter(|l| *l == "summarize").count() == 1
        };
        if first {
            let id = self.session.lock().clone().unwrap();
            self.repo
                .append(&id, vec![SessionEvent::new(Message::user("meanwhile"))])
                .await
                .unwrap();
        }
        Ok("summary".to_owned())
    }
}

#[tokio::test]
async fn the_flush_turn_runs_once_before_the_summarizer_even_across_a_lost_race() {
    let log: Log = Arc::default();
    let repo = InMemoryRepository::new().shared();
    let model = Arc::new(ScriptedModel {
        log: log.clone(),
        requests: Mutex::default(),
    });
    let notes = Arc::new(Notes {
        saved: Mutex::default(),
    });
    let summarizer = Arc::new(RacingSummarizer {
        log: log.clone(),
        repo: repo.clone(),
        session: Mutex::default(),
    });
    let policy = CompactionPolicy::new(
        Trigger::TurnCount(100),
        Arc::new(RecursiveSummarization::new(1, summarizer.clone())),
    );
    let service: Arc<dyn SessionService> = Arc::new(DefaultSessionService::new(repo.clone()));
    let memory = SessionMemory::new(service.clone())
        .with_compaction(policy)
        .with_flush_turn(model.clone(), notes.clone());
    let alice = Owner::user("alice").unwrap();
    let s = service
        .create(CreateSessionRequest::builder("alice").build().unwrap())
        .await
        .unwrap();
    *summarizer.session.lock() = Some(s.id.clone());
    for i in 0..3 {
        memory
            .record(
                &alice,
                &s.id,
                Message::user(format!("q{i} {}", "with details ".repeat(10))),
            )
            .await
            .unwrap();
        memory
            .record(
                &alice,
                &s.id,
                Message::assistant(format!("a{i} {}", "with details ".repeat(10))),
            )
            .await
            .unwrap();
    }
    // A model call over the limit: compact now, then call again.
    let calls = Mutex::new(0);
    let outcome = memory
        .call_model(
            &alice,
            &s.id,
            "You are helpful.",
            |_| {
                *calls.lock() += 1;
                async { Err::<(), _>("context_length_exceeded") }
            },
            |_| true,
        )
        .await;
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(*calls.lock(), 2, "called, compacted, called again");
    assert_eq!(*log.lock(), ["flush", "summarize", "summarize"]);
    let asked = model.requests.lock().clone();
    let (messages, tools, temperature, max_tokens, last) = &asked[0];
    assert_eq!(tools, &[MEMORY_WRITE_TOOL.to_owned()], "the only tool");
    assert_eq!((*temperature, *max_tokens), (0.3, 2048));
    assert_eq!(last, FLUSH_PROMPT);
    assert_eq!(*messages, 1 + 6 + 1, "system, the context, the prompt");
    assert_eq!(
        *notes.saved.lock(),
        [
            ("alice".to_owned(), "Ada prefers email".to_owned()),
            ("alice".to_owned(), "Order ORD-7 ships Friday".to_owned())
        ]
    );
    // The re-planned compaction won: the summary is in the context.
    let context = service.messages(&alice, &s.id).await.unwrap();
    assert!(context.iter().any(|m| m.text() == "summary"));
}
