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

/// Receives the NAND operations the FTL emits, in order.
pub trait NandSink {
    fn op(&mut self, op: NandOp);
}

/// Fast-forward: no timing, the calls compile away.
pub struct NoTiming;
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
