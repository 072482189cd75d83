"""One element's measurements from fio's json+ output: IOPS, bandwidth, latency means,
maxima and percentiles (from fio's clat histogram), runtime and bytes written."""

from __future__ import annotations

from typing import Any, Optional

from ..fio.hist import PLAT_NR, percentiles, value_to_index
from .target import PtsError

PCTS = (99.0, 99.9, 99.99)
PCT_COLS = ("p99", "p99_9", "p99_99")


def _bins(d: dict[str, Any]) -> dict[int, int]:
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


def _job(j: dict[str, Any]) -> dict[str, Any]:
    jobs = j.get("jobs") or []
    if not jobs:
        raise PtsError("fio output has no jobs")
    return dict(jobs[0])


def timing_columns(j: dict[str, Any]) -> dict[str, Optional[float]]:
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


def fio_row(j: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[int, int]]]:
    """One element's measurements from fio's json+ (group_reporting: jobs[0] is the group):
    the rounds.csv columns and the read/write clat histograms."""
    job = _job(j)
    row: dict[str, Any] = {}
    hists: dict[str, dict[int, int]] = {}
    n_total = 0
    mean_sum = 0.0
    max_all: Optional[float] = None
    for ddir in ("read", "write"):
        d = job.get(ddir) or {}
        clat = d.get("clat_ns") or {}
        n = int(clat.get("N", 0) or 0)
        row[f"{ddir}_iops"] = float(d.get("iops", 0.0))
        row[f"{ddir}_bw_bytes_s"] = float(d.get("bw_bytes", 0))
        h = _bins(d)
        hists[ddir] = h
        if n:
            mean = float(clat.get("mean", 0.0)) / 1000.0
            mx = float(clat.get("max", 0)) / 1000.0
            row[f"{ddir}_lat_mean_us"] = mean
            row[f"{ddir}_lat_max_us"] = mx
            for col, v in zip(PCT_COLS, pcts(h)):
                row[f"{ddir}_lat_{col}_us"] = v
            n_total += n
            mean_sum += mean * n
            max_all = mx if max_all is None else max(max_all, mx)
    row["iops"] = row["read_iops"] + row["write_iops"]
    row.update(timing_columns(j))
    if n_total:
        row["lat_mean_us"] = mean_sum / n_total
        row["lat_max_us"] = max_all
        for col, v in zip(PCT_COLS, pcts(merge(hists["read"], hists["write"]))):
            row[f"lat_{col}_us"] = v
    return row, hists


def fio_runtime_s(j: dict[str, Any]) -> float:
    """How long the element ran: the longer direction's ``runtime`` (ms)."""
    job = _job(j)
    ms = max(float((job.get(d) or {}).get("runtime", 0) or 0) for d in ("read", "write", "trim"))
    if ms == 0:
        ms = float(job.get("job_runtime", 0) or 0)
    return ms / 1000.0


def fio_written(j: dict[str, Any]) -> int:
    return int((_job(j).get("write") or {}).get("io_bytes", 0) or 0)
