//! Replicated block storage built from drive twins: storage nodes holding drives, clients
//! running fio, one Ethernet switch, and the software of two stacks (NVMe-oF with client-side
//! md raid1 replication, KumoScale style; Ceph RBD with primary-copy replication and
//! BlueStore) as CPU bursts on cores and thread pools. A discrete-event model in virtual
//! nanoseconds: no wall clock, one seed, the same inputs give the same outputs bit for bit.
//!
//! Every drive is a real [`Controller`](crate::nvme::Controller) with its FTL, timed by the
//! engine's [`DeviceTiming`](crate::engine::DeviceTiming) through
//! [`submit`](crate::engine::DeviceTiming::submit), the door the fio runner uses too; this
//! module never names the FTL. docs/models.md ("Replicated block storage") has the model,
//! its parameters and their sources.

mod ceph;
mod flows;
mod layout;
mod out;
mod sim;
pub mod spec;
#[cfg(test)]
mod tests;

pub use ceph::{Ceph, RbdClient, CEPH_VERSIONS};
pub use layout::LayoutInfo;
pub use out::{ClusterRun, DirTotals, DriveLoad, ResourceUse};
pub use spec::{ClusterSpec, InitOptions, ReadPolicy, StorageProtocol, FIELD_RANGES};

use std::collections::BTreeSet;

use crate::progress::Progress;
use crate::spec::SpecError;
use crate::stats::LatStat;
use crate::workload::{JobError, JobSpec};
use layout::{build_drives, Layout};
use out::{JobAcc, Window};
use sim::{ClusterSim, Ev};

/// Why a cluster cannot be built or run.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("cluster layout: {0}")]
    Layout(String),
    #[error("drive {drive}: {source}")]
    Drive { drive: u32, source: crate::nvme::Error },
    #[error(transparent)]
    Job(#[from] JobError),
    #[error("{0}")]
    Unsupported(String),
    #[error("interrupted at {0} ns of virtual time")]
    Interrupted(u64),
}

/// Bytes of namespace 1 of each drive (the factory namespace of the scaled preset).
fn drive_bytes(spec: &ClusterSpec) -> Result<u64, ClusterError> {
    let d = spec.drive_spec()?;
    let lba = d.capacity.lba_bytes.value.first().copied().unwrap_or(512).max(1) as u64;
    Ok(d.capacity.tnvmcap_bytes.value / lba * lba)
}

/// Where the data would live, without building the drives (`ssdtwin cluster info`).
pub fn layout_info(spec: &ClusterSpec) -> Result<LayoutInfo, ClusterError> {
    let bytes = drive_bytes(spec)?;
    Ok(Layout::new(spec, bytes)?.info(spec, bytes))
}

/// The client a job section names with `filename=clientN` (fio's target: that client's
/// volumes), if it names one.
fn named_client(job: &JobSpec) -> Option<Result<u32, String>> {
    let n = job.filename.as_deref()?.strip_prefix("client")?;
    Some(n.parse::<u32>().map_err(|_| format!("filename=client{n}")))
}

/// Client of each clone: a job section runs on the client its `filename=clientN` names, or
/// else the n-th section (fio's `job_index`, in order of appearance) on client n. There must
/// be one section per client.
fn clients_of(spec: &ClusterSpec, jobs: &[JobSpec]) -> Result<Vec<u32>, ClusterError> {
    let clients = spec.cluster.clients;
    // A client named that the lab lacks is the user's mistake to show first: counting the
    // sections would only say how many there are.
    let mut named = Vec::with_capacity(jobs.len());
    for j in jobs {
        named.push(match named_client(j) {
            Some(Ok(c)) if c < clients => Some(c),
            Some(Ok(c)) => {
                return Err(ClusterError::Unsupported(format!(
                    "job '{}': filename=client{c}: the lab has {clients} client(s), client0 to client{}",
                    j.name,
                    clients - 1
                )))
            }
            Some(Err(what)) => {
                return Err(ClusterError::Unsupported(format!("job '{}': {what}: not a client (client0 to client{})", j.name, clients - 1)))
            }
            None => None,
        });
    }
    let sections: BTreeSet<u32> = jobs.iter().map(|j| j.job_index).collect();
    if sections.len() != clients as usize {
        return Err(ClusterError::Unsupported(format!(
            "{} job section(s) for {clients} client(s): write one job section per client (numjobs for its fio processes)",
            sections.len()
        )));
    }
    let order: Vec<u32> = sections.into_iter().collect();
    let out: Vec<u32> = jobs
        .iter()
        .zip(named)
        .map(|(j, n)| n.unwrap_or_else(|| order.iter().position(|&s| s == j.job_index).expect("collected") as u32))
        .collect();
    let on: BTreeSet<u32> = out.iter().copied().collect();
    if on.len() != clients as usize {
        let missing: Vec<String> = (0..clients).filter(|c| !on.contains(c)).map(|c| format!("client{c}")).collect();
        return Err(ClusterError::Unsupported(format!("no job section runs on {} (one section per client)", missing.join(", "))));
    }
    Ok(out)
}

/// Run `jobs` (fio's engine contract, docs/fio.md §3, one section per client volume, each
/// resolved against a volume of [`ClusterSpec::volume_bytes_simulated`] bytes) on a cluster
/// built afresh from `spec`. `keep_going(progress)` is asked every 65,536 events with how far
/// the run is ([`Progress`]); false stops the run (Ctrl-C).
pub fn run(spec: &ClusterSpec, jobs: Vec<JobSpec>, keep_going: &mut dyn FnMut(&Progress) -> bool) -> Result<ClusterRun, ClusterError> {
    let bytes = drive_bytes(spec)?;
    let layout = Layout::new(spec, bytes)?;
    let clients = clients_of(spec, &jobs)?;
    let mut accs = Vec::with_capacity(jobs.len());
    for job in jobs {
        if job.target_size_bytes != layout.volume_bytes {
            return Err(ClusterError::Unsupported(format!(
                "job '{}' was resolved for a {}-byte target; the cluster's volumes are {} bytes",
                job.name, job.target_size_bytes, layout.volume_bytes
            )));
        }
        accs.push(JobAcc::new(job, layout.volume_bytes)?);
    }
    let window = Window {
        start: accs.iter().map(|a| a.window().start).max().unwrap_or(0),
        end: accs.iter().map(|a| a.window().end).min().unwrap_or(u64::MAX),
    };
    let mut drives = build_drives(spec, &layout, keep_going)?;
    let mut sim = ClusterSim::new(spec, &layout, &mut drives, window);
    // The k-th clone on a client is its k-th fio process and uses that process's volume.
    let procs = spec.cluster.fio_procs_per_client;
    let mut seen = vec![0u32; spec.cluster.clients as usize];
    for (acc, client) in accs.into_iter().zip(clients) {
        let k = seen[client as usize];
        seen[client as usize] += 1;
        sim.add_job(acc, client, client * procs + k % procs);
    }
    for c in 0..sim.jobs.len() as u32 {
        sim.push(0, Ev::Start(c));
    }
    sim.run(keep_going)?;
    Ok(sim.finish())
}

pub(crate) fn totals(lat: &LatStat, bytes: u64, secs: f64) -> DirTotals {
    // A percentile is its histogram bucket's midpoint, as fio's (stat.c,
    // calc_clat_percentiles, which does not clamp), so it can lie above the largest latency
    // seen or below the smallest. These totals are read side by side with lat_max_ns, so
    // each percentile is held to [min, max]: the bucket holds the true value and so do they.
    let within_seen = |p: f64| if lat.n > 0 { lat.percentile(p).clamp(lat.min_ns, lat.max_ns) } else { 0 };
    DirTotals {
        ios: lat.n,
        bytes,
        iops: lat.n as f64 / secs,
        lat_mean_ns: lat.mean(),
        lat_p50_ns: within_seen(50.0),
        lat_p99_ns: within_seen(99.0),
        lat_max_ns: if lat.n > 0 { lat.max_ns } else { 0 },
    }
}

impl ClusterSim<'_> {
    /// Close every counter at the end of the run and gather the results.
    fn finish(mut self) -> ClusterRun {
        let end = self.jobs.iter().map(|j| j.acc.end_ns).max().unwrap_or(0);
        let w = Window { start: self.window.start, end: self.window.end.min(end) };
        let secs = (w.end.saturating_sub(w.start)).max(1) as f64;
        let per = |area: u128| area as f64 / secs;
        let mut res = Vec::new();
        for c in &mut self.cpus {
            c.busy.settle(end, w);
            let cores = c.cores as f64;
            let name = if c.name.ends_with("osd-cpus") { c.name.clone() } else { format!("{}.cores", c.name) };
            res.push(ResourceUse {
                name,
                kind: "cores".into(),
                servers: c.cores,
                utilisation: per(c.busy.area) / cores,
                mean_in_use: per(c.busy.area),
            });
        }
        for h in &self.hosts {
            for (kind, busy) in [("nic-tx", h.tx_busy_ns), ("nic-rx", h.rx_busy_ns)] {
                let u = busy as f64 / secs;
                res.push(ResourceUse { name: format!("{}.{kind}", h.name), kind: kind.into(), servers: 1, utilisation: u, mean_in_use: u });
            }
        }
        let locks = if self.pg_locks > 0 {
            let n = (self.spec.ceph.pg_num.value * self.spec.cluster.replicas) as usize;
            self.pg_locks as usize..self.pg_locks as usize + n
        } else {
            0..0
        };
        let mut shards: Vec<(String, u128, u32)> = Vec::new();
        let mut lock_max: Option<ResourceUse> = None;
        for (i, p) in self.pools.iter_mut().enumerate() {
            p.level.settle(end, w);
            let u = ResourceUse {
                name: p.name.clone(),
                kind: if locks.contains(&i) { "lock".into() } else { "threads".into() },
                servers: p.cap,
                utilisation: per(p.level.area) / p.cap as f64,
                mean_in_use: per(p.level.area),
            };
            if locks.contains(&i) {
                if lock_max.as_ref().is_none_or(|m| u.utilisation > m.utilisation) {
                    lock_max = Some(u);
                }
            } else if let Some((osd, _)) = p.name.split_once(".op-shard") {
                match shards.last_mut() {
                    Some(s) if s.0 == osd => {
                        s.1 += p.level.area;
                        s.2 += p.cap;
                    }
                    _ => shards.push((osd.to_string(), p.level.area, p.cap)),
                }
            } else {
                res.push(u);
            }
        }
        for (osd, area, cap) in shards {
            res.push(ResourceUse {
                name: format!("{osd}.op-threads"),
                kind: "threads".into(),
                servers: cap,
                utilisation: per(area) / cap as f64,
                mean_in_use: per(area),
            });
        }
        if let Some(mut m) = lock_max {
            m.name = format!("{} (busiest PG lock)", m.name);
            res.push(m);
        }
        let (mut kv_batches, mut kv_txns) = (0, 0);
        for (i, o) in self.osds.iter_mut().enumerate() {
            o.kv_level.settle(end, w);
            let u = per(o.kv_level.area);
            res.push(ResourceUse { name: format!("osd{i}.kv-sync"), kind: "kv-sync".into(), servers: 1, utilisation: u, mean_in_use: u });
            kv_batches += o.kv_batches;
            kv_txns += o.kv_txns;
        }
        let timing = self.drives.first().and_then(|d| d.ctrl.spec().timing.as_ref());
        let ctrl_max = timing.map_or(1, |t| t.ctrl_max_iops.value.max(1));
        let link_bytes_per_s = timing.map_or(0, |t| t.host_link_bytes_per_s.value);
        let mut drives = Vec::new();
        for (i, u) in self.drive_use.iter_mut().enumerate() {
            u.level.settle(end, w);
            let node = self.drives[i].node;
            let cps = (u.reads + u.writes) as f64 / secs * 1e9;
            let load = cps / ctrl_max as f64;
            // Each direction of the host link carries its own data (full duplex).
            let link_load =
                if link_bytes_per_s > 0 { u.read_bytes.max(u.write_bytes) as f64 / secs * 1e9 / link_bytes_per_s as f64 } else { 0.0 };
            // A drive serves many commands at once: its saturation is its command rate
            // against the controller's ceiling, or for large blocks its data against the
            // host link, not the time it has one outstanding.
            res.push(ResourceUse {
                name: format!("drive{i}"),
                kind: "drive".into(),
                servers: 1,
                utilisation: load.max(link_load),
                mean_in_use: per(u.level.area),
            });
            drives.push(DriveLoad {
                drive: i as u32,
                node,
                reads: u.reads,
                writes: u.writes,
                commands_per_s: cps,
                ctrl_load: load,
                busy: u.level.busy as f64 / secs,
                mean_outstanding: per(u.level.area),
            });
        }
        // Busiest first; ties by name, so the order never depends on anything but the run.
        res.sort_by(|a, b| b.utilisation.total_cmp(&a.utilisation).then_with(|| a.name.cmp(&b.name)));
        let mut outstanding = 0u128;
        for j in &mut self.jobs {
            j.acc.inflight_level.settle(end, w);
            outstanding += j.acc.inflight_level.area;
        }
        let s = secs / 1e9;
        let read = totals(&self.totals[0], self.total_bytes[0], s);
        let write = totals(&self.totals[1], self.total_bytes[1], s);
        ClusterRun {
            stack: self.spec.cluster.stack.name().into(),
            seed: self.spec.cluster.seed,
            scale: self.spec.cluster.scale,
            clones: self.jobs.into_iter().map(|j| j.acc.out()).collect(),
            window_ns: [w.start, w.end],
            read,
            write,
            outstanding_mean: per(outstanding),
            resources: res,
            drives,
            kv_batches,
            kv_txns,
            events: self.events,
            simulated_ns: end,
        }
    }
}
