//! The message flows of the two stacks, as state machines on the simulator (sim.rs). Each
//! flow's steps run in order; a step either continues at once or starts something (a CPU
//! burst, a message, a drive command, a wait for a thread or a lock) whose end resumes the
//! task at its next step.
//!
//! NVMe-oF (KumoScale): the client's md raid1 sends a read to one mirror and a write to all
//! of them; each target hands the command to its drive and answers. Ceph RBD: librbd sends
//! the op to the PG's primary OSD; a read is served there; a write is applied locally and
//! forwarded to the other OSDs of the PG, and acknowledged once all have committed
//! (data write, then the RocksDB WAL commit of the kv_sync thread, then the finisher).

use super::ceph::RbdClient;
use super::sim::{ClusterSim, Ev, Flow, Task, NONE};
use super::spec::{ReadPolicy, StorageProtocol, TargetStack};
use super::ClusterError;

/// What a step did: the task continues at once, or something will resume it.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Next {
    Go,
    Wait,
}
use Next::{Go, Wait};

/// Per-I/O costs of the NVMe-oF transport in use.
struct Transport {
    rdma: bool,
    host_tx: u64,
    host_rx: u64,
    target_rx: u64,
    target_tx: u64,
    /// Latency before the target's receive that is not on a CPU (the kernel target's wake-up,
    /// the kernel TCP stack's receive).
    target_wake: u64,
    /// Latency before the initiator's receive that is not on a CPU (the kernel TCP stack's).
    host_wake: u64,
}

impl ClusterSim<'_> {
    fn transport(&self) -> Transport {
        let n = &self.spec.nvmeof;
        let rdma = self.spec.cluster.stack == StorageProtocol::NvmeofRdma;
        let (host_tx, host_rx) =
            if rdma { (n.rdma_host_tx_ns.value, n.rdma_host_rx_ns.value) } else { (n.tcp_host_tx_ns.value, n.tcp_host_rx_ns.value) };
        let (target_rx, target_tx, target_wake) = match (n.target_stack.value, rdma) {
            (TargetStack::Spdk, true) => (n.rdma_target_rx_ns.value, n.rdma_target_tx_ns.value, 0),
            (TargetStack::Spdk, false) => (n.tcp_target_rx_ns.value, n.tcp_target_tx_ns.value, 0),
            (TargetStack::Kernel, true) => {
                (n.kernel_rdma_target_rx_ns.value, n.kernel_rdma_target_tx_ns.value, n.kernel_target_wake_ns.value)
            }
            (TargetStack::Kernel, false) => {
                (n.kernel_tcp_target_rx_ns.value, n.kernel_tcp_target_tx_ns.value, n.kernel_target_wake_ns.value)
            }
        };
        // Over TCP both ends receive through the kernel's stack (SPDK's target through its
        // sockets); an RDMA completion does not.
        let tcp_rx = if rdma { 0 } else { n.tcp_rx_delay_ns.value };
        Transport { rdma, host_tx, host_rx, target_rx, target_tx, target_wake: target_wake + tcp_rx, host_wake: tcp_rx }
    }

    /// Issue what clone `c` may issue now; finish it when it is done.
    pub fn pump(&mut self, c: u32) -> Result<(), ClusterError> {
        let now = self.now;
        let w = self.window;
        loop {
            let j = &mut self.jobs[c as usize].acc;
            let Some(io) = j.next(now, w) else {
                return Ok(());
            };
            let obj = self.spec.ceph.object_bytes.value;
            let split = self.spec.cluster.stack == StorageProtocol::CephRbd && io.0 % obj + io.2 > obj;
            let flow = match (self.spec.cluster.stack, io.1) {
                // librbd splits an I/O that crosses an RBD object boundary into one op per
                // object (each to its own PG's primary); it completes when all have.
                (StorageProtocol::CephRbd, _) if split => Flow::CephSplit,
                (StorageProtocol::CephRbd, false) => Flow::CephRead,
                (StorageProtocol::CephRbd, true) => Flow::CephWrite,
                (_, false) => Flow::NvRead,
                (_, true) => Flow::NvWrite,
            };
            let task =
                self.new_task(Task { flow, clone: c, parent: NONE, write: io.1, offset: io.0, len: io.2, issued: now, ..Task::default() });
            self.advance(task)?;
        }
    }

    fn finish_io(&mut self, id: u32) -> Result<(), ClusterError> {
        let t = &self.tasks[id as usize];
        let (c, write, len, issued) = (t.clone, t.write, t.len, t.issued);
        self.free_task(id);
        let (now, w) = (self.now, self.window);
        let counted = self.jobs[c as usize].acc.complete(now, write, len, issued, w);
        // The totals keep to the window (fio's clones also count the drain after it).
        if let Some(lat) = counted.filter(|_| w.contains(now)) {
            self.totals[write as usize].add(lat);
            self.total_bytes[write as usize] += len;
        }
        self.pump(c)
    }

    /// Run task `id` from its current step until it waits.
    pub fn advance(&mut self, id: u32) -> Result<(), ClusterError> {
        loop {
            let t = &mut self.tasks[id as usize];
            let step = t.step;
            t.step += 1;
            let next = match t.flow {
                Flow::NvRead => self.nv_read(id, step)?,
                Flow::NvWrite => self.nv_write(id, step)?,
                Flow::NvMirror => self.nv_mirror(id, step)?,
                Flow::CephRead => self.ceph_read(id, step)?,
                Flow::CephWrite => self.ceph_write(id, step)?,
                Flow::CephSplit => self.ceph_split(id, step)?,
                Flow::CephLocal => self.ceph_local(id, step)?,
                Flow::CephSub => self.ceph_sub(id, step)?,
                Flow::KvBatch => self.kv_batch(id, step)?,
                Flow::Free => unreachable!("a freed task was resumed"),
            };
            if next == Wait {
                return Ok(());
            }
        }
    }

    fn client_of(&self, id: u32) -> (u32, u32) {
        let j = &self.jobs[self.tasks[id as usize].clone as usize];
        (j.client, j.volume)
    }

    // ------------------------------------------------------------------ NVMe-oF

    /// A wait off the CPU (the kernel target's wake-up, the kernel TCP stack's receive): the
    /// task resumes `ns` later without holding a CPU (at once when there is none, as for a
    /// polling target over RDMA).
    fn wake(&mut self, id: u32, ns: u64) -> Next {
        if ns == 0 {
            return Go;
        }
        let now = self.now;
        self.push(now + ns, Ev::Step(id));
        Wait
    }

    /// md raid1's choice of mirror for a read of `volume`.
    fn pick_mirror(&self, volume: u32) -> u32 {
        let r = self.spec.cluster.replicas;
        match self.spec.nvmeof.read_policy.value {
            ReadPolicy::First => 0,
            ReadPolicy::LeastPending => (0..r).min_by_key(|&k| (self.md_pending[(volume * r + k) as usize], k)).unwrap_or(0),
        }
    }

    /// Point task `id` at replica `r` of its volume.
    fn at_replica(&mut self, id: u32, volume: u32, r: u32) {
        let (drive, base) = self.layout.replicas[volume as usize][r as usize];
        let node = self.node_host(self.drives[drive as usize].node);
        let t = &mut self.tasks[id as usize];
        t.replica = r;
        t.drive = drive;
        t.byte = base + t.offset;
        t.node = node;
    }

    fn md_pending_add(&mut self, volume: u32, r: u32, delta: i32) {
        let i = (volume * self.spec.cluster.replicas + r) as usize;
        self.md_pending[i] = self.md_pending[i].wrapping_add_signed(delta);
    }

    fn nv_read(&mut self, id: u32, step: u8) -> Result<Next, ClusterError> {
        let (client, volume) = self.client_of(id);
        let tr = self.transport();
        let cpu = self.jobs[self.tasks[id as usize].clone as usize].cpu;
        let c = &self.spec.client;
        let t = &self.tasks[id as usize];
        let (node, target) = (t.node, self.target.get(self.host_node(t.node) as usize).copied());
        match step {
            0 => self.work(id, client, cpu, c.fio_submit_ns.value + self.spec.nvmeof.md_ns.value + tr.host_tx),
            1 => {
                let r = self.pick_mirror(volume);
                self.at_replica(id, volume, r);
                self.md_pending_add(volume, r, 1);
                let node = self.tasks[id as usize].node;
                self.send(id, client, node, self.spec.nvmeof.capsule_bytes.value as u64, tr.rdma);
            }
            2 => return Ok(self.wake(id, tr.target_wake)),
            3 => self.work(id, node, target.expect("a node"), tr.target_rx),
            4 => {
                let t = &self.tasks[id as usize];
                let (drive, byte, len) = (t.drive, t.byte, t.len);
                self.drive_io(id, drive, false, byte, len)?;
            }
            5 => self.work(id, node, target.expect("a node"), tr.target_tx),
            6 => {
                let bytes = self.spec.nvmeof.data_header_bytes.value as u64 + self.tasks[id as usize].len;
                self.send(id, node, client, bytes, tr.rdma);
            }
            7 => return Ok(self.wake(id, tr.host_wake)),
            8 => {
                let r = self.tasks[id as usize].replica;
                self.md_pending_add(volume, r, -1);
                self.work(id, client, cpu, tr.host_rx + c.fio_complete_ns.value);
            }
            _ => self.finish_io(id)?,
        }
        Ok(Wait)
    }

    fn nv_write(&mut self, id: u32, step: u8) -> Result<Next, ClusterError> {
        let (client, volume) = self.client_of(id);
        let tr = self.transport();
        let cpu = self.jobs[self.tasks[id as usize].clone as usize].cpu;
        let c = &self.spec.client;
        let replicas = self.spec.cluster.replicas;
        match step {
            0 => self.work(id, client, cpu, c.fio_submit_ns.value + self.spec.nvmeof.md_ns.value + replicas as u64 * tr.host_tx),
            1 => {
                // md raid1 writes every mirror at once and completes when all have.
                self.tasks[id as usize].joins = replicas;
                for r in 0..replicas {
                    let t = &self.tasks[id as usize];
                    let child = Task { flow: Flow::NvMirror, parent: id, ..t.clone() };
                    let child = self.new_task(Task { step: 0, joins: 0, ..child });
                    self.at_replica(child, volume, r);
                    self.advance(child)?;
                }
            }
            2 => self.work(id, client, cpu, c.fio_complete_ns.value),
            _ => self.finish_io(id)?,
        }
        Ok(Wait)
    }

    fn nv_mirror(&mut self, id: u32, step: u8) -> Result<Next, ClusterError> {
        let (client, volume) = self.client_of(id);
        let tr = self.transport();
        let cpu = self.jobs[self.tasks[id as usize].clone as usize].cpu;
        let t = &self.tasks[id as usize];
        let (node, r, drive, byte, len) = (t.node, t.replica, t.drive, t.byte, t.len);
        let target = self.target[self.host_node(node) as usize];
        match step {
            0 => {
                self.md_pending_add(volume, r, 1);
                self.send(id, client, node, self.spec.nvmeof.capsule_bytes.value as u64 + len, tr.rdma);
            }
            1 => return Ok(self.wake(id, tr.target_wake)),
            2 => self.work(id, node, target, tr.target_rx),
            3 => self.drive_io(id, drive, true, byte, len)?,
            4 => self.work(id, node, target, tr.target_tx),
            5 => self.send(id, node, client, self.spec.nvmeof.response_bytes.value as u64, tr.rdma),
            6 => return Ok(self.wake(id, tr.host_wake)),
            7 => {
                self.md_pending_add(volume, r, -1);
                self.work(id, client, cpu, tr.host_rx);
            }
            _ => self.join(id),
        }
        Ok(Wait)
    }

    // ------------------------------------------------------------------ Ceph

    /// Point task `id` at acting-set position `k` of the PG holding its offset (the object
    /// grain it falls in: each object holds 1/scale of its bytes as simulated).
    fn at_osd(&mut self, id: u32, k: u32) {
        let (_, volume) = self.client_of(id);
        let grain = self.layout.grain_bytes;
        let r = self.spec.cluster.replicas;
        let t = &self.tasks[id as usize];
        let obj = volume as u64 * self.layout.objects_per_volume + t.offset / grain;
        let pg = self.layout.object_pg[obj as usize];
        let osd = self.layout.pgs[pg as usize][k as usize];
        let byte = self.layout.object_base[(obj * r as u64 + k as u64) as usize] + t.offset % grain;
        let o = &self.osds[osd as usize];
        let (drive, node) = (o.drive, o.host);
        let t = &mut self.tasks[id as usize];
        (t.pg, t.osd, t.drive, t.byte, t.node, t.replica) = (pg, osd, drive, byte, node, k);
    }

    /// The op-shard pool of the task's OSD and PG, and the PG instance's lock.
    fn shard_and_lock(&self, id: u32) -> (u32, u32) {
        let t = &self.tasks[id as usize];
        let c = &self.spec.ceph;
        let shard = self.osds[t.osd as usize].shards + t.pg % c.op_shards.value;
        let lock = self.pg_locks + t.pg * self.spec.cluster.replicas + t.replica;
        (shard, lock)
    }

    /// The OSD's CPU set and messenger pool (NONE before the task has an OSD).
    fn osd_cpu_msgr(&self, osd: u32) -> (u32, u32) {
        self.osds.get(osd as usize).map_or((NONE, NONE), |o| (o.cpu, o.msgr))
    }

    /// The client's side of an op leaving: librbd's op thread, then its messenger (or the
    /// kernel client on the job's core). `step` 0 is librbd, 1 the send.
    fn client_send(&mut self, id: u32, step: u8, write: bool) -> Next {
        let (client, _) = self.client_of(id);
        let j = &self.jobs[self.tasks[id as usize].clone as usize];
        let (cpu, librbd, cmsgr) = (j.cpu, j.librbd, j.msgr);
        let c = &self.spec.ceph;
        let krbd = c.rbd_client == RbdClient::Krbd;
        let (lib, msgr) = if write {
            (c.client_librbd_write_ns.value, c.client_msgr_write_ns.value)
        } else {
            (c.client_librbd_read_ns.value, c.client_msgr_read_ns.value)
        };
        match (step, krbd) {
            (0, true) => return Go,
            (0, false) => self.work(id, client, librbd, lib),
            (_, true) => self.work(id, client, cpu, c.krbd_tx_ns.value),
            (_, false) => self.work(id, client, cmsgr, msgr),
        }
        Wait
    }

    /// The client's side of the reply arriving: its messenger (or the kernel client).
    fn client_receive(&mut self, id: u32, write: bool) {
        let (client, _) = self.client_of(id);
        let j = &self.jobs[self.tasks[id as usize].clone as usize];
        let (cpu, cmsgr) = (j.cpu, j.msgr);
        let c = &self.spec.ceph;
        if c.rbd_client == RbdClient::Krbd {
            self.work(id, client, cpu, c.krbd_rx_ns.value);
        } else {
            self.work(id, client, cmsgr, if write { c.client_msgr_write_ns.value } else { c.client_msgr_read_ns.value });
        }
    }

    fn ceph_read(&mut self, id: u32, step: u8) -> Result<Next, ClusterError> {
        let (client, _) = self.client_of(id);
        let cpu = self.jobs[self.tasks[id as usize].clone as usize].cpu;
        let c = &self.spec.ceph;
        let hdr = c.message_header_bytes.value as u64;
        let t = &self.tasks[id as usize];
        let (node, osd, len) = (t.node, t.osd, t.len);
        let (ocpu, osd_msgr) = self.osd_cpu_msgr(osd);
        match step {
            0 => self.work(id, client, cpu, self.spec.client.fio_submit_ns.value),
            1 => return Ok(self.client_send(id, 0, false)),
            2 => {
                self.at_osd(id, 0);
                return Ok(self.client_send(id, 1, false));
            }
            3 => self.send(id, client, node, hdr, false),
            4 => self.work(id, ocpu, osd_msgr, c.osd_msgr_ns.value),
            5 => return Ok(self.hold_shard(id)),
            6 => return Ok(self.hold_lock(id)),
            7 => self.work(id, ocpu, NONE, c.osd_op_ns.value),
            8 => self.work(id, ocpu, NONE, c.osd_bluestore_read_ns.value),
            9 => {
                // The classic OSD reads synchronously in its op thread, PG lock held.
                let t = &self.tasks[id as usize];
                let (drive, byte) = (t.drive, t.byte);
                self.drive_io(id, drive, false, byte, len)?;
            }
            10 => {
                let (shard, lock) = self.shard_and_lock(id);
                self.release(lock);
                self.release(shard);
                return Ok(Go);
            }
            11 => self.work(id, ocpu, osd_msgr, c.osd_msgr_ns.value),
            12 => self.send(id, node, client, hdr + len, false),
            13 => self.client_receive(id, false),
            // One object's part of a split I/O: fio completes the whole I/O once.
            14 if self.tasks[id as usize].parent != NONE => self.join(id),
            14 => self.work(id, client, cpu, self.spec.client.fio_complete_ns.value),
            _ => self.finish_io(id)?,
        }
        Ok(Wait)
    }

    /// An I/O that crosses an RBD object boundary, as librbd serves it: fio submits it once,
    /// librbd sends one op per object it touches (each part to its object's PG, as
    /// [`Self::ceph_read`] or [`Self::ceph_write`] from librbd on), and fio completes it
    /// when every part has.
    fn ceph_split(&mut self, id: u32, step: u8) -> Result<Next, ClusterError> {
        let (client, _) = self.client_of(id);
        let cpu = self.jobs[self.tasks[id as usize].clone as usize].cpu;
        match step {
            0 => self.work(id, client, cpu, self.spec.client.fio_submit_ns.value),
            1 => {
                let obj = self.spec.ceph.object_bytes.value;
                let t = &self.tasks[id as usize];
                let (start, end, write) = (t.offset, t.offset + t.len, t.write);
                let flow = if write { Flow::CephWrite } else { Flow::CephRead };
                let parts: Vec<(u64, u64)> = {
                    let mut v = Vec::new();
                    let mut at = start;
                    while at < end {
                        let next = ((at / obj + 1) * obj).min(end);
                        v.push((at, next - at));
                        at = next;
                    }
                    v
                };
                self.tasks[id as usize].joins = parts.len() as u32;
                for (offset, len) in parts {
                    let t = &self.tasks[id as usize];
                    // From step 1 (librbd): fio's submission was the whole I/O's.
                    let child = Task { flow, parent: id, offset, len, step: 1, joins: 0, ..t.clone() };
                    let child = self.new_task(child);
                    self.advance(child)?;
                }
            }
            2 => self.work(id, client, cpu, self.spec.client.fio_complete_ns.value),
            _ => self.finish_io(id)?,
        }
        Ok(Wait)
    }

    fn hold_shard(&mut self, id: u32) -> Next {
        let (shard, _) = self.shard_and_lock(id);
        if self.hold(id, shard) {
            Go
        } else {
            Wait
        }
    }

    fn hold_lock(&mut self, id: u32) -> Next {
        let (_, lock) = self.shard_and_lock(id);
        if self.hold(id, lock) {
            Go
        } else {
            Wait
        }
    }

    fn ceph_write(&mut self, id: u32, step: u8) -> Result<Next, ClusterError> {
        let (client, _) = self.client_of(id);
        let cpu = self.jobs[self.tasks[id as usize].clone as usize].cpu;
        let c = &self.spec.ceph;
        let hdr = c.message_header_bytes.value as u64;
        let t = &self.tasks[id as usize];
        let (node, osd, len) = (t.node, t.osd, t.len);
        let (ocpu, osd_msgr) = self.osd_cpu_msgr(osd);
        match step {
            0 => self.work(id, client, cpu, self.spec.client.fio_submit_ns.value),
            1 => return Ok(self.client_send(id, 0, true)),
            2 => {
                self.at_osd(id, 0);
                return Ok(self.client_send(id, 1, true));
            }
            3 => self.send(id, client, node, hdr + len, false),
            4 => self.work(id, ocpu, osd_msgr, c.osd_msgr_ns.value),
            5 => return Ok(self.hold_shard(id)),
            6 => return Ok(self.hold_lock(id)),
            7 => self.work(id, ocpu, NONE, c.osd_op_ns.value),
            8 => self.work(id, ocpu, NONE, c.osd_bluestore_write_ns.value),
            9 => {
                // The transaction is queued and the replica ops sent: the op thread and the
                // PG lock are free again; the reply waits for every copy to commit.
                let (shard, lock) = self.shard_and_lock(id);
                self.release(lock);
                self.release(shard);
                let replicas = self.spec.cluster.replicas;
                self.tasks[id as usize].joins = replicas;
                for k in 0..replicas {
                    let t = &self.tasks[id as usize];
                    let flow = if k == 0 { Flow::CephLocal } else { Flow::CephSub };
                    let child = Task { flow, parent: id, step: 0, joins: 0, ..t.clone() };
                    let child = self.new_task(child);
                    if k > 0 {
                        self.at_osd(child, k);
                    }
                    self.advance(child)?;
                }
            }
            10 => self.work(id, ocpu, osd_msgr, c.osd_msgr_ns.value),
            11 => self.send(id, node, client, hdr, false),
            12 => self.client_receive(id, true),
            13 if self.tasks[id as usize].parent != NONE => self.join(id),
            13 => self.work(id, client, cpu, self.spec.client.fio_complete_ns.value),
            _ => self.finish_io(id)?,
        }
        Ok(Wait)
    }

    /// The primary's own copy: data write, kv commit, finisher.
    fn ceph_local(&mut self, id: u32, step: u8) -> Result<Next, ClusterError> {
        let t = &self.tasks[id as usize];
        let (osd, drive, byte, len) = (t.osd, t.drive, t.byte, t.len);
        match step {
            0 => self.drive_io(id, drive, true, byte, len)?,
            1 => self.kv_enqueue(osd, id)?,
            2 => {
                let o = &self.osds[osd as usize];
                let (cpu, fin) = (o.cpu, o.finisher);
                self.work(id, cpu, fin, self.spec.ceph.osd_finisher_ns.value);
            }
            _ => self.join(id),
        }
        Ok(Wait)
    }

    /// One replica op: sent by the primary, applied and committed on the replica's OSD,
    /// acknowledged back to the primary.
    fn ceph_sub(&mut self, id: u32, step: u8) -> Result<Next, ClusterError> {
        let parent = self.tasks[id as usize].parent;
        let (pnode, posd) = (self.tasks[parent as usize].node, self.tasks[parent as usize].osd);
        let c = &self.spec.ceph;
        let hdr = c.message_header_bytes.value as u64;
        let t = &self.tasks[id as usize];
        let (node, osd, drive, byte, len) = (t.node, t.osd, t.drive, t.byte, t.len);
        let (p, o) = (&self.osds[posd as usize], &self.osds[osd as usize]);
        let (pcpu, pmsgr, cpu, msgr, fin) = (p.cpu, p.msgr, o.cpu, o.msgr, o.finisher);
        match step {
            0 => self.work(id, pcpu, pmsgr, c.osd_msgr_ns.value),
            1 => self.send(id, pnode, node, hdr + len, false),
            2 => self.work(id, cpu, msgr, c.osd_msgr_ns.value),
            3 => return Ok(self.hold_shard(id)),
            4 => return Ok(self.hold_lock(id)),
            5 => self.work(id, cpu, NONE, c.osd_op_ns.value),
            6 => self.work(id, cpu, NONE, c.osd_bluestore_write_ns.value),
            7 => {
                let (shard, lock) = self.shard_and_lock(id);
                self.release(lock);
                self.release(shard);
                self.drive_io(id, drive, true, byte, len)?;
            }
            8 => self.kv_enqueue(osd, id)?,
            9 => self.work(id, cpu, fin, c.osd_finisher_ns.value),
            10 => self.work(id, cpu, msgr, c.osd_msgr_ns.value),
            11 => self.send(id, node, pnode, hdr, false),
            12 => self.work(id, pcpu, pmsgr, c.osd_msgr_ns.value),
            _ => self.join(id),
        }
        Ok(Wait)
    }

    /// Queue a transaction for the OSD's kv_sync thread; it resumes once its batch's WAL
    /// write has completed.
    fn kv_enqueue(&mut self, osd: u32, id: u32) -> Result<(), ClusterError> {
        let o = &mut self.osds[osd as usize];
        o.kv_queue.push(id);
        if o.kv_busy {
            return Ok(());
        }
        o.kv_busy = true;
        let (node, drive) = (o.host, o.drive);
        let batch = self.new_task(Task { flow: Flow::KvBatch, osd, node, drive, parent: NONE, ..Task::default() });
        self.advance(batch)
    }

    /// BlueStore's kv_sync thread: take every transaction queued, commit them to RocksDB in
    /// one write batch (one WAL write, padded to 4 KiB), wake them, repeat while any wait.
    fn kv_batch(&mut self, id: u32, step: u8) -> Result<Next, ClusterError> {
        let t = &self.tasks[id as usize];
        let (osd, drive) = (t.osd, t.drive);
        let (now, w) = (self.now, self.window);
        let c = &self.spec.ceph;
        match step {
            0 => {
                let o = &mut self.osds[osd as usize];
                o.kv_batch = std::mem::take(&mut o.kv_queue);
                o.kv_level.add(now, 1, w);
                let n = o.kv_batch.len() as u64;
                let cpu = o.cpu;
                self.work(id, cpu, NONE, n * c.osd_kv_commit_ns.value);
            }
            1 => {
                let (base, ring) = self.layout.wal[osd as usize];
                let o = &mut self.osds[osd as usize];
                let bytes = (o.kv_batch.len() as u64 * c.wal_bytes_per_txn.value as u64).div_ceil(4096).max(1) * 4096;
                let bytes = bytes.min(ring);
                if o.wal_pos + bytes > base + ring {
                    o.wal_pos = base;
                }
                let at = o.wal_pos;
                o.wal_pos += bytes;
                if w.contains(now) {
                    o.kv_batches += 1;
                    o.kv_txns += o.kv_batch.len() as u64;
                }
                self.drive_io(id, drive, true, at, bytes)?;
            }
            _ => {
                let o = &mut self.osds[osd as usize];
                o.kv_level.add(now, -1, w);
                let batch = std::mem::take(&mut o.kv_batch);
                let more = !o.kv_queue.is_empty();
                for txn in batch {
                    self.push(now, Ev::Step(txn));
                }
                if more {
                    self.tasks[id as usize].step = 0;
                    return Ok(Go);
                }
                self.osds[osd as usize].kv_busy = false;
                self.free_task(id);
            }
        }
        Ok(Wait)
    }
}
