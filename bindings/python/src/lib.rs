//! The native half of the `agent_session` Python package: one store per
//! `NativeStore`, each call an awaitable that runs on a Tokio runtime
//! without the GIL. Calls take and return JSON text and run the session
//! service's named operations (`agent_session::ops`), the table every
//! binding shares; the Python half (`python/agent_session`) gives them
//! names, types and exception classes.

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

/// A failed call as the Python exception the wrapper turns into its class.
fn raise(e: &SessionError) -> PyErr {
    let problem = serde_json::to_string(&Problem::from_error(e)).unwrap_or_default();
    NativeError::new_err(problem)
}

/// One store: what `agent_session.Store.open(url)` wraps.
#[pyclass(frozen, module = "agent_session._native")]
struct NativeStore {
    service: Arc<dyn SessionService>,
    backend: &'static str,
}

impl NativeStore {
    /// The service (owner-scoped calls) over an opened store.
    fn over(repo: Arc<dyn SessionRepository>) -> Self {
        let backend = repo.capabilities().backend;
        NativeStore {
            service: Arc::new(DefaultSessionService::new(repo)),
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
        let service = self.service.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            agent_session::ops::call(service.as_ref(), &op, &args)
                .await
                .map_err(|e| raise(&e))
        })
    }

    /// Runs `op` with `args` (JSON text) on this thread, the GIL released
    /// meanwhile, and answers JSON text: for an embedded store's short
    /// calls (`SQLite`, files, memory), which cost less than handing them
    /// to the event loop and back, and for every call of `SyncStore`.
    fn call_blocking(&self, py: Python<'_>, op: &str, args: &str) -> PyResult<String> {
        let service = self.service.clone();
        py.detach(|| {
            pyo3_async_runtimes::tokio::get_runtime().block_on(agent_session::ops::call(
                service.as_ref(),
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
