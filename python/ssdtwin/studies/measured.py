"""`ssdtwin validate --spec FILE --measured DIR`: a twin of your own drive held to your own
drive's measurements (docs/calibration.md, "Is the twin right for my drive?").

`ssdtwin calibrate` fits four parameters to four figures, so those four agree by
construction. What a user needs to know next is whether the twin predicts what it was *not*
fitted to. `calibrate --print-jobs` therefore also prints the jobs of PREDICTIONS, run on the
real drive in random steady state after the corners; here each measured job (and each
corner) is run on a twin of the spec in the same state, and the table is validate's:
measured, twin, error, calibrated (a corner whose parameter the spec fitted) or predicted.

The job shape the twin runs is the one fio ran (`job options`), as for the corners.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Optional

from .. import _core
from ..fio.parser import parse_string
from . import corners
from .corners import CornerError, human_bytes
from .experiments import run_on_ns1
from .validate import Drives, Figure, Log, Settings, line

Metric = Literal["lat", "iops"]


@dataclass(frozen=True)
class Prediction:
    """A job the twin is checked on beside the corners, in random steady state."""

    name: str  # the fio job name; the measured JSON is matched by it
    rw: str  # randread | randwrite | randrw
    rwmixread: int  # % reads, for randrw
    bs: int
    iodepth: int
    numjobs: int
    metric: Metric  # "lat": mean completion latency (us); "iops": reads and writes together
    real_s: tuple[int, int]  # (ramp, runtime) on a real drive
    twin_ms: tuple[int, int]  # (ramp, runtime) on the twin (a fifth with --quick)

    def label(self, bs: int, qd: int, jobs: int, mix: int) -> str:
        kind = {"randread": "rand read", "randwrite": "rand write"}.get(self.rw, f"rand {mix}/{100 - mix} read/write")
        what = "mean latency" if self.metric == "lat" else "IOPS"
        return f"{kind} {human_bytes(bs)} QD{qd}" + (f" x {jobs} jobs" if jobs > 1 else "") + f": {what}"


# What a storage engineer asks of a drive beside its four corners: the latency a single
# thread sees (reads, writes, and the mix of the SNIA PTS latency test), and a loaded mix.
# Windows: the twin's QD1 runs see 10,000 I/Os a second or more, so 3 s is 30,000 or more;
# the loaded mix runs under GC, whose cycle the window must span (as the rand-write corner's).
PREDICTIONS = (
    Prediction("qd1-rand-read", "randread", 100, 4096, 1, 1, "lat", (30, 60), (1000, 3000)),
    Prediction("qd1-rand-write", "randwrite", 0, 4096, 1, 1, "lat", (30, 60), (1000, 3000)),
    Prediction("qd1-rand-rw-65", "randrw", 65, 4096, 1, 1, "lat", (30, 60), (1000, 3000)),
    Prediction("rand-rw-70", "randrw", 70, 4096, 32, 4, "iops", (30, 120), (1000, 10000)),
)
BY_NAME = {p.name: p for p in PREDICTIONS}


Shape = tuple[int, int, int, int]  # bs, iodepth, numjobs, rwmixread


def job_text(p: Prediction, shape: Shape, ramp: str, runtime: str, target: str = "") -> str:
    """The job of prediction `p` in `shape` (`ramp` and `runtime` as fio takes them); its
    offsets drawn with replacement (`norandommap`), as the twin's random writes are."""
    bs, qd, jobs, mix = shape
    mix_line = f"rwmixread={mix}\n" if p.rw == "randrw" else ""
    return (
        f"[global]\nioengine=libaio\ndirect=1\ntime_based\nruntime={runtime}\nramp_time={ramp}\ngroup_reporting\nnorandommap\n{target}\n"
        f"[{p.name}]\nrw={p.rw}\n{mix_line}bs={corners.fio_bs(bs)}\niodepth={qd}\nnumjobs={jobs}\n"
    )


def printed_jobs(first: int) -> list[tuple[str, str]]:
    """(stem, text) of every prediction's job for a real drive, numbered from `first`."""
    out = []
    for n, p in enumerate(PREDICTIONS, first):
        ramp, runtime = p.real_s
        shape = (p.bs, p.iodepth, p.numjobs, p.rwmixread)
        head = f"; {p.label(*shape)}: a prediction (`ssdtwin validate --measured`)\n"
        text = job_text(p, shape, f"{ramp}s", f"{runtime}s", f"filename={corners.DEVICE}\n")
        out.append((f"{n}-{p.name}", head + text))
    return out


# --------------------------------------------------------------------------- the measured jobs


@dataclass(frozen=True)
class MeasuredJob:
    """A prediction's figure on the drive, in the shape fio ran it."""

    p: Prediction
    shape: Shape
    value: float
    source: str

    @property
    def label(self) -> str:
        return self.p.label(*self.shape)

    @property
    def unit(self) -> str:
        return "us" if self.p.metric == "lat" else "IOPS"


def read_predictions(directory: Path) -> list[MeasuredJob]:
    """The PREDICTIONS jobs in the fio JSON under `directory` (recursively), by job name."""
    found: dict[str, tuple[str, MeasuredJob]] = {}
    for path in corners.json_files(directory):
        for where, report in corners.load_reports(path):
            for name, m in _predictions_of(path, where, report):
                if name in found:
                    raise CornerError(f"--measured {directory}: {name} is in more than one result: {found[name][0]}, {where}")
                found[name] = (where, m)
    return [found[p.name][1] for p in PREDICTIONS if p.name in found]


def _predictions_of(path: Path, where: str, report: dict[str, Any]) -> list[tuple[str, MeasuredJob]]:
    """The prediction jobs of one fio report of `path` (`where` names it in errors)."""
    out = []
    for name, jobs in _clones(report).items():
        p = BY_NAME[name]
        rw, shape = _shape(where, report, name, jobs)
        if rw != p.rw:
            raise CornerError(f"{where}: jobs[{jobs[0][0]}] ({name}): job options.rw = {rw}: the {name} job runs rw={p.rw}")
        source = f"measured: {report['fio version']} JSON {path.name}" + where[len(str(path)) :]
        out.append((name, MeasuredJob(p, shape, _value(where, p, jobs, shape[1]), source)))
    return out


def _clones(report: dict[str, Any]) -> dict[str, list[tuple[int, dict[str, Any]]]]:
    """The prediction jobs of a fio report by name (the clones of a job run without
    group_reporting are several entries of one name)."""
    out: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for i, job in enumerate(report["jobs"]):
        if isinstance(job, dict) and isinstance(job.get("jobname"), str) and job["jobname"] in BY_NAME:
            out.setdefault(job["jobname"], []).append((i, job))
    return out


def _shape(where: str, report: dict[str, Any], name: str, jobs: list[tuple[int, dict[str, Any]]]) -> tuple[str, Shape]:
    """rw and (bs, iodepth, numjobs, rwmixread) as fio ran the job."""
    i0, j0 = jobs[0]
    glob = corners.options(report, "global options", f"{where}: ")
    job_opts = corners.options(j0, "job options", f"{where}: jobs[{i0}].")
    opts = {**glob, **job_opts}
    field = f"{where}: jobs[{i0}] ({name})"
    corners.check_merged(j0, opts, field)
    rw = str(opts.get("rw", opts.get("readwrite")))
    read_bs, write_bs, _ = corners.block_sizes(glob, job_opts, field)
    bs = {"randread": read_bs, "randwrite": write_bs}.get(rw, read_bs)
    if rw not in ("randread", "randwrite") and read_bs != write_bs:
        # the twin's job has one block size for both directions
        raise CornerError(f"{field}: job options.bs: reads of {read_bs} and writes of {write_bs} bytes; the {name} job runs one size")
    kb = corners.kb_base_of(glob, job_opts, field)
    qd = corners.whole(opts.get("iodepth", 1), f"{field}: job options.iodepth", kb_base=kb)
    njobs = corners.whole(opts.get("numjobs", 1), f"{field}: job options.numjobs", corners.MAX_JOBS, kb_base=kb)
    mix = {"randread": 100, "randwrite": 0}.get(rw)
    if mix is None:
        v = opts.get("rwmixread", "50")
        try:
            mix = int(str(v))
        except ValueError:
            raise CornerError(f"{field}: job options.rwmixread = {v}: not a whole number") from None
        if not 0 <= mix <= 100:
            raise CornerError(f"{field}: job options.rwmixread = {mix}: must be 0..100")
    return rw, (bs, qd, njobs if len(jobs) == 1 else len(jobs), mix)


def _value(where: str, p: Prediction, jobs: list[tuple[int, dict[str, Any]]], qd: int) -> float:
    """IOPS over both directions (summed over the clones of a job run without
    group_reporting), or the mean completion latency in us (fio's clat: the twin's latency
    is the device's, and it models no submission time; fio before 3.0 reports it as clat,
    in us)."""
    iops = 0.0
    lat_ns = 0.0
    ios = 0
    dirs: tuple[str, ...] = {"randread": ("read",), "randwrite": ("write",)}.get(p.rw, ("read", "write"))
    for i, job in jobs:
        corners.check_error(job, f"{where}: jobs[{i}]")
        corners.check_depth(job, qd, f"{where}: jobs[{i}]")
        if isinstance(job.get("mixed"), dict) and not any(d in job for d in dirs):
            # unified_rw_reporting=1: one "mixed" direction, read and write together (its
            # clat mean is the one weighted by the I/Os of each)
            dirs = ("mixed",)
        for d in dirs:
            st = job.get(d)
            at = f"{where}: jobs[{i}].{d}"
            if not isinstance(st, dict):
                raise CornerError(f"{at}: missing or not an object")
            clat_key, per_ns = ("clat", 1000) if "clat_ns" not in st and isinstance(st.get("clat"), dict) else ("clat_ns", 1)
            clat_stat = st.get(clat_key) or {}
            n, rate, clat = st.get("total_ios"), st.get("iops"), clat_stat.get("mean") if isinstance(clat_stat, dict) else None
            for key, v in (("total_ios", n), ("iops", rate), (f"{clat_key}.mean", clat)):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf:
                    raise CornerError(f"{at}.{key}: missing or not a finite number of 0 or more")
            assert isinstance(n, (int, float)) and isinstance(rate, (int, float)) and isinstance(clat, (int, float))
            if n > 0 and p.metric == "lat" and (clat <= 0 or clat_stat.get("N", n) == 0):
                # disable_clat=1: fio counts the I/Os but measures no latency (mean 0, N 0)
                raise CornerError(
                    f"{at}.{clat_key}: fio measured no completion latency for {int(n)} I/Os "
                    f"(N = {clat_stat.get('N')}, mean = {clat}; disable_clat?)"
                )
            iops += rate
            lat_ns += clat * per_ns * n
            ios += int(n)
    if ios == 0:
        raise CornerError(f"{where}: {p.name}: the job did no I/O")
    return iops if p.metric == "iops" else lat_ns / ios / 1e3


# --------------------------------------------------------------------------- on the twin


def twin_value(drives: Drives, system: str, m: MeasuredJob) -> float:
    """The figure on the twin: the measured job's shape, from random steady state."""
    ramp, runtime = m.p.twin_ms if not drives.s.quick else (m.p.twin_ms[0] // 5, m.p.twin_ms[1] // 5)
    d = drives.open_state(system, "rand", 4096)
    try:
        out = run_on_ns1(d, parse_string(job_text(m.p, m.shape, f"{ramp}ms", f"{runtime}ms"), name=f"{m.p.name}.fio"))
    finally:
        d.close()
    ios = sum(r[x]["total_ios"] for r in out for x in ("read", "write"))
    if m.p.metric == "iops":
        secs = max(r[x]["runtime_ns"] for r in out for x in ("read", "write")) / 1e9
        return ios / secs
    return sum(r[x]["lat"]["sum_ns"] for r in out for x in ("read", "write")) / max(1, ios) / 1e3


def measured_group(s: Settings, spec_toml: str, system: str, directory: Path, log: Log) -> list[Figure]:
    """Every corner and prediction measured under `directory`, beside a twin of the spec. A
    corner is calibrated when the spec's `[corners]` entry of that name sets a parameter.
    (An `ssdtwin pts` report's other elements are held to a twin by running the same tests on
    it and `ssdtwin pts compare`: the same sequence of rounds leaves the same drive states.)"""
    corners.check_measured_dir(directory)
    spec = _core.parse_spec(spec_toml)
    fitted = corners.from_spec(spec, system)
    found = corners.read_measured(directory, fitted, required=False)
    jobs = read_predictions(directory)
    if not found and not jobs:
        raise CornerError(
            f"--measured {directory}: no fio JSON job named as a corner ({', '.join(corners.NAMES)}) or a prediction "
            f"({', '.join(BY_NAME)}): the jobs of `ssdtwin calibrate --print-jobs`"
        )
    shapes = [(c.origin, c.label, c.shape[0]) for c in found.values()]
    corners.check_blocks(shapes + [(f"--measured {directory}: {m.source}", m.label, m.shape[0]) for m in jobs], spec)
    drives = Drives(s, spec_toml=spec_toml)
    out = []
    try:
        for c in found.values():
            t0 = time.perf_counter()
            twin = drives.corner(system, c)
            f = Figure(system, c.source, c.label, c.unit, c.value, twin, _kind(fitted.get(c.name)), "measured")
            out.append(f)
            log(line(f, time.perf_counter() - t0))
        for m in jobs:
            t0 = time.perf_counter()
            f = Figure(system, m.source, m.label, m.unit, m.value, twin_value(drives, system, m), "predicted", "measured")
            out.append(f)
            log(line(f, time.perf_counter() - t0))
    finally:
        drives.close()
    return out


def _kind(c: Optional[corners.Corner]) -> str:
    return "calibrated" if c is not None and c.sets else "predicted"
