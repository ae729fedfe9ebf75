//! `search`: hits with seq, role, time and a snippet, a total and a "more"
//! line; `--json` for programs; `--tool` for exactly what the
//! `conversation_search` tool returns (bounded; `--seed-exact` for the
//! seed's unbounded output).

use std::io::Write;
use std::sync::Arc;

use agent_session::compaction::{ConversationSearch, ToolContext};
use agent_session::{MatchTerms, Owner, Page, SearchHit, SearchMode, SearchQuery, SessionService};
use agent_session_cli::args::parse_time;
use anyhow::Result;
use serde_json::{json, Value};

use crate::cli::SearchArgs;

fn hit_json(h: &SearchHit) -> Value {
    json!({
        "session_id": h.session_id,
        "seq": h.event.seq,
        "timestamp": h.event.timestamp.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        "role": h.event.role().as_str(),
        "score": h.score,
        "snippet": h.snippet,
        "text": h.event.message.text(),
    })
}

/// The line under the hits: how many there are and how to see more.
fn summary_line(p: &Page<SearchHit>) -> String {
    let shown = p.items.len();
    let first = p.page.saturating_mul(p.page_size);
    let next = format!("use --page {}", p.page.saturating_add(1));
    match p.total {
        Some(t) if t.exact => {
            let after = usize::try_from(t.count)
                .unwrap_or(usize::MAX)
                .saturating_sub(first.saturating_add(shown));
            if after > 0 {
                format!("{shown} of {} hits — {after} more, {next}", t.count)
            } else {
                format!("{shown} of {} hits", t.count)
            }
        }
        Some(t) => format!("{shown} of at least {} hits — more, {next}", t.count),
        None if p.has_more => format!("{shown} hits — more, {next}"),
        None => format!("{shown} hits"),
    }
}

/// What an empty page says: no hits at all, or a page past the last one
/// (and which pages there are).
fn empty_line(p: &Page<SearchHit>, query: &str) -> String {
    match p.total {
        Some(t) if t.count > 0 && p.page > 0 => {
            let size = u64::try_from(p.page_size.max(1)).unwrap_or(u64::MAX);
            let last = t.count.saturating_sub(1) / size;
            let of = if t.exact { "" } else { "at least " };
            format!(
                "page {} is past the last: {of}{} hits for {query:?} fill pages 0–{last} of {}",
                p.page, t.count, p.page_size
            )
        }
        _ if p.page > 0 => format!(
            "no hits for {query:?} on page {} (past the last page?)",
            p.page
        ),
        _ => format!("no hits for {query:?}"),
    }
}

/// Runs `search` through the service, as the session's owner.
pub(crate) async fn run(
    service: Arc<dyn SessionService>,
    args: SearchArgs,
    json_out: bool,
    out: &mut dyn Write,
) -> Result<()> {
    // Negative pages read as 0; sizes are clamped, never an overflow.
    let page = usize::try_from(args.page.max(0)).unwrap_or(usize::MAX);
    let page_size = args.page_size.clamp(1, 1000);
    let since = args
        .since
        .as_deref()
        .map(|t| parse_time("--since", t))
        .transpose()?;
    let terms = if args.any {
        MatchTerms::Any
    } else {
        MatchTerms::All
    };
    let s = service.locate(&args.session).await?;
    let owner = Owner::of(&s);
    if args.tool {
        let mut tool = ConversationSearch::new(service).with_page_size(page_size);
        if args.seed_exact {
            tool = tool.seed_exact();
        }
        let ctx = ToolContext {
            owner,
            session_id: s.id,
        };
        let mut call = json!({"query": args.query, "page": args.page.max(0)});
        // The tool's own optional arguments; left out, it is the seed's call.
        if args.any {
            call["match"] = json!("any");
        }
        if let Some(t) = since {
            call["since"] = json!(t.to_rfc3339());
        }
        writeln!(out, "{}", tool.call(&ctx, &call).await?)?;
        return Ok(());
    }
    let q = if args.across {
        SearchQuery::for_user(s.app.as_str(), s.user_id.as_str(), &args.query)
    } else {
        SearchQuery::in_session(s.id.as_str(), &args.query)
    };
    let mode = if args.ranked {
        SearchMode::Ranked
    } else {
        SearchMode::Literal
    };
    let mut q = q.page(page, page_size).mode(mode).matching(terms);
    if let Some(t) = since {
        q = q.since(t);
    }
    let page = service.search(&owner, &q).await?;
    if json_out {
        let total = page
            .total
            .map(|t| json!({"count": t.count, "exact": t.exact}));
        let body = json!({
            "hits": page.items.iter().map(hit_json).collect::<Vec<_>>(),
            "page": page.page,
            "page_size": page.page_size,
            "has_more": page.has_more,
            "total": total,
        });
        writeln!(out, "{body}")?;
        return Ok(());
    }
    if page.items.is_empty() {
        writeln!(out, "{}", empty_line(&page, &args.query))?;
    }
    for h in &page.items {
        let mut line = format!("#{:<5}", h.event.seq);
        if args.across {
            line.push_str(&format!(" {}", h.session_id));
        }
        line.push_str(&format!(
            " {} {:<9}",
            h.event.timestamp.format("%Y-%m-%d %H:%M:%S"),
            h.event.role().as_str()
        ));
        if let Some(score) = h.score {
            line.push_str(&format!(" {score:>6.2}"));
        }
        writeln!(out, "{line} {}", h.snippet)?;
    }
    if !page.items.is_empty() {
        writeln!(out, "{}", summary_line(&page))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_session::Total;

    fn page(page: usize, total: Option<Total>, has_more: bool) -> Page<SearchHit> {
        let mut p = Page::empty(page, 10);
        p.total = total;
        p.has_more = has_more;
        p
    }

    #[test]
    fn an_empty_page_past_the_last_says_which_pages_hold_the_hits() {
        assert_eq!(
            empty_line(&page(9, Some(Total::exact(59)), false), "alpha"),
            "page 9 is past the last: 59 hits for \"alpha\" fill pages 0–5 of 10"
        );
        assert_eq!(
            empty_line(&page(0, Some(Total::exact(0)), false), "alpha"),
            "no hits for \"alpha\""
        );
        assert_eq!(
            empty_line(&page(2, Some(Total::exact(0)), false), "alpha"),
            "no hits for \"alpha\" on page 2 (past the last page?)"
        );
    }

    #[test]
    fn the_summary_says_how_many_more_and_which_page() {
        let p = page(1, Some(Total::exact(37)), true);
        assert_eq!(summary_line(&p), "0 of 37 hits — 27 more, use --page 2");
        let p = page(0, Some(Total::at_least(510)), true);
        assert_eq!(
            summary_line(&p),
            "0 of at least 510 hits — more, use --page 1"
        );
        assert_eq!(
            summary_line(&page(3, Some(Total::exact(30)), false)),
            "0 of 30 hits"
        );
        assert_eq!(
            summary_line(&page(0, None, true)),
            "0 hits — more, use --page 1"
        );
    }
}
