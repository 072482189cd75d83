"""``ssdtwin cluster``: replicated block storage built from drive twins (docs/cli.md, cluster).

``init`` writes a cluster folder (``cluster.toml``: topology, network, every per-I/O cost
with its source); ``info`` shows where the data lives; ``fio`` runs fio job files on it (one
job section per client volume) and prints fio's output; ``sweep`` steps the outstanding I/O
and plots IOPS against mean and 99 % latency.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from .. import _core
from ..cluster import (
    MAX_SWEEP_NUMJOBS,
    SWEEP_RWS,
    Cluster,
    ClusterError,
    depths_per_job,
    job_problem_where,
    one_batch_problem,
    parse_outstanding,
    plot_sweep,
    sweep,
    windows_ms,
)
from ..drive import parse_scale
from .common import Seed, check_fmt, check_output_file, emit_json, fail, make_plot_folder, plain_float, say, write_output_file
from .progress import Steps, run_progress, shown

cluster = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Replicated block storage (NVMe-oF or Ceph RBD) built from drive twins over a network model (docs/models.md).",
)

ClusterDir = typer.Argument(..., metavar="DIR", help="cluster folder (ssdtwin cluster init)")


def _open(path: Path, flag: str = "") -> Cluster:
    """The cluster folder at ``path``; a problem is one line (prefixed with ``flag``, the
    option that gave the folder, when there is one)."""
    pre = f"{flag} " if flag else ""
    try:
        return Cluster.open(path)
    except ClusterError as e:
        fail(f"{pre}{e}")
    except _core.SpecError as e:
        fail(pre + (f"{path}/cluster.toml: {e}" if str(path) not in str(e) else str(e)))


def lab_maps_bytes(c: Cluster) -> int:
    """Memory a lab's drives take once built: each drive is the preset's twin at the lab's
    scale, filled with its share of the volumes' data, and its FTL maps take memory for the
    part written (``studies.benchmarks.maps_bytes`` of the whole drive, times the share of
    it filled)."""
    from ..drive import Drive
    from ..studies.benchmarks import maps_bytes

    t, info = c.spec["cluster"], c.info()
    probe = Drive.in_memory(t["drive"], scale=int(t["scale"]))  # maps not yet touched: costs nothing
    whole = maps_bytes(probe.ftl_info())
    probe.close()
    return int(sum(whole * min(1.0, used / info["drive_bytes"]) for used in info["used_bytes"]))


def check_lab_memory(c: Cluster, where: str, advice: str = "use a larger scale N") -> None:
    """A lab whose drives do not fit in the memory available is refused before it is built,
    in one line led by ``where``: at a large scale (--scale 1/1) they were filled for
    minutes, for the kernel's OOM killer to end the command without a word."""
    from .. import nvmefmt
    from ..studies.benchmarks import mem_available_bytes

    avail = mem_available_bytes()
    if avail is None:
        return
    try:
        need = lab_maps_bytes(c)
    except (_core.SsdtwinError, ValueError):
        return  # the run names the problem
    if need + (256 << 20) > avail:
        t = c.spec["cluster"]
        fail(
            f"{where}: the FTL maps of the lab's {len(c.info()['used_bytes'])} {t['drive']} drives at 1/{t['scale']}, "
            f"filled with the volumes' data, need {nvmefmt.si_bytes(need)}, this machine has {nvmefmt.si_bytes(avail)} "
            f"available (MemAvailable): {advice}"
        )


def _check_memory(c: Cluster, path: Path) -> None:
    check_lab_memory(c, f"{path / 'cluster.toml'}: cluster.scale {c.spec['cluster']['scale']}")


def _size(flag: str, text: str) -> int:
    try:
        return _core.parse_size(text)
    except ValueError as e:
        fail(f"{flag} '{text}': {e}")


def _ms(flag: str, text: str, lo: int = 1) -> int:
    """A simulated duration in ms, ``lo`` ms to 1 h (a ramp may be 0: none, as fio's
    ramp_time=0)."""
    t = text.strip().lower()
    try:
        if t.endswith("ms"):
            v = plain_float(t[:-2])
        elif t.endswith("s"):
            v = plain_float(t[:-1]) * 1e3
        else:
            v = plain_float(t)
    except ValueError:
        fail(f"{flag} '{text}': a duration such as 100ms or 1s")
    if not lo <= v <= 3_600_000:
        fail(f"{flag} '{text}': must be {lo} ms to 1 h")
    if v != int(v):  # 1.5ms ran 1 ms, and 0.0015s too
        fail(f"{flag} '{text}': a whole number of ms (each point's job file gives it in ms)")
    return int(v)


# The cluster.toml field each count of `cluster init` sets: its range is the core's for that
# field (`_core.cluster_field_ranges`, what the core's `validate` checks). --replicas is
# 1..nodes, --pg-num a power of two in its range.
INIT_FIELDS = {
    "--nodes": "cluster.nodes",
    "--drives-per-node": "cluster.drives_per_node",
    "--clients": "cluster.clients",
    "--osds-per-nvme": "cluster.osds_per_drive",
    "--fio-procs": "cluster.fio_procs_per_client",
    "--node-cores": "hosts.node_cores",
    "--client-cores": "hosts.client_cores",
    "--pg-num": "ceph.pg_num",
}


def init_ranges() -> dict[str, tuple[int, int]]:
    """Each count flag's range: its field's, and --osd-threads (threads per OSD, which pin
    `hosts.osd_cpus`) that field's."""
    core = _core.cluster_field_ranges()
    ranges = {flag: core[field] for flag, field in INIT_FIELDS.items()}
    ranges["--osd-threads"] = core["hosts.osd_cpus"]
    return ranges


def _keep_pinned_cpus(like: Path, copied: dict[str, Any], opts: dict[str, Any]) -> None:
    """A pinned lab copied with another number of drives or OSDs per node (``--drives-per-node``,
    ``--osds-per-nvme``) keeps its threads per NVMe, as the Ceph lab's posts give and vary them
    (2 to 20 CPU threads per NVMe, at 1 to 8 OSDs per NVMe): each NVMe brings its share of
    the pinned CPUs, and its OSDs divide that share among themselves. A note says the CPU set
    and the threads per OSD before and after, and the field's source records it. Another
    drive count kept the lab's CPU set for the node, so the threads per NVMe and per OSD
    changed without a word (4 threads per OSD became 2 with twice the drives). A share that
    does not come out whole, or a set beyond the node's cores, is refused, naming the flags
    that decide it."""
    cpus = copied.get("osd_cpus")
    if not isinstance(cpus, dict) or int(cpus["value"]) == 0:
        return  # not pinned: the OSDs run on the node's cores
    was_nvme, was_osds = int(copied["drives_per_node"]), int(copied["osds_per_drive"])
    now_nvme, now_osds = int(opts["drives_per_node"]), int(opts.get("osds_per_drive") or 1)
    if (now_nvme, now_osds) == (was_nvme, was_osds):  # (the counts are in range: the flags were checked, the copy validated)
        return
    n = int(cpus["value"])
    per_nvme = n / was_nvme
    lab = f"--like {like} pins its OSDs to {n} CPUs per node, {per_nvme:.3g} threads per NVMe (hosts.osd_cpus)"
    if n * now_nvme % was_nvme:
        fail(
            f"--drives-per-node {now_nvme}: {lab}, and {now_nvme} NVMe would take {per_nvme * now_nvme:.3g}, not a whole "
            f"number of CPUs: give --osd-threads N (N CPU threads per OSD)"
        )
    now_cpus = n * now_nvme // was_nvme
    cores = opts.get("node_cores") or copied.get("node_cores")
    node_cores = int(cores["value"]) if isinstance(cores, dict) else None
    if node_cores is not None and now_cpus > node_cores:
        fail(
            f"--drives-per-node {now_nvme}: {lab}, so {now_nvme} NVMe take {now_cpus} CPUs, more than a node's "
            f"{node_cores} cores (hosts.node_cores): give --node-cores N or --osd-threads N"
        )
    now, was = now_nvme * now_osds, was_nvme * was_osds
    opts["osd_cpus"] = {
        "value": now_cpus,
        "source": f"{cpus['source']}; {per_nvme:.3g} threads per NVMe kept by cluster init --like for {now_nvme} NVMe x "
        f"{now_osds} OSDs per node: {now_cpus} CPUs, {now_cpus / now:.3g} threads per OSD (the lab's {n / was:.3g})",
    }
    say(
        f"ssdtwin cluster init: note: --like {like}: its OSDs stay pinned to {per_nvme:.3g} threads per NVMe: "
        f"{now_cpus} CPUs per node for {now_nvme} NVMe (the lab's {n} for {was_nvme}), shared by {now} OSDs: "
        f"{now_cpus / now:.3g} threads per OSD, the lab's {n / was:.3g} (--osd-threads N pins N per OSD instead)"
    )


@cluster.command("init")
def init_cmd(
    path: Path = typer.Argument(..., metavar="DIR", help="new cluster folder"),
    like: Optional[Path] = typer.Option(
        None, "--like", help="copy the lab (nodes, drives, clients, network, volumes, scale, seed) of this cluster"
    ),
    stack: Optional[str] = typer.Option(None, "--stack", help="nvmeof-tcp, nvmeof-rdma or ceph-rbd (default nvmeof-tcp)"),
    nodes: Optional[int] = typer.Option(None, "--nodes", help="storage nodes (default 3)"),
    drives_per_node: Optional[int] = typer.Option(None, "--drives-per-node", help="drives per storage node (default 5)"),
    drive: Optional[str] = typer.Option(None, "--drive", help="drive preset (ssdtwin models; default kioxia-cm5-r-3.84t)"),
    clients: Optional[int] = typer.Option(None, "--clients", help="client hosts, one volume each (default 4)"),
    network: Optional[str] = typer.Option(None, "--network", help="10GbE, 25GbE, 40GbE, 100GbE or 200GbE (default 100GbE)"),
    replicas: Optional[int] = typer.Option(None, "--replicas", help="copies of every volume, one per node at most (default 3)"),
    volume_size: Optional[str] = typer.Option(None, "--volume-size", help="each client's volume at full scale (default 200GiB)"),
    ceph_version: Optional[int] = typer.Option(None, "--ceph-version", help="Ceph release of the cost table: 14 (Nautilus) or 18 (Reef)"),
    osds_per_nvme: Optional[int] = typer.Option(None, "--osds-per-nvme", help="Ceph OSDs per drive, each on its own partition (default 1)"),
    fio_procs: Optional[int] = typer.Option(None, "--fio-procs", help="fio processes per client, each with its own volume (default 1)"),
    clients_on_nodes: Optional[bool] = typer.Option(
        None, "--clients-on-nodes/--separate-clients", help="run client i's fio on storage node i (default: separate client hosts)"
    ),
    rbd_client: Optional[str] = typer.Option(
        None, "--rbd-client", help="librbd (fio's rbd engine) or krbd (the kernel client); default librbd"
    ),
    msgr: Optional[int] = typer.Option(None, "--msgr", help="Ceph messenger protocol, 1 or 2 (default 2)"),
    node_cores: Optional[int] = typer.Option(None, "--node-cores", help="cores (logical CPUs) of each storage node (default 32)"),
    client_cores: Optional[int] = typer.Option(None, "--client-cores", help="cores (logical CPUs) of each client (default 32)"),
    osd_threads: Optional[int] = typer.Option(
        None, "--osd-threads", help="CPU threads per OSD: a node's OSDs pinned together to this many per OSD (numactl); 0 = not pinned"
    ),
    pg_num: Optional[int] = typer.Option(None, "--pg-num", help="PGs of the RBD pool, a power of two (default 512)"),
    scale: Optional[str] = typer.Option(None, "--scale", help="1/N: drives and volumes at 1/N (default 1/64)"),
    seed: Optional[int] = Seed(None, "seed of the cluster (default 1)"),
    fmt: str = typer.Option("normal", "-o", "--output-format", help="normal or json"),
) -> None:
    """Write a cluster folder: cluster.toml with the topology and every cost, each with its source."""
    check_fmt(fmt)
    # Built from the flags given (by name), then checked by the core as ClusterInitOptions.
    opts: dict[str, Any] = dict(_open(like, "--like").options()) if like is not None else {}
    given: dict[str, Any] = {
        "stack": stack,
        "nodes": nodes,
        "drives_per_node": drives_per_node,
        "drive": drive,
        "clients": clients,
        "network": network,
        "replicas": replicas,
        "ceph_version": ceph_version,
        "seed": seed,
    }
    given.update(
        osds_per_drive=osds_per_nvme,
        fio_procs_per_client=fio_procs,
        clients_on_nodes=clients_on_nodes,
        rbd_client=rbd_client,
        msgr_version=msgr,
    )
    ranges = init_ranges()
    for flag, v in (
        ("--nodes", nodes),
        ("--drives-per-node", drives_per_node),
        ("--clients", clients),
        ("--osds-per-nvme", osds_per_nvme),
        ("--fio-procs", fio_procs),
        ("--node-cores", node_cores),
        ("--client-cores", client_cores),
        ("--osd-threads", osd_threads),
    ):
        # Each flag's own range (the core's for its field): a negative count said "must be
        # 0..4294967295", the range of the binding's integer, not the option's.
        lo, hi = ranges[flag]
        if v is not None and not lo <= v <= hi:
            fail(f"{flag} {v}: must be {lo}..{hi}")
    pg_lo, pg_hi = ranges["--pg-num"]
    if pg_num is not None and not (pg_lo <= pg_num <= pg_hi and pg_num & (pg_num - 1) == 0):
        fail(f"--pg-num {pg_num}: must be a power of two, {pg_lo}..{pg_hi}")
    if msgr is not None and msgr not in (1, 2):
        fail(f"--msgr {msgr}: choose 1 or 2 (the messenger protocol)")
    if ceph_version is not None and ceph_version not in (14, 18):
        fail(f"--ceph-version {ceph_version}: choose 14 (Nautilus) or 18 (Reef), the releases with a cost table")
    if replicas is not None:
        n = nodes if nodes is not None else int(opts.get("nodes") or 3)
        if not 1 <= replicas <= n:
            fail(f"--replicas {replicas}: must be 1..{n} (one replica per storage node at most, and the lab has {n} nodes)")
    copied = dict(opts)
    opts.update({k: v for k, v in given.items() if v is not None})
    if network is not None:
        opts.pop("network_table", None)  # --network names the preset instead of the copied table
    # Ceph's own knobs on an NVMe-oF cluster were written to cluster.toml and never used (the
    # core already refuses --osds-per-nvme there: "only Ceph has OSDs").
    kind = opts.get("stack") or "nvmeof-tcp"
    ceph_only = [
        f
        for f, v in (
            ("--ceph-version", ceph_version),
            ("--rbd-client", rbd_client),
            ("--msgr", msgr),
            ("--pg-num", pg_num),
            ("--osd-threads", osd_threads),
        )
        if v is not None
    ]
    if ceph_only and kind in ("nvmeof-tcp", "nvmeof-rdma"):
        fail(f"{', '.join(ceph_only)}: Ceph settings, and this is a {kind} cluster (give --stack ceph-rbd)")
    copied_osds = int(opts.get("osds_per_drive") or 1)
    if kind in ("nvmeof-tcp", "nvmeof-rdma") and osds_per_nvme is None and copied_osds > 1:
        # A Ceph lab's OSDs per NVMe copied onto NVMe-oF was refused as if asked for
        # ("only Ceph has OSDs"): the copy takes its drives whole, as the stack has them.
        say(f"ssdtwin cluster init: note: --like {like}: its {copied_osds} OSDs per NVMe are Ceph's; the {kind} lab uses each drive whole")
        opts["osds_per_drive"] = 1
    pinned = opts.get("osd_cpus")
    if kind in ("nvmeof-tcp", "nvmeof-rdma") and isinstance(pinned, dict) and int(pinned["value"]) > 0:
        # A Ceph lab's OSD pinning copied onto NVMe-oF, which has no OSDs, was kept (unused)
        # and, with another --drives-per-node, carried per NVMe as if the lab had OSDs.
        n_pinned = pinned["value"]
        say(f"ssdtwin cluster init: note: --like {like}: its OSDs' {n_pinned} pinned CPUs per node are Ceph's; the {kind} lab has no OSDs")
        opts.pop("osd_cpus")
    for flag, key, v in (
        ("--node-cores", "node_cores", node_cores),
        ("--client-cores", "client_cores", client_cores),
        ("--pg-num", "pg_num", pg_num),
    ):
        if v is not None:
            opts[key] = {"value": v, "source": f"[ASSUMED] the lab's, given to cluster init {flag} {v}"}
    if osd_threads is not None:
        opts.pop("osd_cpus", None)
        opts["osd_threads"] = osd_threads
    elif like is not None and kind == "ceph-rbd":  # (NVMe-oF has no OSDs to pin: dropped above)
        _keep_pinned_cpus(like, copied, opts)
    if volume_size is not None:
        opts["volume_bytes"] = _size("--volume-size", volume_size)
    if scale is not None:
        sc: Optional[int] = None
        try:
            sc = parse_scale(scale)
        except ValueError as e:
            if "at most" not in str(e):
                fail(f"--scale: {e}")
        # cluster.scale's range, not the binding's integer's ("N must be at most 4294967295").
        if sc is None or not 1 <= sc <= 65536:
            fail(f"--scale '{scale}': N must be 1..65536 (cluster.scale)")
        opts["scale"] = sc
    try:
        c = Cluster.create(path, **opts)
    except ClusterError as e:
        fail(str(e))
    except _core.SpecError as e:
        # The line is led by `ssdtwin cluster init: error:` already ("cluster init: cluster
        # init: cluster.osds_per_drive: ...").
        fail(str(e).removeprefix("cluster init: "))
    except OSError as e:
        fail(f"{path}: {e.strerror or e}")
    if fmt == "json":
        emit_json(c.spec)
        return
    t = c.spec["cluster"]
    typer.echo(
        f"{path}: {t['stack']} cluster, {t['nodes']} nodes x {t['drives_per_node']} {t['drive']}, {t['clients']} clients, "
        f"{c.spec['network']['name']}, {t['replicas']} replicas of {t['clients']} x {t['volume_bytes'] / 2**30:g} GiB volumes, "
        f"drives at 1/{t['scale']} (costs and sources: {path}/cluster.toml)"
    )


@cluster.command("info")
def info_cmd(path: Path = ClusterDir, fmt: str = typer.Option("normal", "-o", "--output-format", help="normal or json")) -> None:
    """Where the data lives: drives, volume size as simulated, replicas or PGs per drive."""
    check_fmt(fmt)
    c = _open(path)
    try:
        info = c.info()
    except _core.SsdtwinError as e:
        fail(f"{path}: {e}")
    if fmt == "json":
        emit_json({"spec": c.spec, "layout": info})
        return
    t = c.spec["cluster"]
    what = "primary PGs" if t["stack"] == "ceph-rbd" else "volume replica(s)"
    typer.echo(
        f"{t['stack']}: {info['drives']} drives of {info['drive_bytes'] / 1e9:.2f} GB at 1/{t['scale']}, "
        f"{info['volumes']} volumes of {info['volume_bytes'] / 2**20:.0f} MiB as simulated"
    )
    for d, (used, n) in enumerate(zip(info["used_bytes"], info["placements"])):
        typer.echo(f"  drive{d:<3} node{d // t['drives_per_node']}  {used / 2**20:>10.0f} MiB used  {n:>4} {what}")


@cluster.command("fio")
def fio_cmd(
    path: Path = ClusterDir,
    jobs: list[Path] = typer.Argument(..., metavar="JOBFILE", help="fio job file(s): one job section per client volume"),
    output_format: str = typer.Option("normal", "-o", "--output-format", help="normal, json or json+"),
    output: Optional[Path] = typer.Option(None, "--output", help="write the report here instead of stdout"),
    seed: int = Seed(0, "seed for jobs with randrepeat=0"),
    dump_jobs: Optional[Path] = typer.Option(None, "--dump-jobs", help="also write the resolved engine input (JSON) here"),
) -> None:
    """Run fio job files on the cluster in simulated time; fio's output, then the busiest resources on stderr."""
    from ..fio import FioJobError
    from ..fio.run import job_file_problem, render

    if output_format not in ("normal", "json", "json+"):
        fail(f"-o/--output-format '{output_format}': must be normal, json or json+")
    problems = [p for p in map(job_file_problem, jobs) if p]
    if problems:
        fail(*problems)
    check_output_file("--output", output)
    check_output_file("--dump-jobs", dump_jobs)
    c = _open(path)
    _check_memory(c, path)
    t0 = time.perf_counter()
    run = None
    try:
        from ..fio import parse

        run = parse([str(j) for j in jobs], run_seed=seed)
        problem = one_batch_problem(run)
        if problem:
            fail(problem)
        specs = c.resolve(run)
        if dump_jobs is not None:
            dump_jobs.write_text(json.dumps(specs))
        with run_progress("cluster fio") as cb:
            res = _core.cluster_run(c.text, specs, cb, str(path / "cluster.toml"))
    except FioJobError as e:
        fail(*e.lines())
    except (_core.EngineError, _core.SpecError) as e:
        fail(str(e) if run is None else job_problem_where(run, str(e)))
    wall = time.perf_counter() - t0
    text = render(run, res["clones"], output_format)
    if output is not None:
        write_output_file("--output", output, text)
    else:
        typer.echo(text, nl=not text.endswith("\n"))
    top = ", ".join(f"{r['name']} {r['utilisation']:.0%}" for r in res["resources"][:3])
    say(f"ssdtwin cluster fio: {res['stack']}, {res['simulated_ns'] / 1e9:.3f} s simulated in {wall:.2f} s; busiest: {top}")


def _and(values: list[int]) -> str:
    """1, 2 and 4."""
    return ", ".join(map(str, values[:-1])) + f" and {values[-1]}"


@cluster.command("sweep")
def sweep_cmd(
    path: Path = ClusterDir,
    outstanding: str = typer.Option("1..256", "--outstanding", help="outstanding I/O per client: 1..256 (powers of two) or a list 1,8,64"),
    rw: str = typer.Option("randread,randwrite", "--rw", help="fio rw of each curve (4 KiB): randread, randwrite, read, write"),
    numjobs: Optional[int] = typer.Option(
        None,
        "--numjobs",
        min=1,
        max=MAX_SWEEP_NUMJOBS,
        help="fio jobs per client, sharing its outstanding I/O (default: the lab's fio processes)",
    ),
    runtime: str = typer.Option("auto", "--runtime", help="measured simulated time per point (auto: 100ms NVMe-oF, 1s Ceph)"),
    ramp: str = typer.Option("auto", "--ramp", help="simulated warm-up per point (auto: 20ms NVMe-oF, 1s Ceph)"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="write one PNG per rw into this folder"),
    fmt: str = typer.Option("normal", "-o", "--output-format", help="normal or json"),
) -> None:
    """IOPS, mean and 99 % latency and the busiest resource as outstanding I/O grows."""
    from ..fio import FioJobError

    check_fmt(fmt)
    try:
        levels = parse_outstanding(outstanding)
    except ClusterError as e:
        fail(str(e))
    rws = [x.strip() for x in rw.split(",") if x.strip()]
    bad = [x for x in rws if x not in SWEEP_RWS]
    if bad or not rws:
        fail(f"--rw '{rw}': a comma list of {', '.join(SWEEP_RWS)}")
    twice = sorted({x for x in rws if rws.count(x) > 1})
    if twice:
        # It ran the same curve twice, each point again on a cluster built afresh.
        fail(f"--rw '{rw}': {twice[0]} given twice (each curve once)")
    runtime_ms = None if runtime == "auto" else _ms("--runtime", runtime)
    ramp_ms = None if ramp == "auto" else _ms("--ramp", ramp, lo=0)
    c = _open(path)
    _check_memory(c, path)
    if plot is not None:
        make_plot_folder(plot)
    jobs = int(c.spec["cluster"]["fio_procs_per_client"]) if numjobs is None else numjobs
    depths = depths_per_job(levels, jobs)
    if len(depths) < len(levels):
        # Each job takes a whole share of at least 1: levels below the jobs per client (or
        # between two multiples of them) came to the same point, which ran again each time.
        groups = [[lv for lv in levels if max(1, lv // jobs) == q] for q in depths]
        said = "; ".join(f"{_and(g)} all run as {max(1, g[0] // jobs) * jobs}" for g in groups if len(g) > 1)
        say(
            f"ssdtwin cluster sweep: note: with {jobs} jobs per client, each taking a whole share of at least 1, "
            f"--outstanding {said} per client: each point runs once ({len(depths)} per curve, not {len(levels)})"
        )
    auto = windows_ms(c.stack)
    shown_ramp, shown_runtime = (auto[0] if ramp_ms is None else ramp_ms), (auto[1] if runtime_ms is None else runtime_ms)
    say(f"ssdtwin cluster sweep: {c.stack}, each point {shown_ramp} ms of ramp and {shown_runtime} ms measured (simulated)")
    log: Callable[[str], None] = (lambda m: print(m, file=sys.stderr)) if fmt == "json" else typer.echo
    t0 = time.perf_counter()
    try:
        with shown() as display:
            steps = None if display is None else Steps(display, "cluster sweep", len(depths) * len(rws))

            def point_done(line: str) -> None:
                log(line)
                if steps is not None:
                    steps.next()

            rows = sweep(c, levels, rws, jobs, ramp_ms, runtime_ms, log=point_done, progress=None if steps is None else steps.callback)
    except FioJobError as e:
        fail(*e.lines())
    except (_core.EngineError, _core.SpecError) as e:
        fail(str(e))
    if plot is not None:
        for p in plot_sweep(rows, plot, title=f"{c.stack}, {path}"):
            say(f"ssdtwin cluster sweep: wrote {p}")
        (plot / "sweep.json").write_text(json.dumps(rows, indent=2))
    if fmt == "json":
        emit_json(rows)
    else:
        typer.echo(f"({time.perf_counter() - t0:.1f} s wall, {len(rows)} points)")
