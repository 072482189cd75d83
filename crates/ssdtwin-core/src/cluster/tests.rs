//! Queueing invariants of the cluster model on its own counters.

use super::*;
use proptest::prelude::*;
use serde_json::{json, Value};

/// A small lab: `nodes` x 2 drives of CM5 at 1/512, `clients` clients, 8 GiB volumes.
pub(crate) fn lab(stack: &str, nodes: u32, clients: u32, replicas: u32) -> ClusterSpec {
    let o = InitOptions {
        stack: stack.into(),
        nodes,
        drives_per_node: 2,
        scale: 512,
        clients,
        replicas,
        volume_bytes: 8 << 30,
        ..InitOptions::default()
    };
    ClusterSpec::from_options(&o).unwrap()
}

/// The engine's test job with what the cluster's jobs share: time-based 4 KiB random reads
/// on 512-byte LBAs, no random map (the fields each job sets are in [`region_jobs`]).
fn template() -> Value {
    let mut v = crate::engine::fio::tests::job_template();
    for (k, x) in [("lba_bytes", json!(512)), ("time_based", json!(true)), ("norandommap", json!(true))] {
        v[k] = x;
    }
    v
}

/// One job section per client: 4 KiB `rw` at `iodepth`, time based (engine contract v1).
pub(crate) fn jobs(spec: &ClusterSpec, rw: &str, iodepth: u32, ramp_ns: u64, runtime_ns: u64) -> Vec<JobSpec> {
    region_jobs(spec, rw, iodepth, ramp_ns, runtime_ns, spec.volume_bytes_simulated())
}

/// [`jobs`] over the first `region` bytes of each volume.
pub(crate) fn region_jobs(spec: &ClusterSpec, rw: &str, iodepth: u32, ramp_ns: u64, runtime_ns: u64, region: u64) -> Vec<JobSpec> {
    let vol = spec.volume_bytes_simulated();
    let write = rw.contains("write");
    (0..spec.cluster.clients)
        .map(|c| {
            let mut v = template();
            for (k, x) in [
                ("name", json!(format!("client{c}"))),
                ("job_index", json!(c)),
                ("thread_number", json!(c + 1)),
                ("group_id", json!(c)),
                ("target_size_bytes", json!(vol)),
                ("size_bytes", json!(region)),
                ("io_size_bytes", json!(region)),
                ("rw", json!(rw)),
                ("directions", json!([if write { "write" } else { "read" }])),
                ("random", json!(rw.starts_with("rand"))),
                ("iodepth", json!(iodepth)),
                ("iodepth_configured", json!(iodepth)),
                ("runtime_ns", json!(runtime_ns)),
                ("ramp_time_ns", json!(ramp_ns)),
                ("seed", json!(1000 + c as u64)),
            ] {
                v[k] = x;
            }
            serde_json::from_value::<JobSpec>(v).unwrap()
        })
        .collect()
}

pub(crate) fn go(spec: &ClusterSpec, rw: &str, iodepth: u32) -> ClusterRun {
    run(spec, jobs(spec, rw, iodepth, 2_000_000, 40_000_000), &mut |_| true).unwrap()
}

fn dir(r: &ClusterRun, write: bool) -> &DirTotals {
    if write {
        &r.write
    } else {
        &r.read
    }
}

#[test]
fn littles_law_holds_on_the_models_own_counters() {
    for (stack, rw, qd) in
        [("nvmeof-tcp", "randread", 16), ("nvmeof-tcp", "randwrite", 8), ("ceph-rbd", "randread", 8), ("ceph-rbd", "randwrite", 4)]
    {
        let spec = lab(stack, 3, 2, 3);
        let window = 100_000_000;
        let r = run(&spec, jobs(&spec, rw, qd, 5_000_000, window), &mut |_| true).unwrap();
        let d = dir(&r, rw.contains("write"));
        assert!(d.ios > 200, "{stack} {rw}: {} I/Os", d.ios);
        // N from the clones' in-flight counters; X and R from the I/Os completed in the
        // window. They differ by the I/Os straddling the window's ends: about R/W each.
        let xr = d.iops * d.lat_mean_ns / 1e9;
        let n = r.outstanding_mean;
        let bound = 2.0 * d.lat_mean_ns / window as f64 + 0.005;
        assert!((n - xr).abs() / n < bound, "{stack} {rw}: N = {n:.2} but X·R = {xr:.2} (bound {:.1} %)", bound * 100.0);
        // Every clone keeps its queue full (a closed loop): N is the total depth.
        assert!((n - (2 * qd) as f64).abs() < 0.01 * n, "{stack} {rw}: N = {n:.2}, depth {}", 2 * qd);
    }
}

#[test]
fn no_resource_is_busier_than_always() {
    for stack in ["nvmeof-tcp", "nvmeof-rdma", "ceph-rbd"] {
        let spec = lab(stack, 3, 2, 3);
        for rw in ["randread", "randwrite"] {
            let r = go(&spec, rw, 64);
            for u in &r.resources {
                assert!(u.utilisation >= 0.0 && u.utilisation <= 1.0 + 1e-9, "{stack} {rw}: {} at {}", u.name, u.utilisation);
                assert!(
                    u.mean_in_use <= u.servers as f64 + 1e-9 || u.kind == "drive",
                    "{stack} {rw}: {} uses {} of {}",
                    u.name,
                    u.mean_in_use,
                    u.servers
                );
            }
        }
    }
}

/// Filling the drives asks `keep_going` (bytes of every drive's fill): at a large scale the
/// fill takes minutes, and a Ctrl-C waited for it to end before the run saw it.
#[test]
fn a_stop_while_the_drives_are_filled_ends_the_run_there() {
    let spec = lab("nvmeof-tcp", 3, 2, 3);
    let mut asked = Vec::new();
    let e = run(&spec, jobs(&spec, "randread", 1, 1_000_000, 2_000_000), &mut |p| {
        asked.push((p.unit, p.done, p.total));
        false
    })
    .unwrap_err();
    assert!(matches!(e, ClusterError::Interrupted(0)), "{e}");
    let (unit, done, total) = asked[0];
    assert_eq!(asked.len(), 1);
    assert!(unit == crate::progress::ProgressUnit::Bytes && 0 < done && done < total, "{asked:?}");
    // Every drive holds a replica of each of the 2 volumes: the fills add up to 6 of them.
    assert_eq!(total, 6 * spec.volume_bytes_simulated().div_ceil(1 << 17) * (1 << 17));
}

#[test]
fn the_same_seed_gives_the_same_run_and_another_seed_another() {
    let spec = lab("ceph-rbd", 3, 2, 3);
    let a = serde_json::to_string(&go(&spec, "randwrite", 8)).unwrap();
    let b = serde_json::to_string(&go(&spec, "randwrite", 8)).unwrap();
    assert_eq!(a, b);
    let mut other = spec.clone();
    other.cluster.seed = 2;
    let c = serde_json::to_string(&go(&other, "randwrite", 8)).unwrap();
    assert_ne!(a, c);
}

/// One node, one replica, QD1: a read costs the client's and the target's CPU, the kernel TCP
/// stack's two receives off the CPU, the command capsule and the data crossing the network,
/// and the drive's own read latency.
#[test]
fn one_replica_at_qd1_is_the_drive_plus_the_path() {
    // 400 MiB volumes: reads of the first half reach NAND (the last 12 MiB of the fill
    // may still sit in the drive's write buffer).
    let mut spec = lab("nvmeof-tcp", 1, 1, 1);
    spec.cluster.volume_bytes = 200 << 30;
    let half = spec.volume_bytes_simulated() / 2;
    let r = run(&spec, region_jobs(&spec, "randread", 1, 1_000_000, 40_000_000, half), &mut |_| true).unwrap();
    // The drive alone: the same preset at the same scale, filled the same way, QD1 reads.
    let layout = Layout::new(&spec, drive_bytes(&spec).unwrap()).unwrap();
    let mut drives = build_drives(&spec, &layout, &mut |_| true).unwrap();
    let d = &mut drives[0];
    let mut t = 0u64;
    let mut sum = 0u64;
    let n = 2000u64;
    let mut rng = crate::rng::Rng::new(3);
    let blocks = half / 4096;
    for _ in 0..n {
        let slba = rng.below(blocks) * 8;
        let done = d
            .timing
            .submit(&mut d.ctrl, t, crate::engine::HostCmd { op: crate::engine::HostOp::Read, nsid: crate::nvme::NsId(1), slba, nlb: 8 })
            .unwrap();
        sum += done - t;
        t = done;
    }
    let drive_ns = sum as f64 / n as f64;
    let c = &spec.client;
    let nv = &spec.nvmeof;
    let cpu = (c.fio_submit_ns.value + nv.md_ns.value + nv.tcp_host_tx_ns.value + nv.tcp_target_rx_ns.value)
        + (nv.tcp_target_tx_ns.value + nv.tcp_host_rx_ns.value + c.fio_complete_ns.value);
    let net = &spec.network;
    let wire = |bytes: u64| {
        let mss = (net.mtu_bytes.value - net.tcp_ip_header_bytes.value) as u64;
        let frames = bytes.div_ceil(mss);
        let wire =
            (bytes + frames * net.tcp_ip_header_bytes.value as u64).max(frames * 46) + frames * net.frame_overhead_bytes.value as u64;
        // Cut-through: the switch's port to the node sends while the client's still does.
        (wire * 8_000_000_000).div_ceil(net.link_bits_per_s.value) as f64
    };
    let hops = 2.0 * (2 * net.propagation_ns.value + net.switch_latency_ns.value) as f64;
    // Off the CPU: the kernel TCP stack's receive of the command at the target and of the data
    // at the initiator.
    assert!(nv.tcp_rx_delay_ns.value > 0);
    let waits = 2 * nv.tcp_rx_delay_ns.value;
    let path = (cpu + waits) as f64 + wire(nv.capsule_bytes.value as u64) + wire(4096 + nv.data_header_bytes.value as u64) + hops;
    let expect = drive_ns + path;
    assert!(
        (r.read.lat_mean_ns - expect).abs() / expect < 0.02,
        "cluster {:.0} ns, drive {drive_ns:.0} + path {path:.0} = {expect:.0}",
        r.read.lat_mean_ns
    );
}

#[test]
fn a_write_waits_for_every_replica() {
    let one = go(&lab("nvmeof-tcp", 3, 1, 1), "randwrite", 1);
    let three = go(&lab("nvmeof-tcp", 3, 1, 3), "randwrite", 1);
    // Three mirrors: the client's CPU per mirror and the slowest of three replies.
    assert!(three.write.lat_mean_ns > one.write.lat_mean_ns);
    let ceph1 = go(&lab("ceph-rbd", 3, 1, 1), "randwrite", 1);
    let ceph3 = go(&lab("ceph-rbd", 3, 1, 3), "randwrite", 1);
    // Primary copy: the replica ops are a second network round trip and two more OSD ops.
    let osd = &lab("ceph-rbd", 3, 1, 3).ceph;
    let extra = 2 * osd.osd_msgr_ns.value + osd.osd_op_ns.value;
    assert!(ceph3.write.lat_mean_ns > ceph1.write.lat_mean_ns + extra as f64, "{} vs {}", ceph3.write.lat_mean_ns, ceph1.write.lat_mean_ns);
    // Every replica's drive saw the writes.
    let drives_written = ceph3.drives.iter().filter(|d| d.writes > 0).count();
    assert!(drives_written >= 3);
}

#[test]
fn bad_labs_are_refused_with_every_problem() {
    // The nodes' own range alone: not also a replicas range of 1..=0.
    let mut o = InitOptions { nodes: 0, replicas: 3, ..InitOptions::default() };
    let e = ClusterSpec::from_options(&o).unwrap_err();
    assert_eq!(e.problems, ["cluster.nodes: must be 1..=64 (got 0)"], "{e}");
    o = InitOptions { replicas: 0, ..InitOptions::default() };
    assert!(ClusterSpec::from_options(&o).unwrap_err().to_string().contains("cluster.replicas: must be 1..=3"));
    o = InitOptions { replicas: 4, ..InitOptions::default() };
    assert!(ClusterSpec::from_options(&o).unwrap_err().to_string().contains("cluster.replicas: must be 1..=3"));
    o = InitOptions { volume_bytes: 6 << 40, ..InitOptions::default() };
    let e = ClusterSpec::from_options(&o).unwrap_err().to_string();
    assert!(e.contains("more than the pool"), "{e}");
    o = InitOptions { stack: "iscsi".into(), network: "7GbE".into(), ..InitOptions::default() };
    let e = ClusterSpec::from_options(&o).unwrap_err().to_string();
    assert!(e.contains("--stack 'iscsi'") && e.contains("--network '7GbE'"), "{e}");
}

/// A lab's own `[network]` table (what `--like` copies) is kept as it is, its edits and a
/// name no preset has included; without one, `network` names the preset.
#[test]
fn a_network_table_is_kept_as_given() {
    use crate::cluster::spec::Network;
    let mut net = Network::preset("25GbE").unwrap();
    net.name = "lab fabric".into();
    net.mtu_bytes = crate::spec::Sourced::new(9000, "jumbo frames");
    let o = InitOptions { network: "10GbE".into(), network_table: Some(net.clone()), ..InitOptions::default() };
    assert_eq!(ClusterSpec::from_options(&o).unwrap().network, net);
    let o = InitOptions { network: "10GbE".into(), ..InitOptions::default() };
    assert_eq!(ClusterSpec::from_options(&o).unwrap().network, Network::preset("10GbE").unwrap());
}

#[test]
fn the_toml_round_trips_and_refuses_unknown_fields() {
    let spec = lab("ceph-rbd", 3, 4, 3);
    let text = spec.to_toml();
    assert_eq!(ClusterSpec::from_toml(&text, "t").unwrap(), spec);
    assert!(text.contains("\n[hosts]\nnode_cores = { value = 32, source = "), "{text}");
    let bad = text.replace("[hosts]", "[hosts]\ncores_per_socket = 4");
    assert!(ClusterSpec::from_toml(&bad, "t").unwrap_err().to_string().contains("cores_per_socket"));
    let v: Value = toml::from_str(&text).unwrap();
    assert!(v["ceph"]["osd_op_ns"]["source"].as_str().unwrap().contains("Ceph OSD CPU scaling 2022"));
    assert!(text.contains("\ntarget_stack = { value = \"spdk\", source = "), "{text}");
}

/// A `cluster.toml` edited by hand with a value of the wrong type names the line and the
/// field, not a byte offset.
#[test]
fn a_bad_value_in_the_toml_names_its_line_and_field() {
    let text = lab("nvmeof-tcp", 3, 4, 3).to_toml();
    let line = |key: &str| text.lines().position(|l| l.starts_with(key)).unwrap() + 1;
    let e = ClusterSpec::from_toml(&text.replace("\nreplicas = 3\n", "\nreplicas = \"three\"\n"), "t").unwrap_err().to_string();
    assert!(e.contains(&format!("line {}, cluster.replicas: ", line("replicas = "))) && !e.contains("byte"), "{e}");
    let e = ClusterSpec::from_toml(&text.replace("node_cores = { value = 32,", "node_cores = { value = -2,"), "t").unwrap_err().to_string();
    assert!(e.contains(&format!("line {}, hosts.node_cores: ", line("node_cores = "))), "{e}");
}

/// A value the field's integer type cannot hold (a negative count, a huge one) names the
/// field's own range, the one `validate` checks, not only the type's ("expected u32").
#[test]
fn a_value_beyond_the_fields_type_names_its_range() {
    let text = lab("ceph-rbd", 3, 4, 3).to_toml();
    for (from, to, range) in [
        ("\nnodes = 3\n", "\nnodes = -1\n", "cluster.nodes: invalid value: integer `-1`, expected u32; must be 1..=64"),
        ("\nclients = 4\n", "\nclients = 99999999999\n", "must be 1..=256"),
        (
            "node_cores = { value = 32,",
            "node_cores = { value = -2,",
            "hosts.node_cores: invalid value: integer `-2`, expected u32; must be 1..=4096",
        ),
        ("pg_num = { value = 512,", "pg_num = { value = -4,", "must be a power of two in 1..=1048576"),
        ("\nreplicas = 3\n", "\nreplicas = -3\n", "must be 1..=cluster.nodes"),
        // Beyond i64, a float (spelt out in 301 digits for 1e300) or a string: the range too.
        ("\nnodes = 3\n", "\nnodes = 99999999999999999999\n", "as i128, expected u32; must be 1..=64"),
        ("\nnodes = 3\n", "\nnodes = 1e300\n", "cluster.nodes: invalid type: floating point `1e300`, expected u32; must be 1..=64"),
        ("\nnodes = 3\n", "\nnodes = \"3\"\n", "cluster.nodes: invalid type: string \"3\", expected u32; must be 1..=64"),
    ] {
        assert!(text.contains(from), "{from}");
        let e = ClusterSpec::from_toml(&text.replace(from, to), "t").unwrap_err().to_string();
        assert!(e.contains(range), "{e}");
    }
    // Each range is validate's: the value past its top is refused with the same range.
    for &(path, lo, hi) in crate::cluster::spec::FIELD_RANGES {
        let (table, key) = path.split_once('.').unwrap();
        let mut v = serde_json::to_value(lab("ceph-rbd", 3, 4, 3)).unwrap();
        let field = &mut v[table][key];
        *(if field.is_object() { &mut field["value"] } else { field }) = json!(hi + 1);
        let spec: ClusterSpec = serde_json::from_value(v).unwrap();
        let e = spec.validate("t").unwrap_err().to_string();
        assert!(e.contains(&format!("{path}: must be {lo}..={hi} (got {})", hi + 1)), "{path}: {e}");
    }
}

/// A table missing from the whole file is named as such, not as line 1's "missing field".
#[test]
fn a_missing_table_is_named() {
    let text = lab("ceph-rbd", 3, 4, 3).to_toml();
    let cut = text.find("\n[ceph]\n").unwrap();
    let e = ClusterSpec::from_toml(&text[..cut], "t").unwrap_err().to_string();
    assert!(e.contains("no [ceph] table (every cluster.toml has ") && !e.contains("line 1"), "{e}");
    // A field missing from a table at the file's start is that table's, not a table.
    let e = ClusterSpec::from_toml("[cluster]\nnodes = 3\n", "t").unwrap_err().to_string();
    assert!(e.contains("line 1, [cluster]: missing field `stack`"), "{e}");
}

#[test]
fn a_wal_ring_past_a_tib_is_refused_by_name() {
    let mut spec = lab("ceph-rbd", 3, 4, 3);
    spec.ceph.wal_ring_bytes.value = 1 << 40;
    spec.validate("t").unwrap();
    spec.ceph.wal_ring_bytes.value = u64::MAX;
    let e = spec.validate("t").unwrap_err().to_string();
    assert!(e.contains("ceph.wal_ring_bytes: must be 1048576..=1099511627776 (got 18446744073709551615)"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, failure_persistence: None, ..ProptestConfig::default() })]

    /// Any small lab, either stack, either direction: the queue stays full (closed loop),
    /// Little's law holds within the window's boundary effect (I/Os straddling its ends,
    /// about R/W), and no resource is busier than it can be.
    #[test]
    fn queueing_invariants_hold_on_random_labs(
        stack in 0usize..3, nodes in 1u32..=3, clients in 1u32..=3, rep in 0u32..3, qd in 1u32..=24, write in any::<bool>(), seed in 0u64..1000,
        kernel in any::<bool>()
    ) {
        let stack = ["nvmeof-tcp", "nvmeof-rdma", "ceph-rbd"][stack];
        let mut spec = lab(stack, nodes, clients, 1 + rep % nodes);
        spec.cluster.seed = seed;
        if kernel {
            spec.nvmeof.target_stack.value = spec::TargetStack::Kernel;
        }
        let rw = if write { "randwrite" } else { "randread" };
        let window = 60_000_000;
        let r = run(&spec, jobs(&spec, rw, qd, 5_000_000, window), &mut |_| true).unwrap();
        let d = dir(&r, write);
        let n = r.outstanding_mean;
        let depth = (clients * qd) as f64;
        prop_assert!((n - depth).abs() <= 0.02 * depth, "N = {} for a depth of {}", n, depth);
        let xr = d.iops * d.lat_mean_ns / 1e9;
        let bound = n * (2.0 * d.lat_mean_ns / window as f64 + 0.02);
        prop_assert!((n - xr).abs() <= bound, "{} {}: N = {:.2}, X·R = {:.2} (bound {:.2})", stack, rw, n, xr, bound);
        for u in &r.resources {
            prop_assert!(u.utilisation >= 0.0 && u.utilisation <= 1.0 + 1e-9, "{} at {}", u.name, u.utilisation);
        }
        prop_assert_eq!(r.clones.len(), clients as usize);
    }
}

/// The depth distribution counts the I/Os issued after the ramp (fio's reset_io_stats at the
/// ramp's end), so it sums to about the I/Os each clone reports, not to those plus the ramp's.
#[test]
fn depth_levels_count_from_the_ramps_end() {
    let spec = lab("nvmeof-tcp", 3, 2, 3);
    let r = run(&spec, jobs(&spec, "randread", 16, 10_000_000, 20_000_000), &mut |_| true).unwrap();
    for c in &r.clones {
        let counted: u64 = c.iodepth_level.iter().sum();
        let reported = c.read.total_ios + c.write.total_ios;
        assert!(reported > 100, "{reported}");
        assert!(counted.abs_diff(reported) <= 2 * 16, "depths {counted} against {reported} I/Os reported");
    }
}

/// A Reef lab: `nodes` x 2 PM983 at 1/256 (its 1,365 blocks per plane are too few for 1/512),
/// 2 clients, 16 GiB volumes.
fn reef(nodes: u32, o: InitOptions) -> ClusterSpec {
    let base = InitOptions {
        stack: "ceph-rbd".into(),
        ceph_version: 18,
        nodes,
        drives_per_node: 2,
        drive: "samsung-pm983-3.84t".into(),
        scale: 256,
        clients: 2,
        replicas: nodes.min(3),
        volume_bytes: 16 << 30,
        ..o
    };
    ClusterSpec::from_options(&base).unwrap()
}

#[test]
fn the_reef_table_adds_up_to_its_sources_per_op_cpu() {
    let c = reef(3, InitOptions::default()).ceph;
    let ns = |v: &crate::spec::Sourced<u64>| v.value as f64;
    // The Reef lab's OSD nodes: 640 CPUs 42.94 % busy at 2.786M reads/s, 40.49 % at 448.1K
    // writes/s of 3 replica writes each (Ceph Reef encryption 2023).
    let read = 2.0 * ns(&c.osd_msgr_ns) + ns(&c.osd_op_ns) + ns(&c.osd_bluestore_read_ns);
    let write = 10.0 / 3.0 * ns(&c.osd_msgr_ns)
        + ns(&c.osd_op_ns)
        + ns(&c.osd_bluestore_write_ns)
        + ns(&c.osd_kv_commit_ns)
        + ns(&c.osd_finisher_ns);
    assert!((read - 0.4294 * 640.0 / 2.786e6 * 1e9).abs() < 1_000.0, "{read}");
    assert!((write - 0.4049 * 640.0 / (3.0 * 0.4481e6) * 1e9).abs() < 1_000.0, "{write}");
    assert!(c.osd_kv_commit_ns.source.contains("37,209") && c.version == 18);
}

/// OSDs pinned to few CPUs: random reads are bound by those CPUs at the OSD's core time per
/// read (2 messages, the op, BlueStore), nodes x CPUs / cost.
#[test]
fn pinned_osds_are_bound_by_their_cpus() {
    let o = InitOptions { osd_cpus: Some(crate::spec::Sourced::new(2, "test")), ..InitOptions::default() };
    let spec = reef(3, o);
    let r = run(&spec, jobs(&spec, "randread", 64, 20_000_000, 400_000_000), &mut |_| true).unwrap();
    let c = &spec.ceph;
    let per_read = (2 * c.osd_msgr_ns.value + c.osd_op_ns.value + c.osd_bluestore_read_ns.value) as f64 / 1e9;
    let bound = 3.0 * 2.0 / per_read;
    // At most the bound; below it by the nodes the closed loop leaves idler than the hottest.
    assert!(r.read.iops <= bound && r.read.iops > 0.9 * bound, "{} IOPS against the CPU bound {bound:.0}", r.read.iops);
    let top = &r.resources[0];
    assert!(top.name.ends_with("osd-cpus") && top.utilisation > 0.99, "{} {}", top.name, top.utilisation);
    // Nothing else on the node uses its cores: the clients have hosts of their own.
    assert!(r.resources.iter().filter(|u| u.name.starts_with("node") && u.name.ends_with(".cores")).all(|u| u.utilisation == 0.0));
}

#[test]
fn two_osds_share_each_drive_on_their_own_partitions() {
    let spec = reef(3, InitOptions { osds_per_drive: 2, ..InitOptions::default() });
    let layout = Layout::new(&spec, drive_bytes(&spec).unwrap()).unwrap();
    assert_eq!((layout.wal.len(), spec.osds()), (12, 12));
    // The two OSDs of drive 0 one after another: the second's WAL ring after the first's.
    assert!(layout.wal[1].0 >= layout.wal[0].0 + layout.wal[0].1);
    let primaries: std::collections::BTreeSet<u32> = layout.pgs.iter().map(|a| a[0]).collect();
    assert!(primaries.len() == 12, "every OSD is a primary: {primaries:?}");
    let r = go(&spec, "randwrite", 8);
    assert!(r.resources.iter().any(|u| u.name == "osd11.kv-sync"));
    assert!(r.drives.iter().all(|d| d.writes > 0));
}

/// A client on the storage node itself: its messages to that node's OSDs never touch a NIC.
#[test]
fn a_client_on_its_node_talks_over_loopback() {
    let o = InitOptions { clients_on_nodes: true, clients: 1, ..InitOptions::default() };
    let spec = ClusterSpec::from_options(&InitOptions {
        stack: "ceph-rbd".into(),
        nodes: 1,
        drives_per_node: 2,
        scale: 512,
        replicas: 1,
        volume_bytes: 8 << 30,
        ..o
    })
    .unwrap();
    let r = go(&spec, "randread", 4);
    assert!(r.read.ios > 100);
    for u in r.resources.iter().filter(|u| u.kind.starts_with("nic")) {
        assert_eq!(u.utilisation, 0.0, "{}", u.name);
    }
    assert!(!r.resources.iter().any(|u| u.name == "client0.cores"), "no client host of its own");
    assert!(r.resources.iter().any(|u| u.name == "node0.cores" && u.utilisation > 0.0));
}

/// The kernel client pays its send and receive on the job's core and has no librbd or
/// messenger threads; at QD1 it answers sooner than librbd by their difference.
#[test]
fn krbd_runs_on_the_jobs_core() {
    let lib = reef(3, InitOptions::default());
    let k = reef(3, InitOptions { rbd_client: "krbd".into(), ..InitOptions::default() });
    let (a, b) = (go(&lib, "randread", 1), go(&k, "randread", 1));
    assert!(!b.resources.iter().any(|u| u.name.contains(".librbd") || u.name.contains("job0.msgr")));
    let c = &lib.ceph;
    let saved = (c.client_librbd_read_ns.value + 2 * c.client_msgr_read_ns.value) as f64 - (c.krbd_tx_ns.value + c.krbd_rx_ns.value) as f64;
    let gap = a.read.lat_mean_ns - b.read.lat_mean_ns;
    assert!((gap - saved).abs() < 0.15 * saved, "librbd - krbd = {gap:.0} ns, the costs say {saved:.0}");
}

#[test]
fn a_job_naming_a_client_the_lab_lacks_is_refused() {
    let spec = lab("ceph-rbd", 3, 2, 3);
    let mut js = jobs(&spec, "randread", 1, 0, 1_000_000);
    js[1].filename = Some("client7".into());
    let e = run(&spec, js, &mut |_| true).unwrap_err().to_string();
    assert!(e.contains("filename=client7") && e.contains("client0 to client1"), "{e}");
    // Named in a file with fewer sections than clients: the client is what is wrong.
    let mut js = jobs(&spec, "randread", 1, 0, 1_000_000);
    js.retain(|j| j.job_index == 0);
    js[0].filename = Some("client7".into());
    let e = run(&spec, js, &mut |_| true).unwrap_err().to_string();
    assert!(e.contains("filename=client7") && e.contains("client0 to client1"), "{e}");
    // Named the other way round, each section on the client it names.
    let mut js = jobs(&spec, "randread", 1, 0, 1_000_000);
    js[0].filename = Some("client1".into());
    js[1].filename = Some("client0".into());
    assert!(run(&spec, js, &mut |_| true).is_ok());
}

#[test]
fn bad_reef_labs_name_the_field() {
    let bad = |o: InitOptions| {
        let o = InitOptions { stack: "ceph-rbd".into(), drive: "samsung-pm983-3.84t".into(), ..o };
        ClusterSpec::from_options(&o).unwrap_err().to_string()
    };
    let e = bad(InitOptions { pg_num: Some(crate::spec::Sourced::new(1000, "t")), ..InitOptions::default() });
    assert!(e.contains("ceph.pg_num: must be a power of two (got 1000)"), "{e}");
    let e = bad(InitOptions { osds_per_drive: 1000, volume_bytes: 8 << 30, ..InitOptions::default() });
    assert!(e.contains("cluster.osds_per_drive") && e.contains("at most"), "{e}");
    let e = bad(InitOptions { ceph_version: 15, ..InitOptions::default() });
    assert!(e.contains("--ceph-version 15"), "{e}");
    let e = bad(InitOptions { clients_on_nodes: true, clients: 4, ..InitOptions::default() });
    assert!(e.contains("cluster.clients_on_nodes"), "{e}");
}

/// Large reads saturate the drives' host links long before their command ceiling: the
/// drives are then the busiest resource, not the client's port that waits on them.
#[test]
fn large_reads_name_the_drives_host_link_as_the_bottleneck() {
    let spec = lab("nvmeof-tcp", 3, 1, 3);
    let mut js = jobs(&spec, "randread", 32, 2_000_000, 40_000_000);
    let bs = 1u64 << 20;
    js[0].bs.read = serde_json::from_value(json!({"min": bs, "max": bs, "split": [[bs, 100]]})).unwrap();
    js[0].blockalign.read = bs;
    let r = run(&spec, js, &mut |_| true).unwrap();
    let link = spec.drive_spec().unwrap().timing.unwrap().host_link_bytes_per_s.value as f64;
    let busiest = &r.resources[0];
    assert!(busiest.kind == "drive" && busiest.utilisation > 0.9, "{busiest:?}");
    for d in r.drives.iter().filter(|d| d.reads > 0) {
        let bytes_per_s = d.reads as f64 * bs as f64 / ((r.window_ns[1] - r.window_ns[0]) as f64 / 1e9);
        // Counted at completion: one I/O begun before the window may be in it (1 MiB of 40 ms).
        assert!(bytes_per_s <= link * 1.03, "drive{} moved {bytes_per_s:.3e} B/s over a {link:.3e} B/s link", d.drive);
    }
}

/// Every latency in one histogram bucket's lower half: fio's percentile (the bucket's
/// midpoint) lies above them all. The totals hold p50 and p99 to the latencies seen, so
/// lat_p99_ns never exceeds lat_max_ns (it did: p99 = the midpoint, above the max).
#[test]
fn percentiles_in_the_totals_lie_within_the_latencies_seen() {
    use crate::stats::{plat_bounds, plat_index, plat_value};
    let lo = plat_bounds(plat_index(1_000_000)).0;
    let mut lat = LatStat::default();
    for k in 0..100 {
        lat.add(lo + k);
    }
    assert!(plat_value(plat_index(lo)) > lo + 99, "the bucket's midpoint lies above every sample");
    let t = totals(&lat, 100 * 4096, 1.0);
    assert_eq!((t.lat_p50_ns, t.lat_p99_ns, t.lat_max_ns), (lo + 99, lo + 99, lo + 99));
    let mut low = LatStat::default();
    let hi = plat_bounds(plat_index(1_000_000)).1;
    for k in 1..=100 {
        low.add(hi - k);
    }
    let t = totals(&low, 0, 1.0);
    assert!(t.lat_p50_ns >= hi - 100 && t.lat_p99_ns <= t.lat_max_ns, "{t:?}");
    assert_eq!(totals(&LatStat::default(), 0, 1.0).lat_p99_ns, 0);
}

/// fio's ramp rules, as the drive engine keeps them (engine/fio/clone.rs `after_ramp`): the
/// I/Os in flight across the end of the ramp count in a clone's bytes and latencies but not
/// its I/Os (but the completion that triggers fio's lazy reset); number_ios counts inside the
/// ramp, and after it the I/Os in flight at the reset too (backend.c exceeds_number_ios). The
/// cluster counted number_ios from the ramp's end and dropped the I/Os in flight across it.
#[test]
fn the_ramps_end_counts_as_in_fio() {
    let spec = lab("nvmeof-tcp", 3, 1, 3);
    let qd = 16;
    let r = run(&spec, jobs(&spec, "randread", qd, 2_000_000, 10_000_000), &mut |_| true).unwrap();
    let c = &r.clones[0].read;
    assert!(c.total_ios > 100, "{}", c.total_ios);
    assert_eq!((c.io_bytes / 4096, c.clat.n), (c.total_ios + qd as u64 - 1, c.total_ios + qd as u64 - 1));
    let limit = 2000;
    let mut limited = jobs(&spec, "randread", qd, 2_000_000, 0);
    limited[0].time_based = false;
    limited[0].number_ios = limit;
    let r = run(&spec, limited.clone(), &mut |_| true).unwrap();
    let c = &r.clones[0].read;
    assert_eq!((c.total_ios, c.io_bytes / 4096, c.clat.n), (limit - qd as u64 + 1, limit, limit));
    // A limit reached inside the ramp ends the job there: fio reports the ramp's I/Os.
    limited[0].number_ios = 10;
    let r = run(&spec, limited, &mut |_| true).unwrap();
    let c = &r.clones[0];
    assert_eq!((c.read.total_ios, c.read.io_bytes, c.read.clat.n), (10, 10 * 4096, 0));
    assert!(c.elapsed_ns < 2_000_000 && c.runtime_ns == c.elapsed_ns, "{} {}", c.elapsed_ns, c.runtime_ns);
}

/// `jobs` with every client's block size `bs` (blockalign the same, or `align` when given).
fn bs_jobs(spec: &ClusterSpec, rw: &str, iodepth: u32, bs: u64, align: u64) -> Vec<JobSpec> {
    let mut js = jobs(spec, rw, iodepth, 2_000_000, 100_000_000);
    for j in &mut js {
        let b: crate::workload::spec::BsSpec = serde_json::from_value(json!({"min": bs, "max": bs, "split": [[bs, 100]]})).unwrap();
        (j.bs.read, j.bs.write) = (b.clone(), b);
        (j.blockalign.read, j.blockalign.write) = (align, align);
    }
    js
}

/// Back-end bytes the drives wrote in the window: each drive's link share times its link.
fn drive_write_bytes(spec: &ClusterSpec, r: &ClusterRun) -> f64 {
    let link = spec.drive_spec().unwrap().timing.unwrap().host_link_bytes_per_s.value as f64;
    let secs = (r.window_ns[1] - r.window_ns[0]) as f64 / 1e9;
    r.resources.iter().filter(|u| u.kind == "drive").map(|u| u.utilisation * link * secs).sum()
}

/// librbd splits an I/O across the RBD objects it touches (it was refused): an I/O of two
/// objects is two ops, each committed on every replica, and an 8 MiB sequential write on a
/// 3x pool of 4 MiB objects has the drives write three times its bytes, as two 4 MiB writes do.
#[test]
fn an_io_across_rbd_objects_is_one_op_per_object() {
    let mut spec = lab("ceph-rbd", 3, 1, 3);
    // Per I/O, with 64 KiB objects (many I/Os in a short window, so its edges count little).
    spec.ceph.object_bytes.value = 64 << 10;
    let txns = |bs: u64| {
        let r = run(&spec, bs_jobs(&spec, "write", 16, bs, bs), &mut |_| true).unwrap();
        assert!(r.write.ios > 500, "{bs}: {} I/Os", r.write.ios);
        r.kv_txns as f64 / r.write.ios as f64
    };
    let (one, two) = (txns(64 << 10), txns(128 << 10));
    assert!((one - 3.0).abs() < 0.15 && (two - 6.0).abs() < 0.3, "replica commits per I/O: one object {one:.3}, two {two:.3}");
    // Back-end bytes at the real object size.
    spec.ceph.object_bytes.value = 4 << 20;
    let amp = |bs: u64| {
        // 64 MiB written once, the whole run measured: no I/O half in the window.
        let mut js = bs_jobs(&spec, "write", 4, bs, bs);
        (js[0].time_based, js[0].ramp_time_ns, js[0].runtime_ns, js[0].io_size_bytes) = (false, 0, 0, 64 << 20);
        let r = run(&spec, js, &mut |_| true).unwrap();
        assert_eq!(r.write.bytes, 64 << 20);
        drive_write_bytes(&spec, &r) / r.write.bytes as f64
    };
    let (amp4, amp8) = (amp(4 << 20), amp(8 << 20));
    assert!([amp4, amp8].iter().all(|a| (3.0..3.02).contains(a)), "back-end bytes per client byte: 4 MiB {amp4:.3}, 8 MiB {amp8:.3}");
}

/// An I/O smaller than an object that crosses its boundary (12 KiB sequential: the 342nd
/// spans 4 MiB) is split too, where it was refused.
#[test]
fn an_unaligned_io_across_an_object_boundary_is_split() {
    let spec = lab("ceph-rbd", 3, 1, 3);
    for rw in ["read", "write"] {
        let r = run(&spec, bs_jobs(&spec, rw, 4, 12 << 10, 4096), &mut |_| true).unwrap();
        let d = if rw == "write" { &r.write } else { &r.read };
        assert!(d.ios > 300, "{rw}: {} I/Os", d.ios);
        if rw == "write" {
            // 3 commits per 12 KiB write (6 for the one in 341 that crosses).
            let per = r.kv_txns as f64 / d.ios as f64;
            assert!((per - 3.0).abs() < 0.1, "{per}");
        }
    }
}
