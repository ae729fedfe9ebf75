//! The everyday session commands: create, append, list, show, watch,
//! search, compact, rewind, fork, end, reopen, delete, erase-user and
//! `stats SESSION`. Each parses its flags, makes one call of the session
//! service (the one door every face uses, see [`SessionService`]) and
//! prints the answer; the service checks owners and fills token estimates.
//!
//! The command line names sessions by id alone: a command first
//! [`SessionService::locate`]s the session and then acts as its owner.

use std::io::Write;
use std::sync::Arc;

use agent_session::compaction::{
    session_error, CompactionPolicy, RecursiveSummarization, StrategyName, StrategySpec,
    SummarizerChoice, Trigger,
};
use agent_session::{
    Compactor, ContextOptions, CreateSessionRequest, ErrorKind, EventFilter, EventView, ForkAt,
    Message, Owner, RewindTo, SessionError, SessionEvent, SessionId, SessionQuery, SessionService,
    SessionStatus, ToolCall,
};
use agent_session_cli::args::{parse_pairs, parse_ttl, ArgError};
use anyhow::{anyhow, bail, Context, Result};
use serde_json::json;

use crate::cli::{
    AppendArgs, Command, CompactArgs, ContextArgs, CreateArgs, ForkArgs, ListArgs, RewindArgs,
    RoleArg, ShowArgs, StatusArg, StrategyArg, SummarizerArg, ViewArg,
};
use crate::output::{event_json, event_line, report};

/// The most events one read of `show` asks the service for.
const SHOW_PAGE: usize = 1000;

/// Runs an everyday command through `service`.
pub(crate) async fn run(
    service: Arc<dyn SessionService>,
    command: Command,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let s = service.as_ref();
    match command {
        Command::Create(a) => create(s, a, json, out).await,
        Command::Append(a) => append(s, a, json, out).await,
        Command::List(a) => list(s, a, json, out).await,
        Command::Show(a) => show(s, a, json, out).await,
        Command::Watch(a) => crate::watch::run(s, a, json, out).await,
        Command::Search(a) => crate::search_cmd::run(service, a, json, out).await,
        Command::Context(a) => context(s, a, json, out).await,
        Command::Compact(a) => compact(s, a, json, out).await,
        Command::Rewind(a) => rewind(s, a, json, out).await,
        Command::Fork(a) => fork(s, a, json, out).await,
        Command::End { session } => lifecycle(s, &session, Lifecycle::End, json, out).await,
        Command::Reopen { session } => lifecycle(s, &session, Lifecycle::Reopen, json, out).await,
        Command::Delete { session } => lifecycle(s, &session, Lifecycle::Delete, json, out).await,
        Command::EraseUser { app, user } => erase_user(s, &app, &user, json, out).await,
        Command::Stats {
            session: Some(id),
            model,
        } => crate::session_stats::run(s, &id, model.as_deref(), json, out).await,
        other => bail!("not a session command: {other:?}"),
    }
}

/// The owner of session `id`, whoever it is (the command line names sessions by id).
async fn owner_of(service: &dyn SessionService, id: &SessionId) -> Result<Owner> {
    Ok(Owner::of(&service.locate(id).await?))
}

/// One line of JSON, or of text.
fn say(out: &mut dyn Write, json: bool, as_json: &serde_json::Value, text: &str) -> Result<()> {
    if json {
        writeln!(out, "{as_json}")?;
    } else {
        writeln!(out, "{text}")?;
    }
    Ok(())
}

/// `create`: a new session; prints its id (or the session as JSON).
async fn create(
    service: &dyn SessionService,
    a: CreateArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let mut request = CreateSessionRequest::builder(a.user.as_str()).app(a.app.as_str());
    if let Some(id) = &a.id {
        request = request.id(id.as_str());
    }
    if let Some(key) = &a.key {
        request = request.key(key.as_str());
    }
    for (k, v) in parse_pairs("--meta", &a.meta, false)? {
        request = request.metadata(k, v);
    }
    if let Some(ttl) = &a.ttl {
        request = match parse_ttl(ttl, chrono::Utc::now())? {
            Some(at) => request.expires_at(at),
            None => request.never_expires(),
        };
    }
    let s = service.create(request.build()?).await?;
    if json {
        writeln!(out, "{}", serde_json::to_string(&s)?)?;
    } else {
        writeln!(out, "{}", s.id)?;
    }
    Ok(())
}

/// The message `append` was asked for, and the id of a new tool call.
fn message(a: &mut AppendArgs) -> Result<(Message, Option<String>)> {
    let text = a.text.take().unwrap_or_default();
    if let Some(name) = a.tool_call.take() {
        let arguments = a.args.take().unwrap_or_else(|| "{}".to_owned());
        let parsed: serde_json::Value = serde_json::from_str(&arguments)
            .map_err(|e| ArgError::new("--args", &arguments, format!("not JSON ({e})")))?;
        let id = a.call_id.take().unwrap_or_else(|| {
            let uuid = uuid::Uuid::new_v4().simple().to_string();
            format!("call_{}", uuid.get(..12).unwrap_or(&uuid))
        });
        let call = ToolCall::new(id.clone(), name, &parsed);
        return Ok((Message::assistant_tool_calls(text, vec![call]), Some(id)));
    }
    let tool = |call: String, name: Option<String>| Message::Tool {
        tool_call_id: call,
        name,
        content: text.clone().into(),
    };
    let message = match (a.tool_result.take(), a.role) {
        (Some(call), _) => tool(call, a.tool_name.take()),
        (None, Some(RoleArg::Tool)) => {
            let call = a.tool_call_id.take().ok_or_else(|| {
                ArgError::new(
                    "--role",
                    "tool",
                    "needs --tool-call-id (or use --tool-result CALL_ID)",
                )
            })?;
            tool(call, a.tool_name.take())
        }
        (None, Some(RoleArg::User)) => Message::user(text),
        (None, Some(RoleArg::Assistant)) => Message::assistant(text),
        (None, Some(RoleArg::System)) => Message::system(text),
        (None, None) => bail!("say what to append: --role, --tool-call or --tool-result"),
    };
    Ok((message, None))
}

/// `append`: one event; prints its seq (and the id of a new tool call).
async fn append(
    service: &dyn SessionService,
    mut a: AppendArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let (message, new_call_id) = message(&mut a)?;
    let mut event = SessionEvent::builder(message);
    if let Some(branch) = a.branch {
        event = event.branch(branch);
    }
    if let Some(invocation) = a.invocation {
        event = event.invocation_id(invocation);
    }
    let delta = parse_pairs("--state", &a.state, true)?;
    if !delta.is_empty() {
        event = event.state_delta(delta);
    }
    let event = event.build()?;
    let owner = owner_of(service, &a.session).await?;
    let appended = service
        .append_events(&owner, &a.session, vec![event])
        .await?;
    let seq = appended.seqs.first().copied().unwrap_or_default();
    match (json, new_call_id) {
        (true, call_id) => writeln!(
            out,
            "{}",
            json!({"seq": seq, "version": appended.version, "call_id": call_id})
        )?,
        (false, Some(call_id)) => writeln!(out, "{seq} {call_id}")?,
        (false, None) => writeln!(out, "{seq}")?,
    }
    Ok(())
}

/// The query `list` runs, without its page.
fn list_query(a: &ListArgs) -> SessionQuery {
    let mut q = SessionQuery::new();
    if let Some(app) = &a.app {
        q = q.app(app);
    }
    if let Some(user) = &a.user {
        q = q.user(user);
    }
    if let Some(status) = a.status {
        q = q.status(match status {
            StatusArg::Active => SessionStatus::Active,
            StatusArg::Archived => SessionStatus::Archived,
        });
    }
    if let Some(source) = &a.forks_of {
        q = q.forks_of(source);
    }
    q
}

/// `list`: sessions of every owner the flags match, newest activity first.
async fn list(
    service: &dyn SessionService,
    a: ListArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let size = a.limit.clamp(1, 1000);
    let q = list_query(&a);
    let mut sessions = Vec::new();
    let mut unreadable = Vec::new();
    let mut current = a.page;
    let more = loop {
        let p = service.list_all(q.clone().page(current, size)).await?;
        sessions.extend(p.items);
        unreadable.extend(p.unreadable);
        if !(a.all && p.has_more) {
            break p.has_more;
        }
        current = current.saturating_add(1);
    };
    for id in &unreadable {
        report(format_args!(
            "warning: session {id} could not be read (corrupt stored data); \
             `agent-session show {id}` gives the error"
        ));
    }
    if json {
        for s in &sessions {
            writeln!(out, "{}", serde_json::to_string(s)?)?;
        }
    } else if sessions.is_empty() {
        writeln!(out, "no sessions")?;
    } else {
        writeln!(
            out,
            "{:<36}  {:<12} {:<12} {:<8} {:>7}  last activity",
            "id", "app", "user", "status", "events"
        )?;
        for s in &sessions {
            writeln!(
                out,
                "{:<36}  {:<12} {:<12} {:<8} {:>7}  {}",
                s.id,
                s.app,
                s.user_id,
                s.status,
                s.event_count,
                s.updated_at.format("%Y-%m-%d %H:%M:%S")
            )?;
        }
    }
    if more {
        // On stderr with --json, so the JSON lines stay clean.
        let next = current.saturating_add(1);
        let line = format!(
            "{} shown; more sessions — use --page {next} (or --all)",
            sessions.len()
        );
        if json {
            report(line);
        } else {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// Prints events as `show` does.
fn print_events(events: &[SessionEvent], json: bool, out: &mut dyn Write) -> Result<()> {
    for e in events {
        if json {
            writeln!(out, "{}", event_json(e))?;
        } else {
            writeln!(out, "{}", event_line(e))?;
        }
    }
    Ok(())
}

/// `show`: the last events of a view, or the whole view page by page.
async fn show(
    service: &dyn SessionService,
    a: ShowArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let view = match a.view {
        ViewArg::Context => EventView::Context,
        ViewArg::Archive => EventView::Archive,
    };
    let owner = owner_of(service, &a.session).await?;
    if let Some(n) = a.last {
        let filter = EventFilter::last(n.clamp(1, 1000)).view(view);
        let page = service.events(&owner, &a.session, &filter).await?;
        return print_events(&page.items, json, out);
    }
    let mut filter = EventFilter::default().view(view).page(0, SHOW_PAGE);
    loop {
        let page = service.events(&owner, &a.session, &filter).await?;
        print_events(&page.items, json, out)?;
        match page.next_after() {
            Some(seq) => filter = filter.after(seq),
            None => return Ok(()),
        }
    }
}

/// The compaction the `compact` flags describe, as the other faces name
/// it ([`StrategySpec`]); a flag the strategy needs and lacks is named.
fn strategy_spec(a: &CompactArgs) -> Result<StrategySpec> {
    fn need<T>(value: Option<T>, flag: &str) -> Result<Option<T>> {
        value
            .map(Some)
            .ok_or_else(|| anyhow!("this strategy needs {flag}"))
    }
    let strategy = match (&a.spec, a.strategy) {
        (Some(text), _) => {
            return serde_json::from_str(text).map_err(|e| {
                SessionError::invalid_because("--spec", format!("not a compaction spec: {e}"), e)
                    .into()
            })
        }
        (None, Some(strategy)) => strategy,
        (None, None) => bail!("give --strategy or --spec"),
    };
    let mut spec = StrategySpec::new(match strategy {
        StrategyArg::SlidingWindow => StrategyName::SlidingWindow,
        StrategyArg::TurnWindow => StrategyName::TurnWindow,
        StrategyArg::TokenBudget => StrategyName::TokenBudget,
        StrategyArg::Summarize => StrategyName::Summarize,
        StrategyArg::ToolResultClearing => StrategyName::ToolResultClearing,
    });
    match strategy {
        StrategyArg::SlidingWindow => spec.max_events = need(a.max_events, "--max-events")?,
        StrategyArg::TurnWindow => spec.max_turns = need(a.max_turns, "--max-turns")?,
        StrategyArg::TokenBudget => spec.max_tokens = need(a.max_tokens, "--max-tokens")?,
        StrategyArg::Summarize | StrategyArg::ToolResultClearing => spec.keep = a.keep,
    }
    if a.summarizer == SummarizerArg::Openai {
        let model = a
            .model
            .as_deref()
            .ok_or_else(|| anyhow!("--summarizer openai needs --model"))?;
        spec.summarizer = Some(format!("openai:{model}"));
    }
    Ok(spec)
}

/// What `compact` runs: the spec's compactor, or with `--base-url` (which
/// a spec does not carry) the summarizing strategy on that endpoint, now.
fn compactor(a: &CompactArgs) -> Result<Arc<dyn Compactor>> {
    let spec = strategy_spec(a)?;
    match (&a.base_url, a.summarizer, spec.strategy) {
        (Some(url), SummarizerArg::Openai, StrategyName::Summarize) => {
            let model = a.model.clone().unwrap_or_default();
            let summarizer = SummarizerChoice::openai(model, Some(url.clone()))
                .map_err(session_error)?
                .build();
            let strategy = Arc::new(match spec.keep {
                Some(keep) => RecursiveSummarization::new(keep, summarizer),
                None => RecursiveSummarization::open_astra(summarizer),
            });
            Ok(Arc::new(CompactionPolicy::new(Trigger::Always, strategy)))
        }
        _ => Ok(spec.compactor()?),
    }
}

/// `context`: the model-ready context, one message per line.
async fn context(
    service: &dyn SessionService,
    a: ContextArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let owner = owner_of(service, &a.session).await?;
    let options = ContextOptions { branch: a.branch };
    for m in service.context(&owner, &a.session, &options).await? {
        if json {
            writeln!(out, "{}", serde_json::to_string(&m)?)?;
        } else {
            writeln!(out, "{}", message_line(&m))?;
        }
    }
    Ok(())
}

/// A message as one line: `role: text`, a tool call as `assistant: call NAME`.
fn message_line(m: &Message) -> String {
    let calls: Vec<&str> = m.tool_calls().iter().map(|c| c.name.as_str()).collect();
    if calls.is_empty() {
        format!("{}: {}", m.role(), m.text())
    } else {
        format!("{}: call {}", m.role(), calls.join(","))
    }
}

/// `compact`: compacts the context now; prints what changed, or why nothing did.
async fn compact(
    service: &dyn SessionService,
    a: CompactArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let compactor = compactor(&a)?;
    let owner = owner_of(service, &a.session).await?;
    let done = match service
        .compact(&owner, &a.session, compactor.as_ref())
        .await
    {
        Err(e) if e.kind() == ErrorKind::Conflict => {
            return Err(e).context(
                "another writer changed the session meanwhile; nothing changed, try again",
            )
        }
        other => other?,
    };
    if json {
        writeln!(out, "{}", serde_json::to_string(&done)?)?;
    } else if done.compacted {
        writeln!(
            out,
            "compacted: {} → {} events, {} → {} tokens",
            done.events_before, done.events_after, done.tokens_before, done.tokens_after
        )?;
    } else {
        match &done.reason {
            Some(reason) => writeln!(out, "nothing to compact: {reason}")?,
            None => writeln!(out, "nothing to compact")?,
        }
    }
    if let Some(shortfall) = &done.shortfall {
        if !json {
            writeln!(out, "still over the budget: {shortfall}")?;
        }
        tracing::warn!(session_id = %a.session, over_by = shortfall.over_by, "the context is still over the budget: {shortfall}");
    }
    Ok(())
}

/// `rewind`: removes an invocation (or a seq) and everything after it.
async fn rewind(
    service: &dyn SessionService,
    a: RewindArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let to = match (a.before_invocation, a.seq) {
        (Some(invocation), _) => RewindTo::Invocation(invocation),
        (None, Some(seq)) => RewindTo::Seq(seq),
        (None, None) => bail!("give --before-invocation or --seq"),
    };
    let owner = owner_of(service, &a.session).await?;
    let rewound = service.rewind(&owner, &a.session, &to).await?;
    let (removed, version) = (rewound.removed, rewound.session.version);
    say(
        out,
        json,
        &json!({"removed": removed, "version": version}),
        &format!("removed {removed} events; version {version}"),
    )
}

/// `fork`: a new session holding the source's events up to a point.
async fn fork(
    service: &dyn SessionService,
    a: ForkArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let at = match (a.before_invocation, a.seq) {
        (Some(invocation), _) => ForkAt::Invocation(invocation),
        (None, Some(seq)) => ForkAt::Seq(seq),
        (None, None) => ForkAt::Latest,
    };
    let owner = owner_of(service, &a.session).await?;
    let fork = service.fork(&owner, &a.session, &at).await?;
    if json {
        writeln!(out, "{}", serde_json::to_string(&fork)?)?;
    } else {
        writeln!(
            out,
            "{} (forked from {}: {} events)",
            fork.id, a.session, fork.event_count
        )?;
    }
    Ok(())
}

/// What `end`, `reopen` and `delete` do to a session.
#[derive(Clone, Copy)]
enum Lifecycle {
    End,
    Reopen,
    Delete,
}

/// `end` (archives a session), `reopen` (makes it writable again) and
/// `delete` (removes it and all its events); prints what was done.
async fn lifecycle(
    service: &dyn SessionService,
    session: &SessionId,
    step: Lifecycle,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let owner = owner_of(service, session).await?;
    let done = match step {
        Lifecycle::End => service.end(&owner, session).await.map(|_| "ended"),
        Lifecycle::Reopen => service.reopen(&owner, session).await.map(|_| "reopened"),
        Lifecycle::Delete => service.delete(&owner, session).await.map(|()| "deleted"),
    }?;
    say(
        out,
        json,
        &json!({ done: session }),
        &format!("{done} {session}"),
    )
}

/// `erase-user`: everything stored of one user in one app.
async fn erase_user(
    service: &dyn SessionService,
    app: &str,
    user: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let owner = Owner::parse(app, user)?;
    let erased = service.erase_user(&owner).await?;
    if json {
        writeln!(out, "{}", serde_json::to_string(&erased)?)?;
    } else {
        writeln!(
            out,
            "erased {} sessions and {} events of {} in {}{}",
            erased.sessions,
            erased.events,
            owner.user,
            owner.app,
            if erased.user_state {
                ", and their user: state"
            } else {
                ""
            }
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use agent_session::SessionError;
    use clap::Parser;

    /// Whether `e` (somewhere in its chain) is a store error of `kind`.
    fn is_kind(e: &anyhow::Error, kind: ErrorKind) -> bool {
        e.chain()
            .filter_map(|c| c.downcast_ref::<SessionError>())
            .any(|s| s.kind() == kind)
    }

    fn compact_args(flags: &[&str]) -> CompactArgs {
        let argv = ["agent-session", "compact", "s"].iter().chain(flags);
        match Cli::try_parse_from(argv).map(|c| c.command) {
            Ok(Command::Compact(a)) => a,
            other => panic!("not a compact command: {other:?}"),
        }
    }

    #[test]
    fn the_flags_become_the_spec_every_face_takes() {
        let spec = strategy_spec(&compact_args(&["--strategy", "summarize"])).unwrap();
        assert_eq!(spec.strategy, StrategyName::Summarize);
        assert_eq!(
            spec.keep, None,
            "the default every face has: the newest messages"
        );
        assert_eq!(spec.summarizer, None);
        let spec = strategy_spec(&compact_args(&[
            "--strategy",
            "summarize",
            "--summarizer",
            "openai",
            "--model",
            "m",
        ]))
        .unwrap();
        assert_eq!(spec.summarizer.as_deref(), Some("openai:m"));
        let spec = strategy_spec(&compact_args(&[
            "--strategy",
            "token-budget",
            "--max-tokens",
            "50",
        ]))
        .unwrap();
        assert_eq!(spec.max_tokens, Some(50));
        let err = strategy_spec(&compact_args(&["--strategy", "turn-window"])).unwrap_err();
        assert!(err.to_string().contains("--max-turns"), "{err}");
    }

    #[test]
    fn a_base_url_reaches_the_summarizer_and_a_bad_one_is_invalid_input() {
        let args = compact_args(&[
            "--strategy",
            "summarize",
            "--summarizer",
            "openai",
            "--model",
            "m",
            "--base-url",
            "ftp://nowhere",
        ]);
        let err = compactor(&args).err().unwrap();
        assert!(is_kind(&err, ErrorKind::InvalidInput), "{err:?}");
    }
}
