//! Units and size parsing.
//!
//! Time in the model is integer nanoseconds ([`Nanos`]); sizes are plain `u64` bytes whose
//! names end in `_bytes`. Two size conventions exist in the field and both appear in our
//! inputs, so the parser is explicit about which one it applies:
//!
//! * binary suffixes `k m g t p` (any case) and `KiB MiB GiB TiB PiB` mean powers of 1024;
//! * decimal suffixes `KB MB GB TB PB` (upper-case `B`, as vendors print them) mean powers
//!   of 1000 — a "3.84TB" drive is 3.84·10^12 bytes.
//!
//! fio's own (surprising) unit rules live in the fio job parser, not here.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A logical indirection unit: an index into the drive-wide logical space the L2P map
/// covers (namespaces map their LBAs onto it chunk by chunk).
#[repr(transparent)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LogicalIu(pub u32);

/// A physical indirection unit: an IU-sized slot on NAND (an index into the P2L map;
/// superblock, die and page follow from it, see `nand::Addressing`).
#[repr(transparent)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PhysicalIu(pub u32);

/// An NVMe namespace identifier (1-based; 0xFFFFFFFF is "all namespaces" where a command
/// allows it). The controller's commands take it, so a namespace id cannot be passed where
/// an LBA or a block count belongs.
#[repr(transparent)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct NsId(pub u32);

impl NsId {
    /// NSID FFFFFFFFh: every namespace (Format, Delete).
    pub const ALL: NsId = NsId(u32::MAX);
}

impl fmt::Display for NsId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Virtual time in integer nanoseconds. The model never reads a wall clock.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Nanos(pub u64);

impl Nanos {
    pub const ZERO: Nanos = Nanos(0);
    pub const MAX: Nanos = Nanos(u64::MAX);
    pub const fn from_us(us: u64) -> Nanos {
        Nanos(us * 1_000)
    }
    pub const fn from_ms(ms: u64) -> Nanos {
        Nanos(ms * 1_000_000)
    }
    pub const fn from_secs(s: u64) -> Nanos {
        Nanos(s * 1_000_000_000)
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
}

impl Add for Nanos {
    type Output = Nanos;
    #[inline]
    fn add(self, o: Nanos) -> Nanos {
        Nanos(self.0 + o.0)
    }
}
impl AddAssign for Nanos {
    #[inline]
    fn add_assign(&mut self, o: Nanos) {
        self.0 += o.0
    }
}
impl Sub for Nanos {
    type Output = Nanos;
    #[inline]
    fn sub(self, o: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(o.0))
    }
}
impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ns", self.0)
    }
}

/// Errors from [`parse_size`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("empty size")]
    Empty,
    #[error("'{0}' is not a size (examples: 4096, 128k, 64KiB, 3.84TB)")]
    Malformed(String),
    #[error("'{0}' is too large")]
    Overflow(String),
    #[error("'{0}' is not a whole number of bytes")]
    Fractional(String),
}

/// Parse a byte size such as `4096`, `128k`, `64KiB`, `1.5GiB`, `3.84TB`.
///
/// Binary unless the suffix is a decimal one (`KB`, `MB`, `GB`, `TB`, `PB` written with an
/// upper-case `B`). Fractions are allowed when the result is a whole number of bytes.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let s = text.trim();
    if s.is_empty() {
        return Err(SizeError::Empty);
    }
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    if num.is_empty() {
        return Err(SizeError::Malformed(text.to_string()));
    }
    let mult: u128 = match suffix {
        "" | "b" | "B" => 1,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        "PB" => 1_000_000_000_000_000,
        _ => {
            let lower = suffix.to_ascii_lowercase();
            let base = lower.trim_end_matches("ib").trim_end_matches('b');
            let exp = match base {
                "k" => 1,
                "m" => 2,
                "g" => 3,
                "t" => 4,
                "p" => 5,
                _ => return Err(SizeError::Malformed(text.to_string())),
            };
            // "kb" with a lower-case b is ambiguous; we treat every non-"KB" spelling as binary.
            1024u128.pow(exp)
        }
    };
    let value = parse_scaled(num, mult).ok_or_else(|| SizeError::Malformed(text.to_string()))?;
    match value {
        Scaled::Whole(v) => u64::try_from(v).map_err(|_| SizeError::Overflow(text.to_string())),
        Scaled::Fraction => Err(SizeError::Fractional(text.to_string())),
    }
}

enum Scaled {
    Whole(u128),
    Fraction,
}

/// Exact decimal arithmetic: "3.84" × 10^12 must be 3_840_000_000_000, not a float near it.
fn parse_scaled(num: &str, mult: u128) -> Option<Scaled> {
    let mut parts = num.split('.');
    let int = parts.next()?;
    let frac = parts.next().unwrap_or("");
    if parts.next().is_some() || (int.is_empty() && frac.is_empty()) {
        return None;
    }
    let digits = format!("{int}{frac}");
    let n: u128 = digits.parse().ok()?;
    let den = 10u128.checked_pow(frac.len() as u32)?;
    let total = n.checked_mul(mult)?;
    if total % den != 0 {
        return Some(Scaled::Fraction);
    }
    Some(Scaled::Whole(total / den))
}

/// Render bytes the way vendors do (decimal, 3 significant digits): `3.84 TB`.
pub fn fmt_decimal(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KB", "MB", "GB", "TB", "PB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1000.0 && i + 1 < UNITS.len() {
        v /= 1000.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.2} {}", UNITS[i])
    }
}

/// Render bytes in binary units: `64 KiB`, `2.25 GiB`.
pub fn fmt_binary(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[i])
    } else {
        format!("{v:.2} {}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_and_decimal() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_size("1.5GiB").unwrap(), 1536 * 1024 * 1024);
        assert_eq!(parse_size("3.84TB").unwrap(), 3_840_000_000_000);
        assert_eq!(parse_size("128kb").unwrap(), 131072);
    }

    #[test]
    fn rejects_garbage() {
        assert!(matches!(parse_size(""), Err(SizeError::Empty)));
        assert!(matches!(parse_size("12q"), Err(SizeError::Malformed(_))));
        assert!(matches!(parse_size("k"), Err(SizeError::Malformed(_))));
        assert!(matches!(parse_size("0.3"), Err(SizeError::Fractional(_))));
        assert!(matches!(parse_size("99999999999PB"), Err(SizeError::Overflow(_))));
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_decimal(3_840_755_982_336), "3.84 TB");
        assert_eq!(fmt_binary(65536), "64 KiB");
    }
}
