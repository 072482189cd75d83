"""`ssdtwin validate`: every published figure the twin can be held to, measured on the twin,
beside the published value: the project's accuracy table (docs/validation.md).

A figure is **calibrated** when a preset parameter was fitted to it (a `[corners]` entry
with `sets`, docs/calibration.md) and **predicted** otherwise: the twin reaches it from
geometry, timing, OP and GC alone. Every figure names the document it comes from by its
docs/sources.md key. A figure the twin misses by more than the tolerance of its kind
(5 % calibrated, 15 % predicted) carries the reason the model gives for it (`note`).

The figures come in groups, one per published document or per drive's corners; each group
measures its figures the way the document did (its jobs, its preconditioning), through
the same functions `ssdtwin reproduce` and `ssdtwin calibrate` use. `quick` runs every group
on smaller drives with shorter windows (a CI check of the machinery and of the gross
figures, not the table of record).
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from .. import _core
from ..drive import Drive
from . import corners
from .corners import Corner
from .experiments import (
    CM6_PUBLISHED,
    CM6_WINDOWS_MS,
    P5316_PUBLISHED,
    cm6_drive,
    measure_corner,
    namespace_fraction,
    p5316_whitepaper,
    run_job,
)

CALIBRATED_TOL = 0.05
PREDICTED_TOL = 0.15

Log = Callable[[str], None]


@dataclass
class Figure:
    system: str  # the drive preset or lab the figure is of
    source: str  # its document, by docs/sources.md key
    figure: str
    unit: str
    published: float
    twin: Optional[float]
    kind: str  # "calibrated" | "predicted"
    group: str
    note: str = ""  # why the twin misses it, when it does (docs/validation.md)
    # A figure whose setup leaves an input unpublished is predicted as a band: the twin over
    # that input's range (`band` names it), `twin` at the default. It counts as within when the
    # published value lies in the band or the default is within the tolerance.
    twin_low: Optional[float] = None
    twin_high: Optional[float] = None
    band: str = ""

    @property
    def error(self) -> Optional[float]:
        if self.twin is None or not math.isfinite(self.twin) or self.published == 0:
            return None
        return self.twin / self.published - 1

    @property
    def tolerance(self) -> float:
        return CALIBRATED_TOL if self.kind == "calibrated" else PREDICTED_TOL

    @property
    def in_band(self) -> bool:
        return self.twin_low is not None and self.twin_high is not None and self.twin_low <= self.published <= self.twin_high

    @property
    def within(self) -> bool:
        e = self.error
        return (e is not None and abs(e) <= self.tolerance) or self.in_band

    def row(self) -> dict[str, Any]:
        d = asdict(self)
        d["error"] = self.error
        d["within"] = self.within
        d["in_band"] = self.in_band
        return d


@dataclass
class Settings:
    """Scale and windows of a validation run."""

    scale: int = 64
    seed: int = 1
    quick: bool = False
    # (ramp, runtime) ms per corner kind: the CM6 windows `reproduce` and `calibrate` use;
    # quick shortens them fivefold
    windows_ms: dict[str, tuple[int, int]] = field(default_factory=lambda: dict(CM6_WINDOWS_MS))

    def windows(self) -> dict[str, tuple[int, int]]:
        """(ramp, runtime) ms per corner kind, a fifth as long with `quick`."""
        if not self.quick:
            return dict(self.windows_ms)
        return {k: (ramp // 5, run // 5) for k, (ramp, run) in self.windows_ms.items()}


# ----------------------------------------------------------------------------- corners


class _Shared:
    """What the groups of a run share in one process (`_sharing`): the drive states' images
    (`Drives.open_state`) and the corners measured on them (`Drives.corner`). A drive state
    and a job give the same figure bit for bit, whichever group asks."""

    def __init__(self) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="ssdtwin-validate-")
        self.images: dict[tuple[Any, ...], str] = {}
        self.measured: dict[tuple[Any, ...], float] = {}


_SHARED: Optional[_Shared] = None


@contextmanager
def _sharing() -> Iterator[None]:
    """Within: the groups' drive states built and their corners measured once per process."""
    global _SHARED
    outer = _SHARED
    if outer is None:
        _SHARED = _Shared()
    try:
        yield
    finally:
        if outer is None and _SHARED is not None:
            _SHARED.tmp.cleanup()
        _SHARED = outer


def _rand_bs(corner: Corner) -> int:
    """The block size of the random writes a corner's drive state is made with: the corner's
    own for the random-write corner, 4 KiB for the others."""
    return corner.shape[0] if corner.name == "rand-write" else 4096


class Drives:
    """Prepared drive states, each made once (an image in a temporary folder) and opened
    read-only for every figure measured in it, so each figure starts from the same state
    whatever ran before it (writes of a read-only open stay in memory)."""

    def __init__(self, s: Settings, spec_toml: Optional[str] = None) -> None:
        self.s = s
        # A spec of the user's own (`validate --spec`): every drive is of it, and `model`
        # below only names it.
        self.spec_toml = spec_toml
        # Within a run (`_sharing`) the images and figures are the run's, shared by the
        # groups' Drives in this process; otherwise this object's own.
        self._own: Optional[tempfile.TemporaryDirectory[str]] = None
        self._images: dict[tuple[Any, ...], str] = {}
        self._measured: Optional[dict[tuple[Any, ...], float]] = None
        if _SHARED is not None:
            self._dir, self._images, self._measured = _SHARED.tmp.name, _SHARED.images, _SHARED.measured
        else:
            self._own = tempfile.TemporaryDirectory(prefix="ssdtwin-validate-")
            self._dir = self._own.name

    def open(self, model: str, corner: Corner, ns_fraction: float = 1.0) -> Drive:
        """A drive in the state `corner` is measured in (`experiments.cm6_drive`, the one
        `reproduce` and `calibrate` use): WIPC for sequential corners; random writes of the
        corner's own block size to steady state for random ones."""
        return self.open_state(model, corner.state, _rand_bs(corner), ns_fraction)

    def _state_key(self, model: str, state: str, rand_bs: int, ns_fraction: float) -> tuple[Any, ...]:
        """What makes a drive state: the drive, the run's scale and seed, and how it was written."""
        return (self.spec_toml or model, self.s.scale, self.s.seed, state, ns_fraction, rand_bs if state == "rand" else 0)

    def open_state(self, model: str, state: str, rand_bs: int = 4096, ns_fraction: float = 1.0) -> Drive:
        """A drive in `state` ("seq": WIPC; "rand": then random writes of `rand_bs` to
        steady state), made once and opened read-only."""
        key = self._state_key(model, state, rand_bs, ns_fraction)
        if key not in self._images:
            path = str(Path(self._dir) / f"d{len(self._images)}")
            d = cm6_drive(
                None if self.spec_toml else model,
                self.s.scale,
                state,
                ns_fraction,
                self.s.seed,
                path=path,
                spec_toml=self.spec_toml,
                rand_block_bytes=rand_bs,
            ).drive
            d.close()
            self._images[key] = path
        return Drive.open(self._images[key], writable=False)

    def corner(self, model: str, corner: Corner, ns_fraction: float = 1.0) -> float:
        """A corner's figure on the twin (`experiments.measure_corner`: MB/s for sequential
        corners, IOPS for random ones), in the corner's job shape and the run's windows.
        A corner another group of the run has measured on the same drive state (cm6-brief's
        CM6-V 3.20 TB column is the corners group's CM6-V corners) is not measured again."""
        windows = self.s.windows()
        state = self._state_key(model, corner.state, _rand_bs(corner), ns_fraction)
        key = (*state, corner.name, corner.shape, windows[corner.name])
        if self._measured is not None and key in self._measured:
            return self._measured[key]
        d = self.open(model, corner, ns_fraction)
        try:
            figure = measure_corner(d, corner, windows_ms=windows)
        finally:
            d.close()
        if self._measured is not None:
            self._measured[key] = figure
        return figure

    def close(self) -> None:
        if self._own is not None:
            self._own.cleanup()


def corners_group(s: Settings, log: Log, models: Optional[Iterable[str]] = None, notes: Optional[dict[str, str]] = None) -> list[Figure]:
    """Every preset's `[corners]`: a corner with `sets` is calibrated, the others predicted."""
    drives = Drives(s)
    out = []
    for model in models or [name for name, _ in _core.presets()]:
        for c in corners.from_spec(_core.preset(model), model).values():
            t0 = time.perf_counter()
            twin = drives.corner(model, c)
            f = Figure(
                system=model,
                source=c.source.removeprefix("[SRC] "),
                figure=c.label,
                unit=c.unit,
                published=c.value,
                twin=twin,
                kind="calibrated" if c.sets else "predicted",
                group="corners",
                note=(CORNER_NOTES if notes is None else notes).get(f"{model}:{c.name}", ""),
            )
            out.append(f)
            log(line(f, time.perf_counter() - t0))
    drives.close()
    return out


# ----------------------------------------------------------------------------- documents


def cm6_brief_group(s: Settings, log: Log) -> list[Figure]:
    """The KIOXIA CM6 namespace brief's predicted columns: the CM6-R with a 3.20 TB namespace
    and the CM6-V 3.20 TB drive (the 3.84 TB column is the CM6-R's calibrated corners)."""
    out = []
    drives = Drives(s)
    for col, model, tb in (("3.20", "kioxia-cm6-r-3.84t", 3.20), ("3dwpd", "kioxia-cm6-v-3.2t", 3.20)):
        frac = namespace_fraction(model, tb)
        label = "3.20 TB namespace on the 3.84 TB drive" if col == "3.20" else "CM6-V 3.20 TB (3 DWPD) drive"
        for name in corners.NAMES:
            c = Corner(name, float(CM6_PUBLISHED[(col, name)]), "KIOXIA CM6 namespace brief")
            t0 = time.perf_counter()
            twin = drives.corner(model, c, frac)
            f = Figure(
                system=model,
                source="KIOXIA CM6 namespace brief",
                figure=f"{c.label}, {label}",
                unit=c.unit,
                published=c.value,
                twin=twin,
                kind="predicted",
                group="cm6-brief",
            )
            out.append(f)
            log(line(f, time.perf_counter() - t0))
    drives.close()
    return out


def p5316_group(s: Settings, log: Log) -> list[Figure]:
    """The Intel D5-P5316 IU white paper: WAF, bandwidth and mean latency of its four jobs."""
    rows = p5316_whitepaper(scale=s.scale, seed=5, log=lambda m: None)
    out = []
    for (_, bs, rw, jobs, qd, _, pwaf, pmib, plat), r in zip(P5316_PUBLISHED, rows):
        shape = f"{'random' if rw == 'randwrite' else 'sequential'} write {bs.upper().replace('K', ' KiB')}, {jobs} x QD{qd}"
        for fig, unit, pub, twin in (
            ("WAF", "", pwaf, r["waf"]),
            ("bandwidth", "MiB/s", pmib, r["mib_s"]),
            ("mean latency", "ms", plat, r["lat_mean_ms"]),
        ):
            f = Figure(
                "intel-p5316-15.36t", "Intel D5-P5316 IU white paper", f"{shape}: {fig}", unit, pub, twin, "predicted", "p5316-whitepaper"
            )
            out.append(f)
            log(line(f, r["wall_s"] / 3))
    return out


PTS_THROUGHPUT = [
    # (model, direction, published MiB/s): CM6/CD6 SNIA PTS review, 1 job QD256 128 KiB after WIPC
    ("kioxia-cm6-v-1.6t", "read", 6649.0),
    ("kioxia-cm6-v-1.6t", "write", 2730.0),
    ("kioxia-cm6-v-3.2t", "read", 6651.0),
    ("kioxia-cm6-v-3.2t", "write", 4048.0),
    ("kioxia-cd6-v-3.2t", "read", 5361.0),
    ("kioxia-cd6-v-3.2t", "write", 2340.0),
]


def pts_throughput_group(s: Settings, log: Log) -> list[Figure]:
    """The review's throughput test: sequential 128 KiB, 1 job at QD256, after WIPC."""
    out = []
    drives = Drives(s)  # a drive's WIPC state built once for both directions (and shared with corners')
    try:
        for model, d, pub in PTS_THROUGHPUT:
            out.append(_pts_throughput_figure(s, log, drives, model, d, pub))
    finally:
        drives.close()
    return out


def _pts_throughput_figure(s: Settings, log: Log, drives: Drives, model: str, d: str, pub: float) -> Figure:
    """One row of PTS_THROUGHPUT measured on its drive's WIPC state."""
    t0 = time.perf_counter()
    drive = drives.open_state(model, "seq")
    try:
        ramp, run = s.windows()["seq-write"]
        c = Corner(f"seq-{d}", pub, "CM6/CD6 SNIA PTS review", block_bytes=131072, iodepth=256, numjobs=1)
        m = run_job(drive, corners.job_text(c, f"{ramp}ms", f"{run}ms"), f"{model}-tp-{d}.fio")
    finally:
        drive.close()
    f = Figure(
        model,
        "CM6/CD6 SNIA PTS review",
        f"SNIA PTS throughput, sequential {d} 128 KiB, 1 job QD256",
        "MiB/s",
        pub,
        m.mib_s,
        "predicted",
        "pts-throughput",
        NOTES["cm6-small-write"] if (model, d) == ("kioxia-cm6-v-1.6t", "write") else "",
    )
    log(line(f, time.perf_counter() - t0))
    return f


def pblaze5_group(s: Settings, log: Log) -> list[Figure]:
    """The Memblaze PBlaze5 talk: the per-namespace quotas and the doublewrite study."""
    from . import pblaze5

    out = []
    scale = max(s.scale, 256) if s.quick else s.scale
    t0 = time.perf_counter()
    rows = pblaze5.quota_study(scale, s.seed, runtime_ms=500 if s.quick else 2000, log=lambda m: None)
    for cap in sorted(set(pblaze5.QUOTA_CAPS_MBPS), reverse=True):
        got = [r["mb_s"] for r in rows if r["cap_mb_s"] == cap]
        f = Figure(
            pblaze5.MODEL,
            "Memblaze PBlaze5 namespaces talk",
            f"sequential read 128 KiB under a {cap} MB/s namespace quota (mean of {len(got)} namespaces)",
            "MB/s",
            float(cap),
            sum(got) / len(got),
            "predicted",
            "pblaze5",
        )
        out.append(f)
        log(line(f, (time.perf_counter() - t0) / 2))
    t0 = time.perf_counter()
    from . import doublewrite
    from .doublewrite import PUBLISHED, PUBLISHED_GAINS

    warm, each = doublewrite.windows_ms(scale)
    if s.quick:
        warm, each = warm // 4, each // 4
    # The talk does not say what the namespace held beyond the database: the twin runs both
    # ends (trimmed: discarded; written: valid, cold) and reports the band (docs/models.md §10.4).
    dw = doublewrite.doublewrite_study(scale, s.seed, log=lambda m: None, warmup_ms=warm, window_ms=each, states=("trimmed", "written"))
    by = {r["placement"]: r for r in dw if r["drive_state"] == "trimmed"}
    written = {r["placement"]: r for r in dw if r["drive_state"] == "written"}

    figs = [
        ("NAND WAF, doublewrite file on the data namespace (64 threads)", "", PUBLISHED["shared"]["waf"], by["shared"]["waf"], "dw-waf"),
        ("NAND WAF, doublewrite file on the DRAM namespace (64 threads)", "", PUBLISHED["dram"]["waf"], by["dram"]["waf"], "dw-waf"),
        (
            "data-namespace mean write latency, doublewrite on the data namespace",
            "ms",
            PUBLISHED["shared"]["data_write_lat_ms"],
            by["shared"]["data_write_lat_ms"],
            "dw-lat",
        ),
        (
            "data-namespace mean write latency, doublewrite on the DRAM namespace",
            "ms",
            PUBLISHED["dram"]["data_write_lat_ms"],
            by["dram"]["data_write_lat_ms"],
            "dw-lat",
        ),
        (
            "read IOPS, DRAM placement over shared (ratio)",
            "",
            1 + PUBLISHED_GAINS["read_iops"],
            1 + by["gain"]["read_iops_gain"],
            "dw-gain",
        ),
    ]
    other = {
        "NAND WAF, doublewrite file on the data namespace (64 threads)": written["shared"]["waf"],
        "NAND WAF, doublewrite file on the DRAM namespace (64 threads)": written["dram"]["waf"],
    }
    for name, unit, pub, twin, note in figs:
        f = Figure(pblaze5.MODEL, "Memblaze PBlaze5 namespaces talk", name, unit, pub, twin, "predicted", "pblaze5", NOTES.get(note, ""))
        if name in other:
            f.twin_low, f.twin_high = sorted((twin, other[name]))
            f.band = "the namespace beyond the database trimmed (twin) or written (valid, cold)"
        out.append(f)
        log(line(f, (time.perf_counter() - t0) / len(figs)))
    return out


def kumoscale_group(s: Settings, log: Log) -> list[Figure]:
    """The KumoScale vs Ceph study at the load its own figures imply (docs/models.md §11), each
    figure with the band the model spans over the study's unpublished inputs at that load: the
    fio jobs per client for KumoScale, the storage nodes' cores and the pool's PGs for Ceph
    (`kumoscale.band`, the ends run, not assumed)."""
    from . import kumoscale

    t0 = time.perf_counter()
    scale = max(s.scale, 256) if s.quick else s.scale
    res = kumoscale.kumoscale(scale=scale, seed=s.seed, curves=False, band_at_load=True, log=lambda m: None)
    out = []
    for r in res["brief"]:
        rr = r["randread"]
        ends = [b for b in res["band"] if b["stack"] == r["stack"]]
        kumo = r["stack"] == "nvmeof-tcp"
        lo, hi = kumoscale.CEPH_ENDS
        what = (
            f"fio jobs per client, {kumoscale.NVMEOF_JOBS[0]} to {kumoscale.NVMEOF_JOBS[1]}: unpublished"
            if kumo
            else f"cores per node and PGs, {lo['node_cores']} and {lo['pg_num']:,} to {hi['node_cores']} and {hi['pg_num']:,}: unpublished"
        )
        sysname = "KumoScale lab (3 nodes x 5 CM5)" if kumo else "Ceph 14 lab (3 nodes x 5 CM5)"
        for name, unit, pub, twin, key in (
            ("4 KiB random read IOPS at the study's load", "IOPS", r["brief_iops"], rr["iops"], "iops"),
            ("4 KiB random read mean latency at the study's load", "us", r["brief_read_lat_us"], rr["lat_mean_us"], "lat_mean_us"),
        ):
            f = Figure(sysname, "KIOXIA KumoScale vs Ceph study", name, unit, float(pub), twin, "predicted", "kumoscale")
            f.twin_low, f.twin_high = sorted(b["at_study_load"][key] for b in ends)
            f.band = what
            f.note = _kumoscale_note(f, kumo)
            out.append(f)
            log(line(f, (time.perf_counter() - t0) / 4))
    return out


def _kumoscale_note(f: Figure, kumo: bool) -> str:
    """Why a KumoScale study figure is off the twin's default, and where it lies in the band
    the twin spans over the study's unpublished inputs (computed, docs/models.md §11.4)."""
    assert f.twin_low is not None and f.twin_high is not None
    what = (
        "the study does not publish its fio jobs per client (one job per volume, the twin's default, puts the whole "
        "initiator path on one client core)"
        if kumo
        else "the study publishes neither its Ceph cores nor its PGs"
    )
    if f.in_band:
        return f"{what}; the twin over that range brackets the study's figure (docs/models.md §11.4)"
    below = f.published < f.twin_low
    off = 1 - f.published / f.twin_low if below else f.published / f.twin_high - 1
    where = "below the band's low end" if below else "above the band's high end"
    return (
        f"{what}, but no setting in that range reaches the study's figure with the model's per-op costs: it lies "
        f"{off:.0%} {where} (docs/models.md §11.4)"
    )


def ceph_reef_group(s: Settings, log: Log) -> list[Figure]:
    """The Ceph project's Reef lab posts (docs/models.md §11.8): IOPS of every point, and the
    mean latency where the post gives it. `--quick` runs one point (8 threads per NVMe,
    random writes), the drives at 1/256 whatever the scale (the study's own)."""
    from . import ceph_reef

    kw: dict[str, Any] = {"points": ("osds-per-nvme",), "threads": (8,), "rws": ("randwrite",)} if s.quick else {}
    res = ceph_reef.run(scale=ceph_reef.SCALE, seed=s.seed, log=lambda m: None, **kw)
    out = []
    for r in res["rows"]:
        who = f"{r['threads_per_osd']} threads per NVMe" if r["threads_per_osd"] else "60 OSDs, unpinned"
        lab = "Ceph Reef lab (5 nodes x 6 PM983)" if r["experiment"] == "osds-per-nvme" else "Ceph Reef lab (10 nodes x 6 PM983)"
        src = "Ceph Reef: 1 or 2 OSDs per NVMe" if r["experiment"] == "osds-per-nvme" else "Ceph Reef Freeze Part 1"
        rw = {"randread": "4 KiB random read", "randwrite": "4 KiB random write", "write-qd1": "4 KiB sync write QD1"}[r["rw"]]
        figs = []
        if r["rw"] != "write-qd1":
            figs.append((f"{rw} IOPS, {who}", "IOPS", r["published_iops"], r["iops"]))
        if r["published_lat_mean_ms"] is not None:
            figs.append((f"{rw} mean latency, {who}", "ms", r["published_lat_mean_ms"], r["lat_mean_ms"]))
        for name, unit, pub, twin in figs:
            note = CEPH_NOTES.get((r["rw"], r["threads_per_osd"] or 0), NOTES["lab-25"])
            f = Figure(lab, src, name, unit, float(pub), twin, "predicted", "ceph-reef", note)
            out.append(f)
            log(line(f, r["wall_s"]))
    return out


def spdk_tcp_group(s: Settings, log: Log) -> list[Figure]:
    """The SPDK NVMe-oF/TCP report's random reads per target core count (docs/models.md §11.9)."""
    from . import spdk_tcp

    res = spdk_tcp.run(scale=spdk_tcp.SCALE, seed=s.seed, log=lambda m: None)
    out = []
    for r in res["rows"]:
        name = f"4 KiB random read IOPS, {r['target_cores']} target core(s)"
        note = NOTES["spdk-1core"] if r["target_cores"] == 1 else NOTES["lab-25"]
        f = Figure(
            "SPDK NVMe-oF/TCP target (14 CM6-V)",
            "SPDK NVMe-oF TCP performance report",
            name,
            "IOPS",
            float(r["published_iops"]),
            r["iops"],
            "predicted",
            "spdk-tcp",
            note,
        )
        out.append(f)
        log(line(f, r["wall_s"]))
    return out


def spdk_rdma_group(s: Settings, log: Log) -> list[Figure]:
    """The SPDK 24.05 reports' RDMA target, and the kernel target's CPU and QD1 latency
    against SPDK's (docs/models.md §11.9)."""
    from . import spdk_rdma

    res = spdk_rdma.run(scale=spdk_rdma.SCALE, seed=s.seed, log=lambda m: None)
    out = []
    for r in res["rows"]:
        system = {"spdk-rdma": "SPDK NVMe-oF/RDMA target (14 CM6-V)", "transport-qd1": "SPDK NVMe-oF target (14 CM6-V)"}.get(
            r["experiment"], "Linux kernel NVMe-oF target (14 CM6-V)"
        )
        name = r["figure"] if r["experiment"] == "transport-qd1" else f"{r['figure']} ({r['stack'].removeprefix('nvmeof-').upper()})"
        note = NOTES.get(f"{r['experiment']}-{r['stack']}", NOTES["lab-25"])
        f = Figure(system, "SPDK NVMe-oF reports", name, r["unit"], float(r["published"]), r["model"], "predicted", "spdk-rdma", note)
        out.append(f)
        log(line(f, r["wall_s"]))
    return out


# Why the twin misses a figure it misses (docs/validation.md repeats them with the evidence).
NOTES = {
    "dw-waf": "the talk does not say what the 0.8 TB of the namespace beyond the database held; the twin's WAF spans the talk's "
    "between a trimmed and a written remainder (docs/models.md §10.4)",
    "dw-lat": "Little's law: the mean latency of a saturated drive is the writes in flight over the write rate, and the talk does "
    "not say how many writes Percona's flushers keep in flight (docs/models.md §10.4)",
    "dw-gain": "the twin's DRAM placement has less GC than the talk's (the drive state above), so more NAND is left for reads",
    "lab-25": "within the 25 % the cluster model is held to on a lab it was not fitted to: its per-op CPU costs come "
    "from other posts and reports, each with its source (docs/models.md §11.8, §11.9)",
    "spdk-1core": "the model's NVMe-oF target costs 1.18 us of CPU per I/O (ReFlex on IX, a kernel-bypass stack); SPDK's TCP "
    "transport runs over kernel sockets, which cost more per I/O, a cost the model does not have a source for "
    "(docs/models.md §11.9)",
    "kernel-cpu-nvmeof-rdma": "the kernel target's CPU per I/O is i10's Linux NVMe/RDMA host (kernel 4.20, 2.5x cheaper than its "
    "NVMe/TCP), mirrored; a 6.0 target batching 16 connections costs less per I/O, a figure only the report itself gives "
    "(docs/models.md §11.9)",
    "kernel-cpu-nvmeof-tcp": "the kernel target's CPU per I/O is i10's Linux NVMe/TCP host (kernel 4.20, 96K IOPS per core), "
    "mirrored; a 6.0 target with aRFS and GRO batching costs less per I/O, a figure only the report itself gives "
    "(docs/models.md §11.9)",
    "transport-qd1-nvmeof-tcp": "TCP's extra CPU (the Linux initiator's 3.4 us, [ASSUMED] 200K IOPS per core, and the "
    "target's) plus the kernel TCP stack's two receives off the CPU, 3.75 us each: the middle of the 7-8 us a kernel "
    "round trip loses to bypass by not polling and by its SoftIRQ hand-off (Homa/Linux 2021); 9.7-10.7 us over the "
    "bracket (docs/models.md §11.9)",
    "kernel-qd1-nvmeof-tcp": "SPDK's TCP target runs over the kernel's sockets, so most of the kernel TCP path's latency is on "
    "both targets' paths; the model's SPDK TCP target costs a dataplane's 1.18 us, its kernel target i10's 8.8 us "
    "(docs/models.md §11.9)",
    "cm6-small-write": "the 1.6 TB's 32 dies program 2.1 GB/s at BiCS4's rate (the twin's tPROG, calibrated on the "
    "3.84 TB, is 67 MB/s a die; the next generation's published 33 MB/s per plane gives 66); the 2,800 MB/s takes about 42 "
    "such dies and this SKU's die count is not published, while a back end at the large SKUs' 4.2 GB/s would cap the "
    "CM6-R's calibrated random write 17 % low (docs/models.md §15)",
}

# Why a Ceph Reef point misses, by (rw, threads per NVMe; 0 unpinned).
_REEF_PINNED_WRITE = (
    "the 18 table's CPU per replica write is the Reef lab's own with its OSDs unpinned and their nodes 40 % busy "
    "(192.8 us, Ceph Reef encryption 2023); pinned to 2 or 8 CPUs per NVMe and saturated, the lab's OSDs spent more: 88.8K "
    "writes on 14 CPUs a node is at least 263 us each. The Pacific cluster's pinned, saturated figure (Ceph OSD CPU "
    "scaling 2022, 276 us scaled to Reef) agrees; a cost per op that rises when the OSDs are squeezed is what the model "
    "lacks, and nothing outside the targets sizes it (docs/models.md §11.8)"
)
CEPH_NOTES = {
    ("randwrite", 2): _REEF_PINNED_WRITE,
    ("randwrite", 8): _REEF_PINNED_WRITE,
}

# Why a preset's corner misses, by "model:corner".
CORNER_NOTES = {
    "kioxia-cm6-v-3.2t:rand-read": "the spec sheet's 1.3M is the CM6 line's figure for every capacity; the KIOXIA CM6 namespace "
    "brief measured this drive at 1,548,940 IOPS, which the twin matches (group cm6-brief)",
    "kioxia-cm6-v-1.6t:seq-write": NOTES["cm6-small-write"],
    "kioxia-cd6-v-3.2t:rand-write": "the CD6's GC (page reads per relocated IU) is the CM6's calibrated one and its back end, "
    "calibrated on the sequential write, carries programs, die parity and GC reads; KIOXIA publishes nothing about the CD6 "
    "firmware's GC or its smaller SLC-mode cache (docs/models.md §8, §15)",
    "samsung-pm983-3.84t:seq-write": "the PM983's back end is [ASSUMED] at the NF1 PM983's 2,000 MB/s (same controller and die, "
    "another form factor: no figure of this SKU's was found), so this row is not independent of it: the 2,100 MB/s is the "
    "family's maximum, third-hand (docs/models.md §11.10); the Ceph lab rows it serves are bound by OSD CPU, not by the drive's writes",
    "samsung-pm983-3.84t:rand-write": "the datasheet gives the 1.92 and 3.84 TB the same 50K on 64 and 128 dies, so the drive's "
    "random write is bound by its back end, not its dies; at the nominal 14.5 % OP the twin's GC moves about 7.3 back-end bytes "
    "per host byte, where the 50K asks for about 10 (an effective OP near 10 %: a reserve Samsung does not publish; docs/models.md §11.10)",
    "intel-p5316-15.36t:rand-write": "the brief's 510 MB/s is 17 % above what the Intel D5-P5316 IU white paper measured on the "
    "same drive (424 MiB/s), which the twin predicts within 6 % (group p5316-whitepaper)",
}

GROUPS: dict[str, Callable[[Settings, Log], list[Figure]]] = {
    "corners": corners_group,
    "cm6-brief": cm6_brief_group,
    "p5316-whitepaper": p5316_group,
    "pts-throughput": pts_throughput_group,
    "pblaze5": pblaze5_group,
    "kumoscale": kumoscale_group,
    "ceph-reef": ceph_reef_group,
    "spdk-tcp": spdk_tcp_group,
    "spdk-rdma": spdk_rdma_group,
}


def line(f: Figure, seconds: float) -> str:
    e = f.error
    err = f"{e:+7.1%}" if e is not None else "    n/a"
    mark = "~" if f.in_band and not (f.error is not None and abs(f.error) <= f.tolerance) else " " if f.within else "!"
    twin = f.twin if f.twin is not None else float("nan")
    return f"{mark} {f.kind[:4]:<4} {err}  {f.system:<26} {f.figure}: {_sig(twin)} vs {_sig(f.published)} {f.unit}  [{seconds:.1f} s]"


def _sig(v: float) -> str:
    """4 significant digits, as a datasheet prints them: 366.1, 7,419, and from 10,000 on
    the whole number (23,890, not 2.389e+04)."""
    return f"{v:,.0f}" if math.isfinite(v) and abs(v) >= 10_000 else f"{v:,.4g}"


# The groups by their CPU time, costliest first (`validate --quick --only G`, docs/performance.md,
# "CI time"): with --jobs, the long ones start first and the short ones fill in beside them.
COSTLIEST_FIRST = (
    "corners",
    "p5316-whitepaper",
    "ceph-reef",
    "pblaze5",
    "kumoscale",
    "spdk-rdma",
    "spdk-tcp",
    "cm6-brief",
    "pts-throughput",
)


def validate(s: Settings, groups: Optional[Iterable[str]] = None, log: Log = print, jobs: int = 1) -> dict[str, Any]:
    """Run the groups (all by default) and summarise: the figures, and the counts the
    project's targets are stated in (calibrated within 5 %, predicted within 15 %).

    With `jobs` above 1 the groups run in that many processes at once. Each group builds its
    own drives from the settings' seed, so its figures do not depend on what runs beside it
    or before it: the result is the one `jobs=1` gives, in the same order; only each group's
    log lines come when the group ends, in the order the groups end. A drive state or a
    corner figure two groups share (RUN_AFTER) is built or measured once, in one process: a
    function of the settings and the job alone, it is the one either group would make."""
    names = list(groups or GROUPS)
    t0 = time.perf_counter()
    if jobs > 1 and len(_tasks(names)) > 1:
        by_group = _run_groups_at_once(s, names, log, jobs)
        figures = [f for g in names for f in by_group[g]]
    else:
        figures = []
        with _sharing():
            for g in names:
                log(f"{g}:")
                figures += GROUPS[g](s, log)
    return summarise(figures, s, time.perf_counter() - t0)


# Groups that measure figures or drive states of another group run in its process, after it
# (`_sharing`): cm6-brief's CM6-V 3.20 TB column is the corners group's CM6-V corners, and
# pts-throughput measures three of its drives in their WIPC state.
RUN_AFTER = {"cm6-brief": "corners", "pts-throughput": "corners"}


def _tasks(names: list[str]) -> list[tuple[str, ...]]:
    """The groups as the processes of `jobs` take them: one each, except that a group of
    RUN_AFTER goes with the group it shares figures with when both run."""
    tasks: list[tuple[str, ...]] = []
    for g in names:
        if RUN_AFTER.get(g) not in names:
            tasks.append((g, *(h for h in names if RUN_AFTER.get(h) == g)))
    return tasks


def _run_group(task: tuple[Settings, tuple[str, ...]]) -> list[tuple[str, list[Figure], list[str]]]:
    """Groups in a worker process, one after another: each one's figures and log lines."""
    s, groups = task
    out = []
    with _sharing():
        for group in groups:
            lines: list[str] = []
            out.append((group, GROUPS[group](s, lines.append), lines))
    return out


def _ignore_sigint() -> None:
    """Workers leave Ctrl-C to the parent, which stops them (no traceback from each)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run_groups_at_once(s: Settings, names: list[str], log: Log, jobs: int) -> dict[str, list[Figure]]:
    """The groups in `jobs` processes (``spawn``: a fresh interpreter each, nothing of the
    parent's state shared), costliest first; each group's log when it ends."""
    import multiprocessing as mp

    rank = {g: COSTLIEST_FIRST.index(g) if g in COSTLIEST_FIRST else len(COSTLIEST_FIRST) for g in names}
    order = sorted(_tasks(names), key=lambda task: rank[task[0]])
    out: dict[str, list[Figure]] = {}
    pool = mp.get_context("spawn").Pool(min(jobs, len(order)), initializer=_ignore_sigint)
    try:
        for done in pool.imap_unordered(_run_group, [(s, task) for task in order]):
            for group, figures, lines in done:
                log(f"{group}:")
                for line in lines:
                    log(line)
                out[group] = figures
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
    return out


def summarise(figures: list[Figure], s: Settings, wall_s: float) -> dict[str, Any]:
    cal = [f for f in figures if f.kind == "calibrated"]
    pred = [f for f in figures if f.kind == "predicted"]
    return {
        "scale": s.scale,
        "seed": s.seed,
        "quick": s.quick,
        "wall_s": wall_s,
        "figures": [f.row() for f in figures],
        "summary": {
            "figures": len(figures),
            "systems": len({f.system for f in figures}),
            "calibrated": len(cal),
            "calibrated_within_5pct": sum(f.within for f in cal),
            "predicted": len(pred),
            "predicted_within_15pct": sum(f.within for f in pred),
            # of those, the ones only a band over an unpublished input holds
            "predicted_in_band_only": sum(f.within and not (f.error is not None and abs(f.error) <= f.tolerance) for f in pred),
            "outside": [f"{f.system}: {f.figure}" for f in figures if not f.within],
        },
    }


def targets_met(result: dict[str, Any]) -> list[str]:
    """The project's accuracy targets that `result` misses (empty: all met): every calibrated
    figure within 5 %, at least 85 % of the predicted figures within 15 %."""
    s = result["summary"]
    out = []
    if s["calibrated_within_5pct"] < s["calibrated"]:
        out.append(f"{s['calibrated'] - s['calibrated_within_5pct']} calibrated figure(s) outside 5 %")
    if s["predicted"] and s["predicted_within_15pct"] < 0.85 * s["predicted"]:
        out.append(f"{s['predicted_within_15pct']} of {s['predicted']} predicted figures within 15 % (the target is 85 %)")
    return out


def _four_digits(x: float) -> str:
    """Four significant digits with thousands separators and never an exponent: the table's
    readers compare 1,549,000 IOPS with a datasheet's 1.5M, not with 1.549e+06."""
    if not math.isfinite(x):
        return f"{x:,.4g}"
    rounded = float(f"{x:.4g}")  # 9,999.6 is 10,000: decide on the rounded value
    if abs(rounded) < 1e4:
        return f"{rounded:,.4g}"
    return f"{rounded:,.0f}"


def markdown(result: dict[str, Any], command: str) -> str:
    """docs/validation.md: the accuracy table, its summary, and the reasons for each miss."""
    s = result["summary"]
    lines = [
        "# Validation: the twin against every published figure",
        "",
        "Generated by `" + command + "` (do not edit by hand; re-run it after a model change and",
        "show the table before and after in the change's note). A figure is *calibrated* when a",
        "preset parameter was fitted to it (docs/calibration.md), *predicted* otherwise; sources",
        "are docs/sources.md keys. `!` marks a figure outside its tolerance (5 % calibrated, 15 %",
        "predicted); its reason follows the table. `~` marks a figure whose setup leaves an input",
        "unpublished: the twin runs that input's range and the published value lies in the band.",
        "",
        f"Scale 1/{result['scale']}, seed {result['seed']}, {result['wall_s']:.0f} s of wall time.",
        "",
        f"**{s['figures']} figures over {s['systems']} drives and systems: "
        f"{s['calibrated_within_5pct']} of {s['calibrated']} calibrated figures within 5 %, "
        f"{s['predicted_within_15pct']} of {s['predicted']} predicted figures within 15 % "
        f"({s['predicted_within_15pct'] / max(1, s['predicted']):.0%}; {s['predicted_in_band_only']} of them by a band over an "
        "unpublished input, marked ~).**",
        "",
        "| | system | figure | unit | published | twin | error | band over an unpublished input | kind | source |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in result["figures"]:
        err = "n/a" if f["error"] is None else f"{f['error']:+.1%}"
        twin = "n/a" if f["twin"] is None else _four_digits(f["twin"])
        band = f"{_four_digits(f['twin_low'])} to {_four_digits(f['twin_high'])} ({f['band']})" if f["twin_low"] is not None else ""
        point = f["error"] is not None and abs(f["error"]) <= (CALIBRATED_TOL if f["kind"] == "calibrated" else PREDICTED_TOL)
        mark = "" if point else "~" if f["in_band"] else "!"
        lines.append(
            f"| {mark} | {f['system']} | {f['figure']} | {f['unit']} | {_four_digits(f['published'])} | {twin} | {err} | {band} | "
            f"{f['kind']} | {f['source']} |"
        )

    def point_within(f: dict[str, Any]) -> bool:
        return f["error"] is not None and abs(f["error"]) <= (CALIBRATED_TOL if f["kind"] == "calibrated" else PREDICTED_TOL)

    misses = [f for f in result["figures"] if not point_within(f)]
    if misses:
        lines += ["", "## Outside tolerance (and held only by a band), and why", ""]
        for f in misses:
            why = f["note"] or "no reason recorded yet"
            err = f" ({f['error']:+.1%})" if f["error"] is not None else ""
            lines.append(f"* **{f['system']}, {f['figure']}**{err}: {why}")
    return "\n".join(lines) + "\n"
