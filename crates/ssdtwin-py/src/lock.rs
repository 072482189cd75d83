//! The drive's lock: its mutex, and the thread inside a call on it.
//!
//! Locking rule: a `Drive` method releases the GIL, then takes the drive's mutex
//! (`Drive::with`). Code holding the mutex may re-attach to the GIL (progress callbacks,
//! Ctrl-C checks), but no thread ever waits for the mutex while attached, so the two locks
//! are always taken in the same order (mutex, then GIL) and two Python threads sharing a
//! drive cannot deadlock. Results become Python objects after the mutex is released.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::errors::Failure;

/// A value behind a mutex that remembers which thread holds it. A call made while its own
/// thread holds the mutex (a progress callback using the drive it reports on) would wait
/// for it forever, Ctrl-C included: it is refused instead ([`Failure::Reentered`]).
pub(crate) struct CallLock<T> {
    inner: Mutex<Option<T>>,
    /// The [`thread_token`] of the thread holding `inner` (0: none).
    holder: AtomicU64,
}

/// A number of the calling thread, unique in the process and never 0.
fn thread_token() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static TOKEN: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    TOKEN.with(|t| *t)
}

/// Clears [`CallLock::holder`] when the call holding the mutex ends (dropped before the guard).
struct Holding<'a>(&'a AtomicU64);

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

impl<T> CallLock<T> {
    pub(crate) fn new(value: T) -> CallLock<T> {
        CallLock { inner: Mutex::new(Some(value)), holder: AtomicU64::new(0) }
    }

    /// `f` on the value (None once taken out), the mutex taken (and waited for) by the
    /// calling thread, unless that thread already holds it. Only this thread ever stores its
    /// own token, so reading it back means this thread is inside a call on the value.
    pub(crate) fn locked<R>(&self, f: impl FnOnce(&mut Option<T>) -> Result<R, Failure>) -> Result<R, Failure> {
        let me = thread_token();
        if self.holder.load(Ordering::Relaxed) == me {
            return Err(Failure::Reentered);
        }
        let mut g = self.inner.lock().map_err(|_| Failure::Poisoned)?;
        self.holder.store(me, Ordering::Relaxed);
        let _holding = Holding(&self.holder);
        f(&mut g)
    }
}
