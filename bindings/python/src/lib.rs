//! The native half of the `agent_session` Python package: one store per
//! `NativeStore`, each call run on a Tokio runtime without the GIL (its
//! answer handed to a callback) or on the calling thread with the GIL
//! released. Calls take and return JSON text and run the session
//! service's named operations (`agent_session::ops`), the table every
//! binding shares; the Python half (`python/agent_session`) gives them
//! names, types and exception classes.

mod runtime;

use std::future::Future;
use std::sync::Arc;

use agent_session::wire::Problem;
use agent_session::{DefaultSessionService, SessionError, SessionRepository, SessionService};
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

pyo3::create_exception!(
    _native,
    NativeError,
    PyException,
    "A store error; its one argument is the error's problem document as JSON."
);

/// The problem document of an error, as JSON text.
fn problem(e: &SessionError) -> String {
    serde_json::to_string(&Problem::from_error(e)).unwrap_or_default()
}

/// A failed call as the Python exception the wrapper turns into its class.
fn raise(e: &SessionError) -> PyErr {
    NativeError::new_err(problem(e))
}

/// Runs `work` on the runtime and hands its outcome to `done(ok, value)`
/// from a runtime thread: `(True, answer)` or `(False, problem JSON)`;
/// nothing once the interpreter's exit has begun.
/// The Python half's `done` passes it to its event loop thread-safely.
fn spawn<F, T>(py: Python<'_>, done: Py<PyAny>, work: F) -> PyResult<()>
where
    F: Future<Output = Result<T, SessionError>> + Send + 'static,
    T: for<'py> IntoPyObject<'py> + Send + 'static,
{
    let handle = runtime::handle(py)?;
    handle.spawn(async move {
        let outcome = work.await;
        if runtime::closing() {
            // The shutdown may have broken the call (a connection closed
            // under it): nobody is left to tell.
            return;
        }
        Python::attach(|py| {
            let delivered = match outcome {
                Ok(value) => done.call1(py, (true, value)),
                Err(e) => done.call1(py, (false, problem(&e))),
            };
            if let Err(e) = delivered {
                e.write_unraisable(py, Some(done.bind(py)));
            }
        });
    });
    Ok(())
}

/// One store: what `agent_session.Store.open(url)` wraps.
#[pyclass(frozen, module = "agent_session._native")]
struct NativeStore {
    /// Always `Some` until the store is dropped.
    service: Option<Arc<dyn SessionService>>,
    backend: &'static str,
    /// The process that opened it (the Python half refuses calls in another).
    pid: u32,
}

impl NativeStore {
    /// The service (owner-scoped calls) over an opened store.
    fn over(repo: Arc<dyn SessionRepository>) -> Self {
        let backend = repo.capabilities().backend;
        NativeStore {
            service: Some(Arc::new(DefaultSessionService::new(repo))),
            backend,
            pid: std::process::id(),
        }
    }

    /// The service the calls run on.
    fn service(&self) -> PyResult<Arc<dyn SessionService>> {
        self.service
            .clone()
            .ok_or_else(|| NativeError::new_err("the store was dropped"))
    }
}

impl Drop for NativeStore {
    /// In a child forked after the store opened, its connections, locks
    /// and pools are copies of the parent's: closing them here could
    /// block on a lock held at the fork or disturb the parent's engine, so
    /// the child forgets them instead, as it forgets the parent's runtime.
    fn drop(&mut self) {
        if std::process::id() != self.pid {
            if let Some(service) = self.service.take() {
                std::mem::forget(service);
            }
        }
    }
}

#[pymethods]
impl NativeStore {
    /// Opens the store a URL names (`sqlite://sessions.db`, `postgres://…`,
    /// `redis://…`, `fs://dir`, `memory://`, `http://…`) on the runtime and
    /// calls `done(ok, store or problem)` when it is open.
    #[staticmethod]
    fn open(py: Python<'_>, url: String, done: Py<PyAny>) -> PyResult<()> {
        spawn(py, done, async move {
            let repo = agent_session::open(&url).await?;
            Ok(NativeStore::over(repo))
        })
    }

    /// Opens the store a URL names on this thread, the GIL released
    /// meanwhile (what `SyncStore` opens with).
    #[staticmethod]
    fn open_blocking(py: Python<'_>, url: &str) -> PyResult<NativeStore> {
        let repo = runtime::block_on(py, agent_session::open(url))?.map_err(|e| raise(&e))?;
        Ok(NativeStore::over(repo))
    }

    /// Runs `op` with `args` (JSON text) on the runtime and calls
    /// `done(ok, answer JSON or problem JSON)` when it is done.
    fn call(&self, py: Python<'_>, op: String, args: String, done: Py<PyAny>) -> PyResult<()> {
        let service = self.service()?;
        spawn(py, done, async move {
            agent_session::ops::call(service.as_ref(), &op, &args).await
        })
    }

    /// Runs `op` with `args` (JSON text) on this thread, the GIL released
    /// meanwhile, and answers JSON text: for an embedded store's short
    /// calls (`SQLite`, files, memory), which cost less than handing them
    /// to the event loop and back, and for every call of `SyncStore`.
    fn call_blocking(&self, py: Python<'_>, op: &str, args: &str) -> PyResult<String> {
        let service = self.service()?;
        runtime::block_on(py, agent_session::ops::call(service.as_ref(), op, args))?
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
    m.add_function(wrap_pyfunction!(runtime::shutdown, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::after_fork_in_child, m)?)?;
    m.add("NativeError", m.py().get_type::<NativeError>())?;
    Ok(())
}
