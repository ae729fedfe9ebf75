//! The everyday commands: create, append, list, show, search, compact,
//! rewind, fork, end, reopen, delete, purge-expired, erase-user, stats.

use std::io::Write;
use std::sync::Arc;

use agent_session::compaction::{
    CompactionOutcome, CompactionPolicy, CompactionStrategy, RecursiveSummarization, SlidingWindow,
    Summarizer, SummarizerChoice, TokenBudget, Trigger, TurnWindow,
};
use agent_session::{
    AppName, Clock, EventFilter, EventView, ForkAt, Message, NewSession, RewindTo, SessionEvent,
    SessionId, SessionQuery, SessionRepository, SessionRepositoryExt, SessionStatus, SessionUpdate,
    SystemClock, UserId,
};
use agent_session_cli::args::{parse_pairs, parse_ttl};
use anyhow::{anyhow, bail, Result};
use serde_json::json;

use crate::output::{event_json, event_line};
use crate::{store, Cli, Command, RoleArg, StatusArg, StrategyArg, SummarizerArg, ViewArg};

/// Runs one command, writing what it prints to `out`.
pub(crate) async fn run(cli: Cli, out: &mut dyn Write) -> Result<()> {
    let json = cli.json;
    store::set_keys_file(cli.keys_file.clone());
    // What needs no store comes first: no default store is announced for it.
    match cli.command {
        Command::Keygen { id } => return crate::keys_cmd::keygen(&id, out),
        Command::ApiKey {
            name,
            app,
            role,
            user,
        } => return crate::serve_cmd::api_key(name, &app, role, user, out),
        // Rendered in memory first: clap_complete panics on a failed write,
        // and a reader that stops early (`| head`) is not a failure.
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "agent-session", &mut script);
            out.write_all(&script)?;
            return Ok(());
        }
        Command::Man => {
            let command = <Cli as clap::CommandFactory>::command();
            let mut page = Vec::new();
            clap_mangen::Man::new(command).render(&mut page)?;
            out.write_all(&page)?;
            return Ok(());
        }
        _ => {}
    }
    let url = store::url(cli.store.as_deref());
    match cli.command {
        Command::Demo => crate::demo::run(&url, out).await,
        Command::Rekey { sessions } => crate::keys_cmd::rekey(&url, sessions, json, out).await,
        Command::Bench {
            workload,
            events,
            sessions,
            clients,
            repeat,
            compare,
            sizes,
        } => {
            let repo = store::open(&url).await?;
            if workload == crate::WorkloadArg::Recall {
                crate::bench::recall::run(&*repo, events, json, out).await
            } else {
                let args = crate::bench::BenchArgs {
                    workload,
                    events,
                    sessions,
                    clients,
                    repeat,
                    compare_raw: compare.is_some(),
                    sizes,
                };
                crate::bench::run(&url, repo, &args, json, out).await
            }
        }
        Command::Export {
            sessions,
            all,
            out: file,
        } => {
            crate::transfer::export(
                &*store::open(&url).await?,
                &sessions,
                all,
                file.as_deref(),
                out,
            )
            .await
        }
        Command::Serve {
            listen,
            api_keys,
            insecure_no_auth,
            max_body_bytes,
            rate_limit,
            request_timeout,
            tls_cert,
            tls_key,
        } => {
            let options = crate::serve_cmd::ServeOptions {
                listen,
                api_keys,
                insecure_no_auth,
                max_body_bytes,
                rate_limit,
                request_timeout,
                tls: tls_cert.zip(tls_key),
            };
            crate::serve_cmd::run(store::open(&url).await?, options).await
        }
        Command::Mcp { app, user } => {
            let repo = store::open(&url).await?;
            let service = Arc::new(agent_session::DefaultSessionService::new(repo.clone()));
            let owner = agent_session::Owner::new(app.as_str(), user.as_str());
            session_mcp::serve_stdio(session_mcp::SessionTools::for_owner(service, repo, owner))
                .await?;
            Ok(())
        }
        Command::Import { file } => {
            crate::transfer::import(&*store::open(&url).await?, &file, json, out).await
        }
        Command::Migrate { to, app } => {
            let from = store::open(&url).await?;
            let target = store::open(&to).await?;
            crate::transfer::migrate(&*from, &*target, app.as_deref(), json, out).await
        }
        other => {
            let repo = store::open(&url).await?;
            everyday(&repo, other, json, out).await
        }
    }
}

async fn everyday(
    repo: &Arc<dyn SessionRepository>,
    command: Command,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    match command {
        Command::Create {
            user,
            app,
            id,
            key,
            ttl,
            meta,
        } => {
            let now = SystemClock.now();
            let mut new = NewSession::new(app, user, now)?
                .with_metadata(parse_pairs("--meta", &meta, false)?);
            if let Some(id) = id {
                new = new.with_id(id)?;
            }
            if let Some(k) = key {
                new = new.with_key(k)?;
            }
            if let Some(ttl) = ttl {
                new = new.with_expires_at(parse_ttl(&ttl, now)?);
            }
            let s = repo.create(new).await?;
            if json {
                writeln!(out, "{}", serde_json::to_string(&s)?)?;
            } else {
                writeln!(out, "{}", s.id)?;
            }
        }
        Command::Append {
            session,
            role,
            text,
            tool_call,
            args,
            call_id,
            tool_result,
            tool_call_id,
            tool_name,
            branch,
            invocation,
            state,
        } => {
            let mut new_call_id = None;
            let message = if let Some(name) = tool_call {
                let arguments = args.unwrap_or_else(|| "{}".to_owned());
                let parsed: serde_json::Value = serde_json::from_str(&arguments).map_err(|e| {
                    agent_session_cli::args::ArgError::new(
                        "--args",
                        &arguments,
                        format!("not JSON ({e})"),
                    )
                })?;
                let id = call_id.unwrap_or_else(|| {
                    let uuid = uuid::Uuid::new_v4().simple().to_string();
                    format!("call_{}", uuid.get(..12).unwrap_or(&uuid))
                });
                new_call_id = Some(id.clone());
                Message::assistant_tool_calls(
                    text.unwrap_or_default(),
                    vec![agent_session::ToolCall::new(id, name, &parsed)],
                )
            } else {
                let text = text.unwrap_or_default();
                match (tool_result, role) {
                    (Some(call), _) => Message::Tool {
                        tool_call_id: call,
                        name: tool_name,
                        content: text.into(),
                    },
                    (None, Some(RoleArg::Tool)) => {
                        let call = tool_call_id.ok_or_else(|| {
                            agent_session_cli::args::ArgError::new(
                                "--role",
                                "tool",
                                "needs --tool-call-id (or use --tool-result CALL_ID)",
                            )
                        })?;
                        Message::Tool {
                            tool_call_id: call,
                            name: tool_name,
                            content: text.into(),
                        }
                    }
                    (None, Some(RoleArg::User)) => Message::user(text),
                    (None, Some(RoleArg::Assistant)) => Message::assistant(text),
                    (None, Some(RoleArg::System)) => Message::system(text),
                    (None, None) => {
                        return Err(anyhow!(
                            "say what to append: --role, --tool-call or --tool-result"
                        ))
                    }
                }
            };
            let mut b = SessionEvent::builder(message);
            if let Some(br) = branch {
                b = b.branch(br);
            }
            if let Some(i) = invocation {
                b = b.invocation_id(i);
            }
            let delta = parse_pairs("--state", &state, true)?;
            if !delta.is_empty() {
                b = b.state_delta(delta);
            }
            let appended = repo.append(&session, vec![b.build()?]).await?;
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
        }
        Command::List {
            app,
            user,
            status,
            forks_of,
            limit,
            page,
            all,
        } => {
            let size = limit.clamp(1, 1000);
            let mut q = SessionQuery::new();
            if let Some(a) = app {
                q = q.app(a);
            }
            if let Some(u) = user {
                q = q.user(u);
            }
            if let Some(s) = status {
                q = q.status(match s {
                    StatusArg::Active => SessionStatus::Active,
                    StatusArg::Archived => SessionStatus::Archived,
                });
            }
            if let Some(source) = &forks_of {
                q = q.forks_of(source);
            }
            let mut sessions = Vec::new();
            let mut unreadable = Vec::new();
            let mut current = page;
            let more = loop {
                let p = repo.list(&q.clone().page(current, size)).await?;
                sessions.extend(p.items);
                unreadable.extend(p.unreadable);
                if !(all && p.has_more) {
                    break p.has_more;
                }
                current = current.saturating_add(1);
            };
            for id in &unreadable {
                crate::output::report(format_args!(
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
                    crate::output::report(line);
                } else {
                    writeln!(out, "{line}")?;
                }
            }
        }
        Command::Show {
            session,
            view,
            last,
        } => {
            let view = match view {
                ViewArg::Context => EventView::Context,
                ViewArg::Archive => EventView::Archive,
            };
            let events = match last {
                Some(n) => {
                    repo.events(&session, &EventFilter::last(n.clamp(1, 1000)).view(view))
                        .await?
                        .items
                }
                None => repo.all_events(&session, view).await?,
            };
            for e in &events {
                if json {
                    writeln!(out, "{}", event_json(e))?;
                } else {
                    writeln!(out, "{}", event_line(e))?;
                }
            }
        }
        Command::Watch {
            session,
            last,
            interval,
            exit_after,
        } => {
            let args = crate::watch::WatchArgs {
                session,
                last,
                interval,
                exit_after,
            };
            crate::watch::run(repo.clone(), args, json, out).await?;
        }
        Command::Search {
            session,
            query,
            page,
            page_size,
            ranked,
            across,
            tool,
        } => {
            let args = crate::search_cmd::SearchArgs {
                session,
                query,
                page: usize::try_from(page.max(0)).unwrap_or(usize::MAX),
                page_size: page_size.clamp(1, 1000),
                ranked,
                across,
                tool,
            };
            crate::search_cmd::run(repo.clone(), args, json, out).await?;
        }
        Command::Compact {
            session,
            strategy,
            max_events,
            max_turns,
            max_tokens,
            keep,
            summarizer,
            model,
            base_url,
        } => {
            let summarizer: Arc<dyn Summarizer> = match summarizer {
                SummarizerArg::Extractive => SummarizerChoice::Extractive,
                SummarizerArg::Openai => SummarizerChoice::openai(
                    model.ok_or_else(|| anyhow!("--summarizer openai needs --model"))?,
                    base_url,
                )?,
            }
            .build();
            let need = |v: Option<usize>, flag: &str| {
                v.ok_or_else(|| anyhow!("this strategy needs {flag}"))
            };
            let strategy: Arc<dyn CompactionStrategy> = match strategy {
                StrategyArg::SlidingWindow => Arc::new(SlidingWindow {
                    max_events: need(max_events, "--max-events")?,
                }),
                StrategyArg::TurnWindow => Arc::new(TurnWindow {
                    max_turns: need(max_turns, "--max-turns")?,
                }),
                StrategyArg::TokenBudget => Arc::new(TokenBudget {
                    max_tokens: max_tokens
                        .ok_or_else(|| anyhow!("this strategy needs --max-tokens"))?,
                }),
                StrategyArg::Summarize => {
                    Arc::new(RecursiveSummarization::new(keep.unwrap_or(2), summarizer))
                }
                StrategyArg::ToolResultClearing => {
                    Arc::new(agent_session::compaction::ToolResultClearing {
                        keep_last: keep.unwrap_or(3),
                        ..Default::default()
                    })
                }
            };
            let policy = CompactionPolicy::new(Trigger::TurnCount(0), strategy);
            match policy.compact_now(&**repo, &session).await? {
                CompactionOutcome::Compacted(r) => {
                    let m = r.metrics;
                    if json {
                        writeln!(
                            out,
                            "{}",
                            json!({"compacted": true, "events_before": m.events_before, "events_after": m.events_after,
                                   "tokens_before": m.tokens_before, "tokens_after": m.tokens_after, "summary": r.summary})
                        )?;
                    } else {
                        writeln!(
                            out,
                            "compacted: {} → {} events, {} → {} tokens ({} events left the context; all stay in the archive)",
                            m.events_before, m.events_after, m.tokens_before, m.tokens_after, m.archived
                        )?;
                    }
                }
                CompactionOutcome::LostRace { .. } => bail!(
                    "another writer changed the session meanwhile; nothing changed, try again"
                ),
                CompactionOutcome::NotNeeded { reason } => writeln!(
                    out,
                    "{}",
                    if json {
                        json!({"compacted": false, "reason": reason}).to_string()
                    } else {
                        format!("nothing to compact: {reason}")
                    }
                )?,
                _ => writeln!(out, "nothing to compact")?,
            }
        }
        Command::Rewind {
            session,
            before_invocation,
            seq,
        } => {
            let to = match (before_invocation, seq) {
                (Some(invocation), _) => RewindTo::Invocation(invocation),
                (None, Some(seq)) => RewindTo::Seq(seq),
                (None, None) => bail!("give --before-invocation or --seq"),
            };
            let rewound = repo.rewind_restoring(&session, &to).await?;
            if json {
                writeln!(
                    out,
                    "{}",
                    json!({"removed": rewound.removed, "version": rewound.version})
                )?;
            } else {
                writeln!(
                    out,
                    "removed {} events; version {}",
                    rewound.removed, rewound.version
                )?;
            }
        }
        Command::Fork {
            session,
            before_invocation,
            seq,
        } => {
            let at = match (before_invocation, seq) {
                (Some(invocation), _) => ForkAt::Invocation(invocation),
                (None, Some(seq)) => ForkAt::Seq(seq),
                (None, None) => ForkAt::Latest,
            };
            let fork = repo.fork(&session, &at, SystemClock.now()).await?;
            if json {
                writeln!(out, "{}", serde_json::to_string(&fork)?)?;
            } else {
                writeln!(
                    out,
                    "{} (forked from {session}: {} events)",
                    fork.id, fork.event_count
                )?;
            }
        }
        Command::End { session } => {
            set_status(repo, out, json, &session, SessionStatus::Archived).await?;
        }
        Command::Reopen { session } => {
            set_status(repo, out, json, &session, SessionStatus::Active).await?;
        }
        Command::Delete { session } => {
            if !repo.delete(&session).await? {
                return Err(agent_session::SessionError::session_not_found(&session).into());
            }
            writeln!(
                out,
                "{}",
                if json {
                    json!({"deleted": session}).to_string()
                } else {
                    format!("deleted {session}")
                }
            )?;
        }
        Command::EraseUser { app, user } => {
            let (app, user) = (AppName::new(&app)?, UserId::new(&user)?);
            let erased = repo.erase_user(&app, &user).await?;
            if json {
                writeln!(out, "{}", serde_json::to_string(&erased)?)?;
            } else {
                writeln!(
                    out,
                    "erased {} sessions and {} events of {user} in {app}{}",
                    erased.sessions,
                    erased.events,
                    if erased.user_state {
                        ", and their user: state"
                    } else {
                        ""
                    }
                )?;
            }
        }
        Command::PurgeExpired {
            keep_latest,
            max_age,
            app,
        } => {
            let default = crate::retention_cmd::policy(keep_latest, max_age.as_deref())?;
            let app = app.map(|a| AppName::new(&a)).transpose()?;
            crate::retention_cmd::purge(repo, default, app.as_deref(), json, out).await?;
        }
        Command::Retention {
            session,
            keep_latest,
            max_age,
            clear,
            prune,
        } => {
            let set = crate::retention_cmd::policy(keep_latest, max_age.as_deref())?;
            crate::retention_cmd::run(repo, &session, set, clear, prune, json, out).await?;
        }
        Command::Stats {
            session: Some(id),
            model,
        } => crate::session_stats::run(repo.as_ref(), &id, model.as_deref(), json, out).await?,
        Command::Stats { session: None, .. } => stats(repo, json, out).await?,
        Command::Demo
        | Command::Rekey { .. }
        | Command::Keygen { .. }
        | Command::Completions { .. }
        | Command::Man
        | Command::Bench { .. }
        | Command::Export { .. }
        | Command::Import { .. }
        | Command::Serve { .. }
        | Command::Mcp { .. }
        | Command::ApiKey { .. }
        | Command::Migrate { .. } => {
            unreachable!("dispatched in run")
        }
    }
    Ok(())
}

/// `end` and `reopen`: sets the status and prints what happened.
async fn set_status(
    repo: &Arc<dyn SessionRepository>,
    out: &mut dyn Write,
    json: bool,
    session: &SessionId,
    status: SessionStatus,
) -> Result<()> {
    repo.update(session, SessionUpdate::new().status(status))
        .await?;
    let done = match status {
        SessionStatus::Archived => "ended",
        SessionStatus::Active => "reopened",
    };
    if json {
        writeln!(out, "{}", json!({ done: session }))?;
    } else {
        writeln!(out, "{done} {session}")?;
    }
    Ok(())
}

async fn stats(repo: &Arc<dyn SessionRepository>, json: bool, out: &mut dyn Write) -> Result<()> {
    let (mut active, mut archived, mut events) = (0u64, 0u64, 0u64);
    let mut page = 0;
    loop {
        let p = repo.list(&SessionQuery::new().page(page, 1000)).await?;
        for s in &p.items {
            match s.status {
                SessionStatus::Active => active = active.saturating_add(1),
                SessionStatus::Archived => archived = archived.saturating_add(1),
            }
            // Counts come from the store: a corrupt one must not overflow here.
            events = events.saturating_add(s.event_count);
        }
        if !p.has_more {
            break;
        }
        page += 1;
    }
    let caps = repo.capabilities();
    if json {
        writeln!(
            out,
            "{}",
            json!({"backend": caps.backend, "sessions": active.saturating_add(archived), "active": active,
                   "archived": archived, "events": events, "ranked_search": caps.ranked_search})
        )?;
    } else {
        writeln!(out, "backend   {}", caps.backend)?;
        writeln!(
            out,
            "sessions  {} ({active} active, {archived} archived)",
            active.saturating_add(archived)
        )?;
        writeln!(out, "events    {events}")?;
    }
    Ok(())
}
