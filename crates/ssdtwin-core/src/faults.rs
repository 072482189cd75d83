//! Fault injection for the deterministic simulation harness (crates/ssdtwin-sim).
//!
//! Every file-system call of the image, the journal and the served data files goes through
//! [`crate::fsio`], which asks [`check`] first. In a build with the `faults` feature a test
//! installs a [`Plan`] on its thread: a call can fail with an errno (ENOSPC, EIO …) or
//! "crash" the process — from then on every call fails, as if the process had been killed
//! there, and the harness drops the in-memory state and reopens the image from disk. The plan
//! also remembers how long each file was at its last fsync, so a harness can cut an
//! appended file back to any length after that (a power loss tearing its unsynced tail).
//!
//! Without the feature, [`check`] is an empty inline function: no cost, no global state.

#[cfg(not(feature = "faults"))]
use std::io;
#[cfg(not(feature = "faults"))]
use std::path::Path;

/// Kinds of file-system calls.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Open,
    Create,
    Write,
    Sync,
    Rename,
    Remove,
}

#[cfg(not(feature = "faults"))]
#[inline(always)]
pub fn check(_op: Op, _path: &Path) -> io::Result<()> {
    Ok(())
}

#[cfg(feature = "faults")]
pub use imp::*;

#[cfg(feature = "faults")]
mod imp {
    use super::Op;
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    use std::io;
    use std::path::{Path, PathBuf};

    /// What a triggered rule does.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum Action {
        /// This one call fails with the errno; later calls go through.
        Fail(i32),
        /// This call and every later one fail: the process is dead from here on.
        Crash,
    }

    /// Fire on the `skip + 1`-th call that matches `op` (any op if `None`) and whose path
    /// contains `path_contains`.
    #[derive(Clone, Debug)]
    pub struct Rule {
        pub op: Option<Op>,
        pub path_contains: String,
        pub skip: u64,
        pub action: Action,
    }

    /// The faults of one thread, and what it saw.
    #[derive(Debug, Default)]
    pub struct Plan {
        pub rules: Vec<Rule>,
        pub crashed: bool,
        /// Calls checked so far (a harness picks a crash point among them).
        pub calls: u64,
        /// Faults fired: (call index, op, path, action).
        pub fired: Vec<(u64, Op, PathBuf, Action)>,
        /// Length of each file at its last successful fsync.
        pub synced_len: BTreeMap<PathBuf, u64>,
    }

    thread_local! {
        static PLAN: RefCell<Option<Plan>> = const { RefCell::new(None) };
    }

    /// Install `rules` on this thread (replacing any plan).
    pub fn install(rules: Vec<Rule>) {
        PLAN.with(|p| *p.borrow_mut() = Some(Plan { rules, ..Plan::default() }));
    }

    /// Remove this thread's plan; returns it.
    pub fn take() -> Option<Plan> {
        PLAN.with(|p| p.borrow_mut().take())
    }

    /// Run `f` on this thread's plan (if one is installed).
    pub fn with<R>(f: impl FnOnce(&mut Plan) -> R) -> Option<R> {
        PLAN.with(|p| p.borrow_mut().as_mut().map(f))
    }

    fn dead() -> io::Error {
        io::Error::other("simulated crash: the process is dead")
    }

    pub fn check(op: Op, path: &Path) -> io::Result<()> {
        PLAN.with(|cell| {
            let mut guard = cell.borrow_mut();
            let Some(plan) = guard.as_mut() else { return Ok(()) };
            if plan.crashed {
                return Err(dead());
            }
            let call = plan.calls;
            plan.calls += 1;
            let text = path.to_string_lossy();
            let mut hit = None;
            for (i, r) in plan.rules.iter_mut().enumerate() {
                if r.op.is_some_and(|o| o != op) || !text.contains(r.path_contains.as_str()) {
                    continue;
                }
                if r.skip > 0 {
                    r.skip -= 1;
                    continue;
                }
                hit = Some(i);
                break;
            }
            if let Some(i) = hit {
                let r = plan.rules.remove(i);
                plan.fired.push((call, op, path.to_path_buf(), r.action.clone()));
                return match r.action {
                    Action::Fail(errno) => Err(io::Error::from_raw_os_error(errno)),
                    Action::Crash => {
                        plan.crashed = true;
                        Err(dead())
                    }
                };
            }
            if op == Op::Sync {
                if let Ok(m) = std::fs::metadata(path) {
                    if m.is_file() {
                        plan.synced_len.insert(path.to_path_buf(), m.len());
                    }
                }
            }
            Ok(())
        })
    }
}
