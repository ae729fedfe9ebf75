//! Appends planned from the head this repository's last append to the
//! session left ([`RememberedHeads`]): one statement in one round trip,
//! instead of a transaction of four (begin, lock and read the held ids,
//! write, commit).
//!
//! The statement updates the session row only where every field the plan
//! was made from still holds (version, last seq, counters, next context
//! position, status, owner, not expired), and inserts the events only if
//! it did; an event the session already holds fails it whole (the unique
//! key on session and event id). A stale guess writes nothing, and the
//! append takes the transaction instead. The row
//! lock the update takes orders it with every other write to the session,
//! as `SELECT … FOR UPDATE` does in the transaction.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use deadpool_postgres::Client;
use session_core::plan::{AppendPlan, ContextTokens, EventBatch, Head, HeadChange};
use session_core::{AppendOutcome, Owner, SessionError, SessionId};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

pub(crate) use session_core::plan::RememberedHeads;

use crate::error::{StoreError, BACKEND, R};
use crate::events::{self, EventColumns};
use crate::quiet::Quiet;
use crate::sessions::context_positions;
use crate::sql::{micros, sql_int, sql_len, touch_sql};
use crate::tables::Tables;

/// The head an append left: what the next append plans from.
#[derive(Debug, Clone)]
pub(crate) struct LeftHead {
    /// The head fields the planner reads.
    pub(crate) head: Head,
    /// The next free context position.
    pub(crate) next_ctx_pos: i64,
    /// The session's owner.
    pub(crate) owner: Owner,
}

impl LeftHead {
    /// The head `change` leaves on `head`, with the next free context position `next_ctx_pos`.
    pub(crate) fn after(
        head: &Head,
        change: &HeadChange<'_>,
        next_ctx_pos: i64,
        owner: Owner,
    ) -> Self {
        let head = head.advanced(change);
        Self {
            head,
            next_ctx_pos,
            owner,
        }
    }
}

/// The statement: `tokens` is how `context_tokens` takes `$18`.
///
/// The row is found by its primary key alone: the owner and status are
/// compared with `IS NOT DISTINCT FROM`, which no index serves (compared
/// with `=`, a plan made before the table had statistics walked the owner
/// index through every session of the user). An event the session already
/// holds is caught by the events table's unique key on (session, id), and
/// the statement fails as a whole (a lookup of the batch's ids in the same
/// statement was planned, on a new table, to read every id of the session).
fn statement(t: &Tables, tokens: &str) -> String {
    let (names, unnest) = events::insert_columns(2);
    format!(
        "WITH head AS (UPDATE {s} SET version = $14, last_seq = $15, next_ctx_pos = $16, \
         event_count = event_count + $17, context_tokens = {tokens}, {touch}, \
         event_bytes = event_bytes + $20 \
         WHERE id = $1 AND version = $21 AND last_seq = $22 AND next_ctx_pos = $23 \
         AND event_count = $25 AND event_bytes = $26 \
         AND (status, app, user_id) IS NOT DISTINCT FROM ($24, $27, $28) \
         AND (expires_at IS NULL OR expires_at > $19) \
         RETURNING id) \
         INSERT INTO {e} ({names}) SELECT head.id, u.* FROM head, {unnest} AS u",
        s = t.sessions,
        e = t.events,
        touch = touch_sql("$19"),
    )
}

/// Appends `batch` to session `id` as planned from `guess`, if the guess
/// still holds: the outcome and the head it left, or `None` when the
/// guess is stale or the plan needs what only the transaction reads (the
/// session's state, an event it may hold, a refusal to explain), and
/// nothing was written.
pub(crate) async fn append(
    c: &Client,
    t: &Tables,
    guess: &LeftHead,
    owner: Option<&Owner>,
    batch: &EventBatch,
    now: DateTime<Utc>,
) -> R<Option<(AppendOutcome, LeftHead)>> {
    if owner.is_some_and(|o| !o.may_access(&guess.owner)) {
        return Ok(None);
    }
    let plan = match AppendPlan::new(&guess.head, batch, &HashMap::new()) {
        Ok(plan) if !plan.is_noop() => plan,
        _ => return Ok(None),
    };
    let change = plan.head_change();
    if !change.state.is_empty() {
        return Ok(None);
    }
    let (first, next_ctx_pos) = context_positions(guess.next_ctx_pos, plan.new.len())?;
    let rows = events::new_rows(batch, &plan.new, Some(first));
    let columns = EventColumns::new(&rows)?;
    let (tokens_sql, tokens) = match change.context_tokens {
        ContextTokens::Add(n) => ("context_tokens + $18", n),
        ContextTokens::Set(n) => ("$18", n),
    };
    let stmt = c.prepare_cached(&statement(t, tokens_sql)).await?;
    let head = &guess.head;
    let id: &SessionId = &head.id;
    let session = id.as_str();
    let (status, app, user) = (
        head.status.as_str(),
        guess.owner.app.as_str(),
        guess.owner.user.as_str(),
    );
    let (version, last_seq, added, tokens, at, added_bytes) = (
        sql_int(change.version),
        sql_int(change.last_seq),
        sql_len(change.added()),
        sql_int(tokens),
        micros(now),
        sql_int(change.added_bytes),
    );
    let (was_version, was_last_seq, was_count, was_bytes) = (
        sql_int(head.version),
        sql_int(head.last_seq),
        sql_int(head.event_count),
        sql_int(head.event_bytes),
    );
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&session];
    params.extend(columns.params());
    params.extend([
        &version as &(dyn ToSql + Sync),
        &last_seq,
        &next_ctx_pos,
        &added,
        &tokens,
        &at,
        &added_bytes,
        &was_version,
        &was_last_seq,
        &guess.next_ctx_pos,
        &status,
        &was_count,
        &was_bytes,
        &app,
        &user,
    ]);
    let written = match c.run(&stmt, &params).await {
        Ok(n) => n,
        // The session holds one of the events: nothing was written.
        Err(StoreError::Pg(e)) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => return Ok(None),
        Err(e) => return Err(e),
    };
    if written == 0 {
        return Ok(None);
    }
    if written != u64::try_from(rows.len()).unwrap_or(u64::MAX) {
        return Err(SessionError::backend(
            BACKEND,
            format!(
                "appending {} events to session {id} wrote {written} rows",
                rows.len()
            ),
        )
        .into());
    }
    let left = LeftHead::after(head, &change, next_ctx_pos, guess.owner.clone());
    Ok(Some((plan.outcome(), left)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use session_core::{Message, NewSession, SessionEvent, SessionRepository};

    use super::*;
    use crate::PostgresRepository;

    fn url() -> String {
        std::env::var("POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
    }

    fn batch(events: Vec<SessionEvent>) -> EventBatch {
        EventBatch::new(events, &session_core::Limits::default()).unwrap()
    }

    /// Runs the one-statement append from `guess`: `Some(seqs)` if it wrote.
    async fn from_guess(
        repo: &PostgresRepository,
        guess: &LeftHead,
        owner: Option<&Owner>,
        events: Vec<SessionEvent>,
    ) -> Option<Vec<u64>> {
        let c = repo.client().await.unwrap();
        let now = repo.clock.now();
        let events = batch(events);
        let out = append(&c, &repo.tables, guess, owner, &events, now);
        out.await.unwrap().map(|(outcome, _)| outcome.seqs)
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_guess_writes_only_while_every_field_it_planned_from_holds() {
        let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
        let connect = || {
            PostgresRepository::builder(url())
                .schema(schema.clone())
                .connect()
        };
        let Ok(mine) = connect().await else {
            return session_testkit::skip::<()>("postgres", "no PostgreSQL answers", false)
                .unwrap_or(());
        };
        let other = connect().await.unwrap();
        let s = mine
            .create(NewSession::new("app", "u", chrono::Utc::now()).unwrap())
            .await
            .unwrap();
        let first = SessionEvent::new(Message::user("first"));
        mine.append(&s.id, vec![first.clone()]).await.unwrap();
        let guess = mine.remembered.take(s.id.as_str()).unwrap();
        assert_eq!(guess.head.last_seq, 1);

        // The batch holds an event the session has: the transaction decides.
        assert_eq!(
            from_guess(&mine, &guess, None, vec![first.clone()]).await,
            None
        );
        // Another owner: the transaction answers it (`NotFound`).
        let stranger = Owner::parse("app", "someone-else").unwrap();
        let second = || vec![SessionEvent::new(Message::user("second"))];
        assert_eq!(
            from_guess(&mine, &guess, Some(&stranger), second()).await,
            None
        );
        // The guess holds: one statement writes the events and moves the head.
        let owner = Owner::parse("app", "u").unwrap();
        assert_eq!(
            from_guess(&mine, &guess, Some(&owner), second()).await,
            Some(vec![2])
        );
        // The head has moved since: the same guess is stale and writes nothing.
        assert_eq!(from_guess(&mine, &guess, None, second()).await, None);
        let stored = mine.get(&s.id).await.unwrap();
        assert_eq!(
            (stored.event_count, stored.version),
            (2, guess.head.version + 1)
        );

        // Another repository appends: the head `mine` remembers is stale,
        // and its next append still takes the next seq, through the transaction.
        mine.append(&s.id, second()).await.unwrap();
        other.append(&s.id, second()).await.unwrap();
        let next = mine.append(&s.id, second()).await.unwrap();
        assert_eq!(next.seqs, [5]);
        // An event sent again is answered from the archive, not written twice.
        let again = mine.append(&s.id, vec![first]).await.unwrap();
        assert_eq!(again.seqs, [1]);
        assert_eq!(mine.get(&s.id).await.unwrap().event_count, 5);
        mine.drop_schema().await.unwrap();
    }
}
