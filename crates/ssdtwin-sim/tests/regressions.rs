//! Minimal sequences the simulation found (docs/simulation.md, "Bugs found"), kept as
//! fixed tests: each failed before its fix.

use ssdtwin_sim::{End, Fault, ImageUnderTest, NbdOp, Step};

fn run(steps: &[Step]) {
    let mut sim = ImageUnderTest::new(0).unwrap();
    for (i, s) in steps.iter().enumerate() {
        if let Err(e) = sim.step(s) {
            panic!("step {} ({s:?}): {e}\nlog:\n{}", i + 1, sim.log.join("\n"));
        }
    }
}

/// A commit inside `serve` that fails (here: ENOSPC on its first fsync) must stop the
/// backend taking writes: before the fix the failure was only returned from the tick, and
/// a later TRIM was acknowledged on an image that could no longer make it durable.
#[test]
fn a_failed_commit_while_serving_makes_the_backend_refuse_writes() {
    run(&[Step::Serve {
        ops: vec![
            NbdOp::Write { ns: 0, block: 0, blocks: 1, fua: false },
            NbdOp::Idle { ms: 2000 },
            NbdOp::Trim { ns: 0, block: 0, blocks: 1 },
        ],
        end: End::Clean,
        fault: Some(Fault::Fail { n: 0, errno: libc::ENOSPC, sync_only: true }),
    }]);
}

/// The journal reset after a commit fails at its fsync: before the fix the writer kept its
/// old length and wrote the next records after a gap of zeroes, so after a crash the image
/// opened only with `check --repair` ("damaged at byte 32").
#[test]
fn a_failed_journal_reset_leaves_an_image_that_opens_after_a_crash() {
    run(&[
        Step::WriteProtect { ns: 0, mode: 1 },
        Step::Serve {
            ops: vec![
                NbdOp::Read { ns: 0, block: 0, blocks: 1 },
                NbdOp::Idle { ms: 1427 },
                NbdOp::Idle { ms: 573 },
                NbdOp::Read { ns: 0, block: 0, blocks: 1 },
            ],
            end: End::Crash { tear_per_mille: None },
            fault: Some(Fault::Fail { n: 4, errno: libc::ENOSPC, sync_only: true }),
        },
    ]);
}

/// Idle GC moves data without a host write: a commit must save the maps (it once linked the
/// previous generation's maps under the new state).
#[test]
fn idle_gc_then_commit_then_reopen_keeps_the_ftl() {
    run(&[
        Step::Precondition { ns: 0, random: false, pct: 100 },
        Step::Precondition { ns: 0, random: true, pct: 100 },
        Step::Commit { fault: None },
        Step::IdleGc { moves: 500 },
        Step::Reopen,
    ]);
}

/// Format of a namespace smaller than one block of the new LBA format: refused, unchanged
/// (before the fix it left a namespace of 0 blocks that no check accepts).
#[test]
fn format_of_a_tiny_namespace_to_4k_blocks_is_refused() {
    run(&[
        Step::DeleteNs { ns: 0 },
        Step::CreateNs { pct: 99, lbaf: 0 },
        Step::CreateNs { pct: 83, lbaf: 0 },
        Step::CreateNs { pct: 94, lbaf: 0 },
        Step::CreateNs { pct: 1, lbaf: 0 },
        Step::Format { ns: 123, lbaf: 1, ses: 0 },
    ]);
}

/// Not a bug found but a fixed path through the DRAM namespace (the multi-tenant drive): created beside
/// the factory namespace, served, crashed after a flush, reopened; the data and the counters
/// (host writes that are never NAND writes) hold at every step.
#[test]
fn a_served_dram_namespace_keeps_its_flushed_data_across_a_crash() {
    run(&[
        Step::DeleteNs { ns: 0 },
        Step::CreateNs { pct: 90, lbaf: 0 },
        Step::Attach { ns: 0 },
        Step::CreateDramNs { pct: 50, lbaf: 1 },
        Step::Attach { ns: 1 },
        Step::Serve {
            ops: vec![
                NbdOp::Write { ns: 1, block: 3, blocks: 4, fua: false },
                NbdOp::Write { ns: 0, block: 3, blocks: 4, fua: false },
                NbdOp::Flush,
                NbdOp::Trim { ns: 1, block: 4, blocks: 1 },
                NbdOp::Read { ns: 1, block: 3, blocks: 4 },
                NbdOp::Write { ns: 1, block: 9, blocks: 2, fua: false },
            ],
            end: End::Crash { tear_per_mille: Some(500) },
            fault: None,
        },
        Step::Fio { ns: 1, kind: ssdtwin_sim::FioKind::RandRw, pct: 50, seed: 7 },
        Step::Reopen,
        Step::CreateDramNs { pct: 100, lbaf: 0 },
        Step::CreateDramNs { pct: 100, lbaf: 0 },
    ]);
}
