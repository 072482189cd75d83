//! A trace file as a replay (docs/traces.md): its format, named or sniffed; one pass that
//! checks every line and sums the trace up before anything runs; and the same lines
//! streamed to the engine, each I/O placed on the target.
//!
//! Placing an I/O: an offset past the target's end is refused (naming the line), folded
//! (`Beyond::Wrap`: the offset modulo the target's size) or scaled (`Beyond::Fit`: the
//! trace's whole span shrunk onto the target); an I/O that would still cross the end
//! moves back to end there. With `widen`, an I/O not on the target's LBA grid grows to
//! whole LBAs (a 512-byte-sector trace on a 4 KiB namespace); without, it is refused, as
//! `ssdtwin fio` refuses it. Lines between two I/Os that issue nothing (flushes, file
//! actions) fold their delays into the next I/O's, as fio waits them in turn; those after
//! the last I/O become a last record that issues nothing and holds the job until its time.

use std::io::BufRead;

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::blktrace::{self, BlktraceReader};
use super::csv::{split_fields, CsvFormat, CsvReader, UTF8_BOM};
use super::iolog::{IologReader, HEADER_V2, HEADER_V3};
use super::{decimal, At, FioReplay, ReplayIo, ReplaySource, TraceError, TraceIo, TraceOp, TraceReader};
use crate::workload::Ddir;

/// A trace file's format.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Format {
    Blktrace,
    FioIolog,
    Csv(CsvFormat),
}

impl Format {
    /// The names `--format` takes (and `auto`).
    pub const NAMES: [&'static str; 5] = ["blktrace", "msr", "alibaba", "tencent", "fio-iolog"];

    pub fn parse(name: &str) -> Option<Format> {
        Some(match name {
            "blktrace" => Format::Blktrace,
            "fio-iolog" => Format::FioIolog,
            "msr" => Format::Csv(CsvFormat::Msr),
            "alibaba" => Format::Csv(CsvFormat::Alibaba),
            "tencent" => Format::Csv(CsvFormat::Tencent),
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Format::Blktrace => "blktrace",
            Format::FioIolog => "fio-iolog",
            Format::Csv(c) => c.name(),
        }
    }

    /// `--format auto`: the format of a file that starts with `head` (its first 8 KiB or
    /// all of it): a blktrace record's magic, an iolog header, or the first data line of
    /// one CSV format (a header line before it is passed over).
    pub fn sniff(head: &[u8]) -> Result<Format, String> {
        if blktrace::sniff(head).is_some() {
            return Ok(Format::Blktrace);
        }
        if head.starts_with(HEADER_V2.as_bytes()) || head.starts_with(HEADER_V3.as_bytes()) {
            return Ok(Format::FioIolog);
        }
        let text = head.strip_prefix(UTF8_BOM).unwrap_or(head);
        let mut lines = text.split(|&b| b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l)).filter(|l| !l.trim_ascii().is_empty());
        let mut first = lines.next().unwrap_or_default();
        if split_fields(first).iter().all(|f| decimal(f, u64::MAX).is_none()) {
            first = lines.next().unwrap_or_default(); // a header
        }
        let fields = split_fields(first);
        let found: Vec<CsvFormat> =
            [CsvFormat::Msr, CsvFormat::Alibaba, CsvFormat::Tencent].into_iter().filter(|f| f.matches(&fields)).collect();
        match found[..] {
            [one] => Ok(Format::Csv(one)),
            _ => {
                let shown: String = String::from_utf8_lossy(first).chars().take(60).collect();
                let what = if head.contains(&0) || shown.is_empty() { "binary data".to_string() } else { format!("'{shown}'") };
                Err(format!(
                    "unknown trace format: it starts with {what}, which is none of blktrace (a blk_io_trace magic), fio-iolog \
                     ('fio version 2|3 iolog'), msr (Timestamp,Hostname,DiskNumber,Read|Write,Offset,Size,ResponseTime), \
                     alibaba (device_id,R|W,offset,length,timestamp) or tencent (Timestamp,Offset,Size,0|1,VolumeID); name one with --format"
                ))
            }
        }
    }
}

/// How to read a trace file onto a target: everything a scan, a load or a replay needs
/// besides the file (the binding opens it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// A name of [`Format::NAMES`], or `auto`.
    pub format: String,
    #[serde(default)]
    pub fio: FioReplay,
    /// The CSV formats: keep this volume's lines only.
    #[serde(default)]
    pub volume: Option<String>,
    pub target: Target,
    #[serde(default)]
    pub limits: Limits,
    /// `Beyond::Fit`: the trace's largest offset + length (a scan's `end_bytes`).
    #[serde(default)]
    pub trace_end: u64,
}

impl Plan {
    /// The format to read a file that starts with `head` with.
    pub fn format_of(&self, head: &[u8]) -> Result<Format, String> {
        match self.format.as_str() {
            "auto" => Format::sniff(head),
            name => {
                Format::parse(name).ok_or_else(|| format!("unknown trace format '{name}' (one of {}, or auto)", Format::NAMES.join(", ")))
            }
        }
    }

    /// What is wrong with the plan itself, naming the field and its range: a target of a
    /// non-zero LBA size holding at least one LBA (a zero size or LBA divided by zero
    /// placing the first I/O), a finite time scale of at least 0, and `replay_align` 0
    /// or a power of two (fio's rule; the offsets are masked with it).
    pub fn check(&self) -> Result<(), String> {
        let Target { bytes, lba, .. } = self.target;
        if lba == 0 {
            return Err(format!(
                "target.lba {lba}: at least 1 byte (the namespace's LBA size; fio's read_iolog places I/Os at any byte with 1)"
            ));
        }
        if bytes < lba {
            return Err(format!("target.bytes {bytes}: at least one {lba}-byte LBA (the namespace's size)"));
        }
        let t = self.fio.time_scale;
        if !(t.is_finite() && t >= 0.0) {
            return Err(format!("fio.time_scale {t}: a finite number of at least 0 (what the trace's gaps are multiplied by)"));
        }
        let a = self.fio.replay_align;
        if a != 0 && !a.is_power_of_two() {
            return Err(format!("fio.replay_align {a}: 0 or a power of two"));
        }
        Ok(())
    }

    /// The lines of `r` (a file in `format`) under this plan (an error for a plan
    /// [`Plan::check`] refuses).
    pub fn lines<R: BufRead + Send + 'static>(&self, format: Format, r: R) -> Result<Lines, TraceError> {
        self.check().map_err(|why| TraceError::new(At::File, format!("trace plan: {why}")))?;
        let reader = open(format, r, &self.fio, self.volume.as_deref())?;
        Ok(Lines::new(reader, Mapper::new(self.target, self.trace_end), self.limits))
    }
}

/// The reader of `format` over `r`. fio's formats take fio's replay options; the CSVs take
/// its time scale and no-stall, and keep `volume`'s lines only when it is given.
pub fn open<R: BufRead + Send + 'static>(
    format: Format,
    r: R,
    fio: &FioReplay,
    volume: Option<&str>,
) -> Result<Box<dyn TraceReader>, TraceError> {
    if volume.is_some() && !matches!(format, Format::Csv(_)) {
        return Err(TraceError::new(At::File, format!("a volume filter applies to the CSV formats, not to {}", format.name())));
    }
    Ok(match format {
        Format::Blktrace => Box::new(BlktraceReader::new(r, fio.clone())),
        Format::FioIolog => Box::new(IologReader::new(r, fio.clone())?),
        Format::Csv(c) => Box::new(CsvReader::new(r, c, if fio.no_stall { 0.0 } else { fio.time_scale }, volume)),
    })
}

/// What happens to an I/O past the target's end.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Beyond {
    Refuse,
    /// The offset modulo the target's size.
    Wrap,
    /// Offsets times target size / the trace's end (when the trace is larger).
    Fit,
}

/// The namespace a trace lands on.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    pub bytes: u64,
    pub lba: u64,
    pub beyond: Beyond,
    /// Grow an I/O off the LBA grid to whole LBAs (otherwise refuse it).
    pub widen: bool,
}

/// Places a trace's I/Os on a target and folds the delays of the lines in between.
pub struct Mapper {
    target: Target,
    /// `Fit`: the trace's largest offset + length.
    trace_end: u64,
    first_gap: Option<u64>,
    more_gaps: u64,
    wait: Option<u64>,
    /// I/Os grown to whole LBAs; I/Os folded or scaled to fit.
    pub realigned: u64,
    pub moved: u64,
}

impl Mapper {
    pub fn new(target: Target, trace_end: u64) -> Mapper {
        Mapper { target, trace_end, first_gap: None, more_gaps: 0, wait: None, realigned: 0, moved: 0 }
    }

    /// The engine's I/O for `io`, None for a line that only waits.
    pub fn map(&mut self, io: &TraceIo) -> Result<Option<ReplayIo>, TraceError> {
        let ddir = match io.op {
            TraceOp::Sync | TraceOp::Pause => {
                match self.first_gap {
                    None => self.first_gap = Some(io.delay_ns),
                    Some(_) => self.more_gaps = self.more_gaps.saturating_add(io.delay_ns),
                }
                return Ok(None);
            }
            TraceOp::WaitUntil(ns) => {
                self.wait = Some(self.wait.unwrap_or(0).max(ns));
                return Ok(None);
            }
            TraceOp::Io(d) => d,
        };
        let (offset, len) = self.place(io)?;
        let (delay_ns, extra_ns, absolute) = match (self.wait.take(), self.first_gap.take()) {
            (Some(w), _) => (w, 0, true),
            (None, Some(first)) => (first, self.more_gaps.saturating_add(io.delay_ns), false),
            (None, None) => (io.delay_ns, 0, false),
        };
        self.more_gaps = 0;
        Ok(Some(ReplayIo { ddir, offset, len, delay_ns, extra_ns, absolute, tail: false }))
    }

    /// At the trace's end: the lines read since its last I/O, which fio waits for before
    /// the job ends, as a record that issues nothing ([`ReplayIo::tail`]); None when there
    /// are none. Taken once.
    pub fn finish(&mut self) -> Option<ReplayIo> {
        let (delay_ns, extra_ns, absolute) = match (self.wait.take(), self.first_gap.take()) {
            (Some(w), _) => (w, 0, true),
            (None, Some(first)) => (first, self.more_gaps, false),
            (None, None) => return None,
        };
        self.more_gaps = 0;
        Some(ReplayIo { ddir: Ddir::Read, offset: 0, len: 0, delay_ns, extra_ns, absolute, tail: true })
    }

    /// Where `io` lands, and its length: on the grid, inside the target.
    fn place(&mut self, io: &TraceIo) -> Result<(u64, u64), TraceError> {
        let Target { bytes, lba, beyond, widen } = self.target;
        let at = io.at;
        let num = |v: u64| v.to_string().into_bytes();
        if io.len == 0 {
            return Err(TraceError::field(at, "length", b"0", "zero-length I/O"));
        }
        let mut off = io.offset;
        match beyond {
            Beyond::Fit if self.trace_end > bytes => off = (off as u128 * bytes as u128 / self.trace_end as u128) as u64 / lba * lba,
            Beyond::Wrap => off %= bytes,
            _ => {}
        }
        let mut len = io.len;
        if widen {
            let start = off / lba * lba;
            let end = off.checked_add(len).and_then(|e| e.checked_next_multiple_of(lba));
            // The I/O's end is what overflows: name its length, with the offset it starts at.
            let past = || TraceError::field(at, "length", &num(len), format!("at offset {off}: ends past 2^64 bytes"));
            let end = end.ok_or_else(past)?;
            if start != off || end - start != len {
                self.realigned += 1;
            }
            (off, len) = (start, end - start);
        } else if len % lba != 0 {
            return Err(TraceError::field(at, "length", &num(len), format!("not a multiple of the target's {lba}-byte LBA")));
        } else if off % lba != 0 {
            return Err(TraceError::field(at, "offset", &num(off), format!("not a multiple of the target's {lba}-byte LBA")));
        }
        let end = off.saturating_add(len);
        if end > bytes {
            if beyond == Beyond::Refuse {
                let why = format!("I/O ends at {}, past the end of the target ({bytes} bytes)", off as u128 + len as u128);
                return Err(TraceError::field(at, "offset", &num(off), why));
            }
            if len > bytes {
                return Err(TraceError::field(at, "length", &num(len), format!("larger than the target ({bytes} bytes)")));
            }
            off = (bytes - len) / lba * lba;
        }
        let unmoved = if widen { io.offset / lba * lba } else { io.offset };
        self.moved += (off != unmoved) as u64;
        Ok((off, len))
    }
}

/// Limits of a replay: the first `max_ios` I/Os; bad lines skipped (counted) or refused.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub max_ios: u64,
    pub skip_bad: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_ios: u64::MAX, skip_bad: false }
    }
}

/// A trace's lines, each with the engine's I/O it becomes (if any), within the limits.
pub struct Lines {
    reader: Box<dyn TraceReader>,
    pub mapper: Mapper,
    limits: Limits,
    /// I/Os handed out so far.
    pub ios: u64,
    /// Bad lines passed over, and the first one's message.
    pub skipped: u64,
    pub first_skipped: Option<TraceError>,
}

impl Lines {
    pub fn new(reader: Box<dyn TraceReader>, mapper: Mapper, limits: Limits) -> Lines {
        Lines { reader, mapper, limits, ios: 0, skipped: 0, first_skipped: None }
    }

    /// The next line and its I/O; None at the end (of the trace or of `max_ios`).
    pub fn next_line(&mut self) -> Result<Option<(TraceIo, Option<ReplayIo>)>, TraceError> {
        loop {
            if self.ios >= self.limits.max_ios {
                return Ok(None);
            }
            let io = match self.reader.next_io() {
                Ok(Some(io)) => io,
                Ok(None) => return Ok(None),
                // A text line can be passed over; a binary record cannot (nothing tells
                // where the next one starts).
                Err(e) if self.limits.skip_bad && matches!(e.at, At::Line(_)) => {
                    self.skipped += 1;
                    self.first_skipped.get_or_insert(e);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let replay = self.mapper.map(&io)?;
            self.ios += replay.is_some() as u64;
            return Ok(Some((io, replay)));
        }
    }

    pub fn reader(&self) -> &dyn TraceReader {
        self.reader.as_ref()
    }
}

/// A whole trace summed up (docs/traces.md): what it asks for, before any placing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub format: String,
    /// I/Os and bytes per direction (read, write, trim) as the trace gives them.
    pub ios: [u64; 3],
    pub bytes: [u64; 3],
    /// Flushes and sync lines (timing only).
    pub syncs: u64,
    /// The largest offset + length.
    pub end_bytes: u64,
    /// The trace's length: its delays added up (before the replay's pacing), and at least
    /// its latest version 2 `wait` (a time since the start, which the replay waits for).
    pub span_ns: u64,
    /// Version 2 `wait` lines kept (fio replays an iolog of waits and no I/O: it waits).
    pub waits: u64,
    /// Bad lines passed over (`skip_bad`), and the first one, rendered.
    pub skipped_lines: u64,
    pub first_skipped: Option<String>,
    /// I/Os grown to whole LBAs, moved to fit the target.
    pub realigned: u64,
    pub moved: u64,
    /// Devices, files or volumes, in order of first appearance; those with I/O.
    pub volumes: Vec<String>,
    pub volumes_with_io: Vec<String>,
    /// The queue depth the trace implies (blktrace), and what the reader noticed.
    pub depth: Option<u32>,
    pub notes: Vec<String>,
}

impl Summary {
    pub fn total_ios(&self) -> u64 {
        self.ios.iter().sum()
    }
}

/// A summary built line by line.
pub struct Tally {
    s: Summary,
    with_io: Vec<bool>,
}

impl Tally {
    pub fn new(format: Format) -> Tally {
        Tally { s: Summary { format: format.name().to_string(), ..Summary::default() }, with_io: Vec::new() }
    }

    /// Count a line and the I/O it became (if any).
    pub fn add(&mut self, io: &TraceIo, replay: Option<&ReplayIo>) {
        let s = &mut self.s;
        s.span_ns = s.span_ns.saturating_add(io.delay_ns);
        match io.op {
            TraceOp::Io(d) if replay.is_some() => {
                s.ios[d.index()] += 1;
                s.bytes[d.index()] += io.len;
                s.end_bytes = s.end_bytes.max(io.offset.saturating_add(io.len));
                let v = io.volume as usize;
                if self.with_io.len() <= v {
                    self.with_io.resize(v + 1, false);
                }
                self.with_io[v] = true;
            }
            TraceOp::Sync => s.syncs += 1,
            // A wait holds the replay until its time since the start: the trace lasts until
            // its latest wait at least (a version 2 trace has no other delays).
            TraceOp::WaitUntil(ns) => {
                s.span_ns = s.span_ns.max(ns);
                s.waits += 1;
            }
            _ => {}
        }
    }

    /// The summary, once `lines` has been read to its end.
    pub fn finish(mut self, lines: &Lines) -> Summary {
        let s = &mut self.s;
        s.skipped_lines = lines.skipped;
        s.first_skipped = lines.first_skipped.as_ref().map(|e| e.render(""));
        s.realigned = lines.mapper.realigned;
        s.moved = lines.mapper.moved;
        s.volumes = lines.reader().volume_names();
        s.volumes_with_io = s.volumes.iter().zip(&self.with_io).filter(|(_, &io)| io).map(|(v, _)| v.clone()).collect();
        s.depth = lines.reader().depth();
        s.notes = lines.reader().notes();
        self.s
    }
}

/// Read every line of `lines` (the checks a replay would make, before it runs) and sum the
/// trace up; `keep_going(ios)` is asked every 65,536 lines (false: stop with None).
pub fn scan(mut lines: Lines, format: Format, keep_going: &mut dyn FnMut(u64) -> bool) -> Result<Option<Summary>, TraceError> {
    let mut tally = Tally::new(format);
    let mut n = 0u64;
    while let Some((io, replay)) = lines.next_line()? {
        n += 1;
        if n % 65_536 == 0 && !keep_going(lines.ios) {
            return Ok(None);
        }
        tally.add(&io, replay.as_ref());
    }
    Ok(Some(tally.finish(&lines)))
}

/// Every I/O of `lines` (at most `max_ios`: the next is an error naming its line), then the
/// trace's tail if it has one ([`Mapper::finish`]), and the trace's summary.
pub fn collect(mut lines: Lines, format: Format, max_ios: u64, mut each: impl FnMut(&ReplayIo)) -> Result<Summary, TraceError> {
    let mut tally = Tally::new(format);
    while let Some((io, replay)) = lines.next_line()? {
        if let Some(r) = &replay {
            if lines.ios > max_ios {
                return Err(TraceError::new(io.at, format!("more than {max_ios} I/Os in one trace (the engine holds 40 bytes each)")));
            }
            each(r);
        }
        tally.add(&io, replay.as_ref());
    }
    if let Some(tail) = lines.mapper.finish() {
        each(&tail);
    }
    Ok(tally.finish(&lines))
}

/// A trace streamed to the engine; `progress` counts the I/Os handed out.
pub struct Stream {
    lines: Lines,
    file: String,
    pub progress: Arc<AtomicU64>,
}

impl Stream {
    pub fn new(lines: Lines, file: &str) -> Stream {
        Stream { lines, file: file.to_string(), progress: Arc::new(AtomicU64::new(0)) }
    }
}

impl ReplaySource for Stream {
    fn next_io(&mut self) -> Result<Option<ReplayIo>, String> {
        loop {
            match self.lines.next_line().map_err(|e| e.render(&self.file))? {
                None => return Ok(self.lines.mapper.finish()),
                Some((_, None)) => continue,
                Some((_, Some(io))) => {
                    self.progress.store(self.lines.ios, Ordering::Relaxed);
                    return Ok(Some(io));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(op: TraceOp, offset: u64, len: u64, delay_ns: u64, line: u64) -> TraceIo {
        TraceIo { op, offset, len, delay_ns, volume: 0, at: At::Line(line) }
    }

    const W: TraceOp = TraceOp::Io(Ddir::Write);

    fn target(beyond: Beyond, widen: bool) -> Target {
        Target { bytes: 1 << 20, lba: 4096, beyond, widen }
    }

    /// A plan whose target has no bytes or a zero LBA panicked dividing by zero at the
    /// first I/O; it, and a time scale or alignment fio cannot take, is refused up front.
    #[test]
    fn a_plan_that_cannot_place_an_io_is_refused() {
        let msr_plan = || Plan {
            format: "msr".into(),
            fio: FioReplay::default(),
            volume: None,
            target: target(Beyond::Wrap, true),
            limits: Limits::default(),
            trace_end: 0,
        };
        let plan = |f: &dyn Fn(&mut Plan)| {
            let mut p = msr_plan();
            f(&mut p);
            p.check()
        };
        assert_eq!(plan(&|_| ()), Ok(()));
        type Edit<'a> = &'a dyn Fn(&mut Plan);
        let cases: [(&str, Edit); 7] = [
            ("target.bytes 0:", &|p: &mut Plan| p.target.bytes = 0),
            ("target.bytes 2048:", &|p: &mut Plan| p.target.bytes = 2048),
            ("target.lba 0:", &|p: &mut Plan| p.target.lba = 0),
            ("fio.time_scale NaN:", &|p: &mut Plan| p.fio.time_scale = f64::NAN),
            ("fio.time_scale -1:", &|p: &mut Plan| p.fio.time_scale = -1.0),
            ("fio.time_scale inf:", &|p: &mut Plan| p.fio.time_scale = f64::INFINITY),
            ("fio.replay_align 3:", &|p: &mut Plan| p.fio.replay_align = 3),
        ];
        for (want, f) in cases {
            let e = plan(f).unwrap_err();
            assert!(e.starts_with(want), "{want} {e}");
        }
        let mut p = msr_plan();
        p.target.bytes = 0;
        let e = p.lines(Format::Csv(CsvFormat::Msr), std::io::Cursor::new(b"1,h,0,Write,0,4096,0\n".to_vec())).err().unwrap();
        assert!(e.reason.starts_with("trace plan: target.bytes 0:"), "{}", e.reason);
    }

    #[test]
    fn delays_of_lines_in_between_fold_into_the_next_io() {
        let mut m = Mapper::new(target(Beyond::Refuse, false), 0);
        let out: Vec<Option<ReplayIo>> = [
            io(TraceOp::Pause, 0, 0, 5, 1),
            io(TraceOp::Sync, 0, 0, 7, 2),
            io(W, 0, 4096, 11, 3),
            io(TraceOp::WaitUntil(1000), 0, 0, 0, 4),
            io(TraceOp::Sync, 0, 0, 3, 5),
            io(W, 4096, 4096, 2, 6),
            io(W, 8192, 4096, 13, 7),
        ]
        .iter()
        .map(|i| m.map(i).unwrap())
        .collect();
        let got: Vec<(u64, u64, bool)> = out.into_iter().flatten().map(|r| (r.delay_ns, r.extra_ns, r.absolute)).collect();
        assert_eq!(got, vec![(5, 7 + 11, false), (1000, 0, true), (13, 0, false)]);
        assert_eq!(m.finish(), None, "a trace that ends with an I/O has no tail");
    }

    /// The lines after the last I/O (an iolog's close, a flush, a wait) were dropped: the
    /// replay ended at its last I/O where fio waits for them (iolog.c ipo_special).
    #[test]
    fn lines_after_the_last_io_become_a_tail() {
        let mut m = Mapper::new(target(Beyond::Refuse, false), 0);
        for i in [io(W, 0, 4096, 1, 1), io(TraceOp::Sync, 0, 0, 300, 2), io(TraceOp::Pause, 0, 0, 1000, 3)] {
            m.map(&i).unwrap();
        }
        let tail = m.finish().unwrap();
        assert_eq!((tail.tail, tail.delay_ns, tail.extra_ns, tail.absolute, tail.len), (true, 300, 1000, false, 0));
        assert_eq!(m.finish(), None, "taken once");
        let mut v2 = Mapper::new(target(Beyond::Refuse, false), 0);
        v2.map(&io(W, 0, 4096, 0, 1)).unwrap();
        v2.map(&io(TraceOp::WaitUntil(1_500_000_000), 0, 0, 0, 2)).unwrap();
        let wait = v2.finish().unwrap();
        assert_eq!((wait.delay_ns, wait.absolute), (1_500_000_000, true));
        // Streamed and collected alike: the I/Os, then the tail.
        let text = "fio version 3 iolog\n0 f add\n0 f open\n1000 f write 0 4096\n1001000 f close\n";
        let plan = Plan {
            format: "auto".into(),
            fio: FioReplay::default(),
            volume: None,
            target: target(Beyond::Refuse, false),
            limits: Limits::default(),
            trace_end: 0,
        };
        let lines = || plan.lines(Format::FioIolog, std::io::Cursor::new(text.as_bytes().to_vec())).unwrap();
        let mut got = Vec::new();
        let summary = collect(lines(), Format::FioIolog, 10, |r| got.push((r.tail, r.delay_ns))).unwrap();
        assert_eq!(got, vec![(false, 0), (true, 1_000_000_000)]);
        assert_eq!((summary.total_ios(), summary.span_ns), (1, 1_000_000_000));
        let mut stream = Stream::new(lines(), "t.log");
        let streamed: Vec<bool> = std::iter::from_fn(|| stream.next_io().unwrap()).map(|r| r.tail).collect();
        assert_eq!(streamed, vec![false, true]);
        // A version 2 trace timed by its waits only: it spans its latest wait (it summed
        // the lines' delays alone, all 0 in version 2, and said 0 for a 1.5 s replay).
        let v2 = "fio version 2 iolog\nf add\nf open\nf wait 700 0\nf write 0 4096\nf wait 1500 0\nf close\n";
        let lines = plan.lines(Format::FioIolog, std::io::Cursor::new(v2.as_bytes().to_vec())).unwrap();
        let summary = collect(lines, Format::FioIolog, 10, |_| {}).unwrap();
        assert_eq!((summary.total_ios(), summary.waits, summary.span_ns), (1, 2, 1_500_000_000));
    }

    #[test]
    fn offsets_past_the_end_are_refused_folded_or_scaled() {
        let past = io(W, (1 << 20) + 8192, 4096, 0, 9);
        let e = Mapper::new(target(Beyond::Refuse, false), 0).map(&past).unwrap_err();
        assert_eq!(e.render("t.csv"), "t.csv:9: offset=1056768: I/O ends at 1060864, past the end of the target (1048576 bytes)");
        let mut wrap = Mapper::new(target(Beyond::Wrap, false), 0);
        assert_eq!(wrap.map(&past).unwrap().unwrap().offset, 8192);
        assert_eq!(
            wrap.map(&io(W, (2 << 20) - 4096, 8192, 0, 1)).unwrap().unwrap().offset,
            (1 << 20) - 8192,
            "moved back to end at the end"
        );
        assert_eq!(wrap.moved, 2);
        let mut fit = Mapper::new(target(Beyond::Fit, false), 4 << 20);
        assert_eq!(fit.map(&io(W, 2 << 20, 4096, 0, 1)).unwrap().unwrap().offset, 512 << 10);
        assert_eq!(fit.map(&io(W, (4 << 20) - 4096, 4096, 0, 1)).unwrap().unwrap().offset, (1 << 20) - 4096);
        let big = io(W, 0, 2 << 20, 0, 3);
        assert!(Mapper::new(target(Beyond::Wrap, false), 0).map(&big).unwrap_err().reason.contains("larger than the target"));
    }

    #[test]
    fn the_lba_grid_is_kept_or_widened_to() {
        let odd = io(W, 4096 + 512, 1024, 0, 4);
        let e = Mapper::new(target(Beyond::Refuse, false), 0).map(&odd).unwrap_err();
        assert_eq!(e.render("t"), "t:4: length=1024: not a multiple of the target's 4096-byte LBA");
        let e = Mapper::new(target(Beyond::Refuse, false), 0).map(&io(W, 4608, 4096, 0, 4)).unwrap_err();
        assert_eq!(e.render("t"), "t:4: offset=4608: not a multiple of the target's 4096-byte LBA");
        let mut m = Mapper::new(target(Beyond::Refuse, true), 0);
        let r = m.map(&odd).unwrap().unwrap();
        assert_eq!((r.offset, r.len, m.realigned), (4096, 4096, 1));
        let zero = io(W, 0, 0, 0, 2);
        assert_eq!(m.map(&zero).unwrap_err().render("t"), "t:2: length=0: zero-length I/O");
        // An I/O whose end overflows is its length's fault, not its offset's.
        let huge = io(W, 4096, u64::MAX, 0, 3);
        assert_eq!(m.map(&huge).unwrap_err().render("t"), format!("t:3: length={}: at offset 4096: ends past 2^64 bytes", u64::MAX));
    }

    #[test]
    fn formats_are_sniffed_from_the_first_bytes() {
        let rec = blktrace::Record { magic: blktrace::MAGIC | blktrace::VERSION, ..Default::default() };
        assert_eq!(Format::sniff(&rec.to_bytes()), Ok(Format::Blktrace));
        assert_eq!(Format::sniff(b"fio version 3 iolog\n0 f add\n"), Ok(Format::FioIolog));
        assert_eq!(Format::sniff(b"128166372003061629,wdev,0,Write,3589464064,4096,2698\n"), Ok(Format::Csv(CsvFormat::Msr)));
        assert_eq!(Format::sniff(b"device_id,opcode,offset,length,timestamp\r\n0,R,0,4096,1\r\n"), Ok(Format::Csv(CsvFormat::Alibaba)));
        assert_eq!(Format::sniff(b"1538323200,12606408,16,1,1283\n"), Ok(Format::Csv(CsvFormat::Tencent)));
        assert_eq!(Format::sniff(b"\xef\xbb\xbf1538323200,12606408,16,1,1283\n"), Ok(Format::Csv(CsvFormat::Tencent)), "a byte order mark");
        let e = Format::sniff(b"hello,world\n1,2\n").unwrap_err();
        assert!(e.starts_with("unknown trace format: it starts with '1,2', which is none of blktrace"), "{e}");
        assert!(Format::sniff(&[0u8; 100]).unwrap_err().contains("starts with binary data"));
        for name in Format::NAMES {
            assert_eq!(Format::parse(name).map(Format::name), Some(name));
        }
    }

    #[test]
    fn a_scan_sums_up_and_skips_bad_lines_when_asked() {
        let text = "0,W,0,4096,10\n0,R,8192,8192,20\nbad line\n1,W,1048576,4096,40\n";
        let lines = |limits: Limits| {
            let r = open(Format::Csv(CsvFormat::Alibaba), text.as_bytes(), &FioReplay::default(), None).unwrap();
            Lines::new(r, Mapper::new(Target { bytes: 4 << 20, lba: 512, beyond: Beyond::Refuse, widen: true }, 0), limits)
        };
        let e = scan(lines(Limits::default()), Format::Csv(CsvFormat::Alibaba), &mut |_| true).unwrap_err();
        assert_eq!(e.render("t.csv"), "t.csv:3: expected 5 fields (device_id,opcode,offset,length,timestamp), got 1");
        let s =
            scan(lines(Limits { skip_bad: true, ..Limits::default() }), Format::Csv(CsvFormat::Alibaba), &mut |_| true).unwrap().unwrap();
        assert_eq!((s.ios, s.bytes, s.end_bytes, s.span_ns), ([1, 2, 0], [8192, 8192, 0], 1052672, 30_000));
        assert_eq!((s.skipped_lines, s.volumes.len(), s.volumes_with_io.len()), (1, 2, 2));
        assert_eq!(s.first_skipped.as_deref(), Some(":3: expected 5 fields (device_id,opcode,offset,length,timestamp), got 1"));
        let two = scan(lines(Limits { max_ios: 2, skip_bad: true }), Format::Csv(CsvFormat::Alibaba), &mut |_| true).unwrap().unwrap();
        assert_eq!(two.total_ios(), 2);
    }
}
