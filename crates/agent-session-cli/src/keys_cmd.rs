//! `keygen` and `rekey`: the keyring of an encrypted store.

use std::io::Write;

use agent_session::encryption::{Keyring, Rekeyed};
use agent_session::{SessionError, SessionId};
use agent_session_cli::store_url::redact;
use anyhow::{Context, Result};
use serde_json::json;

use crate::store;

/// `keygen ID`: a new random keyring entry.
pub(crate) fn keygen(id: &str, out: &mut dyn Write) -> Result<()> {
    let entry = Keyring::generate_entry(id);
    // Parsing checks the id as a keyring file will.
    Keyring::parse(&entry)?;
    writeln!(out, "{entry}")?;
    Ok(())
}

/// `rekey [SESSION]...`: every session (or those given) moved to the
/// current key; an operator's tool, on the encrypted repository.
pub(crate) async fn rekey(
    url: &str,
    sessions: Vec<SessionId>,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let ring = store::keyring()?.ok_or_else(|| {
        SessionError::invalid(
            "keyring",
            "rekey needs the keyring: --keys-file FILE or AGENT_SESSION_KEYS",
        )
    })?;
    let current = ring.current_id().to_owned();
    let sealed = agent_session::open_encrypted(url, ring)
        .await
        .with_context(|| format!("cannot open store {}", redact(url)))?;
    let ids = if sessions.is_empty() {
        crate::transfer::all_ids(sealed.inner().as_ref(), None).await?
    } else {
        sessions
    };
    let (mut rekeyed, mut current_already, mut busy, mut failed) = (0_u64, 0_u64, 0_u64, 0_u64);
    for id in &ids {
        match sealed.rekey(id).await {
            Ok(Rekeyed::Rekeyed) => rekeyed = rekeyed.saturating_add(1),
            Ok(Rekeyed::UpToDate) => current_already = current_already.saturating_add(1),
            Ok(Rekeyed::Busy) => busy = busy.saturating_add(1),
            Err(e) => {
                failed = failed.saturating_add(1);
                crate::output::report(format_args!("session {id}: {e}"));
            }
        }
    }
    if json {
        writeln!(
            out,
            "{}",
            json!({"key": current, "rekeyed": rekeyed, "up_to_date": current_already,
                   "busy": busy, "failed": failed})
        )?;
    } else {
        writeln!(
            out,
            "rekeyed {rekeyed} sessions to key {current} ({current_already} already up to date, {busy} busy, {failed} failed)"
        )?;
        if busy > 0 {
            writeln!(
                out,
                "sessions that were busy changed meanwhile: run rekey again"
            )?;
        }
    }
    if failed > 0 {
        anyhow::bail!("{failed} sessions could not be rekeyed (see above)");
    }
    Ok(())
}
