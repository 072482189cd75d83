//! Deferred replies: an export that cannot tell the completion time of an operation when
//! its method returns (its timing depends on requests that have not arrived yet, e.g. a
//! controller arbitrating among connections) returns [`crate::Done::deferred`] and resolves the
//! [`Resolver`] later, from any thread, with the wall-clock instant the reply may go (or
//! an error). The connection's pacer parks the reply until then and paces it as usual.
//!
//! A resolver dropped without resolving resolves with `ESHUTDOWN`, so a backend that
//! discards its queue never leaves a connection waiting.
//!
//! This is the cell between the two sides only: the pacer that parks a reply hands the
//! slot a callback ([`Wake`]) and the resolution goes through it, so the slot knows nothing
//! of the pacer.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use crate::error::Errno;

/// What becomes of the resolution of a parked reply: the pacer that parked it gives this
/// callback, called once, from the resolving thread, with no lock of the slot held.
pub(crate) type Wake = Box<dyn FnOnce(Result<Instant, Errno>) + Send>;

enum State {
    /// Not resolved; the pacer's callback once the reply is parked.
    Waiting(Option<Wake>),
    Resolved(Result<Instant, Errno>),
    /// The result has been taken.
    Taken,
}

/// The shared cell between a deferred `Done` and its [`Resolver`].
pub(crate) struct Slot {
    state: Mutex<State>,
    cv: Condvar,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Slot")
    }
}

impl Slot {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The result if already resolved (taking it), else register `wake` for it.
    pub(crate) fn take_or_park(&self, wake: Wake) -> Option<Result<Instant, Errno>> {
        let mut s = self.lock();
        match std::mem::replace(&mut *s, State::Taken) {
            State::Resolved(r) => Some(r),
            State::Waiting(_) => {
                *s = State::Waiting(Some(wake));
                None
            }
            State::Taken => Some(Err(Errno::Io)),
        }
    }

    /// Wait for the result (used only when no pacer thread could be started).
    pub(crate) fn wait(&self) -> Result<Instant, Errno> {
        let mut s = self.lock();
        loop {
            match std::mem::replace(&mut *s, State::Taken) {
                State::Resolved(r) => return r,
                State::Taken => return Err(Errno::Io),
                w @ State::Waiting(_) => *s = w,
            }
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn resolve(&self, r: Result<Instant, Errno>) {
        let waker = {
            let mut s = self.lock();
            match std::mem::replace(&mut *s, State::Resolved(r)) {
                State::Waiting(w) => w,
                // Resolved twice (cannot happen through the public API): keep the first.
                old => {
                    *s = old;
                    return;
                }
            }
        };
        self.cv.notify_all();
        // Outside the slot's lock: the pacer takes its own lock (lock order: pacer, slot).
        if let Some(wake) = waker {
            let taken = std::mem::replace(&mut *self.lock(), State::Taken);
            if let State::Resolved(r) = taken {
                wake(r);
            }
        }
    }
}

/// Resolves one deferred [`crate::Done`]. Send it to whatever decides the operation's time.
#[derive(Debug)]
pub struct Resolver {
    slot: Option<Arc<Slot>>,
}

impl Resolver {
    /// The reply may be sent from wall-clock instant `t` (at once if `t` has passed).
    pub fn at(mut self, t: Instant) {
        if let Some(s) = self.slot.take() {
            s.resolve(Ok(t));
        }
    }

    /// The operation failed: the client gets `e` instead of the success reply. Its effect
    /// (already applied when the method returned) stays; the export's duties are the same
    /// as for an error returned at once.
    pub fn fail(mut self, e: Errno) {
        if let Some(s) = self.slot.take() {
            s.resolve(Err(e));
        }
    }
}

impl Drop for Resolver {
    fn drop(&mut self) {
        if let Some(s) = self.slot.take() {
            s.resolve(Err(Errno::Shutdown));
        }
    }
}

/// A new deferred completion: the slot a `Done` carries and its [`Resolver`].
pub(crate) fn pair() -> (Arc<Slot>, Resolver) {
    let slot = Arc::new(Slot { state: Mutex::new(State::Waiting(None)), cv: Condvar::new() });
    (slot.clone(), Resolver { slot: Some(slot) })
}
