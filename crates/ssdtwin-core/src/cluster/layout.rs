//! Where the data lives: volume replicas on drives (NVMe-oF), RBD objects in placement
//! groups on OSDs (Ceph), and the drive twins themselves, filled with the volumes' data.

use serde::Serialize;

use super::spec::{ClusterSpec, StorageProtocol};
use super::ClusterError;
use crate::engine::DeviceTiming;
use crate::nvme::{Controller, NsId, Pattern};
use crate::progress::Progress;
use crate::rng::Rng;
use crate::util::splitmix;

/// One storage device: a drive twin (its controller, FTL and timelines) on a node.
pub(super) struct Drive {
    pub ctrl: Controller,
    pub timing: DeviceTiming,
    pub node: u32,
    pub lba_bytes: u64,
}

/// The placement of the data, in bytes on each drive's namespace 1.
pub(super) struct Layout {
    /// Simulated size of every volume.
    pub volume_bytes: u64,
    /// NVMe-oF: per volume, its replicas as (drive, byte offset of the volume on it).
    pub replicas: Vec<Vec<(u32, u64)>>,
    /// Ceph: bytes of a volume each object holds as simulated (the object at 1/scale).
    pub grain_bytes: u64,
    /// Ceph: objects per volume.
    pub objects_per_volume: u64,
    /// Ceph: per PG, its acting set of OSDs, primary first.
    pub pgs: Vec<Vec<u32>>,
    /// Ceph: per object (volume-major), its PG.
    pub object_pg: Vec<u32>,
    /// Ceph: per object and acting-set position, the object's byte offset on that OSD's drive.
    pub object_base: Vec<u64>,
    /// Ceph: per OSD, the start of its RocksDB WAL ring on its drive and the ring's size.
    pub wal: Vec<(u64, u64)>,
    /// Ceph: OSDs on each drive (OSD o is on drive o / osds_per_drive).
    pub osds_per_drive: u32,
    /// Bytes written on each drive before the run (the volumes' data).
    pub used_bytes: Vec<u64>,
}

/// What `ssdtwin cluster info` shows about a cluster before it runs.
#[derive(Clone, Debug, Serialize)]
pub struct LayoutInfo {
    pub stack: String,
    pub drives: u32,
    pub drive_bytes: u64,
    pub volume_bytes: u64,
    pub volumes: u32,
    pub used_bytes: Vec<u64>,
    pub pgs: u32,
    pub osds_per_drive: u32,
    /// Primary PGs on each drive's OSDs (Ceph), or volume replicas per drive (NVMe-oF).
    pub placements: Vec<u32>,
}

impl Layout {
    pub fn new(spec: &ClusterSpec, drive_bytes: u64) -> Result<Layout, ClusterError> {
        let t = &spec.cluster;
        let drives = (t.nodes * t.drives_per_node) as usize;
        let vol = spec.volume_bytes_simulated();
        let mut layout = Layout {
            volume_bytes: vol,
            replicas: Vec::new(),
            grain_bytes: spec.object_grain_bytes(),
            objects_per_volume: 0,
            pgs: Vec::new(),
            object_pg: Vec::new(),
            object_base: Vec::new(),
            wal: Vec::new(),
            osds_per_drive: t.osds_per_drive.max(1),
            used_bytes: vec![0; drives],
        };
        match t.stack {
            StorageProtocol::CephRbd => layout.place_objects(spec),
            _ => layout.place_volumes(spec),
        }
        for (d, &used) in layout.used_bytes.iter().enumerate() {
            if used > drive_bytes {
                return Err(ClusterError::Layout(format!(
                    "drive {d} (node {}) would hold {used} bytes, more than its {drive_bytes} at 1/{}: fewer or smaller volumes",
                    d as u32 / t.drives_per_node,
                    t.scale
                )));
            }
        }
        Ok(layout)
    }

    /// Replica r of volume v on node (v + r) mod nodes (one replica per node), on the
    /// node's drive holding the fewest replicas so far: KumoScale puts a volume replica on
    /// one SSD unless asked to span (kumoscale.kioxia.com, volume management).
    fn place_volumes(&mut self, spec: &ClusterSpec) {
        let t = &spec.cluster;
        let mut count = vec![0u32; self.used_bytes.len()];
        for v in 0..spec.volumes() {
            let mut reps = Vec::new();
            for r in 0..t.replicas {
                let node = (v + r) % t.nodes;
                let first = node * t.drives_per_node;
                let d = (first..first + t.drives_per_node).min_by_key(|&d| (count[d as usize], d)).expect("a node has drives");
                count[d as usize] += 1;
                reps.push((d, self.used_bytes[d as usize]));
                self.used_bytes[d as usize] += self.volume_bytes;
            }
            self.replicas.push(reps);
        }
    }

    /// RBD objects hashed to PGs, each PG on `replicas` OSDs of distinct nodes chosen
    /// pseudo-randomly (what CRUSH's straw2 buckets give with a host failure domain, without
    /// its exact mapping), primary first. Each OSD stores its objects in first-touch order,
    /// then its WAL ring, on its own partition of its drive (the OSDs of a drive one after
    /// another).
    fn place_objects(&mut self, spec: &ClusterSpec) {
        let t = &spec.cluster;
        let c = &spec.ceph;
        let per_node = t.drives_per_node * self.osds_per_drive;
        let mut rng = Rng::new(splitmix(t.seed ^ 0xC0FF_EE00));
        for _ in 0..c.pg_num.value {
            let mut nodes: Vec<u32> = (0..t.nodes).collect();
            for i in 0..t.replicas as usize {
                let j = i + rng.below((nodes.len() - i) as u64) as usize;
                nodes.swap(i, j);
            }
            let acting = nodes[..t.replicas as usize].iter().map(|&n| n * per_node + rng.below(per_node as u64) as u32).collect();
            self.pgs.push(acting);
        }
        self.objects_per_volume = self.volume_bytes / self.grain_bytes;
        let mut osd_used = vec![0u64; spec.osds() as usize];
        for v in 0..spec.volumes() as u64 {
            for o in 0..self.objects_per_volume {
                let pg = (splitmix(t.seed ^ (v << 40) ^ o) % c.pg_num.value as u64) as u32;
                self.object_pg.push(pg);
                for &osd in &self.pgs[pg as usize] {
                    self.object_base.push(osd_used[osd as usize]);
                    osd_used[osd as usize] += self.grain_bytes;
                }
            }
        }
        let ring = (c.wal_ring_bytes.value / t.scale as u64).max(1 << 20) / 4096 * 4096;
        let mut partition = Vec::with_capacity(osd_used.len());
        for (osd, used) in osd_used.iter().enumerate() {
            let drive = &mut self.used_bytes[osd / self.osds_per_drive as usize];
            partition.push(*drive);
            self.wal.push((*drive + used, ring));
            *drive += used + ring;
        }
        let r = t.replicas as usize;
        for (i, base) in self.object_base.iter_mut().enumerate() {
            let obj = i / r;
            let osd = self.pgs[self.object_pg[obj] as usize][i % r];
            *base += partition[osd as usize];
        }
    }

    pub fn info(&self, spec: &ClusterSpec, drive_bytes: u64) -> LayoutInfo {
        let drives = self.used_bytes.len();
        let mut placements = vec![0u32; drives];
        match spec.cluster.stack {
            StorageProtocol::CephRbd => self.pgs.iter().for_each(|a| placements[(a[0] / self.osds_per_drive) as usize] += 1),
            _ => self.replicas.iter().flatten().for_each(|&(d, _)| placements[d as usize] += 1),
        }
        LayoutInfo {
            stack: spec.cluster.stack.name().into(),
            drives: drives as u32,
            drive_bytes,
            volume_bytes: self.volume_bytes,
            volumes: spec.volumes(),
            used_bytes: self.used_bytes.clone(),
            pgs: self.pgs.len() as u32,
            osds_per_drive: self.osds_per_drive,
            placements,
        }
    }
}

/// The drive twins, each filled in fast-forward with what the layout puts on it
/// (sequential 128 KiB writes: the volumes written once, as a benchmark lays them out), so
/// reads reach NAND; the rest of each drive is unwritten.
///
/// `keep_going` is asked as the drives are filled (bytes of all the drives' fills): at a
/// large scale the fill takes minutes, and Ctrl-C waited for it to end.
pub(super) fn build_drives(
    spec: &ClusterSpec,
    layout: &Layout,
    keep_going: &mut dyn FnMut(&Progress) -> bool,
) -> Result<Vec<Drive>, ClusterError> {
    let t = &spec.cluster;
    let dspec = spec.drive_spec()?;
    let mut out = Vec::with_capacity(layout.used_bytes.len());
    let fill_of = |used: u64, ns_bytes: u64| used.div_ceil(1 << 17).saturating_mul(1 << 17).min(ns_bytes);
    let mut total = None;
    let mut filled = 0u64;
    for (d, &used) in layout.used_bytes.iter().enumerate() {
        let fail = |e| ClusterError::Drive { drive: d as u32, source: e };
        let seed = splitmix(t.seed.wrapping_add(d as u64));
        let mut ctrl = Controller::new(dspec.clone(), seed).map_err(fail)?;
        let ns = ctrl.attached(NsId(1)).map_err(fail)?;
        let (ns_bytes, lba_bytes) = (ns.bytes(), ns.lba_bytes as u64);
        let total = *total.get_or_insert_with(|| layout.used_bytes.iter().map(|&u| fill_of(u, ns_bytes)).sum::<u64>());
        let fill = fill_of(used, ns_bytes);
        if fill > 0 {
            let mut ask = |done: u64, _: u64| keep_going(&Progress::bytes(filled + done, total));
            let report = ctrl.precondition(NsId(1), Pattern::Sequential, 1 << 17, fill, seed, &mut ask).map_err(fail)?;
            if report.interrupted {
                return Err(ClusterError::Interrupted(0));
            }
            filled += fill;
        }
        let timing = DeviceTiming::new(ctrl.spec(), ctrl.ftl_config()).map_err(|e| ClusterError::Layout(e.to_string()))?;
        out.push(Drive { ctrl, timing, node: d as u32 / t.drives_per_node, lba_bytes });
    }
    Ok(out)
}
