//! blktrace binary traces, read as fio 3.33 reads them with `read_iolog=` (blktrace.c
//! `read_blktrace`, `queue_trace`; docs/fio.md §2.10).
//!
//! A trace is a sequence of 48-byte `blk_io_trace` records (blktrace_api.h), each followed
//! by `pdu_len` bytes of payload, in the byte order of the machine that recorded it (the
//! magic tells). fio keeps only the *queue* events (`Q` in blkparse): a discard becomes a
//! trim, a flush a sync (a write that also flushes is a sync only: fio tests the flush bit
//! first), anything else a read or, with the write bit, a write; a zero-byte read or write
//! is dropped with a warning. Every non-notify queue event, kept or not, moves the clock
//! its successor's delay counts from. The queue depth comes from the whole trace: queue
//! events raise it, merges lower it, and each completion records the most seen since the
//! last completion (capped at 1024, at least 1 for a direction with I/O).
//!
//! Two deliberate differences: a record cut short by the end of the file, or a payload
//! that runs past it, is an error (fio stops reading there without a word, measured), and
//! a zero-length discard is refused like any zero-length I/O.

use std::io::{self, Read, Seek, SeekFrom, Write};

use super::{At, FioReplay, Pacer, TraceError, TraceIo, TraceOp, TraceReader};
use crate::workload::Ddir;

/// `BLK_IO_TRACE_MAGIC`: the top 24 bits of a record's first word; the low 8 are the version.
pub const MAGIC: u32 = 0x6561_7400;
/// The only version fio reads (`BLK_IO_TRACE_VERSION`).
pub const VERSION: u32 = 7;
/// Size of `struct blk_io_trace`.
pub const RECORD_BYTES: usize = 48;

/// Trace categories (`BLK_TC_*`), shifted into an action's top 16 bits.
pub const TC_READ: u32 = 1 << 16;
pub const TC_WRITE: u32 = 1 << 17;
pub const TC_FLUSH: u32 = 1 << 18;
pub const TC_QUEUE: u32 = 1 << 20;
pub const TC_COMPLETE: u32 = 1 << 23;
pub const TC_NOTIFY: u32 = 1 << 26;
pub const TC_DISCARD: u32 = 1 << 29;
/// Basic actions (`__BLK_TA_*`), an action's low 16 bits.
pub const TA_QUEUE: u32 = 1;
pub const TA_BACKMERGE: u32 = 2;
pub const TA_FRONTMERGE: u32 = 3;
pub const TA_ISSUE: u32 = 7;
pub const TA_COMPLETE: u32 = 8;

/// fio's limit on a probed depth (stacked devices may lack completions).
const MAX_PROBED_DEPTH: i64 = 1024;

/// One `struct blk_io_trace`, in host order.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    pub magic: u32,
    pub sequence: u32,
    pub time: u64,
    pub sector: u64,
    pub bytes: u32,
    pub action: u32,
    pub pid: u32,
    pub device: u32,
    pub cpu: u32,
    pub error: u16,
    pub pdu_len: u16,
}

impl Record {
    /// A record from its 48 bytes, little-endian or (`swap`) big-endian.
    pub fn parse(b: &[u8; RECORD_BYTES], swap: bool) -> Record {
        let u16_at = |i: usize| {
            let v = [b[i], b[i + 1]];
            if swap {
                u16::from_be_bytes(v)
            } else {
                u16::from_le_bytes(v)
            }
        };
        let u32_at = |i: usize| {
            let v = b[i..i + 4].try_into().expect("4 bytes");
            if swap {
                u32::from_be_bytes(v)
            } else {
                u32::from_le_bytes(v)
            }
        };
        let u64_at = |i: usize| {
            let v = b[i..i + 8].try_into().expect("8 bytes");
            if swap {
                u64::from_be_bytes(v)
            } else {
                u64::from_le_bytes(v)
            }
        };
        Record {
            magic: u32_at(0),
            sequence: u32_at(4),
            time: u64_at(8),
            sector: u64_at(16),
            bytes: u32_at(24),
            action: u32_at(28),
            pid: u32_at(32),
            device: u32_at(36),
            cpu: u32_at(40),
            error: u16_at(44),
            pdu_len: u16_at(46),
        }
    }

    /// The record's 48 bytes, little-endian.
    pub fn to_bytes(&self) -> [u8; RECORD_BYTES] {
        let mut b = [0u8; RECORD_BYTES];
        b[0..4].copy_from_slice(&self.magic.to_le_bytes());
        b[4..8].copy_from_slice(&self.sequence.to_le_bytes());
        b[8..16].copy_from_slice(&self.time.to_le_bytes());
        b[16..24].copy_from_slice(&self.sector.to_le_bytes());
        b[24..28].copy_from_slice(&self.bytes.to_le_bytes());
        b[28..32].copy_from_slice(&self.action.to_le_bytes());
        b[32..36].copy_from_slice(&self.pid.to_le_bytes());
        b[36..40].copy_from_slice(&self.device.to_le_bytes());
        b[40..44].copy_from_slice(&self.cpu.to_le_bytes());
        b[44..46].copy_from_slice(&self.error.to_le_bytes());
        b[46..48].copy_from_slice(&self.pdu_len.to_le_bytes());
        b
    }

    /// fio's `t_get_ddir`: the read bit first, then write, then discard.
    fn ddir(&self) -> Option<Ddir> {
        if self.action & TC_READ != 0 {
            Some(Ddir::Read)
        } else if self.action & TC_WRITE != 0 {
            Some(Ddir::Write)
        } else if self.action & TC_DISCARD != 0 {
            Some(Ddir::Trim)
        } else {
            None
        }
    }

    fn basic(&self) -> u32 {
        self.action & 0xffff
    }
}

/// Whether `head` (a file's first bytes) starts with a blktrace record, and whether its
/// byte order is big-endian (fio's `is_blktrace`: a whole record, then the magic either way).
pub fn sniff(head: &[u8]) -> Option<bool> {
    let first: [u8; 4] = head.get(..4)?.try_into().ok()?;
    if head.len() < RECORD_BYTES {
        return None;
    }
    if u32::from_le_bytes(first) & 0xffff_ff00 == MAGIC {
        Some(false)
    } else if u32::from_be_bytes(first) & 0xffff_ff00 == MAGIC {
        Some(true)
    } else {
        None
    }
}

/// Reads one record after another, checking magic and version and skipping payloads.
struct Records<R> {
    r: R,
    swap: Option<bool>,
    index: u64,
    byte: u64,
}

impl<R: Read> Records<R> {
    fn new(r: R) -> Self {
        Records { r, swap: None, index: 0, byte: 0 }
    }

    /// The next record and where it starts; None at the end of the file.
    fn next(&mut self) -> Result<Option<(Record, At)>, TraceError> {
        let at = At::Record { index: self.index, byte: self.byte };
        let mut b = [0u8; RECORD_BYTES];
        let got = read_full(&mut self.r, &mut b)?;
        if got == 0 {
            return Ok(None);
        }
        if got < RECORD_BYTES {
            return Err(TraceError::new(at, format!("truncated: the file ends {got} bytes into a {RECORD_BYTES}-byte record")));
        }
        let swap = match self.swap {
            Some(s) => s,
            None => {
                let s = sniff(&b).ok_or_else(|| TraceError::new(at, "not a blktrace file (no blk_io_trace magic)"))?;
                self.swap = Some(s);
                s
            }
        };
        let t = Record::parse(&b, swap);
        if t.magic & 0xffff_ff00 != MAGIC {
            return Err(TraceError::new(at, format!("bad magic {:#010x} (fio: bad magic in blktrace data)", t.magic)));
        }
        if t.magic & 0xff != VERSION {
            return Err(TraceError::new(at, format!("blktrace version {}; fio reads version {VERSION}", t.magic & 0xff)));
        }
        let pdu = t.pdu_len as u64;
        let skipped = io::copy(&mut (&mut self.r).take(pdu), &mut io::sink())?;
        if skipped < pdu {
            return Err(TraceError::new(at, format!("truncated: the file ends {skipped} bytes into its {pdu}-byte payload")));
        }
        self.index += 1;
        self.byte += RECORD_BYTES as u64 + pdu;
        Ok(Some((t, at)))
    }
}

/// Fill `b` from `r` as far as the file goes; the bytes read.
fn read_full(r: &mut impl Read, b: &mut [u8]) -> Result<usize, TraceError> {
    let mut got = 0;
    while got < b.len() {
        match r.read(&mut b[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(got)
}

/// A blktrace file as fio 3.33 replays it: the I/Os of its queue events in trace order.
pub struct BlktraceReader<R> {
    records: Records<R>,
    opts: FioReplay,
    pacer: Pacer,
    /// Queue events since the last completion, and the most seen at a completion, per
    /// direction (fio's `this_depth`, `depth`).
    this_depth: [i64; 3],
    depth: [i64; 3],
    /// Kept events: reads, writes, trims, syncs.
    ios: [u64; 4],
    /// Devices (major, minor) in order of first use, and the last one looked up.
    devices: Vec<(u32, u32)>,
    last_device: Option<(u32, u32)>,
    zero_bytes: Option<u32>,
}

impl<R: Read> BlktraceReader<R> {
    pub fn new(r: R, opts: FioReplay) -> Self {
        let pacer = Pacer::new(opts.time_scale, opts.no_stall);
        BlktraceReader {
            records: Records::new(r),
            opts,
            pacer,
            this_depth: [0; 3],
            depth: [0; 3],
            ios: [0; 4],
            devices: Vec::new(),
            last_device: None,
            zero_bytes: None,
        }
    }

    /// Reads, writes, trims and flushes kept so far.
    pub fn counts(&self) -> [u64; 4] {
        self.ios
    }

    /// fio's depth bookkeeping over every record that is not a notification.
    fn track_depth(&mut self, t: &Record) {
        let Some(d) = t.ddir() else { return };
        let d = d.index();
        match t.basic() {
            TA_QUEUE => self.this_depth[d] += 1,
            TA_BACKMERGE | TA_FRONTMERGE => self.this_depth[d] -= 1,
            TA_COMPLETE => {
                self.depth[d] = self.depth[d].max(self.this_depth[d]);
                self.this_depth[d] = 0;
            }
            _ => {}
        }
    }

    /// fio's `trace_add_file`: the device's number (in order of first appearance).
    fn device(&mut self, dev: u32) -> u32 {
        let key = (dev >> 20, dev & 0xfffff);
        self.last_device = Some(key);
        match self.devices.iter().position(|&d| d == key) {
            Some(i) => i as u32,
            None => {
                self.devices.push(key);
                (self.devices.len() - 1) as u32
            }
        }
    }

    /// fio's `store_ipo` offset: sectors to bytes, divided by `replay_scale`, aligned down
    /// to `replay_align`.
    fn offset(&self, sector: u64) -> u64 {
        // replay_scale 0 leaves offsets as they are (fio divides only by a non-zero scale).
        let raw = sector.wrapping_mul(512);
        let mut off = raw.checked_div(self.opts.replay_scale).unwrap_or(raw);
        if self.opts.replay_align != 0 {
            off &= !(self.opts.replay_align - 1);
        }
        off
    }

    /// fio's `queue_trace`: the I/O a record asks for, if fio keeps it.
    fn queue_trace(&mut self, t: &Record, at: At) -> Result<Option<TraceIo>, TraceError> {
        if t.basic() != TA_QUEUE {
            return Ok(None);
        }
        let notify = t.action & TC_NOTIFY != 0;
        // The delay in ns, kept by fio in whole microseconds (ipo->delay = ttime / 1000).
        let delay_ns = if notify { 0 } else { self.pacer.delay(t.time) / 1000 * 1000 };
        let mut bytes = t.bytes;
        if self.opts.replay_align != 0 {
            let a = self.opts.replay_align as u32;
            bytes = bytes.wrapping_add(a.wrapping_sub(1)) & !a.wrapping_sub(1);
        }
        let skip = self.opts.skip;
        let (op, len) = if notify {
            return Ok(None);
        } else if t.action & TC_DISCARD != 0 {
            if skip[Ddir::Trim.index()] {
                return Ok(None);
            }
            if bytes == 0 {
                return Err(TraceError::new(at, "a discard of 0 bytes (zero-length I/O)"));
            }
            (TraceOp::Io(Ddir::Trim), bytes)
        } else if t.action & TC_FLUSH != 0 {
            if skip[3] {
                return Ok(None);
            }
            (TraceOp::Sync, 0)
        } else {
            let volume = self.device(t.device);
            let ddir = if t.action & TC_WRITE != 0 { Ddir::Write } else { Ddir::Read };
            if skip[ddir.index()] {
                return Ok(None);
            }
            if bytes == 0 {
                self.zero_bytes.get_or_insert(t.action);
                return Ok(None);
            }
            self.ios[ddir.index()] += 1;
            let offset = self.offset(t.sector);
            return Ok(Some(TraceIo { op: TraceOp::Io(ddir), offset, len: bytes as u64, delay_ns, volume, at }));
        };
        let volume = self.device(t.device);
        let offset = if op == TraceOp::Sync { 0 } else { self.offset(t.sector) };
        self.ios[if op == TraceOp::Sync { 3 } else { Ddir::Trim.index() }] += 1;
        Ok(Some(TraceIo { op, offset, len: len as u64, delay_ns, volume, at }))
    }
}

impl<R: Read + Send> TraceReader for BlktraceReader<R> {
    fn next_io(&mut self) -> Result<Option<TraceIo>, TraceError> {
        while let Some((t, at)) = self.records.next()? {
            if t.action & TC_NOTIFY == 0 {
                self.track_depth(&t);
            }
            if let Some(io) = self.queue_trace(&t, at)? {
                return Ok(Some(io));
            }
        }
        Ok(None)
    }

    fn volume_names(&self) -> Vec<String> {
        self.devices.iter().map(|(maj, min)| format!("{maj},{min}")).collect()
    }

    fn notes(&self) -> Vec<String> {
        // fio warns once (FIO_WARN_BTRACE_ZERO).
        self.zero_bytes.iter().map(|a| format!("blktrace: ignoring zero byte trace: action={a:x}")).collect()
    }

    /// fio's probed depth: the most per direction, capped at 1024, at least 1 where there
    /// was I/O; the largest over the directions.
    fn depth(&self) -> Option<u32> {
        let mut max = 0;
        for d in 0..3 {
            let v = if self.depth[d] > MAX_PROBED_DEPTH {
                MAX_PROBED_DEPTH
            } else if self.depth[d] == 0 && self.ios[d] > 0 {
                1
            } else {
                self.depth[d]
            };
            max = max.max(v);
        }
        Some(max.max(0) as u32)
    }
}

/// One input of a merge: its queue events with a direction, times scaled, repeated.
struct Cursor<R> {
    input: usize,
    records: Records<R>,
    scalar: u64,
    iters: u64,
    iter: u64,
    /// The last (unscaled) time of the trace, once its first pass is over.
    length: u64,
    last_time: u64,
    head: Option<Record>,
}

impl<R: Read + Seek> Cursor<R> {
    /// fio's `read_trace`: the next queue event with a direction, its time scaled and
    /// shifted by the passes before; at the end of a pass, the next pass from the start.
    fn advance(&mut self) -> Result<(), (usize, TraceError)> {
        let input = self.input;
        loop {
            match self.records.next().map_err(|e| (input, e))? {
                Some((mut t, _)) => {
                    if t.basic() != TA_QUEUE || t.ddir().is_none() {
                        continue;
                    }
                    self.last_time = t.time;
                    t.time = t.time.wrapping_add(self.iter.wrapping_mul(self.length)).wrapping_mul(self.scalar) / 100;
                    t.pdu_len = 0;
                    self.head = Some(t);
                    return Ok(());
                }
                None => {
                    if self.iter == 0 {
                        self.length = self.last_time;
                    }
                    self.iter += 1;
                    if self.iter >= self.iters {
                        self.head = None;
                        return Ok(());
                    }
                    self.records.r.seek(SeekFrom::Start(0)).map_err(|e| (input, e.into()))?;
                    self.records.index = 0;
                    self.records.byte = 0;
                }
            }
        }
    }
}

/// `merge_blktrace_file`: the queue events (with a direction) of `inputs` in one trace, in
/// time order, each input's times scaled by its percentage in `scalars` and its events
/// repeated `iters` times, each pass after the previous one; written to `out` as
/// little-endian records without payloads. Returns the records written; an error names
/// the input it came from.
///
/// fio picks the earliest head (the first of equal ones, inputs in a list that moves the
/// last input into a finished one's place). What fio documents, not what it does: fio 3.33
/// never merges (its `read_trace` reads a pointer's 8 bytes: "fio: iolog short read", an
/// empty merged file, the traces replayed unmerged; measured), and fio's fix (c55d29ef)
/// writes each pass's last event twice and shifts a pass by the previous pass's *scaled*
/// end. Here a pass starts where the previous one ended, unscaled, and no event repeats.
pub fn merge<R: Read + Seek>(inputs: Vec<R>, scalars: &[u64], iters: &[u64], out: &mut impl Write) -> Result<u64, (usize, TraceError)> {
    let mut live = Vec::with_capacity(inputs.len());
    for (i, r) in inputs.into_iter().enumerate() {
        let mut c = Cursor {
            input: i,
            records: Records::new(r),
            scalar: scalars.get(i).copied().unwrap_or(100),
            iters: iters.get(i).copied().unwrap_or(1),
            iter: 0,
            length: 0,
            last_time: 0,
            head: None,
        };
        c.advance()?;
        if c.records.index == 0 {
            return Err((i, TraceError::new(At::File, "empty: not a blktrace file")));
        }
        live.push(c);
    }
    // fio drops a finished input by moving the last one into its place.
    let mut k = 0;
    while k < live.len() {
        if live[k].head.is_none() {
            live.swap_remove(k);
        } else {
            k += 1;
        }
    }
    let mut written = 0u64;
    while !live.is_empty() {
        let mut best = 0;
        for (i, c) in live.iter().enumerate() {
            if c.head.expect("live").time < live[best].head.expect("live").time {
                best = i;
            }
        }
        let t = live[best].head.expect("live");
        out.write_all(&t.to_bytes()).map_err(|e| (live[best].input, e.into()))?;
        written += 1;
        live[best].advance()?;
        if live[best].head.is_none() {
            live.swap_remove(best);
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor as Mem;

    const DEV: u32 = 259 << 20 | 1;

    fn rec(time: u64, sector: u64, bytes: u32, action: u32) -> Record {
        Record { magic: MAGIC | VERSION, time, sector, bytes, action, device: DEV, ..Record::default() }
    }

    fn file(recs: &[Record]) -> Vec<u8> {
        recs.iter().flat_map(|r| r.to_bytes()).collect()
    }

    fn read_all(bytes: Vec<u8>, opts: FioReplay) -> (Vec<TraceIo>, BlktraceReader<Mem<Vec<u8>>>) {
        let mut r = BlktraceReader::new(Mem::new(bytes), opts);
        let mut out = Vec::new();
        while let Some(io) = r.next_io().unwrap() {
            out.push(io);
        }
        (out, r)
    }

    fn ops(ios: &[TraceIo]) -> Vec<(TraceOp, u64, u64, u64)> {
        ios.iter().map(|i| (i.op, i.offset, i.len, i.delay_ns)).collect()
    }

    const Q: u32 = TA_QUEUE | TC_QUEUE;

    #[test]
    fn queue_events_become_fio_ios_with_their_delays() {
        let recs = [
            rec(1_000, 8, 4096, Q | TC_READ),
            rec(1_500, 8, 4096, TA_ISSUE | TC_READ),
            rec(3_000, 8, 4096, TA_COMPLETE | TC_COMPLETE | TC_READ),
            rec(11_500, 16, 8192, Q | TC_WRITE),
            rec(12_000, 99, 0, Q | TC_WRITE), // zero bytes: dropped, but the clock moves
            rec(20_000, 100, 4096, Q | TC_WRITE | TC_DISCARD),
            rec(25_000, 0, 0, Q | TC_WRITE | TC_FLUSH),        // a flushing write is a sync only
            rec(25_100, 0, 0, TA_QUEUE | 1 << 16 | TC_NOTIFY), // a timestamp notification: ignored
        ];
        let (ios, r) = read_all(file(&recs), FioReplay::default());
        assert_eq!(
            ops(&ios),
            vec![
                (TraceOp::Io(Ddir::Read), 4096, 4096, 0),
                (TraceOp::Io(Ddir::Write), 8192, 8192, 10_000),
                (TraceOp::Io(Ddir::Trim), 51_200, 4096, 8_000),
                (TraceOp::Sync, 0, 0, 5_000),
            ]
        );
        assert_eq!(r.counts(), [1, 1, 1, 1]);
        assert_eq!(r.volume_names(), vec!["259,1"]);
        assert_eq!(r.notes(), vec![format!("blktrace: ignoring zero byte trace: action={:x}", Q | TC_WRITE)]);
        assert_eq!(ios[2].at, At::Record { index: 5, byte: 240 });
    }

    #[test]
    fn the_replay_options_scale_align_skip_and_pace() {
        let recs = [rec(1_000, 9, 1000, Q | TC_READ), rec(3_000, 17, 4096, Q | TC_WRITE), rec(7_000, 25, 512, Q | TC_READ)];
        let opts = FioReplay {
            replay_scale: 2,
            replay_align: 1024,
            time_scale: 100.0 / 200.0,
            skip: [false, true, false, false],
            ..FioReplay::default()
        };
        let (ios, _) = read_all(file(&recs), opts);
        // 9 * 512 / 2 = 2304 -> 2048; lengths rounded up to 1024; the skipped write still
        // moved the clock: 4000 ns after it, at 200 % -> 2 us.
        assert_eq!(ops(&ios), vec![(TraceOp::Io(Ddir::Read), 2048, 1024, 0), (TraceOp::Io(Ddir::Read), 6144, 1024, 2_000)]);
        let still = FioReplay { no_stall: true, ..FioReplay::default() };
        assert!(read_all(file(&recs), still).0.iter().all(|i| i.delay_ns == 0));
    }

    #[test]
    fn the_depth_is_probed_as_fio_probes_it() {
        // Three reads queued before the first completes, a merge, then one at a time.
        let mut recs = vec![];
        for s in 0..3 {
            recs.push(rec(10 + s, s * 8, 4096, Q | TC_READ));
        }
        recs.push(rec(20, 0, 4096, TA_BACKMERGE | TC_QUEUE | TC_READ));
        recs.push(rec(30, 0, 4096, TA_COMPLETE | TC_COMPLETE | TC_READ));
        recs.push(rec(40, 64, 4096, Q | TC_WRITE));
        let (_, r) = read_all(file(&recs), FioReplay::default());
        assert_eq!(r.depth(), Some(2), "3 queued - 1 merged; the write never completes: 1");
    }

    #[test]
    fn both_byte_orders_and_payloads_are_read() {
        let r = rec(5, 8, 4096, Q | TC_WRITE);
        let mut big = Vec::new();
        for v in [r.magic, r.sequence] {
            big.extend(v.to_be_bytes());
        }
        big.extend(r.time.to_be_bytes());
        big.extend(r.sector.to_be_bytes());
        for v in [r.bytes, r.action, r.pid, r.device, r.cpu] {
            big.extend(v.to_be_bytes());
        }
        big.extend(0u16.to_be_bytes());
        big.extend(3u16.to_be_bytes());
        big.extend([1, 2, 3]);
        big.extend(big.clone());
        let (ios, _) = read_all(big, FioReplay::default());
        assert_eq!(ops(&ios), vec![(TraceOp::Io(Ddir::Write), 4096, 4096, 0); 2]);
        assert_eq!(ios[1].at, At::Record { index: 1, byte: 51 });
    }

    #[test]
    fn damaged_traces_are_errors_naming_the_record() {
        let good = file(&[rec(1, 0, 512, Q | TC_READ), rec(2, 0, 512, Q | TC_READ)]);
        let err = |bytes: Vec<u8>| {
            let mut r = BlktraceReader::new(Mem::new(bytes), FioReplay::default());
            loop {
                match r.next_io() {
                    Ok(Some(_)) => {}
                    Ok(None) => panic!("no error"),
                    Err(e) => return e.render("t.bin"),
                }
            }
        };
        assert_eq!(err(good[..70].to_vec()), "t.bin: record 1 (byte 48): truncated: the file ends 22 bytes into a 48-byte record");
        let mut pdu = good.clone();
        pdu[46] = 100;
        assert!(err(pdu).contains("record 0 (byte 0): truncated: the file ends 48 bytes into its 100-byte payload"));
        let mut magic = good.clone();
        magic[48 + 3] = 0x12;
        assert!(err(magic).contains("record 1 (byte 48): bad magic 0x12617407"));
        let mut version = good;
        version[48] = 6;
        assert!(err(version).contains("blktrace version 6; fio reads version 7"));
        assert!(err(file(&[rec(1, 0, 0, Q | TC_DISCARD)])).contains("a discard of 0 bytes"));
    }

    #[test]
    fn merging_orders_by_scaled_time_and_repeats_passes() {
        let a =
            file(&[rec(100, 0, 512, Q | TC_READ), rec(150, 0, 512, TA_COMPLETE | TC_COMPLETE | TC_READ), rec(300, 8, 512, Q | TC_READ)]);
        let b = file(&[rec(100, 16, 512, Q | TC_WRITE), rec(400, 24, 512, Q | TC_FLUSH)]);
        let mut out = Vec::new();
        let n = merge(vec![Mem::new(a), Mem::new(b)], &[50, 100], &[2, 1], &mut out).unwrap();
        let merged: Vec<(u64, u64)> =
            out.chunks(RECORD_BYTES).map(|c| Record::parse(c.try_into().unwrap(), false)).map(|r| (r.time, r.sector)).collect();
        // a at half speed, twice (the second pass shifted by a's end, 300): 50, 150, 200, 300;
        // b's write at 100; b's flush has no direction and is dropped.
        assert_eq!(merged, vec![(50, 0), (100, 16), (150, 8), (200, 0), (300, 8)]);
        assert_eq!(n, 5);
        let bad = merge(vec![Mem::new(vec![0u8; 48])], &[], &[], &mut Vec::new()).unwrap_err();
        assert_eq!(bad.0, 0);
    }
}
