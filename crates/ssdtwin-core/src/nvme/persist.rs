//! A controller reassembled from what an image saved: the checks a saved state must pass
//! before a controller runs on it ([`ControllerState`] is in mod.rs, the FTL's own state is
//! the FTL's), and the FTL maps loaded from the image on first use ([`MapStore`]).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

use super::{ana, lbastatus, plm, sets, Controller, ControllerState, Error, InvalidState, MapError, ERROR_LOG_ENTRIES, SQ_PRIORITIES};
use crate::bigarray::BigArray;
use crate::ftl::{CheckEnd, Ftl, FtlConfig, FtlCounters, FtlState};
use crate::spec::DriveSpec;

/// Loads the FTL maps of an image on first use.
pub trait MapStore: Send {
    /// Where the maps are (named in errors).
    fn location(&self) -> PathBuf;
    /// The two maps, of `l2p_len` and `p2l_len` entries, checked against their checksums.
    fn load_maps(&self, l2p_len: usize, p2l_len: usize) -> Result<(BigArray, BigArray), MapError>;
}

/// See [`Controller::ftl_fingerprint`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FtlFingerprint {
    pub l2p_xxh3: String,
    pub p2l_xxh3: String,
    pub counters: FtlCounters,
}

impl Controller {
    /// Reassemble a controller whose FTL maps stay on disk until first needed. The state is
    /// checked first (everything that needs no maps): a state that does not hold together is
    /// refused, never run.
    pub fn from_parts(
        spec: DriveSpec,
        st: ControllerState,
        ftl_meta: FtlState,
        store: Box<dyn MapStore>,
    ) -> Result<Controller, InvalidState> {
        let cfg = FtlConfig::from_spec(&spec);
        ftl_meta.check_cheap(&cfg).map_err(InvalidState)?;
        check_controller_state(&spec, &cfg, &st).map_err(InvalidState)?;
        sets::check_chunk_sets(&st, &ftl_meta).map_err(InvalidState)?;
        plm::check_plm_state(&spec, &cfg, &st, &ftl_meta).map_err(InvalidState)?;
        Ok(Controller { spec, cfg, st, ftl: None, ftl_meta: Some(ftl_meta), store: Some(store), plm_now_ns: 0, ff_threads: 0 })
    }

    /// Every invariant, maps included (loads them; O(capacity)): `ssdtwin check`.
    pub fn check_full(&mut self) -> Result<(), Error> {
        self.check_full_or_stop(&mut || false).map(drop)
    }

    /// [`Controller::check_full`], asking `stop` as the FTL's check walks its maps whether
    /// to end there (Ctrl-C: the check changes nothing). Loading the maps is not stopped.
    pub fn check_full_or_stop(&mut self, stop: &mut dyn FnMut() -> bool) -> Result<CheckEnd, Error> {
        self.check_state()?;
        Ok(self.ftl()?.check_invariants_or_stop(stop).map_err(InvalidState)?)
    }

    /// The cheap invariants of the whole state (controller and FTL, no maps): what the image
    /// checks before it writes a generation.
    pub fn check_state(&self) -> Result<(), InvalidState> {
        self.ftl_state().check_cheap(&self.cfg).map_err(InvalidState)?;
        check_controller_state(&self.spec, &self.cfg, &self.st).map_err(InvalidState)?;
        sets::check_chunk_sets(&self.st, self.ftl_state()).map_err(InvalidState)?;
        plm::check_plm_state(&self.spec, &self.cfg, &self.st, self.ftl_state()).map_err(InvalidState)
    }

    pub fn maps_loaded(&self) -> bool {
        self.ftl.is_some()
    }

    /// Load the maps now (a server does, rather than stall its first I/O behind it).
    pub fn load_maps(&mut self) -> Result<(), Error> {
        self.ftl().map(|_| ())
    }

    /// Checksums of the maps and the FTL's counters: two controllers with equal fingerprints
    /// have the same FTL state (the timed and untimed paths, a journal replay and the run it
    /// recorded are compared this way). Loads the maps.
    pub fn ftl_fingerprint(&mut self) -> Result<FtlFingerprint, Error> {
        let f = self.ftl()?;
        let (l2p, p2l) = f.maps();
        Ok(FtlFingerprint {
            l2p_xxh3: format!("{:016x}", l2p.checksum()),
            p2l_xxh3: format!("{:016x}", p2l.checksum()),
            counters: f.counters().clone(),
        })
    }

    /// The FTL, loading its maps from the image if needed. Private: the controller is the
    /// only door into the FTL (docs/architecture.md, "Layer rules").
    #[inline]
    pub(super) fn ftl(&mut self) -> Result<&mut Ftl, Error> {
        if self.ftl.is_none() {
            self.load_ftl()?;
        }
        Ok(self.ftl.as_mut().expect("just loaded"))
    }

    /// Load the maps from the image (the first command that needs the FTL).
    #[cold]
    fn load_ftl(&mut self) -> Result<(), Error> {
        let store = self.store.as_ref().expect("an unloaded FTL always has a store");
        let (l2p, p2l) = store.load_maps(self.cfg.logical_ius as usize, self.cfg.physical_ius() as usize)?;
        let meta = self.ftl_meta.as_ref().expect("FTL state present");
        meta.check_loaded_maps(&self.cfg, &l2p, &p2l).map_err(|reason| MapError::Damaged {
            path: store.location(),
            reason: format!("the maps disagree with the saved FTL state: {reason}"),
        })?;
        let meta = self.ftl_meta.take().expect("FTL state present");
        self.ftl = Some(Box::new(Ftl::from_parts(self.cfg.clone(), meta, l2p, p2l)));
        // Loaded maps are never loaded again: let the store go, and with it the files it
        // holds open (a removed generation's maps stop taking disk space).
        self.store = None;
        Ok(())
    }

    /// Take the FTL apart for saving (maps are `None` when never loaded).
    pub fn persist_parts(&self) -> (&ControllerState, &FtlState, Option<(&BigArray, &BigArray)>) {
        match &self.ftl {
            Some(f) => (&self.st, f.state(), Some(f.maps())),
            None => (&self.st, self.ftl_meta.as_ref().expect("FTL state present"), None),
        }
    }

    /// Where to load the maps from when they are first needed (ignored once they are loaded).
    pub fn set_map_store(&mut self, store: Box<dyn MapStore>) {
        self.store = Some(store);
    }

    /// Bring the small FTL state up to date before it is saved.
    pub fn prepare_persist(&mut self) {
        if let Some(f) = self.ftl.as_mut() {
            f.snapshot_buffered_unmapped();
        }
    }
}

/// Namespaces within the spec's limits, on disjoint chunks of the logical space and no
/// larger than their chunks; features within range.
fn check_controller_state(spec: &DriveSpec, cfg: &FtlConfig, st: &ControllerState) -> Result<(), String> {
    let nn = spec.capacity.max_namespaces.value;
    let mut used = vec![false; cfg.chunks() as usize];
    let mut allocated = 0u64;
    let mut dram = 0u64;
    let dram_budget = spec.dram_namespace.as_ref().map_or(0, |d| d.budget_bytes.value);
    for (&id, ns) in &st.namespaces {
        if id != ns.nsid || id == 0 || id > nn {
            return Err(format!("namespace {id} (recorded as {}) outside 1..={nn}", ns.nsid));
        }
        let format = spec.lba_formats().get(ns.flbas as usize).copied();
        if format != Some((ns.lba_bytes, ns.protection.ms)) || ns.nsze == 0 || ns.protection.pi > 3 {
            return Err(format!(
                "namespace {id}: format {} with {}-byte blocks and {} blocks is not valid for this drive",
                ns.flbas, ns.lba_bytes, ns.nsze
            ));
        }
        let bytes = ns.nsze.checked_mul(ns.lba_bytes as u64).ok_or_else(|| format!("namespace {id}: size overflows"))?;
        if ns.dram {
            if !ns.chunks.is_empty() {
                return Err(format!("DRAM namespace {id} owns {} chunks of the NAND logical space", ns.chunks.len()));
            }
            dram += bytes;
            continue;
        }
        if bytes.div_ceil(cfg.iu_bytes as u64) > ns.chunks.len() as u64 * cfg.chunk_ius() as u64 {
            return Err(format!("namespace {id}: {bytes} bytes do not fit its {} chunks", ns.chunks.len()));
        }
        for &c in &ns.chunks {
            match used.get_mut(c as usize) {
                Some(u) if !*u => *u = true,
                Some(_) => return Err(format!("chunk {c} belongs to two namespaces")),
                None => return Err(format!("namespace {id}: chunk {c} beyond the logical space ({} chunks)", cfg.chunks())),
            }
        }
        allocated += bytes;
    }
    if let Some((id, p)) = st.sq_priority.iter().find(|(id, &p)| !st.namespaces.contains_key(id) || p as usize >= SQ_PRIORITIES.len()) {
        return Err(format!("queue priority {p} recorded for namespace {id}: no such namespace or class"));
    }
    if let Some(id) = st.qos.keys().find(|id| !st.namespaces.contains_key(id)) {
        return Err(format!("QoS caps recorded for namespace {id}, which does not exist"));
    }
    if let Some(id) = st.media_keys.keys().find(|&&id| id == 0 || id > nn) {
        return Err(format!("a media key recorded for namespace {id}, outside 1..={nn}"));
    }
    if st.error_log.len() > ERROR_LOG_ENTRIES || st.sanitize.start_ns > st.sanitize.end_ns {
        return Err(format!(
            "error log of {} entries (at most {ERROR_LOG_ENTRIES}) or a sanitize ending before it starts",
            st.error_log.len()
        ));
    }
    if dram > dram_budget {
        return Err(format!("DRAM namespaces hold {dram} bytes of a {dram_budget}-byte DRAM budget"));
    }
    if allocated > spec.capacity.tnvmcap_bytes.value {
        return Err(format!("namespaces allocate {allocated} bytes of {}", spec.capacity.tnvmcap_bytes.value));
    }
    if st.power_state as usize >= spec.power_states.len().max(1) {
        return Err(format!("power state {} does not exist", st.power_state));
    }
    sets::check_sets_state(spec, cfg, st)?;
    ana::check_ana_state(spec.ana.is_some(), st)?;
    lbastatus::check_unrecoverable(st)
}
