//! The operations the FTL emits and the timing model places on NAND timelines: the
//! interface between the two (the FTL never sees time; [`NoTiming`] is fast-forward).

/// Why a NAND operation happens.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Cause {
    Host,
    /// Read of the old copy for a read-modify-write of a partly written IU.
    Rmw,
    Gc,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum NandOp {
    /// Read `bytes` of the IU at `ppa`.
    Read { ppa: u32, bytes: u32, cause: Cause },
    /// Program one whole IU at `ppa`.
    Program { ppa: u32, cause: Cause },
    /// Erase superblock `sb` (one block on every plane of every die).
    Erase { sb: u32 },
}

/// A random cache-line access of the FTL to one of its two maps (arrays of the maps'
/// size, far beyond any cache): what bounds fast-forward at full scale. Sequential map
/// accesses (the frontiers' P2L entries, a victim's P2L scan) and the small tables (the
/// superblock table, victim index, write-buffer index, chunk counters) are not reported.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MapTouch {
    /// A programmed host IU's L2P entry: its old mapping read, its new one written (one line).
    HostL2p,
    /// A GC validity check of a victim IU through the L2P (read, and written again when the
    /// IU is still valid and relocated: one line either way).
    GcCheck,
}

/// Receives the NAND operations the FTL emits, in order.
pub trait NandSink {
    fn op(&mut self, op: NandOp);

    /// A random map access (`ssdtwin bench ftl` counts them). Every sink of the model
    /// ignores it, so the call compiles away; only [`TouchCounter`] instantiates a
    /// counting copy of the hot functions.
    #[inline(always)]
    fn touch(&mut self, _: MapTouch) {}

    /// GC copies the IU at `from` (`bytes`) to `to`: its read, then its program. One call,
    /// so a timing sink can place the pair without dispatching on each operation.
    #[inline(always)]
    fn gc_copy(&mut self, from: u32, to: u32, bytes: u32) {
        self.op(NandOp::Read { ppa: from, bytes, cause: Cause::Gc });
        self.op(NandOp::Program { ppa: to, cause: Cause::Gc });
    }
}

/// A sink that fast-forward can split among threads, one per group of FTL partitions, and
/// sum back (in any order: the result must not depend on it).
pub trait ShardSink: NandSink + Send + Default {
    fn absorb(&mut self, other: Self);
}

/// Fast-forward that counts the FTL's random map accesses (`ssdtwin bench ftl`): the same
/// state changes as [`NoTiming`], in a separately monomorphised copy of the write path.
#[derive(Default, Debug, Clone, Copy)]
pub struct TouchCounter {
    pub host_l2p: u64,
    pub gc_checks: u64,
}

impl NandSink for TouchCounter {
    #[inline(always)]
    fn op(&mut self, _: NandOp) {}

    #[inline(always)]
    fn touch(&mut self, t: MapTouch) {
        match t {
            MapTouch::HostL2p => self.host_l2p += 1,
            MapTouch::GcCheck => self.gc_checks += 1,
        }
    }
}

impl ShardSink for TouchCounter {
    fn absorb(&mut self, other: TouchCounter) {
        self.host_l2p += other.host_l2p;
        self.gc_checks += other.gc_checks;
    }
}

/// Fast-forward: no timing, the calls compile away.
#[derive(Default)]
pub struct NoTiming;

impl ShardSink for NoTiming {
    fn absorb(&mut self, _: NoTiming) {}
}
impl NandSink for NoTiming {
    #[inline(always)]
    fn op(&mut self, _: NandOp) {}
}

/// Records every operation (tests).
#[derive(Default, Debug)]
pub struct Recorder(pub Vec<NandOp>);
impl NandSink for Recorder {
    fn op(&mut self, op: NandOp) {
        self.0.push(op)
    }
}
