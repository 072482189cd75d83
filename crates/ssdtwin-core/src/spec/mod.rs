//! Drive specifications: every number about hardware lives here, each with its source.
//!
//! A preset is a TOML file. Every hardware parameter is written as
//! `{ value = ..., source = "..." }`; the loader refuses a parameter without a source, so a
//! preset cannot grow an undocumented number. [`DriveSpec::validate`] reports every bad
//! field at once, each with its path and allowed range.

mod presets;

pub use presets::{preset_names, preset_toml, PRESETS};

mod corners;
pub use corners::{Corner, CornersSpec, CALIBRATABLE};
mod geometry;

pub use geometry::Geometry;

use serde::{Deserialize, Serialize};
use std::fmt;

/// A parameter and where it came from (datasheet, NAND spec, derivation, calibration, or an
/// assumption stated as such).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sourced<T> {
    pub value: T,
    pub source: String,
}

impl<T> Sourced<T> {
    pub fn new(value: T, source: impl Into<String>) -> Self {
        Sourced { value, source: source.into() }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriveSpec {
    pub drive: DriveInfo,
    pub capacity: CapacitySpec,
    pub nand: NandSpec,
    pub ftl: FtlSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<TimingSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub power_states: Vec<PowerState>,
    #[serde(default)]
    pub logs: LogSpec,
    /// Namespaces carved out of the controller's DRAM (absent: the drive has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dram_namespace: Option<DramNamespaceSpec>,
    /// NVM Sets and Endurance Groups (absent: the drive has none; one partition holds every
    /// die). docs/models.md §9.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvm_sets: Option<NvmSetSpec>,
    /// Asymmetric Namespace Access reporting (NVMe 1.4, multipath; absent: not supported).
    /// One ANA group per namespace (ANAGRPID = NSID), nvme/ana.rs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ana: Option<AnaSpec>,
    /// The sanitize actions the controller supports (Identify Controller SANICAP; absent:
    /// none, the Sanitize command is refused). docs/cli.md, `ssdtwin nvme sanitize`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sanitize: Option<SanitizeSpec>,
    /// The drive's four published corners (spec sheet, or a brief's measured corners), with
    /// the parameter each calibrates (absent: none published here). spec/corners.rs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corners: Option<CornersSpec>,
    /// 1/N scale of this spec (1 = the full drive). Set by [`DriveSpec::scaled`], never by a preset.
    #[serde(default = "one")]
    pub scale: u32,
}

fn one() -> u32 {
    1
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriveInfo {
    /// Preset name, e.g. `kioxia-cm6-r-3.84t`.
    pub name: String,
    pub vendor: String,
    pub model: String,
    pub summary: String,
    pub model_number: Sourced<String>,
    pub firmware: String,
    pub pci_vendor_id: Sourced<u16>,
    pub interface: Sourced<String>,
    pub dwpd: Sourced<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacitySpec {
    /// TNVMCAP: user-addressable capacity of the whole drive in bytes.
    pub tnvmcap_bytes: Sourced<u64>,
    /// Supported LBA data sizes; the first is the factory format.
    pub lba_bytes: Sourced<Vec<u32>>,
    /// NN: how many namespaces the controller supports.
    pub max_namespaces: Sourced<u32>,
    /// Metadata sizes (bytes per LBA) offered with every LBA data size, in addition to 0
    /// (absent: no metadata formats). LBA formats 0..n are `lba_bytes` without metadata
    /// (so an image's format index keeps its meaning); then each data size with each of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_bytes: Option<Sourced<Vec<u16>>>,
    /// End-to-end protection information types supported (1, 2, 3) in a format with at
    /// least 8 bytes of metadata (absent or empty: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pi_types: Option<Sourced<Vec<u8>>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NandSpec {
    pub part: Sourced<String>,
    pub bits_per_cell: Sourced<u32>,
    pub channels: Sourced<u32>,
    pub dies_per_channel: Sourced<u32>,
    pub planes_per_die: Sourced<u32>,
    pub blocks_per_plane: Sourced<u32>,
    pub pages_per_block: Sourced<u32>,
    pub page_bytes: Sourced<u32>,
    /// Rated program/erase cycles (drives Percentage Used).
    pub pe_cycles: Sourced<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FtlSpec {
    /// Indirection unit: the L2P mapping granularity.
    pub iu_bytes: Sourced<u32>,
    /// Power-loss-protected DRAM write buffer.
    pub write_buffer_bytes: Sourced<u64>,
    /// Superblocks that GC effectively keeps out of service in steady state (free pool,
    /// unwritten frontier pages, copies relocated out of the victim but not yet erased), in
    /// the limit of many superblocks. The data pool the WAF models see is
    /// (superblocks - overhead) x superblock size, with the overhead of [`DriveSpec::gc_overhead`].
    pub gc_overhead_superblocks: Sourced<f64>,
    /// Finite-size term: with B superblocks the effective overhead is
    /// `gc_overhead_superblocks + gc_overhead_finite_size / B` (greedy GC with few blocks).
    pub gc_overhead_finite_size: Sourced<f64>,
    pub gc_policy: Sourced<GcPolicy>,
    /// FTL partitions per NVM Set (1 when absent): each owns an equal group of the set's
    /// dies with their superblocks, its own write buffer share, frontiers and GC, and every
    /// `partitions`-th IU of the set's logical space. Independent by construction, so
    /// fast-forward runs them on several cores with results identical for any thread count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Sourced<u32>>,
    /// Die parity (absent: none): in every stripe of program units across a superblock's
    /// dies (one unit per die), one unit holds the XOR of the others, on a die that rotates
    /// from stripe to stripe, so the data of a failed die can be rebuilt. It takes one die's
    /// share of every superblock from the data pool and adds one program per stripe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub die_parity: Option<Sourced<bool>>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GcPolicy {
    /// Fewest valid units first (Desnoyers; optimal for memoryless workloads).
    Greedy,
    /// Rosenblum/Kawaguchi cost-benefit: maximise (1-u)/(2u) × age.
    CostBenefit,
}

impl fmt::Display for GcPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GcPolicy::Greedy => "greedy",
            GcPolicy::CostBenefit => "cost-benefit",
        })
    }
}

/// NAND and controller timing (used by the timed engine).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimingSpec {
    pub t_read_ns: Sourced<u64>,
    pub t_prog_ns: Sourced<u64>,
    pub t_erase_ns: Sourced<u64>,
    /// NAND bus rate per channel, bytes per second.
    pub channel_bytes_per_s: Sourced<u64>,
    /// Host link payload bandwidth, bytes per second.
    pub host_link_bytes_per_s: Sourced<u64>,
    /// Controller time per read command (firmware, ECC, DMA setup).
    pub ctrl_read_ns: Sourced<u64>,
    /// Controller time per write command until the buffer acknowledges it.
    pub ctrl_write_ns: Sourced<u64>,
    /// Controller command-processing ceiling (IOPS), all cores together.
    pub ctrl_max_iops: Sourced<u64>,
    /// Ceiling of the controller's write path (buffer allocation, mapping updates) in write
    /// commands per second; 0 = no separate ceiling.
    pub ctrl_max_write_iops: Sourced<u64>,
    /// Ceiling of the controller's write data path (DMA into the buffer, encryption, ECC
    /// encoding) in bytes per second, a pipeline stage after the per-command write path;
    /// 0 = no separate ceiling.
    #[serde(default = "default_ctrl_max_write_bytes")]
    pub ctrl_max_write_bytes_per_s: Sourced<u64>,
    /// Ceiling of the controller's back end in bytes per second: the data of every NAND
    /// program (host and GC) and of every read the FTL issues for itself (GC relocation,
    /// read-modify-write) passes one pipelined stage; host reads take the read path and do
    /// not. 0 = no such ceiling. docs/models.md §3 ("Back end").
    #[serde(default = "default_ctrl_backend_bytes")]
    pub ctrl_backend_bytes_per_s: Sourced<u64>,
    /// Page reads charged per IU that GC relocates (φ of docs/models.md §3): 1 = every relocated
    /// IU costs its own page read, 1/(IUs per page) = perfect reuse of each page read.
    pub gc_page_reads_per_iu: Sourced<f64>,
    /// Drive power with NAND idle (controller, DRAM): the floor of every power state.
    pub idle_power_mw: Sourced<u32>,
    /// Extra power of one NAND operation (read, program or erase) in progress.
    pub nand_op_power_mw: Sourced<u32>,
    /// Program suspend latency: from the suspend command until the die accepts a read (the
    /// current program pulse/verify step finishes first). docs/models.md §3.
    #[serde(default = "default_t_prog_suspend")]
    pub t_prog_suspend_ns: Sourced<u64>,
    /// Erase suspend latency: from the suspend command until the die accepts a read.
    #[serde(default = "default_t_erase_suspend")]
    pub t_erase_suspend_ns: Sourced<u64>,
    /// Time to resume a suspended program or erase (voltages ramped again, a verify redone);
    /// the suspended operation ends later by suspend + reads + resume.
    #[serde(default = "default_t_resume")]
    pub t_resume_ns: Sourced<u64>,
    /// How many times one program or erase may be suspended; past it, reads wait for its end.
    /// 0 = no suspend (reads wait for every program and erase).
    #[serde(default = "default_max_suspends")]
    pub max_suspends_per_op: Sourced<u32>,
    /// Progress a resumed program or erase makes before it may be suspended again.
    #[serde(default = "default_suspend_min_progress")]
    pub suspend_min_progress_ns: Sourced<u64>,
    /// In a power state below ps0 the suspends allowed per operation shrink with the state's
    /// NAND power headroom: `max(1, round(max_suspends_per_op × (state max − idle) / (ps0 max −
    /// idle)))`. A suspend/resume cycle ramps the program voltages again, which costs energy
    /// the governor of a capped state does not grant freely. docs/models.md §3.
    #[serde(default = "default_suspend_scales_with_power")]
    pub suspends_scale_with_power: Sourced<bool>,
    /// Controller time per command on a namespace formatted with protection information:
    /// setting up the end-to-end check (guard CRC, tags) of the command's blocks, on the
    /// command processor (it lowers the command ceiling). Absent: 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctrl_pi_check_ns: Option<Sourced<u64>>,
}

/// Defaults of the suspend parameters for specs written before they existed (drive images
/// keep their spec.toml); the values and reasons are those of the KIOXIA presets.
fn default_ctrl_max_write_bytes() -> Sourced<u64> {
    Sourced::new(0, "[ASSUMED] default for specs written before the parameter: no write data-path ceiling")
}
fn default_ctrl_backend_bytes() -> Sourced<u64> {
    Sourced::new(0, "[ASSUMED] default for specs written before the parameter: no back-end ceiling")
}
fn default_t_prog_suspend() -> Sourced<u64> {
    Sourced::new(
        11_000,
        "[ASSUMED] default (docs/models.md §3): the presets' value, Wu & He 2012's inter-phase program suspension (11.09 us for MLC)",
    )
}
fn default_t_erase_suspend() -> Sourced<u64> {
    Sourced::new(100_000, "[ASSUMED] default (docs/models.md §3): the presets' value, Kim et al. 2019's ~100 us erase-suspension penalty")
}
fn default_t_resume() -> Sourced<u64> {
    Sourced::new(
        7_000,
        "[ASSUMED] default (docs/models.md §3): the presets' value, Wu & He 2012's page-buffer reload (3 us) and voltage reset (4 us)",
    )
}
fn default_max_suspends() -> Sourced<u32> {
    Sourced::new(
        4,
        "[ASSUMED] default (docs/models.md §3): firmware caps the suspends of one program so writes cannot starve (Intel US 10,956,081)",
    )
}
fn default_suspend_scales_with_power() -> Sourced<bool> {
    Sourced::new(true, "[ASSUMED] default (docs/models.md §3): a capped power state's governor rations suspend/resume cycles, which ramp the program voltages again")
}
fn default_suspend_min_progress() -> Sourced<u64> {
    Sourced::new(
        100_000,
        "[ASSUMED] default (docs/models.md §3): a resumed program must make progress before the next suspend (Intel US 10,956,081)",
    )
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerState {
    pub max_power_mw: u32,
    pub active_power_mw: Option<u32>,
    pub non_operational: bool,
    pub source: String,
}

/// DRAM namespaces (docs/models.md, "DRAM namespace"): namespaces with no NAND behind them,
/// held in the controller's power-loss-protected DRAM and dumped to a reserved NAND area when
/// power is lost. Not scaled by `--scale`: DRAM is not NAND, and what it holds (a database's
/// doublewrite buffer) does not shrink with the drive.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DramNamespaceSpec {
    /// DRAM the firmware can give to namespaces, all DRAM namespaces together.
    pub budget_bytes: Sourced<u64>,
    /// Controller time of a DRAM-namespace command once its data is in place (firmware and
    /// DRAM access; replaces the NAND path's ctrl_read_ns / ctrl_write_ns).
    pub latency_ns: Sourced<u64>,
    /// DRAM bandwidth available to DRAM-namespace transfers, bytes per second.
    pub bytes_per_s: Sourced<u64>,
}

/// NVM Sets (NVMe 1.4, docs/models.md §9): the dies split into disjoint groups, each an NVM
/// Set with its own Endurance Group and its own FTL partition (superblocks, free pool,
/// frontiers, GC, write buffer share). A set holds whole channels when the set count divides
/// the channel count, else an equal share of the dies of every channel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmSetSpec {
    /// How many sets the drive can be configured with (NSETIDMAX of a drive built with the
    /// most); at most 31, the entries of an NVM Set List.
    pub max_sets: Sourced<u32>,
    /// The sets of this drive: 1 (the factory default) to `max_sets`, chosen when the image is
    /// created (`ssdtwin create --nvm-sets N`): on a real drive the vendor fixes them.
    #[serde(default = "default_sets")]
    pub sets: Sourced<u32>,
    /// Predictable Latency Mode (NVMe 1.4 IO Determinism, features 13h/14h, log 0Ah) of
    /// each set (absent: not supported). docs/tenants.md, "Predictable latency".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plm: Option<PlmSpec>,
}

/// Predictable Latency Mode: what a deterministic window (DTWIN) may consume and how long
/// windows last. The window's write budget and the non-deterministic window's catch-up time
/// follow from these and the set's geometry (nvme/plm.rs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlmSpec {
    /// Share of a set's spare NAND (raw minus user capacity), in percent, its GC keeps free
    /// in a non-deterministic window so a deterministic one can absorb host writes.
    pub reserve_spare_pct: Sourced<u32>,
    /// DTWIN Time Maximum: the longest deterministic window, milliseconds.
    pub dtwin_time_max_ms: Sourced<u64>,
    /// NDWIN Time Minimum Low: the shortest non-deterministic window (after a deterministic
    /// window that wrote nothing), milliseconds.
    pub ndwin_time_min_ms: Sourced<u64>,
}

fn default_sets() -> Sourced<u32> {
    Sourced::new(1, "factory default: one set holding every die")
}

/// Asymmetric Namespace Access (NVMe 1.4 ANA reporting).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnaSpec {
    /// ANATT: the longest time a group stays in the change state, seconds.
    pub anatt_s: Sourced<u8>,
}

/// The most NVM Sets an NVM Set List (Identify CNS 04h) describes.
pub const MAX_NVM_SETS: u32 = 31;
/// Most FTL partitions per NVM Set (`[ftl] partitions`).
pub const MAX_FTL_PARTITIONS: u32 = 16;

/// Sanitize actions (NVMe SANICAP): each one the drive advertises and performs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SanitizeSpec {
    /// Crypto erase (SANICAP.CES): the media encryption key changes.
    pub crypto_erase: Sourced<bool>,
    /// Block erase (SANICAP.BES): every NAND block erased.
    pub block_erase: Sourced<bool>,
    /// Overwrite (SANICAP.OWS): every NAND block programmed with a pattern, per pass.
    pub overwrite: Sourced<bool>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSpec {
    /// Expose Intel's additional SMART log (0xCA) with 0xF4/0xF5 NAND/host sectors written.
    #[serde(default)]
    pub intel_smart_add: bool,
}

/// Every problem found in a spec, each with the path of its field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SpecError {
    pub origin: String,
    pub problems: Vec<String>,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        write!(f, "{}: ", self.origin)?;
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            f.write_str(p)?;
        }
        if n > 1 {
            write!(f, " ({n} problems)")?;
        }
        Ok(())
    }
}

struct Checker {
    problems: Vec<String>,
}

impl Checker {
    fn range<T: PartialOrd + fmt::Display + Copy>(&mut self, path: &str, v: &Sourced<T>, lo: T, hi: T) {
        self.source(path, &v.source);
        // Written so that NaN, which compares false with everything, is out of range.
        if !(v.value >= lo && v.value <= hi) {
            self.problems.push(format!("{path}: must be {lo}..={hi} (got {})", v.value));
        }
    }
    fn pow2(&mut self, path: &str, v: u64) {
        if !v.is_power_of_two() {
            self.problems.push(format!("{path}: must be a power of two (got {v})"));
        }
    }
    fn source(&mut self, path: &str, s: &str) {
        if s.trim().is_empty() {
            self.problems.push(format!("{path}.source: every parameter needs a source"));
        }
    }
    fn fail(&mut self, msg: String) {
        self.problems.push(msg);
    }
}

impl DriveSpec {
    /// Parse a preset or spec file. `origin` names the file in error messages.
    pub fn from_toml(text: &str, origin: &str) -> Result<DriveSpec, SpecError> {
        let spec: DriveSpec =
            toml::from_str(text).map_err(|e| SpecError { origin: origin.to_string(), problems: vec![toml_error_line(&e)] })?;
        spec.validate(origin)?;
        Ok(spec)
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a DriveSpec always serialises")
    }

    /// Look up a built-in preset by name.
    pub fn preset(name: &str) -> Result<DriveSpec, SpecError> {
        match preset_toml(name) {
            Some(text) => DriveSpec::from_toml(text, &format!("preset {name}")),
            None => Err(SpecError {
                origin: format!("preset '{name}'"),
                problems: vec![format!("unknown preset; choose one of: {}", preset_names().join(", "))],
            }),
        }
    }

    pub fn geometry(&self) -> Geometry {
        Geometry::from_spec(self)
    }

    /// Effective GC overhead in superblocks for a drive of `blocks` superblocks.
    pub fn gc_overhead_for(&self, blocks: f64) -> f64 {
        self.ftl.gc_overhead_superblocks.value + self.ftl.gc_overhead_finite_size.value / blocks.max(1.0)
    }

    /// Whether the FTL keeps die parity ([`FtlSpec::die_parity`]).
    pub fn has_die_parity(&self) -> bool {
        self.ftl.die_parity.as_ref().is_some_and(|p| p.value)
    }

    /// Effective GC overhead of this drive (see [`FtlSpec::gc_overhead_superblocks`]).
    pub fn gc_overhead(&self) -> f64 {
        self.gc_overhead_for(self.nand.blocks_per_plane.value as f64)
    }

    /// Check every field; report all problems at once.
    pub fn validate(&self, origin: &str) -> Result<(), SpecError> {
        let mut c = Checker { problems: Vec::new() };
        self.validate_drive(&mut c);
        self.validate_nand(&mut c);
        self.validate_ftl(&mut c);
        self.validate_capacity(&mut c);
        if c.problems.is_empty() {
            // Cross-field checks need sane individual fields.
            self.validate_cross_fields(&mut c);
        }
        self.validate_timing(&mut c);
        self.validate_dram(&mut c);
        if c.problems.is_empty() {
            self.validate_nvm_sets(&mut c);
        }
        if c.problems.is_empty() {
            self.validate_partitions(&mut c);
        }
        if c.problems.is_empty() && self.has_die_parity() && self.geometry().dies_per_group() < 2 {
            c.fail("ftl.die_parity: a stripe needs at least two dies per die group (parity and data)".into());
        }
        self.validate_power_states(&mut c);
        if let Some(corners) = &self.corners {
            c.problems.extend(corners.problems(self.capacity.lba_bytes.value.first().copied()));
        }
        if c.problems.is_empty() {
            Ok(())
        } else {
            Err(SpecError { origin: origin.to_string(), problems: c.problems })
        }
    }

    /// [drive]: a name, sources, endurance.
    fn validate_drive(&self, c: &mut Checker) {
        let d = &self.drive;
        if d.name.trim().is_empty() {
            c.fail("drive.name: must not be empty".into());
        }
        c.source("drive.model_number", &d.model_number.source);
        c.source("drive.pci_vendor_id", &d.pci_vendor_id.source);
        c.source("drive.interface", &d.interface.source);
        c.range("drive.dwpd", &d.dwpd, 0.0, 100.0);
    }

    /// [nand]: geometry ranges; blocks hold whole wordlines.
    fn validate_nand(&self, c: &mut Checker) {
        let n = &self.nand;
        c.source("nand.part", &n.part.source);
        c.range("nand.bits_per_cell", &n.bits_per_cell, 1, 4);
        c.range("nand.channels", &n.channels, 1, 64);
        c.range("nand.dies_per_channel", &n.dies_per_channel, 1, 64);
        c.range("nand.planes_per_die", &n.planes_per_die, 1, 8);
        c.range("nand.blocks_per_plane", &n.blocks_per_plane, 4, 1 << 20);
        c.range("nand.pages_per_block", &n.pages_per_block, 1, 1 << 16);
        c.range("nand.page_bytes", &n.page_bytes, 2048, 65536);
        c.pow2("nand.page_bytes", n.page_bytes.value as u64);
        c.range("nand.pe_cycles", &n.pe_cycles, 1, 1_000_000);
        if n.bits_per_cell.value > 0 && n.pages_per_block.value % n.bits_per_cell.value != 0 {
            c.fail(format!(
                "nand.pages_per_block: must be a multiple of bits_per_cell ({}) so blocks hold whole wordlines (got {})",
                n.bits_per_cell.value, n.pages_per_block.value
            ));
        }
    }

    /// [ftl]: IU, write buffer, GC overhead.
    fn validate_ftl(&self, c: &mut Checker) {
        let f = &self.ftl;
        c.range("ftl.iu_bytes", &f.iu_bytes, 4096, 65536);
        c.pow2("ftl.iu_bytes", f.iu_bytes.value as u64);
        c.range("ftl.write_buffer_bytes", &f.write_buffer_bytes, 0, 1 << 34);
        c.range("ftl.gc_overhead_superblocks", &f.gc_overhead_superblocks, 1.0, 64.0);
        c.range("ftl.gc_overhead_finite_size", &f.gc_overhead_finite_size, 0.0, 1000.0);
        c.source("ftl.gc_policy", &f.gc_policy.source);
        if let Some(k) = &f.partitions {
            c.range("ftl.partitions", k, 1, MAX_FTL_PARTITIONS);
            c.pow2("ftl.partitions", k.value as u64);
        }
        if let Some(dp) = &f.die_parity {
            c.source("ftl.die_parity", &dp.source);
        }
    }

    /// [capacity] and the scale.
    fn validate_capacity(&self, c: &mut Checker) {
        let cap = &self.capacity;
        c.range("capacity.tnvmcap_bytes", &cap.tnvmcap_bytes, 1 << 20, u64::MAX);
        c.range("capacity.max_namespaces", &cap.max_namespaces, 1, 1024);
        c.source("capacity.lba_bytes", &cap.lba_bytes.source);
        if cap.lba_bytes.value.is_empty() {
            c.fail("capacity.lba_bytes: at least one LBA format is required".into());
        }
        for (i, &b) in cap.lba_bytes.value.iter().enumerate() {
            if b != 512 && b != 4096 {
                c.fail(format!("capacity.lba_bytes[{i}]: must be 512 or 4096 (got {b})"));
            }
        }
        if let Some(md) = &cap.metadata_bytes {
            c.source("capacity.metadata_bytes", &md.source);
            for (i, &m) in md.value.iter().enumerate() {
                if !(8..=128).contains(&m) || m % 8 != 0 {
                    c.fail(format!("capacity.metadata_bytes[{i}]: must be a multiple of 8 in 8..=128 (got {m})"));
                }
            }
        }
        if let Some(pi) = &cap.pi_types {
            c.source("capacity.pi_types", &pi.source);
            for (i, &t) in pi.value.iter().enumerate() {
                if !(1..=3).contains(&t) {
                    c.fail(format!("capacity.pi_types[{i}]: must be 1, 2 or 3 (got {t})"));
                }
            }
            if !pi.value.is_empty() && cap.metadata_bytes.as_ref().is_none_or(|m| m.value.is_empty()) {
                c.fail("capacity.pi_types: protection information needs a metadata format (capacity.metadata_bytes)".into());
            }
        }
        if self.scale == 0 {
            c.fail("scale: must be at least 1".into());
        }
    }

    /// Checks across sections (IU against the program unit, capacity against the NAND pool).
    fn validate_cross_fields(&self, c: &mut Checker) {
        let (f, n, cap) = (&self.ftl, &self.nand, &self.capacity);
        let g = self.geometry();
        let iu = f.iu_bytes.value as u64;
        if g.program_unit_bytes % iu != 0 {
            c.fail(format!(
                "ftl.iu_bytes: must divide the program unit of {} bytes (planes × page × bits) (got {iu})",
                g.program_unit_bytes
            ));
        } else {
            // A plane holds page × bits of each program unit. An IU that neither divides that
            // part nor is whole parts of it straddles two planes, and the timing places each
            // IU on one plane (a 32 KiB IU of TLC 16 KiB pages on 2 planes indexed a plane
            // past the die's).
            let plane_part = g.program_unit_bytes / g.planes_per_die.max(1) as u64;
            if plane_part % iu != 0 && iu % plane_part != 0 {
                c.fail(format!(
                    "ftl.iu_bytes: must divide a plane's part of the program unit ({plane_part} bytes = page × bits) or be \
                     whole parts of it, so no IU straddles two planes (got {iu})"
                ));
            }
            let pool = g.data_pool_bytes(self.gc_overhead());
            if cap.tnvmcap_bytes.value >= pool {
                c.fail(format!(
                    "capacity.tnvmcap_bytes: must be below the NAND available to the FTL ({pool} bytes = (superblocks - GC overhead) x superblock) (got {})",
                    cap.tnvmcap_bytes.value
                ));
            }
            if g.physical_ius(iu) >= u32::MAX as u64 - 1 {
                c.fail(format!("ftl.iu_bytes: {} physical units do not fit the 32-bit map; use a larger IU", g.physical_ius(iu)));
            }
            if f.write_buffer_bytes.value % iu != 0 {
                c.fail(format!("ftl.write_buffer_bytes: must be a multiple of the IU ({iu}) (got {})", f.write_buffer_bytes.value));
            }
        }
        if cap.tnvmcap_bytes.value % 4096 != 0 {
            c.fail(format!("capacity.tnvmcap_bytes: must be a multiple of 4096 (got {})", cap.tnvmcap_bytes.value));
        }
        if self.gc_overhead() + 1.0 >= n.blocks_per_plane.value as f64 {
            c.fail("ftl.gc_overhead_superblocks: must be below nand.blocks_per_plane - 1".into());
        }
    }

    /// [dram_namespace] (optional): a budget that fits a namespace of one block, and a timing.
    fn validate_dram(&self, c: &mut Checker) {
        if let Some(a) = &self.ana {
            c.range("ana.anatt_s", &a.anatt_s, 1, 255);
        }
        if let Some(d) = &self.dram_namespace {
            c.range("dram_namespace.budget_bytes", &d.budget_bytes, 4096, 1 << 40);
            c.range("dram_namespace.latency_ns", &d.latency_ns, 0, 10_000_000);
            c.range("dram_namespace.bytes_per_s", &d.bytes_per_s, 1_000_000, 1_000_000_000_000);
        }
    }

    /// [nvm_sets] (optional): a set count the dies and the write buffer divide into.
    fn validate_nvm_sets(&self, c: &mut Checker) {
        let Some(s) = &self.nvm_sets else { return };
        c.range("nvm_sets.max_sets", &s.max_sets, 1, MAX_NVM_SETS);
        c.range("nvm_sets.sets", &s.sets, 1, s.max_sets.value.max(1));
        let k = s.sets.value;
        if k == 0 || k > s.max_sets.value {
            return;
        }
        for (what, n) in [("max_sets", s.max_sets.value), ("sets", k)] {
            if let Err(why) = Geometry::check_sets(&self.nand, n) {
                c.fail(format!("nvm_sets.{what}: {why} (got {n})"));
            }
        }
        if let Some(p) = &s.plm {
            c.range("nvm_sets.plm.reserve_spare_pct", &p.reserve_spare_pct, 1, 90);
            c.range("nvm_sets.plm.dtwin_time_max_ms", &p.dtwin_time_max_ms, 1, 86_400_000);
            c.range("nvm_sets.plm.ndwin_time_min_ms", &p.ndwin_time_min_ms, 1, 86_400_000);
        }
        if let Some((slots, unit)) = self.buffer_share_short_of_a_unit(k) {
            c.fail(format!(
                "nvm_sets.sets: each set's share of the write buffer ({slots} IUs) must hold a program unit ({unit} IUs) (got {k} sets)"
            ));
        }
    }

    /// (IUs of one share, IUs of a program unit) when the write buffer split `shares` ways
    /// leaves a share too small to fill one program unit.
    fn buffer_share_short_of_a_unit(&self, shares: u32) -> Option<(u64, u64)> {
        let iu = self.ftl.iu_bytes.value as u64;
        let slots = self.ftl.write_buffer_bytes.value / iu / shares as u64;
        let unit = self.geometry().ius_per_program_unit(iu) as u64;
        (slots < unit).then_some((slots, unit))
    }

    /// The NVM Sets of this drive (1 when it has none).
    pub fn nvm_sets(&self) -> u32 {
        self.nvm_sets.as_ref().map_or(1, |s| s.sets.value)
    }

    /// FTL partitions per NVM Set (1 when the spec sets none).
    pub fn ftl_partitions(&self) -> u32 {
        self.ftl.partitions.as_ref().map_or(1, |k| k.value)
    }

    /// The die groups the FTL runs apart: NVM Sets x partitions per set.
    pub fn die_groups(&self) -> u32 {
        self.nvm_sets() * self.ftl_partitions()
    }

    /// [ftl] partitions: the die groups (NVM Sets x partitions) must split the dies evenly
    /// and each group's share of the write buffer must hold a program unit.
    fn validate_partitions(&self, c: &mut Checker) {
        let Some(k) = &self.ftl.partitions else { return };
        let groups = self.die_groups();
        let (sets, k) = (self.nvm_sets(), k.value);
        if let Err(why) = Geometry::check_sets(&self.nand, groups) {
            c.fail(format!("ftl.partitions: {sets} NVM Set(s) x {k} partitions = {groups} die groups: {why} (got {k})"));
            return;
        }
        if let Some((slots, unit)) = self.buffer_share_short_of_a_unit(groups) {
            c.fail(format!(
                "ftl.partitions: each partition's share of the write buffer ({slots} IUs) must hold a program unit ({unit} IUs) (got {k})"
            ));
        }
    }

    /// The same drive with `k` FTL partitions per NVM Set (a what-if: `bench ftl --partitions`).
    pub fn with_partitions(&self, k: u32) -> Result<DriveSpec, SpecError> {
        let mut s = self.clone();
        s.ftl.partitions = Some(Sourced::new(k, "chosen for this run (--partitions)"));
        s.validate(&format!("{} with {k} FTL partitions", self.drive.name))?;
        Ok(s)
    }

    /// The same drive configured with `sets` NVM Sets (`ssdtwin create --nvm-sets`).
    pub fn with_nvm_sets(&self, sets: u32) -> Result<DriveSpec, SpecError> {
        let err = |m: String| SpecError { origin: format!("--nvm-sets {sets}"), problems: vec![m] };
        let Some(ns) = &self.nvm_sets else {
            if sets == 1 {
                return Ok(self.clone());
            }
            return Err(err(format!("{} has no NVM Sets (its preset has no [nvm_sets] section): use 1", self.drive.name)));
        };
        let allowed: Vec<String> =
            (1..=ns.max_sets.value).filter(|&k| Geometry::check_sets(&self.nand, k).is_ok()).map(|k| k.to_string()).collect();
        if !allowed.contains(&sets.to_string()) {
            return Err(err(format!(
                "{} can be built with {} NVM Sets (its dies split evenly), not {sets}",
                self.drive.name,
                allowed.join(", ")
            )));
        }
        let mut s = self.clone();
        s.nvm_sets.as_mut().expect("checked").sets = Sourced::new(sets, "chosen when the image was created (ssdtwin create --nvm-sets)");
        s.validate(&format!("{} with {sets} NVM Sets", self.drive.name))?;
        Ok(s)
    }

    /// [timing]: ranges of every timing number. The table is required: a spec without one
    /// was accepted and every command that runs I/O (fio, serve, calibrate) then failed with
    /// a traceback (the field stays optional in the type, for the engine's own error).
    fn validate_timing(&self, c: &mut Checker) {
        if self.timing.is_none() {
            c.fail(
                "timing: missing: a drive needs its [timing] table to run any I/O (fio, serve, calibrate); copy it from \
                 `ssdtwin models NAME`"
                    .into(),
            );
        }
        if let Some(t) = &self.timing {
            c.range("timing.t_read_ns", &t.t_read_ns, 1_000, 10_000_000);
            c.range("timing.t_prog_ns", &t.t_prog_ns, 10_000, 100_000_000);
            c.range("timing.t_erase_ns", &t.t_erase_ns, 100_000, 1_000_000_000);
            c.range("timing.channel_bytes_per_s", &t.channel_bytes_per_s, 1_000_000, 100_000_000_000);
            c.range("timing.host_link_bytes_per_s", &t.host_link_bytes_per_s, 1_000_000, 1_000_000_000_000);
            c.range("timing.ctrl_read_ns", &t.ctrl_read_ns, 0, 10_000_000);
            c.range("timing.ctrl_write_ns", &t.ctrl_write_ns, 0, 10_000_000);
            c.range("timing.ctrl_max_iops", &t.ctrl_max_iops, 1, 1_000_000_000);
            c.range("timing.ctrl_max_write_iops", &t.ctrl_max_write_iops, 0, 1_000_000_000);
            c.range("timing.ctrl_max_write_bytes_per_s", &t.ctrl_max_write_bytes_per_s, 0, 1_000_000_000_000);
            c.range("timing.ctrl_backend_bytes_per_s", &t.ctrl_backend_bytes_per_s, 0, 1_000_000_000_000);
            c.range("timing.gc_page_reads_per_iu", &t.gc_page_reads_per_iu, 0.0, 1.0);
            c.range("timing.idle_power_mw", &t.idle_power_mw, 0, 100_000);
            c.range("timing.nand_op_power_mw", &t.nand_op_power_mw, 1, 10_000);
            c.range("timing.t_prog_suspend_ns", &t.t_prog_suspend_ns, 0, 10_000_000);
            c.range("timing.t_erase_suspend_ns", &t.t_erase_suspend_ns, 0, 100_000_000);
            c.range("timing.t_resume_ns", &t.t_resume_ns, 0, 10_000_000);
            c.range("timing.max_suspends_per_op", &t.max_suspends_per_op, 0, 1_000);
            c.range("timing.suspend_min_progress_ns", &t.suspend_min_progress_ns, 0, 100_000_000);
            c.source("timing.suspends_scale_with_power", &t.suspends_scale_with_power.source);
            if let Some(pi) = &t.ctrl_pi_check_ns {
                // The same bound as the other per-command controller times (and far from
                // the engine's picoseconds overflowing u64).
                c.range("timing.ctrl_pi_check_ns", pi, 0, 10_000_000);
            }
        }
    }

    /// [[power_states]]: sourced, with a power budget.
    fn validate_power_states(&self, c: &mut Checker) {
        // Identify Controller describes PSD0-PSD31 (NPSS is 0's based): 32 at most.
        if self.power_states.len() > 32 {
            c.fail(format!("power_states: at most 32 (NVMe's PSD0-PSD31) (got {})", self.power_states.len()));
        }
        for (i, ps) in self.power_states.iter().enumerate() {
            c.source(&format!("power_states[{i}]"), &ps.source);
            if ps.max_power_mw == 0 {
                c.fail(format!("power_states[{i}].max_power_mw: must be above 0"));
            } else if let Some(t) = self.timing.as_ref().filter(|_| !ps.non_operational) {
                // The engine allows (max - idle) / op NAND operations at once in a state
                // (docs/models.md §3, power): a state that cannot power one does I/O only
                // because the engine grants one anyway, a drive over its own budget.
                let need = t.idle_power_mw.value as u64 + t.nand_op_power_mw.value as u64;
                if (ps.max_power_mw as u64) < need {
                    c.fail(format!(
                        "power_states[{i}].max_power_mw: an operational state must power one NAND operation over idle: at least \
                         timing.idle_power_mw + timing.nand_op_power_mw = {need} (got {})",
                        ps.max_power_mw
                    ));
                }
            }
        }
        // The twin starts every drive in power state 0 (the Power Management feature's
        // default), and a non-operational state processes no I/O (NVMe 1.4 §8.4.1): a drive
        // whose first state were one could not do its first I/O.
        if self.power_states.first().is_some_and(|ps| ps.non_operational) {
            c.fail("power_states[0].non_operational: must be false (a drive starts in power state 0 and must do I/O there)".into());
        }
    }

    /// The same drive at 1/`n` scale: fewer blocks per plane, everything else kept.
    ///
    /// Why the GC overhead is kept whole: the superblocks GC keeps out of service (free
    /// pool, open pages, relocated copies) are a fixed number whatever the drive size. Scaling
    /// only the rest keeps (data pool)/(user capacity), i.e. the effective OP, the same as at
    /// full scale, so WAF and steady-state performance match (docs/models.md, "Scale").
    pub fn scaled(&self, n: u32) -> Result<DriveSpec, SpecError> {
        let err = |m: String| SpecError { origin: format!("scale 1/{n}"), problems: vec![m] };
        if n == 0 {
            return Err(err("scale denominator must be at least 1".into()));
        }
        if self.scale != 1 {
            // A drive image's spec.toml is the scaled spec: it cannot be scaled again, and
            // `--spec` wants the full-scale file the image was made from.
            return Err(err(format!(
                "the spec is already scaled (scale = {}: a drive image's spec.toml); give the full-scale spec it was made \
                 from (the file given to `create --spec`, or `ssdtwin models NAME`)",
                self.scale
            )));
        }
        if n == 1 {
            return Ok(self.clone());
        }
        let mut s = self.clone();
        let w = self.gc_overhead();
        let data = self.nand.blocks_per_plane.value as f64 - w;
        let (blocks, ws) = self.scaled_blocks(n);
        if blocks - ws < 4.0 {
            // The largest N that still leaves 4 (data superblocks fall as N grows).
            let (mut lo, mut hi) = (1u32, n);
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                let (b, o) = self.scaled_blocks(mid);
                if b - o >= 4.0 {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            return Err(err(format!(
                "too small: {} blocks per plane leave {:.1} data superblocks at 1/{n} (need at least 4: N <= {lo})",
                self.nand.blocks_per_plane.value,
                blocks - ws
            )));
        }
        // Each scaled value's source says how it was derived and keeps the full-scale one's
        // own source, so the image's spec.toml still says where the drive's figures come from.
        s.nand.blocks_per_plane.value = blocks as u32;
        s.nand.blocks_per_plane.source = format!(
            "{} (full scale) minus its {w:.3} GC overhead, / {n}, plus the scaled drive's {ws:.3}, rounded up; full scale: {}",
            self.nand.blocks_per_plane.value, self.nand.blocks_per_plane.source
        );
        // Same user : data-pool ratio as full scale, on a 64 KiB grid (any IU, any LBA size).
        let grain = 65536f64;
        let t = self.capacity.tnvmcap_bytes.value as f64 * (blocks - ws) / data;
        s.capacity.tnvmcap_bytes.value = ((t / grain).floor() * grain) as u64;
        s.capacity.tnvmcap_bytes.source = format!(
            "{} (full scale) x {:.3}/{data:.3} data superblocks, rounded down to 64 KiB; full scale: {}",
            self.capacity.tnvmcap_bytes.value,
            blocks - ws,
            self.capacity.tnvmcap_bytes.source
        );
        s.scale = n;
        s.validate(&format!("{} at 1/{n}", self.drive.name))?;
        Ok(s)
    }

    /// Blocks per plane of the drive at 1/`n` and its GC overhead (superblocks): the scaled
    /// drive's own overhead depends on its block count, so this iterates to the fixpoint.
    fn scaled_blocks(&self, n: u32) -> (f64, f64) {
        let data = self.nand.blocks_per_plane.value as f64 - self.gc_overhead();
        let mut blocks = (data / n as f64 + self.ftl.gc_overhead_superblocks.value).ceil();
        for _ in 0..4 {
            blocks = (data / n as f64 + self.gc_overhead_for(blocks)).ceil();
        }
        (blocks, self.gc_overhead_for(blocks))
    }

    /// Data bytes of an LBA format index, if valid.
    pub fn lba_format(&self, index: usize) -> Option<u32> {
        self.lba_formats().get(index).map(|f| f.0)
    }

    /// Every LBA format as (data bytes, metadata bytes), in index order: the data sizes
    /// without metadata first, then each data size with each metadata size.
    pub fn lba_formats(&self) -> Vec<(u32, u16)> {
        let data = &self.capacity.lba_bytes.value;
        let md: &[u16] = self.capacity.metadata_bytes.as_ref().map_or(&[], |m| &m.value);
        let plain = data.iter().map(|&d| (d, 0));
        plain.chain(data.iter().flat_map(|&d| md.iter().map(move |&m| (d, m)))).collect()
    }

    /// Protection information types the drive supports (empty: none).
    pub fn pi_types(&self) -> &[u8] {
        self.capacity.pi_types.as_ref().map_or(&[], |p| &p.value)
    }
}

fn toml_error_line(e: &toml::de::Error) -> String {
    // toml's message is multi-line with a source excerpt; keep the gist on one line.
    let msg = e.message().replace('\n', " ");
    match e.span() {
        Some(span) => format!("invalid TOML at byte {}: {msg}", span.start),
        None => format!("invalid TOML: {msg}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_presets_load() {
        for name in preset_names() {
            let s = DriveSpec::preset(name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(s.drive.name, *name);
        }
    }

    /// φ below 1 stands for page reads shared between IUs of one page; an IU of whole pages
    /// shares none, so a preset with such an IU must charge every page (docs/models.md §3).
    #[test]
    fn presets_with_whole_page_ius_read_every_page_in_gc() {
        let mut seen = 0;
        for name in preset_names() {
            let s = DriveSpec::preset(name).unwrap_or_else(|e| panic!("{e}"));
            let (iu, page) = (s.ftl.iu_bytes.value as u64, s.nand.page_bytes.value as u64);
            let phi = s.timing.as_ref().expect("presets are timed").gc_page_reads_per_iu.value;
            if iu >= page {
                seen += 1;
                assert_eq!(phi, 1.0, "{name}: a {iu} B IU is whole {page} B pages, but φ = {phi}");
            }
        }
        assert!(seen >= 1, "the P5316 has a 64 KiB IU over 16 KiB pages");
    }

    #[test]
    fn nan_and_a_pi_check_time_past_its_range_are_refused() {
        let base = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap();
        let refused = |s: &DriveSpec, field: &str| {
            let e = s.validate("x.toml").expect_err(field).to_string();
            assert!(e.contains(field), "{field}: {e}");
        };
        let mut s = base.clone();
        s.drive.dwpd.value = f64::NAN;
        refused(&s, "drive.dwpd: must be 0..=100 (got NaN)");
        let mut s = base.clone();
        s.timing.as_mut().unwrap().gc_page_reads_per_iu.value = f64::NAN;
        refused(&s, "timing.gc_page_reads_per_iu: must be 0..=1 (got NaN)");
        let mut s = base.clone();
        s.ftl.gc_overhead_superblocks.value = f64::NAN;
        refused(&s, "ftl.gc_overhead_superblocks: must be");
        let mut s = base.clone();
        s.timing.as_mut().unwrap().ctrl_pi_check_ns = Some(Sourced { value: u64::MAX, source: "x".into() });
        refused(&s, "timing.ctrl_pi_check_ns: must be 0..=10000000");
        s.timing.as_mut().unwrap().ctrl_pi_check_ns = Some(Sourced { value: 10_000_000, source: "x".into() });
        s.validate("x.toml").unwrap();
    }

    #[test]
    fn more_than_32_power_states_are_refused() {
        let mut s = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap();
        let ps = s.power_states[0].clone();
        s.power_states = vec![ps; 32];
        s.validate("x.toml").unwrap();
        s.power_states.push(s.power_states[0].clone());
        let e = s.validate("x.toml").unwrap_err().to_string();
        assert!(e.contains("power_states: at most 32 (NVMe's PSD0-PSD31) (got 33)"), "{e}");
    }

    #[test]
    fn a_non_operational_power_state_0_is_refused() {
        let mut s = DriveSpec::preset("kioxia-cm6-v-1.6t").unwrap();
        s.power_states[0].non_operational = true;
        let e = s.validate("x.toml").unwrap_err().to_string();
        assert!(e.contains("power_states[0].non_operational: must be false"), "{e}");
        s.power_states[0].non_operational = false;
        let last = s.power_states.len() - 1;
        s.power_states[last].non_operational = true;
        s.validate("x.toml").unwrap();
    }

    #[test]
    fn specs_written_before_suspend_parameters_still_load() {
        // Drive images keep the spec.toml they were created with: one without the suspend
        // and write-data fields gets the documented defaults.
        let new = DriveSpec::preset("kioxia-cm6-v-1.6t").unwrap();
        let text = new.to_toml();
        let old: String = text
            .split("\n[timing.")
            .filter(|part| {
                ![
                    "t_prog_suspend_ns]",
                    "t_erase_suspend_ns]",
                    "t_resume_ns]",
                    "max_suspends_per_op]",
                    "suspend_min_progress_ns]",
                    "suspends_scale_with_power]",
                    "ctrl_max_write_bytes_per_s]",
                    "ctrl_backend_bytes_per_s]",
                ]
                .iter()
                .any(|f| part.starts_with(f))
            })
            .collect::<Vec<_>>()
            .join("\n[timing.");
        assert!(!old.contains("t_prog_suspend_ns") && old.len() < text.len());
        let t = DriveSpec::from_toml(&old, "old.toml").unwrap().timing.unwrap();
        let n = new.timing.unwrap();
        assert_eq!(t.t_prog_suspend_ns.value, n.t_prog_suspend_ns.value);
        assert_eq!(t.t_erase_suspend_ns.value, n.t_erase_suspend_ns.value);
        assert_eq!(t.t_resume_ns.value, n.t_resume_ns.value);
        assert_eq!(t.max_suspends_per_op.value, n.max_suspends_per_op.value);
        assert_eq!(t.suspend_min_progress_ns.value, n.suspend_min_progress_ns.value);
        assert_eq!(t.suspends_scale_with_power.value, n.suspends_scale_with_power.value);
        assert_eq!(t.ctrl_max_write_bytes_per_s.value, 0);
        assert_eq!(t.ctrl_backend_bytes_per_s.value, 0);
        assert!(t.t_prog_suspend_ns.source.starts_with("[ASSUMED] default"));
    }

    #[test]
    fn unknown_preset() {
        let e = DriveSpec::preset("nope").unwrap_err();
        assert!(e.to_string().contains("unknown preset"), "{e}");
    }

    #[test]
    fn validation_lists_every_problem() {
        let mut s = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap();
        s.nand.channels.value = 0;
        s.ftl.iu_bytes.value = 5000;
        s.nand.pe_cycles.source = String::new();
        let e = s.validate("x.toml").unwrap_err();
        assert_eq!(e.problems.len(), 3, "{e}");
        assert!(e.to_string().contains("nand.channels: must be 1..=64 (got 0)"), "{e}");
    }

    #[test]
    fn an_iu_that_straddles_two_planes_is_refused() {
        // TLC 16 KiB pages on 2 planes: a plane holds 48 KiB of the 96 KiB program unit. A
        // 32 KiB IU divides the unit, but its second IU straddles the planes.
        let mut s = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap();
        assert_eq!((s.nand.planes_per_die.value, s.nand.page_bytes.value, s.nand.bits_per_cell.value), (2, 16384, 3));
        s.ftl.iu_bytes.value = 32768;
        let e = s.validate("x.toml").unwrap_err();
        assert!(e.to_string().contains("ftl.iu_bytes: must divide a plane's part of the program unit (49152 bytes = page × bits)"), "{e}");
        s.ftl.iu_bytes.value = 16384; // three to a plane
        s.validate("x.toml").unwrap();
        // 2 KiB pages: a plane holds 6 KiB, and the 4 KiB IU straddles the planes too
        s.ftl.iu_bytes.value = 4096;
        s.nand.page_bytes.value = 2048;
        let e = s.validate("x.toml").unwrap_err();
        assert!(e.to_string().contains("(6144 bytes = page × bits) or be whole parts of it"), "{e}");
    }

    #[test]
    fn unknown_field_is_an_error() {
        let text = preset_toml("kioxia-cm6-r-3.84t").unwrap().replace("[nand]", "[nand]\nbogus = 1");
        let e = DriveSpec::from_toml(&text, "x.toml").unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
    }

    #[test]
    fn scaling_keeps_op_ratio() {
        let s = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap();
        let g = s.geometry();
        let full = g.data_pool_bytes(s.gc_overhead()) as f64 / s.capacity.tnvmcap_bytes.value as f64;
        for n in [16, 64] {
            let t = s.scaled(n).unwrap();
            let gt = t.geometry();
            let ratio = gt.data_pool_bytes(t.gc_overhead()) as f64 / t.capacity.tnvmcap_bytes.value as f64;
            assert!((ratio / full - 1.0).abs() < 1e-4, "1/{n}: {ratio} vs {full}");
            assert_eq!(gt.dies(), g.dies());
            assert_eq!(gt.superblock_bytes, g.superblock_bytes);
        }
    }

    #[test]
    fn a_scaled_spec_keeps_the_full_scale_sources() {
        // An image's spec.toml is the scaled spec: the two values scaling changes must still
        // say where the drive's own figures came from (a user's "[SRC] my datasheet").
        let mut s = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap();
        s.capacity.tnvmcap_bytes.source = "[SRC] my datasheet rev 2".into();
        s.nand.blocks_per_plane.source = "[DERIVED] my die".into();
        let t = s.scaled(64).unwrap();
        assert!(t.capacity.tnvmcap_bytes.source.ends_with("; full scale: [SRC] my datasheet rev 2"), "{}", t.capacity.tnvmcap_bytes.source);
        assert!(t.nand.blocks_per_plane.source.ends_with("; full scale: [DERIVED] my die"), "{}", t.nand.blocks_per_plane.source);
    }

    #[test]
    fn scaling_errors_say_what_to_do() {
        let s = DriveSpec::preset("intel-p5316-15.36t").unwrap();
        // too small: the message names the smallest drive that works, and that one does
        let e = s.scaled(454).unwrap_err().to_string();
        let lo: u32 = e.split("need at least 4: N <= ").nth(1).and_then(|r| r.split(')').next()).and_then(|n| n.parse().ok()).expect(&e);
        assert!(s.scaled(lo).is_ok() && s.scaled(lo + 1).is_err(), "{e}");
        // a scaled spec (an image's spec.toml) names its scale and what to give instead
        let e = s.scaled(64).unwrap().scaled(1).unwrap_err().to_string();
        assert!(e.contains("already scaled (scale = 64: a drive image's spec.toml); give the full-scale spec"), "{e}");
    }

    #[test]
    fn a_power_state_that_cannot_power_one_nand_operation_is_refused() {
        // The engine grants such a state one operation anyway (engine set_power): a drive
        // over its own power budget, accepted until 2026-11-30.
        let mut s = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap();
        s.timing.as_mut().unwrap().idle_power_mw.value = 30_000;
        let e = s.validate("x.toml").unwrap_err().to_string();
        assert!(e.contains("power_states[0].max_power_mw: an operational state must power one NAND operation over idle: at least timing.idle_power_mw + timing.nand_op_power_mw = 30150 (got 27500)"), "{e}");
        // the non-operational ps6 (5 W, the idle floor) is not held to it
        assert!(!e.contains("power_states[6]"), "{e}");
        s.timing.as_mut().unwrap().idle_power_mw.value = 9_750; // ps5 (9.9 W) powers exactly one
        s.validate("x.toml").unwrap();
    }

    #[test]
    fn a_spec_without_a_timing_table_is_refused() {
        let text = preset_toml("kioxia-cm6-r-3.84t").unwrap();
        let (head, rest) = text.split_once("\n[timing]\n").unwrap();
        let tail = &rest[rest.find("\n[[power_states]]").unwrap()..];
        let e = DriveSpec::from_toml(&format!("{head}\n{tail}"), "x.toml").unwrap_err().to_string();
        assert!(e.contains("timing: missing: a drive needs its [timing] table"), "{e}");
    }
}
