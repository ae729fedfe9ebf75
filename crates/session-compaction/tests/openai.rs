//! The OpenAI-compatible summarizer against a local server that answers like the real API.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use serde_json::{json, Value};
use session_compaction::{
    CompactionError, OpenAiSummarizer, Summarizer, SummaryPrompts, SummaryRequest,
};
use session_core::{Message, SessionEvent};
use wiremock::matchers::{bearer_token, body_partial_json, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

fn completion(content: &str) -> Value {
    // Shape of a real chat.completion object.
    json!({
        "id": "chatcmpl-123",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}
    })
}

fn error_body(message: &str, kind: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
}

fn events() -> Vec<SessionEvent> {
    vec![
        SessionEvent::new(Message::user("Book a table for two at 7pm.")),
        SessionEvent::new(Message::assistant("Booked at Luigi's for 19:00.")),
    ]
}

#[tokio::test]
async fn sends_the_chat_completions_request_and_reads_the_answer() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(bearer_token("sk-test"))
        .and(body_partial_json(
            json!({"model": "gpt-4o-mini", "temperature": 0.3, "max_tokens": 256}),
        ))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(completion("A table for two at 19:00.")),
        )
        .expect(1)
        .mount(&server)
        .await;
    let s = OpenAiSummarizer::new(format!("{}/v1/", server.uri()), "gpt-4o-mini")
        .with_api_key("sk-test")
        .with_max_tokens(256);
    let events = events();
    let prompts = SummaryPrompts::recursive();
    let req = SummaryRequest {
        system_prompt: &prompts.system,
        user_prompt: prompts.render(None, &events),
        previous_summary: None,
        events: &events,
        schema: None,
    };
    assert_eq!(
        s.summarize(&req).await.unwrap(),
        "A table for two at 19:00."
    );
    let sent: Value = server.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    assert_eq!(sent["messages"][0]["role"], "system");
    assert!(sent["messages"][1]["content"]
        .as_str()
        .unwrap()
        .contains("user: Book a table for two at 7pm."));
    assert!(sent.get("response_format").is_none());
    assert!(
        !format!("{s:?}").contains("sk-test"),
        "the key never shows in Debug"
    );
}

#[tokio::test]
async fn structured_requests_carry_the_schema() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("{}")))
        .mount(&server)
        .await;
    let s = OpenAiSummarizer::new(server.uri(), "m");
    let schema = session_compaction::default_summary_schema();
    let req = SummaryRequest {
        system_prompt: "sys",
        user_prompt: "u".into(),
        previous_summary: None,
        events: &[],
        schema: Some(&schema),
    };
    s.summarize(&req).await.unwrap();
    let sent: Value = server.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    assert_eq!(sent["response_format"]["type"], "json_schema");
    assert_eq!(sent["response_format"]["json_schema"]["schema"], schema);
}

#[tokio::test]
async fn retries_429_and_5xx_then_succeeds() {
    let server = MockServer::start().await;
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let c = calls.clone();
    Mock::given(method("POST"))
        .respond_with(move |_: &Request| {
            match c.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
                0 => ResponseTemplate::new(429)
                    .set_body_json(error_body("Rate limit reached", "requests")),
                1 => ResponseTemplate::new(503)
                    .set_body_json(error_body("The server is overloaded", "server_error")),
                _ => ResponseTemplate::new(200).set_body_json(completion("ok")),
            }
        })
        .mount(&server)
        .await;
    let s = OpenAiSummarizer::new(server.uri(), "m").with_retries(3, Duration::from_millis(5));
    let req = SummaryRequest {
        system_prompt: "s",
        user_prompt: "u".into(),
        previous_summary: None,
        events: &[],
        schema: None,
    };
    assert_eq!(s.summarize(&req).await.unwrap(), "ok");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[tokio::test]
async fn client_errors_are_not_retried_and_gives_up_after_retries() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/bad/chat/completions"))
        .respond_with(ResponseTemplate::new(400).set_body_json(error_body(
            "This model's maximum context length is 8192 tokens.",
            "invalid_request_error",
        )))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/down/chat/completions"))
        .respond_with(ResponseTemplate::new(500).set_body_json(error_body("boom", "server_error")))
        .expect(3)
        .mount(&server)
        .await;
    let req = SummaryRequest {
        system_prompt: "s",
        user_prompt: "u".into(),
        previous_summary: None,
        events: &[],
        schema: None,
    };
    let bad = OpenAiSummarizer::new(format!("{}/bad", server.uri()), "m")
        .with_retries(3, Duration::from_millis(1));
    let err = bad.summarize(&req).await.unwrap_err();
    assert!(
        matches!(&err, CompactionError::Summarizer { what, status: Some(400), .. } if what.contains("maximum context length")),
        "{err}"
    );
    let down = OpenAiSummarizer::new(format!("{}/down", server.uri()), "m")
        .with_retries(2, Duration::from_millis(1));
    let err = down.summarize(&req).await.unwrap_err();
    assert!(
        err.to_string().contains("gave up after 3 attempts"),
        "{err}"
    );
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(completion("late"))
                .set_delay(Duration::from_secs(5)),
        )
        .mount(&server)
        .await;
    let s = OpenAiSummarizer::new(server.uri(), "m")
        .with_timeout(Duration::from_millis(100))
        .with_retries(1, Duration::from_millis(1));
    let req = SummaryRequest {
        system_prompt: "s",
        user_prompt: "u".into(),
        previous_summary: None,
        events: &[],
        schema: None,
    };
    let err = s.summarize(&req).await.unwrap_err();
    assert!(err.to_string().contains("gave up"), "{err}");
}

/// A session of alice with `turns` question/answer turns, in memory.
async fn session_of(
    turns: usize,
) -> (
    std::sync::Arc<dyn session_core::SessionRepository>,
    session_core::SessionId,
) {
    use session_core::{InMemoryRepository, NewSession, SessionRepository};
    let repo: std::sync::Arc<dyn SessionRepository> = InMemoryRepository::new().shared();
    let s = repo
        .create(NewSession::new("app", "alice", chrono::Utc::now()).unwrap())
        .await
        .unwrap();
    let mut batch = Vec::new();
    for i in 0..turns {
        batch.push(SessionEvent::new(Message::user(format!("question {i}"))));
        batch.push(SessionEvent::new(Message::assistant(format!("answer {i}"))));
    }
    repo.append(&s.id, batch).await.unwrap();
    (repo, s.id)
}

#[tokio::test]
async fn garbage_empty_or_off_schema_answers_leave_the_context_unchanged() {
    use std::sync::Arc;

    use session_compaction::{
        CompactionPolicy, RecursiveSummarization, StructuredSummary, Trigger,
    };
    use session_core::{EventView, SessionRepositoryExt};

    let answers = [
        (
            "not JSON at all",
            ResponseTemplate::new(200).set_body_string("<html>oops</html>"),
            false,
        ),
        (
            "no choices",
            ResponseTemplate::new(200).set_body_json(json!({"object": "chat.completion"})),
            false,
        ),
        (
            "an empty summary",
            ResponseTemplate::new(200).set_body_json(completion("  ")),
            false,
        ),
        (
            "JSON that breaks the schema",
            ResponseTemplate::new(200).set_body_json(completion(r#"{"title": 3}"#)),
            true,
        ),
        (
            "text where JSON is due",
            ResponseTemplate::new(200).set_body_json(completion("Here is the summary")),
            true,
        ),
    ];
    for (what, answer, structured) in answers {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(answer)
            .mount(&server)
            .await;
        let summarizer = Arc::new(
            OpenAiSummarizer::new(server.uri(), "m").with_retries(0, Duration::from_millis(1)),
        );
        let strategy: Arc<dyn session_compaction::CompactionStrategy> = if structured {
            Arc::new(StructuredSummary::new(1, summarizer))
        } else {
            Arc::new(RecursiveSummarization::new(1, summarizer))
        };
        let policy = CompactionPolicy::new(Trigger::turn_count(1).unwrap(), strategy);
        let (repo, id) = session_of(4).await;
        let before = repo.all_events(&id, EventView::Context).await.unwrap();
        let version = repo.get(&id).await.unwrap().version;
        let result = policy.compact_now(repo.as_ref(), &id).await;
        assert!(result.is_err(), "{what}: {result:?}");
        let after = repo.all_events(&id, EventView::Context).await.unwrap();
        assert_eq!(before, after, "{what}: the context is unchanged");
        assert_eq!(
            repo.get(&id).await.unwrap().version,
            version,
            "{what}: nothing written"
        );
    }
}
