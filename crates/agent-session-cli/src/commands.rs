//! Runs a parsed command line: what needs no store first, then the
//! operator's tools that work store-wide on the repository (demo,
//! rekey, bench, export, import, migrate, serve, mcp, purge-expired,
//! retention, `stats` of the whole store), then the everyday session
//! commands, which go through the session service ([`crate::everyday`]).

use std::io::Write;
use std::sync::Arc;

use agent_session::{
    AppName, DefaultSessionService, Owner, SessionQuery, SessionRepository, SessionService,
    SessionStatus, UserId,
};
use anyhow::Result;
use serde_json::json;

use crate::cli::{BenchArgs, Cli, Command, WorkloadArg};
use crate::store;

/// Runs one command, writing what it prints to `out`.
pub(crate) async fn run(cli: Cli, out: &mut dyn Write) -> Result<()> {
    let json = cli.json;
    store::set_keys_file(cli.keys_file.clone());
    // What needs no store comes first: no default store is announced for it.
    let Some(command) = offline(cli.command, out)? else {
        return Ok(());
    };
    let url = store::url(cli.store.as_deref());
    match command {
        Command::Demo => crate::demo::run(&url, out).await,
        Command::Rekey { sessions } => crate::keys_cmd::rekey(&url, sessions, json, out).await,
        Command::Bench(args) => bench(&url, args, json, out).await,
        Command::Export {
            sessions,
            all,
            out: file,
        } => {
            let repo = store::open(&url).await?;
            crate::transfer::export(&*repo, &sessions, all, file.as_deref(), out).await
        }
        Command::Import { file } => {
            crate::transfer::import(&*store::open(&url).await?, &file, json, out).await
        }
        Command::Migrate { to, app } => {
            let from = store::open(&url).await?;
            let target = store::open(&to).await?;
            crate::transfer::migrate(&*from, &*target, app.as_deref(), json, out).await
        }
        Command::Serve(args) => crate::serve_cmd::run(store::open(&url).await?, args).await,
        Command::Mcp { app, user } => mcp(&url, app, user).await,
        Command::PurgeExpired {
            keep_latest,
            max_age,
            app,
        } => {
            let default = crate::retention_cmd::policy(keep_latest, max_age.as_deref())?;
            let app = app.map(|a| AppName::new(&a)).transpose()?;
            let repo = store::open(&url).await?;
            crate::retention_cmd::purge(&repo, default, app.as_deref(), json, out).await
        }
        Command::Retention {
            session,
            keep_latest,
            max_age,
            clear,
            prune,
        } => {
            let set = crate::retention_cmd::policy(keep_latest, max_age.as_deref())?;
            let repo = store::open(&url).await?;
            crate::retention_cmd::run(&repo, &session, set, clear, prune, json, out).await
        }
        Command::Stats { session: None, .. } => stats(&*store::open(&url).await?, json, out).await,
        everyday => {
            let repo = store::open(&url).await?;
            let service: Arc<dyn SessionService> = Arc::new(DefaultSessionService::new(repo));
            crate::everyday::run(service, everyday, json, out).await
        }
    }
}

/// Runs a command that needs no store (keygen, api-key, completions,
/// man); hands back any other.
fn offline(command: Command, out: &mut dyn Write) -> Result<Option<Command>> {
    match command {
        Command::Keygen { id } => crate::keys_cmd::keygen(&id, out)?,
        Command::ApiKey {
            name,
            app,
            role,
            user,
        } => crate::serve_cmd::api_key(name, &app, role, user, out)?,
        // Rendered in memory first: clap_complete panics on a failed write,
        // and a reader that stops early (`| head`) is not a failure.
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "agent-session", &mut script);
            out.write_all(&script)?;
        }
        Command::Man => {
            let command = <Cli as clap::CommandFactory>::command();
            let mut page = Vec::new();
            clap_mangen::Man::new(command).render(&mut page)?;
            out.write_all(&page)?;
        }
        other => return Ok(Some(other)),
    }
    Ok(None)
}

/// `bench`: the reference workloads (an operator's tool: it writes and
/// removes sessions of its own on the repository).
async fn bench(url: &str, args: BenchArgs, json: bool, out: &mut dyn Write) -> Result<()> {
    let repo = store::open(url).await?;
    if args.workload == WorkloadArg::Recall {
        crate::bench::recall::run(&*repo, args.events, json, out).await
    } else {
        crate::bench::run(url, repo, &args, json, out).await
    }
}

/// `mcp`: the session tools for one user of one app, over stdin and stdout.
async fn mcp(url: &str, app: AppName, user: UserId) -> Result<()> {
    let repo = store::open(url).await?;
    let service = Arc::new(DefaultSessionService::new(repo));
    let tools = session_mcp::SessionTools::for_owner(service, Owner::new(app, user));
    session_mcp::serve_stdio(tools).await?;
    Ok(())
}

/// `stats` without a session: sessions and events of the whole store (an
/// operator's tool: it counts every owner's sessions on the repository).
async fn stats(repo: &dyn SessionRepository, json: bool, out: &mut dyn Write) -> Result<()> {
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
