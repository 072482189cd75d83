//! The public block-trace CSVs (docs/traces.md), one I/O a line, no header (a first line
//! without a number in it is taken for one):
//!
//! * **MSR Cambridge** (SNIA IOTTA): `Timestamp,Hostname,DiskNumber,Type,Offset,Size,
//!   ResponseTime`; Timestamp in 100 ns units (Windows filetime), Type `Read` or `Write`,
//!   Offset and Size in bytes; a volume is `Hostname_DiskNumber` (the files' own names).
//! * **Alibaba Cloud** block traces: `device_id,opcode,offset,length,timestamp`; opcode `R`
//!   or `W`, offset and length in bytes, timestamp in microseconds.
//! * **Tencent CBS** (SNIA IOTTA): `Timestamp,Offset,Size,IOType,VolumeID`; Timestamp in
//!   seconds, Offset and Size in 512-byte sectors, IOType 0 read, 1 write.
//!
//! Delays follow fio's rule (the gap from the previous line's time, none when time runs
//! back), in nanoseconds, times the replay's time scale. A volume filter drops other
//! volumes' lines before their times count.

use std::collections::HashMap;
use std::io::BufRead;

use super::{decimal, not_decimal, At, Pacer, TraceError, TraceIo, TraceOp, TraceReader};
use crate::workload::Ddir;

/// The byte order mark some Windows tools write at the start of a UTF-8 text file: not part
/// of the first line's first field.
pub const UTF8_BOM: &[u8] = b"\xef\xbb\xbf";

/// The longest line read (a binary file has no newlines to stop at).
pub const MAX_LINE_BYTES: usize = 4096;
const TOO_LONG: &str = "line longer than 4096 bytes (not a text trace?)";

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CsvFormat {
    Msr,
    Alibaba,
    Tencent,
}

impl CsvFormat {
    pub fn name(self) -> &'static str {
        match self {
            CsvFormat::Msr => "msr",
            CsvFormat::Alibaba => "alibaba",
            CsvFormat::Tencent => "tencent",
        }
    }

    /// The columns, as the datasets name them.
    pub fn columns(self) -> &'static [&'static str] {
        match self {
            CsvFormat::Msr => &["Timestamp", "Hostname", "DiskNumber", "Type", "Offset", "Size", "ResponseTime"],
            CsvFormat::Alibaba => &["device_id", "opcode", "offset", "length", "timestamp"],
            CsvFormat::Tencent => &["Timestamp", "Offset", "Size", "IOType", "VolumeID"],
        }
    }

    /// Nanoseconds in a unit of the timestamp column.
    fn time_unit_ns(self) -> u64 {
        match self {
            CsvFormat::Msr => 100,
            CsvFormat::Alibaba => 1_000,
            CsvFormat::Tencent => 1_000_000_000,
        }
    }

    /// Whether `fields` look like a line of this format (for `--format auto`).
    pub fn matches(self, fields: &[&[u8]]) -> bool {
        let num = |i: usize| fields.get(i).is_some_and(|f| decimal(f, u64::MAX).is_some());
        match self {
            CsvFormat::Msr => fields.len() == 7 && num(0) && num(2) && msr_type(fields[3]).is_some() && num(4) && num(5),
            CsvFormat::Alibaba => fields.len() == 5 && num(0) && alibaba_op(fields[1]).is_some() && num(2) && num(3) && num(4),
            CsvFormat::Tencent => fields.len() == 5 && num(0) && num(1) && num(2) && matches!(fields[3], b"0" | b"1") && num(4),
        }
    }
}

fn msr_type(f: &[u8]) -> Option<Ddir> {
    if f.eq_ignore_ascii_case(b"read") {
        Some(Ddir::Read)
    } else if f.eq_ignore_ascii_case(b"write") {
        Some(Ddir::Write)
    } else {
        None
    }
}

fn alibaba_op(f: &[u8]) -> Option<Ddir> {
    match f {
        b"R" | b"r" => Some(Ddir::Read),
        b"W" | b"w" => Some(Ddir::Write),
        _ => None,
    }
}

/// The comma-separated fields of `line`, each without surrounding blanks.
pub fn split_fields(line: &[u8]) -> Vec<&[u8]> {
    line.split(|&b| b == b',').map(|f| f.trim_ascii()).collect()
}

/// Read one line into `buf` (without its end), at most `max` bytes (`too_long` says why);
/// false at the end of the input.
pub(crate) fn read_line(r: &mut impl BufRead, buf: &mut Vec<u8>, at: At, max: usize, too_long: &str) -> Result<bool, TraceError> {
    buf.clear();
    let mut any = false;
    loop {
        let chunk = r.fill_buf()?;
        if chunk.is_empty() {
            break;
        }
        any = true;
        let (take, done) = match memchr(b'\n', chunk) {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        // Content and a \r\n end at most: stop reading a line that can only be too long,
        // and pass over the rest of it, so that the next read starts on the next line (a
        // reader skipping bad lines would otherwise meet the same bytes forever).
        if buf.len() + take > max + 2 {
            r.consume(take);
            if !done {
                skip_line(r)?;
            }
            return Err(TraceError::new(at, too_long.to_string()));
        }
        buf.extend_from_slice(&chunk[..take]);
        r.consume(take);
        if done {
            buf.pop();
            break;
        }
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    if buf.len() > max {
        return Err(TraceError::new(at, too_long.to_string()));
    }
    Ok(any)
}

/// Consume the input through the end of the current line (or to the end of the input).
fn skip_line(r: &mut impl BufRead) -> Result<(), TraceError> {
    loop {
        let chunk = r.fill_buf()?;
        if chunk.is_empty() {
            return Ok(());
        }
        match memchr(b'\n', chunk) {
            Some(i) => {
                r.consume(i + 1);
                return Ok(());
            }
            None => {
                let n = chunk.len();
                r.consume(n);
            }
        }
    }
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&b| b == needle)
}

/// A CSV trace of one of the [`CsvFormat`]s.
pub struct CsvReader<R> {
    r: R,
    format: CsvFormat,
    line: u64,
    buf: Vec<u8>,
    pacer: Pacer,
    only_volume: Option<Vec<u8>>,
    volumes: Vec<Vec<u8>>,
    volume_index: HashMap<Vec<u8>, u32>,
    key: Vec<u8>,
}

impl<R: BufRead> CsvReader<R> {
    /// `time_scale` multiplies the gaps (0: none); `volume` keeps that volume's lines only.
    pub fn new(r: R, format: CsvFormat, time_scale: f64, volume: Option<&str>) -> Self {
        CsvReader {
            r,
            format,
            line: 0,
            buf: Vec::with_capacity(256),
            pacer: Pacer::from_first_event(time_scale, time_scale == 0.0),
            only_volume: volume.map(|v| v.as_bytes().to_vec()),
            volumes: Vec::new(),
            volume_index: HashMap::new(),
            key: Vec::new(),
        }
    }

    /// One line's I/O: (ddir, offset, length, time in ns), its volume's key in `self.key`.
    fn parse(&mut self, at: At) -> Result<Option<(Ddir, u64, u64, u64)>, TraceError> {
        let fields = split_fields(&self.buf);
        let format = self.format;
        let cols = format.columns();
        if at == At::Line(1) && fields.iter().all(|f| decimal(f, u64::MAX).is_none()) {
            return Ok(None); // a header
        }
        if fields.len() != cols.len() {
            let want = cols.join(",");
            return Err(TraceError::new(at, format!("expected {} fields ({want}), got {}", cols.len(), fields.len())));
        }
        let num = |i: usize| {
            decimal(fields[i], u64::MAX).ok_or_else(|| TraceError::field(at, cols[i], fields[i], not_decimal(fields[i], u64::MAX)))
        };
        let io = match format {
            CsvFormat::Msr => {
                let ddir = msr_type(fields[3]).ok_or_else(|| TraceError::field(at, cols[3], fields[3], "not Read or Write"))?;
                num(2)?;
                self.key.clear();
                self.key.extend_from_slice(fields[1]);
                self.key.push(b'_');
                self.key.extend_from_slice(fields[2]);
                (ddir, num(4)?, num(5)?, num(0)?)
            }
            CsvFormat::Alibaba => {
                let ddir = alibaba_op(fields[1]).ok_or_else(|| TraceError::field(at, cols[1], fields[1], "not R or W"))?;
                num(0)?;
                self.key.clear();
                self.key.extend_from_slice(fields[0]);
                (ddir, num(2)?, num(3)?, num(4)?)
            }
            CsvFormat::Tencent => {
                let ddir = match fields[3] {
                    b"0" => Ddir::Read,
                    b"1" => Ddir::Write,
                    f => return Err(TraceError::field(at, cols[3], f, "not 0 (read) or 1 (write)")),
                };
                num(4)?;
                self.key.clear();
                self.key.extend_from_slice(fields[4]);
                let sectors = |i: usize| {
                    num(i)?
                        .checked_mul(512)
                        .ok_or_else(|| TraceError::field(at, cols[i], fields[i], "too many sectors for 64 bits of bytes"))
                };
                (ddir, sectors(1)?, sectors(2)?, num(0)?)
            }
        };
        let (ddir, offset, len, time) = io;
        let (len_col, time_col) = match format {
            CsvFormat::Msr => (5, 0),
            CsvFormat::Alibaba => (3, 4),
            CsvFormat::Tencent => (2, 0),
        };
        if len == 0 {
            return Err(TraceError::field(at, cols[len_col], fields[len_col], "a zero-length I/O"));
        }
        let time_ns = time
            .checked_mul(format.time_unit_ns())
            .ok_or_else(|| TraceError::field(at, cols[time_col], fields[time_col], "past 2^64 ns"))?;
        Ok(Some((ddir, offset, len, time_ns)))
    }

    fn volume(&mut self) -> u32 {
        if let Some(&i) = self.volume_index.get(&self.key) {
            return i;
        }
        let i = self.volumes.len() as u32;
        self.volumes.push(self.key.clone());
        self.volume_index.insert(self.key.clone(), i);
        i
    }
}

impl<R: BufRead + Send> TraceReader for CsvReader<R> {
    fn next_io(&mut self) -> Result<Option<TraceIo>, TraceError> {
        loop {
            self.line += 1;
            let at = At::Line(self.line);
            if !read_line(&mut self.r, &mut self.buf, at, MAX_LINE_BYTES, TOO_LONG)? {
                return Ok(None);
            }
            if self.line == 1 && self.buf.starts_with(UTF8_BOM) {
                self.buf.drain(..UTF8_BOM.len());
            }
            if self.buf.trim_ascii().is_empty() {
                continue;
            }
            let Some((ddir, offset, len, time_ns)) = self.parse(at)? else { continue };
            if self.only_volume.as_ref().is_some_and(|v| *v != self.key) {
                continue;
            }
            let volume = self.volume();
            let delay_ns = self.pacer.delay(time_ns);
            return Ok(Some(TraceIo { op: TraceOp::Io(ddir), offset, len, delay_ns, volume, at }));
        }
    }

    fn volume_names(&self) -> Vec<String> {
        self.volumes.iter().map(|v| String::from_utf8_lossy(v).into_owned()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, format: CsvFormat, scale: f64, volume: Option<&str>) -> Result<Vec<TraceIo>, String> {
        let mut r = CsvReader::new(text.as_bytes(), format, scale, volume);
        let mut out = Vec::new();
        loop {
            match r.next_io() {
                Ok(Some(io)) => out.push(io),
                Ok(None) => return Ok(out),
                Err(e) => return Err(e.render("t.csv")),
            }
        }
    }

    fn ios(v: &[TraceIo]) -> Vec<(TraceOp, u64, u64, u64, u32)> {
        v.iter().map(|i| (i.op, i.offset, i.len, i.delay_ns, i.volume)).collect()
    }

    const R: TraceOp = TraceOp::Io(Ddir::Read);
    const W: TraceOp = TraceOp::Io(Ddir::Write);

    #[test]
    fn msr_lines() {
        let t = "128166372003061629,wdev,0,Write,3589464064,4096,2698\n\
                 128166372003071629,wdev,0,Read,8192,16384,100\r\n\
                 \n\
                 128166372003061629,wdev,1,write,0,512,1\n";
        let got = read(t, CsvFormat::Msr, 1.0, None).unwrap();
        // 10,000 units of 100 ns = 1 ms; time runs back on the third: no delay.
        assert_eq!(ios(&got), vec![(W, 3589464064, 4096, 0, 0), (R, 8192, 16384, 1_000_000, 0), (W, 0, 512, 0, 1)]);
        assert_eq!(got[2].at, At::Line(4));
        let only = read(t, CsvFormat::Msr, 1.0, Some("wdev_1")).unwrap();
        assert_eq!(ios(&only), vec![(W, 0, 512, 0, 0)]);
    }

    #[test]
    fn alibaba_and_tencent_lines_with_a_header_and_a_time_scale() {
        let a = "device_id,opcode,offset,length,timestamp\n0,R,126703644672,4096,1577808000000009\n0,W,4096,8192,1577808000000109\n";
        assert_eq!(ios(&read(a, CsvFormat::Alibaba, 0.5, None).unwrap()), vec![(R, 126703644672, 4096, 0, 0), (W, 4096, 8192, 50_000, 0)]);
        let t = "1538323200,12606408,16,1,1283\n1538323201,0,8,0,7\n";
        assert_eq!(
            ios(&read(t, CsvFormat::Tencent, 1.0, None).unwrap()),
            vec![(W, 12606408 * 512, 8192, 0, 0), (R, 0, 4096, 1_000_000_000, 1)]
        );
        assert!(read(t, CsvFormat::Tencent, 0.0, None).unwrap().iter().all(|i| i.delay_ns == 0));
        // A byte order mark before the first line (a header or an I/O) is not part of it.
        let bom = "\u{feff}0,R,0,4096,1\r\n0,W,4096,4096,2\r\n";
        assert_eq!(ios(&read(bom, CsvFormat::Alibaba, 1.0, None).unwrap()), vec![(R, 0, 4096, 0, 0), (W, 4096, 4096, 1000, 0)]);
        let bom_header = "\u{feff}device_id,opcode,offset,length,timestamp\n0,W,4096,4096,2\n";
        assert_eq!(ios(&read(bom_header, CsvFormat::Alibaba, 1.0, None).unwrap()), vec![(W, 4096, 4096, 0, 0)]);
        // Times from 0 (a trace made relative to its start): the first gap is kept.
        let z = "0,R,0,4096,0\n0,W,4096,4096,1000000\n0,W,8192,4096,2000000\n";
        assert_eq!(
            ios(&read(z, CsvFormat::Alibaba, 1.0, None).unwrap()).iter().map(|i| i.3).collect::<Vec<_>>(),
            [0, 1_000_000_000, 1_000_000_000]
        );
    }

    #[test]
    fn bad_lines_name_line_field_and_value() {
        let cases = [
            (CsvFormat::Alibaba, "0,R,0,4096,1\n0,X,0,4096,2\n", "t.csv:2: opcode=X: not R or W"),
            (CsvFormat::Alibaba, "0,R,zero,4096,1\n", "t.csv:1: offset=zero: not a decimal number"),
            (CsvFormat::Alibaba, "0,R,-4096,4096,1\n", "t.csv:1: offset=-4096: negative (allowed 0..18446744073709551615)"),
            (
                CsvFormat::Alibaba,
                "0,R,0,4096,99999999999999999999\n",
                "t.csv:1: timestamp=99999999999999999999: out of range (0..18446744073709551615)",
            ),
            (CsvFormat::Alibaba, "0,R,0,4096\n", "t.csv:1: expected 5 fields (device_id,opcode,offset,length,timestamp), got 4"),
            (CsvFormat::Alibaba, "0,R,0,0,1\n", "t.csv:1: length=0: a zero-length I/O"),
            (CsvFormat::Tencent, "1,0,8,2,1\n", "t.csv:1: IOType=2: not 0 (read) or 1 (write)"),
            (CsvFormat::Tencent, "1,36028797018963968,8,0,1\n", "t.csv:1: Offset=36028797018963968: too many sectors"),
            (CsvFormat::Msr, "1,h,0,Erase,0,512,1\n", "t.csv:1: Type=Erase: not Read or Write"),
            (CsvFormat::Msr, "184467440737095517,h,0,Read,0,512,1\n", "t.csv:1: Timestamp=184467440737095517: past 2^64 ns"),
        ];
        for (f, text, want) in cases {
            let got = read(text, f, 1.0, None).unwrap_err();
            assert!(got.starts_with(want), "{got} / {want}");
        }
        let long = format!("{}\n", "1".repeat(MAX_LINE_BYTES + 1));
        assert!(read(&long, CsvFormat::Tencent, 1.0, None).unwrap_err().contains("t.csv:1: line longer than 4096 bytes"));
    }

    #[test]
    fn a_too_long_line_is_passed_over_whole() {
        // Longer than the reader's buffer too, so the line ends in a later chunk: the next
        // read must start on the line after it, whatever chunk the error was found in.
        let text = format!("0,W,0,4096,1\n{}\n0,R,8192,4096,2\n", "9".repeat(3 * MAX_LINE_BYTES));
        let mut r = std::io::BufReader::with_capacity(1024, text.as_bytes());
        let mut buf = Vec::new();
        let mut line =
            |r: &mut std::io::BufReader<&[u8]>, n| read_line(r, &mut buf, At::Line(n), MAX_LINE_BYTES, TOO_LONG).map(|_| buf.clone());
        assert_eq!(line(&mut r, 1).unwrap(), b"0,W,0,4096,1");
        assert!(line(&mut r, 2).unwrap_err().render("t.csv").contains("t.csv:2: line longer than 4096 bytes"));
        assert_eq!(line(&mut r, 3).unwrap(), b"0,R,8192,4096,2");
        assert_eq!(line(&mut r, 4).unwrap(), b"", "then the end of the input");
    }

    #[test]
    fn formats_are_told_apart_by_their_fields() {
        let fields = |s: &'static str| split_fields(s.as_bytes());
        let msr = fields("128166372003061629,wdev,0,Write,3589464064,4096,2698");
        let ali = fields("0,R,126703644672,4096,1577808000000009");
        let ten = fields("1538323200,12606408,16,1,1283");
        for (f, want) in
            [(CsvFormat::Msr, [true, false, false]), (CsvFormat::Alibaba, [false, true, false]), (CsvFormat::Tencent, [false, false, true])]
        {
            assert_eq!([f.matches(&msr), f.matches(&ali), f.matches(&ten)], want, "{f:?}");
        }
    }
}
