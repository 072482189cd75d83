//! Sanitize (admin opcode 84h), the Sanitize Status log (81h) and the per-namespace media
//! encryption keys that crypto erase changes.
//!
//! The model (docs/cli.md, `ssdtwin nvme sanitize`): the state change is made in full when
//! the command is accepted (every mapping dropped, keys changed, wear counted), so no old data
//! is ever readable again; the operation then *runs* on the controller's clock (power-on
//! time: simulated time under `ssdtwin fio`, wall time under `ssdtwin serve`) for the
//! duration the preset gives it, and the controller refuses I/O until the clock passes its
//! end (SANITIZE_IN_PROGRESS), as a real drive does while its firmware erases the media.
//! The twin stores no ciphertext and no key material: a key is an identifier derived from
//! the image seed, the NSID and a generation that crypto erase advances.

use serde::{Deserialize, Serialize};

use super::status::fail;
use super::{Controller, Error, Status};
use crate::spec::DriveSpec;
use crate::util::splitmix;

/// Sanitize Action (SANACT) values of the Sanitize command's CDW10.
pub const SANACT_EXIT_FAILURE: u8 = 1;
pub const SANACT_BLOCK_ERASE: u8 = 2;
pub const SANACT_OVERWRITE: u8 = 3;
pub const SANACT_CRYPTO_ERASE: u8 = 4;

/// "No time period reported" in the Sanitize Status log's estimates.
const NO_ESTIMATE: u32 = u32::MAX;

/// The most recent sanitize and the wear all sanitizes caused (persisted).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SanitizeState {
    /// Sanitize operations started (0: the drive was never sanitized).
    pub count: u64,
    /// CDW10 of the most recent Sanitize command.
    pub scdw10: u32,
    /// Controller clock (ns) when the most recent one started, and when it ends.
    pub start_ns: u64,
    pub end_ns: u64,
    /// Host write commands when it started: Global Data Erased holds while none came since.
    pub writes_at_start: u64,
    /// Every NAND block erased this many times by sanitize operations (they erase every
    /// block alike, so one count is exact for all of them).
    pub erases_per_block: u32,
    /// NAND bytes programmed by overwrite passes.
    pub nand_write_bytes: u64,
}

impl SanitizeState {
    pub fn is_never(&self) -> bool {
        *self == SanitizeState::default()
    }
}

/// What the Sanitize command asks for (CDW10/CDW11 fields, nvme-cli's option names).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SanitizeRequest {
    pub sanact: u8,
    /// Allow Unrestricted Sanitize Exit.
    pub ause: bool,
    /// Overwrite pass count, 0 meaning 16.
    pub owpass: u8,
    /// Overwrite Invert Pattern Between Passes.
    pub oipbp: bool,
    /// No-Deallocate After Sanitize.
    pub no_dealloc: bool,
    /// Overwrite pattern.
    pub ovrpat: u32,
}

impl SanitizeRequest {
    pub fn cdw10(&self) -> u32 {
        (self.sanact as u32 & 7)
            | (self.ause as u32) << 3
            | (self.owpass as u32 & 0xf) << 4
            | (self.oipbp as u32) << 8
            | (self.no_dealloc as u32) << 9
    }

    /// Passes an overwrite makes (OWPASS 0 = 16).
    pub fn passes(&self) -> u32 {
        if self.owpass == 0 {
            16
        } else {
            self.owpass as u32
        }
    }
}

/// How long each action takes on a drive, from its preset (None: the preset has no timing).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SanitizeTimes {
    /// A key change: nothing on the NAND moves.
    pub crypto_erase_ns: u64,
    /// Every block erased: erase time × blocks per parallel unit.
    pub block_erase_ns: u64,
    /// One overwrite pass: a block erase, then the whole NAND programmed.
    pub overwrite_pass_ns: u64,
    /// Plane operations running at once (all planes, or what the power state's budget allows).
    pub parallel_planes: u64,
}

/// Sanitize durations of `spec` in power state `ps`. Every plane erases (or programs) one
/// block (one wordline) at a time, all planes in parallel unless the power state's NAND
/// budget allows fewer operations at once: the engine's rule (engine/mod.rs, `set_power`).
pub fn sanitize_times(spec: &DriveSpec, ps: u8) -> Option<SanitizeTimes> {
    let t = spec.timing.as_ref()?;
    let n = &spec.nand;
    let g = spec.geometry();
    let planes = g.dies() as u64 * n.planes_per_die.value as u64;
    let budget = spec.power_states.get(ps as usize).map(|p| {
        let op = t.nand_op_power_mw.value.max(1) as u64;
        ((p.max_power_mw as u64).saturating_sub(t.idle_power_mw.value as u64) / op).max(1)
    });
    let parallel = budget.map_or(planes, |b| b.min(planes));
    let blocks = planes * n.blocks_per_plane.value as u64;
    let block_erase_ns = t.t_erase_ns.value * blocks.div_ceil(parallel);
    let unit = n.page_bytes.value as u64 * n.bits_per_cell.value as u64;
    let programs = g.raw_bytes().div_ceil(unit);
    let program_ns = t.t_prog_ns.value * programs.div_ceil(parallel);
    let bus_ns = (g.raw_bytes() as u128 * 1_000_000_000 / (n.channels.value as u128 * t.channel_bytes_per_s.value.max(1) as u128)) as u64;
    Some(SanitizeTimes {
        crypto_erase_ns: 0,
        block_erase_ns,
        overwrite_pass_ns: block_erase_ns + program_ns.max(bus_ns),
        parallel_planes: parallel,
    })
}

/// SANICAP of a preset: bit 0 crypto erase, bit 1 block erase, bit 2 overwrite; bit 29
/// (No-Deallocate Inhibited) whenever any is supported.
pub fn sanicap(spec: &DriveSpec) -> u32 {
    let Some(s) = &spec.sanitize else { return 0 };
    let caps = s.crypto_erase.value as u32 | (s.block_erase.value as u32) << 1 | (s.overwrite.value as u32) << 2;
    if caps == 0 {
        0
    } else {
        caps | 1 << 29
    }
}

/// The Sanitize Status log (81h) as its fields are laid out (`get-log --log-id 0x81`); the
/// nvme-cli JSON form is [`SanitizeLogPage::nvme_cli`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SanitizeLogPage {
    pub sprog: u16,
    pub sstat: u16,
    pub scdw10: u32,
    pub eto: u32,
    pub etbe: u32,
    pub etce: u32,
    pub etond: u32,
    pub etbend: u32,
    pub etcend: u32,
    pub etpvds: u32,
    pub ssi: u8,
}

/// The Sanitize Status log with nvme-cli's JSON field names (`nvme sanitize-log -o json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SanitizeLogJson {
    pub sprog: u16,
    pub sstat: SstatJson,
    pub cdw10_info: u32,
    pub time_over_write: u32,
    pub time_block_erase: u32,
    pub time_crypto_erase: u32,
    pub time_over_write_no_dealloc: u32,
    pub time_block_erase_no_dealloc: u32,
    pub time_crypto_erase_no_dealloc: u32,
    pub time_post_verification_dealloc: u32,
    pub sanitize_state_information: SsiJson,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SstatJson {
    pub media_verification_canceled: u8,
    pub global_erased: u8,
    pub no_cmplted_passes: u8,
    pub status: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SsiJson {
    pub sanitize_state: String,
}

impl SanitizeLogPage {
    pub fn nvme_cli(&self) -> SanitizeLogJson {
        let sos = self.sstat & 7;
        let status = match sos {
            0 => "NVM Subsystem has never been sanitized.",
            1 => "Most Recent Sanitize Command Completed Successfully.",
            2 => "Sanitize in Progress.",
            3 => "Most Recent Sanitize Command Failed.",
            _ => "Most Recent Sanitize Command (No-Deallocate After Sanitize) Completed Successfully.",
        };
        let sans = self.ssi & 0xf;
        let state = match sans {
            0 => "Idle state",
            1 => "Restricted Processing State",
            3 => "Unrestricted Processing State",
            _ => "Reserved",
        };
        SanitizeLogJson {
            sprog: self.sprog,
            sstat: SstatJson {
                media_verification_canceled: 0,
                global_erased: (self.sstat >> 8 & 1) as u8,
                no_cmplted_passes: (self.sstat >> 3 & 0x1f) as u8,
                status: format!("({sos}) {status}"),
            },
            cdw10_info: self.scdw10,
            time_over_write: self.eto,
            time_block_erase: self.etbe,
            time_crypto_erase: self.etce,
            time_over_write_no_dealloc: self.etond,
            time_block_erase_no_dealloc: self.etbend,
            time_crypto_erase_no_dealloc: self.etcend,
            time_post_verification_dealloc: self.etpvds,
            sanitize_state_information: SsiJson { sanitize_state: format!("({sans}) {state}") },
        }
    }

    /// The 512-byte page.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; 512];
        b[0..2].copy_from_slice(&self.sprog.to_le_bytes());
        b[2..4].copy_from_slice(&self.sstat.to_le_bytes());
        let words = [self.scdw10, self.eto, self.etbe, self.etce, self.etond, self.etbend, self.etcend, self.etpvds];
        for (i, w) in words.iter().enumerate() {
            b[4 + 4 * i..8 + 4 * i].copy_from_slice(&w.to_le_bytes());
        }
        b[36] = self.ssi;
        b
    }
}

/// Seconds of an estimate, rounded up (the log's unit); "none" for an unsupported action.
fn estimate_s(supported: bool, ns: Option<u64>) -> u32 {
    match (supported, ns) {
        (true, Some(ns)) => ns.div_ceil(1_000_000_000).min(NO_ESTIMATE as u64 - 1) as u32,
        _ => NO_ESTIMATE,
    }
}

impl Controller {
    /// Whether a sanitize is running at the controller's current time.
    #[inline]
    pub fn sanitizing(&self) -> bool {
        self.st.sanitize.end_ns > self.st.clock_ns
    }

    /// SANITIZE_IN_PROGRESS while a sanitize runs (I/O and most admin commands check it).
    #[inline]
    pub(super) fn check_not_sanitizing(&self) -> Result<(), Error> {
        if self.sanitizing() {
            return self.sanitize_busy();
        }
        Ok(())
    }

    #[cold]
    fn sanitize_busy<T>(&self) -> Result<T, Error> {
        let s = &self.st.sanitize;
        let left = s.end_ns - self.st.clock_ns;
        fail(
            Status::SanitizeInProgress,
            format!(
                "a sanitize (action {}) is running: {:.3} s of {:.3} s left on the drive's clock (ssdtwin nvme sanitize-log)",
                s.scdw10 & 7,
                left as f64 / 1e9,
                (s.end_ns - s.start_ns) as f64 / 1e9
            ),
        )
    }

    /// The media encryption key of namespace `nsid`: an identifier, derived from the image
    /// seed, the NSID and the key's generation (crypto erase and namespace deletion advance
    /// it, so no later namespace ever gets an earlier key back).
    pub fn media_key_id(&self, nsid: u32) -> u64 {
        let generation = self.st.media_keys.get(&nsid).copied().unwrap_or(0) as u64;
        splitmix(self.st.seed ^ splitmix(0x6d65_6b00_0000_0000 | (nsid as u64) << 20 | generation))
    }

    /// Crypto erase of one namespace's key: a new generation.
    pub(super) fn change_media_key(&mut self, nsid: u32) {
        *self.st.media_keys.entry(nsid).or_insert(0) += 1;
    }

    /// The Sanitize command. The whole state change happens here, at once; the operation
    /// then runs for its duration on the controller's clock (see the module doc).
    pub fn sanitize(&mut self, req: SanitizeRequest) -> Result<(), Error> {
        self.check_not_sanitizing()?;
        let caps = sanicap(&self.spec);
        if caps == 0 {
            return fail(Status::InvalidOpcode, format!("{} does not support Sanitize (SANICAP 0)", self.spec.drive.name));
        }
        let (bit, what) = match req.sanact {
            SANACT_EXIT_FAILURE => return Ok(()), // a twin's sanitize never fails: nothing to exit
            SANACT_BLOCK_ERASE => (1, "block erase"),
            SANACT_OVERWRITE => (2, "overwrite"),
            SANACT_CRYPTO_ERASE => (0, "crypto erase"),
            a => {
                return fail(
                    Status::InvalidField,
                    format!("sanact {a}: must be 1 (exit failure mode), 2 (block erase), 3 (overwrite) or 4 (crypto erase)"),
                )
            }
        };
        if caps & (1 << bit) == 0 {
            return fail(
                Status::InvalidField,
                format!("sanact {}: {} does not support {what} (SANICAP {caps:#x})", req.sanact, self.spec.drive.name),
            );
        }
        if req.no_dealloc {
            return fail(Status::InvalidField, "no-dealloc: No-Deallocate After Sanitize is inhibited on this drive (SANICAP.NDI)");
        }
        // A sanitize alters every namespace's data; NVMe 1.4 §8.12 prohibits that on a write
        // protected one, attached or not (the Write Protect state belongs to the namespace).
        if let Some(ns) = self.st.namespaces.values().find(|n| n.write_protect != super::WP_NONE) {
            return fail(
                Status::NamespaceWriteProtected,
                format!(
                    "namespace {} is write protected ({}): a sanitize would erase it",
                    ns.nsid,
                    super::wp_state_clears(ns.write_protect)
                ),
            );
        }
        if req.sanact != SANACT_OVERWRITE && (req.owpass != 0 || req.oipbp || req.ovrpat != 0) {
            return fail(Status::InvalidField, "owpass, oipbp and ovrpat apply to overwrite (sanact 3) only");
        }
        if req.owpass > 15 {
            return fail(Status::InvalidField, format!("owpass {}: must be 0..=15 (0 = 16 passes)", req.owpass));
        }
        let times = sanitize_times(&self.spec, self.st.power_state);
        let duration_ns = match req.sanact {
            SANACT_BLOCK_ERASE => times.map_or(0, |t| t.block_erase_ns),
            SANACT_OVERWRITE => times.map_or(0, |t| t.overwrite_pass_ns * req.passes() as u64),
            _ => times.map_or(0, |t| t.crypto_erase_ns),
        };
        // Drop every mapping first (it may load the maps and fail): nothing below can fail.
        let chunks: Vec<u32> = self.namespaces().flat_map(|n| n.chunks.iter().copied()).collect();
        self.deallocate_chunks(&chunks)?;
        let ids: Vec<u32> = self.st.namespaces.keys().copied().collect();
        for &id in &ids {
            self.repair_media(id, None); // the media is new: nothing injected survives
        }
        let raw = self.spec.geometry().raw_bytes();
        let s = &mut self.st.sanitize;
        match req.sanact {
            SANACT_BLOCK_ERASE => s.erases_per_block += 1,
            SANACT_OVERWRITE => {
                s.erases_per_block += req.passes();
                s.nand_write_bytes += raw * req.passes() as u64;
            }
            _ => {}
        }
        s.count += 1;
        s.scdw10 = req.cdw10();
        s.start_ns = self.st.clock_ns;
        s.end_ns = self.st.clock_ns.saturating_add(duration_ns);
        s.writes_at_start = self.st.smart.host_write_commands;
        if req.sanact == SANACT_CRYPTO_ERASE {
            for id in ids {
                self.change_media_key(id);
            }
        }
        Ok(())
    }

    /// Let the drive run (powered, idle) until the sanitize in progress ends, as a host
    /// polling the Sanitize Status log would; returns the nanoseconds waited.
    pub fn wait_sanitize(&mut self) -> u64 {
        let left = self.st.sanitize.end_ns.saturating_sub(self.st.clock_ns);
        self.advance_clock(left, 0);
        left
    }

    /// Log page 81h at the controller's current time.
    pub fn sanitize_log(&self) -> SanitizeLogPage {
        let s = &self.st.sanitize;
        let caps = sanicap(&self.spec);
        let times = sanitize_times(&self.spec, self.st.power_state);
        let running = self.sanitizing();
        let sanact = (s.scdw10 & 7) as u8;
        let passes = if sanact == SANACT_OVERWRITE {
            SanitizeRequest { owpass: (s.scdw10 >> 4 & 0xf) as u8, ..Default::default() }.passes()
        } else {
            0
        };
        let (sprog, status, done_passes) = if s.count == 0 {
            (0xFFFF, 0u16, 0)
        } else if running {
            let frac = (self.st.clock_ns - s.start_ns) as u128 * 65536 / (s.end_ns - s.start_ns) as u128;
            (frac as u16, 2, (frac * passes as u128 / 65536) as u32)
        } else {
            (0xFFFF, 1, passes)
        };
        let quiet = self.st.smart.host_write_commands == s.writes_at_start;
        let gde = !running && quiet && (s.count > 0 || self.st.smart.host_write_commands == 0);
        SanitizeLogPage {
            sprog,
            sstat: status | ((done_passes.min(31) as u16) << 3) | (gde as u16) << 8,
            scdw10: s.scdw10,
            // Overwrite: with the passes of the most recent overwrite (one when there was none).
            eto: estimate_s(caps & 4 != 0, times.map(|t| t.overwrite_pass_ns * passes.max(1) as u64)),
            etbe: estimate_s(caps & 2 != 0, times.map(|t| t.block_erase_ns)),
            etce: estimate_s(caps & 1 != 0, times.map(|t| t.crypto_erase_ns)),
            etond: NO_ESTIMATE,
            etbend: NO_ESTIMATE,
            etcend: NO_ESTIMATE,
            etpvds: NO_ESTIMATE,
            ssi: if running {
                if s.scdw10 & 8 != 0 {
                    3
                } else {
                    1
                }
            } else {
                0
            },
        }
    }
}

#[cfg(test)]
#[path = "sanitize_tests.rs"]
mod tests;
