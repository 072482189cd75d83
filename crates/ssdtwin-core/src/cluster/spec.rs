//! The cluster description: topology, hosts, network and the per-I/O cost of every software
//! stage, each cost `{ value, source }` like the drive presets. `ssdtwin cluster init` writes
//! it as `cluster.toml`; every number in it can be edited for a what-if. docs/models.md
//! ("Replicated block storage") explains where each default comes from.

use serde::{Deserialize, Serialize};

use super::ceph::{ceph_table, Ceph, CephChoice, RbdClient, CEPH_VERSIONS};
use crate::spec::{DriveSpec, Sourced, SpecError};

/// The storage stack of the cluster.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StorageProtocol {
    /// NVMe-oF over TCP, replicated by the client's md raid1 (KumoScale).
    NvmeofTcp,
    /// The same over RDMA (RoCEv2).
    NvmeofRdma,
    /// Ceph RBD: librbd clients, primary-copy replication between OSDs, BlueStore.
    CephRbd,
}

impl StorageProtocol {
    pub fn name(self) -> &'static str {
        match self {
            StorageProtocol::NvmeofTcp => "nvmeof-tcp",
            StorageProtocol::NvmeofRdma => "nvmeof-rdma",
            StorageProtocol::CephRbd => "ceph-rbd",
        }
    }

    pub fn parse(text: &str) -> Option<StorageProtocol> {
        [StorageProtocol::NvmeofTcp, StorageProtocol::NvmeofRdma, StorageProtocol::CephRbd].into_iter().find(|s| s.name() == text)
    }
}

/// Which replica an md raid1 read goes to.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadPolicy {
    /// The mirror with the fewest I/Os pending (Linux md raid1 `read_balance` for
    /// non-rotational members), the first such mirror on a tie.
    LeastPending,
    /// Always the first replica.
    First,
}

/// Which NVMe-oF target software serves a node's drives.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetStack {
    /// A polling user-space target (SPDK's nvmf_tgt; KumoScale's data path): its poll groups
    /// spin on `target_threads` cores, so a command is picked up as soon as it arrives.
    Spdk,
    /// The Linux kernel target (nvmet-tcp, nvmet-rdma): interrupt driven; a command waits
    /// `kernel_target_wake_ns` for its interrupt and work item before the target's CPU runs.
    Kernel,
}

fn one() -> u32 {
    1
}

fn spdk_target() -> Sourced<TargetStack> {
    Sourced::new(
        TargetStack::Spdk,
        "[SRC] a polling user-space target, as KumoScale's data path is (KumoScale data plane page) and SPDK's nvmf_tgt is",
    )
}

fn kernel_tcp_target_rx() -> Sourced<u64> {
    Sourced::new(4385, "[DERIVED] half of 8,770 ns: the Linux NVMe/TCP host serves 96K 4 KiB IOPS per core (i10 2020, kernel 4.20), 10,417 ns per I/O, less fio's 1,645 ns (client.fio_*); the kernel target does the host's transport work mirrored ([ASSUMED] the same cost)")
}

fn kernel_tcp_target_tx() -> Sourced<u64> {
    Sourced::new(4385, "[DERIVED] the other half of 8,770 ns (see kernel_tcp_target_rx_ns)")
}

fn kernel_rdma_target_rx() -> Sourced<u64> {
    Sourced::new(1261, "[DERIVED] half of 2,522 ns: the Linux NVMe/RDMA host saturates an SSD with 2.5x fewer cores than NVMe/TCP (i10 2020), 4,167 ns per I/O, less fio's 1,645 ns; the kernel target does the host's transport work mirrored ([ASSUMED] the same cost)")
}

fn kernel_rdma_target_tx() -> Sourced<u64> {
    Sourced::new(1261, "[DERIVED] the other half of 2,522 ns (see kernel_rdma_target_rx_ns)")
}

fn tcp_rx_delay() -> Sourced<u64> {
    Sourced::new(3750, "[DERIVED] the middle of 3.5-4 us: the Linux kernel's network stack keeps a 100-byte round trip 7-8 us longer than kernel bypass on the same hardware by not polling (4 us: the interrupt and the wake-up of the receiver) and by handing each packet to another core for SoftIRQ (3-4 us), besides 1 us of epoll on a CPU (Homa/Linux 2021, Linux 5.4, TCP's round trip 23.4 us against 3.7 us); [ASSUMED] half of it on each of a round trip's two receives, the same over TCP and for SPDK's target polling its sockets (its NIC interrupt and SoftIRQ are the kernel's)")
}

fn kernel_target_wake() -> Sourced<u64> {
    Sourced::new(1111, "[DERIVED] the kernel NVMe/RDMA target adds 2.8 us more than SPDK's to an unloaded 4 KiB read (11.7 against 8.9 us over local flash, NVMe-oF characterization 2017); less the difference of their CPU (2,522 - 833 ns) leaves 1,111 ns not on a CPU: interrupt delivery and the wake-up of the target's work. [ASSUMED] the same for TCP")
}

fn unpinned() -> Sourced<u32> {
    Sourced::new(0, "[ASSUMED] the OSDs are not pinned: they run on every core of their node")
}

/// `threads` CPU threads per OSD, a node's OSDs pinned together (`cluster init --osd-threads`).
fn pinned(threads: u32, o: &InitOptions) -> Sourced<u32> {
    let osds = o.drives_per_node.saturating_mul(o.osds_per_drive);
    Sourced::new(
        threads.saturating_mul(osds),
        format!("[ASSUMED] the lab's: {threads} threads per OSD x {osds} OSDs per node, pinned together (cluster init --osd-threads)"),
    )
}

/// What the lab is: counts and sizes the user chose (no sources: they are the question).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    pub stack: StorageProtocol,
    pub nodes: u32,
    pub drives_per_node: u32,
    /// Drive preset (`ssdtwin models`); every drive is this preset's twin.
    pub drive: String,
    /// The drives run at 1/scale (docs/models.md, "Scale"); volumes shrink with them.
    pub scale: u32,
    pub clients: u32,
    pub replicas: u32,
    /// Size of each client's volume at full scale.
    pub volume_bytes: u64,
    /// Seed of every random choice of the cluster (drive seeds, placement).
    pub seed: u64,
    /// OSDs sharing each drive (Ceph), each on its own partition of the namespace.
    #[serde(default = "one")]
    pub osds_per_drive: u32,
    /// fio processes on each client, each with its own volume (an RBD image per fio process,
    /// or an NVMe-oF volume): `clients x fio_procs_per_client` volumes.
    #[serde(default = "one")]
    pub fio_procs_per_client: u32,
    /// The clients run on the storage nodes themselves (client i on node i), as in a lab
    /// that colocates fio with the OSDs.
    #[serde(default)]
    pub clients_on_nodes: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hosts {
    pub node_cores: Sourced<u32>,
    pub client_cores: Sourced<u32>,
    /// Logical CPUs a node's OSDs are pinned to, all of them together (numactl
    /// --physcpubind on every ceph-osd); 0: not pinned, the node's cores.
    #[serde(default = "unpinned")]
    pub osd_cpus: Sourced<u32>,
}

/// One Ethernet port per host on one switch, and the framing of each transport.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    pub name: String,
    pub link_bits_per_s: Sourced<u64>,
    pub mtu_bytes: Sourced<u32>,
    /// Preamble, MAC header, FCS and inter-frame gap of every frame.
    pub frame_overhead_bytes: Sourced<u32>,
    pub propagation_ns: Sourced<u64>,
    /// Port-to-port latency of the switch (cut-through).
    pub switch_latency_ns: Sourced<u64>,
    /// IP and TCP headers of every TCP segment.
    pub tcp_ip_header_bytes: Sourced<u32>,
    /// IP, UDP, BTH and ICRC of every RoCEv2 packet.
    pub roce_header_bytes: Sourced<u32>,
    /// RoCE path MTU (payload per packet).
    pub roce_mtu_bytes: Sourced<u32>,
}

/// The load generator on each client (fio), common to both stacks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Client {
    /// fio, libaio and the block layer per I/O at submission, on the job's CPU.
    pub fio_submit_ns: Sourced<u64>,
    /// The same at completion.
    pub fio_complete_ns: Sourced<u64>,
}

/// NVMe-oF with client-side replication (Linux md raid1 over one namespace per replica).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Nvmeof {
    pub read_policy: Sourced<ReadPolicy>,
    /// The target software: SPDK-like polling (the `*_target_*_ns` costs) or the Linux
    /// kernel target (the `kernel_*` costs and a wake-up per command).
    #[serde(default = "spdk_target")]
    pub target_stack: Sourced<TargetStack>,
    /// md raid1 per I/O (mapping, choosing a mirror, cloning bios for writes).
    pub md_ns: Sourced<u64>,
    /// Host (initiator) transport per command sent, TCP.
    pub tcp_host_tx_ns: Sourced<u64>,
    /// Host transport per completion received, TCP.
    pub tcp_host_rx_ns: Sourced<u64>,
    pub rdma_host_tx_ns: Sourced<u64>,
    pub rdma_host_rx_ns: Sourced<u64>,
    /// Target per command received and handed to the drive, TCP.
    pub tcp_target_rx_ns: Sourced<u64>,
    /// Target per completion sent, TCP.
    pub tcp_target_tx_ns: Sourced<u64>,
    pub rdma_target_rx_ns: Sourced<u64>,
    pub rdma_target_tx_ns: Sourced<u64>,
    /// The Linux kernel target's CPU per command received and per completion sent, TCP.
    #[serde(default = "kernel_tcp_target_rx")]
    pub kernel_tcp_target_rx_ns: Sourced<u64>,
    #[serde(default = "kernel_tcp_target_tx")]
    pub kernel_tcp_target_tx_ns: Sourced<u64>,
    /// The same over RDMA.
    #[serde(default = "kernel_rdma_target_rx")]
    pub kernel_rdma_target_rx_ns: Sourced<u64>,
    #[serde(default = "kernel_rdma_target_tx")]
    pub kernel_rdma_target_tx_ns: Sourced<u64>,
    /// The kernel target's latency per command not spent on a CPU (the interrupt and the
    /// wake-up of its work), before its receive runs.
    #[serde(default = "kernel_target_wake")]
    pub kernel_target_wake_ns: Sourced<u64>,
    /// Latency of a message received through the kernel's TCP stack that is not spent on a
    /// CPU (the NIC's interrupt, the hand-off to the SoftIRQ's core, the receiver's wake-up):
    /// before the target's receive of a command and the initiator's receive of its answer,
    /// over TCP only (RDMA completions bypass the kernel's stack).
    #[serde(default = "tcp_rx_delay")]
    pub tcp_rx_delay_ns: Sourced<u64>,
    /// Threads of the target on each storage node (its poll groups; for the kernel target,
    /// the cores its interrupts and work items run on).
    pub target_threads: Sourced<u32>,
    /// Command capsule (PDU header + SQE), without in-capsule data.
    pub capsule_bytes: Sourced<u32>,
    /// Header of the PDU carrying read data (with the success flag: no separate response).
    pub data_header_bytes: Sourced<u32>,
    /// Response capsule of a write (PDU header + CQE).
    pub response_bytes: Sourced<u32>,
}

/// The whole cluster: `cluster.toml`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSpec {
    pub cluster: Topology,
    pub hosts: Hosts,
    pub network: Network,
    pub client: Client,
    pub nvmeof: Nvmeof,
    pub ceph: Ceph,
}

/// What `ssdtwin cluster init` asks for; a missing field takes the brief's lab.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InitOptions {
    pub stack: String,
    pub nodes: u32,
    pub drives_per_node: u32,
    pub drive: String,
    pub scale: u32,
    pub clients: u32,
    pub replicas: u32,
    pub network: String,
    pub volume_bytes: u64,
    pub seed: u64,
    pub ceph_version: u32,
    pub osds_per_drive: u32,
    pub fio_procs_per_client: u32,
    pub clients_on_nodes: bool,
    /// librbd or krbd.
    pub rbd_client: String,
    pub msgr_version: u32,
    /// Costs the lab sets instead of the defaults, each with its source (absent: the default;
    /// `--like` copies a lab's with theirs).
    pub node_cores: Option<Sourced<u32>>,
    pub client_cores: Option<Sourced<u32>>,
    pub osd_cpus: Option<Sourced<u32>>,
    /// CPU threads per OSD: the node's OSDs pinned together to this many each (sets
    /// `osd_cpus` when that is absent).
    pub osd_threads: Option<u32>,
    pub pg_num: Option<Sourced<u32>>,
    /// The whole `[network]` table of a lab, edits and sources kept (`--like` copies it);
    /// absent: the preset `network` names. When given, `network` is not read.
    pub network_table: Option<Network>,
}

impl Default for InitOptions {
    /// The brief's lab (KIOXIA KumoScale vs Ceph study): 3 nodes x 5 CM5, 4 clients, 100 GbE,
    /// four 200 GiB volumes replicated 3x.
    fn default() -> Self {
        InitOptions {
            stack: "nvmeof-tcp".into(),
            nodes: 3,
            drives_per_node: 5,
            drive: "kioxia-cm5-r-3.84t".into(),
            scale: 64,
            clients: 4,
            replicas: 3,
            network: "100GbE".into(),
            volume_bytes: 200 << 30,
            seed: 1,
            ceph_version: 14,
            osds_per_drive: 1,
            fio_procs_per_client: 1,
            clients_on_nodes: false,
            rbd_client: "librbd".into(),
            msgr_version: 2,
            node_cores: None,
            client_cores: None,
            osd_cpus: None,
            osd_threads: None,
            pg_num: None,
            network_table: None,
        }
    }
}

/// Ethernet rates `--network` accepts.
pub const NETWORKS: &[(&str, u64)] = &[
    ("10GbE", 10_000_000_000),
    ("25GbE", 25_000_000_000),
    ("40GbE", 40_000_000_000),
    ("100GbE", 100_000_000_000),
    ("200GbE", 200_000_000_000),
];

fn s<T>(value: T, source: &str) -> Sourced<T> {
    Sourced::new(value, source)
}

impl Network {
    pub fn preset(name: &str) -> Option<Network> {
        let &(name, bits) = NETWORKS.iter().find(|(n, _)| n.eq_ignore_ascii_case(name))?;
        Some(Network {
            name: name.to_string(),
            link_bits_per_s: s(bits, "[SRC] IEEE 802.3: the line rate of the named Ethernet"),
            mtu_bytes: s(1500, "[ASSUMED] the Ethernet default; the KIOXIA KumoScale vs Ceph study does not say jumbo frames were used"),
            frame_overhead_bytes: s(38, "[SRC] IEEE 802.3: preamble+SFD 8, MAC header 14, FCS 4, inter-frame gap 12 bytes"),
            propagation_ns: s(25, "[ASSUMED] 5 m of cable at 5 ns/m per hop"),
            switch_latency_ns: s(750, "[ASSUMED] port to port through a cut-through data-centre switch, 0.5-1 us; the middle"),
            tcp_ip_header_bytes: s(
                52,
                "[SRC] IETF RFC 791, 9293, 7323: IPv4 20 + TCP 20 + the timestamps option 12 (on by default in Linux)",
            ),
            roce_header_bytes: s(44, "[SRC] IBTA RoCEv2 annex A17: IPv4 20 + UDP 8 + BTH 12 + ICRC 4"),
            roce_mtu_bytes: s(
                1024,
                "[SRC] IBTA RoCEv2 annex A17: the largest path MTU (256, 512, 1024, 2048 or 4096) that fits a 1500-byte Ethernet MTU",
            ),
        })
    }
}

impl ClusterSpec {
    /// The defaults for a lab: every cost from docs/models.md ("Replicated block storage").
    pub fn from_options(o: &InitOptions) -> Result<ClusterSpec, SpecError> {
        let origin = "cluster init";
        let mut problems = Vec::new();
        let stack = StorageProtocol::parse(&o.stack);
        if stack.is_none() {
            problems.push(format!("--stack '{}': choose nvmeof-tcp, nvmeof-rdma or ceph-rbd", o.stack));
        }
        let network = o.network_table.clone().or_else(|| Network::preset(&o.network));
        if network.is_none() {
            let names: Vec<&str> = NETWORKS.iter().map(|n| n.0).collect();
            problems.push(format!("--network '{}': choose one of {}", o.network, names.join(", ")));
        }
        if !CEPH_VERSIONS.contains(&o.ceph_version) {
            problems.push(format!(
                "--ceph-version {}: choose 14 (Nautilus) or 18 (Reef), the releases with a cost table; edit the [ceph] costs of cluster.toml for another",
                o.ceph_version
            ));
        }
        let rbd_client = RbdClient::parse(&o.rbd_client);
        if rbd_client.is_none() {
            problems.push(format!("--rbd-client '{}': choose librbd or krbd", o.rbd_client));
        }
        if !(1..=2).contains(&o.msgr_version) {
            problems.push(format!("--msgr {}: choose 1 or 2 (the messenger protocol)", o.msgr_version));
        }
        if !problems.is_empty() {
            return Err(SpecError { origin: origin.into(), problems });
        }
        let spec = ClusterSpec {
            cluster: Topology {
                stack: stack.expect("checked"),
                nodes: o.nodes,
                drives_per_node: o.drives_per_node,
                drive: o.drive.clone(),
                scale: o.scale,
                clients: o.clients,
                replicas: o.replicas,
                volume_bytes: o.volume_bytes,
                seed: o.seed,
                osds_per_drive: o.osds_per_drive,
                fio_procs_per_client: o.fio_procs_per_client,
                clients_on_nodes: o.clients_on_nodes,
            },
            hosts: Hosts {
                node_cores: o.node_cores.clone().unwrap_or_else(|| s(32, "[ASSUMED] a two-socket server of 2 x 16 cores: KumoScale storage nodes are standard one- or two-socket servers (KumoScale data plane page); the KIOXIA KumoScale vs Ceph study gives no CPU")),
                client_cores: o.client_cores.clone().unwrap_or_else(|| s(32, "[ASSUMED] as the storage nodes; the KIOXIA KumoScale vs Ceph study gives no CPU")),
                osd_cpus: o.osd_cpus.clone().unwrap_or_else(|| o.osd_threads.map_or_else(unpinned, |n| pinned(n, o))),
            },
            network: network.expect("checked"),
            client: Client {
                fio_submit_ns: s(822, "[DERIVED] half of 1/608K s: fio with libaio reaches 608K 4 KiB random-read IOPS on one core, block layer and NVMe driver included (Axboe 2019)"),
                fio_complete_ns: s(823, "[DERIVED] the other half of 1/608K s (see fio_submit_ns)"),
            },
            nvmeof: Nvmeof {
                read_policy: s(ReadPolicy::LeastPending, "[SRC] KumoScale replicates with the Linux md layer in the client (KumoScale data protection page); md raid1 sends a read to the non-rotational mirror with the fewest I/Os pending (Linux md raid1)"),
                target_stack: spdk_target(),
                md_ns: s(300, "[ASSUMED] md raid1 per I/O: map, pick a mirror, clone bios; small against the transport"),
                tcp_host_tx_ns: s(1678, "[DERIVED] half of 3,355 ns: the Linux NVMe/TCP initiator at 200K IOPS per core ([ASSUMED] the middle of 100-300K, bounded by the 70K per core of iSCSI (i10 2020) and the 850K of a dataplane (ReFlex 2017)) is 5,000 ns per I/O, less fio's 1,645 ns (client.fio_*)"),
                tcp_host_rx_ns: s(1677, "[DERIVED] the other half of 3,355 ns (see tcp_host_tx_ns)"),
                rdma_host_tx_ns: s(500, "[ASSUMED] NVMe/RDMA initiator: posting a send and its completion, no TCP stack; a quarter of the TCP cost"),
                rdma_host_rx_ns: s(500, "[ASSUMED] as rdma_host_tx_ns"),
                tcp_target_rx_ns: s(588, "[DERIVED] half of 1/850K s: ReFlex serves 850K IOPS per core over TCP/IP (ReFlex 2017), a polling user-space target as KumoScale's data path is (KumoScale data plane page)"),
                tcp_target_tx_ns: s(588, "[DERIVED] the other half of 1/850K s (see tcp_target_rx_ns)"),
                rdma_target_rx_ns: s(417, "[DERIVED] half of 1/1.2M s: SPDK's NVMe-oF RDMA target served almost 1.2M 4 KiB random-read IOPS on one core (SPDK RDMA per-core thread 2018)"),
                rdma_target_tx_ns: s(416, "[DERIVED] the other half of 1/1.2M s (see rdma_target_rx_ns)"),
                kernel_tcp_target_rx_ns: kernel_tcp_target_rx(),
                kernel_tcp_target_tx_ns: kernel_tcp_target_tx(),
                kernel_rdma_target_rx_ns: kernel_rdma_target_rx(),
                kernel_rdma_target_tx_ns: kernel_rdma_target_tx(),
                kernel_target_wake_ns: kernel_target_wake(),
                tcp_rx_delay_ns: tcp_rx_delay(),
                target_threads: s(32, "[ASSUMED] the target's poll groups use every core of the node; KumoScale's core allocation is not published"),
                capsule_bytes: s(72, "[SRC] NVMe/TCP transport specification: command capsule PDU of an 8-byte common header and a 64-byte SQE; 4 KiB writes travel in the capsule (SPDK's default in-capsule data size is 4096, SPDK NVMe-oF reports)"),
                data_header_bytes: s(24, "[SRC] NVMe/TCP transport specification: C2HData PDU header; with its SUCCESS flag no response capsule follows"),
                response_bytes: s(24, "[SRC] NVMe/TCP transport specification: response capsule of an 8-byte common header and a 16-byte CQE"),
            },
            ceph: {
                let choice = CephChoice { version: o.ceph_version, rbd_client: rbd_client.expect("checked"), msgr_version: o.msgr_version };
                let mut c = ceph_table(choice);
                if let Some(pg) = &o.pg_num {
                    c.pg_num = pg.clone();
                }
                c
            },
        };
        spec.validate(origin)?;
        Ok(spec)
    }

    pub fn from_toml(text: &str, origin: &str) -> Result<ClusterSpec, SpecError> {
        let spec: ClusterSpec =
            toml::from_str(text).map_err(|e| SpecError { origin: origin.to_string(), problems: vec![toml_problem(text, &e)] })?;
        spec.validate(origin)?;
        Ok(spec)
    }

    /// The TOML a cluster folder keeps, every `{ value, source }` on one line as in the
    /// presets.
    pub fn to_toml(&self) -> String {
        let body = inline_sourced(&toml::to_string_pretty(self).expect("a ClusterSpec always serialises"));
        format!(
            "# ssdtwin cluster (docs/models.md, \"Replicated block storage\"). Every cost is {{ value, source }};\n\
             # edit any of them for a what-if. [cluster] stack = nvmeof-tcp | nvmeof-rdma | ceph-rbd.\n{body}"
        )
    }

    /// The drive preset at the cluster's scale.
    pub fn drive_spec(&self) -> Result<DriveSpec, SpecError> {
        DriveSpec::preset(&self.cluster.drive)?.scaled(self.cluster.scale)
    }

    /// What an RBD object holds of a volume as simulated: 1/scale of the object, so that a
    /// volume keeps its full-scale number of objects (and its PGs their full-scale load
    /// spread), in whole 4 KiB blocks.
    pub fn object_grain_bytes(&self) -> u64 {
        let obj = self.ceph.object_bytes.value.max(4096);
        (obj / self.cluster.scale.max(1) as u64 / 4096).max(1) * 4096
    }

    /// Each volume as simulated: 1/scale of its size, in whole object grains (and so whole
    /// 4 KiB blocks), at least one.
    pub fn volume_bytes_simulated(&self) -> u64 {
        let grain = self.object_grain_bytes();
        (self.cluster.volume_bytes / self.cluster.scale.max(1) as u64 / grain).max(1) * grain
    }

    /// OSDs in the lab (Ceph): every drive's `osds_per_drive`.
    pub fn osds(&self) -> u32 {
        self.cluster.nodes * self.cluster.drives_per_node * self.cluster.osds_per_drive
    }

    /// Check every field; report all problems at once.
    pub fn validate(&self, origin: &str) -> Result<(), SpecError> {
        let mut p = Vec::new();
        let t = &self.cluster;
        let mut count = |path: &str, v: u32, lo: u32, hi: u32| {
            if v < lo || v > hi {
                p.push(format!("cluster.{path}: must be {lo}..={hi} (got {v})"));
            }
        };
        for (path, v) in [
            ("nodes", t.nodes),
            ("drives_per_node", t.drives_per_node),
            ("clients", t.clients),
            ("scale", t.scale),
            ("osds_per_drive", t.osds_per_drive),
            ("fio_procs_per_client", t.fio_procs_per_client),
        ] {
            let (lo, hi) = range_of(&format!("cluster.{path}"));
            count(path, v, lo as u32, hi as u32);
        }
        // With the nodes out of range their own line says so; a replicas range of 1..=0 beside
        // it told nothing.
        if (1..=64).contains(&t.nodes) && (t.replicas < 1 || t.replicas > t.nodes) {
            p.push(format!("cluster.replicas: must be 1..={} (one replica per storage node at most; got {})", t.nodes, t.replicas));
        }
        if t.volume_bytes == 0 || t.volume_bytes % 4096 != 0 {
            p.push(format!("cluster.volume_bytes: must be a positive multiple of 4096 (got {})", t.volume_bytes));
        }
        if t.clients_on_nodes && t.clients > t.nodes {
            p.push(format!("cluster.clients_on_nodes: {} clients on {} storage nodes (client i runs on node i)", t.clients, t.nodes));
        }
        if t.osds_per_drive > 1 && t.stack != StorageProtocol::CephRbd {
            p.push(format!(
                "cluster.osds_per_drive: {} OSDs per drive on a {} cluster: only Ceph has OSDs",
                t.osds_per_drive,
                t.stack.name()
            ));
        }
        self.check_costs(&mut p);
        self.check_ceph(&mut p);
        match DriveSpec::preset(&t.drive) {
            Err(e) => p.push(format!("cluster.drive '{}': {}", t.drive, e.problems.join("; "))),
            Ok(d) if d.timing.is_none() => p.push(format!("cluster.drive '{}': the preset has no [timing] section", t.drive)),
            Ok(d) => self.check_capacity(&d, &mut p),
        }
        if p.is_empty() {
            Ok(())
        } else {
            Err(SpecError { origin: origin.to_string(), problems: p })
        }
    }

    /// The Ceph choices that are not costs: a version with a table, the messenger, PGs.
    fn check_ceph(&self, p: &mut Vec<String>) {
        let c = &self.ceph;
        if !CEPH_VERSIONS.contains(&c.version) {
            p.push(format!("ceph.version: 14 or 18, the releases with a cost table (got {})", c.version));
        }
        if !(1..=2).contains(&c.msgr_version) {
            p.push(format!("ceph.msgr_version: 1 or 2 (got {})", c.msgr_version));
        }
        if !c.pg_num.value.is_power_of_two() {
            p.push(format!("ceph.pg_num: must be a power of two (got {})", c.pg_num.value));
        }
        let h = &self.hosts;
        if h.osd_cpus.value > h.node_cores.value {
            p.push(format!(
                "hosts.osd_cpus: {} CPUs for the OSDs of a node of {} cores (hosts.node_cores)",
                h.osd_cpus.value, h.node_cores.value
            ));
        }
    }

    /// Volumes in the lab: one per fio process.
    pub fn volumes(&self) -> u32 {
        self.cluster.clients * self.cluster.fio_procs_per_client
    }

    fn check_capacity(&self, d: &DriveSpec, p: &mut Vec<String>) {
        let t = &self.cluster;
        if t.nodes == 0 || t.drives_per_node == 0 || t.replicas == 0 || t.replicas > t.nodes || t.volume_bytes == 0 {
            return;
        }
        let drive = d.capacity.tnvmcap_bytes.value as u128;
        let osd_min = self.ceph.osd_min_bytes.value as u128;
        if t.stack == StorageProtocol::CephRbd && t.osds_per_drive > 0 && drive / (t.osds_per_drive as u128) < osd_min {
            p.push(format!(
                "cluster.osds_per_drive: {} OSDs on a {drive}-byte drive leave {} bytes each, less than an OSD's {osd_min} (ceph.osd_min_bytes); at most {}",
                t.osds_per_drive,
                drive / t.osds_per_drive as u128,
                drive / osd_min.max(1)
            ));
        }
        let pool = drive * t.nodes as u128 * t.drives_per_node as u128;
        let need = t.volume_bytes as u128 * self.volumes() as u128 * t.replicas as u128;
        if need > pool {
            p.push(format!(
                "cluster.volume_bytes: {} volumes of {} bytes x {} replicas need {need} bytes, more than the pool's {pool} ({} drives of {drive})",
                self.volumes(),
                t.volume_bytes,
                t.replicas,
                t.nodes * t.drives_per_node
            ));
        } else if t.stack != StorageProtocol::CephRbd && t.volume_bytes as u128 > drive {
            p.push(format!(
                "cluster.volume_bytes: {} bytes is larger than one drive ({drive}); an NVMe-oF volume replica lives on one drive",
                t.volume_bytes
            ));
        }
        if let Err(e) = d.scaled(t.scale.max(1)) {
            p.push(format!("cluster.scale: {}", e.problems.join("; ")));
        }
    }

    fn check_costs(&self, p: &mut Vec<String>) {
        let mut ns = |path: &str, v: &Sourced<u64>| {
            if v.source.trim().is_empty() {
                p.push(format!("{path}.source: every parameter needs a source"));
            }
            if v.value > 1_000_000_000 {
                p.push(format!("{path}: must be 0..=1000000000 ns (got {})", v.value));
            }
        };
        let n = &self.nvmeof;
        let c = &self.ceph;
        let net = &self.network;
        for (path, v) in [
            ("client.fio_submit_ns", &self.client.fio_submit_ns),
            ("client.fio_complete_ns", &self.client.fio_complete_ns),
            ("nvmeof.md_ns", &n.md_ns),
            ("nvmeof.tcp_host_tx_ns", &n.tcp_host_tx_ns),
            ("nvmeof.tcp_host_rx_ns", &n.tcp_host_rx_ns),
            ("nvmeof.rdma_host_tx_ns", &n.rdma_host_tx_ns),
            ("nvmeof.rdma_host_rx_ns", &n.rdma_host_rx_ns),
            ("nvmeof.tcp_target_rx_ns", &n.tcp_target_rx_ns),
            ("nvmeof.tcp_target_tx_ns", &n.tcp_target_tx_ns),
            ("nvmeof.rdma_target_rx_ns", &n.rdma_target_rx_ns),
            ("nvmeof.rdma_target_tx_ns", &n.rdma_target_tx_ns),
            ("nvmeof.kernel_tcp_target_rx_ns", &n.kernel_tcp_target_rx_ns),
            ("nvmeof.kernel_tcp_target_tx_ns", &n.kernel_tcp_target_tx_ns),
            ("nvmeof.kernel_rdma_target_rx_ns", &n.kernel_rdma_target_rx_ns),
            ("nvmeof.kernel_rdma_target_tx_ns", &n.kernel_rdma_target_tx_ns),
            ("nvmeof.kernel_target_wake_ns", &n.kernel_target_wake_ns),
            ("nvmeof.tcp_rx_delay_ns", &n.tcp_rx_delay_ns),
            ("ceph.client_librbd_read_ns", &c.client_librbd_read_ns),
            ("ceph.client_librbd_write_ns", &c.client_librbd_write_ns),
            ("ceph.client_msgr_read_ns", &c.client_msgr_read_ns),
            ("ceph.client_msgr_write_ns", &c.client_msgr_write_ns),
            ("ceph.krbd_tx_ns", &c.krbd_tx_ns),
            ("ceph.krbd_rx_ns", &c.krbd_rx_ns),
            ("ceph.osd_msgr_ns", &c.osd_msgr_ns),
            ("ceph.osd_op_ns", &c.osd_op_ns),
            ("ceph.osd_bluestore_read_ns", &c.osd_bluestore_read_ns),
            ("ceph.osd_bluestore_write_ns", &c.osd_bluestore_write_ns),
            ("ceph.osd_kv_commit_ns", &c.osd_kv_commit_ns),
            ("ceph.osd_finisher_ns", &c.osd_finisher_ns),
            ("network.propagation_ns", &net.propagation_ns),
            ("network.switch_latency_ns", &net.switch_latency_ns),
        ] {
            ns(path, v);
        }
        let mut count = |path: &str, v: &Sourced<u32>| {
            let (lo, hi) = range_of(path);
            if v.source.trim().is_empty() {
                p.push(format!("{path}.source: every parameter needs a source"));
            }
            if (v.value as u64) < lo || v.value as u64 > hi {
                p.push(format!("{path}: must be {lo}..={hi} (got {})", v.value));
            }
        };
        count("hosts.node_cores", &self.hosts.node_cores);
        count("hosts.client_cores", &self.hosts.client_cores);
        count("hosts.osd_cpus", &self.hosts.osd_cpus);
        count("nvmeof.target_threads", &n.target_threads);
        count("ceph.pg_num", &c.pg_num);
        count("ceph.op_shards", &c.op_shards);
        count("ceph.op_threads_per_shard", &c.op_threads_per_shard);
        count("ceph.osd_msgr_threads", &c.osd_msgr_threads);
        count("ceph.osd_finisher_threads", &c.osd_finisher_threads);
        count("ceph.client_librbd_threads", &c.client_librbd_threads);
        count("ceph.client_msgr_threads", &c.client_msgr_threads);
        count("network.mtu_bytes", &net.mtu_bytes);
        count("network.frame_overhead_bytes", &net.frame_overhead_bytes);
        count("network.tcp_ip_header_bytes", &net.tcp_ip_header_bytes);
        count("network.roce_header_bytes", &net.roce_header_bytes);
        count("network.roce_mtu_bytes", &net.roce_mtu_bytes);
        count("nvmeof.capsule_bytes", &n.capsule_bytes);
        count("nvmeof.data_header_bytes", &n.data_header_bytes);
        count("nvmeof.response_bytes", &n.response_bytes);
        count("ceph.message_header_bytes", &c.message_header_bytes);
        count("ceph.wal_bytes_per_txn", &c.wal_bytes_per_txn);
        for (path, source) in [("nvmeof.read_policy", &n.read_policy.source), ("nvmeof.target_stack", &n.target_stack.source)] {
            if source.trim().is_empty() {
                p.push(format!("{path}.source: every parameter needs a source"));
            }
        }
        let (lo, hi) = range_of("network.link_bits_per_s");
        if !(lo..=hi).contains(&net.link_bits_per_s.value) {
            p.push(format!("network.link_bits_per_s: must be {lo}..={hi} (got {})", net.link_bits_per_s.value));
        }
        if net.roce_mtu_bytes.value + net.roce_header_bytes.value > net.mtu_bytes.value {
            p.push("network.roce_mtu_bytes: the RoCE MTU plus its headers must fit the Ethernet MTU".into());
        }
        let obj = c.object_bytes.value;
        if obj < 4096 || !obj.is_power_of_two() || obj > 1 << 30 {
            p.push(format!("ceph.object_bytes: must be a power of two in 4096..=1073741824 (got {obj})"));
        }
        // Up to 1 TiB: a WAL ring is RocksDB's write-ahead log space on the OSD's device
        // (1 GiB in both tables); the bound keeps the layout's byte sums far from overflowing.
        let wal = c.wal_ring_bytes.value;
        let (lo, hi) = range_of("ceph.wal_ring_bytes");
        if !(lo..=hi).contains(&wal) {
            p.push(format!("ceph.wal_ring_bytes: must be {lo}..={hi} (got {wal})"));
        }
    }
}

/// Rewrite the serializer's `[a.b]` tables of exactly `value` and `source` as inline
/// `b = { value = ..., source = ... }` lines under `[a]` (the same data, as presets write it).
fn inline_sourced(text: &str) -> String {
    let mut out = String::new();
    let mut section = String::new();
    let mut lines = text.lines().peekable();
    let open = |out: &mut String, section: &mut String, name: &str| {
        if section != name {
            out.push_str(&format!("\n[{name}]\n"));
            *section = name.to_string();
        }
    };
    while let Some(line) = lines.next() {
        let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) else {
            if !line.trim().is_empty() {
                out.push_str(line);
                out.push('\n');
            }
            continue;
        };
        let Some((parent, key)) = header.split_once('.') else {
            open(&mut out, &mut section, header);
            continue;
        };
        let mut body = Vec::new();
        while let Some(l) = lines.peek() {
            if l.starts_with('[') || l.trim().is_empty() {
                break;
            }
            body.push(lines.next().expect("peeked"));
        }
        match (body.first().and_then(|l| l.strip_prefix("value = ")), body.get(1).and_then(|l| l.strip_prefix("source = "))) {
            (Some(v), Some(src)) if body.len() == 2 => {
                open(&mut out, &mut section, parent);
                out.push_str(&format!("{key} = {{ value = {v}, source = {src} }}\n"));
            }
            _ => {
                out.push_str(&format!("\n[{header}]\n"));
                section = header.to_string();
                for l in body {
                    out.push_str(l);
                    out.push('\n');
                }
            }
        }
    }
    out
}

/// The range of each bounded integer field of `cluster.toml`, as [`ClusterSpec::validate`]
/// checks it (the tests hold the two together): a value the field's integer type cannot
/// hold (a negative count) names it rather than the type's range.
pub const FIELD_RANGES: &[(&str, u64, u64)] = &[
    ("cluster.nodes", 1, 64),
    ("cluster.drives_per_node", 1, 64),
    ("cluster.clients", 1, 256),
    ("cluster.scale", 1, 1 << 16),
    ("cluster.osds_per_drive", 1, 1024),
    ("cluster.fio_procs_per_client", 1, 256),
    ("hosts.node_cores", 1, 4096),
    ("hosts.client_cores", 1, 4096),
    ("hosts.osd_cpus", 0, 4096),
    ("nvmeof.target_threads", 1, 4096),
    ("ceph.pg_num", 1, 1 << 20),
    ("ceph.op_shards", 1, 256),
    ("ceph.op_threads_per_shard", 1, 256),
    ("ceph.osd_msgr_threads", 1, 256),
    ("ceph.osd_finisher_threads", 1, 256),
    ("ceph.client_librbd_threads", 1, 256),
    ("ceph.client_msgr_threads", 1, 256),
    ("network.mtu_bytes", 576, 9216),
    ("network.frame_overhead_bytes", 0, 1024),
    ("network.tcp_ip_header_bytes", 0, 1024),
    ("network.roce_header_bytes", 0, 1024),
    ("network.roce_mtu_bytes", 256, 4096),
    ("network.link_bits_per_s", 1_000_000, 10_000_000_000_000),
    ("nvmeof.capsule_bytes", 0, 1 << 20),
    ("nvmeof.data_header_bytes", 0, 1 << 20),
    ("nvmeof.response_bytes", 0, 1 << 20),
    ("ceph.message_header_bytes", 0, 1 << 20),
    ("ceph.wal_bytes_per_txn", 0, 1 << 20),
    ("ceph.wal_ring_bytes", 1 << 20, 1 << 40),
];

/// The range of a field of [`FIELD_RANGES`].
fn range_of(path: &str) -> (u64, u64) {
    FIELD_RANGES.iter().find(|f| f.0 == path).map(|f| (f.1, f.2)).unwrap_or_else(|| panic!("{path}: not in FIELD_RANGES"))
}

/// What a field of `cluster.toml` may hold, for a value of the wrong integer type.
fn field_range(key: &str) -> Option<String> {
    if let Some(&(_, lo, hi)) = FIELD_RANGES.iter().find(|f| f.0 == key) {
        return Some(if key == "ceph.pg_num" { format!("a power of two in {lo}..={hi}") } else { format!("{lo}..={hi}") });
    }
    Some(
        match key {
            "cluster.replicas" => "1..=cluster.nodes (one replica per storage node at most)",
            "cluster.volume_bytes" => "a positive multiple of 4096",
            "cluster.seed" => "0..=18446744073709551615",
            "ceph.version" => "14 or 18",
            "ceph.msgr_version" => "1 or 2",
            "ceph.object_bytes" => "a power of two in 4096..=1073741824",
            k if k.ends_with("_ns") => "0..=1000000000",
            _ => return None,
        }
        .to_string(),
    )
}

/// `msg` with each number in backquotes longer than 24 characters written as `1e300`: toml's
/// message spells a float out in full (301 digits for 1e300, the whole error line).
fn short_numbers(msg: &str) -> String {
    let parts: Vec<&str> = msg.split('`').collect();
    let mut out = String::with_capacity(msg.len());
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push('`');
        }
        match part.parse::<f64>() {
            Ok(v) if i % 2 == 1 && part.len() > 24 => out.push_str(&format!("{v:e}")),
            _ => out.push_str(part),
        }
    }
    out
}

/// A `cluster.toml` that does not parse, on one line naming where: the line and the field it
/// sets (`table.key`), as a user editing the file by hand looks for them, rather than toml's
/// byte offset.
fn toml_problem(text: &str, e: &toml::de::Error) -> String {
    let msg = short_numbers(&e.message().replace('\n', " "));
    let Some(start) = e.span().map(|s| s.start.min(text.len())).filter(|&s| text.is_char_boundary(s)) else {
        return format!("invalid TOML: {msg}");
    };
    const TABLES: [&str; 6] = ["cluster", "hosts", "network", "client", "nvmeof", "ceph"];
    let missing = msg.strip_prefix("missing field `").and_then(|m| m.strip_suffix('`'));
    if let (0, Some(table)) = (start, missing.filter(|m| TABLES.contains(m))) {
        // The whole document lacks a table: "line 1: missing field `ceph`" sent the reader to
        // the file's first line, a comment.
        return format!("no [{table}] table (every cluster.toml has [cluster], [hosts], [network], [client], [nvmeof] and [ceph])");
    }
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_no = text[..start].matches('\n').count() + 1;
    let line = text[line_start..].lines().next().unwrap_or("").trim();
    let header = |l: &str| l.trim().strip_prefix('[').and_then(|l| l.strip_suffix(']')).map(|t| t.trim().to_string());
    if let Some(table) = header(line) {
        return format!("line {line_no}, [{table}]: {msg}");
    }
    let key = line.split_once('=').map(|(k, _)| k.trim()).filter(|k| !k.is_empty());
    let table = text[..line_start].lines().rev().find_map(header);
    // "invalid value: integer `-1`, expected u32": the field's own range, not the type's; so
    // for an integer beyond i64 ("invalid type: integer `...` as i128"), a float or a string
    // where the field holds an integer.
    let numeric = msg.starts_with("invalid value: integer") || msg.starts_with("invalid type: ") && msg.contains(", expected u");
    let range = |field: &str| match field_range(field) {
        Some(r) if numeric => format!("{msg}; must be {r}"),
        _ => msg.clone(),
    };
    match (table, key) {
        (Some(t), Some(k)) => format!("line {line_no}, {t}.{k}: {}", range(&format!("{t}.{k}"))),
        (None, Some(k)) => format!("line {line_no}, {k}: {msg}"),
        _ => format!("line {line_no}: {msg}"),
    }
}
