//! The everyday commands: create, append, list, show, search, compact,
//! rewind, end, delete, purge-expired, stats.

use std::sync::Arc;

use agent_session::compaction::{
    CompactionOutcome, CompactionPolicy, CompactionStrategy, ConversationSearch,
    ExtractiveSummarizer, RecursiveSummarization, SlidingWindow, TokenBudget, ToolContext, Trigger,
    TurnWindow,
};
use agent_session::{
    Clock, DefaultSessionService, EventFilter, EventView, Message, NewSession, Owner, SessionEvent,
    SessionQuery, SessionRepository, SessionRepositoryExt, SessionStatus, SessionUpdate, StateMap,
    SystemClock,
};
use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use crate::{store, Cli, Command, RoleArg, StatusArg, StrategyArg, ViewArg};

/// Runs one command.
pub(crate) async fn run(cli: Cli) -> Result<()> {
    let json = cli.json;
    let url = store::url(cli.store.as_deref());
    match cli.command {
        Command::Demo => crate::demo::run(&url).await,
        Command::Bench { workload, events } => {
            crate::bench::run(&*store::open(&url).await?, workload, events, json).await
        }
        Command::Export { sessions, all, out } => {
            crate::transfer::export(&*store::open(&url).await?, &sessions, all, out.as_deref())
                .await
        }
        Command::Import { file } => {
            crate::transfer::import(&*store::open(&url).await?, &file, json).await
        }
        Command::Migrate { to, app } => {
            let from = store::open(&url).await?;
            let target = store::open(&to).await?;
            crate::transfer::migrate(&*from, &*target, app.as_deref(), json).await
        }
        other => {
            let repo = store::open(&url).await?;
            everyday(&repo, other, json).await
        }
    }
}

async fn everyday(repo: &Arc<dyn SessionRepository>, command: Command, json: bool) -> Result<()> {
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
            let mut new =
                NewSession::new(app, user, now).with_metadata(parse_pairs(&meta, "--meta", false)?);
            if let Some(id) = id {
                new = new.with_id(id);
            }
            if let Some(k) = key {
                new = new.with_key(k);
            }
            if let Some(ttl) = ttl {
                new = new.with_expires_at(parse_ttl(&ttl)?.map(|d| now + d));
            }
            let s = repo.create(new).await?;
            if json {
                println!("{}", serde_json::to_string(&s)?);
            } else {
                println!("{}", s.id);
            }
        }
        Command::Append {
            session,
            role,
            text,
            tool_call_id,
            tool_name,
            branch,
            invocation,
            state,
        } => {
            let message = match role {
                RoleArg::User => Message::user(text),
                RoleArg::Assistant => Message::assistant(text),
                RoleArg::System => Message::system(text),
                RoleArg::Tool => {
                    let call =
                        tool_call_id.ok_or_else(|| anyhow!("--role tool needs --tool-call-id"))?;
                    Message::Tool {
                        tool_call_id: call,
                        name: tool_name,
                        content: text.into(),
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
            let delta = parse_pairs(&state, "--state", true)?;
            if !delta.is_empty() {
                b = b.state_delta(delta);
            }
            let out = repo.append(&session, vec![b.build()?]).await?;
            let seq = out.seqs.first().copied().unwrap_or_default();
            if json {
                println!("{}", json!({"seq": seq, "version": out.version}));
            } else {
                println!("{seq}");
            }
        }
        Command::List {
            app,
            user,
            status,
            limit,
        } => {
            let mut q = SessionQuery::new().page(0, limit.clamp(1, 1000));
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
            let page = repo.list(&q).await?;
            if json {
                for s in &page.items {
                    println!("{}", serde_json::to_string(s)?);
                }
            } else if page.items.is_empty() {
                println!("no sessions");
            } else {
                println!(
                    "{:<36}  {:<12} {:<12} {:<8} {:>7}  last activity",
                    "id", "app", "user", "status", "events"
                );
                for s in &page.items {
                    println!(
                        "{:<36}  {:<12} {:<12} {:<8} {:>7}  {}",
                        s.id,
                        s.app,
                        s.user_id,
                        s.status,
                        s.event_count,
                        s.updated_at.format("%Y-%m-%d %H:%M:%S")
                    );
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
                    println!("{}", event_json(e));
                } else {
                    println!("{}", event_line(e));
                }
            }
        }
        Command::Search {
            session,
            query,
            page,
            page_size,
        } => {
            let s = repo.get(&session).await?;
            let owner = Owner::new(s.app.clone(), s.user_id.clone());
            let service = Arc::new(DefaultSessionService::new(repo.clone()));
            let tool = ConversationSearch::new(service).with_page_size(page_size.clamp(1, 1000));
            let ctx = ToolContext {
                owner,
                session_id: s.id,
            };
            println!(
                "{}",
                tool.call(&ctx, &json!({"query": query, "page": page}))
                    .await?
            );
        }
        Command::Compact {
            session,
            strategy,
            max_events,
            max_turns,
            max_tokens,
            keep,
        } => {
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
                StrategyArg::Summarize => Arc::new(RecursiveSummarization::new(
                    keep.unwrap_or(2),
                    Arc::new(ExtractiveSummarizer::new()),
                )),
            };
            let policy = CompactionPolicy::new(Trigger::TurnCount(0), strategy);
            match policy.compact_now(&**repo, &session).await? {
                CompactionOutcome::Compacted(r) => {
                    let m = r.metrics;
                    if json {
                        println!(
                            "{}",
                            json!({"compacted": true, "events_before": m.events_before, "events_after": m.events_after,
                                   "tokens_before": m.tokens_before, "tokens_after": m.tokens_after, "summary": r.summary})
                        );
                    } else {
                        println!(
                            "compacted: {} → {} events, {} → {} tokens ({} events left the context; all stay in the archive)",
                            m.events_before, m.events_after, m.tokens_before, m.tokens_after, m.archived
                        );
                    }
                }
                CompactionOutcome::LostRace { .. } => bail!(
                    "another writer changed the session meanwhile; nothing changed, try again"
                ),
                _ => println!(
                    "{}",
                    if json {
                        json!({"compacted": false}).to_string()
                    } else {
                        "nothing to compact".to_owned()
                    }
                ),
            }
        }
        Command::Rewind {
            session,
            before_invocation,
        } => {
            let out = repo.rewind(&session, &before_invocation).await?;
            if json {
                println!(
                    "{}",
                    json!({"removed": out.removed, "version": out.version})
                );
            } else {
                println!("removed {} events; version {}", out.removed, out.version);
            }
        }
        Command::End { session } => {
            repo.update(
                &session,
                SessionUpdate::new().status(SessionStatus::Archived),
            )
            .await?;
            println!(
                "{}",
                if json {
                    json!({"ended": session}).to_string()
                } else {
                    format!("ended {session}")
                }
            );
        }
        Command::Delete { session } => {
            if !repo.delete(&session).await? {
                bail!("session not found: {session}");
            }
            println!(
                "{}",
                if json {
                    json!({"deleted": session}).to_string()
                } else {
                    format!("deleted {session}")
                }
            );
        }
        Command::PurgeExpired => {
            let n = repo.purge_expired(SystemClock.now()).await?;
            println!(
                "{}",
                if json {
                    json!({"purged": n}).to_string()
                } else {
                    format!("purged {n} expired sessions")
                }
            );
        }
        Command::Stats => stats(repo, json).await?,
        Command::Demo
        | Command::Bench { .. }
        | Command::Export { .. }
        | Command::Import { .. }
        | Command::Migrate { .. } => {
            unreachable!("dispatched in run")
        }
    }
    Ok(())
}

async fn stats(repo: &Arc<dyn SessionRepository>, json: bool) -> Result<()> {
    let (mut active, mut archived, mut events) = (0u64, 0u64, 0u64);
    let mut page = 0;
    loop {
        let p = repo.list(&SessionQuery::new().page(page, 1000)).await?;
        for s in &p.items {
            match s.status {
                SessionStatus::Active => active += 1,
                SessionStatus::Archived => archived += 1,
            }
            events += s.event_count;
        }
        if !p.has_more {
            break;
        }
        page += 1;
    }
    let caps = repo.capabilities();
    if json {
        println!(
            "{}",
            json!({"backend": caps.backend, "sessions": active + archived, "active": active,
                   "archived": archived, "events": events, "ranked_search": caps.ranked_search})
        );
    } else {
        println!("backend   {}", caps.backend);
        println!(
            "sessions  {} ({active} active, {archived} archived)",
            active + archived
        );
        println!("events    {events}");
    }
    Ok(())
}

/// One event as the `show --json` object.
pub(crate) fn event_json(e: &SessionEvent) -> Value {
    json!({
        "seq": e.seq,
        "timestamp": e.timestamp.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        "role": e.role().as_str(),
        "text": e.message.text(),
        "tool_calls": e.message.tool_calls().iter().map(|c| json!({"id": c.id, "name": c.name, "arguments": c.arguments})).collect::<Vec<_>>(),
        "branch": e.branch,
        "invocation": e.invocation_id,
        "synthetic": e.is_synthetic(),
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
    if let Message::Tool { tool_call_id, .. } = &e.message {
        text = format!("({tool_call_id}) {text}");
    }
    for c in e.message.tool_calls() {
        text.push_str(&format!(" → calls {}({})", c.name, c.arguments));
    }
    format!(
        "#{:<4} {} {:<10} {}",
        e.seq,
        e.timestamp.format("%H:%M:%S"),
        who,
        text
    )
}

/// Parses `K=V` pairs; with `json_values`, V must be JSON (`--state`), else
/// JSON when it parses and text otherwise (`--meta`).
fn parse_pairs(pairs: &[String], flag: &str, json_values: bool) -> Result<StateMap> {
    let mut out = StateMap::new();
    for p in pairs {
        let (k, v) = p
            .split_once('=')
            .ok_or_else(|| anyhow!("{flag} {p:?} is not K=V"))?;
        if k.is_empty() {
            bail!("{flag} {p:?} has an empty key");
        }
        let value = match serde_json::from_str::<Value>(v) {
            Ok(v) => v,
            Err(e) if json_values => {
                return Err(anyhow!(
                "{flag} {k}: the value {v:?} is not JSON ({e}); quote strings, e.g. {k}='\"text\"'"
            ))
            }
            Err(_) => Value::String(v.to_owned()),
        };
        out.insert(k.to_owned(), value);
    }
    Ok(out)
}

/// `30m`, `2h`, `30d`, `never`.
fn parse_ttl(s: &str) -> Result<Option<chrono::Duration>> {
    if s == "never" {
        return Ok(None);
    }
    let (n, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: i64 = n
        .parse()
        .with_context(|| format!("--ttl {s:?}: expected e.g. 30m, 2h, 30d or never"))?;
    let d = match unit {
        "s" => chrono::Duration::seconds(n),
        "m" => chrono::Duration::minutes(n),
        "h" => chrono::Duration::hours(n),
        "d" => chrono::Duration::days(n),
        _ => bail!("--ttl {s:?}: the unit must be s, m, h or d (or use never)"),
    };
    if n <= 0 {
        bail!("--ttl {s:?} must be positive");
    }
    Ok(Some(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_forms() {
        assert_eq!(parse_ttl("2h").unwrap(), Some(chrono::Duration::hours(2)));
        assert_eq!(parse_ttl("30d").unwrap(), Some(chrono::Duration::days(30)));
        assert_eq!(parse_ttl("never").unwrap(), None);
        assert!(parse_ttl("2 weeks").is_err());
        assert!(parse_ttl("0h").is_err());
        assert!(parse_ttl("h").is_err());
    }

    #[test]
    fn pairs_parse_json_or_text() {
        let m = parse_pairs(&["a=1".into(), "b=hello".into()], "--meta", false).unwrap();
        assert_eq!(m["a"], json!(1));
        assert_eq!(m["b"], json!("hello"));
        assert!(parse_pairs(&["a={oops".into()], "--state", true).is_err());
        assert!(parse_pairs(&["novalue".into()], "--state", true).is_err());
    }
}
