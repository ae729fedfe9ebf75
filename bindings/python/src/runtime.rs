//! The Tokio runtime the store's calls run on, owned by this module so
//! that it ends before the interpreter does.
//!
//! A runtime thread that touches Python while the interpreter finalizes
//! kills the process: the thread is made to exit inside the interpreter,
//! and unwinding through its GIL guard aborts on a thread state the
//! finalizer has already freed (`PyGILState_Release … finalizing`). So the
//! package's `atexit` hook calls [`shutdown`], which stops every runtime
//! thread (the GIL released meanwhile, so that answers in flight can still
//! be delivered) before finalization starts; a call after it is refused.
//! A thread other than the exiting one that calls the store after that
//! (a daemon thread still running) waits, without the GIL, for the
//! process to end, as Python's own daemon threads do at finalization:
//! returning into the interpreter then could only kill it. After `fork`, the child has none of the parent's threads: it drops its
//! copy of the runtime without touching those threads and builds a new one
//! on its first call.
//!
//! Every function here runs with the GIL held, which serializes them and
//! keeps `fork` (which also runs with the GIL) from copying a held lock.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use tokio::runtime::{Builder, Handle, Runtime};
use tokio::sync::Notify;

/// How long the exit hook waits in all for the calls still running (a
/// `SQLite` write, a file sync) before it gives up on them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Where the runtime is in its life.
enum Slot {
    /// Not started yet (or dropped in a forked child).
    Idle,
    /// Running: the calls' tasks are on it.
    Running(Running),
    /// Shut down at interpreter exit: calls are refused.
    Closed,
}

/// A running runtime and what the exit hook needs of the threads driving
/// calls on it; all of it is forgotten together in a forked child.
struct Running {
    runtime: Runtime,
    calls: Arc<BlockedCalls>,
}

/// The threads driving a call in [`block_on`]: the exit hook wakes them
/// and waits for them to let go of the runtime before it shuts it down (a
/// call driven on a shut-down runtime panics).
#[derive(Default)]
struct BlockedCalls {
    /// Wakes them when the exit hook starts.
    closing: Notify,
    /// How many there are.
    count: AtomicUsize,
}

static SLOT: Mutex<Slot> = Mutex::new(Slot::Idle);

/// Set when the exit hook starts shutting the runtime down.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// The thread that ran the exit hook: the one thread a call after it
/// answers with an error instead of waiting for the process to end.
static EXITING_THREAD: OnceLock<ThreadId> = OnceLock::new();

/// Whether the exit hook has started: an outcome that arrives now is
/// dropped, not delivered (the interpreter is exiting; a daemon thread
/// awaiting it waits for the end, as at any other point of exit).
pub fn closing() -> bool {
    CLOSED.load(Ordering::Acquire)
}

/// Parks a thread (detached from the interpreter) until the process ends.
fn wait_for_exit() -> ! {
    loop {
        thread::park();
    }
}

/// Whether the calling thread is one to park rather than answer: the
/// interpreter is exiting and this is not the thread that runs the exit.
fn parks_at_exit() -> bool {
    CLOSED.load(Ordering::Acquire) && EXITING_THREAD.get() != Some(&thread::current().id())
}

/// The error of a call made after the exit hook shut the runtime down.
fn closed() -> PyErr {
    PyRuntimeError::new_err(
        "agent_session: the interpreter is exiting and the store's runtime has shut down",
    )
}

/// The runtime's handle, starting the runtime on the first call.
pub fn handle(py: Python<'_>) -> PyResult<Handle> {
    running(py).map(|(handle, _)| handle)
}

/// The runtime's handle and its blocked calls, starting it on the first call.
fn running(py: Python<'_>) -> PyResult<(Handle, Arc<BlockedCalls>)> {
    if parks_at_exit() {
        py.detach(|| wait_for_exit());
    }
    let mut slot = SLOT.lock().map_err(|_| closed())?;
    match &*slot {
        Slot::Running(r) => Ok((r.runtime.handle().clone(), r.calls.clone())),
        Slot::Closed => Err(closed()),
        Slot::Idle => {
            let runtime = Builder::new_multi_thread()
                .enable_all()
                .thread_name("agent-session")
                .build()
                .map_err(|e| {
                    PyRuntimeError::new_err(format!("agent_session: cannot start the runtime: {e}"))
                })?;
            let calls = Arc::new(BlockedCalls::default());
            let handle = runtime.handle().clone();
            *slot = Slot::Running(Running {
                runtime,
                calls: calls.clone(),
            });
            Ok((handle, calls))
        }
    }
}

/// Runs `work` to its end on this thread, the GIL released meanwhile.
/// If the exit hook starts meanwhile, `work` is dropped and the thread
/// waits for the process to end.
pub fn block_on<F: Future + Send>(py: Python<'_>, work: F) -> PyResult<F::Output>
where
    F::Output: Send,
{
    let (handle, calls) = running(py)?;
    Ok(py.detach(|| {
        calls.count.fetch_add(1, Ordering::AcqRel);
        let output = handle.block_on(async {
            // Registered before the check, so no wake-up is missed.
            let closing = calls.closing.notified();
            if CLOSED.load(Ordering::Acquire) {
                return None;
            }
            tokio::select! {
                output = work => Some(output),
                () = closing => None,
            }
        });
        calls.count.fetch_sub(1, Ordering::AcqRel);
        match output {
            Some(output) if !parks_at_exit() => output,
            _ => wait_for_exit(),
        }
    }))
}

/// Waits (until `deadline` at most) until no thread drives a call.
fn wait_for_blocked_calls(calls: &BlockedCalls, deadline: Instant) {
    while calls.count.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(1));
    }
}

/// Stops the runtime for good: its tasks are dropped and its threads have
/// exited when this returns. Called by the package's `atexit` hook.
#[pyfunction]
pub fn shutdown(py: Python<'_>) {
    let _ = EXITING_THREAD.set(thread::current().id());
    CLOSED.store(true, Ordering::Release);
    let previous = match SLOT.lock() {
        Ok(mut slot) => std::mem::replace(&mut *slot, Slot::Closed),
        Err(_) => return,
    };
    if let Slot::Running(Running { runtime, calls }) = previous {
        // A task finishing now attaches to the interpreter to hand over
        // its answer: it must find the GIL free.
        py.detach(move || {
            let deadline = Instant::now() + SHUTDOWN_GRACE;
            calls.closing.notify_waiters();
            wait_for_blocked_calls(&calls, deadline);
            runtime.shutdown_timeout(deadline.saturating_duration_since(Instant::now()));
        });
    }
}

/// Forgets the parent's runtime in a child process after `fork`: its
/// threads were not copied, so it is neither used nor dropped (dropping
/// would wait for them). Registered with `os.register_at_fork`.
#[pyfunction]
pub fn after_fork_in_child(_py: Python<'_>) {
    if let Ok(mut slot) = SLOT.lock() {
        if let Slot::Running(running) = std::mem::replace(&mut *slot, Slot::Idle) {
            // With the runtime go the parent's blocked calls, which no
            // thread of this process will ever finish.
            std::mem::forget(running);
        }
    }
}
