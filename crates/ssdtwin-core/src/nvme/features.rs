//! Get/Set Features (arbitration 01h, power management 02h, temperature threshold 04h,
//! volatile write cache 06h, number of queues 07h, interrupt coalescing 08h, namespace write
//! protection 84h), the queue priority classes weighted round robin sorts by, and the vendor
//! QoS command's per-namespace caps.

use serde::{Deserialize, Serialize};

use super::status::fail;
use super::{Controller, Error, NsId, Status, WP_PERMANENT, WP_UNTIL_POWER_CYCLE};

/// The NVMe queue priority classes (QPRIO), by value.
pub const SQ_PRIORITIES: [&str; 4] = ["urgent", "high", "medium", "low"];

/// The Composite Temperature the SMART log reports (K): the twin models no heat.
pub const COMPOSITE_TEMPERATURE_K: u16 = 313;

/// The features Get/Set Features know, as errors list them.
const SUPPORTED_FEATURES: &str = "0x01, 0x02, 0x04, 0x06, 0x07, 0x08, 0x84; 0x13, 0x14 with NVM Sets";

/// Get Features' Select field (CDW10 bits 10:08), NVMe 1.4 §5.14.
pub const SEL_CURRENT: u8 = 0;
pub const SEL_DEFAULT: u8 = 1;
pub const SEL_SAVED: u8 = 2;
pub const SEL_SUPPORTED_CAPABILITIES: u8 = 3;

/// The supported capabilities Get Features with SEL 011b returns in Dword 0.
pub const FEATURE_SAVEABLE: u32 = 1 << 0;
pub const FEATURE_NAMESPACE_SPECIFIC: u32 = 1 << 1;
pub const FEATURE_CHANGEABLE: u32 = 1 << 2;

/// The values of the saveable features (01h, 02h, 04h, 08h): the factory defaults, or what
/// Set Features with Save (SV) last stored. A power cycle restores them (NVMe 1.4 §7.3: after
/// a reset a feature takes its saved value, or its default if none was saved).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedFeatures {
    pub arbitration: u32,
    pub power_state: u8,
    pub temperature_threshold_k: u32,
    pub temperature_under_threshold_k: u32,
    pub interrupt_coalescing: u32,
}

impl Default for SavedFeatures {
    /// The factory defaults: round robin, power state 0, over temperature threshold 343 K
    /// (70 °C), no under temperature threshold, no interrupt coalescing.
    fn default() -> SavedFeatures {
        SavedFeatures {
            arbitration: 0,
            power_state: 0,
            temperature_threshold_k: 343,
            temperature_under_threshold_k: 0,
            interrupt_coalescing: 0,
        }
    }
}

/// The supported capabilities of feature `fid` (None: not a feature this drive knows).
/// Namespace write protection (84h) is not saveable: its persistence is §8.12's (Write
/// Protect and Permanent Write Protect survive a power cycle, Write Protect Until Power
/// Cycle does not), not a saved value's. Predictable latency (13h, 14h), a state of each NVM
/// Set, is not saveable either: a power cycle disables it (`plm_power_cycle`).
fn feature_capabilities(fid: u8) -> Option<u32> {
    match fid {
        0x01 | 0x02 | 0x04 | 0x08 => Some(FEATURE_SAVEABLE | FEATURE_CHANGEABLE),
        0x06 | 0x07 => Some(0),
        0x13 | 0x14 => Some(FEATURE_CHANGEABLE),
        0x84 => Some(FEATURE_NAMESPACE_SPECIFIC | FEATURE_CHANGEABLE),
        _ => None,
    }
}

fn unsupported_feature<T>(fid: u8) -> Result<T, Error> {
    fail(Status::InvalidField, format!("feature {fid:#04x} is not supported (supported: {SUPPORTED_FEATURES})"))
}

/// Feature 04h's CDW11 without its threshold: (TMPSEL, THSEL), checked. This drive reports
/// the Composite Temperature only (no sensors 1-8), so TMPSEL is 0 (composite) or Fh (all
/// sensors: the composite); THSEL 0 is the over, 1 the under temperature threshold.
fn temperature_select(cdw11: u32) -> Result<(u32, u32), Error> {
    let tmpsel = (cdw11 >> 16) & 0xf;
    let thsel = (cdw11 >> 20) & 0x3;
    if tmpsel != 0 && tmpsel != 0xf {
        return fail(
            Status::InvalidField,
            format!("temperature threshold TMPSEL {tmpsel} (CDW11 bits 19:16): this drive has no temperature sensor {tmpsel}; 0 (composite) or 15 (all)"),
        );
    }
    if thsel > 1 {
        return fail(
            Status::InvalidField,
            format!("temperature threshold THSEL {thsel} (CDW11 bits 21:20): 0 (over temperature) or 1 (under temperature)"),
        );
    }
    Ok((tmpsel, thsel))
}

/// Feature 01h's reserved bits (7:3, between AB and LPW).
const ARBITRATION_RESERVED_BITS: u32 = 0xf8;

fn select_out_of_range<T>(sel: u8) -> Result<T, Error> {
    fail(Status::InvalidField, format!("Select (SEL) {sel} (CDW10 bits 10:08): 0 current, 1 default, 2 saved or 3 supported capabilities"))
}

/// The class of a namespace's queues when none was set.
pub const SQ_PRIORITY_DEFAULT: u8 = 2;

/// Submission-queue arbitration (feature 01h, CC.AMS): round robin, or weighted round
/// robin with an urgent class. The twin selects WRR when any weight field is non-zero
/// (CC is a register, not a feature: docs/models.md §9).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Arbitration {
    /// Commands fetched from one queue per turn (2^AB; None = unlimited, AB = 7).
    pub burst: Option<u32>,
    /// WRR weights (1's based) of the high, medium and low classes; None = round robin.
    pub weights: Option<[u32; 3]>,
}

impl Arbitration {
    pub fn from_feature(value: u32) -> Arbitration {
        let ab = value & 0x7;
        let w = |shift: u32| ((value >> shift) & 0xff) + 1;
        Arbitration { burst: (ab != 7).then_some(1 << ab), weights: (value >> 8 != 0).then(|| [w(24), w(16), w(8)]) }
    }
}

/// A namespace's QoS caps (the vendor QoS admin command, docs/models.md §9): read and write
/// bandwidth in bytes per second and commands per second; 0 = no cap.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QosLimits {
    pub read_bytes_per_s: u64,
    pub write_bytes_per_s: u64,
    pub iops: u64,
}

impl QosLimits {
    pub fn is_unlimited(&self) -> bool {
        *self == QosLimits::default()
    }
}

/// One namespace's caps as `ssdtwin nvme qos -o json` shows them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QosRow {
    pub nsid: u32,
    #[serde(flatten)]
    pub limits: QosLimits,
    /// The class of the namespace's queues: urgent, high, medium or low.
    pub sq_priority: String,
}

impl Controller {
    /// Get Features (current value). `nsid` matters for namespace-scoped features (84h).
    pub fn get_feature(&self, fid: u8, nsid: NsId) -> Result<u32, Error> {
        let nsid = nsid.0;
        match fid {
            0x01 => Ok(self.st.arbitration),
            0x02 => Ok(self.st.power_state as u32),
            0x04 => self.temperature_threshold(0, SEL_CURRENT),
            0x06 => Ok(0), // no volatile write cache: the buffer is power-loss protected
            0x07 => Ok((63 << 16) | 63),
            0x08 => Ok(self.st.interrupt_coalescing),
            0x84 => Ok(self.attached_u32(nsid)?.write_protect as u32),
            _ => unsupported_feature(fid),
        }
    }

    /// The saved values of the saveable features (the defaults where none was saved).
    pub fn saved_features(&self) -> SavedFeatures {
        self.st.saved_features.unwrap_or_default()
    }

    /// Get Features with SEL 001b (default), 010b (saved) or 011b (supported capabilities)
    /// of a feature other than 04h, 13h and 14h. A feature that is not saveable reports its
    /// default as its saved value (NVMe 1.4 §5.14: SEL 010b acts as 001b then).
    pub(super) fn get_feature_selected(&self, fid: u8, nsid: NsId, sel: u8) -> Result<u32, Error> {
        let Some(caps) = feature_capabilities(fid) else { return unsupported_feature(fid) };
        if fid == 0x84 {
            // Namespace-specific: the namespace must exist and be attached, whatever SEL.
            self.attached_u32(nsid.0)?;
        }
        let values = match sel {
            SEL_CURRENT => return self.get_feature(fid, nsid),
            SEL_SUPPORTED_CAPABILITIES => return Ok(caps),
            SEL_DEFAULT => SavedFeatures::default(),
            SEL_SAVED => self.saved_features(),
            _ => return select_out_of_range(sel),
        };
        Ok(match fid {
            0x01 => values.arbitration,
            0x02 => values.power_state as u32,
            0x06 | 0x07 | 0x84 => {
                // Not saveable: the default. 84h's default is No Write Protect; 06h and 07h
                // never change.
                if fid == 0x84 {
                    0
                } else {
                    self.get_feature(fid, nsid)?
                }
            }
            0x08 => values.interrupt_coalescing,
            // 04h with CDW11 0 (the over temperature threshold); 13h and 14h: not saveable,
            // default disabled / no window. get_feature_sel answers them with their CDW11.
            0x04 => return self.temperature_threshold(0, sel),
            _ => 0,
        })
    }

    /// Get Features 04h: the threshold CDW11's TMPSEL and THSEL select, in CDW11's layout,
    /// as SEL selects it (current, default or saved; 011b is answered before).
    pub(super) fn temperature_threshold(&self, cdw11: u32, sel: u8) -> Result<u32, Error> {
        let (tmpsel, thsel) = temperature_select(cdw11)?;
        let values = match sel {
            SEL_DEFAULT => SavedFeatures::default(),
            SEL_SAVED => self.saved_features(),
            _ => SavedFeatures {
                temperature_threshold_k: self.st.temperature_threshold_k,
                temperature_under_threshold_k: self.st.temperature_under_threshold_k,
                ..SavedFeatures::default()
            },
        };
        let k = if thsel == 0 { values.temperature_threshold_k } else { values.temperature_under_threshold_k };
        Ok(thsel << 20 | tmpsel << 16 | (k & 0xffff))
    }

    /// Set Features with Save (SV, CDW10 bit 31) set, after the Set itself succeeded: the
    /// new current value becomes the saved one. A feature that is not saveable was refused
    /// before anything changed ([`Controller::check_saveable`]).
    pub(super) fn save_feature(&mut self, fid: u8, cdw11: u32) {
        let mut saved = self.saved_features();
        match fid {
            0x01 => saved.arbitration = self.st.arbitration,
            0x02 => saved.power_state = self.st.power_state,
            0x04 => {
                if (cdw11 >> 20) & 0x3 == 0 {
                    saved.temperature_threshold_k = self.st.temperature_threshold_k;
                } else {
                    saved.temperature_under_threshold_k = self.st.temperature_under_threshold_k;
                }
            }
            0x08 => saved.interrupt_coalescing = self.st.interrupt_coalescing,
            _ => unreachable!("check_saveable refused feature {fid:#04x}"),
        }
        self.st.saved_features = Some(saved);
    }

    /// Set Features with SV set: FEATURE_NOT_SAVEABLE unless `fid` is saveable.
    pub(super) fn check_saveable(&self, fid: u8) -> Result<(), Error> {
        match feature_capabilities(fid) {
            None => unsupported_feature(fid),
            Some(caps) if caps & FEATURE_SAVEABLE == 0 => fail(
                Status::FeatureNotSaveable,
                format!("feature {fid:#04x} is not saveable (saveable: 0x01, 0x02, 0x04, 0x08); set it without -s/--save"),
            ),
            Some(_) => Ok(()),
        }
    }

    /// A power cycle: the saveable features take their saved values (their defaults where
    /// none was saved).
    pub(super) fn restore_saved_features(&mut self) {
        let saved = self.saved_features();
        self.st.arbitration = saved.arbitration;
        self.st.power_state = saved.power_state;
        self.st.temperature_threshold_k = saved.temperature_threshold_k;
        self.st.temperature_under_threshold_k = saved.temperature_under_threshold_k;
        self.st.interrupt_coalescing = saved.interrupt_coalescing;
    }

    /// SMART critical warning bit 1: the Composite Temperature is at or over the over
    /// temperature threshold, or at or under a (non-zero) under temperature threshold.
    pub(super) fn temperature_warning(&self) -> bool {
        let t = COMPOSITE_TEMPERATURE_K as u32;
        let under = self.st.temperature_under_threshold_k;
        t >= self.st.temperature_threshold_k || (under != 0 && t <= under)
    }

    /// Set Features.
    pub fn set_feature(&mut self, fid: u8, nsid: NsId, value: u32) -> Result<(), Error> {
        let nsid = nsid.0;
        match fid {
            // Reserved bits are ignored, as write protect's and the power state's are, and
            // read back as 0 (NVMe 1.4 §1.6: reserved bits return 0h): AB bits 2:0, LPW
            // 15:8, MPW 23:16, HPW 31:24; bits 7:3 reserved.
            0x01 => self.st.arbitration = value & !ARBITRATION_RESERVED_BITS,
            0x02 => {
                let n = self.spec.power_states.len().max(1) as u32;
                let ps = value & 0x1f;
                if ps >= n {
                    return fail(Status::InvalidField, format!("power state {ps}: this drive has power states 0..={}", n - 1));
                }
                if self.spec.power_states.get(ps as usize).is_some_and(|p| p.non_operational) {
                    return fail(
                        Status::InvalidField,
                        format!("power state {ps} is non-operational; the twin only runs I/O in operational states"),
                    );
                }
                self.st.power_state = ps as u8;
            }
            0x04 => {
                let (_, thsel) = temperature_select(value)?;
                if thsel == 0 {
                    self.st.temperature_threshold_k = value & 0xffff;
                } else {
                    self.st.temperature_under_threshold_k = value & 0xffff;
                }
            }
            0x06 => {
                if value & 1 != 0 {
                    return fail(
                        Status::InvalidField,
                        "there is no volatile write cache to enable (the write buffer is power-loss protected)",
                    );
                }
            }
            0x07 => return fail(Status::FeatureNotChangeable, "the number of queues is fixed by the twin"),
            // THR bits 7:0 and TIME 15:8; bits 31:16 reserved (ignored, read back as 0).
            0x08 => self.st.interrupt_coalescing = value & 0xffff,
            0x84 => {
                let wp = value as u8 & 0x7;
                if wp > WP_PERMANENT {
                    return fail(Status::InvalidField, format!("write-protect state {wp}: must be 0..=3"));
                }
                let ns = self.attached_u32(nsid)?;
                if ns.write_protect == WP_PERMANENT {
                    return fail(Status::FeatureNotChangeable, format!("namespace {nsid} is permanently write protected"));
                }
                // NVMe 1.4 §8.12: only a power cycle leaves Write Protect Until Power Cycle.
                if ns.write_protect == WP_UNTIL_POWER_CYCLE {
                    return fail(
                        Status::FeatureNotChangeable,
                        format!("namespace {nsid} is write protected until the next power cycle (ssdtwin power-cycle)"),
                    );
                }
                self.st.namespaces.get_mut(&nsid).expect("checked").write_protect = wp;
            }
            _ => return unsupported_feature(fid),
        }
        Ok(())
    }

    /// The vendor QoS command (docs/cli.md, `ssdtwin nvme qos`): cap namespace `nsid`'s read
    /// and write bandwidth and its commands per second (0 = no cap; all 0 clears the caps).
    /// A bandwidth cap is at most the host link's rate, an IOPS cap at most the controller's
    /// command ceiling: above them a cap would never bind.
    pub fn set_qos(&mut self, nsid: NsId, limits: QosLimits) -> Result<(), Error> {
        let nsid = nsid.0;
        self.namespace_u32(nsid)?;
        let (link, iops) = match &self.spec.timing {
            Some(t) => (t.host_link_bytes_per_s.value, t.ctrl_max_iops.value),
            None => (u64::MAX, u64::MAX),
        };
        for (what, v, top) in [("read bandwidth", limits.read_bytes_per_s, link), ("write bandwidth", limits.write_bytes_per_s, link)] {
            if v > top {
                return fail(
                    Status::InvalidField,
                    format!("{what} cap {v} B/s: must be 0 (no cap) or 1..={top} B/s (the host link's rate)"),
                );
            }
        }
        if limits.iops > iops {
            return fail(
                Status::InvalidField,
                format!("IOPS cap {}: must be 0 (no cap) or 1..={iops} (the controller's command ceiling)", limits.iops),
            );
        }
        if limits.is_unlimited() {
            self.st.qos.remove(&nsid);
        } else {
            self.st.qos.insert(nsid, limits);
        }
        Ok(())
    }

    /// The priority class (QPRIO) of the queues the host creates for namespace `nsid`: what
    /// weighted round robin arbitration sorts commands by.
    pub fn set_sq_priority(&mut self, nsid: NsId, class: u8) -> Result<(), Error> {
        self.namespace_u32(nsid.0)?;
        if class as usize >= SQ_PRIORITIES.len() {
            return fail(Status::InvalidField, format!("queue priority {class}: must be 0 (urgent), 1 (high), 2 (medium) or 3 (low)"));
        }
        if class == SQ_PRIORITY_DEFAULT {
            self.st.sq_priority.remove(&nsid.0);
        } else {
            self.st.sq_priority.insert(nsid.0, class);
        }
        Ok(())
    }

    /// The queue priority class of namespace `nsid` (medium unless set).
    pub fn sq_priority(&self, nsid: NsId) -> u8 {
        self.st.sq_priority.get(&nsid.0).copied().unwrap_or(SQ_PRIORITY_DEFAULT)
    }

    /// The arbitration mechanism feature 01h selects.
    pub fn arbitration(&self) -> Arbitration {
        Arbitration::from_feature(self.st.arbitration)
    }

    /// The QoS caps of `nsid` (all 0 when it has none).
    pub fn qos(&self, nsid: NsId) -> Result<QosLimits, Error> {
        self.namespace_u32(nsid.0)?;
        Ok(self.st.qos.get(&nsid.0).copied().unwrap_or_default())
    }

    /// Every namespace's caps (all namespaces, capped or not).
    pub fn qos_rows(&self) -> Vec<QosRow> {
        self.namespaces()
            .map(|n| QosRow {
                nsid: n.nsid,
                limits: self.st.qos.get(&n.nsid).copied().unwrap_or_default(),
                sq_priority: SQ_PRIORITIES[self.sq_priority(NsId(n.nsid)) as usize].to_string(),
            })
            .collect()
    }

    /// The caps of `nsid` for the timed path: None (one map test) when no namespace has one.
    #[inline]
    pub fn qos_limits(&self, nsid: NsId) -> Option<&QosLimits> {
        if self.st.qos.is_empty() {
            return None;
        }
        self.st.qos.get(&nsid.0)
    }
}
