//! Drives the example chat agent end to end against a local server that
//! speaks the chat-completions protocol, across two runs of the process.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::process::{Command, Stdio};

use agent_session::{EventView, Message, SessionRepositoryExt};
use serde_json::{json, Value};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

fn example_binary() -> std::path::PathBuf {
    let deps = std::env::current_exe().unwrap();
    let dir = deps.parent().unwrap().parent().unwrap();
    let bin = dir.join("examples").join("chat_agent");
    assert!(
        bin.exists(),
        "{} is missing: run the whole package's tests (`cargo test -p agent-session`), which builds the examples",
        bin.display()
    );
    bin
}

fn answer(message: &Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "test",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]
    }))
}

/// The fake model: remembers nothing; asked about the order it calls
/// `conversation_search`, and answers from the tool result.
fn model(req: &Request) -> ResponseTemplate {
    let body: Value = req.body_json().unwrap();
    let messages = body["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(body["tools"][0]["function"]["name"], "conversation_search");
    if last["role"] == "tool" {
        let hits: Value = serde_json::from_str(last["content"].as_str().unwrap()).unwrap();
        let text = hits[0]["text"].as_str().unwrap();
        return answer(&json!({"role": "assistant", "content": format!("You told me: {text}")}));
    }
    if last["content"]
        .as_str()
        .unwrap_or_default()
        .contains("What was my order")
    {
        return answer(
            &json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "conversation_search", "arguments": "{\"innerThought\":\"look it up\",\"query\":\"order number is\"}"}
            }]}),
        );
    }
    answer(&json!({"role": "assistant", "content": "Noted."}))
}

fn run(server: &str, store: &str, input: &str) -> String {
    let mut child = Command::new(example_binary())
        .args([
            "--model", "test", "--store", store, "--user", "ada", "--key", "cli:test",
        ])
        .env("OPENAI_BASE_URL", server)
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_example_agent_stores_its_run_and_recalls_across_processes() {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path("/v1/chat/completions"))
        .respond_with(model)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("agent.db").display());
    let base = format!("{}/v1", server.uri());

    let first = run(&base, &store, "My order number is 5512.\n");
    assert!(
        first.contains("(new)") && first.contains("assistant> Noted."),
        "{first}"
    );
    let second = run(&base, &store, "What was my order number?\n");
    assert!(second.contains("(resumed)"), "{second}");
    assert!(
        second.contains("assistant> You told me: My order number is 5512."),
        "{second}"
    );

    let repo = agent_session::open(&store).await.unwrap();
    let sessions = repo
        .list(
            &agent_session::SessionQuery::new()
                .app("chat-agent")
                .user("ada"),
        )
        .await
        .unwrap();
    assert_eq!(
        sessions.items.len(),
        1,
        "the second run resumed the same session"
    );
    let archive = repo
        .all_events(&sessions.items[0].id, EventView::Archive)
        .await
        .unwrap();
    let roles: Vec<&str> = archive.iter().map(|e| e.role().as_str()).collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "user",
            "assistant",
            "tool",
            "assistant"
        ]
    );
    assert_eq!(
        archive[3].message.tool_calls()[0].name,
        "conversation_search"
    );
    let Message::Tool {
        tool_call_id,
        content,
        ..
    } = &archive[4].message
    else {
        panic!()
    };
    assert_eq!(tool_call_id, "call_1");
    let hits: Value = serde_json::from_str(&content.text).unwrap();
    assert_eq!(hits[0]["type"], "user");
    assert_eq!(hits[0]["text"], "My order number is 5512.");
}
