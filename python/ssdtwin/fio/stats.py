"""Per-thread statistics as fio keeps them, built from engine results, and fio's group
aggregation (stat.c ``__show_run_stats``, ``sum_thread_stats``).

The output module renders these objects; keeping fio's own representation (count, min,
max, running mean and sum of squared deviations ``S``) lets us merge groups with fio's
formulas and print the same digits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from .contract import CloneOut, SampleStatOut, SsOut, StatOut
from .errors import EngineResultError
from .facts import DDIR_NAMES
from .hist import PLAT_NR, dense

__all__ = ["IoStat", "DdirStat", "ThreadStat", "GroupStat", "from_engine", "aggregate", "group_stats"]


@dataclass
class IoStat:
    """fio's ``struct io_stat``: samples, min, max, mean and S (sum of squared deviations)."""

    n: int = 0
    min: int = 0
    max: int = 0
    mean: float = 0.0
    m2: float = 0.0

    @classmethod
    def from_samples(cls, samples: Sequence[int]) -> IoStat:
        st = cls()
        for value in samples:
            st.add(value)
        return st

    def add(self, value: int) -> None:
        # stat.c add_stat_sample (Welford), step for step so the rounding matches.
        if self.n == 0:
            self.min = self.max = value
        else:
            self.min = min(self.min, value)
            self.max = max(self.max, value)
        val = float(value)
        delta = val - self.mean
        if delta:
            self.mean += delta / (self.n + 1.0)
            self.m2 += delta * (val - self.mean)
        self.n += 1

    @classmethod
    def from_moments(cls, n: int, minimum: int, maximum: int, mean: float, stddev: float) -> IoStat:
        """From the numbers fio prints (used to rebuild stats from fio's own JSON)."""
        return cls(n, minimum, maximum, mean, stddev * stddev * (n - 1) if n > 1 else 0.0)

    @property
    def stddev(self) -> float:
        return math.sqrt(self.m2 / (self.n - 1.0)) if self.n > 1 else 0.0

    def merged(self, other: IoStat) -> IoStat:
        """stat.c __sum_stat: pooled mean and S (Chan et al.)."""
        if other.n == 0:
            return IoStat(self.n, self.min, self.max, self.mean, self.m2)
        if self.n == 0:
            return IoStat(other.n, other.min, other.max, other.mean, other.m2)
        delta = other.mean - self.mean
        mean = (other.mean * other.n + self.mean * self.n) / (self.n + other.n)
        m2 = other.m2 + self.m2 + delta**2.0 * (self.n * other.n) / (self.n + other.n)
        return IoStat(self.n + other.n, min(self.min, other.min), max(self.max, other.max), mean, m2)

    def summed(self, other: IoStat) -> IoStat:
        """stat.c sum_stat(pure_sum): bandwidth and IOPS of group members add up."""
        if other.n == 0:
            return IoStat(self.n, self.min, self.max, self.mean, self.m2)
        if self.n == 0:
            return IoStat(other.n, other.min, other.max, other.mean, other.m2)
        return IoStat(self.n + other.n, self.min + other.min, self.max + other.max, self.mean + other.mean, self.m2 + other.m2)


@dataclass
class DdirStat:
    io_bytes: int = 0
    total_ios: int = 0
    short_ios: int = 0
    drop_ios: int = 0
    runtime_ms: int = 0
    slat: IoStat = field(default_factory=IoStat)
    clat: IoStat = field(default_factory=IoStat)
    lat: IoStat = field(default_factory=IoStat)
    slat_hist: list[int] = field(default_factory=lambda: [0] * PLAT_NR)
    clat_hist: list[int] = field(default_factory=lambda: [0] * PLAT_NR)
    lat_hist: list[int] = field(default_factory=lambda: [0] * PLAT_NR)
    bw: IoStat = field(default_factory=IoStat)  # KiB/s samples
    iops: IoStat = field(default_factory=IoStat)


@dataclass
class ThreadStat:
    """One entry of fio's report: a thread, or a group under group_reporting."""

    name: str
    groupid: int
    thread_number: int
    description: Optional[str] = None
    pid: int = 0
    members: int = 0
    error: int = 0
    ddir: list[DdirStat] = field(default_factory=lambda: [DdirStat(), DdirStat(), DdirStat()])
    io_u_map: list[int] = field(default_factory=lambda: [0] * 7)
    io_u_submit: list[int] = field(default_factory=lambda: [0] * 7)
    io_u_complete: list[int] = field(default_factory=lambda: [0] * 7)
    total_submit: int = 0
    total_complete: int = 0
    lat_n: list[int] = field(default_factory=lambda: [0] * 10)
    lat_u: list[int] = field(default_factory=lambda: [0] * 10)
    lat_m: list[int] = field(default_factory=lambda: [0] * 12)
    total_run_time_ms: int = 0
    usr_time: float = 0.0  # same unit as total_run_time_ms; usr_cpu = usr_time*100/runtime
    sys_time: float = 0.0
    ctx: int = 0
    majf: int = 0
    minf: int = 0
    clat_percentiles: bool = True
    lat_percentiles: bool = False
    slat_percentiles: bool = False
    percentile_list: list[float] = field(default_factory=list)
    percentile_precision: int = 2
    kb_base: int = 1024
    sig_figs: int = 4
    options: list[tuple[str, Optional[str]]] = field(default_factory=list)
    latency_depth: int = 0
    latency_target: int = 0
    latency_percentile: float = 100.0
    latency_window: int = 0
    # latency_target: fio's td->verror, printed after err= in the normal output.
    verror: str = ""
    # ss — the engine's steady-state record (docs/fio.md §4), None without ss_dur.
    steadystate: Optional[SsOut] = None

    def total_ios(self) -> int:
        return sum(d.total_ios for d in self.ddir)

    def io_bytes(self) -> int:
        return sum(d.io_bytes for d in self.ddir)


@dataclass
class GroupStat:
    """fio's ``struct group_run_stats`` for one group."""

    groupid: int
    kb_base: int = 1024
    sig_figs: int = 4
    min_run: list[int] = field(default_factory=lambda: [0, 0, 0])
    max_run: list[int] = field(default_factory=lambda: [0, 0, 0])
    min_bw: list[int] = field(default_factory=lambda: [0, 0, 0])
    max_bw: list[int] = field(default_factory=lambda: [0, 0, 0])
    io_bytes: list[int] = field(default_factory=lambda: [0, 0, 0])
    agg: list[int] = field(default_factory=lambda: [0, 0, 0])


def _runtime_ms(ns: int) -> int:
    # backend.c update_runtime: microseconds, rounded up to milliseconds.
    return (ns // 1000 + 999) // 1000


def _sample_stat(stat: SampleStatOut) -> IoStat:
    return IoStat(stat["n"], stat["min"], stat["max"], stat["mean"], stat["m2"])


def _stat(d: StatOut) -> tuple[IoStat, list[int]]:
    n = d["n"]
    if n == 0:
        return IoStat(), [0] * PLAT_NR
    mean = d["sum_ns"] / n
    return IoStat(n, d["min_ns"], d["max_ns"], mean, d["m2"]), dense(d["hist"])


# fio's td->verror for the job errors the engine reports: io_u.c lat_fatal ->
# td_verror(ETIMEDOUT, "max latency exceeded") at io_u.c:1432 (latency_target), and
# td_verror(EIO, "check_min_rate") at backend.c:1131 (rate_min, rate_iops_min).
_VERRORS = {
    110: "file:io_u.c:1432, func=max latency exceeded, error=Connection timed out",
    5: "file:backend.c:1131, func=check_min_rate, error=Input/output error",
}


def job_verror(errno: int) -> str:
    """fio's text for a job error (what follows ``err=N/``), "" for none."""
    return _VERRORS.get(errno, "")


def from_engine(result: CloneOut, clone: Any) -> ThreadStat:
    """Turn one engine result (docs/fio.md §4) into fio's per-thread statistics."""
    if result["thread_number"] != clone.thread_number:
        raise EngineResultError(f"engine result for thread {result['thread_number']} given for thread {clone.thread_number}")
    job = clone.job
    st = job.state
    ts = ThreadStat(
        name=job.name,
        groupid=clone.group_id,
        thread_number=clone.thread_number,
        description=st["description"],
        members=1,
        error=result["error"],
        clat_percentiles=st["clat_percentiles"],
        lat_percentiles=st["lat_percentiles"],
        slat_percentiles=st["slat_percentiles"],
        percentile_list=list(st["percentile_list"]),
        percentile_precision=st["percentile_precision"],
        kb_base=st["kb_base"],
        sig_figs=st["significant_figures"],
        options=list(job.options),
        # latency_target: the depth fio's search ended at (stat.c latency_depth =
        # td->latency_qd); fio reports the target in ns, the window in us.
        latency_depth=result["latency_depth"],
        latency_target=int(st.get("latency_target", 0)) * 1000,
        latency_percentile=float(st.get("latency_percentile", 100.0)),
        latency_window=int(st.get("latency_window", 0)),
        verror=job_verror(result["error"]),
        steadystate=result.get("steadystate"),
    )
    for i, name in enumerate(DDIR_NAMES):
        d = result[name]
        ds = ts.ddir[i]
        ds.io_bytes = d["io_bytes"]
        ds.total_ios = d["total_ios"]
        ds.short_ios = d["short_ios"]
        ds.drop_ios = d["drop_ios"]
        ds.runtime_ms = _runtime_ms(d["runtime_ns"])
        ds.slat, ds.slat_hist = _stat(d["slat"])
        ds.clat, ds.clat_hist = _stat(d["clat"])
        ds.lat, ds.lat_hist = _stat(d["lat"])
        # stat.c __add_samples: one sample per window with I/O, KiB/s or IOPS; the engine
        # sends the samples' running statistics (fixed size however long the run).
        ds.bw = _sample_stat(d["bw_sample_stat"])
        ds.iops = _sample_stat(d["iops_sample_stat"])
    lb = result["latency_buckets"]
    ts.lat_n, ts.lat_u, ts.lat_m = list(lb["ns"]), list(lb["us"]), list(lb["ms"])
    ts.io_u_map = list(result["iodepth_level"])
    ts.io_u_submit = list(result["iodepth_submit"])
    ts.io_u_complete = list(result["iodepth_complete"])
    ts.total_submit = sum(ts.io_u_submit)
    ts.total_complete = sum(ts.io_u_complete)
    ts.total_run_time_ms = result["runtime_ns"] // 1_000_000
    return ts


def sum_into(dst: ThreadStat, src: ThreadStat) -> None:
    """stat.c sum_thread_stats for unified_rw_reporting=none."""
    for d, s in zip(dst.ddir, src.ddir):
        d.clat = d.clat.merged(s.clat)
        d.slat = d.slat.merged(s.slat)
        d.lat = d.lat.merged(s.lat)
        d.bw = d.bw.summed(s.bw)
        d.iops = d.iops.summed(s.iops)
        d.io_bytes += s.io_bytes
        d.runtime_ms = max(d.runtime_ms, s.runtime_ms)
        d.total_ios += s.total_ios
        d.short_ios += s.short_ios
        d.drop_ios += s.drop_ios
        for attr in ("slat_hist", "clat_hist", "lat_hist"):
            setattr(d, attr, [a + b for a, b in zip(getattr(d, attr), getattr(s, attr))])
    dst.usr_time += src.usr_time
    dst.sys_time += src.sys_time
    dst.ctx += src.ctx
    dst.majf += src.majf
    dst.minf += src.minf
    for attr in ("io_u_map", "io_u_submit", "io_u_complete", "lat_n", "lat_u", "lat_m"):
        setattr(dst, attr, [a + b for a, b in zip(getattr(dst, attr), getattr(src, attr))])
    dst.total_run_time_ms += src.total_run_time_ms
    dst.total_submit += src.total_submit
    dst.total_complete += src.total_complete


def aggregate(threads: Sequence[tuple[ThreadStat, bool]]) -> list[ThreadStat]:
    """fio's report entries from per-thread stats in thread order.

    ``threads`` pairs each thread's stats with its job's ``group_reporting``. A thread
    joins the previous entry when it has group_reporting and the same group as the thread
    before it. The entry keeps the *first* member's name, group, description and pid, and
    the *last* member's options, percentile settings and latency target fields
    (stat.c __show_run_stats).
    """
    out: list[ThreadStat] = []
    last_gid: Optional[int] = None
    for ts, group_reporting in threads:
        if out and group_reporting and last_gid == ts.groupid:
            entry = out[-1]
        else:
            entry = ThreadStat(
                name=ts.name,
                groupid=ts.groupid,
                thread_number=ts.thread_number,
                description=ts.description,
                pid=ts.pid,
                kb_base=ts.kb_base,
                sig_figs=ts.sig_figs,
            )
            out.append(entry)
        entry.clat_percentiles = ts.clat_percentiles
        entry.lat_percentiles = ts.lat_percentiles
        entry.slat_percentiles = ts.slat_percentiles
        entry.percentile_list = list(ts.percentile_list)
        entry.percentile_precision = ts.percentile_precision
        entry.options = list(ts.options)
        entry.latency_depth = ts.latency_depth
        entry.latency_target = ts.latency_target
        entry.latency_percentile = ts.latency_percentile
        entry.latency_window = ts.latency_window
        # ss — stat.c takes each member's record in turn (the last member keeps
        # the group's window); a member without ss_dur clears it.
        entry.steadystate = ts.steadystate
        if not entry.error and ts.error:
            entry.error = ts.error
            entry.verror = ts.verror  # latency_target (stat.c keeps the first error's text)
        sum_into(entry, ts)
        entry.members += ts.members
        last_gid = ts.groupid
    return out


def group_stats(entries: Sequence[ThreadStat]) -> dict[int, GroupStat]:
    """The "Run status group" numbers and the base of ``bw_agg`` (stat.c)."""
    groups: dict[int, GroupStat] = {}
    for ts in entries:
        rs = groups.get(ts.groupid)
        if rs is None:
            rs = groups[ts.groupid] = GroupStat(ts.groupid)
            rs.min_run = [-1, -1, -1]
            rs.min_bw = [-1, -1, -1]
        rs.kb_base = ts.kb_base
        rs.sig_figs = ts.sig_figs
        for j, d in enumerate(ts.ddir):
            if not d.runtime_ms:
                continue
            if rs.min_run[j] == -1 or d.runtime_ms < rs.min_run[j]:
                rs.min_run[j] = d.runtime_ms
            rs.max_run[j] = max(rs.max_run[j], d.runtime_ms)
            bw = d.io_bytes * 1000 // d.runtime_ms
            if rs.min_bw[j] == -1 or bw < rs.min_bw[j]:
                rs.min_bw[j] = bw
            rs.max_bw[j] = max(rs.max_bw[j], bw)
            rs.io_bytes[j] += d.io_bytes
    for rs in groups.values():
        for j in range(3):
            if rs.max_run[j]:
                rs.agg[j] = rs.io_bytes[j] * 1000 // rs.max_run[j]
            if rs.min_run[j] == -1:
                rs.min_run[j] = 0
            if rs.min_bw[j] == -1:
                rs.min_bw[j] = 0
    return groups
