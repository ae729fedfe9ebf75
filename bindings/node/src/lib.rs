//! The native half of the `agent-session` Node.js package: one store per
//! `NativeStore`, each call run on the addon's Tokio runtime, off the
//! JavaScript thread, and answered as a Promise. Calls take and return
//! JSON text and run the session service's named operations
//! (`agent_session::ops`), the table every binding shares (an embedded
//! store's on the main thread's resident thread, see [`resident`]); the
//! TypeScript half (`lib/`) gives them names, types and error classes.
//!
//! A failed call rejects with an `Error` whose message is the error's
//! problem document as JSON (`agent_session::wire::Problem`), which the
//! TypeScript half turns into the error's class.

use std::cell::Cell;
use std::sync::{Arc, Mutex};

use agent_session::wire::Problem;
use agent_session::{DefaultSessionService, SessionError, SessionService};
use napi::bindgen_prelude::{AsyncTask, Error, Result, Status};
use napi::tokio::runtime::Handle;
use napi::{Env, Task};
use napi_derive::napi;

thread_local! {
    /// Set on an environment's thread (the main one, or a worker's) when
    /// Node.js tears that environment down: a store it drops then is
    /// forgotten, not closed (its pools' and connections' teardown needs
    /// the runtime, which may be going away too; the engines keep what
    /// each call committed). Stores of other environments close as usual.
    static TEARING_DOWN: Cell<bool> = const { Cell::new(false) };
}

mod resident;

/// A failed call's problem document, as JSON text.
fn problem_text(e: &SessionError) -> String {
    serde_json::to_string(&Problem::from_error(e)).unwrap_or_default()
}

/// Runs `op` with `args` (JSON text) on the calling thread, blocking on
/// `runtime` for what the store awaits: its answer as JSON text.
fn run_call(
    service: &dyn SessionService,
    runtime: &Handle,
    op: &str,
    args: &str,
) -> std::result::Result<String, SessionError> {
    runtime.block_on(agent_session::ops::call(service, op, args))
}

/// The rejection of a failed call: its problem document as the message.
fn reject(e: &SessionError) -> Error {
    Error::new(Status::GenericFailure, problem_text(e))
}

/// One store: what `Store.open(url)` wraps.
#[napi]
pub struct NativeStore {
    /// `None` once the store is closed.
    service: Mutex<Option<Arc<dyn SessionService>>>,
    backend: &'static str,
    /// The runtime the store was opened on (what pool calls block on).
    runtime: Handle,
}

impl NativeStore {
    /// The service the calls run on, or the error of a closed store.
    fn service(&self) -> Result<Arc<dyn SessionService>> {
        let closed = || {
            reject(&SessionError::unavailable(
                self.backend,
                "the store is closed; open it again",
            ))
        };
        let guard = self.service.lock().map_err(|_| closed())?;
        guard.clone().ok_or_else(closed)
    }
}

impl Drop for NativeStore {
    /// At teardown the service is forgotten (see [`TEARING_DOWN`]).
    fn drop(&mut self) {
        if TEARING_DOWN.with(Cell::get) {
            if let Ok(mut slot) = self.service.lock() {
                if let Some(service) = slot.take() {
                    std::mem::forget(service);
                }
            }
        }
    }
}

/// Opens the store a URL names (`sqlite://sessions.db`, `postgres://…`,
/// `redis://…`, `es+http://…`, `fs://dir`, `memory://`, `http://…`).
#[napi]
pub async fn open(url: String) -> Result<NativeStore> {
    let repo = agent_session::open(&url).await.map_err(|e| reject(&e))?;
    let backend = repo.capabilities().backend;
    Ok(NativeStore {
        service: Mutex::new(Some(Arc::new(DefaultSessionService::new(repo)))),
        backend,
        runtime: Handle::current(),
    })
}

/// The names of the operations `NativeStore.call` runs.
#[napi]
#[must_use]
pub fn operations() -> Vec<String> {
    agent_session::ops::names().map(str::to_owned).collect()
}

#[napi]
impl NativeStore {
    /// Runs `op` with `args` (JSON text) on the runtime: its answer as JSON text.
    #[napi]
    pub async fn call(&self, op: String, args: String) -> Result<String> {
        let service = self.service()?;
        agent_session::ops::call(service.as_ref(), &op, &args)
            .await
            .map_err(|e| reject(&e))
    }

    /// Runs `op` with `args` (JSON text) as libuv thread-pool work, the
    /// store's own work done on the pool thread (no hand-off to the
    /// runtime's threads and back): what an embedded store's calls use
    /// (`SQLite`, files, memory: their work is the pool thread's, and
    /// each hand-off cost more than a short call) when the main thread's
    /// resident thread is busy ([`resident`]), and every call of a
    /// worker thread. A worker can be terminated while a call is in
    /// flight, and Node.js 20 to 25.3 can crash when a call's answer then
    /// arrives from another thread through a thread-safe function; a
    /// worker's teardown instead waits for its pool work to finish, so an
    /// answer never reaches a freed environment. At most as many calls
    /// run at once as the pool has threads (`UV_THREADPOOL_SIZE`, four by
    /// default).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn call_on_pool(&self, op: String, args: String) -> Result<AsyncTask<PoolCall>> {
        Ok(AsyncTask::new(PoolCall {
            service: self.service()?,
            runtime: self.runtime.clone(),
            op,
            args,
        }))
    }

    /// The store's backend name (`sqlite`, `postgres`, ...).
    #[napi(getter)]
    #[must_use]
    pub fn backend(&self) -> &'static str {
        self.backend
    }

    /// Closes the store: its connections are released once the calls in
    /// flight finish; a later call rejects with `UnavailableError`.
    #[napi]
    pub fn close(&self) {
        if let Ok(mut slot) = self.service.lock() {
            slot.take();
        }
    }
}

/// One call run on the libuv thread pool (see `NativeStore::call_on_pool`).
pub struct PoolCall {
    service: Arc<dyn SessionService>,
    runtime: Handle,
    op: String,
    args: String,
}

impl Task for PoolCall {
    type Output = String;
    type JsValue = String;

    fn compute(&mut self) -> Result<String> {
        run_call(self.service.as_ref(), &self.runtime, &self.op, &self.args).map_err(|e| reject(&e))
    }

    fn resolve(&mut self, _env: Env, output: String) -> Result<String> {
        Ok(output)
    }
}

/// Registers the teardown hook of the environment that loads the addon.
#[napi(module_exports)]
pub fn init(mut _exports: napi::bindgen_prelude::Object, env: Env) -> Result<()> {
    env.add_env_cleanup_hook((), |()| TEARING_DOWN.with(|t| t.set(true)))?;
    Ok(())
}
