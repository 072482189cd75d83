//! Predictable Latency Mode (NVMe 1.4 IO Determinism, docs/tenants.md "Predictable
//! latency"): features 13h (enable, per NVM Set) and 14h (window select), the Predictable
//! Latency Per NVM Set log (0Ah) and the event aggregate log (0Bh), with nvme-cli's JSON
//! names.
//!
//! The model: in a deterministic window (DTWIN) the controller holds the set's background
//! work (the FTL partition's paced and idle GC: [`GcMode::deferred`]), so host reads of the
//! set meet host programs only; host writes eat the free space the set kept in reserve. The
//! window ends by itself (an event, bit 14 of the log's event type) when that space falls to
//! the floor the paced GC needs to recover without foreground GC, or when DTWIN Time
//! Maximum has passed. In the non-deterministic window (NDWIN) GC runs again, steered to the
//! normal target plus the reserve (so up to twice its normal rate while below it: it
//! catches up), and the host may not ask for a DTWIN before the NDWIN minimum, which grows
//! with what the last DTWIN consumed. The window's time is the drive's virtual clock: the
//! engine passes each command's time ([`Controller::plm_tick`]); the FTL never sees it.

use serde::{Deserialize, Serialize};

use super::status::fail;
use super::{Controller, ControllerState, Error, Status};
use crate::ftl::{FtlConfig, FtlState, GcMode, DEFERRED_GC_FLOOR_SBS};
use crate::spec::{DriveSpec, PlmSpec};

/// Window Select of feature 14h and the log's status: deterministic, non-deterministic.
pub const DTWIN: u8 = 1;
pub const NDWIN: u8 = 2;
/// Event type bit 14: the controller left the DTWIN by itself because a typical or
/// maximum value (the write budget, DTWIN Time Maximum) was exceeded.
pub const EVENT_DTWIN_EXCEEDED: u16 = 1 << 14;

/// The persistent Predictable Latency Mode state of one NVM Set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlmSet {
    pub enabled: bool,
    /// DTWIN or NDWIN (0 while not enabled).
    pub window: u8,
    /// Drive clock (ns) when the current window began.
    pub since_ns: u64,
    /// Events not yet cleared (bit 14: the controller ended a DTWIN); a host window change
    /// clears them.
    pub event_type: u16,
    /// Host-writable IUs of the set when the current DTWIN began.
    pub start_avail_ius: u64,
    /// The set's host bytes written when the current window began (the DTWIN's write rate).
    pub start_host_write_bytes: u64,
    /// IUs of reserve the last DTWIN consumed (the NDWIN minimum after it).
    pub consumed_ius: u64,
    /// Why the controller ended the last DTWIN ("free space", "time"), empty if the host did.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ended_by: String,
    /// How long the last DTWIN lasted (ns).
    #[serde(default)]
    pub last_dtwin_ns: u64,
}

/// Predictable Latency Per NVM Set log (0Ah), nvme-cli `predictable-lat-log -o json` names.
/// Times in milliseconds; writes in units of the set's Optimal Write Size (id-nvmset).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PredLatLog {
    pub nvmset_id: u16,
    /// 0 not enabled, 1 deterministic window, 2 non-deterministic window.
    pub status: u8,
    pub event_type: u16,
    pub dtwin_reads_typical: u64,
    pub dtwin_writes_typical: u64,
    pub dtwin_time_maximum: u64,
    pub ndwin_time_minimum_high: u64,
    pub ndwin_time_minimum_low: u64,
    pub dtwin_reads_estimate: u64,
    pub dtwin_writes_estimate: u64,
    pub dtwin_time_estimate: u64,
}

/// Predictable Latency Event Aggregate log (0Bh): the sets with events, nvme-cli
/// `pred-lat-event-agg-log -o json` names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PredLatEventAgg {
    pub num_entries_avail: u64,
    pub list_of_entries: Vec<AggEntry>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AggEntry {
    pub entry: u16,
}

/// The window budget of a set, in IUs, from the preset and geometry.
struct Budget {
    per_sb: u64,
    /// FTL partitions of the set: each keeps its own free superblocks (GC target, floor).
    parts: u64,
    reserve_ius: u64,
    floor_ius: u64,
}

fn budget(spec: &DriveSpec, cfg: &FtlConfig, plm: &PlmSpec, set: u32) -> Budget {
    let per_sb = cfg.ius_per_sb as u64;
    let user_ius = super::sets::set_capacity(spec, cfg, set).div_ceil(cfg.iu_bytes as u64);
    let spare = (cfg.sbs_per_set as u64 * per_sb).saturating_sub(user_ius);
    let parts = cfg.parts_per_set as u64;
    let reserve_ius = spare * plm.reserve_spare_pct.value as u64 / 100;
    Budget { per_sb, parts, reserve_ius, floor_ius: DEFERRED_GC_FLOOR_SBS * per_sb * parts }
}

/// The FTL's GC mode for a set in `plm` state.
fn gc_mode_for(spec: &DriveSpec, cfg: &FtlConfig, set: u32, p: &PlmSet) -> GcMode {
    match spec.nvm_sets.as_ref().and_then(|s| s.plm.as_ref()) {
        Some(plm) if p.enabled => GcMode { deferred: p.window == DTWIN, reserve_ius: budget(spec, cfg, plm, set).reserve_ius as u32 },
        _ => GcMode::default(),
    }
}

/// Saved PLM state: none, or one entry per set of a drive whose preset has PLM, each with
/// its FTL partition in the matching GC mode.
pub(super) fn check_plm_state(spec: &DriveSpec, cfg: &FtlConfig, st: &ControllerState, ftl: &FtlState) -> Result<(), String> {
    if st.plm.is_empty() {
        if let Some(s) = (0..ftl.sets()).find(|&s| !ftl.gc_mode(s).is_normal()) {
            return Err(format!("NVM Set {}'s GC is held or reserved without Predictable Latency Mode", s + 1));
        }
        return Ok(());
    }
    if spec.nvm_sets.as_ref().and_then(|s| s.plm.as_ref()).is_none() || st.plm.len() != cfg.sets as usize {
        return Err(format!("{} Predictable Latency Mode entries recorded for a drive with {} sets", st.plm.len(), cfg.sets));
    }
    for (set, p) in st.plm.iter().enumerate() {
        if p.enabled != (p.window == DTWIN || p.window == NDWIN) {
            return Err(format!("NVM Set {}: Predictable Latency Mode enabled={} in window {}", set + 1, p.enabled, p.window));
        }
        if ftl.gc_mode(set as u32) != gc_mode_for(spec, cfg, set as u32, p) {
            return Err(format!("NVM Set {}: the FTL's GC mode does not match window {}", set + 1, p.window));
        }
    }
    Ok(())
}

fn ms(ns: u64) -> u64 {
    ns / 1_000_000
}

impl Controller {
    /// The preset's Predictable Latency Mode, or the status a host gets without it.
    fn plm_spec(&self) -> Result<&PlmSpec, Error> {
        let model = &self.spec.drive.model_number.value;
        if !self.has_nvm_sets() {
            return fail(
                Status::InvalidField,
                format!("{model} was built without NVM Sets: Predictable Latency Mode works per set (ssdtwin create --nvm-sets)"),
            );
        }
        match self.spec.nvm_sets.as_ref().and_then(|s| s.plm.as_ref()) {
            Some(p) => Ok(p),
            None => {
                fail(Status::InvalidField, format!("{model} does not support Predictable Latency Mode (its preset has no [nvm_sets.plm])"))
            }
        }
    }

    /// The 0-based set of NVMSETID `nvmsetid`, on a drive with PLM.
    fn plm_set(&self, nvmsetid: u16) -> Result<u32, Error> {
        self.plm_spec()?;
        let k = self.cfg.sets;
        if nvmsetid == 0 || nvmsetid as u32 > k {
            return fail(Status::InvalidField, format!("NVM Set {nvmsetid} does not exist: this drive has NVM Sets 1..={k}"));
        }
        Ok(nvmsetid as u32 - 1)
    }

    /// The drive's current virtual time: the clock, or later during a timed run.
    fn plm_now(&self) -> u64 {
        self.plm_now_ns.max(self.st.clock_ns)
    }

    /// Whether any set is in Predictable Latency Mode (the engine's per-command test).
    #[inline]
    pub fn plm_active(&self) -> bool {
        !self.st.plm.is_empty() && self.st.plm.iter().any(|p| p.enabled)
    }

    fn set_window(&mut self, set: u32, p: PlmSet) {
        let mode = gc_mode_for(&self.spec, &self.cfg, set, &p);
        self.ftl_state_mut().set_gc_mode(set, mode);
        self.st.plm[set as usize] = p;
    }

    /// Host-writable IUs of set `set` now.
    fn plm_avail(&self, set: u32) -> u64 {
        self.ftl_state().set_host_avail_ius(set, self.cfg.ius_per_sb)
    }

    /// End set `set`'s DTWIN (by the controller when `why` is not empty) and enter NDWIN.
    fn end_dtwin(&mut self, set: u32, why: &str) {
        let mut p = self.st.plm[set as usize].clone();
        p.consumed_ius = p.start_avail_ius.saturating_sub(self.plm_avail(set));
        p.window = NDWIN;
        p.last_dtwin_ns = self.plm_now().saturating_sub(p.since_ns);
        p.since_ns = self.plm_now();
        p.ended_by = why.to_string();
        if !why.is_empty() {
            p.event_type |= EVENT_DTWIN_EXCEEDED;
        }
        self.set_window(set, p);
    }

    /// The drive's virtual time is `now_ns` (the engine, before each command of a timed
    /// run; the clock's advance): a DTWIN past DTWIN Time Maximum ends.
    pub fn plm_tick(&mut self, now_ns: u64) {
        self.plm_now_ns = self.plm_now_ns.max(now_ns);
        let Some(tmax) = self.spec.nvm_sets.as_ref().and_then(|s| s.plm.as_ref()).map(|p| p.dtwin_time_max_ms.value * 1_000_000) else {
            return;
        };
        let now = self.plm_now();
        for set in 0..self.st.plm.len() as u32 {
            let p = &self.st.plm[set as usize];
            if p.window == DTWIN && now.saturating_sub(p.since_ns) >= tmax {
                self.end_dtwin(set, "time");
            }
        }
    }

    /// After a host write to set `set`: a DTWIN whose free space reached the floor ends.
    #[inline]
    pub(super) fn plm_after_write(&mut self, set: u32) {
        if self.st.plm.get(set as usize).is_some_and(|p| p.window == DTWIN) {
            let Ok(plm) = self.plm_spec() else { return };
            let floor = budget(&self.spec, &self.cfg, plm, set).floor_ius;
            if self.plm_avail(set) <= floor {
                self.end_dtwin(set, "free space");
            }
        }
    }

    /// Set Features 13h: Predictable Latency Mode Config of NVM Set `nvmsetid` (CDW11),
    /// Predictable Latency Enable = bit 0 of CDW12. Enabling puts the set in NDWIN.
    pub fn set_plm_config(&mut self, nvmsetid: u16, cdw12: u32) -> Result<(), Error> {
        let set = self.plm_set(nvmsetid)?;
        if cdw12 & !1 != 0 {
            return fail(Status::InvalidField, format!("CDW12 {cdw12:#x}: only bit 0 (Predictable Latency Enable) is defined"));
        }
        if self.st.plm.is_empty() {
            self.st.plm = vec![PlmSet::default(); self.cfg.sets as usize];
        }
        let enable = cdw12 & 1 == 1;
        if enable == self.st.plm[set as usize].enabled {
            return Ok(());
        }
        let p =
            if enable { PlmSet { enabled: true, window: NDWIN, since_ns: self.plm_now(), ..PlmSet::default() } } else { PlmSet::default() };
        self.set_window(set, p);
        if !self.plm_active() {
            self.st.plm.clear(); // no set in PLM: the state of a drive that never used it
        }
        Ok(())
    }

    /// A power cycle: features 13h and 14h are not saveable (NVMe 1.4 Figure 271: not
    /// persistent across power cycle and reset), so they come back at their defaults,
    /// Predictable Latency Enable cleared, and every set leaves its window (its GC no longer
    /// held or steered to the reserve): the state of a drive that never used PLM.
    pub(super) fn plm_power_cycle(&mut self) {
        for set in 0..self.st.plm.len() as u32 {
            self.set_window(set, PlmSet::default());
        }
        self.st.plm.clear();
    }

    /// The NDWIN minimum (ns) before set `set` may enter a DTWIN again: NDWIN Time Minimum
    /// Low plus the time to rebuild what the last DTWIN consumed.
    fn ndwin_min_ns(&self, set: u32, plm: &PlmSpec) -> u64 {
        plm.ndwin_time_min_ms.value * 1_000_000 + self.rebuild_ns(set, self.st.plm[set as usize].consumed_ius)
    }

    /// Set Features 14h: Predictable Latency Mode Window of NVM Set `nvmsetid`, Window
    /// Select = CDW12 bits 2:0 (1 DTWIN, 2 NDWIN).
    pub fn set_plm_window(&mut self, nvmsetid: u16, cdw12: u32) -> Result<(), Error> {
        let set = self.plm_set(nvmsetid)?;
        let plm = self.plm_spec()?.clone();
        let wsel = (cdw12 & 7) as u8;
        if wsel != DTWIN && wsel != NDWIN {
            return fail(Status::InvalidField, format!("window select {wsel}: must be 1 (deterministic) or 2 (non-deterministic)"));
        }
        let Some(p) = self.st.plm.get(set as usize).filter(|p| p.enabled).cloned() else {
            return fail(
                Status::CommandSequenceError,
                format!("NVM Set {nvmsetid} is not in Predictable Latency Mode: enable it first (set-feature -f 0x13 -V {nvmsetid} -c 1)"),
            );
        };
        if wsel == p.window {
            return Ok(());
        }
        let now = self.plm_now();
        if wsel == NDWIN {
            self.end_dtwin(set, "");
            self.st.plm[set as usize].event_type = 0;
            return Ok(());
        }
        let (min_ns, spent) = (self.ndwin_min_ns(set, &plm), now.saturating_sub(p.since_ns));
        if spent < min_ns {
            return fail(
                Status::CommandSequenceError,
                format!(
                    "NVM Set {nvmsetid} has been in the non-deterministic window for {} ms of its minimum {} ms: a deterministic window is refused until then",
                    ms(spent),
                    ms(min_ns).max(1)
                ),
            );
        }
        let avail = self.plm_avail(set);
        let floor = budget(&self.spec, &self.cfg, &plm, set).floor_ius;
        if avail <= floor {
            return fail(
                Status::CommandSequenceError,
                format!("NVM Set {nvmsetid}'s free space is at the floor of a deterministic window: let GC catch up in the non-deterministic window first"),
            );
        }
        let host_bytes = self.ftl_state().set_counters(set).host_write_bytes;
        let q = PlmSet {
            enabled: true,
            window: DTWIN,
            since_ns: now,
            event_type: 0,
            start_avail_ius: avail,
            start_host_write_bytes: host_bytes,
            consumed_ius: p.consumed_ius,
            ended_by: String::new(),
            last_dtwin_ns: p.last_dtwin_ns,
        };
        self.set_window(set, q);
        Ok(())
    }

    /// Get Features 13h / 14h of NVM Set `nvmsetid`: Predictable Latency Enable, or the
    /// current window (1 DTWIN, 2 NDWIN; 0 while not enabled).
    pub fn get_plm_feature(&self, fid: u8, nvmsetid: u16) -> Result<u32, Error> {
        let set = self.plm_set(nvmsetid)?;
        let p = self.st.plm.get(set as usize).cloned().unwrap_or_default();
        Ok(if fid == 0x13 { p.enabled as u32 } else { p.window as u32 })
    }

    /// NAND time (ns) of set `set` to free `ius` IUs by GC with the host idle: the copies of
    /// the valid data in the best victims (greedy), at the set's program bandwidth, plus
    /// their erases.
    fn rebuild_ns(&self, set: u32, ius: u64) -> u64 {
        let Some(t) = &self.spec.timing else { return 0 };
        if ius == 0 {
            return 0;
        }
        let per = self.cfg.ius_per_sb as u64;
        let sbs = &self.ftl_state().superblocks()[self.cfg.set_superblocks(set).start as usize..self.cfg.set_superblocks(set).end as usize];
        let mut valid: Vec<u64> = sbs.iter().filter(|b| b.state == crate::ftl::SbState::Closed).map(|b| b.valid as u64).collect();
        valid.sort_unstable();
        let need = ius.div_ceil(per).max(1) as usize;
        let victims = &valid[..need.min(valid.len())];
        if victims.is_empty() {
            return 0;
        }
        let v = victims.iter().sum::<u64>() as f64 / victims.len() as f64;
        let free_per_victim = (per as f64 - v).max(1.0);
        let copies = ius as f64 * v / free_per_victim;
        let g = self.spec.geometry();
        let set_prog_bytes_per_s = g.dies_per_set() as f64 * g.program_unit_bytes as f64 * 1e9 / t.t_prog_ns.value.max(1) as f64;
        let erases = (ius as f64 / free_per_victim).ceil();
        (copies * self.cfg.iu_bytes as f64 / set_prog_bytes_per_s * 1e9 + erases * t.t_erase_ns.value as f64) as u64
    }

    /// 4 KiB random reads per second the set's dies serve (every plane reading).
    fn set_read_iops(&self) -> f64 {
        let Some(t) = &self.spec.timing else { return 0.0 };
        let g = self.spec.geometry();
        let dies = (g.dies_per_set() * g.planes_per_die) as f64 * 1e9 / t.t_read_ns.value.max(1) as f64;
        dies.min(t.ctrl_max_iops.value as f64 / self.cfg.sets as f64)
    }

    /// Get Log Page 0Ah: Predictable Latency Per NVM Set of `nvmsetid`.
    pub fn pred_lat_log(&self, nvmsetid: u16) -> Result<PredLatLog, Error> {
        let set = self.plm_set(nvmsetid)?;
        let plm = self.plm_spec()?;
        let b = budget(&self.spec, &self.cfg, plm, set);
        let p = self.st.plm.get(set as usize).cloned().unwrap_or_default();
        let ows = self.spec.geometry().program_unit_bytes;
        let iu = self.cfg.iu_bytes as u64;
        let to_ows = |ius: u64| ius * iu / ows;
        // The paced GC's target in NDWIN less the floor: what a DTWIN entered at steady state gets.
        let typical_ius = (crate::ftl::GC_TARGET_SBS_X2 * b.per_sb * b.parts / 2 + b.reserve_ius).saturating_sub(b.floor_ius);
        let tmax_ns = plm.dtwin_time_max_ms.value * 1_000_000;
        let read_iops = self.set_read_iops();
        let low = plm.ndwin_time_min_ms.value;
        let high = low + ms(self.rebuild_ns(set, typical_ius));
        let avail_above = self.plm_avail(set).saturating_sub(b.floor_ius);
        let now = self.plm_now();
        let (reads_e, writes_e, time_e) = match p.window {
            DTWIN => {
                let elapsed = now.saturating_sub(p.since_ns);
                let mut left = tmax_ns.saturating_sub(elapsed);
                let written = self.ftl_state().set_counters(set).host_write_bytes - p.start_host_write_bytes;
                if written > 0 && elapsed > 0 {
                    // At the window's write rate so far, the space left lasts this long.
                    let by_space = (avail_above * iu) as f64 / (written as f64 / elapsed as f64);
                    left = left.min(by_space as u64);
                }
                ((read_iops * left as f64 / 1e9) as u64, to_ows(avail_above), ms(left))
            }
            NDWIN => ((read_iops * tmax_ns as f64 / 1e9) as u64, to_ows(avail_above), ms(tmax_ns)),
            _ => (0, 0, 0),
        };
        Ok(PredLatLog {
            nvmset_id: nvmsetid,
            status: p.window,
            event_type: p.event_type,
            dtwin_reads_typical: (read_iops * tmax_ns as f64 / 1e9) as u64,
            dtwin_writes_typical: to_ows(typical_ius),
            dtwin_time_maximum: plm.dtwin_time_max_ms.value,
            ndwin_time_minimum_high: high,
            ndwin_time_minimum_low: low,
            dtwin_reads_estimate: reads_e,
            dtwin_writes_estimate: writes_e,
            dtwin_time_estimate: time_e,
        })
    }

    /// Get Log Page 0Bh: the sets with Predictable Latency events.
    pub fn pred_lat_event_agg(&self) -> Result<PredLatEventAgg, Error> {
        self.plm_spec()?;
        let list_of_entries: Vec<AggEntry> =
            self.st.plm.iter().enumerate().filter(|(_, p)| p.event_type != 0).map(|(s, _)| AggEntry { entry: s as u16 + 1 }).collect();
        Ok(PredLatEventAgg { num_entries_avail: list_of_entries.len() as u64, list_of_entries })
    }

    /// The PLM state of every set (empty: never enabled), for reports and tests.
    pub fn plm_sets(&self) -> &[PlmSet] {
        &self.st.plm
    }
}

impl Controller {
    /// Set Features with both command dwords: 13h and 14h take the NVM Set in CDW11 and
    /// their value in CDW12; every other feature its value in CDW11 ([`Controller::set_feature`]).
    pub fn set_feature_dw(&mut self, fid: u8, nsid: super::NsId, cdw11: u32, cdw12: u32) -> Result<(), Error> {
        match fid {
            0x13 | 0x14 => {
                let set = nvmsetid_of_cdw11(cdw11)?;
                if fid == 0x13 {
                    self.set_plm_config(set, cdw12)
                } else {
                    self.set_plm_window(set, cdw12)
                }
            }
            _ => self.set_feature(fid, nsid, cdw11),
        }
    }

    /// Set Features with Save (SV, CDW10 bit 31): with `save`, a feature that is not
    /// saveable is refused with FEATURE_NOT_SAVEABLE and nothing changes; a saveable one is
    /// set, then its new value saved (a power cycle restores it).
    pub fn set_feature_save(&mut self, fid: u8, nsid: super::NsId, cdw11: u32, cdw12: u32, save: bool) -> Result<(), Error> {
        if save {
            self.check_saveable(fid)?;
        }
        self.set_feature_dw(fid, nsid, cdw11, cdw12)?;
        if save {
            self.save_feature(fid, cdw11);
        }
        Ok(())
    }

    /// Get Features with CDW11 (the NVM Set of 13h and 14h, the threshold 04h selects).
    pub fn get_feature_dw(&self, fid: u8, nsid: super::NsId, cdw11: u32) -> Result<u32, Error> {
        self.get_feature_sel(fid, nsid, cdw11, super::features::SEL_CURRENT)
    }

    /// Get Features with CDW11 and the Select field (`sel`: 0 current, 1 default, 2 saved,
    /// 3 supported capabilities).
    pub fn get_feature_sel(&self, fid: u8, nsid: super::NsId, cdw11: u32, sel: u8) -> Result<u32, Error> {
        use super::features::{SEL_CURRENT, SEL_SUPPORTED_CAPABILITIES};
        match fid {
            0x13 | 0x14 => {
                let current = self.get_plm_feature(fid, nvmsetid_of_cdw11(cdw11)?)?;
                match sel {
                    SEL_CURRENT => Ok(current),
                    // Not saveable: saved reads as the default, PLM disabled / no window.
                    1 | 2 => Ok(0),
                    _ => self.get_feature_selected(fid, nsid, sel),
                }
            }
            0x04 if sel != SEL_SUPPORTED_CAPABILITIES && sel <= 3 => self.temperature_threshold(cdw11, sel),
            _ => self.get_feature_selected(fid, nsid, sel),
        }
    }
}

fn nvmsetid_of_cdw11(cdw11: u32) -> Result<u16, Error> {
    if cdw11 > 0xffff {
        return fail(Status::InvalidField, format!("CDW11 {cdw11:#x}: the NVM Set Identifier is bits 15:0, the rest reserved"));
    }
    Ok(cdw11 as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nand::{Cause, NandOp, NoTiming, Recorder};
    use crate::nvme::{NsId, Pattern};
    use crate::util::splitmix;

    const MS: u64 = 1_000_000;

    /// The PBlaze5 with two NVM Sets at 1/128, set 1's namespace filled and randomly
    /// overwritten once (GC in steady state).
    fn steady_pb5() -> Controller {
        steady_pb5_parts(1)
    }

    /// `steady_pb5` with `parts` FTL partitions per set.
    fn steady_pb5_parts(parts: u32) -> Controller {
        let spec = DriveSpec::preset("memblaze-pblaze5-910-3.84t").unwrap().scaled(128).unwrap().with_nvm_sets(2).unwrap();
        let mut c = Controller::new(spec.with_partitions(parts).unwrap(), 7).unwrap();
        let bytes = c.namespace(NsId(1)).unwrap().bytes();
        c.precondition(NsId(1), Pattern::Sequential, 131072, bytes, 1, &mut |_, _| true).unwrap();
        c.precondition(NsId(1), Pattern::Random, 4096, bytes, 2, &mut |_, _| true).unwrap();
        c
    }

    /// `n` random 4 KiB writes to namespace 1 (512-byte LBAs), NAND operations to `sink`;
    /// stops early when `stop` says so. Returns how many were written.
    fn rand_writes<S: crate::nand::NandSink>(
        c: &mut Controller,
        seed: &mut u64,
        n: u64,
        sink: &mut S,
        stop: impl Fn(&Controller) -> bool,
    ) -> u64 {
        let blocks = c.namespace(NsId(1)).unwrap().nsze / 8;
        for i in 0..n {
            *seed = splitmix(*seed);
            c.write(NsId(1), (*seed % blocks) * 8, 8, sink).unwrap();
            if stop(c) {
                return i + 1;
            }
        }
        n
    }

    fn status(e: Error) -> Status {
        e.status().expect("an NVMe status")
    }

    /// Enable PLM on set 1, write in NDWIN until the reserve is built, pass the NDWIN minimum.
    fn ready_for_dtwin(c: &mut Controller, seed: &mut u64) {
        c.set_feature_dw(0x13, NsId(0), 1, 1).unwrap();
        assert_eq!(c.plm_sets()[0].window, NDWIN);
        assert!(c.ftl_state().gc_mode(0).reserve_ius > 0 && !c.ftl_state().gc_mode(0).deferred);
        assert!(c.ftl_state().gc_mode(1).is_normal(), "set 2 is not in PLM");
        let n = c.namespace(NsId(1)).unwrap().bytes() / 4096;
        rand_writes(c, seed, n / 2, &mut NoTiming, |_| false);
        c.plm_tick(c.st.clock_ns + 60_000 * MS);
    }

    #[test]
    fn a_power_cycle_disables_predictable_latency_mode() {
        // 13h and 14h are not saveable: they come back at their defaults (PLM disabled, no
        // window) and the set's GC is neither held nor steered to the reserve. They were
        // kept across the power cycle, a DTWIN and its held GC included.
        let spec = DriveSpec::preset("memblaze-pblaze5-910-3.84t").unwrap().scaled(128).unwrap().with_nvm_sets(2).unwrap();
        let mut c = Controller::new(spec, 7).unwrap();
        c.set_feature_dw(0x13, NsId(0), 1, 1).unwrap();
        c.plm_tick(c.st.clock_ns + 60_000 * MS);
        c.set_feature_dw(0x14, NsId(0), 1, DTWIN as u32).unwrap();
        assert!(c.ftl_state().gc_mode(0).deferred);
        c.power_cycle(false);
        assert_eq!(c.get_feature_dw(0x13, NsId(0), 1).unwrap(), 0, "Predictable Latency Enable: its default");
        assert_eq!(c.get_feature_dw(0x14, NsId(0), 1).unwrap(), 0, "no window outside PLM");
        assert!(c.plm_sets().is_empty() && c.ftl_state().gc_mode(0).is_normal());
        assert_eq!(c.pred_lat_log(1).unwrap().status, 0);
        check_plm_state(&c.spec, &c.cfg, &c.st, c.ftl_state()).unwrap();
        // Enabled again, it starts over in the non-deterministic window.
        c.set_feature_dw(0x13, NsId(0), 1, 1).unwrap();
        assert_eq!(c.get_feature_dw(0x14, NsId(0), 1).unwrap(), NDWIN as u32);
    }

    #[test]
    fn a_deterministic_window_holds_gc_and_ends_at_the_free_space_floor() {
        deterministic_window_case(steady_pb5());
    }

    #[test]
    fn a_deterministic_window_holds_the_gc_of_every_partition_of_its_set() {
        // Two FTL partitions per set: the reserve is shared out, every partition's GC held,
        // and the set's free space (summed over its partitions) ends at the floor.
        let c = steady_pb5_parts(2);
        assert_eq!((c.ftl_state().sets(), c.ftl_state().partitions()), (2, 4));
        deterministic_window_case(c);
    }

    fn deterministic_window_case(mut c: Controller) {
        let mut seed = 11;
        ready_for_dtwin(&mut c, &mut seed);
        let plm = c.plm_spec().unwrap().clone();
        let b = budget(&c.spec, &c.cfg, &plm, 0);
        let before = c.plm_avail(0);
        assert!(before > b.floor_ius + b.reserve_ius / 2, "NDWIN GC built the reserve: {before} IUs free, reserve {}", b.reserve_ius);
        let fg = c.ftl_counters().foreground_gc_victims;
        c.set_feature_dw(0x14, NsId(0), 1, DTWIN as u32).unwrap();
        assert_eq!(c.get_feature_dw(0x14, NsId(0), 1).unwrap(), DTWIN as u32);
        let mut ops = Recorder::default();
        let n = rand_writes(&mut c, &mut seed, 10_000_000, &mut ops, |c| c.plm_sets()[0].window != DTWIN);
        assert!(n < 10_000_000, "the window ended by itself");
        let gc_ops = ops.0.iter().filter(|o| matches!(o, NandOp::Program { cause: Cause::Gc, .. } | NandOp::Erase { .. })).count();
        assert_eq!(gc_ops, 0, "no GC program or erase during the DTWIN ({n} writes)");
        let p = &c.plm_sets()[0];
        assert_eq!((p.window, p.ended_by.as_str()), (NDWIN, "free space"));
        assert_eq!(p.event_type, EVENT_DTWIN_EXCEEDED);
        // It ended at the floor: the writes it absorbed are the space above it (the write
        // buffer holds the rest).
        let after = c.plm_avail(0);
        assert!(after <= b.floor_ius && after + 2 * b.parts * b.per_sb > b.floor_ius, "{after} vs floor {}", b.floor_ius);
        assert!(n >= before - b.floor_ius, "{n} 4 KiB writes absorbed, {} IUs above the floor", before - b.floor_ius);
        assert_eq!(c.pred_lat_event_agg().unwrap().list_of_entries, vec![AggEntry { entry: 1 }]);
        // The NDWIN catches up without foreground GC, and a new DTWIN must wait.
        let mut ops = Recorder::default();
        rand_writes(&mut c, &mut seed, 200_000, &mut ops, |_| false);
        assert!(ops.0.iter().any(|o| matches!(o, NandOp::Program { cause: Cause::Gc, .. })));
        assert_eq!(c.ftl_counters().foreground_gc_victims, fg, "the floor left the paced GC room");
        let e = c.set_feature_dw(0x14, NsId(0), 1, DTWIN as u32).unwrap_err();
        assert_eq!(status(e), Status::CommandSequenceError);
        c.check_full().unwrap();
    }

    #[test]
    fn a_deterministic_window_ends_at_its_time_maximum() {
        let mut c = steady_pb5();
        let mut seed = 3;
        ready_for_dtwin(&mut c, &mut seed);
        c.set_feature_dw(0x14, NsId(0), 1, DTWIN as u32).unwrap();
        let t0 = c.plm_sets()[0].since_ns;
        let tmax = c.plm_spec().unwrap().dtwin_time_max_ms.value * MS;
        c.plm_tick(t0 + tmax - 1);
        assert_eq!(c.plm_sets()[0].window, DTWIN);
        let log = c.pred_lat_log(1).unwrap();
        assert_eq!((log.status, log.dtwin_time_estimate), (DTWIN, 0));
        c.plm_tick(t0 + tmax);
        let p = &c.plm_sets()[0];
        assert_eq!((p.window, p.ended_by.as_str(), p.event_type), (NDWIN, "time", EVENT_DTWIN_EXCEEDED));
        assert!(c.ftl_state().gc_mode(0).reserve_ius > 0 && !c.ftl_state().gc_mode(0).deferred);
        // Nothing written: the next DTWIN may come after NDWIN Time Minimum Low.
        let low = c.plm_spec().unwrap().ndwin_time_min_ms.value * MS;
        assert_eq!(status(c.set_feature_dw(0x14, NsId(0), 1, 1).unwrap_err()), Status::CommandSequenceError);
        c.plm_tick(t0 + tmax + low);
        c.set_feature_dw(0x14, NsId(0), 1, 1).unwrap();
        // Leaving and disabling restore the normal GC.
        c.set_feature_dw(0x13, NsId(0), 1, 0).unwrap();
        assert!(c.plm_sets().is_empty() && c.ftl_state().gc_mode(0).is_normal());
        c.check_state().unwrap();
    }

    #[test]
    fn the_log_comes_from_the_model() {
        let mut c = steady_pb5();
        let log = c.pred_lat_log(1).unwrap();
        assert_eq!((log.status, log.dtwin_writes_estimate, log.dtwin_time_maximum), (0, 0, 30_000));
        let g = c.spec.geometry();
        let plm = c.plm_spec().unwrap().clone();
        let b = budget(&c.spec, &c.cfg, &plm, 0);
        // Writes typical: the paced GC's target plus the reserve, above the floor, in OWS units.
        assert_eq!(log.dtwin_writes_typical, (5 * b.per_sb / 2 + b.reserve_ius - b.floor_ius) * 4096 / g.program_unit_bytes);
        assert!(log.ndwin_time_minimum_high > log.ndwin_time_minimum_low);
        // A bigger reserve buys a longer window.
        c.spec.nvm_sets.as_mut().unwrap().plm.as_mut().unwrap().reserve_spare_pct.value = 50;
        assert!(c.pred_lat_log(1).unwrap().dtwin_writes_typical > log.dtwin_writes_typical);
    }

    #[test]
    fn bad_plm_requests_carry_their_status() {
        let spec = DriveSpec::preset("memblaze-pblaze5-910-3.84t").unwrap().scaled(128).unwrap();
        let mut c = Controller::new(spec, 1).unwrap();
        assert_eq!(status(c.set_feature_dw(0x13, NsId(0), 1, 1).unwrap_err()), Status::InvalidField);
        assert_eq!(status(c.pred_lat_log(1).unwrap_err()), Status::InvalidField);
        let mut c = steady_pb5();
        assert_eq!(status(c.set_feature_dw(0x13, NsId(0), 3, 1).unwrap_err()), Status::InvalidField);
        assert_eq!(status(c.set_feature_dw(0x14, NsId(0), 1, 1).unwrap_err()), Status::CommandSequenceError);
        c.set_feature_dw(0x13, NsId(0), 1, 1).unwrap();
        assert_eq!(status(c.set_feature_dw(0x14, NsId(0), 1, 3).unwrap_err()), Status::InvalidField);
        assert_eq!(status(c.set_feature_dw(0x14, NsId(0), 1, 1).unwrap_err()), Status::CommandSequenceError);
        let cm6 = Controller::new(DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap().scaled(256).unwrap(), 1).unwrap();
        assert_eq!(status(cm6.pred_lat_log(1).unwrap_err()), Status::InvalidField);
    }

    #[test]
    fn windows_are_deterministic() {
        let run = || {
            let mut c = steady_pb5();
            let mut seed = 5;
            ready_for_dtwin(&mut c, &mut seed);
            c.set_feature_dw(0x14, NsId(0), 1, 1).unwrap();
            rand_writes(&mut c, &mut seed, 10_000_000, &mut NoTiming, |c| c.plm_sets()[0].window != DTWIN);
            (c.ftl_fingerprint().unwrap(), c.plm_sets().to_vec())
        };
        assert_eq!(run(), run());
    }
}
