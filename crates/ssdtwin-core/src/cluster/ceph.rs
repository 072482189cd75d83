//! The `[ceph]` table of `cluster.toml`: the Ceph client, messenger and every per-op cost, and
//! the cost table `ssdtwin cluster init --ceph-version` writes for each release, with a source
//! for every number. 14 (Nautilus) prices the OSD from the upstream CPU guidance; 18
//! (Reef) from per-op CPU measured on a 60-OSD cluster of the Ceph project's lab, with the
//! kv_sync thread, the client and the messenger priced from the lab's other posts.
//! docs/models.md ("Replicated block storage") has the tables and what changed between them.

use serde::{Deserialize, Serialize};

use crate::spec::Sourced;

fn s<T>(value: T, source: &str) -> Sourced<T> {
    Sourced::new(value, source)
}

/// How the Ceph clients reach RBD.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RbdClient {
    /// fio's librbd engine: librbd's op thread and the client's own messenger threads.
    Librbd,
    /// The kernel RBD client (krbd): the kernel messenger, on the submitting job's core.
    Krbd,
}

impl RbdClient {
    pub fn name(self) -> &'static str {
        match self {
            RbdClient::Librbd => "librbd",
            RbdClient::Krbd => "krbd",
        }
    }

    pub fn parse(text: &str) -> Option<RbdClient> {
        [RbdClient::Librbd, RbdClient::Krbd].into_iter().find(|c| c.name() == text)
    }
}

fn msgr_v2() -> u32 {
    2
}

fn librbd() -> RbdClient {
    RbdClient::Librbd
}

/// Ceph RBD over the async messenger, primary-copy replication, BlueStore.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ceph {
    /// Ceph major version the costs describe (14 = Nautilus, the brief's 14.2.11; 18 = Reef).
    pub version: u32,
    /// librbd (fio's rbd engine) or the kernel client.
    #[serde(default = "librbd")]
    pub rbd_client: RbdClient,
    /// Messenger protocol: 1 or 2 (its frames' size; the CPU is the same, docs/models.md).
    #[serde(default = "msgr_v2")]
    pub msgr_version: u32,
    pub object_bytes: Sourced<u64>,
    pub pg_num: Sourced<u32>,
    pub op_shards: Sourced<u32>,
    pub op_threads_per_shard: Sourced<u32>,
    pub osd_msgr_threads: Sourced<u32>,
    pub client_librbd_threads: Sourced<u32>,
    pub client_msgr_threads: Sourced<u32>,
    /// librbd per read on its op thread (image request, object map, objecter).
    pub client_librbd_read_ns: Sourced<u64>,
    pub client_librbd_write_ns: Sourced<u64>,
    /// Client messenger per message (encode and send, or receive and decode), reads.
    pub client_msgr_read_ns: Sourced<u64>,
    pub client_msgr_write_ns: Sourced<u64>,
    /// Kernel RBD client per I/O sent (libceph), on the submitting job's core.
    #[serde(default = "krbd_tx")]
    pub krbd_tx_ns: Sourced<u64>,
    /// Kernel RBD client per reply received.
    #[serde(default = "krbd_rx")]
    pub krbd_rx_ns: Sourced<u64>,
    /// OSD messenger per message received or sent.
    pub osd_msgr_ns: Sourced<u64>,
    /// OSD op path on an op thread with the PG lock held: dequeue, PG checks, do_op.
    pub osd_op_ns: Sourced<u64>,
    /// BlueStore read on the op thread (onode lookup, checksum), before the device read.
    pub osd_bluestore_read_ns: Sourced<u64>,
    /// BlueStore write transaction prepared and its data write submitted, on the op thread.
    pub osd_bluestore_write_ns: Sourced<u64>,
    /// kv_sync thread per transaction committed to RocksDB.
    pub osd_kv_commit_ns: Sourced<u64>,
    /// Completion callbacks per transaction on the finisher thread.
    pub osd_finisher_ns: Sourced<u64>,
    pub osd_finisher_threads: Sourced<u32>,
    /// Header of every messenger message (MOSDOp, MOSDRepOp, replies).
    pub message_header_bytes: Sourced<u32>,
    /// RocksDB WAL bytes per transaction (metadata; a commit is padded to 4 KiB).
    pub wal_bytes_per_txn: Sourced<u32>,
    /// Size of the WAL ring on each OSD's drive, at full scale.
    pub wal_ring_bytes: Sourced<u64>,
    /// The smallest partition an OSD may have, at full scale (how many OSDs a drive holds).
    #[serde(default = "osd_min_bytes")]
    pub osd_min_bytes: Sourced<u64>,
}

/// Ceph versions with a cost table.
pub const CEPH_VERSIONS: &[u32] = &[14, 18];

/// What `cluster init` chose for the Ceph client and messenger (not costs: the question).
#[derive(Copy, Clone, Debug)]
pub struct CephChoice {
    pub version: u32,
    pub rbd_client: RbdClient,
    pub msgr_version: u32,
}

/// The cost table of `c.version` (one of [`CEPH_VERSIONS`]).
pub fn ceph_table(c: CephChoice) -> Ceph {
    let mut t = if c.version == 18 { reef(c) } else { nautilus(c) };
    if c.msgr_version == 1 {
        t.message_header_bytes = s(t.message_header_bytes.value - 11, MSGR_V1_HEADER);
    }
    t
}

const MSGR_V1_HEADER: &str = "[DERIVED] 11 bytes fewer than messenger v2's: v1 frames a message with a 1-byte tag, a 53-byte header and a 21-byte footer (75 bytes, Ceph messenger protocols), v2 with a 32-byte preamble, a 41-byte header and a 13-byte epilogue (86); the op encoding inside is the same";

// The OSD op cost the Nautilus split divides: 500 us of core time per OSD op.
const OSD_OP_SRC: &str = "of 500 us of core time per OSD op: 2,000 IOPS per core, the middle of the 1,000-3,000 IOPS per core (before replication) of the Ceph OSD CPU guidance (Ceph OSD CPU scaling 2022; Ceph hardware recommendations); the split between stages is [ASSUMED]";

/// Nautilus (14.2): the KumoScale study's Ceph.
fn nautilus(c: CephChoice) -> Ceph {
    Ceph {
        version: 14,
        rbd_client: c.rbd_client,
        msgr_version: c.msgr_version,
        object_bytes: s(4 << 20, "[SRC] Ceph 14 options: rbd_default_order 22, 4 MiB RBD objects"),
        pg_num: s(512, "[SRC] Ceph placement groups: about 100 PGs per OSD over the pool size, 15 x 100 / 3 = 500, rounded up to a power of two"),
        op_shards: s(8, "[SRC] Ceph 14 options: osd_op_num_shards_ssd = 8"),
        op_threads_per_shard: s(2, "[SRC] Ceph 14 options: osd_op_num_threads_per_shard_ssd = 2"),
        osd_msgr_threads: s(3, "[SRC] Ceph 14 options: ms_async_op_threads = 3"),
        client_librbd_threads: s(1, "[SRC] Ceph 14 options: rbd_op_threads = 1"),
        client_msgr_threads: s(3, "[SRC] Ceph 14 options: ms_async_op_threads = 3, in the client too"),
        client_librbd_read_ns: s(17_480, "[DERIVED] 1/57.2K s: librbd reached 57.2K 4 KiB random-read IOPS from one client at 308 % CPU while krbd reached 97.8K on the same cluster (Ceph librbd PR 28044), so its one op thread was the saturated stage"),
        client_librbd_write_ns: s(20_450, "[DERIVED] 1/48.9K s: the same for random writes (48.9K IOPS at 318 % CPU, Ceph librbd PR 28044)"),
        client_msgr_read_ns: s(17_450, "[DERIVED] half of the rest of the client's 54.05 us per read (185 IOPS per %CPU, Ceph librbd PR 28044) after librbd's 17.48 us and fio's 1.645 us: one message out, one in"),
        client_msgr_write_ns: s(21_700, "[DERIVED] half of the rest of the client's 65.36 us per write (153 IOPS per %CPU, Ceph librbd PR 28044) after librbd's 20.45 us and fio's 1.645 us"),
        krbd_tx_ns: krbd_tx(),
        krbd_rx_ns: krbd_rx(),
        osd_msgr_ns: s(75_000, &format!("[DERIVED] 15 % {OSD_OP_SRC}; paid for every message an OSD receives or sends")),
        osd_op_ns: s(150_000, &format!("[DERIVED] 30 % {OSD_OP_SRC}")),
        osd_bluestore_read_ns: s(200_000, &format!("[DERIVED] 40 % {OSD_OP_SRC}")),
        osd_bluestore_write_ns: s(100_000, &format!("[DERIVED] 20 % {OSD_OP_SRC}; with kv commit and finisher 40 % as for a read")),
        osd_kv_commit_ns: s(50_000, &format!("[DERIVED] 10 % {OSD_OP_SRC}")),
        osd_finisher_ns: s(50_000, &format!("[DERIVED] 10 % {OSD_OP_SRC}")),
        osd_finisher_threads: s(1, "[SRC] Ceph 14 options: bluestore_shard_finishers = false, one finisher thread"),
        message_header_bytes: s(256, "[ASSUMED] messenger v2 frame and MOSDOp/MOSDRepOp encoding of a single-extent op"),
        wal_bytes_per_txn: s(1024, "[ASSUMED] onode, extent map and PG log entry of a 4 KiB write in the RocksDB write batch"),
        wal_ring_bytes: s(1 << 30, "[ASSUMED] RocksDB WAL space on the OSD's device (BlueFS), 1 GiB: Reef's max_total_wal_size (Ceph RocksDB tuning 2022), not checked for Nautilus"),
        osd_min_bytes: osd_min_bytes(),
    }
}

// Reef's OSD CPU per op, measured on the lab of the posts the Reef table predicts, in another of
// its posts (Ceph Reef encryption 2023): Reef 18.2.0, 5 OSD nodes of 128 logical CPUs serving 5
// client nodes (3x, 16,384 PGs, OSDs unpinned); unencrypted 4 KiB random reads ran at 2.786M IOPS
// with the OSD nodes 42.94 % busy, random writes at 448.1K IOPS with them 40.49 % busy (chart
// readings). The OSD nodes' busy CPU time over the ops they served, 3 replica writes a write.
const REEF_LAB_CPUS: f64 = 5.0 * 128.0;
const REEF_READ_NS: f64 = 0.4294 * REEF_LAB_CPUS / 2.786e6 * 1e9; // 98.6 us per read
const REEF_REPLICA_WRITE_NS: f64 = 0.4049 * REEF_LAB_CPUS / (3.0 * 0.4481e6) * 1e9; // 192.8 us per replica write

// One librbd client's 3 messenger threads were saturated at 122K 16 KiB random reads per
// second (Ceph QEMU librbd 2022): 3/122K s for a request out and a reply in.
const MSGR_NS: f64 = 3e9 / 122_000.0 / 2.0; // 12.3 us per message

// Messages an OSD handles per replica write: the primary receives the op, sends 2 sub-ops,
// receives 2 acks and replies (6); each replica receives and acks (2 + 2): 10 per 3 copies.
const MSGS_PER_REPLICA_WRITE: f64 = 10.0 / 3.0;
// The kv_sync thread bounds small writes when CPU is not limited (Ceph RocksDB tuning 2022):
// 37,209 replica writes/s per NVMe with the RocksDB tuning Reef made its default (Quincy +
// new tuning, the release chart of Ceph OSD CPU scaling 2022; Ceph Reef freeze 2023 says Reef
// uses it).
const KV_COMMIT_NS: f64 = 1e9 / 37_209.0; // 26.9 us per transaction

const REEF_OP_SPLIT: &str = "op and BlueStore split [ASSUMED] as in the 14 table (op 150 : BlueStore read 200)";

/// Reef (18.2): the Ceph project's lab (Ceph Reef OSDs per NVMe 2023, Ceph Reef freeze 2023).
fn reef(c: CephChoice) -> Ceph {
    let read_rest = REEF_READ_NS - 2.0 * MSGR_NS; // op + BlueStore read
    let op = read_rest * 150.0 / 350.0;
    // The finisher costs what the kv commit does, as in the 14 table; the rest of the
    // write's core time is BlueStore's on the op thread.
    let finisher = KV_COMMIT_NS;
    let bluestore_write = REEF_REPLICA_WRITE_NS - MSGS_PER_REPLICA_WRITE * MSGR_NS - KV_COMMIT_NS - op - finisher;
    let ns = |v: f64| v.round() as u64;
    let per_read = format!(
        "{:.1} us of OSD node core time per read: the 5 OSD nodes' 640 CPUs 42.94 % busy at 2.786M 4 KiB random reads/s, Reef 18.2.0 on the posts' lab (Ceph Reef encryption 2023, unencrypted, chart readings)",
        REEF_READ_NS / 1e3
    );
    let per_write = format!(
        "{:.1} us per replica write: the same 640 CPUs 40.49 % busy at 448.1K 4 KiB random writes/s, 3 replica writes each (Ceph Reef encryption 2023), less 10/3 messages ({:.1} us), the kv commit and the finisher ({:.1} us each) and osd_op_ns ({:.1} us)",
        REEF_REPLICA_WRITE_NS / 1e3,
        MSGS_PER_REPLICA_WRITE * MSGR_NS / 1e3,
        KV_COMMIT_NS / 1e3,
        op / 1e3
    );
    Ceph {
        version: 18,
        rbd_client: c.rbd_client,
        msgr_version: c.msgr_version,
        object_bytes: s(4 << 20, "[SRC] Ceph 18 options: rbd_default_order 22, 4 MiB RBD objects"),
        pg_num: s(512, "[SRC] Ceph placement groups: about 100 PGs per OSD over the pool size, 15 x 100 / 3 = 500, rounded up to a power of two"),
        op_shards: s(8, "[SRC] Ceph 18 options: osd_op_num_shards_ssd = 8 (Ceph OSD CPU scaling 2022 and Ceph 1 TiB/s 2024 list 8 shards x 2 threads and 3 messenger threads as the defaults)"),
        op_threads_per_shard: s(2, "[SRC] Ceph 18 options: osd_op_num_threads_per_shard_ssd = 2"),
        osd_msgr_threads: s(3, "[SRC] Ceph 18 options: ms_async_op_threads = 3"),
        client_librbd_threads: s(1, "[SRC] Ceph 18 options: rbd_op_threads = 1"),
        client_msgr_threads: s(3, "[SRC] Ceph 18 options: ms_async_op_threads = 3, in the client too"),
        client_librbd_read_ns: s(8_200, "[DERIVED] 1/122K s, an upper bound: one librbd client read 122K 16 KiB blocks/s with its 3 messenger threads, not its op thread, saturated (Ceph QEMU librbd 2022, Pacific's librbd)"),
        client_librbd_write_ns: s(9_590, "[DERIVED] the read's 8.2 us x 20.45/17.48, the write/read ratio of librbd's op thread (Ceph librbd PR 28044)"),
        client_msgr_read_ns: s(ns(MSGR_NS), "[DERIVED] 3/122K s per request and reply, half each: one librbd client's 3 messenger threads at 100 % for 122K 16 KiB random reads/s (Ceph QEMU librbd 2022)"),
        client_msgr_write_ns: s(15_250, "[DERIVED] the read's 12.3 us x 21.70/17.45, the write/read ratio of the client messenger (Ceph librbd PR 28044)"),
        krbd_tx_ns: krbd_tx(),
        krbd_rx_ns: krbd_rx(),
        osd_msgr_ns: s(ns(MSGR_NS), "[DERIVED] the client messenger's 12.3 us per message (Ceph QEMU librbd 2022): OSDs and clients run the same AsyncMessenger; paid for every message an OSD receives or sends"),
        osd_op_ns: s(ns(op), &format!("[DERIVED] {per_read}, less two messages (24.6 us); {REEF_OP_SPLIT}")),
        osd_bluestore_read_ns: s(ns(read_rest - op), &format!("[DERIVED] the rest of the read's op-thread time after osd_op_ns ({per_read}); {REEF_OP_SPLIT}")),
        osd_bluestore_write_ns: s(ns(bluestore_write), &format!("[DERIVED] the rest of {per_write}")),
        osd_kv_commit_ns: s(ns(KV_COMMIT_NS), "[DERIVED] 1/37,209 s: the kv_sync thread is the small-write bound when CPU is not (Ceph RocksDB tuning 2022), and 60 OSDs wrote 37,209 replica writes/s per NVMe with the RocksDB tuning that Reef made its default (Quincy + new tuning, Ceph OSD CPU scaling 2022; Ceph Reef freeze 2023)"),
        osd_finisher_ns: s(ns(finisher), "[ASSUMED] what the kv commit costs (osd_kv_commit_ns), as the 14 table splits them: no published figure; the finisher's one thread is not the small-write bound, the kv_sync thread is (Ceph RocksDB tuning 2022)"),
        osd_finisher_threads: s(1, "[SRC] Ceph 18 options: bluestore_shard_finishers = false, one finisher thread"),
        message_header_bytes: s(256, "[ASSUMED] messenger v2 frame and MOSDOp/MOSDRepOp encoding of a single-extent op"),
        wal_bytes_per_txn: s(1024, "[ASSUMED] onode, extent map and PG log entry of a 4 KiB write in the RocksDB write batch"),
        wal_ring_bytes: s(1 << 30, "[SRC] Ceph RocksDB tuning 2022: max_total_wal_size 1 GiB in the Reef RocksDB options, the RocksDB WAL space on the OSD's device (BlueFS)"),
        osd_min_bytes: osd_min_bytes(),
    }
}

fn krbd_tx() -> Sourced<u64> {
    s(3_500, "[DERIVED] half of 7.0 us: one krbd client read 115.8K 16 KiB blocks/s from 5 OSDs (Ceph QEMU librbd 2022), taken as one submitting core's bound ([ASSUMED]: the kernel client's CPU per I/O is not published), less fio's 1.645 us")
}

fn krbd_rx() -> Sourced<u64> {
    s(3_500, "[DERIVED] the other half of 7.0 us (see krbd_tx_ns)")
}

fn osd_min_bytes() -> Sourced<u64> {
    s(5 << 30, "[SRC] ceph-volume device checks: a device or partition smaller than 5 GiB is rejected for an OSD")
}
