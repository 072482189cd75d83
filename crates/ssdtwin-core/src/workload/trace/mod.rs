//! I/O traces (docs/fio.md §2.10, docs/traces.md): the packed records that travel with a
//! job (a `read_iolog` trace in the job's input, the engine's `write_iolog` record in its
//! output), and the readers of trace files that feed a replay.
//!
//! A replay goes in three steps, one module each:
//! * a format's reader turns the file into [`TraceIo`]s in trace order, each with fio's
//!   delay before it (`blktrace.rs` as fio 3.33 reads blktrace binaries, `iolog.rs` fio's
//!   text iologs, `csv.rs` the public block-trace CSVs);
//! * `source.rs` sniffs the format, checks a whole trace in one pass (totals, the span of
//!   its offsets, its first bad line) and maps each I/O onto the target (refused, folded
//!   or scaled when it lies past the end) as the engine's [`ReplayIo`]s, streamed;
//! * the engine (`engine::iolog`) paces them as fio does.
//!
//! Everything reads from `std::io::Read`: the callers open the files.

pub mod blktrace;
pub mod csv;
pub mod iolog;
pub mod source;

use std::fmt;

use super::Ddir;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// Packed u64 records (see the module doc); serialised as bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Packed(pub Vec<u8>);

impl Packed {
    pub(crate) fn push(&mut self, fields: &[u64]) {
        for f in fields {
            self.0.extend_from_slice(&f.to_le_bytes());
        }
    }

    pub(crate) fn field(&self, record: usize, width: usize, k: usize) -> u64 {
        let at = (record * width + k) * 8;
        u64::from_le_bytes(self.0[at..at + 8].try_into().expect("8 bytes"))
    }

    pub(crate) fn records(&self, width: usize) -> usize {
        self.0.len() / (width * 8)
    }
}

impl Serialize for Packed {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Packed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Packed;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("bytes (packed little-endian u64 records)")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Packed, E> {
                Ok(Packed(v.to_vec()))
            }
            fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Packed, E> {
                Ok(Packed(v))
            }
            // JSON has no bytes: a list of byte values (tests).
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Packed, A::Error> {
                let mut out = Vec::new();
                while let Some(b) = seq.next_element::<u8>()? {
                    out.push(b);
                }
                Ok(Packed(out))
            }
        }
        d.deserialize_byte_buf(V)
    }
}

/// A trace to replay (`read_iolog`): records of `REPLAY_FIELDS` u64s, `[kind, offset,
/// len, delay_ns, extra_ns]`. fio (iolog.c `read_iolog_get`, `iolog_delay`) issues an entry
/// no earlier than `delay` after the previous issue; file actions (open, close) between two
/// I/Os wait their own delays in turn, which the parser folds into `extra` (waited in full
/// after the first). With `REPLAY_ABSOLUTE` the entry waits until `delay` after the
/// clone's start instead (version 2 `wait`). With `REPLAY_TAIL` the entry, the last,
/// issues nothing: it holds the job until its time (the lines after the trace's last I/O).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayTrace {
    pub records: Packed,
}

/// One I/O as the engine replays it: issued no earlier than `delay_ns` after the previous
/// issue, then `extra_ns` more (the delays of trace lines between two I/Os that issue
/// nothing: file actions, flushes); with `absolute`, no earlier than `delay_ns` after the
/// clone's start (a version 2 `wait`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ReplayIo {
    pub ddir: Ddir,
    pub offset: u64,
    pub len: u64,
    pub delay_ns: u64,
    pub extra_ns: u64,
    pub absolute: bool,
    /// Not an I/O: the trace's lines after its last I/O (a close, a sync, a version 2
    /// `wait`), which fio waits for before the job ends (iolog.c `ipo_special` and
    /// `read_iolog_get` call `iolog_delay` for them). Only ever the last of a trace; its
    /// ddir, offset and length mean nothing.
    pub tail: bool,
}

/// Where a replay's I/Os come from, one at a time: a trace in memory or a file streamed.
/// An error is one line naming the trace's line or record.
pub trait ReplaySource: Send {
    fn next_io(&mut self) -> Result<Option<ReplayIo>, String>;
    /// The I/Os it holds, when known before the run (a trace in memory); a stream read as
    /// the run goes does not know.
    fn total_ios(&self) -> Option<u64> {
        None
    }
}

/// A trace format's reader: the lines (or records) that ask for something, in trace order.
pub trait TraceReader: Send {
    /// The next line that asks for something; None at the end of the trace.
    fn next_io(&mut self) -> Result<Option<TraceIo>, TraceError>;
    /// The trace's devices or volumes, by number ([`TraceIo::volume`]), as the trace names them.
    fn volume_names(&self) -> Vec<String>;
    /// What the reader noticed and read past (fio's warnings), once the trace was read.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// The queue depth the trace implies, once it was read (fio probes a blktrace's).
    fn depth(&self) -> Option<u32> {
        None
    }
}

/// fio's replay options as the readers of fio's formats apply them (docs/fio.md §2.10).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FioReplay {
    /// `replay_scale`: offsets divided by it (0: none).
    pub replay_scale: u64,
    /// `replay_align`: offsets rounded down to it, blktrace lengths up (0: none; a power of 2).
    pub replay_align: u64,
    /// What the trace's gaps are multiplied by: fio's 100 / `replay_time_scale` (percent of
    /// the trace's rate), computed in double as fio does; exactly 1 at 100.
    pub time_scale: f64,
    /// `replay_no_stall`: no delays.
    pub no_stall: bool,
    /// `replay_skip`: read, write, trim, sync lines dropped.
    pub skip: [bool; 4],
}

impl Default for FioReplay {
    fn default() -> Self {
        FioReplay { replay_scale: 0, replay_align: 0, time_scale: 1.0, no_stall: false, skip: [false; 4] }
    }
}

/// What a trace line asks for, before it is mapped onto a target.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TraceOp {
    Io(Ddir),
    /// A flush (blktrace) or `sync`/`datasync` line: the engine has no flush command (a
    /// drive with power-loss protection completes one at once), so only its delay counts.
    Sync,
    /// A line that issues nothing but keeps its delay (an iolog's add/open/close).
    Pause,
    /// An iolog version 2 `wait`: the next I/O no earlier than this many ns after the start.
    WaitUntil(u64),
}

/// One line (or record) of a trace in trace order, with the delay fio waits before it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TraceIo {
    pub op: TraceOp,
    pub offset: u64,
    pub len: u64,
    pub delay_ns: u64,
    /// The trace's device or volume, numbered in order of first appearance.
    pub volume: u32,
    pub at: At,
}

/// A place in a trace file, for messages.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum At {
    /// The whole file.
    File,
    /// A text line, from 1.
    Line(u64),
    /// A binary record, from 0, and the byte it starts at.
    Record { index: u64, byte: u64 },
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::File => Ok(()),
            At::Line(n) => write!(f, ":{n}"),
            At::Record { index, byte } => write!(f, ": record {index} (byte {byte})"),
        }
    }
}

/// A trace that cannot be read: where, which field with which value, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    pub at: At,
    pub field: Option<&'static str>,
    pub value: Option<String>,
    pub reason: String,
}

impl TraceError {
    pub fn new(at: At, reason: impl Into<String>) -> TraceError {
        TraceError { at, field: None, value: None, reason: reason.into() }
    }

    pub fn field(at: At, field: &'static str, value: &[u8], reason: impl Into<String>) -> TraceError {
        let mut value = String::from_utf8_lossy(value).into_owned();
        if value.chars().count() > 40 {
            value = value.chars().take(40).collect::<String>() + "...";
        }
        TraceError { at, field: Some(field), value: Some(value), reason: reason.into() }
    }

    /// The one-line message, led by the trace's name: `t.csv:12: offset=x: not a number`.
    pub fn render(&self, file: &str) -> String {
        match (&self.field, &self.value) {
            (Some(k), Some(v)) => format!("{file}{}: {k}={v}: {}", self.at, self.reason),
            _ => format!("{file}{}: {}", self.at, self.reason),
        }
    }
}

impl From<std::io::Error> for TraceError {
    fn from(e: std::io::Error) -> TraceError {
        TraceError::new(At::File, e.to_string())
    }
}

/// fio's `delay_since_ttime` (iolog.c): the gap from the previous timestamp, none when time
/// runs backwards or with `replay_no_stall`; scaled in double arithmetic and truncated, as
/// fio does, unless the scale is exactly 1. fio also waits nothing after a timestamp of 0
/// (its "no previous time"), which a blktrace replay keeps ([`Pacer::new`]); a CSV trace's
/// clock starts at its first line whatever its time, so that a trace whose times start at 0
/// keeps its first gap ([`Pacer::from_first_event`]).
#[derive(Clone, Debug)]
pub struct Pacer {
    last: Option<u64>,
    scale: f64,
    no_stall: bool,
    zero_means_no_previous: bool,
}

impl Pacer {
    /// fio's rule, a previous time of 0 included. `scale` multiplies the gaps (fio: 100 /
    /// `replay_time_scale`).
    pub fn new(scale: f64, no_stall: bool) -> Pacer {
        Pacer { last: None, scale, no_stall, zero_means_no_previous: true }
    }

    /// The gap from the previous event's time, whatever that time is (0 included).
    pub fn from_first_event(scale: f64, no_stall: bool) -> Pacer {
        Pacer { zero_means_no_previous: false, ..Pacer::new(scale, no_stall) }
    }

    /// The delay before an event at `t` (the trace's unit); `t` becomes the previous time.
    pub fn delay(&mut self, t: u64) -> u64 {
        let Some(last) = self.last.replace(t) else { return 0 };
        if (last == 0 && self.zero_means_no_previous) || self.no_stall || t < last {
            0
        } else if self.scale == 1.0 {
            t - last
        } else {
            ((t - last) as f64 * self.scale) as u64
        }
    }
}

/// A decimal number of at most `max`, from ASCII digits only.
pub(crate) fn decimal(s: &[u8], max: u64) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
    }
    (v <= max).then_some(v)
}

/// Why `s` is not a decimal of at most `max` ([`decimal`] said it is not): a negative
/// number and one past `max` name the range.
pub(crate) fn not_decimal(s: &[u8], max: u64) -> String {
    let digits = |t: &[u8]| !t.is_empty() && t.iter().all(u8::is_ascii_digit);
    if digits(s) {
        format!("out of range (0..{max})")
    } else if s.first() == Some(&b'-') && digits(&s[1..]) {
        format!("negative (allowed 0..{max})")
    } else {
        "not a decimal number".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pacer_follows_delay_since_ttime() {
        let mut p = Pacer::new(1.0, false);
        assert_eq!([p.delay(0), p.delay(100), p.delay(250), p.delay(200), p.delay(300)], [0, 0, 150, 0, 100]);
        let mut half = Pacer::new(100.0 / 200.0, false);
        assert_eq!([half.delay(10), half.delay(13)], [0, 1], "1.5 truncated");
        let mut none = Pacer::new(1.0, true);
        assert_eq!([none.delay(10), none.delay(1000)], [0, 0]);
        let mut csv = Pacer::from_first_event(1.0, false);
        assert_eq!(
            [csv.delay(0), csv.delay(100), csv.delay(50), csv.delay(0), csv.delay(70)],
            [0, 100, 0, 0, 70],
            "0 is a time like any other"
        );
    }

    #[test]
    fn decimals_are_digits_within_their_range() {
        assert_eq!(decimal(b"0", 9), Some(0));
        assert_eq!(decimal(b"18446744073709551615", u64::MAX), Some(u64::MAX));
        for bad in [&b""[..], b"18446744073709551616", b"-1", b"1e3", b" 1", b"10"] {
            assert_eq!(decimal(bad, 9), None, "{bad:?}");
        }
    }

    #[test]
    fn errors_name_the_file_place_and_field() {
        assert_eq!(TraceError::field(At::Line(12), "offset", b"x", "not a number").render("t.csv"), "t.csv:12: offset=x: not a number");
        assert_eq!(
            TraceError::new(At::Record { index: 3, byte: 144 }, "truncated").render("t.bin"),
            "t.bin: record 3 (byte 144): truncated"
        );
        assert_eq!(TraceError::new(At::File, "no I/O").render("t"), "t: no I/O");
    }
}
