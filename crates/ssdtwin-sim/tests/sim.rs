//! The deterministic simulation (docs/simulation.md): seeded random step sequences over a
//! tiny drive image, with faults, invariants checked after every step, and proptest-state-
//! machine shrinking a failing sequence.
//!
//! * `cargo test -p ssdtwin-sim --release` runs the fixed CI seed set;
//! * `SSDTWIN_SIM_SEED=N` runs one seed (the replay line a failure prints);
//! * `SSDTWIN_SIM_SEEDS=A..B` runs a range (`make sim SEEDS=N` runs 1..=N);
//! * `SSDTWIN_SIM_CASES` (sequences per seed) and `SSDTWIN_SIM_STEPS` (max steps per sequence).

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestError, TestRunner};
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest};
use ssdtwin_sim::{End, Fault, FioKind, ImageUnderTest, NbdOp, Step};

/// The CI seed set, 1..=CI_SEEDS: fixed so a CI failure replays (~5 s in release mode).
const CI_SEEDS: u64 = 32;
const CI_CASES: u32 = 8;
const CI_STEPS: usize = 64;

struct Model;

fn fault() -> impl Strategy<Value = Option<Fault>> {
    prop_oneof![
        6 => Just(None),
        1 => (0u16..40).prop_map(|n| Some(Fault::Crash { n })),
        1 => (0u16..12, prop_oneof![Just(libc::ENOSPC), Just(libc::EIO)], any::<bool>())
            .prop_map(|(n, errno, sync_only)| Some(Fault::Fail { n, errno, sync_only })),
    ]
}

fn nbd_op() -> impl Strategy<Value = NbdOp> {
    prop_oneof![
        6 => (any::<u8>(), any::<u16>(), 1u8..8, prop::bool::weighted(0.1)).prop_map(|(ns, block, blocks, fua)| NbdOp::Write { ns, block, blocks, fua }),
        3 => (any::<u8>(), any::<u16>(), 1u8..8).prop_map(|(ns, block, blocks)| NbdOp::Read { ns, block, blocks }),
        1 => (any::<u8>(), any::<u16>(), 1u8..16).prop_map(|(ns, block, blocks)| NbdOp::Trim { ns, block, blocks }),
        1 => (any::<u8>(), any::<u16>(), 1u8..8, any::<bool>()).prop_map(|(ns, block, blocks, no_hole)| NbdOp::WriteZeroes { ns, block, blocks, no_hole }),
        2 => Just(NbdOp::Flush),
        1 => (1u16..3000).prop_map(|ms| NbdOp::Idle { ms }),
    ]
}

fn fio_kind() -> impl Strategy<Value = FioKind> {
    prop_oneof![
        Just(FioKind::RandWrite),
        Just(FioKind::SeqWrite),
        Just(FioKind::RandRead),
        Just(FioKind::Trim),
        Just(FioKind::RandRw),
        Just(FioKind::ThinkTime),
        Just(FioKind::RateLimited),
    ]
}

fn end() -> impl Strategy<Value = End> {
    prop_oneof![
        2 => Just(End::Clean),
        1 => Just(End::Crash { tear_per_mille: None }),
        1 => (0u16..=1000).prop_map(|t| End::Crash { tear_per_mille: Some(t) }),
    ]
}

impl ReferenceStateMachine for Model {
    /// The image's seed. Steps pick namespaces and blocks by index, so the model needs no
    /// more state: every subsequence is a valid sequence (shrinking stays valid).
    type State = u64;
    type Transition = Step;

    fn init_state() -> BoxedStrategy<u64> {
        any::<u64>().boxed()
    }

    fn transitions(_: &u64) -> BoxedStrategy<Step> {
        prop_oneof![
            1 => (1u8..=100, 0u8..2).prop_map(|(pct, lbaf)| Step::CreateNs { pct, lbaf }),
            1 => (1u8..=100, 0u8..2).prop_map(|(pct, lbaf)| Step::CreateDramNs { pct, lbaf }),
            1 => (any::<u8>(), 0u16..4000, 0u16..4000, 0u16..1000, 0u8..5)
                .prop_map(|(ns, read_mbps, write_mbps, kiops, class)| Step::Qos { ns, read_mbps, write_mbps, kiops, class }),
            1 => prop_oneof![Just(0u32), Just(0x0f07_0300), Just(0x0000_0001), any::<u32>()].prop_map(|value| Step::Arbitration { value }),
            1 => any::<u8>().prop_map(|ns| Step::DeleteNs { ns }),
            1 => any::<u8>().prop_map(|ns| Step::Attach { ns }),
            1 => any::<u8>().prop_map(|ns| Step::Detach { ns }),
            1 => (any::<u8>(), 0u8..2, 0u8..3).prop_map(|(ns, lbaf, ses)| Step::Format { ns, lbaf, ses }),
            1 => (any::<u8>(), 0u8..3).prop_map(|(ns, mode)| Step::WriteProtect { ns, mode }),
            2 => (any::<u8>(), any::<bool>(), 1u8..=150).prop_map(|(ns, random, pct)| Step::Precondition { ns, random, pct }),
            3 => (any::<u8>(), fio_kind(), 1u8..=60, any::<u32>()).prop_map(|(ns, kind, pct, seed)| Step::Fio { ns, kind, pct, seed }),
            2 => (1u16..2000).prop_map(|moves| Step::IdleGc { moves }),
            3 => fault().prop_map(|fault| Step::Commit { fault }),
            1 => Just(Step::Reopen),
            1 => Just(Step::Crash),
            3 => (prop::collection::vec(nbd_op(), 1..40), end(), fault()).prop_map(|(ops, end, fault)| Step::Serve { ops, end, fault }),
        ]
        .boxed()
    }

    fn apply(state: u64, _: &Step) -> u64 {
        state
    }
}

struct Harness;

/// Steps applied in this process (shrinking included), for the run's figures.
static STEPS_RUN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl StateMachineTest for Harness {
    type SystemUnderTest = ImageUnderTest;
    type Reference = Model;

    fn init_test(seed: &u64) -> ImageUnderTest {
        ImageUnderTest::new(*seed).unwrap_or_else(|e| panic!("{e}"))
    }

    fn apply(mut sim: ImageUnderTest, _: &u64, step: Step) -> ImageUnderTest {
        STEPS_RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Err(e) = sim.step(&step) {
            panic!("step {} ({step:?}) broke an invariant: {e}", sim.steps_run);
        }
        sim
    }
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(v.trim().parse().unwrap_or_else(|_| panic!("{name}={v}: expected a whole number")))
}

/// Seeds to run: SSDTWIN_SIM_SEED (one), SSDTWIN_SIM_SEEDS (A..B or N = 1..=N), or the CI set.
fn seeds() -> Vec<u64> {
    if let Some(s) = env_u64("SSDTWIN_SIM_SEED") {
        return vec![s];
    }
    if let Ok(r) = std::env::var("SSDTWIN_SIM_SEEDS") {
        let bad = || panic!("SSDTWIN_SIM_SEEDS={r}: expected N (seeds 1..=N) or A..B");
        return match r.split_once("..") {
            Some((a, b)) => (a.trim().parse().unwrap_or_else(|_| bad())..b.trim().parse().unwrap_or_else(|_| bad())).collect(),
            None => (1..=r.trim().parse().unwrap_or_else(|_| bad())).collect(),
        };
    }
    (1..=CI_SEEDS).collect()
}

/// Run one seed; on failure return the shrunk failure and the minimal sequence.
fn run_seed(seed: u64, cases: u32, steps: usize) -> Result<(), String> {
    let config = Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        max_shrink_iters: 2000,
        verbose: 0,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config.clone());
    let strategy = Model::sequential_strategy(1..steps);
    let r = runner.run(&strategy, |(init, transitions, seen)| {
        Harness::test_sequential(config.clone(), init, transitions, seen);
        Ok(())
    });
    match r {
        Ok(()) => Ok(()),
        Err(TestError::Fail(why, (init, transitions, _))) => {
            let list: Vec<String> = transitions.iter().enumerate().map(|(i, t)| format!("  {:>3}. {t:?}", i + 1)).collect();
            Err(format!("{why}\nminimal sequence (image seed {init}, {} steps):\n{}", transitions.len(), list.join("\n")))
        }
        Err(TestError::Abort(why)) => Err(format!("aborted: {why}")),
    }
}

#[test]
fn sim() {
    let cases = env_u64("SSDTWIN_SIM_CASES").map(|c| c as u32).unwrap_or(CI_CASES);
    let steps = env_u64("SSDTWIN_SIM_STEPS").map(|s| s as usize).unwrap_or(CI_STEPS);
    let seeds = seeds();
    // Shrinking re-runs the failing case many times; its panics are expected, not news.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let t0 = std::time::Instant::now();
    let mut failure = None;
    for &seed in &seeds {
        if let Err(e) = run_seed(seed, cases, steps) {
            failure = Some((seed, e));
            break;
        }
    }
    std::panic::set_hook(hook);
    let secs = t0.elapsed().as_secs_f64();
    if let Some((seed, e)) = failure {
        let mut replay = format!("SSDTWIN_SIM_SEED={seed}");
        if cases != CI_CASES {
            replay += &format!(" SSDTWIN_SIM_CASES={cases}");
        }
        if steps != CI_STEPS {
            replay += &format!(" SSDTWIN_SIM_STEPS={steps}");
        }
        if let Ok(p) = std::env::var("SSDTWIN_SIM_PARTITIONS") {
            replay += &format!(" SSDTWIN_SIM_PARTITIONS={p}");
        }
        panic!("simulation seed {seed} failed: {e}\nreplay: {replay} cargo test -p ssdtwin-sim --release -- sim");
    }
    let n = STEPS_RUN.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!(
        "simulation: {} seeds x {cases} sequences x up to {steps} steps passed: {n} steps in {secs:.1} s ({:.0} steps/s)",
        seeds.len(),
        n as f64 / secs
    );
}
