"""Rebuild ssdtwin's per-thread stats from a real fio ``json+`` report.

With ``--output-format=normal,json+`` (and no group_reporting) fio prints both formats
for the same run, and json+ carries the latency histograms. Feeding the numbers back
through our renderers and comparing with fio's own text checks the formatting end to
end against the real binary.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ssdtwin.fio.hist import PLAT_NR, value_to_index
from ssdtwin.fio.stats import DdirStat, IoStat, ThreadStat


def _hist(bins: dict[str, int]) -> list[int]:
    out = [0] * PLAT_NR
    for value, count in bins.items():
        out[value_to_index(int(value))] += count
    return out


def _io_stat(o: dict[str, Any]) -> IoStat:
    return IoStat.from_moments(o["N"], o["min"], o["max"], o["mean"], o["stddev"])


def _counts(pcts: list[float], total: int, floor: float) -> list[int]:
    # fio shows a nonzero share below ``floor`` as ``floor``; such a share came from a
    # handful of I/Os, and one I/O reproduces the printed value.
    out = []
    for p in pcts:
        n = round(p * total / 100.0)
        if p == floor and n * 100.0 / total > floor:
            n = 1
        out.append(n)
    return out


def load_pairs(text: str) -> list[tuple[str, Any]]:
    """JSON objects as key/value pair lists (fio may repeat keys)."""
    return json.loads(text, object_pairs_hook=lambda pairs: pairs)


def thread_stats_from_json(job: dict[str, Any], pid: int) -> ThreadStat:
    ts = ThreadStat(name=job["jobname"], groupid=job["groupid"], thread_number=0, pid=pid, members=1)
    ts.description = job.get("desc")
    for i, name in enumerate(("read", "write", "trim")):
        j = job[name]
        d = DdirStat(
            io_bytes=j["io_bytes"],
            total_ios=j["total_ios"],
            short_ios=j["short_ios"],
            drop_ios=j["drop_ios"],
            runtime_ms=j["runtime"],
        )
        for lat in ("slat", "clat", "lat"):
            o = j[lat + "_ns"]
            setattr(d, lat, _io_stat(o))
            if "bins" in o:
                setattr(d, lat + "_hist", _hist(o["bins"]))
        if j["bw_samples"]:
            d.bw = IoStat.from_moments(j["bw_samples"], j["bw_min"], j["bw_max"], j["bw_mean"], j["bw_dev"])
        if j["iops_samples"]:
            d.iops = IoStat.from_moments(j["iops_samples"], j["iops_min"], j["iops_max"], j["iops_mean"], j["iops_stddev"])
        ts.ddir[i] = d
    total = ts.total_ios()
    ts.io_u_map = _counts(list(job["iodepth_level"].values()), total, 0.1)
    ts.total_submit = ts.total_complete = total
    ts.io_u_submit = _counts(list(job["iodepth_submit"].values()), total, 0.1)
    ts.io_u_complete = _counts(list(job["iodepth_complete"].values()), total, 0.1)
    ts.lat_n = _counts(list(job["latency_ns"].values()), total, 0.01)
    ts.lat_u = _counts(list(job["latency_us"].values()), total, 0.01)
    ts.lat_m = _counts(list(job["latency_ms"].values()), total, 0.01)
    ts.total_run_time_ms = job["job_runtime"]
    ts.usr_time = job["usr_cpu"] * ts.total_run_time_ms / 100.0
    ts.sys_time = job["sys_cpu"] * ts.total_run_time_ms / 100.0
    ts.ctx, ts.majf, ts.minf = job["ctx"], job["majf"], job["minf"]
    ts.latency_depth = job.get("latency_depth", 0)
    ts.latency_percentile = job.get("latency_percentile", 100.0)
    return ts


def pids_and_time(normal: str) -> tuple[list[int], str]:
    pids = [int(p) for p in re.findall(r"\(groupid=\d+, jobs=\d+\): err= 0: pid=(\d+):", normal)]
    when = re.search(r"pid=\d+: (.+)\n", normal)
    assert when
    return pids, when.group(1)
