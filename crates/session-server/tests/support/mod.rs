//! What the server tests share: a server on a loopback port, a key file
//! with one key of each kind, and the problem document of a response.
#![allow(dead_code, clippy::unwrap_used)] // each test file uses a part

use reqwest::{header, StatusCode};
use serde_json::Value;
use session_core::{AppName, UserId};
use session_server::{ApiKey, ApiKeys, KeyRole, SessionServer};

pub(crate) struct Server {
    pub(crate) base: String,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub(crate) async fn start(server: SessionServer) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(server.serve(listener, std::future::pending()));
    Server { base, task }
}

/// A key file with one key of each kind; returns the secrets by name.
pub(crate) fn keys() -> (ApiKeys, Vec<(&'static str, String)>) {
    let specs = [
        ("ops", None, KeyRole::Admin, None),
        ("support-admin", Some("support"), KeyRole::Admin, None),
        ("support-agent", Some("support"), KeyRole::Agent, None),
        ("ada-bot", Some("support"), KeyRole::Agent, Some("ada")),
    ];
    let mut lines = String::new();
    let mut secrets = Vec::new();
    for (name, app, role, user) in specs {
        let key = ApiKey {
            name: name.to_owned(),
            app: app.map(|a| AppName::new(a).unwrap()),
            role,
            user: user.map(|u| UserId::new(u).unwrap()),
        };
        let (secret, line) = ApiKeys::generate(&key).unwrap();
        lines.push_str(&line);
        lines.push('\n');
        secrets.push((name, secret));
    }
    (ApiKeys::parse(&lines).unwrap(), secrets)
}

pub(crate) fn secret<'a>(secrets: &'a [(&str, String)], name: &str) -> &'a str {
    &secrets.iter().find(|(n, _)| *n == name).unwrap().1
}

pub(crate) async fn problem(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    let kind = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(kind.as_deref(), Some("application/problem+json"));
    (status, response.json().await.unwrap())
}

/// Sends `request` and reads its JSON answer, whatever the status.
pub(crate) async fn json_of(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

/// Creates a session through the owner route `sessions` (with `body`) and
/// returns the session's URL.
pub(crate) async fn new_session(http: &reqwest::Client, sessions: &str, body: Value) -> String {
    let created = json_of(http.post(sessions).json(&body)).await;
    format!("{sessions}/{}", created["id"].as_str().unwrap())
}
