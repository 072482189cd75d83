//! `[corners]`: the four figures a drive's own documents publish for it (its spec sheet, or
//! for the CM6-R the namespace brief's measured corners), in the datasheet convention, each
//! with its source and, when it calibrates the twin, the one `[timing]` parameter it sets.
//!
//! Why they live in the spec: `ssdtwin calibrate` fits a preset on its own corners and
//! `ssdtwin validate` checks the twin against them, so the figures need one home with their
//! sources, beside the parameters they set. A corner without `sets` is a prediction: the
//! twin is checked against it but nothing is fitted to it (docs/calibration.md).

use serde::{Deserialize, Serialize};

/// The timing parameters a corner may calibrate: each is a number no datasheet gives that
/// one figure identifies (docs/calibration.md, "Which figure sets which parameter").
pub const CALIBRATABLE: &[&str] = &[
    "host_link_bytes_per_s",
    "t_read_ns",
    "t_prog_ns",
    "gc_page_reads_per_iu",
    "ctrl_max_iops",
    "ctrl_max_write_iops",
    "ctrl_max_write_bytes_per_s",
    "ctrl_backend_bytes_per_s",
];

/// One published corner: the figure, where it comes from, and the job shape it was measured
/// with when that is not the CM6 brief's (sequential 128 KiB QD16 x 1 job, random 4 KiB QD32
/// x 8 jobs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Corner {
    /// MB/s (decimal) for sequential corners, IOPS for random ones.
    pub value: f64,
    pub source: String,
    /// The `[timing]` parameter this corner calibrates (one of [`CALIBRATABLE`]); absent: the
    /// corner is a prediction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sets: Option<String>,
    /// Block size of the corner's job, bytes (absent: 128 KiB sequential, 4 KiB random).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_bytes: Option<u64>,
    /// Queue depth per job (absent: 16 sequential, 32 random).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iodepth: Option<u32>,
    /// Jobs (absent: 1 sequential, 8 random).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numjobs: Option<u32>,
}

/// The four corners; any may be absent (not published for this drive).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CornersSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq_read_mb_s: Option<Corner>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rand_read_iops: Option<Corner>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq_write_mb_s: Option<Corner>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rand_write_iops: Option<Corner>,
}

/// The largest figure a corner may state, in MB/s or IOPS (`--datasheet` has the same bound,
/// `corners.MAX_FIGURE`): no drive comes near it.
pub const MAX_FIGURE: f64 = 1e9;

impl CornersSpec {
    /// The corners in calibration order (later figures depend on earlier parameters, not
    /// the reverse: the link before reads, reads before writes, programs before GC), with
    /// their names as `ssdtwin calibrate --datasheet` spells them.
    pub fn in_order(&self) -> [(&'static str, Option<&Corner>); 4] {
        [
            ("seq-read", self.seq_read_mb_s.as_ref()),
            ("rand-read", self.rand_read_iops.as_ref()),
            ("seq-write", self.seq_write_mb_s.as_ref()),
            ("rand-write", self.rand_write_iops.as_ref()),
        ]
    }

    /// Every problem, each with its field's path. `lba`: the drive's LBA format 0
    /// (`capacity.lba_bytes[0]`), the format its first namespace is created in, which the
    /// corners' jobs run on: a block must be whole LBAs of it.
    pub(super) fn problems(&self, lba: Option<u32>) -> Vec<String> {
        let mut out = Vec::new();
        let mut seen: Vec<&str> = Vec::new();
        for (name, corner) in self.in_order() {
            let Some(c) = corner else { continue };
            let path = format!("corners.{}", name.replace('-', "_") + if name.starts_with("seq") { "_mb_s" } else { "_iops" });
            // MB/s or IOPS; past 1e9 a typo (a PCIe 6.0 x16 link moves ~128,000 MB/s): 1e300
            // passed here and calibrate's link check printed it as a line of 300 digits.
            if !(c.value.is_finite() && c.value > 0.0 && c.value <= MAX_FIGURE) {
                // `{:e}` past 1e15: Display writes every digit of 1e300
                let got = if c.value.abs() > 1e15 { format!("{:e}", c.value) } else { c.value.to_string() };
                out.push(format!("{path}.value: must be a positive number up to 1e9 (got {got})"));
            }
            if c.source.trim().is_empty() {
                out.push(format!("{path}.source: every corner needs a source"));
            }
            if let Some(p) = &c.sets {
                if !CALIBRATABLE.contains(&p.as_str()) {
                    out.push(format!(
                        "{path}.sets: '{p}' is not a calibratable [timing] parameter; choose one of: {}",
                        CALIBRATABLE.join(", ")
                    ));
                } else if seen.contains(&p.as_str()) {
                    out.push(format!("{path}.sets: '{p}' is already set by an earlier corner (one parameter per figure)"));
                } else {
                    seen.push(p);
                }
            }
            if let Some(b) = c.block_bytes {
                // The twin's fio refuses a block of part of an LBA (a traceback from
                // calibrate until 2026-11-30, with a corner of 2 KiB on 4 KiB LBAs).
                let lba = lba.filter(|&l| l > 0).unwrap_or(512) as u64;
                if b == 0 || b % lba != 0 || b > 16 << 20 {
                    out.push(format!(
                        "{path}.block_bytes: must be a multiple of the {lba}-byte LBA (capacity.lba_bytes[0]) up to 16 MiB (got {b})"
                    ));
                }
            }
            // The corner's job runs these: an NVMe queue holds 65536 commands, and fio runs
            // at most 4096 jobs (REAL_MAX_JOBS; the twin's fio refuses more).
            for (field, v, max) in [("iodepth", c.iodepth, 65_536), ("numjobs", c.numjobs, 4096)] {
                if v.is_some_and(|v| v == 0 || v > max) {
                    out.push(format!("{path}.{field}: must be 1..={max} (got {})", v.unwrap_or(0)));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::spec::DriveSpec;

    fn with_corners(corners: &str) -> Result<DriveSpec, crate::spec::SpecError> {
        let base = crate::spec::preset_toml("kioxia-cm6-r-3.84t").expect("preset");
        let base: String = base
            .lines()
            .filter(|l| !l.starts_with("[corners]") && !l.starts_with("seq_") && !l.starts_with("rand_"))
            .collect::<Vec<_>>()
            .join("\n");
        DriveSpec::from_toml(&format!("{base}\n[corners]\n{corners}\n"), "test.toml")
    }

    #[test]
    fn corners_parse_and_keep_their_order() {
        let s = with_corners(
            "seq_write_mb_s = { value = 3200.0, source = \"sheet\", sets = \"ctrl_backend_bytes_per_s\" }\n\
             rand_write_iops = { value = 7782.0, source = \"sheet\", block_bytes = 65536, numjobs = 4 }",
        )
        .expect("valid corners");
        let c = s.corners.expect("corners");
        let names: Vec<_> = c.in_order().iter().filter(|(_, c)| c.is_some()).map(|(n, _)| *n).collect();
        assert_eq!(names, ["seq-write", "rand-write"]);
        assert_eq!(c.rand_write_iops.expect("rand write").block_bytes, Some(65536));
    }

    #[test]
    fn a_corner_block_of_part_of_an_lba_is_refused() {
        let base = crate::spec::preset_toml("kioxia-cm6-r-3.84t").expect("preset");
        let text = base.replace("lba_bytes = { value = [512, 4096]", "lba_bytes = { value = [4096, 512]");
        assert_ne!(text, base);
        let text = format!("{text}\n")
            .replace("rand_read_iops = { value = 1549202.0,", "rand_read_iops = { block_bytes = 2048, value = 1549202.0,");
        let e = DriveSpec::from_toml(&text, "test.toml").expect_err("2 KiB on 4 KiB LBAs").to_string();
        assert!(e.contains("corners.rand_read_iops.block_bytes: must be a multiple of the 4096-byte LBA (capacity.lba_bytes[0])"), "{e}");
        DriveSpec::from_toml(&text.replace("block_bytes = 2048", "block_bytes = 8192"), "test.toml").expect("8 KiB is whole LBAs");
    }

    #[test]
    fn a_figure_past_1e9_is_refused() {
        // 1e300 MB/s passed the core and calibrate printed it as a line of 300 digits.
        let e = with_corners("seq_read_mb_s = { value = 1e300, source = \"x\" }").expect_err("1e300 MB/s").to_string();
        assert!(e.contains("corners.seq_read_mb_s.value: must be a positive number up to 1e9 (got 1e300)"), "{e}");
        with_corners("rand_read_iops = { value = 1e9, source = \"x\" }").expect("1e9 IOPS is the bound");
    }

    #[test]
    fn bad_corners_name_every_field() {
        let e = with_corners(
            "seq_read_mb_s = { value = -1.0, source = \"\", sets = \"t_erase_ns\" }\n\
             rand_read_iops = { value = 1.0, source = \"x\", sets = \"t_read_ns\", iodepth = 0 }\n\
             seq_write_mb_s = { value = 1.0, source = \"x\", numjobs = 5000 }\n\
             rand_write_iops = { value = 1.0, source = \"x\", sets = \"t_read_ns\", block_bytes = 100 }",
        )
        .expect_err("bad corners");
        let text = e.to_string();
        for want in [
            "corners.seq_read_mb_s.value: must be a positive number",
            "corners.seq_read_mb_s.source",
            "corners.seq_read_mb_s.sets: 't_erase_ns' is not a calibratable",
            "corners.rand_read_iops.iodepth: must be 1..=65536",
            // more than fio's REAL_MAX_JOBS: the twin's fio refused it with a traceback
            "corners.seq_write_mb_s.numjobs: must be 1..=4096 (got 5000)",
            "corners.rand_write_iops.sets: 't_read_ns' is already set",
            "corners.rand_write_iops.block_bytes: must be a multiple of the 512-byte LBA",
        ] {
            assert!(text.contains(want), "{want} missing from: {text}");
        }
    }
}
