//! fio's text iologs, versions 2 and 3 (iolog.c `read_iolog`; docs/fio.md §2.10), read
//! line by line:
//!
//! * version 2: `fio version 2 iolog`, then `FILE add|open|close` and `FILE ACTION OFFSET
//!   LENGTH` with ACTION `read`, `write`, `trim`, `sync`, `datasync` or `wait`;
//! * version 3: `fio version 3 iolog`, the same lines each led by a timestamp in
//!   microseconds; `wait` is ignored (as fio does).
//!
//! A version 3 line's delay is fio's `delay_since_ttime` on the timestamps, every line
//! moving the clock; a version 2 `wait` holds the next I/O until OFFSET milliseconds after
//! the start. `replay_scale` and `replay_align` apply to offsets, `replay_skip` drops lines
//! (their delay with them). A repeated header (fio appends to an iolog) is skipped.

use std::collections::HashMap;
use std::io::BufRead;

use super::csv::read_line;
use super::{At, FioReplay, Pacer, TraceError, TraceIo, TraceOp, TraceReader};
use crate::workload::Ddir;

pub const HEADER_V2: &str = "fio version 2 iolog";
pub const HEADER_V3: &str = "fio version 3 iolog";
/// fio reads lines with `fgets(4096)`.
pub const MAX_LINE_CHARS: usize = 4095;
/// fio scans file names with `%256s`.
pub const MAX_FILENAME_CHARS: usize = 256;
const TOO_LONG: &str = "line longer than 4095 characters (fio reads lines with fgets(4096))";
const FILE_ACTIONS: [&str; 3] = ["add", "open", "close"];
const IO_ACTIONS: [&str; 6] = ["read", "write", "trim", "sync", "datasync", "wait"];

/// A number's problem, in fio's words.
enum Number {
    NotDecimal,
    OutOfRange,
}

/// A decimal (leading zeros allowed) of at most `max`.
fn number(s: &str, max: u64) -> Result<u64, Number> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Number::NotDecimal);
    }
    let digits = s.trim_start_matches('0');
    if digits.len() > 20 {
        return Err(Number::OutOfRange);
    }
    match digits.parse::<u64>() {
        Ok(v) if v <= max => Ok(v),
        Err(_) if digits.is_empty() => Ok(0),
        _ => Err(Number::OutOfRange),
    }
}

fn field_number(at: At, name: &'static str, text: &str, max: u64) -> Result<u64, TraceError> {
    number(text, max).map_err(|e| match e {
        Number::NotDecimal => TraceError::field(at, name, text.as_bytes(), "not a decimal number"),
        Number::OutOfRange => TraceError::field(at, name, text.as_bytes(), format!("out of range (0..{max})")),
    })
}

/// Python's `repr` of a plain string, as the iolog messages quote a line.
fn quoted(s: &str) -> String {
    if s.contains('\'') && !s.contains('"') {
        format!("\"{s}\"")
    } else {
        format!("'{}'", s.replace('\'', "\\'"))
    }
}

/// A version 2 or 3 iolog.
pub struct IologReader<R> {
    r: R,
    opts: FioReplay,
    version: u8,
    line: u64,
    buf: Vec<u8>,
    pacer: Pacer,
    files: Vec<String>,
    file_index: HashMap<String, u32>,
}

impl<R: BufRead> IologReader<R> {
    /// Reads the header; an error when the first line is not one.
    pub fn new(mut r: R, opts: FioReplay) -> Result<Self, TraceError> {
        let mut buf = Vec::new();
        let at = At::Line(1);
        read_line(&mut r, &mut buf, at, MAX_LINE_CHARS, TOO_LONG)?;
        let first = String::from_utf8_lossy(&buf);
        let version = if first.starts_with(HEADER_V3) {
            3
        } else if first.starts_with(HEADER_V2) {
            2
        } else {
            return Err(TraceError::new(
                at,
                format!("not a fio iolog: the first line must be '{HEADER_V2}' or '{HEADER_V3}' (fio dropped version 1)"),
            ));
        };
        let pacer = Pacer::new(opts.time_scale, opts.no_stall);
        Ok(IologReader { r, opts, version, line: 1, buf, pacer, files: Vec::new(), file_index: HashMap::new() })
    }

    pub fn version(&self) -> u8 {
        self.version
    }

    fn file(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.file_index.get(name) {
            return i;
        }
        let i = self.files.len() as u32;
        self.files.push(name.to_string());
        self.file_index.insert(name.to_string(), i);
        i
    }

    /// One line: what it asks for, None for a line that is only skipped.
    fn line(&mut self, at: At) -> Result<Option<TraceIo>, TraceError> {
        let text = std::str::from_utf8(&self.buf).map_err(|_| TraceError::new(at, "not UTF-8 text"))?.to_string();
        let mut words: Vec<&str> = text.split_whitespace().collect();
        if words.is_empty() || text.starts_with(HEADER_V2) || text.starts_with(HEADER_V3) {
            return Ok(None);
        }
        let mut delay_us = 0;
        if self.version == 3 {
            let t = field_number(at, "timestamp", words[0], u64::MAX)?;
            words.remove(0);
            delay_us = self.pacer.delay(t);
        }
        if words.len() != 2 && words.len() != 4 {
            let want = if self.version == 3 { "TIMESTAMP FILE ACTION [OFFSET LENGTH]" } else { "FILE ACTION [OFFSET LENGTH]" };
            let got: String = text.trim().chars().take(80).collect();
            return Err(TraceError::new(at, format!("expected '{want}', got {}", quoted(&got))));
        }
        let (name, action) = (words[0], words[1]);
        if name.chars().count() > MAX_FILENAME_CHARS {
            let short: String = name.chars().take(40).collect::<String>() + "...";
            return Err(TraceError {
                at,
                field: Some("file"),
                value: Some(short),
                reason: format!("file name longer than {MAX_FILENAME_CHARS} characters"),
            });
        }
        let delay_ns = delay_us.saturating_mul(1000);
        if words.len() == 2 {
            if !FILE_ACTIONS.contains(&action) {
                let valid = FILE_ACTIONS.join(", ");
                return Err(TraceError::field(at, "action", action.as_bytes(), format!("unknown file action (valid: {valid})")));
            }
            if action == "add" {
                self.file(name);
            }
            let volume = self.known(at, name)?;
            return Ok(Some(TraceIo { op: TraceOp::Pause, offset: 0, len: 0, delay_ns, volume, at }));
        }
        if !IO_ACTIONS.contains(&action) {
            let valid = IO_ACTIONS.join(", ");
            return Err(TraceError::field(at, "action", action.as_bytes(), format!("unknown I/O action (valid: {valid})")));
        }
        let offset = field_number(at, "offset", words[2], u64::MAX)?;
        let len = field_number(at, "length", words[3], u32::MAX as u64)?;
        if action == "wait" {
            self.file(name); // fio never looks the file of a wait up
        }
        let volume = self.known(at, name)?;
        let op = match action {
            "read" => TraceOp::Io(Ddir::Read),
            "write" => TraceOp::Io(Ddir::Write),
            "trim" => TraceOp::Io(Ddir::Trim),
            "wait" if self.version == 2 && !self.opts.no_stall => TraceOp::WaitUntil(offset.saturating_mul(1_000_000)),
            "wait" => return Ok(None), // fio ignores wait in version 3
            _ => TraceOp::Sync,
        };
        let skip = match op {
            TraceOp::Io(d) => self.opts.skip[d.index()],
            TraceOp::Sync => self.opts.skip[3],
            _ => false,
        };
        if skip {
            return Ok(None); // fio >= 3.34 (ff6131af); its delay is not waited
        }
        let offset = match op {
            TraceOp::Io(_) => {
                let mut off = offset.checked_div(self.opts.replay_scale).unwrap_or(offset);
                if self.opts.replay_align != 0 {
                    off &= !(self.opts.replay_align - 1);
                }
                off
            }
            _ => offset,
        };
        Ok(Some(TraceIo { op, offset, len, delay_ns, volume, at }))
    }

    fn known(&self, at: At, name: &str) -> Result<u32, TraceError> {
        self.file_index
            .get(name)
            .copied()
            .ok_or_else(|| TraceError::field(at, "file", name.as_bytes(), "file not added to the trace first (a 'FILE add' line)"))
    }
}

impl<R: BufRead + Send> TraceReader for IologReader<R> {
    fn next_io(&mut self) -> Result<Option<TraceIo>, TraceError> {
        loop {
            self.line += 1;
            let at = At::Line(self.line);
            if !read_line(&mut self.r, &mut self.buf, at, MAX_LINE_CHARS, TOO_LONG)? {
                return Ok(None);
            }
            if let Some(io) = self.line(at)? {
                return Ok(Some(io));
            }
        }
    }

    fn volume_names(&self) -> Vec<String> {
        self.files.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, opts: FioReplay) -> Result<Vec<(TraceOp, u64, u64, u64)>, String> {
        let mut r = IologReader::new(text.as_bytes(), opts).map_err(|e| e.render("t.log"))?;
        let mut out = Vec::new();
        loop {
            match r.next_io() {
                Ok(Some(io)) => out.push((io.op, io.offset, io.len, io.delay_ns)),
                Ok(None) => return Ok(out),
                Err(e) => return Err(e.render("t.log")),
            }
        }
    }

    const R: TraceOp = TraceOp::Io(Ddir::Read);
    const W: TraceOp = TraceOp::Io(Ddir::Write);

    #[test]
    fn version_3_delays_and_file_actions() {
        let t = "fio version 3 iolog\n10 f add\n20 f open\n30 f read 0 4096\n1030 f write 4096 4096\n1000 f sync 0 0\n2030 f close\n";
        let got = read(t, FioReplay::default()).unwrap();
        assert_eq!(
            got,
            vec![
                (TraceOp::Pause, 0, 0, 0),
                (TraceOp::Pause, 0, 0, 10_000),
                (R, 0, 4096, 10_000),
                (W, 4096, 4096, 1_000_000),
                (TraceOp::Sync, 0, 0, 0),
                (TraceOp::Pause, 0, 0, 1_030_000)
            ]
        );
        let half = read(t, FioReplay { time_scale: 0.5, ..FioReplay::default() }).unwrap();
        assert_eq!(half[3].3, 500_000);
    }

    #[test]
    fn version_2_waits_skips_and_offsets() {
        let t = "fio version 2 iolog\nf add\nf write 4097 8192\nf wait 5 0\nf read 1003520 4096\nf trim 65536 4096\n";
        let opts = FioReplay { replay_scale: 2, replay_align: 4096, skip: [false, false, true, false], ..FioReplay::default() };
        let got = read(t, opts).unwrap();
        assert_eq!(got, vec![(TraceOp::Pause, 0, 0, 0), (W, 0, 8192, 0), (TraceOp::WaitUntil(5_000_000), 5, 0, 0), (R, 499712, 4096, 0)]);
        let still = read(t, FioReplay { no_stall: true, ..FioReplay::default() }).unwrap();
        assert!(!still.iter().any(|x| matches!(x.0, TraceOp::WaitUntil(_))), "no_stall drops the waits");
    }

    #[test]
    fn bad_lines_are_named_as_the_python_reader_names_them() {
        let cases = [
            (
                "fio version 3 iolog\n0 f add\n5 f reed 0 4096\n",
                "t.log:3: action=reed: unknown I/O action (valid: read, write, trim, sync, datasync, wait)",
            ),
            ("fio version 3 iolog\n0 f add\nhello world\n", "t.log:3: timestamp=hello: not a decimal number"),
            ("fio version 3 iolog\n0 f add\n1 f read 0\n", "t.log:3: expected 'TIMESTAMP FILE ACTION [OFFSET LENGTH]', got '1 f read 0'"),
            ("fio version 2 iolog\nf write 0 4096\n", "t.log:2: file=f: file not added to the trace first (a 'FILE add' line)"),
            (
                "0 f add\n",
                "t.log:1: not a fio iolog: the first line must be 'fio version 2 iolog' or 'fio version 3 iolog' (fio dropped version 1)",
            ),
            ("fio version 2 iolog\nf add\nf read 0 4294967296\n", "t.log:3: length=4294967296: out of range (0..4294967295)"),
            ("fio version 2 iolog\nf shut\n", "t.log:2: action=shut: unknown file action (valid: add, open, close)"),
        ];
        for (text, want) in cases {
            assert_eq!(read(text, FioReplay::default()).unwrap_err(), want);
        }
        let long = format!("fio version 2 iolog\nf add\nf read 0 {}4096\n", "0".repeat(5000));
        assert!(read(&long, FioReplay::default()).unwrap_err().starts_with("t.log:3: line longer than 4095 characters"));
        assert_eq!(read("fio version 2 iolog\nf add\nf read 007 4096\n", FioReplay::default()).unwrap()[1].1, 7);
    }
}
