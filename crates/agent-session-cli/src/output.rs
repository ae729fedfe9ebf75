//! What the command line prints: events as lines or JSON, errors with their causes.

use std::fmt::Display;
use std::io::{self, IsTerminal, Write};

use agent_session::{Message, SessionEvent};
use serde_json::{json, Value};

/// An error and its causes on one line, each cause once: a cause whose text
/// the cause before it already holds (a driver's `Display` that shows its
/// own source) is not repeated.
pub(crate) fn describe(e: &anyhow::Error) -> String {
    let mut line = String::new();
    let mut previous = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if text.is_empty() || previous.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
        previous = text;
    }
    line
}

/// The exit code of a failed command, by the kind of the store error in
/// its chain (documented in `docs/cli.md`): 2 bad input, 3 not found, 4
/// conflict or already exists, 5 unavailable (retry later), 6 expired, 7
/// unsupported by the store, 8 the session has ended, 9 a quota of the
/// store is exceeded, 10 encrypted data does not open with the keyring, 11
/// a served store refused the API key; 1 anything else.
pub(crate) fn exit_code(e: &anyhow::Error) -> u8 {
    use agent_session::{ErrorKind, SessionError};
    if let Some(kind) = e
        .chain()
        .find_map(|c| c.downcast_ref::<SessionError>())
        .map(SessionError::kind)
    {
        return match kind {
            ErrorKind::InvalidInput => 2,
            ErrorKind::NotFound => 3,
            ErrorKind::Conflict | ErrorKind::AlreadyExists => 4,
            ErrorKind::Unavailable => 5,
            ErrorKind::Expired => 6,
            ErrorKind::Unsupported => 7,
            ErrorKind::SessionEnded => 8,
            ErrorKind::QuotaExceeded => 9,
            ErrorKind::Encryption => 10,
            ErrorKind::Unauthorized => 11,
            _ => 1,
        };
    }
    if e.chain().any(|c| {
        c.downcast_ref::<agent_session_cli::args::ArgError>()
            .is_some()
    }) {
        return 2;
    }
    1
}

/// A one-line hint for a failure with an obvious next step.
pub(crate) fn hint(e: &anyhow::Error) -> Option<&'static str> {
    let text = describe(e).to_lowercase();
    match exit_code(e) {
        5 if text.contains("refused") || text.contains("connect") || text.contains("dns") => Some(
            "hint: nothing answers at that address: start the server, or check the host and port in --store",
        ),
        5 if text.contains("disk") || text.contains("space") => {
            Some("hint: free some disk space, then run the command again")
        }
        5 => Some("hint: the store is busy or unreachable; running the command again may succeed"),
        8 => Some("hint: `agent-session reopen <session>` makes an ended session writable again"),
        3 if text.contains("session") => {
            Some("hint: `agent-session list` shows the sessions in this store")
        }
        2 if text.contains("store url") => Some(
            "hint: a store URL looks like sqlite://sessions.db, memory://, fs:///var/sessions, redis://127.0.0.1:6379, postgres://user@host/db or es+http://host:9200",
        ),
        _ => None,
    }
}

/// A progress bar of `len` steps on stderr when it is a terminal (hidden
/// otherwise, so pipes and tests see nothing), drawn with `template`
/// (indicatif's syntax; `{msg}` is `what`).
pub(crate) fn progress_bar(len: usize, what: &str, template: &str) -> indicatif::ProgressBar {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    let bar = ProgressBar::with_draw_target(
        Some(u64::try_from(len).unwrap_or(u64::MAX)),
        if io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        },
    );
    bar.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(what.to_owned());
    bar
}

/// One line on stderr; a closed stderr is not worth a panic.
pub(crate) fn report(line: impl Display) {
    let _ = writeln!(io::stderr().lock(), "{line}");
}

/// One event as the `show --json` object.
pub(crate) fn event_json(e: &SessionEvent) -> Value {
    json!({
        "seq": e.seq,
        "timestamp": e.timestamp.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        "role": e.role().as_str(),
        "text": e.message.text(),
        "tool_calls": e.message.tool_calls().iter().map(|c| json!({"id": c.id, "name": c.name, "arguments": c.arguments})).collect::<Vec<_>>(),
        "tool_call_id": match &e.message { Message::Tool { tool_call_id, .. } => Some(tool_call_id), _ => None },
        "tool_name": match &e.message { Message::Tool { name, .. } => name.as_deref(), _ => None },
        "branch": e.branch,
        "invocation": e.invocation_id,
        "synthetic": e.is_synthetic(),
        "left_context": e.left_context.map(|x| json!({
            "at": x.at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
            "version": x.version,
        })),
    })
}

/// One event as a human-readable line.
pub(crate) fn event_line(e: &SessionEvent) -> String {
    let mut who = e.role().to_string();
    if let Some(b) = &e.branch {
        who.push_str(&format!(" [{b}]"));
    }
    if e.is_synthetic() {
        who.push_str(" (summary)");
    }
    let mut text = e.message.text().replace('\n', " ");
    if let Message::Tool {
        tool_call_id, name, ..
    } = &e.message
    {
        // A result: ← the tool [its call]: what it returned.
        let tool = name.as_deref().unwrap_or("result");
        text = format!("← {tool} [{tool_call_id}]: {text}");
    }
    for c in e.message.tool_calls() {
        // A call: → the tool(its arguments) [its id].
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&format!("→ {}({}) [{}]", c.name, c.arguments, c.id));
    }
    if let Some(x) = e.left_context {
        // Archive view: when a compaction took it out of the context.
        who = format!(
            "{who} (left context {} v{})",
            x.at.format("%Y-%m-%d %H:%M:%S"),
            x.version
        );
    }
    format!(
        "#{:<4} {} {:<10} {}",
        e.seq,
        e.timestamp.format("%H:%M:%S"),
        who,
        text
    )
}
