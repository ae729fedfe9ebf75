//! Running an engine's blocking calls (SQLite, file I/O) from async code.

use crate::error::{Result, SessionError};

/// Runs `f`, which blocks, without stalling the runtime's other tasks: in
/// place on a multi-thread tokio runtime (`block_in_place` moves the
/// worker's other tasks to another thread, and no hand-off to a pool thread
/// and back is paid per call, which was half the time of a small SQLite
/// append), on tokio's blocking pool on a current-thread runtime, and
/// directly outside any tokio runtime.
///
/// ```
/// # tokio::runtime::Builder::new_multi_thread().build().unwrap().block_on(async {
/// let n = session_core::run_blocking("doc", || Ok(21 * 2)).await.unwrap();
/// assert_eq!(n, 42);
/// # });
/// ```
pub async fn run_blocking<T, F>(backend: &'static str, f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        Ok(_) => tokio::task::spawn_blocking(f)
            .await
            .map_err(|e| SessionError::backend(backend, e))?,
        Err(_) => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_current_thread_runtime_uses_the_blocking_pool() {
        let main = std::thread::current().id();
        let ran_on = run_blocking("t", || Ok(std::thread::current().id()))
            .await
            .unwrap();
        assert_ne!(ran_on, main);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_multi_thread_runtime_runs_in_place_and_keeps_errors() {
        let here = std::thread::current().id();
        let ran_on = run_blocking("t", || Ok(std::thread::current().id()))
            .await
            .unwrap();
        assert_eq!(ran_on, here);
        let err = run_blocking::<(), _>("t", || Err(SessionError::invalid("x", "bad"))).await;
        assert_eq!(err.unwrap_err().kind(), crate::ErrorKind::InvalidInput);
    }
}
