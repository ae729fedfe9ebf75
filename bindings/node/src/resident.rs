//! The resident thread that runs the main thread's calls to an embedded
//! store (`SQLite`, files, memory) and hands their answers back through
//! one long-lived thread-safe function.
//!
//! A call run as libuv thread-pool work pays two thread wake-ups: the
//! pool thread's, asleep on the pool's queue, and the JavaScript thread's
//! once the answer is ready. On a small virtual machine each wake-up of a
//! sleeping thread costs tens of microseconds, as much as a short call's
//! own work. The resident thread keeps looking for the next call for a
//! short while ([`STAY_AWAKE`]) after each answer before it sleeps, so an
//! agent's back-to-back calls find it awake: one wake-up per call instead
//! of two. It sleeps as soon as the calls stop, so an idle process spends
//! nothing on it. It runs one call at a time: the TypeScript half sends
//! it a call only when it owes no other, and runs calls made while one is
//! in flight as thread-pool work, side by side.
//!
//! The thread-safe function is weak (it does not keep Node.js's event
//! loop alive by itself) and held while calls are in flight: the process
//! neither exits with an answer owed nor stays up for an idle store.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use agent_session::{SessionError, SessionService};
use napi::bindgen_prelude::{Function, Result};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::tokio::runtime::Handle;
use napi::{Env, Status};
use napi_derive::napi;

use crate::{problem_text, run_call, NativeStore};

/// How long the resident thread keeps looking for the next call after an
/// answer before it sleeps: longer than an agent's own work between two
/// calls of a loop (decoding an answer, building the next call), short
/// enough that an idle process gives the core back at once.
const STAY_AWAKE: Duration = Duration::from_micros(200);

/// What a call answers: its id, whether it succeeded, and its answer's
/// JSON text (or the problem document's).
type Answer = (u32, bool, String);

/// The JavaScript function that settles a call's promise by its id.
type Settle = ThreadsafeFunction<Answer, (), Answer, Status, false, true>;

/// One call for the resident thread.
struct Job {
    service: Arc<dyn SessionService>,
    runtime: Handle,
    id: u32,
    op: String,
    args: String,
}

/// The resident thread of one JavaScript environment (what
/// `new NativeResident(settle)` starts): calls go in by
/// [`NativeResident::send`], answers come out through `settle`.
#[napi]
pub struct NativeResident {
    /// The thread ends when this is dropped (with the environment).
    jobs: Sender<Job>,
    settle: Arc<Settle>,
    /// Calls sent and not yet settled.
    in_flight: Arc<AtomicUsize>,
}

#[napi]
impl NativeResident {
    /// Starts the thread; `settle([id, ok, text])` receives each answer.
    #[napi(
        constructor,
        ts_args_type = "settle: (answer: [id: number, ok: boolean, text: string]) => void"
    )]
    #[allow(clippy::needless_pass_by_value)] // napi hands JavaScript arguments over by value
    pub fn new(settle: Function<'_, (u32, bool, String), ()>) -> Result<Self> {
        let in_flight = Arc::new(AtomicUsize::new(0));
        let counted = in_flight.clone();
        let raw = Arc::new(OnceLock::<RawSettle>::new());
        let own = raw.clone();
        let settle: Settle = settle
            .build_threadsafe_function::<Answer>()
            .callee_handled::<false>()
            .weak::<true>()
            .build_callback(move |ctx| {
                // The last answer owed lets the event loop end again.
                if counted.fetch_sub(1, Ordering::Relaxed) == 1 {
                    if let Some(settle) = own.get() {
                        release(&ctx.env, settle.0)?;
                    }
                }
                Ok(ctx.value)
            })?;
        // Set before any call can be answered.
        let _ = raw.set(RawSettle(settle.raw()));
        let settle = Arc::new(settle);
        let (jobs, queue) = channel();
        let answers = settle.clone();
        std::thread::Builder::new()
            .name("agent-session-resident".into())
            .spawn(move || serve(&queue, &answers))
            .map_err(|e| {
                napi::Error::from_reason(format!("cannot start the resident thread: {e}"))
            })?;
        Ok(Self {
            jobs,
            settle,
            in_flight,
        })
    }

    /// Sends call `id` (`op` with `args`, JSON text) to the thread; its
    /// answer comes through `settle`.
    #[napi]
    pub fn send(
        &self,
        env: Env,
        store: &NativeStore,
        id: u32,
        op: String,
        args: String,
    ) -> Result<()> {
        let job = Job {
            service: store.service()?,
            runtime: store.runtime.clone(),
            id,
            op,
            args,
        };
        // The first answer owed keeps the event loop alive until it arrives.
        if self.in_flight.fetch_add(1, Ordering::Relaxed) == 0 {
            hold(&env, self.settle.raw())?;
        }
        if self.jobs.send(job).is_err() {
            // Never owed after all: the event loop may end again.
            if self.in_flight.fetch_sub(1, Ordering::Relaxed) == 1 {
                release(&env, self.settle.raw())?;
            }
            return Err(napi::Error::from_reason("the resident thread is gone"));
        }
        Ok(())
    }
}

/// Holds the event loop open for the answers owed.
fn hold(env: &Env, settle: napi::sys::napi_threadsafe_function) -> Result<()> {
    // SAFETY: called on the environment's own thread with a live
    // thread-safe function of that environment.
    check(unsafe { napi::sys::napi_ref_threadsafe_function(env.raw(), settle) })
}

/// Lets the event loop end again (no answer owed).
fn release(env: &Env, settle: napi::sys::napi_threadsafe_function) -> Result<()> {
    // SAFETY: as for `hold`.
    check(unsafe { napi::sys::napi_unref_threadsafe_function(env.raw(), settle) })
}

/// The raw handle of the settling function, for its own callback to let
/// the event loop go (the callback exists before the handle does).
struct RawSettle(napi::sys::napi_threadsafe_function);

// SAFETY: the handle is only used on the environment's own thread (in
// the function's callback); it is merely carried across threads.
unsafe impl Send for RawSettle {}
// SAFETY: as above.
unsafe impl Sync for RawSettle {}

/// A Node-API status as a result.
fn check(status: napi::sys::napi_status) -> Result<()> {
    if status == napi::sys::Status::napi_ok {
        Ok(())
    } else {
        Err(napi::Error::new(
            Status::from(status),
            "the thread-safe function failed",
        ))
    }
}

/// The resident thread: runs each call, answers it, and ends when the
/// sender is gone or the environment is torn down.
fn serve(queue: &Receiver<Job>, settle: &Settle) {
    while let Some(job) = next(queue) {
        // A call that panics is answered as a backend error, so its
        // promise settles and the thread serves the next call.
        let run = || run_call(job.service.as_ref(), &job.runtime, &job.op, &job.args);
        let answer = match std::panic::catch_unwind(AssertUnwindSafe(run)) {
            Ok(Ok(text)) => (job.id, true, text),
            Ok(Err(e)) => (job.id, false, problem_text(&e)),
            Err(_) => {
                let e = SessionError::backend("node", format!("the call `{}` panicked", job.op));
                (job.id, false, problem_text(&e))
            }
        };
        drop(job);
        if settle.call(answer, ThreadsafeFunctionCallMode::NonBlocking) != Status::Ok {
            return;
        }
    }
}

/// The next call: looked for without sleeping for [`STAY_AWAKE`], then
/// waited for asleep; `None` once the sender is gone.
fn next(queue: &Receiver<Job>) -> Option<Job> {
    let start = Instant::now();
    loop {
        match queue.try_recv() {
            Ok(job) => return Some(job),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) if start.elapsed() < STAY_AWAKE => std::hint::spin_loop(),
            Err(TryRecvError::Empty) => return queue.recv().ok(),
        }
    }
}
