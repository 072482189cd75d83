"""Replicated block storage built from drive twins (docs/models.md, "Replicated block storage").

A cluster folder holds ``cluster.toml``: the topology (nodes, drives, clients, replicas,
volume size, scale, seed), the network and every per-I/O software cost with its source.
Runs build the cluster afresh from it in memory (the drives are the preset's twins, filled
with the volumes' data), so a folder is a description, never a state that drifts.

fio job files drive it: one job section per client volume (numjobs for more jobs on a
client), resolved against a volume of ``volume_bytes / scale``; the output is fio's.
"""

from __future__ import annotations

import math
import numbers
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal, NotRequired, Optional, TypedDict, Union, Unpack

from . import _core
from .core_types import ClusterInitOptions, ClusterRun, LayoutInfo
from .fio import FioJobError, parse, parse_string
from .fio.contract import JobSpec
from .fio.parser import PathLike, Run

CONFIG = "cluster.toml"
# The directions a cluster run totals (ClusterRun's ``read`` and ``write``).
Direction = Literal["read", "write"]
DIRECTIONS: tuple[Direction, ...] = ("read", "write")
LBA_BYTES = 512  # the block size both stacks present to the client (RBD, KumoScale volumes)

# A point's window in simulated time (ramp, runtime), per stack: long enough that the figures
# stop moving with it (docs/models.md §11, "Measurement windows"). NVMe-oF settles at once;
# Ceph's 99th percentile under load keeps growing for about a second as I/Os gather behind the
# op shards whose threads wait for a busy PG lock.
WINDOWS_MS = {"nvmeof-tcp": (20, 100), "nvmeof-rdma": (20, 100), "ceph-rbd": (1000, 1000)}


def windows_ms(stack: str) -> tuple[int, int]:
    return WINDOWS_MS[stack]


class ClusterError(Exception):
    """A cluster folder or option that cannot be used (one line)."""


def config_problem(folder: Path) -> Optional[str]:
    """What is wrong with ``folder/cluster.toml`` when it exists but is no file (a directory,
    a FIFO): the same line from every command that opens or makes a cluster folder (``init``
    said "already a cluster folder" and the others "no cluster.toml" for one directory)."""
    f = folder / CONFIG
    if f.is_dir():
        return f"{f}: a directory, not a file; a cluster folder's {CONFIG} is the file `ssdtwin cluster init` writes"
    if f.exists() and not f.is_file():
        return f"{f}: not a regular file; a cluster folder's {CONFIG} is the file `ssdtwin cluster init` writes"
    return None


# The cluster.toml field of each integer option of ``Cluster.create`` (``cluster init``; a
# ``{value, source}`` option by its value) whose range is the core's FIELD_RANGES
# (``_core.cluster_field_ranges``). ``osd_threads`` is per OSD and pins ``hosts.osd_cpus``:
# that field's range.
OPTION_FIELDS = {
    "nodes": "cluster.nodes",
    "drives_per_node": "cluster.drives_per_node",
    "clients": "cluster.clients",
    "scale": "cluster.scale",
    "osds_per_drive": "cluster.osds_per_drive",
    "fio_procs_per_client": "cluster.fio_procs_per_client",
    "node_cores": "hosts.node_cores",
    "client_cores": "hosts.client_cores",
    "osd_cpus": "hosts.osd_cpus",
    "osd_threads": "hosts.osd_cpus",
    "pg_num": "ceph.pg_num",
}
U32_MAX, U64_MAX = 0xFFFF_FFFF, 0xFFFF_FFFF_FFFF_FFFF  # the binding's integers (InitOptions)
# The other integer options: what each field may hold, as the core says it.
OPTION_DOMAINS = {
    "replicas": "cluster.replicas: must be 1..=cluster.nodes (one replica per storage node at most; got {v})",
    "volume_bytes": "cluster.volume_bytes: must be a positive multiple of 4096 (got {v})",
    "ceph_version": "ceph.version: 14 or 18, the releases with a cost table (got {v})",
    "msgr_version": "ceph.msgr_version: 1 or 2 (got {v})",
}


def check_options(options: Mapping[str, Any]) -> None:
    """Raise what ``_core.cluster_init`` says of an integer option outside its field's range,
    in the core's words (``SpecError``: ``cluster init: cluster.nodes: must be 1..=64 (got
    -1)``), for the values the binding cannot convert as well: a negative count said "out of
    range; must be an integer in 0..=4294967295 (u32)", the binding's integer, where 0 named
    the field and its range. A bool for an integer is a ``ValueError`` naming the option, as
    another type is (the binding took True for 1). Values of other types are left to the
    binding, which names them."""
    ranges = _core.cluster_field_ranges()
    problems = []
    for key, raw in options.items():
        if key not in OPTION_FIELDS and key not in OPTION_DOMAINS:
            continue
        nested = isinstance(raw, Mapping) and key in OPTION_FIELDS
        v = raw.get("value") if nested else raw
        if isinstance(v, bool):
            raise ValueError(f"cluster options: {key}{'.value' if nested else ''}={v}: an integer, not a bool")
        if not isinstance(v, numbers.Integral):
            continue
        v = int(v)
        if key in OPTION_FIELDS:
            field = OPTION_FIELDS[key]
            lo, hi = ranges[field]
            if not lo <= v <= hi:
                shown = field if key != "osd_threads" else f"osd_threads (the threads per OSD that pin {field})"
                problems.append(f"{shown}: must be {lo}..={hi} (got {v})")
        elif v < 0 or v > (U64_MAX if key == "volume_bytes" else U32_MAX):
            # Within the binding's integer, the core's own check says it (with the lab's nodes).
            problems.append(OPTION_DOMAINS[key].format(v=v))
    if problems:
        raise _core.SpecError("cluster init: " + "; ".join(problems) + (f" ({len(problems)} problems)" if len(problems) > 1 else ""))


@dataclass
class Cluster:
    """A cluster description: its ``cluster.toml`` text and the parsed spec."""

    text: str
    spec: dict[str, Any]
    path: Optional[Path] = None

    @staticmethod
    def from_text(text: str, origin: str = CONFIG, path: Optional[Path] = None) -> Cluster:
        return Cluster(text, _core.cluster_spec(text, origin), path)

    @staticmethod
    def create(path: os.PathLike[str] | str, **options: Unpack[ClusterInitOptions]) -> Cluster:
        """Write a new cluster folder from ``cluster init`` options (``InitOptions``: stack,
        nodes, drives_per_node, drive, scale, clients, replicas, network, volume_bytes, seed,
        ceph_version, osds_per_drive, fio_procs_per_client, clients_on_nodes, rbd_client,
        msgr_version, and node_cores, client_cores, osd_cpus, pg_num as ``{value, source}``;
        defaults are the brief's lab)."""
        p = Path(path)
        problem = config_problem(p)
        if problem:
            raise ClusterError(problem)
        if (p / CONFIG).exists():
            raise ClusterError(f"{p}: already a cluster folder ({CONFIG} exists)")
        if p.exists() and not p.is_dir():
            raise ClusterError(f"{p}: not a folder")
        # An image's folder is its own: a cluster.toml written into it is not the user's intent.
        for marker, what in (("ssdtwin.toml", "a drive image"), ("stack.toml", "a stack image")):
            if (p / marker).is_file():
                raise ClusterError(f"{p}: {what} ({marker} exists); give the cluster a folder of its own")
        check_options(options)
        text = _core.cluster_init(options)
        p.mkdir(parents=True, exist_ok=True)
        (p / CONFIG).write_text(text)
        return Cluster.from_text(text, str(p / CONFIG), p)

    @staticmethod
    def open(path: os.PathLike[str] | str) -> Cluster:
        p = Path(path)
        f = p / CONFIG
        if p.is_file() and p.name == CONFIG:
            # The file itself given for its folder: "no such folder" sent the user looking.
            raise ClusterError(f"{p}: the cluster's {CONFIG}; give its folder ({p.parent})")
        if p.exists() and not p.is_dir():
            raise ClusterError(f"{p}: not a cluster folder (a file, not a folder)")
        if not p.is_dir():
            raise ClusterError(f"{p}: not a cluster folder (no such folder)")
        problem = config_problem(p)
        if problem:
            raise ClusterError(problem)
        if not f.is_file():
            raise ClusterError(f"{p}: not a cluster folder (no {CONFIG}; make one with `ssdtwin cluster init`)")
        try:
            text = f.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise ClusterError(f"{f}: {e}") from None
        return Cluster.from_text(text, str(f), p)

    def options(self) -> ClusterInitOptions:
        """The lab as ``cluster init`` options (what ``--like`` copies): the topology, the
        network (its whole table, edits and sources kept), the Ceph release, client and
        messenger, and the lab's cores, OSD pinning and PGs with their sources."""
        t, c, h = self.spec["cluster"], self.spec["ceph"], self.spec["hosts"]
        return {
            "stack": t["stack"],
            "nodes": t["nodes"],
            "drives_per_node": t["drives_per_node"],
            "drive": t["drive"],
            "scale": t["scale"],
            "clients": t["clients"],
            "replicas": t["replicas"],
            "volume_bytes": t["volume_bytes"],
            "seed": t["seed"],
            "osds_per_drive": t["osds_per_drive"],
            "fio_procs_per_client": t["fio_procs_per_client"],
            "clients_on_nodes": t["clients_on_nodes"],
            "network": self.spec["network"]["name"],
            # The table, not the name alone: a copy took the preset of the name, dropping an
            # edited link rate, MTU or switch (the copy ran another lab), and a name no preset
            # has was refused as if given to --network.
            "network_table": self.spec["network"],
            "ceph_version": c["version"],
            "rbd_client": c["rbd_client"],
            "msgr_version": c["msgr_version"],
            "pg_num": c["pg_num"],
            "node_cores": h["node_cores"],
            "client_cores": h["client_cores"],
            "osd_cpus": h["osd_cpus"],
        }

    @property
    def stack(self) -> str:
        return str(self.spec["cluster"]["stack"])

    def info(self) -> LayoutInfo:
        """Where the data lives (drives, volumes, PGs), without running anything."""
        return _core.cluster_info(self.text)

    @property
    def volume_bytes(self) -> int:
        """Each volume as simulated (1/scale of its size, in whole RBD objects)."""
        return int(self.info()["volume_bytes"])

    def resolve(self, run: Run) -> list[JobSpec]:
        """The engine input of a parsed run, against this cluster's volumes. A job past a
        volume's end names the volume as simulated (``volume_bytes / scale``): "the end of
        the target (16777216 bytes)" left a user who wrote size=4g for an 8 GiB volume to
        guess that the target was the volume at 1/512."""
        size = self.volume_bytes
        try:
            return run.to_engine(size, LBA_BYTES)
        except FioJobError as e:
            t = self.spec["cluster"]
            target = f"the end of the target ({size} bytes)"
            volume = (
                f"the end of the client's volume as simulated ({size} bytes: cluster.volume_bytes "
                f"{t['volume_bytes']} at 1/{t['scale']}; job sizes and offsets are at that scale)"
            )
            for err in (e, *e.errors):
                err.reason = err.reason.replace(target, volume)
            raise

    def run(self, run: Run, progress: Optional[Callable[[int, int, str, int], object]] = None) -> ClusterRun:
        """Simulate a parsed fio run (``clones`` is fio's engine output, one per clone, for
        ``ssdtwin.fio.output``)."""
        return _core.cluster_run(self.text, self.resolve(run), progress)

    def run_files(
        self,
        files: Union[PathLike, Sequence[PathLike]],
        run_seed: int = 0,
        progress: Optional[Callable[[int, int, str, int], object]] = None,
    ) -> tuple[Run, ClusterRun]:
        run = parse(files, run_seed=run_seed)
        return run, self.run(run, progress)

    def run_text(
        self, text: str, name: str = "<cluster>", progress: Optional[Callable[[int, int, str, int], object]] = None
    ) -> tuple[Run, ClusterRun]:
        run = parse_string(text, name=name)
        return run, self.run(run, progress)


def with_stack(base: Cluster, stack: str) -> Cluster:
    """A cluster of ``base``'s lab with another stack, costs at their defaults: what
    ``cluster init --like`` writes."""
    opts = base.options()
    opts["stack"] = stack
    return Cluster.from_text(_core.cluster_init(opts))


def sweep_job(clients: int, rw: str, iodepth: int, numjobs: int = 1, ramp_ms: int = 20, runtime_ms: int = 100) -> str:
    """The job file of one sweep point: 4 KiB ``rw`` at ``iodepth`` per job, ``numjobs`` jobs
    per client, one section per client volume, time based."""
    head = (
        f"[global]\nioengine=libaio\ndirect=1\nrw={rw}\nbs=4k\niodepth={iodepth}\nnumjobs={numjobs}\n"
        f"time_based=1\nramp_time={ramp_ms}ms\nruntime={runtime_ms}ms\n"
    )
    return head + "".join(f"[client{c}]\n" for c in range(clients))


MAX_OUTSTANDING = 65535  # I/Os in flight per client at one sweep level


def parse_outstanding(text: str) -> list[int]:
    """``1..256`` (powers of two from 1 to 256), ``1,8,64`` or ``32``."""
    text = text.strip()
    try:
        if "_" in text:  # int() takes Python's digit separators (1_0 for 10): no number here does
            raise ValueError(text)
        if ".." in text:
            lo_s, hi_s = text.split("..", 1)
            lo, hi = int(lo_s), int(hi_s)
            if lo < 1 or hi < lo:
                raise ValueError
            out = []
            v = lo
            while v <= hi:
                out.append(v)
                v *= 2
            if out[-1] != hi:
                out.append(hi)
            vals = out
        else:
            vals = [int(x) for x in text.split(",")]
    except ValueError:
        raise ClusterError(
            f"--outstanding '{text}': a range such as 1..256 (powers of two) or a list such as 1,8,64 of positive integers"
        ) from None
    if not vals or min(vals) < 1 or max(vals) > MAX_OUTSTANDING:
        raise ClusterError(f"--outstanding '{text}': each value must be 1..{MAX_OUTSTANDING}")
    return vals


def depths_per_job(outstanding: Sequence[int], numjobs: int) -> list[int]:
    """The iodepth of each job at each level of outstanding I/O per client, each level once:
    a level is split over ``numjobs`` jobs, rounded down and at least 1, so levels below
    ``numjobs`` (or between two of its multiples) come to the same point, which is run once."""
    depths: list[int] = []
    for level in outstanding:
        qd = max(1, level // numjobs)
        if qd not in depths:
            depths.append(qd)
    return depths


def one_batch_problem(run: Run) -> Optional[str]:
    """Why a run cannot be one set of jobs started together, as the cluster runs them: fio
    starts the jobs of each job file after the one before has finished (an implicit
    stonewall), which the cluster does not model; None when every job is in the first file."""
    later = next((j for j in run.jobs if j.file_index > 0), None)
    if later is None:
        return None
    return (
        f"{later.file}:{later.line}: job '{later.name}': fio starts a job file's jobs after the one before it has finished, "
        "and the cluster runs one set of jobs started together: put every client's section in one job file"
    )


def job_problem_where(run: Run, message: str) -> str:
    """A cluster run's complaint about the jobs, prefixed with where they were written: the
    file and line of the job it names (``job 'NAME': ...``), else the job files."""
    if message.startswith("job '"):
        name = message[len("job '") :].split("': ", 1)[0]
        named = [j for j in run.jobs if j.name == name]
        if len(named) == 1:
            return f"{named[0].file}:{named[0].line}: {message}"
    elif not ("job section" in message or "filename=client" in message):
        return message
    return f"{', '.join(run.files)}: {message}"


class DirFigures(TypedDict):
    iops: float
    lat_mean_us: float
    lat_p99_us: float


class Busy(TypedDict):
    name: str
    utilisation: float


class RunSummary(TypedDict):
    """``summary``: a direction's figures when it did I/O, the model's mean I/Os in flight
    beside Little's law, the five busiest resources, the events simulated."""

    read: NotRequired[DirFigures]
    write: NotRequired[DirFigures]
    outstanding_mean: float
    little_x_r: float
    busiest: list[Busy]
    events: int


class SweepRow(TypedDict):
    """One point of ``sweep``: a direction's figures at one level of outstanding I/O."""

    stack: str
    rw: str
    outstanding_per_client: int
    outstanding_total: int
    iops: float
    lat_mean_us: float
    lat_p99_us: float
    outstanding_mean: float
    busiest: str
    busiest_utilisation: float
    events: int
    wall_s: float


def summary(res: ClusterRun) -> RunSummary:
    """The figures of a run: per direction IOPS, mean and 99 % latency (µs); the model's own
    time-average I/Os in flight beside Little's law; the busiest resources."""
    little = sum(res[d]["iops"] * res[d]["lat_mean_ns"] / 1e9 for d in DIRECTIONS)
    out: RunSummary = {
        "outstanding_mean": res["outstanding_mean"],
        "little_x_r": little,
        "busiest": [{"name": r["name"], "utilisation": r["utilisation"]} for r in res["resources"][:5]],
        "events": res["events"],
    }
    for d in DIRECTIONS:
        t = res[d]
        if t["ios"]:
            out[d] = {"iops": t["iops"], "lat_mean_us": t["lat_mean_ns"] / 1e3, "lat_p99_us": t["lat_p99_ns"] / 1e3}
    return out


# The rw of a sweep's curves: one direction each (a curve reports that direction's figures).
SWEEP_RWS = ("randread", "randwrite", "read", "write")
MAX_SWEEP_NUMJOBS = 256


def _whole(v: object) -> bool:
    """An integer, numpy's too, but not a bool."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def sweep(
    cluster: Cluster,
    outstanding: Sequence[int],
    rws: Sequence[str] = ("randread", "randwrite"),
    numjobs: int = 1,
    ramp_ms: Optional[int] = None,
    runtime_ms: Optional[int] = None,
    log: Callable[[str], None] = lambda _: None,
    progress: Optional[Callable[[int, int, str, int], object]] = None,
) -> list[SweepRow]:
    """IOPS, mean and 99 % latency and the busiest resource at each level of outstanding I/O
    per client (split over ``numjobs`` fio jobs of ``level // numjobs`` each, at least 1:
    levels that come to the same point run once, ``depths_per_job``), each point on a
    cluster built afresh; the window defaults to the stack's (``WINDOWS_MS``). ClusterError
    for an ``rw`` not in ``SWEEP_RWS`` or given twice, a level or ``numjobs`` out of range,
    before any run."""
    # Unchecked, randrw's curve was its reads alone, numjobs 0 a ZeroDivisionError and a
    # level of 0 ran (and was reported) as 1.
    bad_rw = [rw for rw in rws if rw not in SWEEP_RWS]
    if isinstance(rws, str) or bad_rw or not len(rws):
        raise ClusterError(f"rws {rws!r}: a list of {', '.join(SWEEP_RWS)} (each curve is one direction's)")
    twice = sorted({rw for rw in rws if list(rws).count(rw) > 1})
    if twice:
        raise ClusterError(f"{twice[0]} given twice (each curve once)")
    if not _whole(numjobs) or not 1 <= numjobs <= MAX_SWEEP_NUMJOBS:
        raise ClusterError(f"numjobs {numjobs!r}: an integer from 1 to {MAX_SWEEP_NUMJOBS}")
    bad_level = [v for v in outstanding if not _whole(v) or not 1 <= v <= MAX_OUTSTANDING]
    if bad_level or not len(outstanding):
        raise ClusterError(f"outstanding {list(outstanding)!r}: one or more integers from 1 to {MAX_OUTSTANDING}")
    clients = int(cluster.spec["cluster"]["clients"])
    ramp_ms = windows_ms(cluster.stack)[0] if ramp_ms is None else ramp_ms
    runtime_ms = windows_ms(cluster.stack)[1] if runtime_ms is None else runtime_ms
    rows = []
    for rw in rws:
        d: Direction = "write" if "write" in rw else "read"
        for qd in depths_per_job(outstanding, numjobs):
            t0 = time.perf_counter()
            _, res = cluster.run_text(sweep_job(clients, rw, qd, numjobs, ramp_ms, runtime_ms), name=f"sweep-{rw}-{qd}", progress=progress)
            wall = time.perf_counter() - t0
            top = res["resources"][0]
            t = res[d]
            row: SweepRow = {
                "stack": res["stack"],
                "rw": rw,
                "outstanding_per_client": qd * numjobs,
                "outstanding_total": qd * numjobs * clients,
                "iops": t["iops"],
                "lat_mean_us": t["lat_mean_ns"] / 1e3,
                "lat_p99_us": t["lat_p99_ns"] / 1e3,
                "outstanding_mean": res["outstanding_mean"],
                "busiest": top["name"],
                "busiest_utilisation": top["utilisation"],
                "events": res["events"],
                "wall_s": wall,
            }
            rows.append(row)
            log(
                f"{res['stack']:<12} {rw:<10} {qd * numjobs:>5}/client {t['iops']:>12,.0f} IOPS  mean {row['lat_mean_us']:>9.1f} us  "
                f"p99 {row['lat_p99_us']:>9.1f} us  busiest {top['name']} {top['utilisation']:.0%}  [{wall:.1f} s]"
            )
    return rows


def save_figure(fig: Any, path: Path) -> Path:
    """Lay out, write (PNG at 110 dpi, as the docs' plots are; another format by the path's
    suffix) and close a matplotlib figure. Written beside `path` and renamed onto it, so a
    Ctrl-C or a full disk while it is written leaves no truncated image under its name."""
    import matplotlib.pyplot as plt

    path = Path(path)
    part = path.with_name(f".{path.name}.part")
    try:
        fig.tight_layout()
        fig.savefig(part, dpi=110, format=path.suffix.removeprefix(".").lower() or "png")
        os.replace(part, path)
    finally:
        plt.close(fig)
        part.unlink(missing_ok=True)
    return path


def plot_sweep(
    rows: Sequence[Mapping[str, Any]],
    out_dir: os.PathLike[str] | str,
    title: str = "",
    marks: Sequence[tuple[str, str, float, float]] = (),
    bands: Sequence[Mapping[str, Any]] = (),
) -> list[Path]:
    """One PNG per direction: IOPS against outstanding I/O, and mean (solid) and 99 %
    (dashed) latency against IOPS, one colour per stack. ``marks`` are (rw, label, IOPS,
    latency in µs) points drawn as stars on the latency plot (published figures); ``bands``
    are curves (``{"stack", "label", "curve": sweep rows}``) at the two ends of a parameter
    range, drawn as a shaded band in their stack's colour."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for rw in sorted({str(r["rw"]) for r in rows}):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
        for i, stack in enumerate(sorted({str(r["stack"]) for r in rows if r["rw"] == rw})):
            pts = sorted((r for r in rows if r["rw"] == rw and r["stack"] == stack), key=lambda r: r["outstanding_per_client"])
            colour = f"C{i}"
            q = [r["outstanding_per_client"] for r in pts]
            x = [r["iops"] for r in pts]
            ax1.plot(q, x, "o-", color=colour, label=stack)
            ax2.plot(x, [r["lat_mean_us"] for r in pts], "o-", color=colour, label=f"{stack} mean")
            ax2.plot(x, [r["lat_p99_us"] for r in pts], "s--", color=colour, label=f"{stack} 99 %")
        stacks = sorted({str(r["stack"]) for r in rows if r["rw"] == rw})
        for stack in stacks:
            ends = [b for b in bands if b["stack"] == stack and all(r["rw"] == rw for r in b["curve"])]
            if len(ends) == 2:
                draw_band(ax1, ax2, ends, f"C{stacks.index(stack)}")
        for i, (_, label, iops, lat_us) in enumerate(m for m in marks if m[0] == rw):
            ax2.plot([iops], [lat_us], "*", markersize=14, color=f"C{i + 2}", label=label)
        ax1.set(xscale="log", yscale="log", xlabel="outstanding I/O per client", ylabel="IOPS", title=f"{rw}: throughput")
        ax1.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax2.set(xscale="log", yscale="log", xlabel="IOPS", ylabel="latency (µs)", title=f"{rw}: latency against throughput")
        ax2.xaxis.set_minor_formatter(NullFormatter())
        for ax in (ax1, ax2):
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        if title:
            fig.suptitle(title)
        paths.append(save_figure(fig, out / f"{rw}.png"))
    return paths


def draw_band(ax1: Any, ax2: Any, ends: Sequence[Mapping[str, Any]], colour: str) -> None:
    """Shade between the two end curves: IOPS against outstanding I/O, and the mean latency
    against IOPS (the polygon between the two curves)."""
    lo, hi = (sorted(e["curve"], key=lambda r: r["outstanding_per_client"]) for e in ends)
    # Each end at its own outstanding I/O (with n jobs a level rounds to a multiple of n).
    qs = [r["outstanding_per_client"] for r in lo] + [r["outstanding_per_client"] for r in reversed(hi)]
    xs = [r["iops"] for r in lo] + [r["iops"] for r in reversed(hi)]
    ys = [r["lat_mean_us"] for r in lo] + [r["lat_mean_us"] for r in reversed(hi)]
    ax1.fill(qs, xs, color=colour, alpha=0.15, label=f"{ends[0]['label']} .. {ends[1]['label']}")
    ax2.fill(xs, ys, color=colour, alpha=0.15)


def littles_law_gap(res: Mapping[str, Any]) -> float:
    """|N − X·R| / N over the window, from the model's own counters."""
    n = float(res["outstanding_mean"])
    xr = sum(res[d]["iops"] * res[d]["lat_mean_ns"] / 1e9 for d in ("read", "write"))
    return abs(n - xr) / n if n > 0 else (0.0 if xr == 0 else math.inf)
