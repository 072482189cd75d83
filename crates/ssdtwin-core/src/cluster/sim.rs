//! The discrete-event machinery: virtual time, one event queue ordered by (time, sequence)
//! (a timing wheel, `engine::events`, with buckets of 128 ns; each event packed in two words),
//! CPU cores and thread pools as FIFO servers, Ethernet ports with serialisation, and the
//! drive twins timed through [`DeviceTiming::submit`]. The storage stacks' message flows
//! (flows.rs) are state machines on top of it.

use std::collections::VecDeque;

use super::ceph::RbdClient;
use super::layout::{Drive, Layout};
use super::out::{JobAcc, Level, Window};
use super::spec::{ClusterSpec, StorageProtocol};
use super::ClusterError;
use crate::engine::events::ClusterQueue;
use crate::engine::{HostCmd, HostOp};
use crate::nvme::NsId;
use crate::progress::{self, Budget, Progress};
use crate::stats::LatStat;

pub(super) const NONE: u32 = u32::MAX;

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Ev {
    /// A clone starts issuing.
    Start(u32),
    /// Resume a task at its next step.
    Step(u32),
    /// A CPU burst of `task` ended on `host`, in thread pool `pool` (or none).
    CoreDone { host: u32, task: u32, pool: u32 },
    /// The first bit of `task`'s message reached the switch, bound for host `to`.
    AtSwitch { to: u32, task: u32 },
    /// A drive command of `task` completed.
    DriveDone { drive: u32, task: u32, write: bool, bytes: u64 },
}

const TAG_SHIFT: u32 = 61;
const WRITE_BIT: u64 = 1 << 60;
/// A drive's index takes the 28 bits between the write bit and the task (a lab has at most
/// 64 x 64 drives, spec.rs).
const DRIVE_MASK: u64 = (1 << 28) - 1;

impl Ev {
    /// The event as the queue stores it: a word (kind, then what fits in 61 bits) and the
    /// word it carries (`aux`).
    #[inline(always)]
    fn pack(self) -> (u64, u64) {
        match self {
            Ev::Start(c) => (c as u64, 0),
            Ev::Step(task) => (1 << TAG_SHIFT | task as u64, 0),
            Ev::CoreDone { host, task, pool } => (2 << TAG_SHIFT | task as u64, (host as u64) << 32 | pool as u64),
            Ev::AtSwitch { to, task } => (3 << TAG_SHIFT | task as u64, to as u64),
            Ev::DriveDone { drive, task, write, bytes } => {
                debug_assert!(drive as u64 <= DRIVE_MASK);
                let w = if write { WRITE_BIT } else { 0 };
                (4 << TAG_SHIFT | w | (drive as u64) << 32 | task as u64, bytes)
            }
        }
    }

    #[inline(always)]
    fn unpack(ev: u64, aux: u64) -> Ev {
        let task = ev as u32;
        match ev >> TAG_SHIFT {
            0 => Ev::Start(task),
            1 => Ev::Step(task),
            2 => Ev::CoreDone { host: (aux >> 32) as u32, task, pool: aux as u32 },
            3 => Ev::AtSwitch { to: aux as u32, task },
            _ => Ev::DriveDone { drive: ((ev >> 32) & DRIVE_MASK) as u32, task, write: ev & WRITE_BIT != 0, bytes: aux },
        }
    }
}

/// Which message flow a task follows (flows.rs).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(super) enum Flow {
    #[default]
    Free,
    NvRead,
    NvWrite,
    NvMirror,
    CephRead,
    CephWrite,
    /// A Ceph I/O that crosses an RBD object boundary: one CephRead or CephWrite per object.
    CephSplit,
    CephLocal,
    CephSub,
    KvBatch,
}

/// One unit of work in flight: a client I/O, one of its replica writes, a replica op, or a
/// kv_sync batch. Kept in a slab; `parent` and `joins` tie forked children to their I/O.
#[derive(Clone, Debug, Default)]
pub(super) struct Task {
    pub flow: Flow,
    pub step: u8,
    pub clone: u32,
    pub parent: u32,
    pub joins: u32,
    pub write: bool,
    pub len: u64,
    pub offset: u64,
    pub issued: u64,
    /// Replica (NVMe-oF) or acting-set position (Ceph).
    pub replica: u32,
    pub drive: u32,
    pub byte: u64,
    /// Host index of the storage node the task is working on.
    pub node: u32,
    pub osd: u32,
    pub pg: u32,
    /// Serialisation time of the message being sent.
    pub ser_ns: u64,
}

/// A set of cores (one FIFO multi-server): a host's, or the CPUs its OSDs are pinned to.
pub(super) struct Cpu {
    pub name: String,
    pub cores: u32,
    pub free: u32,
    pub queue: VecDeque<(u32, u32, u64)>,
    pub busy: Level,
}

/// A host: its NIC's transmit side and the switch port that transmits to it (its cores are
/// the CPU set of the same index).
pub(super) struct Host {
    pub name: String,
    pub tx_free: u64,
    pub rx_free: u64,
    pub tx_busy_ns: u64,
    pub rx_busy_ns: u64,
    pub messages: u64,
}

/// Someone waiting for a thread pool: to run a CPU burst in it, or to hold it.
#[derive(Copy, Clone, Debug)]
pub(super) struct Waiter {
    task: u32,
    host: u32,
    cost: u64,
    hold: bool,
}

/// A counting semaphore with a FIFO queue: a pool of threads, or a lock (cap 1).
pub(super) struct Pool {
    pub name: String,
    pub cap: u32,
    pub held: u32,
    waiting: VecDeque<Waiter>,
    pub level: Level,
}

/// Per OSD: where it runs, its pools and its kv_sync batching.
pub(super) struct Osd {
    /// Its drive, its node's host and the CPU set its threads run on.
    pub drive: u32,
    pub host: u32,
    pub cpu: u32,
    pub msgr: u32,
    pub finisher: u32,
    /// First of its `op_shards` shard pools.
    pub shards: u32,
    pub kv_queue: Vec<u32>,
    pub kv_batch: Vec<u32>,
    pub kv_busy: bool,
    pub kv_level: Level,
    pub wal_pos: u64,
    pub kv_batches: u64,
    pub kv_txns: u64,
}

pub(super) struct DriveUse {
    pub level: Level,
    pub reads: u64,
    pub writes: u64,
    /// Bytes of the reads and writes counted: each direction crosses its own side of the
    /// drive's full-duplex host link.
    pub read_bytes: u64,
    pub write_bytes: u64,
}

/// A clone of a job: its generator and accounting, its client's host and volume, its pools.
pub(super) struct Job {
    pub acc: JobAcc,
    pub client: u32,
    pub volume: u32,
    /// The job's CPU: fio, the block layer and the NVMe/TCP queue it submits to run on one
    /// core in Linux (nvme-tcp's io_cpu is the submitting CPU's queue's).
    pub cpu: u32,
    pub librbd: u32,
    pub msgr: u32,
}

pub(super) struct ClusterSim<'a> {
    pub spec: &'a ClusterSpec,
    pub layout: &'a Layout,
    pub drives: &'a mut [Drive],
    pub now: u64,
    queue: ClusterQueue,
    pub events: u64,
    pub tasks: Vec<Task>,
    free_tasks: Vec<u32>,
    pub cpus: Vec<Cpu>,
    pub hosts: Vec<Host>,
    /// Host index of storage node 0 (the clients' hosts come first unless they are the
    /// nodes themselves).
    first_node: u32,
    pub pools: Vec<Pool>,
    pub osds: Vec<Osd>,
    pub drive_use: Vec<DriveUse>,
    pub jobs: Vec<Job>,
    /// Per node: the NVMe-oF target's pool.
    pub target: Vec<u32>,
    /// Per (volume, replica): md raid1's pending count of that mirror.
    pub md_pending: Vec<u32>,
    /// First PG lock (pg_num x replicas locks, one per PG instance on each OSD).
    pub pg_locks: u32,
    pub window: Window,
    /// Latencies and bytes of the I/Os counted, per direction (read, write), all clones.
    pub totals: [LatStat; 2],
    pub total_bytes: [u64; 2],
    ps_per_byte: u128,
    hop_ns: u64,
}

impl<'a> ClusterSim<'a> {
    pub fn new(spec: &'a ClusterSpec, layout: &'a Layout, drives: &'a mut [Drive], window: Window) -> ClusterSim<'a> {
        let t = &spec.cluster;
        let client_hosts = if t.clients_on_nodes { 0 } else { t.clients };
        let names = (0..client_hosts)
            .map(|c| (format!("client{c}"), spec.hosts.client_cores.value))
            .chain((0..t.nodes).map(|n| (format!("node{n}"), spec.hosts.node_cores.value)));
        let (mut hosts, mut cpus) = (Vec::new(), Vec::new());
        for (name, cores) in names {
            cpus.push(Cpu { name: name.clone(), cores, free: cores, queue: VecDeque::new(), busy: Level::default() });
            hosts.push(Host { name, tx_free: 0, rx_free: 0, tx_busy_ns: 0, rx_busy_ns: 0, messages: 0 });
        }
        let first_node = client_hosts;
        let drives_n = drives.len();
        let net = &spec.network;
        let mut sim = ClusterSim {
            spec,
            layout,
            drives,
            now: 0,
            queue: ClusterQueue::default(),
            events: 0,
            tasks: Vec::new(),
            free_tasks: Vec::new(),
            cpus,
            hosts,
            first_node,
            pools: Vec::new(),
            osds: Vec::new(),
            drive_use: (0..drives_n)
                .map(|_| DriveUse { level: Level::default(), reads: 0, writes: 0, read_bytes: 0, write_bytes: 0 })
                .collect(),
            jobs: Vec::new(),
            target: Vec::new(),
            md_pending: vec![0; (spec.volumes() * t.replicas) as usize],
            pg_locks: 0,
            window,
            totals: Default::default(),
            total_bytes: [0; 2],
            ps_per_byte: 8_000_000_000_000u128 / net.link_bits_per_s.value.max(1) as u128,
            hop_ns: net.propagation_ns.value + net.switch_latency_ns.value,
        };
        sim.add_pools();
        sim
    }

    fn pool(&mut self, name: String, cap: u32) -> u32 {
        self.pools.push(Pool { name, cap, held: 0, waiting: VecDeque::new(), level: Level::default() });
        (self.pools.len() - 1) as u32
    }

    fn add_pools(&mut self) {
        let spec = self.spec;
        let t = &spec.cluster;
        for n in 0..t.nodes {
            let p = self.pool(format!("node{n}.target"), spec.nvmeof.target_threads.value);
            self.target.push(p);
        }
        if t.stack != StorageProtocol::CephRbd {
            return;
        }
        let c = &spec.ceph;
        let pinned = spec.hosts.osd_cpus.value;
        let node_cpus: Vec<u32> = (0..t.nodes)
            .map(|n| {
                if pinned == 0 {
                    return self.node_host(n);
                }
                let busy = Level::default();
                self.cpus.push(Cpu { name: format!("node{n}.osd-cpus"), cores: pinned, free: pinned, queue: VecDeque::new(), busy });
                (self.cpus.len() - 1) as u32
            })
            .collect();
        for osd in 0..spec.osds() {
            let drive = osd / t.osds_per_drive.max(1);
            let node = self.drives[drive as usize].node;
            let msgr = self.pool(format!("osd{osd}.msgr"), c.osd_msgr_threads.value);
            let finisher = self.pool(format!("osd{osd}.finisher"), c.osd_finisher_threads.value);
            let shards = self.pools.len() as u32;
            for s in 0..c.op_shards.value {
                self.pool(format!("osd{osd}.op-shard{s}"), c.op_threads_per_shard.value);
            }
            let (wal, _) = self.layout.wal[osd as usize];
            self.osds.push(Osd {
                drive,
                host: self.node_host(node),
                cpu: node_cpus[node as usize],
                msgr,
                finisher,
                shards,
                kv_queue: Vec::new(),
                kv_batch: Vec::new(),
                kv_busy: false,
                kv_level: Level::default(),
                wal_pos: wal,
                kv_batches: 0,
                kv_txns: 0,
            });
        }
        self.pg_locks = self.pools.len() as u32;
        for pg in 0..c.pg_num.value {
            for k in 0..t.replicas {
                self.pool(format!("pg{pg}.{k}.lock"), 1);
            }
        }
    }

    /// The pools of a clone running on client `client` against `volume`.
    pub fn add_job(&mut self, acc: JobAcc, client: u32, volume: u32) {
        let i = self.jobs.len();
        let host = if self.spec.cluster.clients_on_nodes { self.node_host(client) } else { client };
        let cpu = self.pool(format!("client{client}.job{i}.cpu"), 1);
        let (librbd, msgr) = if self.spec.cluster.stack == StorageProtocol::CephRbd && self.spec.ceph.rbd_client == RbdClient::Librbd {
            let c = &self.spec.ceph;
            (
                self.pool(format!("client{client}.job{i}.librbd"), c.client_librbd_threads.value),
                self.pool(format!("client{client}.job{i}.msgr"), c.client_msgr_threads.value),
            )
        } else {
            (NONE, NONE)
        };
        self.jobs.push(Job { acc, client: host, volume, cpu, librbd, msgr });
    }

    pub fn node_host(&self, node: u32) -> u32 {
        self.first_node + node
    }

    /// Storage node index of a node's host (wraps for a client's host: no node).
    pub fn host_node(&self, host: u32) -> u32 {
        host.wrapping_sub(self.first_node)
    }

    // ------------------------------------------------------------------ events

    pub fn push(&mut self, t: u64, ev: Ev) {
        let (ev, aux) = ev.pack();
        self.queue.push_with(t, ev, aux);
    }

    /// Run until no event is left. `keep_going(progress)` is asked every 65,536 events.
    pub fn run(&mut self, keep_going: &mut dyn FnMut(&Progress) -> bool) -> Result<(), ClusterError> {
        let budgets: Vec<Budget> = self.jobs.iter().map(|j| j.acc.gen.spec.budget(None)).collect();
        let unit = progress::unit_of(&budgets);
        while let Some(e) = self.queue.pop() {
            let (t, ev) = (e.t, Ev::unpack(e.ev, e.aux));
            self.now = t;
            self.events += 1;
            if self.events % 65_536 == 0
                && !keep_going(&progress::tally(t, unit, budgets.iter().zip(self.jobs.iter().map(|j| j.acc.spent(t)))))
            {
                return Err(ClusterError::Interrupted(t));
            }
            match ev {
                Ev::Start(c) => self.pump(c)?,
                Ev::Step(task) => self.advance(task)?,
                Ev::CoreDone { host, task, pool } => {
                    self.core_done(host);
                    if pool != NONE {
                        self.release(pool);
                    }
                    self.advance(task)?;
                }
                Ev::AtSwitch { to, task } => self.at_switch(to, task),
                Ev::DriveDone { drive, task, write, bytes } => {
                    let (now, w) = (self.now, self.window);
                    let u = &mut self.drive_use[drive as usize];
                    u.level.add(now, -1, w);
                    // Counted at completion: the controller's FIFO cannot complete more than
                    // its ceiling allows in any window.
                    if w.contains(now) {
                        if write {
                            u.writes += 1;
                            u.write_bytes += bytes;
                        } else {
                            u.reads += 1;
                            u.read_bytes += bytes;
                        }
                    }
                    self.advance(task)?;
                }
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------------ tasks

    pub fn new_task(&mut self, task: Task) -> u32 {
        match self.free_tasks.pop() {
            Some(i) => {
                self.tasks[i as usize] = task;
                i
            }
            None => {
                self.tasks.push(task);
                (self.tasks.len() - 1) as u32
            }
        }
    }

    pub fn free_task(&mut self, id: u32) {
        self.tasks[id as usize].flow = Flow::Free;
        self.free_tasks.push(id);
    }

    /// A forked child is done: its parent continues when the last one is.
    pub fn join(&mut self, child: u32) {
        let parent = self.tasks[child as usize].parent;
        self.free_task(child);
        let p = &mut self.tasks[parent as usize];
        p.joins -= 1;
        if p.joins == 0 {
            let now = self.now;
            self.push(now, Ev::Step(parent));
        }
    }

    // ------------------------------------------------------------------ CPU

    /// A CPU burst of `cost` ns for `task` on CPU set `host` (a host's cores, or the CPUs
    /// its OSDs are pinned to), in thread pool `pool` (NONE: any core). The task resumes when
    /// it ends.
    pub fn work(&mut self, task: u32, host: u32, pool: u32, cost: u64) {
        if pool != NONE {
            let (now, w) = (self.now, self.window);
            let p = &mut self.pools[pool as usize];
            if p.held >= p.cap {
                p.waiting.push_back(Waiter { task, host, cost, hold: false });
                return;
            }
            p.held += 1;
            p.level.add(now, 1, w);
        }
        self.core(task, host, pool, cost);
    }

    fn core(&mut self, task: u32, host: u32, pool: u32, cost: u64) {
        let (now, w) = (self.now, self.window);
        let h = &mut self.cpus[host as usize];
        if h.free == 0 {
            h.queue.push_back((task, pool, cost));
            return;
        }
        h.free -= 1;
        h.busy.add(now, 1, w);
        self.push(now + cost, Ev::CoreDone { host, task, pool });
    }

    fn core_done(&mut self, host: u32) {
        let (now, w) = (self.now, self.window);
        let h = &mut self.cpus[host as usize];
        match h.queue.pop_front() {
            Some((task, pool, cost)) => self.push(now + cost, Ev::CoreDone { host, task, pool }),
            None => {
                h.free += 1;
                h.busy.add(now, -1, w);
            }
        }
    }

    /// Take a thread of `pool` (or its lock) and keep it past CPU bursts and device waits:
    /// true if taken now, false if the task waits and will resume when it gets it.
    pub fn hold(&mut self, task: u32, pool: u32) -> bool {
        let (now, w) = (self.now, self.window);
        let p = &mut self.pools[pool as usize];
        if p.held < p.cap {
            p.held += 1;
            p.level.add(now, 1, w);
            return true;
        }
        p.waiting.push_back(Waiter { task, host: NONE, cost: 0, hold: true });
        false
    }

    /// Give back one thread of `pool`; the first waiter gets it.
    pub fn release(&mut self, pool: u32) {
        let (now, w) = (self.now, self.window);
        let p = &mut self.pools[pool as usize];
        match p.waiting.pop_front() {
            Some(wt) if wt.hold => self.push(now, Ev::Step(wt.task)),
            Some(wt) => self.core(wt.task, wt.host, pool, wt.cost),
            None => {
                p.held -= 1;
                p.level.add(now, -1, w);
            }
        }
    }

    // ------------------------------------------------------------------ network

    /// Bytes on the wire for a message of `bytes`: TCP segments or RoCE packets, each with its
    /// headers and Ethernet framing (64-byte minimum frame).
    pub fn wire_bytes(&self, bytes: u64, rdma: bool) -> u64 {
        let n = &self.spec.network;
        let (payload, header) = if rdma {
            (n.roce_mtu_bytes.value as u64, n.roce_header_bytes.value as u64)
        } else {
            ((n.mtu_bytes.value - n.tcp_ip_header_bytes.value.min(n.mtu_bytes.value - 1)) as u64, n.tcp_ip_header_bytes.value as u64)
        };
        let frames = bytes.div_ceil(payload).max(1);
        let framing = n.frame_overhead_bytes.value as u64;
        // 64-byte minimum frame = 46 bytes of payload after the 14-byte header and 4-byte FCS.
        (bytes + frames * header).max(frames * 46) + frames * framing
    }

    /// Send a message of `bytes` from host `from` to host `to` through the switch; the task
    /// resumes when its last bit has arrived.
    pub fn send(&mut self, task: u32, from: u32, to: u32, bytes: u64, rdma: bool) {
        if from == to {
            // Loopback (a client on the OSD's own node): no NIC; the messengers' CPU is paid.
            let now = self.now;
            self.push(now, Ev::Step(task));
            return;
        }
        let wire = self.wire_bytes(bytes, rdma);
        let ser = (wire as u128 * self.ps_per_byte).div_ceil(1000) as u64;
        let (now, w) = (self.now, self.window);
        let h = &mut self.hosts[from as usize];
        let start = now.max(h.tx_free);
        h.tx_free = start + ser;
        h.tx_busy_ns += w.overlap(start, start + ser);
        h.messages += 1;
        self.tasks[task as usize].ser_ns = ser;
        self.push(start + self.hop_ns, Ev::AtSwitch { to, task });
    }

    /// Cut-through forwarding: the egress port to `to` sends the message as soon as it is
    /// free (FIFO by arrival at the switch).
    fn at_switch(&mut self, to: u32, task: u32) {
        let ser = self.tasks[task as usize].ser_ns;
        let (now, w) = (self.now, self.window);
        let h = &mut self.hosts[to as usize];
        let start = now.max(h.rx_free);
        h.rx_free = start + ser;
        h.rx_busy_ns += w.overlap(start, start + ser);
        let arrive = start + ser + self.spec.network.propagation_ns.value;
        self.push(arrive, Ev::Step(task));
    }

    // ------------------------------------------------------------------ drives

    /// Submit a read or write of `len` bytes at byte `byte` of drive `drive` now; the task
    /// resumes at its completion (the drive twin's timing).
    pub fn drive_io(&mut self, task: u32, drive: u32, write: bool, byte: u64, len: u64) -> Result<(), ClusterError> {
        let (now, w) = (self.now, self.window);
        let d = &mut self.drives[drive as usize];
        let op = if write { HostOp::Write } else { HostOp::Read };
        let cmd = HostCmd { op, nsid: NsId(1), slba: byte / d.lba_bytes, nlb: len / d.lba_bytes };
        let done = d.timing.submit(&mut d.ctrl, now, cmd).map_err(|e| ClusterError::Drive { drive, source: e })?;
        self.drive_use[drive as usize].level.add(now, 1, w);
        self.push(done.max(now), Ev::DriveDone { drive, task, write, bytes: len });
        Ok(())
    }
}
