//! `retention` (a session's own archive policy) and the archive prune of
//! `purge-expired`: operator's tools, on the repository (`purge-expired`
//! works store-wide; `retention` names a session by id whoever owns it).

use std::io::Write;
use std::sync::Arc;

use agent_session::retention::{
    prune_archive, prune_archives, ArchiveRetention, RetentionRules, RETENTION_KEY,
};
use agent_session::{Clock, SessionId, SessionRepository, SessionUpdate, SystemClock};
use agent_session_cli::args::parse_max_age;
use anyhow::Result;
use serde_json::json;

/// The policy the flags describe, if any: `--keep-latest` and/or `--max-age`.
pub(crate) fn policy(
    keep_latest: Option<u64>,
    max_age: Option<&str>,
) -> Result<Option<ArchiveRetention>> {
    let age = max_age.map(parse_max_age).transpose()?;
    Ok(match (keep_latest, age) {
        (None, None) => None,
        (Some(n), None) => Some(ArchiveRetention::keep_latest(n)),
        (None, Some(age)) => Some(ArchiveRetention::younger_than(age)?),
        (Some(n), Some(age)) => Some(ArchiveRetention::younger_than(age)?.and_keep_latest(n)),
    })
}

/// A policy as people read it.
fn describe(policy: Option<&ArchiveRetention>) -> String {
    let Some(p) = policy else {
        return "no retention policy: the archive keeps every event".to_owned();
    };
    let mut parts = Vec::new();
    if let Some(n) = p.latest() {
        parts.push(format!("the latest {n} events"));
    }
    if let Some(age) = p.max_age() {
        parts.push(format!(
            "events younger than {}",
            humantime::format_duration(age)
        ));
    }
    format!("keeps {}", parts.join(" and "))
}

/// `retention S [--keep-latest N] [--max-age D] [--clear] [--prune]`.
pub(crate) async fn run(
    repo: &Arc<dyn SessionRepository>,
    session: &SessionId,
    set: Option<ArchiveRetention>,
    clear: bool,
    prune: bool,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let mut s = repo.get(session).await?;
    if set.is_some() || clear {
        let mut metadata = s.metadata.clone();
        match set {
            Some(p) => metadata.insert(RETENTION_KEY.to_owned(), p.to_metadata()),
            None => metadata.remove(RETENTION_KEY),
        };
        let update = SessionUpdate::new()
            .metadata(metadata)
            .expect_version(s.version);
        s = repo.update(session, update).await?;
    }
    let policy = ArchiveRetention::of_session(&s)?;
    let removed = match (&policy, prune) {
        (Some(p), true) => {
            prune_archive(repo.as_ref(), session, p, SystemClock.now())
                .await?
                .removed
        }
        _ => 0,
    };
    if json {
        let mut line = json!({"session": session, "retention": policy.map(|p| p.to_metadata())});
        if prune {
            line["pruned"] = json!(removed);
        }
        writeln!(out, "{line}")?;
    } else {
        writeln!(out, "{session} {}", describe(policy.as_ref()))?;
        if prune {
            writeln!(out, "pruned {removed} archived events")?;
        }
    }
    Ok(())
}

/// `purge-expired`: expired sessions go, then archives are pruned by each
/// session's own policy or the `default` given (for `app` only, if given).
pub(crate) async fn purge(
    repo: &Arc<dyn SessionRepository>,
    default: Option<ArchiveRetention>,
    app: Option<&str>,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let now = SystemClock.now();
    let purged = repo.purge_expired(now).await?;
    let rules = match (default, app) {
        (Some(p), Some(app)) => RetentionRules::new().app(app, p),
        (Some(p), None) => RetentionRules::new().every_app(p),
        (None, _) => RetentionRules::new(),
    };
    let report = prune_archives(repo.as_ref(), &rules, app, now).await?;
    if json {
        writeln!(
            out,
            "{}",
            json!({"purged": purged, "pruned_events": report.removed,
                   "pruned_sessions": report.pruned_sessions, "sessions_with_retention": report.sessions})
        )?;
    } else {
        writeln!(out, "purged {purged} expired sessions")?;
        if report.sessions > 0 {
            writeln!(
                out,
                "pruned {} archived events from {} of {} sessions with a retention policy",
                report.removed, report.pruned_sessions, report.sessions
            )?;
        }
    }
    Ok(())
}
