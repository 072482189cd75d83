//! Asymmetric Namespace Access (NVMe 1.4 ANA reporting, for multipath): one ANA group per
//! namespace (ANAGRPID = NSID), its state set by a vendor command (`ssdtwin nvme
//! ana-state`), the ANA log (0Ch) with nvme-cli's JSON names, and I/O to a group that is not
//! accessible failing with its ANA status. A drive's preset opts in with `[ana]`.
//!
//! One group per namespace (not per NVM Set) because multipath fails over namespaces, the
//! drives that sell ANA (the CM6) have no sets, and Linux nvmet also gives each namespace its
//! own group when asked.

use serde::{Deserialize, Serialize};

use super::status::fail;
use super::{Controller, ControllerState, Error, NsId, Status};

/// ANA states (Figure "ANA Group Descriptor": the state field).
pub const ANA_OPTIMIZED: u8 = 0x01;
pub const ANA_NON_OPTIMIZED: u8 = 0x02;
pub const ANA_INACCESSIBLE: u8 = 0x03;
pub const ANA_PERSISTENT_LOSS: u8 = 0x04;
pub const ANA_CHANGE: u8 = 0x0F;

/// Every state with its nvme-cli name (libnvme `nvme_ana_state_to_string`).
pub const ANA_STATES: [(u8, &str); 5] = [
    (ANA_OPTIMIZED, "optimized"),
    (ANA_NON_OPTIMIZED, "non-optimized"),
    (ANA_INACCESSIBLE, "inaccessible"),
    (ANA_PERSISTENT_LOSS, "persistent-loss"),
    (ANA_CHANGE, "change"),
];

/// The saved state of one ANA group (absent: optimized, never changed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnaGroup {
    pub state: u8,
    /// The log's change count when the group last changed.
    pub chgcnt: u64,
}

/// One descriptor of the ANA log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnaDesc {
    pub grpid: u32,
    pub nnsids: u32,
    pub chgcnt: u64,
    pub state: String,
    #[serde(rename = "NSIDS")]
    pub nsids: Vec<AnaNsid>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnaNsid {
    pub nsid: u32,
}

/// Asymmetric Namespace Access log (0Ch), nvme-cli `ana-log -o json` names (the device line
/// is added by the command).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnaLog {
    pub chgcnt: u64,
    pub ngrps: u16,
    #[serde(rename = "ANA DESC LIST ")]
    pub descs: Vec<AnaDesc>,
}

fn state_name(state: u8) -> &'static str {
    ANA_STATES.iter().find(|(s, _)| *s == state).map_or("invalid state", |(_, n)| n)
}

/// Saved ANA state: groups of existing namespaces, known states, on a drive with ANA.
pub(super) fn check_ana_state(ana: bool, st: &ControllerState) -> Result<(), String> {
    if !st.ana.is_empty() && !ana {
        return Err("ANA group states recorded on a drive without ANA reporting".into());
    }
    for (id, g) in &st.ana {
        if !st.namespaces.contains_key(id) {
            return Err(format!("ANA group {id} recorded, but namespace {id} does not exist"));
        }
        if !ANA_STATES.iter().any(|(s, _)| *s == g.state) || g.chgcnt > st.ana_chgcnt {
            return Err(format!("ANA group {id}: state {:#x}, change count {} of {}", g.state, g.chgcnt, st.ana_chgcnt));
        }
    }
    Ok(())
}

impl Controller {
    /// Whether the drive reports ANA (CMIC bit 3).
    pub fn has_ana(&self) -> bool {
        self.spec.ana.is_some()
    }

    /// The ANA state of namespace `nsid`'s group.
    pub fn ana_state(&self, nsid: u32) -> u8 {
        self.st.ana.get(&nsid).map_or(ANA_OPTIMIZED, |g| g.state)
    }

    /// I/O to namespace `nsid` is allowed in its group's state (optimized, non-optimized);
    /// else its ANA status.
    #[inline]
    pub(super) fn check_ana_io(&self, nsid: u32) -> Result<(), Error> {
        if self.st.ana.is_empty() {
            return Ok(());
        }
        let (status, what) = match self.ana_state(nsid) {
            ANA_INACCESSIBLE => (Status::AnaInaccessible, "inaccessible"),
            ANA_PERSISTENT_LOSS => (Status::AnaPersistentLoss, "persistent loss"),
            ANA_CHANGE => (Status::AnaTransition, "change (transition)"),
            _ => return Ok(()),
        };
        fail(status, format!("namespace {nsid}: its ANA group {nsid} is in the {what} state through this controller"))
    }

    /// The vendor ANA command: put group `grpid` (= the NSID of its namespace) in `state`.
    pub fn set_ana_state(&mut self, grpid: u32, state: u8) -> Result<(), Error> {
        if !self.has_ana() {
            return fail(
                Status::InvalidField,
                format!("{} does not report Asymmetric Namespace Access (its preset has no [ana])", self.spec.drive.model_number.value),
            );
        }
        if !ANA_STATES.iter().any(|(s, _)| *s == state) {
            let names: Vec<String> = ANA_STATES.iter().map(|(s, n)| format!("{n} ({s:#x})")).collect();
            return fail(Status::InvalidField, format!("ANA state {state:#x} is not supported: use {}", names.join(", ")));
        }
        if !self.st.namespaces.contains_key(&grpid) {
            return fail(
                Status::InvalidField,
                format!(
                    "ANA group {grpid} does not exist: each namespace is its own group (ANAGRPID = NSID; namespaces: {})",
                    self.nsid_list()
                ),
            );
        }
        if self.ana_state(grpid) == state {
            return Ok(());
        }
        self.st.ana_chgcnt += 1;
        self.st.ana.insert(grpid, AnaGroup { state, chgcnt: self.st.ana_chgcnt });
        Ok(())
    }

    /// The vendor ANA command with the state by nvme-cli's name or its number.
    pub fn set_ana_state_named(&mut self, grpid: u32, state: &str) -> Result<(), Error> {
        let parsed = ANA_STATES.iter().find(|(_, n)| *n == state).map(|(s, _)| *s).or_else(|| match state.strip_prefix("0x") {
            Some(h) => u8::from_str_radix(h, 16).ok(),
            None => state.parse().ok(),
        });
        match parsed {
            Some(s) => self.set_ana_state(grpid, s),
            None => {
                let names: Vec<String> = ANA_STATES.iter().map(|(s, n)| format!("{n} ({s:#x})")).collect();
                fail(Status::InvalidField, format!("ANA state '{state}' is not supported: use {}", names.join(", ")))
            }
        }
    }

    /// Get Log Page 0Ch: every group (namespace) with its state and namespaces.
    pub fn ana_log(&self) -> Result<AnaLog, Error> {
        if !self.has_ana() {
            return fail(
                Status::InvalidLogPage,
                format!(
                    "{} does not report Asymmetric Namespace Access: log page 0x0c is not supported",
                    self.spec.drive.model_number.value
                ),
            );
        }
        let descs: Vec<AnaDesc> = self
            .st
            .namespaces
            .keys()
            .map(|&id| AnaDesc {
                grpid: id,
                nnsids: 1,
                chgcnt: self.st.ana.get(&id).map_or(0, |g| g.chgcnt),
                state: state_name(self.ana_state(id)).to_string(),
                nsids: vec![AnaNsid { nsid: id }],
            })
            .collect();
        Ok(AnaLog { chgcnt: self.st.ana_chgcnt, ngrps: descs.len() as u16, descs })
    }

    /// ANAGRPID of a namespace (0 without ANA).
    pub(super) fn anagrpid(&self, nsid: NsId) -> u32 {
        if self.has_ana() {
            nsid.0
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nand::NoTiming;
    use crate::spec::DriveSpec;

    fn cm6() -> Controller {
        Controller::new(DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap().scaled(256).unwrap(), 1).unwrap()
    }

    #[test]
    fn io_follows_the_group_state() {
        let mut c = cm6();
        c.write(NsId(1), 0, 8, &mut NoTiming).unwrap();
        c.set_ana_state(1, ANA_NON_OPTIMIZED).unwrap();
        c.read(NsId(1), 0, 8, &mut NoTiming).unwrap();
        for (state, status) in [
            (ANA_INACCESSIBLE, Status::AnaInaccessible),
            (ANA_PERSISTENT_LOSS, Status::AnaPersistentLoss),
            (ANA_CHANGE, Status::AnaTransition),
        ] {
            c.set_ana_state(1, state).unwrap();
            assert_eq!(c.read(NsId(1), 0, 8, &mut NoTiming).unwrap_err().status(), Some(status));
            assert_eq!(c.write(NsId(1), 0, 8, &mut NoTiming).unwrap_err().status(), Some(status));
            assert_eq!(c.deallocate(NsId(1), 0, 8).unwrap_err().status(), Some(status));
        }
        let log = c.ana_log().unwrap();
        assert_eq!((log.chgcnt, log.ngrps, log.descs[0].state.as_str(), log.descs[0].chgcnt), (4, 1, "change", 4));
        c.set_ana_state(1, ANA_OPTIMIZED).unwrap();
        c.read(NsId(1), 0, 8, &mut NoTiming).unwrap();
        assert_eq!(c.id_ns(NsId(1)).unwrap().anagrpid, 1);
        assert_eq!(c.id_ctrl().cmic & 0x08, 0x08);
        c.check_state().unwrap();
        // A deleted namespace takes its group with it.
        c.delete_ns(NsId(1)).unwrap();
        c.check_state().unwrap();
    }

    #[test]
    fn bad_ana_requests_carry_their_status() {
        let mut c = cm6();
        assert_eq!(c.set_ana_state(1, 5).unwrap_err().status(), Some(Status::InvalidField));
        assert_eq!(c.set_ana_state_named(1, "standby").unwrap_err().status(), Some(Status::InvalidField));
        c.set_ana_state_named(1, "non-optimized").unwrap();
        c.set_ana_state_named(1, "0x3").unwrap();
        assert_eq!(c.ana_state(1), ANA_INACCESSIBLE);
        assert_eq!(c.set_ana_state(2, ANA_INACCESSIBLE).unwrap_err().status(), Some(Status::InvalidField));
        let mut pb = Controller::new(DriveSpec::preset("memblaze-pblaze5-910-3.84t").unwrap().scaled(256).unwrap(), 1).unwrap();
        assert_eq!(pb.set_ana_state(1, ANA_INACCESSIBLE).unwrap_err().status(), Some(Status::InvalidField));
        assert_eq!(pb.ana_log().unwrap_err().status(), Some(Status::InvalidLogPage));
        assert_eq!((pb.id_ctrl().cmic, pb.id_ns(NsId(1)).unwrap().anagrpid), (0, 0));
    }
}
