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
    /// Get Features. `nsid` matters for namespace-scoped features (84h).
    pub fn get_feature(&self, fid: u8, nsid: NsId) -> Result<u32, Error> {
        let nsid = nsid.0;
        match fid {
            0x01 => Ok(self.st.arbitration),
            0x02 => Ok(self.st.power_state as u32),
            0x04 => self.temperature_threshold(0),
            0x06 => Ok(0), // no volatile write cache: the buffer is power-loss protected
            0x07 => Ok((63 << 16) | 63),
            0x08 => Ok(self.st.interrupt_coalescing),
            0x84 => Ok(self.attached_u32(nsid)?.write_protect as u32),
            _ => fail(Status::InvalidField, format!("feature {fid:#04x} is not supported (supported: {SUPPORTED_FEATURES})")),
        }
    }

    /// Get Features 04h: the threshold CDW11's TMPSEL and THSEL select, in CDW11's layout.
    pub(super) fn temperature_threshold(&self, cdw11: u32) -> Result<u32, Error> {
        let (tmpsel, thsel) = temperature_select(cdw11)?;
        let k = if thsel == 0 { self.st.temperature_threshold_k } else { self.st.temperature_under_threshold_k };
        Ok(thsel << 20 | tmpsel << 16 | (k & 0xffff))
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
            0x01 => self.st.arbitration = value,
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
            0x08 => self.st.interrupt_coalescing = value,
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
            _ => return fail(Status::InvalidField, format!("feature {fid:#04x} is not supported (supported: {SUPPORTED_FEATURES})")),
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
