//! The Error Information log (01h), the Firmware Slot Information log (03h) and Get Log
//! Page's raw bytes (`ssdtwin nvme get-log`), with nvme-cli's JSON field names.
//!
//! Error log entries come from real events: I/O commands the controller completed with an
//! error status (a read past the namespace, a write to a write-protected namespace, I/O
//! during a sanitize). A drive that never failed a command has an empty log.

use serde::{Deserialize, Serialize};

use super::status::fail;
use super::{ControllerView, Error, Status};

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

impl ControllerView {
    /// Get Log Page `lid`: the page's first `len` bytes (zero past its end, as a transfer
    /// longer than the page reads). INVALID_LOG_PAGE for a page the twin does not keep.
    pub fn log_page(&self, lid: u8, len: u32) -> Result<Vec<u8>, Error> {
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
