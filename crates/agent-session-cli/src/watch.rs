//! `agent-session watch SESSION`: prints a session's events as they arrive.

use std::io::Write;

use agent_session::{EventFilter, Owner, SessionService};
use agent_session_cli::args::parse_interval;
use anyhow::Result;

use crate::cli::WatchArgs;
use crate::output::{event_json, event_line};

/// Prints the last events of the archive, then polls for newer ones (by
/// seq: every event once, in order), until `exit_after` events were
/// printed or the process is interrupted. A session deleted meanwhile
/// ends the watch with its `NotFound`.
pub(crate) async fn run(
    service: &dyn SessionService,
    args: WatchArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let interval = parse_interval("--interval", &args.interval)?;
    let owner = Owner::of(&service.locate(&args.session).await?);
    let id = &args.session;
    let mut printed = 0usize;
    let done = |printed: usize| args.exit_after.is_some_and(|n| printed >= n);
    let room = |printed: usize| args.exit_after.map(|n| n.saturating_sub(printed));
    let mut after = 0u64;
    if args.last > 0 {
        let filter = EventFilter::archive().last_n(args.last.min(1000));
        let first = service.events(&owner, id, &filter).await?;
        for e in &first.items {
            after = after.max(e.seq);
        }
        printed += print(&first.items, json, out, room(printed))?;
    } else {
        // Start after everything already stored.
        let filter = EventFilter::archive().last_n(1);
        let newest = service.events(&owner, id, &filter).await?;
        after = newest.items.last().map_or(0, |e| e.seq);
    }
    while !done(printed) {
        tokio::time::sleep(interval).await;
        loop {
            let filter = EventFilter::archive().after(after).page(0, 500);
            let page = service.events(&owner, id, &filter).await?;
            if let Some(e) = page.items.last() {
                after = e.seq;
            }
            printed += print(&page.items, json, out, room(printed))?;
            if !page.has_more || done(printed) {
                break;
            }
        }
    }
    Ok(())
}

/// Prints up to `room` of `events` (all if `None`), flushing; how many it printed.
fn print(
    events: &[agent_session::SessionEvent],
    json: bool,
    out: &mut dyn Write,
    room: Option<usize>,
) -> Result<usize> {
    let take = room.unwrap_or(usize::MAX).min(events.len());
    for e in events.iter().take(take) {
        if json {
            writeln!(out, "{}", event_json(e))?;
        } else {
            writeln!(out, "{}", event_line(e))?;
        }
    }
    out.flush()?;
    Ok(take)
}
