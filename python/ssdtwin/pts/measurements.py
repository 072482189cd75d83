"""One element's measurements from fio's json+ output: IOPS, bandwidth, latency means,
maxima and percentiles (from fio's clat histogram), runtime and bytes written."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..fio.hist import PLAT_NR, percentiles, value_to_index
from .records import ElementMeasurements, FioJson, TimingColumns
from .target import PtsError

PCTS = (99.0, 99.9, 99.99)


def _bins(d: FioJson) -> dict[int, int]:
    """json+ ``clat_ns.bins`` (value → count) as bucket index → count."""
    out: dict[int, int] = {}
    for k, c in (d.get("clat_ns", {}).get("bins") or {}).items():
        if c:
            i = value_to_index(int(k))
            out[i] = out.get(i, 0) + int(c)
    return out


def pcts(hist: dict[int, int]) -> list[Optional[float]]:
    n = sum(hist.values())
    if n == 0:
        return [None] * len(PCTS)
    dense = [0] * PLAT_NR
    for i, c in hist.items():
        dense[i] += c
    return [v / 1000.0 for _, v in percentiles(dense, n, PCTS)]


def merge(*hists: dict[int, int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for h in hists:
        for i, c in h.items():
            out[i] = out.get(i, 0) + c
    return out


def _job(j: FioJson) -> FioJson:
    jobs = j.get("jobs") or []
    if not jobs:
        raise PtsError("fio output has no jobs")
    return dict(jobs[0])


def timing_columns(j: FioJson) -> TimingColumns:
    """How much of the element was timed, and the widest relative confidence half-width of
    its IOPS and mean latency (over directions and samples), from the fio JSON's
    ``ssdtwin.timing`` (docs/pts.md, "Converging rounds"); empty for a run without it."""
    timing = (j.get("ssdtwin") or {}).get("timing")
    if not timing:
        return {}

    def widest(name: str) -> Optional[float]:
        vals = [f["rel_half_width"] for f in timing["figures"] if f["figure"] == name]
        return max((v if v is not None else float("inf") for v in vals), default=None)

    return {
        "timed_s": timing["timed_ns"] / 1e9,
        "timed_share": timing["timed_share"],
        "iops_ci_rel": widest("iops"),
        "lat_mean_ci_rel": widest("lat_mean"),
    }


@dataclass(frozen=True)
class _Direction:
    """One direction's figures from json+: I/Os, IOPS, bandwidth (bytes/s), clat histogram,
    and (with I/Os) mean and max completion latency (µs) and its percentiles (µs, PCTS)."""

    ios: int
    iops: float
    bw_bytes_s: float
    hist: dict[int, int]
    lat_mean_us: float
    lat_max_us: float
    lat_pcts_us: list[Optional[float]]


def _direction(d: FioJson) -> _Direction:
    clat = d.get("clat_ns") or {}
    n = int(clat.get("N", 0) or 0)
    h = _bins(d)
    mean = float(clat.get("mean", 0.0)) / 1000.0 if n else 0.0
    mx = float(clat.get("max", 0)) / 1000.0 if n else 0.0
    return _Direction(n, float(d.get("iops", 0.0)), float(d.get("bw_bytes", 0)), h, mean, mx, pcts(h) if n else [])


def fio_row(j: FioJson) -> tuple[ElementMeasurements, dict[str, dict[int, int]]]:
    """One element's measurements from fio's json+ (group_reporting: jobs[0] is the group):
    the rounds.csv columns and the read/write clat histograms."""
    job = _job(j)
    rd, wr = _direction(job.get("read") or {}), _direction(job.get("write") or {})
    row: ElementMeasurements = {
        "read_iops": rd.iops,
        "read_bw_bytes_s": rd.bw_bytes_s,
        "write_iops": wr.iops,
        "write_bw_bytes_s": wr.bw_bytes_s,
        "iops": rd.iops + wr.iops,
    }
    if rd.ios:
        p99, p99_9, p99_99 = rd.lat_pcts_us
        row.update({"read_lat_mean_us": rd.lat_mean_us, "read_lat_max_us": rd.lat_max_us})
        row.update({"read_lat_p99_us": p99, "read_lat_p99_9_us": p99_9, "read_lat_p99_99_us": p99_99})
    if wr.ios:
        p99, p99_9, p99_99 = wr.lat_pcts_us
        row.update({"write_lat_mean_us": wr.lat_mean_us, "write_lat_max_us": wr.lat_max_us})
        row.update({"write_lat_p99_us": p99, "write_lat_p99_9_us": p99_9, "write_lat_p99_99_us": p99_99})
    timing = timing_columns(j)
    if timing:
        row.update({"timed_s": timing["timed_s"], "timed_share": timing["timed_share"]})
        row.update({"iops_ci_rel": timing["iops_ci_rel"], "lat_mean_ci_rel": timing["lat_mean_ci_rel"]})
    n_total = rd.ios + wr.ios
    if n_total:
        row["lat_mean_us"] = (rd.lat_mean_us * rd.ios + wr.lat_mean_us * wr.ios) / n_total
        row["lat_max_us"] = max(x.lat_max_us for x in (rd, wr) if x.ios)
        p99, p99_9, p99_99 = pcts(merge(rd.hist, wr.hist))
        row.update({"lat_p99_us": p99, "lat_p99_9_us": p99_9, "lat_p99_99_us": p99_99})
    return row, {"read": rd.hist, "write": wr.hist}


def fio_runtime_s(j: FioJson) -> float:
    """How long the element ran: the longer direction's ``runtime`` (ms)."""
    job = _job(j)
    ms = max(float((job.get(d) or {}).get("runtime", 0) or 0) for d in ("read", "write", "trim"))
    if ms == 0:
        ms = float(job.get("job_runtime", 0) or 0)
    return ms / 1000.0


def fio_written(j: FioJson) -> int:
    return int((_job(j).get("write") or {}).get("io_bytes", 0) or 0)
