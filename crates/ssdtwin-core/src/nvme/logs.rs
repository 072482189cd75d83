//! Log pages: SMART / Health Information (02h) and the vendor WAF log, the Error
//! Information log (01h), the Firmware Slot Information log (03h) and Get Log Page's raw
//! bytes (`ssdtwin nvme get-log`), with nvme-cli's JSON field names.
//!
//! Error log entries come from real events: I/O commands the controller completed with an
//! error status (a read past the namespace, a write to a write-protected namespace, I/O
//! during a sanitize). A drive that never failed a command has an empty log.

use serde::{Deserialize, Serialize};

use super::is_zero_u64;
use super::status::fail;
use super::{Controller, ControllerView, Error, Status};

/// Entries the log keeps (Identify Controller ELPE + 1); the oldest fall out.
pub const ERROR_LOG_ENTRIES: usize = 64;

/// NVM command set opcodes named in error entries.
pub const OPC_WRITE: u8 = 0x01;
pub const OPC_READ: u8 = 0x02;
pub const OPC_WRITE_ZEROES: u8 = 0x08;
pub const OPC_DSM: u8 = 0x09;

/// One Error Information entry, fields named as nvme-cli's `error-log -o json` prints them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorLogEntry {
    pub error_count: u64,
    pub sqid: u16,
    pub cmdid: u16,
    pub status_field: u16,
    pub phase_tag: u8,
    pub parm_error_location: u16,
    pub lba: u64,
    pub nsid: u32,
    pub vs: u8,
    pub trtype: u8,
    pub csi: u8,
    pub opcode: u8,
    pub cs: u64,
    pub trtype_spec_info: u16,
    pub log_page_version: u8,
}

impl ErrorLogEntry {
    fn to_bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0..8].copy_from_slice(&self.error_count.to_le_bytes());
        b[8..10].copy_from_slice(&self.sqid.to_le_bytes());
        b[10..12].copy_from_slice(&self.cmdid.to_le_bytes());
        b[12..14].copy_from_slice(&(self.status_field << 1 | self.phase_tag as u16).to_le_bytes());
        b[14..16].copy_from_slice(&self.parm_error_location.to_le_bytes());
        b[16..24].copy_from_slice(&self.lba.to_le_bytes());
        b[24..28].copy_from_slice(&self.nsid.to_le_bytes());
        b[28] = self.vs;
        b[29] = self.trtype;
        b[30] = self.csi;
        b[31] = self.opcode;
        b[32..40].copy_from_slice(&self.cs.to_le_bytes());
        b[40..42].copy_from_slice(&self.trtype_spec_info.to_le_bytes());
        b[63] = self.log_page_version;
        b
    }
}

/// A new entry for a command that completed with `status`; `count` is the drive's error
/// count after this error (unique, increasing).
pub fn entry(count: u64, status: Status, opcode: u8, nsid: u32, lba: u64, cmdid: u16) -> ErrorLogEntry {
    ErrorLogEntry {
        error_count: count,
        sqid: 1,
        cmdid,
        status_field: status.field(),
        phase_tag: 0,
        parm_error_location: 0xFFFF, // not specific to a field
        lba,
        nsid,
        opcode,
        ..ErrorLogEntry::default()
    }
}

/// Log pages Get Log Page returns raw: 01h, 02h, 03h, 81h.
pub const RAW_LOG_IDS: [u8; 4] = [0x01, 0x02, 0x03, 0x81];

/// The longest Get Log Page transfer the twin returns (1 MiB, the CLI's `--log-len` limit):
/// every page it keeps is far shorter, and a longer one is only zeros to allocate.
pub const MAX_LOG_PAGE_BYTES: u32 = 1 << 20;

impl ControllerView {
    /// Get Log Page `lid`: the page's first `len` bytes (zero past its end, as a transfer
    /// longer than the page reads). INVALID_LOG_PAGE for a page the twin does not keep;
    /// INVALID_FIELD for a length above [`MAX_LOG_PAGE_BYTES`].
    pub fn log_page(&self, lid: u8, len: u32) -> Result<Vec<u8>, Error> {
        if len > MAX_LOG_PAGE_BYTES {
            return fail(
                Status::InvalidField,
                format!("log page length {len}: must be 0..={MAX_LOG_PAGE_BYTES} bytes (1 MiB; the pages kept are at most a few KiB)"),
            );
        }
        let mut b = match lid {
            0x01 => self.error_log.iter().flat_map(|e| e.to_bytes()).collect(),
            0x02 => smart_bytes(&self.smart_log),
            0x03 => fw_slot_bytes(&self.id_ctrl.fr),
            0x81 => self.sanitize_log.to_bytes(),
            _ => {
                let ids = RAW_LOG_IDS.iter().map(|l| format!("{l:#04x}")).collect::<Vec<_>>().join(", ");
                return fail(Status::InvalidLogPage, format!("log page {lid:#04x} is not kept by the twin (raw pages: {ids})"));
            }
        };
        b.resize(len as usize, 0);
        Ok(b)
    }
}

fn smart_bytes(s: &super::SmartLog) -> Vec<u8> {
    let mut b = vec![0u8; 512];
    b[0] = s.critical_warning;
    b[1..3].copy_from_slice(&s.temperature_k.to_le_bytes());
    b[3] = s.avail_spare;
    b[4] = s.spare_thresh;
    b[5] = s.percent_used;
    b[6] = s.endurance_grp_critical_warning_summary;
    let wide = [
        s.data_units_read,
        s.data_units_written,
        s.host_read_commands,
        s.host_write_commands,
        s.controller_busy_time,
        s.power_cycles,
        s.power_on_hours,
        s.unsafe_shutdowns,
        s.media_errors,
        s.num_err_log_entries,
    ];
    for (i, v) in wide.iter().enumerate() {
        b[32 + 16 * i..48 + 16 * i].copy_from_slice(&(*v as u128).to_le_bytes());
    }
    b[192..196].copy_from_slice(&s.warning_temp_time.to_le_bytes());
    b[196..200].copy_from_slice(&s.critical_comp_time.to_le_bytes());
    let thermal = [s.thm_temp1_trans_count, s.thm_temp2_trans_count, s.thm_temp1_total_time, s.thm_temp2_total_time];
    for (i, v) in thermal.iter().enumerate() {
        b[216 + 4 * i..220 + 4 * i].copy_from_slice(&v.to_le_bytes());
    }
    b
}

/// Firmware Slot Information: slot 1 active, holding the preset's firmware revision.
fn fw_slot_bytes(fr: &str) -> Vec<u8> {
    let mut b = vec![0u8; 512];
    b[0] = 0x01;
    let rev = fr.as_bytes();
    let n = rev.len().min(8);
    b[8..8 + n].copy_from_slice(&rev[..n]);
    b[8 + n..16].fill(b' ');
    b
}

/// SMART / Health Information (log 02h), with nvme-cli's JSON field names.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SmartLog {
    pub critical_warning: u8,
    #[serde(rename = "temperature")]
    pub temperature_k: u16,
    pub avail_spare: u8,
    pub spare_thresh: u8,
    pub percent_used: u8,
    pub endurance_grp_critical_warning_summary: u8,
    pub data_units_read: u64,
    pub data_units_written: u64,
    pub host_read_commands: u64,
    pub host_write_commands: u64,
    pub controller_busy_time: u64,
    pub power_cycles: u64,
    pub power_on_hours: u64,
    pub unsafe_shutdowns: u64,
    pub media_errors: u64,
    pub num_err_log_entries: u64,
    /// Minutes at or above WCTEMP and at or above CCTEMP.
    pub warning_temp_time: u32,
    pub critical_comp_time: u32,
    /// Host controlled thermal management: transitions to lower power for thermal
    /// management temperature 1 and 2, and seconds spent there (no HCTM: 0). Bytes 216-231
    /// of the page; temperature sensors 1-8 (bytes 200-215) are not reported, so nvme-cli
    /// prints no temperature_sensor_N key.
    #[serde(default)]
    pub thm_temp1_trans_count: u32,
    #[serde(default)]
    pub thm_temp2_trans_count: u32,
    #[serde(default)]
    pub thm_temp1_total_time: u32,
    #[serde(default)]
    pub thm_temp2_total_time: u32,
}

/// Intel additional SMART attributes 0xF4/0xF5: sectors written / 65,536 (32 MiB units).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct IntelSmartAdd {
    pub nand_bytes_written_sectors: u64,
    pub host_bytes_written_sectors: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// ssdtwin's vendor log: exact host and NAND traffic, GC and wear.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct VendorLog {
    pub host_write_bytes: u64,
    pub host_read_bytes: u64,
    pub nand_write_bytes: u64,
    pub nand_write_host_bytes: u64,
    pub nand_write_gc_bytes: u64,
    /// Die-parity programs (drives with die parity only).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub nand_write_parity_bytes: u64,
    pub nand_read_bytes: u64,
    pub nand_read_rmw_bytes: u64,
    pub nand_read_gc_bytes: u64,
    pub waf: f64,
    pub rmw_ius: u64,
    pub buffer_merges: u64,
    pub trimmed_ius: u64,
    pub gc_victims: u64,
    pub foreground_gc_victims: u64,
    pub superblock_erases: u64,
    pub erase_count_min: u32,
    pub erase_count_max: u32,
    pub erase_count_avg: f64,
    pub pe_cycles_rated: u32,
    pub superblocks: u32,
    pub free_superblocks: u32,
    pub superblock_bytes: u64,
    pub valid_bytes: u64,
    pub buffered_bytes: u64,
    pub iu_bytes: u32,
    /// Mean superblocks kept out of service by GC (free pool, open pages, relocated copies).
    pub gc_overhead_superblocks: f64,
    /// Raw sums behind the mean (to average over a window: difference two logs).
    pub gc_overhead_samples: u64,
    pub gc_overhead_sample_ius: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intel_smart_add: Option<IntelSmartAdd>,
    /// Host bytes written to / read from DRAM namespaces: included in `host_write_bytes` /
    /// `host_read_bytes`, never in the NAND counters.
    #[serde(default)]
    pub dram_write_bytes: u64,
    #[serde(default)]
    pub dram_read_bytes: u64,
    /// DRAM-namespace bytes dumped to the reserved NAND area at power-off (not user-data
    /// NAND writes: not in `nand_write_bytes` nor the WAF).
    #[serde(default)]
    pub dram_flush_bytes: u64,
    /// NAND bytes programmed by sanitize overwrite passes (in `nand_write_bytes`, not in
    /// the WAF; shown once there are any).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub nand_write_sanitize_bytes: u64,
}

impl Controller {
    pub fn smart_log(&self) -> SmartLog {
        let s = &self.st.smart;
        let sbs = self.ftl_state().superblocks();
        let total_erases: u64 = sbs.iter().map(|b| b.erase_count as u64).sum();
        // Sanitize erases every block alike (kept outside the FTL: sanitize.rs).
        let avg = total_erases as f64 / sbs.len() as f64 + self.st.sanitize.erases_per_block as f64;
        let pe = self.spec.nand.pe_cycles.value as f64;
        let pct = ((avg / pe) * 100.0).floor().min(255.0) as u8;
        SmartLog {
            critical_warning: (self.temperature_warning() as u8) << 1,
            temperature_k: super::features::COMPOSITE_TEMPERATURE_K,
            avail_spare: 100,
            spare_thresh: 10,
            percent_used: pct,
            endurance_grp_critical_warning_summary: 0,
            data_units_read: s.data_units_read_512.div_ceil(1000),
            data_units_written: s.data_units_written_512.div_ceil(1000),
            host_read_commands: s.host_read_commands,
            host_write_commands: s.host_write_commands,
            controller_busy_time: s.controller_busy_ns / 60_000_000_000,
            power_cycles: s.power_cycles,
            power_on_hours: self.st.clock_ns / 3_600_000_000_000,
            unsafe_shutdowns: s.unsafe_shutdowns,
            media_errors: s.media_errors,
            num_err_log_entries: s.error_log_entries,
            warning_temp_time: 0,
            critical_comp_time: 0,
            thm_temp1_trans_count: 0,
            thm_temp2_trans_count: 0,
            thm_temp1_total_time: 0,
            thm_temp2_total_time: 0,
        }
    }

    pub fn vendor_log(&self) -> VendorLog {
        let c = self.ftl_counters();
        let st = self.ftl_state();
        let iu = self.cfg.iu_bytes as u64;
        let nand_write_host = c.host_programmed_ius * iu;
        let nand_write_gc = c.gc_programmed_ius * iu;
        let nand_write_parity = c.parity_programmed_ius * iu;
        let sanitized = &self.st.sanitize;
        let nand_write = nand_write_host + nand_write_gc + nand_write_parity + sanitized.nand_write_bytes;
        let sbs = st.superblocks();
        let ec: Vec<u32> = sbs.iter().map(|b| b.erase_count + sanitized.erases_per_block).collect();
        let valid: u64 = sbs.iter().map(|b| b.valid as u64).sum();
        // DRAM-namespace traffic is host traffic that never reaches NAND.
        let smart = &self.st.smart;
        let host_write = c.host_write_bytes + smart.dram_write_bytes;
        let intel = self.spec.logs.intel_smart_add.then_some(IntelSmartAdd {
            nand_bytes_written_sectors: nand_write / 512 / 65536,
            host_bytes_written_sectors: host_write / 512 / 65536,
        });
        VendorLog {
            host_write_bytes: host_write,
            host_read_bytes: c.host_read_bytes + smart.dram_read_bytes,
            nand_write_bytes: nand_write,
            nand_write_host_bytes: nand_write_host,
            nand_write_gc_bytes: nand_write_gc,
            nand_write_parity_bytes: nand_write_parity,
            nand_read_bytes: c.nand_read_host_bytes + c.nand_read_rmw_bytes + c.nand_read_gc_bytes,
            nand_read_rmw_bytes: c.nand_read_rmw_bytes,
            nand_read_gc_bytes: c.nand_read_gc_bytes,
            // Write amplification of host data: sanitize overwrites are no host data's copies.
            waf: if host_write > 0 { (nand_write_host + nand_write_gc + nand_write_parity) as f64 / host_write as f64 } else { 0.0 },
            rmw_ius: c.rmw_ius,
            buffer_merges: c.buffer_merges,
            trimmed_ius: c.host_trim_ius,
            gc_victims: c.gc_victims,
            foreground_gc_victims: c.foreground_gc_victims,
            superblock_erases: c.erases + sbs.len() as u64 * sanitized.erases_per_block as u64,
            erase_count_min: ec.iter().copied().min().unwrap_or(0),
            erase_count_max: ec.iter().copied().max().unwrap_or(0),
            erase_count_avg: ec.iter().map(|&e| e as f64).sum::<f64>() / ec.len().max(1) as f64,
            pe_cycles_rated: self.spec.nand.pe_cycles.value,
            superblocks: sbs.len() as u32,
            free_superblocks: st.free_superblocks() as u32,
            superblock_bytes: self.spec.geometry().superblock_bytes,
            valid_bytes: valid * iu,
            buffered_bytes: st.buffered_ius() as u64 * iu,
            iu_bytes: self.cfg.iu_bytes,
            gc_overhead_superblocks: st.overhead_superblocks(self.cfg.ius_per_sb),
            gc_overhead_samples: c.overhead_samples,
            gc_overhead_sample_ius: c.overhead_sample_ius as f64,
            intel_smart_add: intel,
            dram_write_bytes: smart.dram_write_bytes,
            dram_read_bytes: smart.dram_read_bytes,
            dram_flush_bytes: smart.dram_flush_bytes,
            nand_write_sanitize_bytes: sanitized.nand_write_bytes,
        }
    }
}
