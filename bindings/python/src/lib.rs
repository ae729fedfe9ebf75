//! The native half of the `agent_session` Python package: one store per
//! `NativeStore`, each call an awaitable that runs on a Tokio runtime
//! without the GIL. Calls take and return JSON text; the Python half
//! (`python/agent_session`) gives them names, types and exception classes.

use std::sync::Arc;

use agent_session::compaction::StrategySpec;
use agent_session::wire::{
    CreateBody, EventParams, ForkBody, ResolveBody, ResolvedBody, RewindBody, SessionListParams,
    StateBody,
};
use agent_session::{
    DefaultSessionService, EventFilter, EventView, Owner, Problem, RewindTo, SearchMode,
    SearchQuery, SessionError, SessionEvent, SessionRepository, SessionRepositoryExt,
    SessionService, SessionUpdate, StateMap, SyntheticFilter,
};
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

pyo3::create_exception!(
    _native,
    NativeError,
    PyException,
    "A store error; its one argument is the error's problem document as JSON."
);

/// A failed call as the Python exception the wrapper turns into its class.
fn raise(e: &SessionError) -> PyErr {
    let problem = serde_json::to_string(&Problem::from_error(e)).unwrap_or_default();
    NativeError::new_err(problem)
}

/// The owner every owner-scoped call names.
#[derive(Deserialize)]
struct OwnerArgs {
    app: String,
    user_id: String,
}

impl OwnerArgs {
    fn owner(&self) -> Result<Owner, SessionError> {
        agent_session::AppName::new(self.app.as_str())?;
        agent_session::UserId::new(self.user_id.as_str())?;
        Ok(Owner::new(self.app.as_str(), self.user_id.as_str()))
    }
}

/// A call on one session of an owner.
#[derive(Deserialize)]
struct SessionArgs {
    #[serde(flatten)]
    owner: OwnerArgs,
    session_id: String,
}

fn parse<T: DeserializeOwned>(args: &Value) -> Result<T, SessionError> {
    T::deserialize(args).map_err(|e| SessionError::invalid_because("arguments", e.to_string(), e))
}

/// The part of `args` under `key`, as a `T` (`T::default()` when absent).
fn part<T: DeserializeOwned + Default>(args: &Value, key: &str) -> Result<T, SessionError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(T::default()),
        Some(v) => T::deserialize(v)
            .map_err(|e| SessionError::invalid_because(key.to_owned(), e.to_string(), e)),
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, SessionError> {
    serde_json::to_string(value).map_err(|e| SessionError::serialization("answer", e))
}

/// `search`'s arguments.
#[derive(Deserialize)]
struct SearchArgs {
    #[serde(flatten)]
    owner: OwnerArgs,
    query: String,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    ranked: bool,
    #[serde(default)]
    page: usize,
    #[serde(default = "ten")]
    page_size: usize,
}

fn ten() -> usize {
    10
}

/// `replace_context`'s arguments.
#[derive(Deserialize)]
struct ReplaceArgs {
    #[serde(flatten)]
    at: SessionArgs,
    events: Vec<SessionEvent>,
    expected_version: u64,
}

/// `items`' arguments: which events, and the metadata key that holds
/// each event's item as a framework wrote it.
#[derive(Deserialize)]
struct ItemsArgs {
    #[serde(flatten)]
    at: SessionArgs,
    key: String,
    #[serde(default)]
    filter: EventParams,
}

/// One event of an `items` answer: the object under the key, or (for an
/// event written without one, such as a summary) the event itself.
#[derive(serde::Serialize)]
struct KeptItem<'a>(Option<&'a Value>, Option<&'a SessionEvent>);

/// An `items` answer.
#[derive(serde::Serialize)]
struct KeptItems<'a> {
    items: Vec<KeptItem<'a>>,
    has_more: bool,
}

/// Runs one call on the service (owner-scoped) and the store under it.
#[allow(clippy::too_many_lines)] // one arm per operation
async fn dispatch(
    service: &dyn SessionService,
    repo: &dyn SessionRepository,
    op: &str,
    args: &str,
) -> Result<String, SessionError> {
    let args: Value = serde_json::from_str(args)
        .map_err(|e| SessionError::invalid_because("arguments", "not JSON", e))?;
    match op {
        "create" => {
            let who: OwnerArgs = parse(&args)?;
            let body: CreateBody = part(&args, "session")?;
            let request = body.into_request(&who.app, &who.user_id)?;
            to_json(&service.create(request).await?)
        }
        "get" => {
            let at: SessionArgs = parse(&args)?;
            to_json(&service.get(&at.owner.owner()?, &at.session_id).await?)
        }
        "list" => {
            let who: OwnerArgs = parse(&args)?;
            let params: SessionListParams = part(&args, "query")?;
            to_json(&service.list(&who.owner()?, params.into_query()?).await?)
        }
        "list_all" => {
            // Every session the query matches, of any user (ADK lists an
            // app's sessions without naming a user).
            let params: SessionListParams = part(&args, "query")?;
            to_json(&repo.list(&params.into_query()?).await?)
        }
        "delete" => {
            let at: SessionArgs = parse(&args)?;
            service.delete(&at.owner.owner()?, &at.session_id).await?;
            Ok("null".to_owned())
        }
        "end" => {
            let at: SessionArgs = parse(&args)?;
            to_json(&service.end(&at.owner.owner()?, &at.session_id).await?)
        }
        "reopen" => {
            let at: SessionArgs = parse(&args)?;
            to_json(&service.reopen(&at.owner.owner()?, &at.session_id).await?)
        }
        "update" => {
            let at: SessionArgs = parse(&args)?;
            let update: SessionUpdate = part(&args, "update")?;
            to_json(
                &service
                    .update(&at.owner.owner()?, &at.session_id, update)
                    .await?,
            )
        }
        "resolve" => {
            let who: OwnerArgs = parse(&args)?;
            let body: ResolveBody = part(&args, "resolve")?;
            who.owner()?;
            let (request, policy) = body.into_request(&who.app, &who.user_id)?;
            let resolved = service.resolve(&request, &policy).await?;
            to_json(&ResolvedBody {
                session: resolved.session,
                is_new: resolved.is_new,
            })
        }
        "append" => {
            let at: SessionArgs = parse(&args)?;
            let mut events: Vec<SessionEvent> = part(&args, "events")?;
            SessionEvent::estimate_missing(&mut events, &agent_session::HeuristicEstimator);
            to_json(
                &service
                    .append_events(&at.owner.owner()?, &at.session_id, events)
                    .await?,
            )
        }
        "events" => {
            let at: SessionArgs = parse(&args)?;
            let params: EventParams = part(&args, "filter")?;
            let filter = params.into_filter()?;
            to_json(
                &service
                    .events(&at.owner.owner()?, &at.session_id, &filter)
                    .await?,
            )
        }
        "items" => {
            // What an adapter's read needs of each event and nothing more:
            // the item it stored, not the event around it twice over.
            let a: ItemsArgs = parse(&args)?;
            let filter = a.filter.into_filter()?;
            let page = service
                .events(&a.at.owner.owner()?, &a.at.session_id, &filter)
                .await?;
            let items = page
                .items
                .iter()
                .map(|e| match e.metadata.get(&a.key) {
                    Some(v) if v.is_object() => KeptItem(Some(v), None),
                    _ => KeptItem(None, Some(e)),
                })
                .collect();
            to_json(&KeptItems {
                items,
                has_more: page.has_more,
            })
        }
        "messages" => {
            let at: SessionArgs = parse(&args)?;
            to_json(&service.messages(&at.owner.owner()?, &at.session_id).await?)
        }
        "search" => {
            let s: SearchArgs = parse(&args)?;
            let owner = s.owner.owner()?;
            let query = match &s.session_id {
                Some(id) => SearchQuery::in_session(id.as_str(), s.query),
                None => SearchQuery::for_user(&owner.app, &owner.user_id, s.query),
            }
            .page(s.page, s.page_size);
            let query = if s.ranked {
                query.mode(SearchMode::Ranked)
            } else {
                query
            };
            to_json(&service.search(&owner, &query).await?)
        }
        "compact" => {
            let at: SessionArgs = parse(&args)?;
            let spec: StrategySpec = part_required(&args, "strategy")?;
            let session = service.get(&at.owner.owner()?, &at.session_id).await?;
            to_json(&spec.compact_now(repo, &session.id).await?)
        }
        "rewind" => {
            let at: SessionArgs = parse(&args)?;
            let body: RewindBody = part_required(&args, "rewind")?;
            let owner = at.owner.owner()?;
            to_json(
                &service
                    .rewind(&owner, &at.session_id, &body.invocation_id)
                    .await?,
            )
        }
        "fork" => {
            let at: SessionArgs = parse(&args)?;
            let body: ForkBody = part_required(&args, "fork")?;
            to_json(
                &service
                    .fork(&at.owner.owner()?, &at.session_id, &body.at)
                    .await?,
            )
        }
        "replace_context" => {
            let mut r: ReplaceArgs = parse(&args)?;
            SessionEvent::estimate_missing(&mut r.events, &agent_session::HeuristicEstimator);
            let owner = r.at.owner.owner()?;
            to_json(
                &service
                    .replace_context(&owner, &r.at.session_id, r.events, r.expected_version)
                    .await?,
            )
        }
        "state" => {
            let at: SessionArgs = parse(&args)?;
            let owner = at.owner.owner()?;
            let (body, _) = StateBody::read(service, repo, &owner, &at.session_id).await?;
            to_json(&body)
        }
        "patch_state" => {
            let at: SessionArgs = parse(&args)?;
            let patch: StateMap = part(&args, "patch")?;
            let owner = at.owner.owner()?;
            let (body, _) =
                StateBody::patch(service, repo, &owner, &at.session_id, &patch, None).await?;
            to_json(&body)
        }
        "shared_state" => {
            let who: OwnerArgs = parse(&args)?;
            let owner = who.owner()?;
            let app = agent_session::AppName::new(owner.app.as_str())?;
            let user = agent_session::UserId::new(owner.user_id.as_str())?;
            to_json(&repo.shared_state(&app, &user).await?)
        }
        "erase_user" => {
            let who: OwnerArgs = parse(&args)?;
            to_json(&service.erase_user(&who.owner()?).await?)
        }
        "pop" => {
            // The latest event that is not a summary leaves the archive (and
            // the context); a compaction since then is undone with it.
            let at: SessionArgs = parse(&args)?;
            let session = service.get(&at.owner.owner()?, &at.session_id).await?;
            let filter = EventFilter::last(1)
                .view(EventView::Archive)
                .synthetic(SyntheticFilter::Exclude);
            let last = repo.events(&session.id, &filter).await?.items.pop();
            if let Some(event) = &last {
                repo.rewind_restoring(&session.id, &RewindTo::Seq(event.seq))
                    .await?;
            }
            to_json(&last)
        }
        "usage" => {
            let at: SessionArgs = parse(&args)?;
            to_json(&service.usage(&at.owner.owner()?, &at.session_id).await?)
        }
        other => Err(SessionError::invalid(
            "operation",
            format!("{other:?} is not an operation of the store"),
        )),
    }
}

/// The part of `args` under `key`, which must be there.
fn part_required<T: DeserializeOwned>(args: &Value, key: &str) -> Result<T, SessionError> {
    let v = args
        .get(key)
        .ok_or_else(|| SessionError::invalid(key.to_owned(), "is required"))?;
    T::deserialize(v).map_err(|e| SessionError::invalid_because(key.to_owned(), e.to_string(), e))
}

/// One store: what `agent_session.Store.open(url)` wraps.
#[pyclass(frozen, module = "agent_session._native")]
struct NativeStore {
    service: Arc<dyn SessionService>,
    repo: Arc<dyn SessionRepository>,
    backend: &'static str,
}

impl NativeStore {
    /// The service (owner-scoped calls) over an opened store.
    fn over(repo: Arc<dyn SessionRepository>) -> Self {
        let backend = repo.capabilities().backend;
        NativeStore {
            service: Arc::new(DefaultSessionService::new(repo.clone())),
            repo,
            backend,
        }
    }
}

#[pymethods]
impl NativeStore {
    /// Opens the store a URL names (`sqlite://sessions.db`, `postgres://…`,
    /// `redis://…`, `fs://dir`, `memory://`, `http://…`).
    #[staticmethod]
    fn open(py: Python<'_>, url: String) -> PyResult<Bound<'_, PyAny>> {
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let repo = agent_session::open(&url).await.map_err(|e| raise(&e))?;
            Ok(NativeStore::over(repo))
        })
    }

    /// Opens the store a URL names on this thread, the GIL released
    /// meanwhile (what `SyncStore` opens with).
    #[staticmethod]
    fn open_blocking(py: Python<'_>, url: &str) -> PyResult<NativeStore> {
        let repo = py
            .detach(|| pyo3_async_runtimes::tokio::get_runtime().block_on(agent_session::open(url)))
            .map_err(|e| raise(&e))?;
        Ok(NativeStore::over(repo))
    }

    /// Runs `op` with `args` (JSON text); the answer is JSON text.
    fn call<'py>(&self, py: Python<'py>, op: String, args: String) -> PyResult<Bound<'py, PyAny>> {
        let (service, repo) = (self.service.clone(), self.repo.clone());
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            dispatch(service.as_ref(), repo.as_ref(), &op, &args)
                .await
                .map_err(|e| raise(&e))
        })
    }

    /// Runs `op` with `args` (JSON text) on this thread, the GIL released
    /// meanwhile, and answers JSON text: for an embedded store's short
    /// calls (`SQLite`, files, memory), which cost less than handing them
    /// to the event loop and back, and for every call of `SyncStore`.
    fn call_blocking(&self, py: Python<'_>, op: &str, args: &str) -> PyResult<String> {
        let (service, repo) = (self.service.clone(), self.repo.clone());
        py.detach(|| {
            pyo3_async_runtimes::tokio::get_runtime().block_on(dispatch(
                service.as_ref(),
                repo.as_ref(),
                op,
                args,
            ))
        })
        .map_err(|e| raise(&e))
    }

    /// The store's backend name (`sqlite`, `postgres`, ...).
    #[getter]
    fn backend(&self) -> &'static str {
        self.backend
    }
}

/// The module `agent_session._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeStore>()?;
    m.add("NativeError", m.py().get_type::<NativeError>())?;
    Ok(())
}
