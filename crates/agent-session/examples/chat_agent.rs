//! A terminal chat agent with durable memory: type a line, get an answer.
//!
//! ```sh
//! OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-... \
//!   cargo run --example chat_agent -- --model gpt-4o-mini --key cli:main
//! ```
//!
//! The session lives in SQLite (`--store`, default `sqlite://chat-agent.db`)
//! and is resumed by `--key` across runs (a new one starts after a day of
//! idleness). The model can call `conversation_search` to look up anything
//! compaction moved out of its context.
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::sync::Arc;

use agent_session::compaction::{
    CompactionPolicy, ConversationSearch, ExtractiveSummarizer, RecursiveSummarization,
    SessionMemory, ToolContext, Trigger,
};
use agent_session::{
    DefaultSessionService, Message, Owner, ResetPolicy, ResolveRequest, SessionService,
};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

const SYSTEM: &str = "You are a helpful assistant with a long memory. When the user refers to \
something you do not see in the conversation, call conversation_search.";

struct Args {
    model: String,
    store: String,
    user: String,
    key: String,
}

fn args() -> Args {
    let mut a = Args {
        model: "gpt-4o-mini".into(),
        store: "sqlite://chat-agent.db".into(),
        user: "me".into(),
        key: "cli:main".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        match flag.as_str() {
            "--model" => a.model = value,
            "--store" => a.store = value,
            "--user" => a.user = value,
            "--key" => a.key = value,
            other => {
                eprintln!("unknown option {other}; options: --model --store --user --key");
                std::process::exit(2);
            }
        }
    }
    a
}

/// One chat-completions call; returns the assistant message.
async fn complete(
    http: &reqwest::Client,
    model: &str,
    messages: &[Message],
    tools: &[Value],
) -> Result<Message, String> {
    let base =
        std::env::var("OPENAI_BASE_URL").unwrap_or_else(|_| "https://api.openai.com/v1".into());
    let mut req = http
        .post(format!("{}/chat/completions", base.trim_end_matches('/')))
        .json(&json!({"model": model, "messages": messages.iter().map(Message::to_openai).collect::<Vec<_>>(), "tools": tools}));
    if let Ok(key) = std::env::var("OPENAI_API_KEY") {
        req = req.bearer_auth(key);
    }
    let resp = req.send().await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let body: Value = resp.json().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("HTTP {status}: {}", body["error"]["message"]));
    }
    serde_json::from_value(body["choices"][0]["message"].clone()).map_err(|e| e.to_string())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = args();
    let store = agent_session::open(&args.store).await?;
    let service: Arc<dyn SessionService> = Arc::new(DefaultSessionService::new(store));
    let owner = Owner::parse("chat-agent", &args.user)?;
    let resolved = service
        .resolve(
            &ResolveRequest::for_owner(&owner, &args.key),
            &ResetPolicy::never().idle(chrono::Duration::hours(24)),
        )
        .await?;
    let id = resolved.session.id;
    println!(
        "session {id} ({})",
        if resolved.is_new { "new" } else { "resumed" }
    );

    let policy = CompactionPolicy::new(
        Trigger::context_fraction(16_000),
        Arc::new(RecursiveSummarization::new(
            4,
            Arc::new(ExtractiveSummarizer::new()),
        )),
    );
    let memory = SessionMemory::new(service.clone()).with_compaction(policy);
    let search = ConversationSearch::new(service.clone());
    let tools = [search.definition()];
    let ctx = ToolContext {
        owner: owner.clone(),
        session_id: id.clone(),
    };
    let http = reqwest::Client::new();

    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        memory.record(&owner, &id, Message::user(line)).await?;
        for _round in 0..5 {
            let messages = memory.prepare(&owner, &id, SYSTEM).await?;
            let answer = match complete(&http, &args.model, &messages, &tools).await {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("model call failed: {e}");
                    break;
                }
            };
            memory.record(&owner, &id, answer.clone()).await?;
            if answer.tool_calls().is_empty() {
                println!("assistant> {}", answer.text());
                break;
            }
            for call in answer.tool_calls() {
                let result = if call.name == ConversationSearch::NAME {
                    let arguments = call.arguments_json().unwrap_or(Value::Null);
                    search
                        .call(&ctx, &arguments)
                        .await
                        .unwrap_or_else(|e| format!("error: {e}"))
                } else {
                    format!("error: unknown tool {}", call.name)
                };
                memory
                    .record(
                        &owner,
                        &id,
                        Message::tool_result(&call.id, &call.name, result),
                    )
                    .await?;
            }
        }
    }
    Ok(())
}
