//! The session service as named JSON operations: what the language
//! bindings (the Python and Node packages) call, so each of them is only
//! glue around one table. An operation takes its arguments as a JSON
//! object and answers JSON text; every one parses its arguments into the
//! service's types, calls the service, and renders the answer (`items`
//! with `with_session` answers the session too, through the service's
//! `session_items`: an adapter's read of a whole conversation in one trip
//! across).
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! use agent_session::{ops, DefaultSessionService, InMemoryRepository};
//! let service = DefaultSessionService::new(InMemoryRepository::new().shared());
//! let created = ops::call(&service, "create", r#"{"app": "support", "user_id": "ada"}"#).await?;
//! let id = serde_json::from_str::<serde_json::Value>(&created).unwrap()["id"].clone();
//! let args = serde_json::json!({"app": "support", "user_id": "ada", "session_id": id,
//!     "events": [{"id": "0192f0c4-0000-7000-8000-000000000001",
//!                 "timestamp": "2026-01-01T00:00:00Z",
//!                 "message": {"role": "user", "content": "hi"}}]});
//! ops::call(&service, "append", &args.to_string()).await?;
//! let context = ops::call(&service, "messages", &args.to_string()).await?;
//! assert!(context.contains("hi"));
//! # Ok::<(), agent_session::SessionError>(())
//! # }).unwrap();
//! ```

use std::future::Future;
use std::pin::Pin;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use session_compaction::StrategySpec;
use session_core::{
    ContextOptions, KeyedItem, MatchTerms, Owner, Result, SearchMode, SearchQuery, Session,
    SessionError, SessionEvent, SessionId, SessionQuery, SessionService, SessionUpdate, StateMap,
};
use session_wire::{
    CreateBody, EventParams, ForkBody, ResetBody, ResolveBody, ResolvedBody, RewindBody,
    SessionListParams,
};

/// An operation's answer, to come.
type Answer<'a> = Pin<Box<dyn Future<Output = Result<String>> + Send + 'a>>;

/// An operation: the service and the arguments, to the answer.
type Op = for<'a> fn(&'a dyn SessionService, Value) -> Answer<'a>;

/// Every operation by name.
const OPS: &[(&str, Op)] = &[
    ("create", |s, a| Box::pin(create(s, a))),
    ("get", |s, a| Box::pin(get(s, a))),
    ("list", |s, a| Box::pin(list(s, a))),
    ("list_all", |s, a| Box::pin(list_all(s, a))),
    ("update", |s, a| Box::pin(update(s, a))),
    ("delete", |s, a| Box::pin(delete(s, a))),
    ("end", |s, a| Box::pin(end(s, a))),
    ("reopen", |s, a| Box::pin(reopen(s, a))),
    ("resolve", |s, a| Box::pin(resolve(s, a))),
    ("reset", |s, a| Box::pin(reset(s, a))),
    ("append", |s, a| Box::pin(append(s, a))),
    ("events", |s, a| Box::pin(events(s, a))),
    ("items", |s, a| Box::pin(items(s, a))),
    ("messages", |s, a| Box::pin(messages(s, a))),
    ("search", |s, a| Box::pin(search(s, a))),
    ("compact", |s, a| Box::pin(compact(s, a))),
    ("replace_context", |s, a| Box::pin(replace_context(s, a))),
    ("rewind", |s, a| Box::pin(rewind(s, a))),
    ("pop", |s, a| Box::pin(pop(s, a))),
    ("fork", |s, a| Box::pin(fork(s, a))),
    ("state", |s, a| Box::pin(state(s, a))),
    ("patch_state", |s, a| Box::pin(patch_state(s, a))),
    ("shared_state", |s, a| Box::pin(shared_state(s, a))),
    ("usage", |s, a| Box::pin(usage(s, a))),
    ("erase_user", |s, a| Box::pin(erase_user(s, a))),
];

/// The names of the operations [`call`] runs.
pub fn names() -> impl Iterator<Item = &'static str> {
    OPS.iter().map(|(name, _)| *name)
}

/// Runs operation `op` with `args` (a JSON object as text) on `service`;
/// the answer is JSON text. An unknown operation or arguments that do not
/// parse are `InvalidInput`.
pub async fn call(service: &dyn SessionService, op: &str, args: &str) -> Result<String> {
    let args: Value = serde_json::from_str(args)
        .map_err(|e| SessionError::invalid_because("arguments", "not JSON", e))?;
    let Some((_, run)) = OPS.iter().find(|(name, _)| *name == op) else {
        return Err(SessionError::invalid(
            "operation",
            format!("{op:?} is not an operation of the store"),
        ));
    };
    run(service, args).await
}

/// The owner every owner-scoped operation names: `app` and `user_id`.
#[derive(Deserialize)]
struct OwnerArgs {
    app: String,
    user_id: String,
}

/// The owner and the session an operation names.
#[derive(Deserialize)]
struct SessionArgs {
    #[serde(flatten)]
    owner: OwnerArgs,
    session_id: String,
}

fn parse<T: DeserializeOwned>(args: &Value) -> Result<T> {
    T::deserialize(args).map_err(|e| SessionError::invalid_because("arguments", e.to_string(), e))
}

fn owner(args: &Value) -> Result<Owner> {
    let who: OwnerArgs = parse(args)?;
    Owner::parse(&who.app, &who.user_id)
}

fn session(args: &Value) -> Result<(Owner, SessionId)> {
    let at: SessionArgs = parse(args)?;
    Ok((
        Owner::parse(&at.owner.app, &at.owner.user_id)?,
        SessionId::new(at.session_id)?,
    ))
}

/// The part of `args` under `key` (`T::default()` when absent).
fn part<T: DeserializeOwned + Default>(args: &Value, key: &str) -> Result<T> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(T::default()),
        Some(v) => T::deserialize(v)
            .map_err(|e| SessionError::invalid_because(key.to_owned(), e.to_string(), e)),
    }
}

/// The part of `args` under `key`, which must be there.
fn required<T: DeserializeOwned>(args: &Value, key: &str) -> Result<T> {
    let v = args
        .get(key)
        .ok_or_else(|| SessionError::invalid(key.to_owned(), "is required"))?;
    T::deserialize(v).map_err(|e| SessionError::invalid_because(key.to_owned(), e.to_string(), e))
}

fn reply<T: Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| SessionError::serialization("answer", e))
}

async fn create(s: &dyn SessionService, args: Value) -> Result<String> {
    let owner = owner(&args)?;
    let body: CreateBody = part(&args, "session")?;
    reply(&s.create(body.into_request(&owner)?).await?)
}

async fn get(s: &dyn SessionService, args: Value) -> Result<String> {
    let (owner, id) = session(&args)?;
    reply(&s.get(&owner, &id).await?)
}

async fn list(s: &dyn SessionService, args: Value) -> Result<String> {
    let owner = owner(&args)?;
    let params: SessionListParams = part(&args, "query")?;
    reply(&s.list(&owner, params.into_query()?).await?)
}

/// Every session the query matches, of any user (ADK lists an app's
/// sessions without naming a user).
async fn list_all(s: &dyn SessionService, args: Value) -> Result<String> {
    let params: SessionListParams = part(&args, "query")?;
    let query: SessionQuery = params.into_query()?;
    reply(&s.list_all(query).await?)
}

async fn update(s: &dyn SessionService, args: Value) -> Result<String> {
    let (owner, id) = session(&args)?;
    let update: SessionUpdate = part(&args, "update")?;
    reply(&s.update(&owner, &id, update).await?)
}

async fn delete(s: &dyn SessionService, args: Value) -> Result<String> {
    let (owner, id) = session(&args)?;
    s.delete(&owner, &id).await?;
    Ok("null".to_owned())
}

async fn end(s: &dyn SessionService, args: Value) -> Result<String> {
    let (owner, id) = session(&args)?;
    reply(&s.end(&owner, &id).await?)
}

async fn reopen(s: &dyn SessionService, args: Value) -> Result<String> {
    let (owner, id) = session(&args)?;
    reply(&s.reopen(&owner, &id).await?)
}

async fn resolve(s: &dyn SessionService, args: Value) -> Result<String> {
    let owner = owner(&args)?;
    let body: ResolveBody = part(&args, "resolve")?;
    let (request, policy) = body.into_request(&owner)?;
    let resolved = s.resolve(&request, &policy).await?;
    reply(&ResolvedBody {
        session: resolved.session,
        is_new: resolved.is_new,
    })
}

/// Starts a key over: its active session ended, a new one answered.
async fn reset(s: &dyn SessionService, args: Value) -> Result<String> {
    let owner = owner(&args)?;
    let body: ResetBody = required(&args, "reset")?;
    reply(&s.reset(&body.into_request(&owner)?).await?)
}

async fn append(s: &dyn SessionService, args: Value) -> Result<String> {
    let (owner, id) = session(&args)?;
    let events: Vec<SessionEvent> = part(&args, "events")?;
    reply(&s.append_events(&owner, &id, events).await?)
}

async fn events(s: &dyn SessionService, args: Value) -> Result<String> {
    let (owner, id) = session(&args)?;
    let params: EventParams = part(&args, "filter")?;
    reply(&s.events(&owner, &id, &params.into_filter()?).await?)
}

/// An `items` answer: `items[i]` is the object event `i` holds under the
/// key, or `null` when it holds none (a summary), that event then being
/// in `events` as `[i, event]`. Flat, so a binding builds one object per
/// item and nothing around it.
#[derive(Serialize)]
struct KeptItems<'a> {
    /// The session, when the call asked for it (`with_session`).
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<Session>,
    items: Vec<Option<&'a RawValue>>,
    events: Vec<(usize, &'a SessionEvent)>,
    has_more: bool,
}

/// What a framework adapter's read needs of each event and nothing more:
/// the item it stored under a metadata key, not the event around it.
async fn items(s: &dyn SessionService, args: Value) -> Result<String> {
    let (owner, id) = session(&args)?;
    let key: String = required(&args, "key")?;
    let params: EventParams = part(&args, "filter")?;
    let filter = params.into_filter()?;
    // With the session: one read behind one owner check, an unknown
    // session the answer's error, as `get`'s.
    let (session, page) = if part::<bool>(&args, "with_session")? {
        let read = s.session_items(&owner, &id, &key, &filter).await?;
        (Some(read.session), read.items)
    } else {
        (None, s.items(&owner, &id, &key, &filter).await?)
    };
    let mut answer = KeptItems {
        session,
        items: Vec::with_capacity(page.items.len()),
        events: Vec::new(),
        has_more: page.has_more,
    };
    // The answer's size, known up front: no regrowing copies of it.
    let mut size = 64;
    for (i, item) in page.items.iter().enumerate() {
        match item {
            KeyedItem::Value(v) => {
                size += v.get().len() + 1;
                answer.items.push(Some(v));
            }
            KeyedItem::Event(e) => {
                answer.items.push(None);
                answer.events.push((i, e));
            }
        }
    }
    let mut out = Vec::with_capacity(size);
    serde_json::to_writer(&mut out, &answer)
        .map_err(|e| SessionError::serialization("an items answer", e))?;
    String::from_utf8(out).map_err(|e| SessionError::serialization("an items answer", e))
}

async fn messages(s: &dyn SessionService, args: Value) -> Result<String> {
    let (owner, id) = session(&args)?;
    let options = ContextOptions {
        branch: part(&args, "branch")?,
    };
    reply(&s.context(&owner, &id, &options).await?)
}

/// `search`'s arguments besides the owner.
#[derive(Deserialize)]
struct SearchArgs {
    query: String,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    ranked: bool,
    /// Any one term instead of every term.
    #[serde(default)]
    any: bool,
    /// Only events at or after this time (RFC 3339; null: no bound).
    #[serde(default)]
    since: Value,
    #[serde(default)]
    page: usize,
    #[serde(default = "ten")]
    page_size: usize,
}

fn ten() -> usize {
    10
}

async fn search(s: &dyn SessionService, args: Value) -> Result<String> {
    let owner = owner(&args)?;
    let a: SearchArgs = parse(&args)?;
    let query = match a.session_id {
        Some(id) => SearchQuery::in_session(SessionId::new(id)?.as_str(), a.query),
        None => SearchQuery::for_user(owner.app.as_str(), owner.user.as_str(), a.query),
    }
    .page(a.page, a.page_size);
    let mut query = if a.ranked {
        query.mode(SearchMode::Ranked)
    } else {
        query
    };
    if a.any {
        query = query.matching(MatchTerms::Any);
    }
    query.since = serde_json::from_value(a.since).map_err(|e| {
        SessionError::invalid_because(
            "since",
            "must be an RFC 3339 time such as 2026-01-01T00:00:00Z",
            e,
        )
    })?;
    reply(&s.search(&owner, &query).await?)
}

async fn compact(s: &dyn SessionService, args: Value) -> Result<String> {
    let (owner, id) = session(&args)?;
    let spec: StrategySpec = required(&args, "strategy")?;
    let compactor = spec.compactor()?;
    reply(&s.compact(&owner, &id, compactor.as_ref()).await?)
}

async fn replace_context(s: &dyn SessionService, args: Value) -> Result<String> {
    let (owner, id) = session(&args)?;
    let events: Vec<SessionEvent> = required(&args, "events")?;
    let expected: u64 = required(&args, "expected_version")?;
    reply(&s.replace_context(&owner, &id, events, expected).await?)
}

async fn rewind(s: &dyn SessionService, args: Value) -> Result<String> {
    let (owner, id) = session(&args)?;
    let body: RewindBody = required(&args, "rewind")?;
    let to = body.target()?;
    reply(&s.rewind(&owner, &id, &to).await?.session)
}

async fn pop(s: &dyn SessionService, args: Value) -> Result<String> {
    let (owner, id) = session(&args)?;
    reply(&s.pop(&owner, &id).await?)
}

async fn fork(s: &dyn SessionService, args: Value) -> Result<String> {
    let (owner, id) = session(&args)?;
    let body: ForkBody = required(&args, "fork")?;
    reply(&s.fork(&owner, &id, &body.at).await?)
}

async fn state(s: &dyn SessionService, args: Value) -> Result<String> {
    let (owner, id) = session(&args)?;
    reply(&s.state(&owner, &id).await?)
}

async fn patch_state(s: &dyn SessionService, args: Value) -> Result<String> {
    let (owner, id) = session(&args)?;
    let patch: StateMap = part(&args, "patch")?;
    let expected: Option<u64> = part(&args, "expected_version")?;
    reply(&s.patch_state(&owner, &id, &patch, expected).await?)
}

async fn shared_state(s: &dyn SessionService, args: Value) -> Result<String> {
    reply(&s.shared_state(&owner(&args)?).await?)
}

async fn usage(s: &dyn SessionService, args: Value) -> Result<String> {
    let (owner, id) = session(&args)?;
    reply(&s.usage(&owner, &id).await?)
}

async fn erase_user(s: &dyn SessionService, args: Value) -> Result<String> {
    reply(&s.erase_user(&owner(&args)?).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_has_one_name() {
        let mut seen = std::collections::HashSet::new();
        assert!(names().all(|n| seen.insert(n)));
    }

    #[test]
    fn reset_starts_the_key_over_and_resolve_finds_the_new_session() {
        let service = session_core::DefaultSessionService::new(
            session_core::InMemoryRepository::new().shared(),
        );
        let run = async {
            let resolve = r#"{"app": "support", "user_id": "ada", "resolve": {"key": "chat-1"}}"#;
            let first: Value = serde_json::from_str(&call(&service, "resolve", resolve).await?)
                .map_err(|e| SessionError::serialization("answer", e))?;
            let reset = r#"{"app": "support", "user_id": "ada", "reset": {"key": "chat-1"}}"#;
            let fresh: Value = serde_json::from_str(&call(&service, "reset", reset).await?)
                .map_err(|e| SessionError::serialization("answer", e))?;
            let again: Value = serde_json::from_str(&call(&service, "resolve", resolve).await?)
                .map_err(|e| SessionError::serialization("answer", e))?;
            let missing = call(&service, "reset", r#"{"app": "support", "user_id": "ada"}"#).await;
            Ok::<_, SessionError>((first, fresh, again, missing))
        };
        let (first, fresh, again, missing) = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap_or_else(|e| panic!("{e}"))
            .block_on(run)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(first["session"]["id"], fresh["id"], "a new session");
        assert_eq!(again["session"]["id"], fresh["id"]);
        assert_eq!(again["is_new"], false);
        assert!(missing.is_err_and(|e| e.to_string().contains("reset")));
    }

    #[test]
    fn items_with_session_answer_the_session_and_its_unknown_error() {
        let service = session_core::DefaultSessionService::new(
            session_core::InMemoryRepository::new().shared(),
        );
        let parse = |text: String| {
            serde_json::from_str::<Value>(&text)
                .map_err(|e| SessionError::serialization("answer", e))
        };
        let run = async {
            let session = r#"{"id": "s1", "state": {"topic": "plums"}}"#;
            let create = format!(r#"{{"app": "a", "user_id": "u", "session": {session}}}"#);
            call(&service, "create", &create).await?;
            let append = serde_json::json!({"app": "a", "user_id": "u", "session_id": "s1",
                "events": [{"id": "0192f0c4-0000-7000-8000-000000000001",
                    "timestamp": "2026-01-01T00:00:00Z",
                    "message": {"role": "user", "content": "hi"},
                    "metadata": {"item": {"n": 1}}}]});
            call(&service, "append", &append.to_string()).await?;
            let items = |id: &str, with_session: bool| {
                serde_json::json!({"app": "a", "user_id": "u", "session_id": id, "key": "item",
                    "with_session": with_session})
                .to_string()
            };
            let with = parse(call(&service, "items", &items("s1", true)).await?)?;
            let without = parse(call(&service, "items", &items("s1", false)).await?)?;
            let unknown = call(&service, "items", &items("s2", true)).await;
            Ok::<_, SessionError>((with, without, unknown))
        };
        let (with, without, unknown) = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap_or_else(|e| panic!("{e}"))
            .block_on(run)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(with["session"]["id"], "s1");
        assert_eq!(with["session"]["state"]["topic"], "plums");
        assert_eq!(with["items"], serde_json::json!([{"n": 1}]));
        assert!(without.get("session").is_none(), "only when asked");
        assert!(unknown.is_err_and(|e| e.kind() == session_core::ErrorKind::NotFound));
    }

    #[test]
    fn search_takes_any_and_since() {
        let service = session_core::DefaultSessionService::new(
            session_core::InMemoryRepository::new().shared(),
        );
        let texts = |answer: &str| -> Vec<String> {
            let page: Value = serde_json::from_str(answer).unwrap_or_default();
            page["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|h| h["event"]["message"]["content"].as_str())
                .map(str::to_owned)
                .collect()
        };
        let run = async {
            let created: Value = serde_json::from_str(
                &call(&service, "create", r#"{"app": "a", "user_id": "u"}"#).await?,
            )
            .map_err(|e| SessionError::serialization("answer", e))?;
            let event = |n: u8, day: u8, text: &str| {
                serde_json::json!({"id": format!("0192f0c4-0000-7000-8000-00000000000{n}"),
                    "timestamp": format!("2026-01-0{day}T00:00:00Z"),
                    "message": {"role": "user", "content": text}})
            };
            let append = serde_json::json!({"app": "a", "user_id": "u", "session_id": created["id"],
                "events": [event(1, 1, "old plum"), event(2, 2, "new pear"), event(3, 3, "new fig")]});
            call(&service, "append", &append.to_string()).await?;
            let search = |extra: Value| {
                let mut args =
                    serde_json::json!({"app": "a", "user_id": "u", "query": "plum pear"});
                if let (Some(a), Some(b)) = (args.as_object_mut(), extra.as_object()) {
                    a.extend(b.clone());
                }
                args.to_string()
            };
            let all = call(&service, "search", &search(serde_json::json!({}))).await?;
            let any = call(
                &service,
                "search",
                &search(serde_json::json!({"any": true})),
            )
            .await?;
            let since = serde_json::json!({"any": true, "since": "2026-01-02T00:00:00Z"});
            let since = call(&service, "search", &search(since)).await?;
            let bad = serde_json::json!({"since": "yesterday"});
            let bad = call(&service, "search", &search(bad)).await;
            Ok::<_, SessionError>((all, any, since, bad))
        };
        let (all, any, since, bad) = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap_or_else(|e| panic!("{e}"))
            .block_on(run)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(texts(&all).is_empty());
        assert_eq!(texts(&any), ["old plum", "new pear"]);
        assert_eq!(texts(&since), ["new pear"]);
        assert!(bad.is_err_and(|e| e.kind() == session_core::ErrorKind::InvalidInput));
    }
}
