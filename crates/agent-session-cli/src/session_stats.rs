//! `stats SESSION`: a session's size, how its tokens are counted, and the
//! model usage recorded with its answers.

use std::io::Write;

use agent_session::compaction::estimator_for_model;
use agent_session::{
    EventFilter, EventView, Owner, SessionEvent, SessionId, SessionService, TokenEstimator,
    UsageTotals,
};
use anyhow::Result;
use serde_json::json;

/// Every event of a view, read through the service page by page.
async fn all_events(
    service: &dyn SessionService,
    owner: &Owner,
    id: &SessionId,
    view: EventView,
) -> Result<Vec<SessionEvent>> {
    let mut events = Vec::new();
    let mut filter = EventFilter::default().view(view).page(0, 1000);
    loop {
        let page = service.events(owner, id, &filter).await?;
        let next = page.next_after();
        events.extend(page.items);
        match next {
            Some(seq) => filter = filter.after(seq),
            None => return Ok(events),
        }
    }
}

/// Prints one session's figures.
pub(crate) async fn run(
    service: &dyn SessionService,
    id: &SessionId,
    model: Option<&str>,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let session = service.locate(id).await?;
    let owner = Owner::of(&session);
    let archive = all_events(service, &owner, id, EventView::Archive).await?;
    let context = all_events(service, &owner, id, EventView::Context).await?;
    let usage = service.usage(&owner, id).await?;
    // The store counts with the heuristic at append; `--model` adds the
    // model's own count of the same context.
    let (store_estimator, store_name) = estimator_for_model(None)?;
    let stored: u64 = context.iter().map(|e| u64::from(e.token_estimate)).sum();
    let by_model = match model {
        Some(m) => {
            let (estimator, name) = estimator_for_model(Some(m))?;
            Some((m, name, count(estimator.as_ref(), &context)))
        }
        None => None,
    };
    let recount = count(store_estimator.as_ref(), &context);
    if json {
        let by_invocation: Vec<_> = usage
            .by_invocation
            .iter()
            .map(|(inv, t)| json!({"invocation_id": inv, "usage": t}))
            .collect();
        writeln!(
            out,
            "{}",
            json!({
                "session": id.as_str(),
                "events": archive.len(),
                "context_events": context.len(),
                "stored_bytes": session.event_bytes,
                "context_tokens": session.context_tokens,
                "estimator": store_name,
                "model_count": by_model.as_ref().map(|(m, name, n)| json!({"model": m, "estimator": name, "tokens": n})),
                "usage": {"total": usage.total, "by_model": usage.by_model, "by_invocation": by_invocation,
                          "unreadable_seqs": usage.unreadable},
            })
        )?;
        return Ok(());
    }
    writeln!(out, "session         {id}")?;
    writeln!(
        out,
        "events          {} ({} in the context; {} bytes stored)",
        archive.len(),
        context.len(),
        session.event_bytes
    )?;
    writeln!(
        out,
        "context tokens  {} (estimator: {store_name}; recounted now: {recount}, stored at append: {stored})",
        session.context_tokens
    )?;
    if let Some((m, name, n)) = by_model {
        writeln!(out, "  for {m}        {n} ({name})")?;
    }
    if usage.total.calls == 0 {
        writeln!(out, "model usage     none recorded")?;
    } else {
        writeln!(out, "model usage     {}", totals(&usage.total))?;
        for (m, t) in &usage.by_model {
            writeln!(out, "  {m}: {}", totals(t))?;
        }
        writeln!(out, "per invocation")?;
        for (inv, t) in &usage.by_invocation {
            writeln!(
                out,
                "  {}: {}",
                inv.as_deref().unwrap_or("(none)"),
                totals(t)
            )?;
        }
    }
    if !usage.unreadable.is_empty() {
        writeln!(
            out,
            "unreadable usage records at seqs {:?}",
            usage.unreadable
        )?;
    }
    Ok(())
}

fn count(estimator: &dyn TokenEstimator, events: &[SessionEvent]) -> u64 {
    events.iter().fold(0u64, |sum, e| {
        sum.saturating_add(u64::from(estimator.estimate_message(&e.message)))
    })
}

fn totals(t: &UsageTotals) -> String {
    let calls = if t.calls == 1 { "call" } else { "calls" };
    format!(
        "{} {calls}, {} input ({} cached), {} output tokens",
        t.calls, t.input_tokens, t.cached_tokens, t.output_tokens
    )
}
