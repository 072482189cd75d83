"""A tiny stand-in for the Rust engine: deterministic results of the engine's own type
(``CloneOut``, docs/fio.md §4; tests/test_binding_types.py checks them against it).

It does not model a drive. Each clone issues I/O at a fixed rate with latencies drawn
from a seeded generator, so output tests have realistic, reproducible inputs.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from ssdtwin.fio.contract import CloneOut, DirOut, JobSpec, SampleStatOut, StatOut
from ssdtwin.fio.facts import iodepth_bin
from ssdtwin.fio.hist import PLAT_NR, latency_bucket, value_to_index
from ssdtwin.fio.logs import window_rows
from ssdtwin.fio.stats import IoStat


class _Acc:
    def __init__(self) -> None:
        self.n = 0
        self.min = 0
        self.max = 0
        self.sum = 0
        self.mean = 0.0
        self.m2 = 0.0
        self.hist = [0] * PLAT_NR

    def add(self, v: int) -> None:
        if self.n == 0:
            self.min = self.max = v
        self.min = min(self.min, v)
        self.max = max(self.max, v)
        self.n += 1
        self.sum += v
        delta = v - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (v - self.mean)
        self.hist[value_to_index(v)] += 1

    def out(self) -> StatOut:
        return {
            "n": self.n,
            "min_ns": self.min,
            "max_ns": self.max,
            "sum_ns": self.sum,
            "m2": self.m2,
            "hist": [(i, c) for i, c in enumerate(self.hist) if c],
        }


def _samples(samples: Sequence[int]) -> SampleStatOut:
    """fio's running statistics of bw or iops samples."""
    st = IoStat.from_samples(samples)
    return {"n": st.n, "min": st.min, "max": st.max, "mean": st.mean, "m2": st.m2}


def _unused_dir() -> DirOut:
    zero: SampleStatOut = {"n": 0, "min": 0, "max": 0, "mean": 0.0, "m2": 0.0}
    return {
        "io_bytes": 0,
        "total_ios": 0,
        "runtime_ns": 0,
        "short_ios": 0,
        "drop_ios": 0,
        "slat": _Acc().out(),
        "clat": _Acc().out(),
        "lat": _Acc().out(),
        "bw_sample_stat": zero,
        "iops_sample_stat": zero,
    }


def run(specs: Sequence[JobSpec], *, iops: int = 20000, mean_lat_ns: int = 80_000, seconds: float = 2.0) -> list[CloneOut]:
    results = []
    start = 0
    batch_end: dict[int, int] = {}
    for spec in specs:
        rng = random.Random(spec["seed"])
        dirs = spec["directions"]
        runtime_ns = spec["runtime_ns"] if spec["time_based"] and spec["runtime_ns"] else int(seconds * 1e9)
        n_total = int(iops * runtime_ns / 1e9)
        accs = {d: {k: _Acc() for k in ("slat", "clat", "lat")} for d in ("read", "write", "trim")}
        counts = {d: 0 for d in ("read", "write", "trim")}
        bytes_ = {d: 0 for d in ("read", "write", "trim")}
        window_ns = spec["bw_avg_ms"] * 1_000_000
        # fio takes no sample for the window that ends with the run (2 s / 500 ms -> 3)
        n_windows = max(1, (runtime_ns - 1) // window_ns)
        bw_windows = {d: [0] * n_windows for d in dirs}
        io_windows = {d: [0] * n_windows for d in dirs}
        lat_buckets = {"ns": [0] * 10, "us": [0] * 10, "ms": [0] * 12}
        log_rows: dict[str, list[list[int]]] = {"bw": [], "iops": [], "lat": [], "slat": [], "clat": [], "clat_hist": []}
        per_io: dict[str, list[list[int]]] = {"lat": [], "slat": [], "clat": []}
        for k in range(n_total):
            t_ns = k * runtime_ns // n_total
            if len(dirs) == 2 and dirs[0] == "read":
                d = "read" if rng.randrange(100) < spec["rwmixread"] else "write"
            else:
                d = dirs[k % len(dirs)]
            bs = spec["bs"][d]["min"]
            clat = int(rng.lognormvariate(math.log(mean_lat_ns), 0.4))
            slat = int(rng.uniform(500, 3000)) if spec["engine_async"] else 0
            counts[d] += 1
            bytes_[d] += bs
            a = accs[d]
            if spec["engine_async"]:
                a["slat"].add(slat)
            a["clat"].add(clat)
            a["lat"].add(clat + slat)
            table, slot = latency_bucket(clat)
            lat_buckets[table][slot] += 1
            w = t_ns // window_ns
            if w < n_windows:
                bw_windows[d][w] += bs
                io_windows[d][w] += 1
            if spec["logs"]["lat"]:
                t_ms = t_ns // 1_000_000
                ddir = ("read", "write", "trim").index(d)
                per_io["clat"].append([t_ms, clat, ddir, bs, 4096 * k])
                per_io["lat"].append([t_ms, clat + slat, ddir, bs, 4096 * k])
                if spec["engine_async"]:
                    per_io["slat"].append([t_ms, slat, ddir, bs, 4096 * k])
        for key, rows in per_io.items():
            if spec["logs"]["avg_ms"]:
                samples = [(r[0], r[1], r[2]) for r in rows]
                log_rows[key] = window_rows(
                    samples, spec["logs"]["avg_ms"], max_value=spec["logs"]["max_value"], end_ms=runtime_ns // 1_000_000
                )
            else:
                log_rows[key] = rows
        for w in range(n_windows):
            for d in dirs:
                ddir = ("read", "write", "trim").index(d)
                t_ms = (w + 1) * spec["bw_avg_ms"]
                if spec["logs"]["bw"]:
                    log_rows["bw"].append([t_ms, bw_windows[d][w] * 1000 // spec["bw_avg_ms"] // 1024, ddir, 0, 0])
                if spec["logs"]["iops"]:
                    log_rows["iops"].append([t_ms, io_windows[d][w] * 1000 // spec["iops_avg_ms"], ddir, 0, 0])
        if spec["logs"]["hist"]:
            for d in dirs:
                ddir = ("read", "write", "trim").index(d)
                log_rows["clat_hist"].append([runtime_ns // 1_000_000, ddir, spec["bs"][d]["min"], accs[d]["clat"].out()["hist"]])
        if spec["stonewall"] and spec["batch"] > 0:
            start = max(batch_end.values())
        total = sum(counts.values())
        depths = [0] * 7
        depths[iodepth_bin(spec["iodepth"])] = total
        # One I/O per submit and complete call for async engines, nothing for sync ones.
        calls = [0, total, 0, 0, 0, 0, 0] if spec["engine_async"] else [0] * 7
        bw_ms, iops_ms = spec["bw_avg_ms"], spec["iops_avg_ms"]
        dir_out = {d: _unused_dir() for d in ("read", "write", "trim")}
        for d in dirs:
            dir_out[d] = {
                "io_bytes": bytes_[d],
                "total_ios": counts[d],
                "runtime_ns": runtime_ns,
                "short_ios": 0,
                "drop_ios": 0,
                "slat": accs[d]["slat"].out(),
                "clat": accs[d]["clat"].out(),
                "lat": accs[d]["lat"].out(),
                # stat.c __add_samples: a sample per window with I/O; KiB/s is
                # floor(floor(bytes*1000/ms)/1024).
                "bw_sample_stat": _samples([b * 1000 // bw_ms // 1024 for b in bw_windows[d] if b]),
                "iops_sample_stat": _samples([n * 1000 // iops_ms for n in io_windows[d] if n]),
            }
        result: CloneOut = {
            "version": 1,
            "thread_number": spec["thread_number"],
            "start_ns": start,
            "elapsed_ns": runtime_ns + 5_000_000,
            "runtime_ns": runtime_ns,
            "read": dir_out["read"],
            "write": dir_out["write"],
            "trim": dir_out["trim"],
            "iodepth_level": tuple(depths),
            "iodepth_submit": tuple(calls),
            "iodepth_complete": tuple(calls),
            "latency_buckets": {"ns": lat_buckets["ns"], "us": lat_buckets["us"], "ms": lat_buckets["ms"]},
            "logs": {k: v for k, v in log_rows.items() if v},
            "latency_depth": spec["iodepth_configured"],
            "error": 0,
        }
        ss = spec.get("steadystate")
        if ss:
            # Schema only: the fake engine does not judge steady state (the Rust engine
            # does, tests/fio/test_fio_steadystate.py); it reports its last seconds' rates.
            n = ss["duration_s"]
            per_s = [total * 1_000_000_000 // runtime_ns] * n
            bs = sum(bytes_.values()) * 1_000_000_000 // runtime_ns
            result["steadystate"] = {
                "metric": ss["metric"],
                "is_slope": ss["slope"],
                "percent": ss["percent"],
                "limit": ss["limit"],
                "duration_s": n,
                "holder": True,
                "attained": False,
                "criterion": 0.0,
                "max_deviation": 0.0,
                "slope": 0.0,
                "iops": per_s,
                "bw": [bs] * n,
            }
        batch_end[spec["batch"]] = max(batch_end.get(spec["batch"], 0), start + runtime_ns + 5_000_000)
        results.append(result)
    return results
