"""A synthetic SNIA PTS report folder, written exactly per the runner/report contract
(format "ssdtwin-pts", version 1: docs/pts-report.md, "The report folder"), so the report can
be developed and tested without running the harness.

The numbers follow a plausible enterprise NVMe drive (a CM6-like 3.84 TB at full scale):
IOPS start high at FOB and settle within a few rounds, the throughput test never settles
(a slow drift keeps the slope excursion above 10 %), WSAT falls from FOB to the steady-state
random-write figure after about one drive fill, HIR recovers more the longer the wait.

``make_report(folder)`` writes every test; ``interrupt=("lat", 3)`` writes a run stopped
(Ctrl-C) after round 3 of the latency test, with the later tests never started. The
values of two reports made with different ``gain`` differ by that factor, for compare().

Run as a script to write a folder by hand: ``python tests/pts/report_fixture.py OUT``.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ssdtwin.pts.folder import COLUMNS
from ssdtwin.pts.tests import TITLES

MIXES = [100, 95, 65, 50, 35, 5, 0]  # read %
IOPS_BS = [1048576, 131072, 65536, 32768, 16384, 8192, 4096, 512]
LAT_BS = [8192, 4096, 512]
LAT_MIXES = [100, 65, 0]
CAPACITY = 3_840_755_982_336
ROUNDS_COLUMNS = list(COLUMNS)  # the runner's own rounds.csv columns (the contract)
RULE = "SNIA PTS 2.0.2: 5-round window, data excursion <= 20 %, slope excursion <= 10 %"


def bs_label(bs: int) -> str:
    return f"{bs // 1024}KiB" if bs >= 1024 else f"{bs / 1024:g}KiB"


def bs_fio(bs: int) -> str:
    return f"{bs // 1024}k" if bs % 1024 == 0 else str(bs)


def mix_label(read_pct: int) -> str:
    return f"{read_pct}/{100 - read_pct}"


def steady_eval(rounds: list[int], values: list[float]) -> dict[str, Any]:
    """The SNIA rule over the last 5 rounds (the harness's pts/steady.py is the real one)."""
    r = np.array(rounds[-5:], dtype=float)
    y = np.array(values[-5:], dtype=float)
    avg = float(y.mean())
    slope, intercept = (float(v) for v in np.polyfit(r, y, 1))
    data_exc = float(y.max() - y.min())
    slope_exc = abs(slope) * 4
    steady = len(y) == 5 and data_exc <= 0.2 * avg and slope_exc <= 0.1 * avg
    return {
        "steady": bool(steady),
        "window": [int(r[0]), int(r[-1])],
        "avg": avg,
        "min": float(y.min()),
        "max": float(y.max()),
        "data_excursion": data_exc,
        "data_limit": 0.2 * avg,
        "slope": slope,
        "intercept": intercept,
        "slope_excursion": slope_exc,
        "slope_limit": 0.1 * avg,
    }


class Writer:
    def __init__(self, root: Path, test: str, rng: np.random.Generator) -> None:
        self.dir = root / test
        self.test = test
        self.rng = rng
        for sub in ("jobs", "fio"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        self.rows: list[dict[str, Any]] = []
        self.bytes_written = 2 * CAPACITY if test not in ("wsat",) else 0  # WIPC: 2x capacity

    def job(self, element: str, body: str) -> None:
        text = (
            f"; ssdtwin PTS {self.test}: element {element}\n[global]\ndirect=1\nioengine=psync\nrefill_buffers=1\n"
            f"norandommap=1\nrandrepeat=0\nrandom_generator=tausworthe64\ngroup_reporting=1\nsize=100%\n\n[{element}]\n{body}\n"
        )
        (self.dir / "jobs" / f"{element}.fio").write_text(text)

    def row(self, **kw: Any) -> dict[str, Any]:
        """One rounds.csv row; latencies from Little's law and IOPS, bytes counted."""
        read_pct = kw.get("read_pct", 0)
        iops = float(kw["iops"])
        bs = int(kw["bs_bytes"])
        oio = kw.get("numjobs", 1) * kw.get("iodepth", 1)
        runtime = float(kw.get("runtime_s", 60))
        r_iops = iops * read_pct / 100
        w_iops = iops - r_iops
        mean = oio / iops * 1e6 if iops else 0.0
        self.bytes_written += int(w_iops * bs * runtime)
        row: dict[str, Any] = {c: "" for c in ROUNDS_COLUMNS}
        row.update(kw)
        row.update(
            read_iops=round(r_iops, 1),
            write_iops=round(w_iops, 1),
            iops=round(iops, 1),
            read_bw_bytes_s=round(r_iops * bs),
            write_bw_bytes_s=round(w_iops * bs),
            bytes_written_total=self.bytes_written,
            drive_fills=round(self.bytes_written / CAPACITY, 4),
        )
        for prefix, frac, scale in (("read_", read_pct, 0.8), ("write_", 100 - read_pct, 1.3), ("", 100, 1.0)):
            if not frac:
                continue
            m = mean * scale
            row.update(
                {
                    f"{prefix}lat_mean_us": round(m, 2),
                    f"{prefix}lat_p99_us": round(m * 2.4, 2),
                    f"{prefix}lat_p99_9_us": round(m * 4.1, 2),
                    f"{prefix}lat_p99_99_us": round(m * 9.5, 2),
                    f"{prefix}lat_max_us": round(m * 30 * (1 + self.rng.random()), 2),
                }
            )
        self.rows.append(row)
        return row

    def fio_json(self, name: str, row: dict[str, Any]) -> None:
        def ddir(prefix: str) -> dict[str, Any]:
            iops = float(row[f"{prefix}_iops"] or 0)
            mean_ns = float(row[f"{prefix}_lat_mean_us"] or 0) * 1000
            return {
                "io_bytes": int(iops * float(row["bs_bytes"]) * float(row["runtime_s"] or 60)),
                "bw_bytes": int(row[f"{prefix}_bw_bytes_s"] or 0),
                "bw": int(row[f"{prefix}_bw_bytes_s"] or 0) // 1024,
                "iops": iops,
                "clat_ns": {
                    "mean": mean_ns,
                    "max": float(row[f"{prefix}_lat_max_us"] or 0) * 1000,
                    "percentile": {"99.000000": mean_ns * 2.4, "99.900000": mean_ns * 4.1, "99.990000": mean_ns * 9.5},
                    "bins": {str(int(mean_ns)): int(iops)} if iops else {},
                },
            }

        doc = {
            "fio version": "ssdtwin fio (simulated time)",
            "timestamp": 0,
            "jobs": [{"jobname": row["element"], "groupid": 0, "error": 0, "read": ddir("read"), "write": ddir("write")}],
        }
        (self.dir / "fio" / f"{name}.json").write_text(json.dumps(doc))

    def hist(self, element: str, mean_us: float, ddirs: list[str], n: int = 200_000) -> None:
        edges = np.geomspace(1, 100_000, 81)
        with (self.dir / f"hist-{element}.csv").open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["lo_us", "hi_us", "count", "ddir"])
            for d in ddirs:
                centre = mean_us * (0.8 if d == "read" else 1.3)
                samples = self.rng.lognormal(math.log(centre), 0.35, n)
                samples = np.concatenate([samples, self.rng.lognormal(math.log(centre * 12), 0.5, n // 2000)])
                counts, _ = np.histogram(samples, edges)
                for lo, hi, c in zip(edges[:-1], edges[1:], counts):
                    if c:
                        w.writerow([f"{lo:.3f}", f"{hi:.3f}", int(c), d])

    def finish(self, result: dict[str, Any], steady: Optional[dict[str, Any]], table: list[dict[str, Any]]) -> None:
        with (self.dir / "rounds.csv").open("w", newline="") as f:
            w = csv.DictWriter(f, ROUNDS_COLUMNS)
            w.writeheader()
            w.writerows(self.rows)
        if steady is not None:
            (self.dir / "steady.json").write_text(json.dumps(steady, indent=1))
        if table:
            with (self.dir / "table.csv").open("w", newline="") as f:
                w2 = csv.DictWriter(f, list(table[0]))
                w2.writeheader()
                w2.writerows(table)
        (self.dir / "result.json").write_text(json.dumps(result, indent=1))


def settle(steady_value: float, round_no: int, rng: np.random.Generator, fob: float = 0.8, tau: float = 1.4, noise: float = 0.02) -> float:
    return steady_value * (1 + fob * math.exp(-(round_no - 1) / tau)) * (1 + rng.normal(0, noise))


def iops_model(bs: int, read_pct: int, gain: float) -> float:
    read = min(1_450_000.0, 6.9e9 / bs)
    write = min(350_000.0, 4.1e9 / bs) * gain
    r = read_pct / 100
    return 1 / (r / read + (1 - r) / write)


def steady_doc(variables: list[dict[str, Any]], steady: bool, steady_round: int, window: list[int], max_rounds: int) -> dict[str, Any]:
    """steady.json of a pass judged by the PTS rule: whether its `variables` are steady, from
    which round (None when they are not), and the measurement window."""
    return {
        "rule": RULE,
        "min_rounds": 5,
        "max_rounds": max_rounds,
        "steady": steady,
        "steady_round": steady_round if steady else None,
        "window": window,
        "variables": variables,
    }


def rnd_4k_w(runtime_s: int) -> str:
    """The element of WSAT's and HIR's RND 4KiB 100 % W segments at TC4/QD32, `runtime_s`
    long: "rnd-4k-w" (60 s), HIR's "rnd-4k-w-5s"."""
    return "rnd-4k-w" if runtime_s == 60 else f"rnd-4k-w-{runtime_s}s"


def rnd_4k_w_job(w: Writer, runtime_s: int) -> str:
    """The job of the :func:`rnd_4k_w` segments `runtime_s` long; returns their element."""
    element = rnd_4k_w(runtime_s)
    w.job(element, f"rw=randwrite\nbs=4k\nnumjobs=4\niodepth=32\nruntime={runtime_s}\ntime_based=1")
    return element


def rnd_4k_w_segment(w: Writer, seg: int, t: float, runtime_s: int, iops: float, **more: Any) -> dict[str, Any]:
    """Segment `seg` of RND 4KiB 100 % W at TC4/QD32 from `t` s (WSAT's, HIR's): its rounds.csv
    row with `more` columns (HIR's round, phase and wait) and its fio JSON."""
    element = rnd_4k_w(runtime_s)
    row = w.row(
        segment=seg,
        element=element,
        rw="randwrite",
        read_pct=0,
        bs_bytes=4096,
        numjobs=4,
        iodepth=32,
        runtime_s=runtime_s,
        t_start_s=t,
        t_end_s=t + runtime_s,
        iops=iops,
        **more,
    )
    w.fio_json(f"s{seg:04d}-{element}", row)
    return row


def wdpc_test(
    root: Path,
    test: str,
    elements: list[dict[str, Any]],
    tracking: list[tuple[str, str, str, str]],
    max_rounds: int,
    stop_after: Optional[int],
    rng: np.random.Generator,
    drift: float = 0.0,
) -> tuple[Writer, dict[str, Any], list[int]]:
    """Rounds of every element until the tracking variables are steady (or max_rounds, or
    stop_after: an interruption). Returns the writer, steady.json and the window rounds."""
    w = Writer(root, test, rng)
    for e in elements:
        w.job(e["element"], e["job"])
    series: dict[str, list[float]] = {}
    rounds: list[int] = []
    result_steady: dict[str, Any] = {}
    t = 0.0
    for rnd in range(1, max_rounds + 1):
        for e in elements:
            value = settle(e["steady"], rnd, rng, fob=e.get("fob", 0.8)) * (1 + drift * (rnd % 7 - 3))
            row = w.row(
                round=rnd,
                element=e["element"],
                rw=e["rw"],
                read_pct=e["read_pct"],
                bs_bytes=e["bs"],
                numjobs=e["numjobs"],
                iodepth=e["iodepth"],
                runtime_s=60,
                t_start_s=t,
                t_end_s=t + 60,
                iops=value,
            )
            t += 60
            w.fio_json(f"r{rnd:02d}-{e['element']}", row)
        rounds.append(rnd)
        for name, element, column, _unit in tracking:
            row = next(r for r in reversed(w.rows) if r["element"] == element)
            series.setdefault(name, []).append(float(row[column]))
        if stop_after is not None and rnd == stop_after:
            break
        if rnd >= 5 and all(steady_eval(rounds, series[n])["steady"] for n, *_ in tracking):
            break
    variables = []
    for name, element, column, unit in tracking:
        ev = steady_eval(rounds, series[name]) if len(rounds) >= 5 else {"steady": False, "window": [rounds[0], rounds[-1]]}
        variables.append({"name": name, "element": element, "column": column, "unit": unit, "rounds": rounds, "values": series[name], **ev})
    all_steady = len(rounds) >= 5 and all(v["steady"] for v in variables)
    window = [max(1, rounds[-1] - 4), rounds[-1]]
    result_steady = steady_doc(variables, all_steady, rounds[-1], window, max_rounds)
    return w, result_steady, window


def window_avg(w: Writer, element: str, column: str, window: list[int]) -> float:
    vals = [float(r[column]) for r in w.rows if r["element"] == element and window[0] <= r["round"] <= window[1] and r[column] != ""]
    return sum(vals) / len(vals) if vals else float("nan")


def status_of(steady: dict[str, Any], stopped: bool, rounds_run: int) -> tuple[str, str]:
    if stopped:
        return "interrupted", f"interrupted (Ctrl-C) after round {rounds_run}"
    if steady["steady"]:
        return "steady", f"steady state at round {steady['steady_round']}"
    return "not steady", f"NOT in steady state after {rounds_run} rounds"


def make_iops(root: Path, rng: np.random.Generator, gain: float, stop: Optional[int]) -> dict[str, Any]:
    elements = [
        {
            "element": f"rnd-{bs_fio(bs)}-{m}-{100 - m}",
            "job": f"rw=randrw\nrwmixread={m}\nbs={bs_fio(bs)}\nnumjobs=4\niodepth=32\nruntime=60\ntime_based=1",
            "rw": "randrw",
            "read_pct": m,
            "bs": bs,
            "numjobs": 4,
            "iodepth": 32,
            "steady": iops_model(bs, m, gain),
            "fob": 0.8 * (1 - m / 100) + 0.02,
        }
        for m in MIXES
        for bs in IOPS_BS
    ]
    tracking = [
        ("RND 4KiB 100% W IOPS", "rnd-4k-0-100", "iops", "IOPS"),
        ("RND 64KiB 65:35 IOPS", "rnd-64k-65-35", "iops", "IOPS"),
        ("RND 1024KiB 100% R IOPS", "rnd-1024k-100-0", "iops", "IOPS"),
    ]
    w, steady, window = wdpc_test(root, "iops", elements, tracking, 25, stop, rng)
    table = []
    for bs in IOPS_BS:
        row: dict[str, Any] = {"bs_bytes": bs, "bs": bs_label(bs)}
        for m in MIXES:
            row[mix_label(m)] = round(window_avg(w, f"rnd-{bs_fio(bs)}-{m}-{100 - m}", "iops", window), 1)
        table.append(row)
    rounds_run = max(steady["variables"][0]["rounds"])
    status, message = status_of(steady, stop is not None, rounds_run)
    settings = {"tc_qd": "TC4/QD32", "mixes": [mix_label(m) for m in MIXES], "block_sizes": [bs_label(b) for b in IOPS_BS]}
    result = {
        "test": "iops",
        "status": status,
        "message": message,
        "rounds_run": rounds_run,
        "window": window,
        "settings": settings,
        "extra": {},
    }
    w.finish(result, steady, table)
    return result


def make_tp(root: Path, rng: np.random.Generator, gain: float, stop: Optional[int]) -> dict[str, Any]:
    elements = []
    for bs in (131072, 1048576):
        for m, bw in ((100, 6.9e9), (0, 4.1e9 * gain)):
            elements.append(
                {
                    "element": f"seq-{bs_fio(bs)}-{'r' if m else 'w'}",
                    "job": f"rw={'read' if m else 'write'}\nbs={bs_fio(bs)}\nnumjobs=1\niodepth=32\nruntime=60\ntime_based=1",
                    "rw": "read" if m else "write",
                    "read_pct": m,
                    "bs": bs,
                    "numjobs": 1,
                    "iodepth": 32,
                    "steady": bw / bs,
                    "fob": 0.25 if not m else 0.0,
                }
            )
    tracking = [
        ("SEQ 128KiB 100% W MB/s", "seq-128k-w", "write_bw_bytes_s", "B/s"),
        ("SEQ 1024KiB 100% W MB/s", "seq-1024k-w", "write_bw_bytes_s", "B/s"),
    ]
    w, steady, window = wdpc_test(root, "tp", elements, tracking, 25, stop, rng, drift=0.08)
    table = []
    for bs in (131072, 1048576):
        r = window_avg(w, f"seq-{bs_fio(bs)}-r", "read_bw_bytes_s", window)
        wr = window_avg(w, f"seq-{bs_fio(bs)}-w", "write_bw_bytes_s", window)
        table.append(
            {
                "bs_bytes": bs,
                "bs": bs_label(bs),
                "read_mb_s": round(r / 1e6, 1),
                "write_mb_s": round(wr / 1e6, 1),
                "read_mib_s": round(r / 2**20, 1),
                "write_mib_s": round(wr / 2**20, 1),
            }
        )
    rounds_run = max(steady["variables"][0]["rounds"])
    status, message = status_of(steady, stop is not None, rounds_run)
    result = {
        "test": "tp",
        "status": status,
        "message": message,
        "rounds_run": rounds_run,
        "window": window,
        "settings": {"tc_qd": "TC1/QD32", "wipc": "SEQ 128KiB 2x (SEQ 1024KiB 2x for the 1024KiB pass)"},
        "extra": {},
    }
    w.finish(result, steady, table)
    return result


def make_lat(root: Path, rng: np.random.Generator, gain: float, stop: Optional[int]) -> dict[str, Any]:
    elements = [
        {
            "element": f"rnd-{bs_fio(bs)}-{m}-{100 - m}",
            "job": f"rw=randrw\nrwmixread={m}\nbs={bs_fio(bs)}\nnumjobs=1\niodepth=1\nruntime=60\ntime_based=1",
            "rw": "randrw",
            "read_pct": m,
            "bs": bs,
            "numjobs": 1,
            "iodepth": 1,
            "steady": 1e6 / (70 + bs / 1000 + (100 - m) * 0.2 / gain),
            "fob": 0.1,
        }
        for bs in LAT_BS
        for m in LAT_MIXES
    ]
    tracking = [("RND 4KiB 100% W mean latency", "rnd-4k-0-100", "lat_mean_us", "us")]
    w, steady, window = wdpc_test(root, "lat", elements, tracking, 25, stop, rng)
    table = []
    for bs in LAT_BS:
        for m in LAT_MIXES:
            el = f"rnd-{bs_fio(bs)}-{m}-{100 - m}"
            row: dict[str, Any] = {"bs_bytes": bs, "bs": bs_label(bs), "mix": mix_label(m)}
            for prefix in ("", "read_", "write_"):
                for col in ("mean_us", "max_us", "p99_99_us"):
                    row[f"{prefix}{col}"] = round(window_avg(w, el, f"{prefix}lat_{col}", window), 2)
            table.append(row)
            ddirs = [d for d, share in (("read", m), ("write", 100 - m)) if share]
            w.hist(el, float(table[-1]["mean_us"]), ddirs)
    rounds_run = max(steady["variables"][0]["rounds"])
    status, message = status_of(steady, stop is not None, rounds_run)
    result = {
        "test": "lat",
        "status": status,
        "message": message,
        "rounds_run": rounds_run,
        "window": window,
        "settings": {"tc_qd": "TC1/QD1"},
        "extra": {},
    }
    w.finish(result, steady, table)
    return result


def make_wsat(root: Path, rng: np.random.Generator, gain: float, stop: Optional[int]) -> dict[str, Any]:
    w = Writer(root, "wsat", rng)
    el = rnd_4k_w_job(w, 60)
    table = []
    seg = 0
    t = 0.0
    while w.bytes_written < 4 * CAPACITY and (stop is None or seg < stop):
        seg += 1
        fills = w.bytes_written / CAPACITY
        iops = 350_000 * gain * (1 + 1.6 / (1 + math.exp((fills - 0.9) * 9))) * (1 + rng.normal(0, 0.03))
        row = rnd_4k_w_segment(w, seg, t, 60, iops)
        t += 60
        table.append(
            {
                "segment": seg,
                "t_s": t,
                "bytes_written_total": row["bytes_written_total"],
                "drive_fills": row["drive_fills"],
                "iops": row["iops"],
                "lat_mean_us": row["lat_mean_us"],
                "lat_max_us": row["lat_max_us"],
            }
        )
    w.hist(el, float(table[-1]["lat_mean_us"]), ["write"])
    stopped = stop is not None and w.bytes_written < 4 * CAPACITY
    result = {
        "test": "wsat",
        "status": "interrupted" if stopped else "complete",
        "message": f"interrupted after segment {seg}" if stopped else f"4.0 drive fills written in {seg} segments",
        "rounds_run": seg,
        "window": None,
        "settings": {"tc_qd": "TC4/QD32", "wipc": "none (WSAT starts FOB)", "stop": "4x capacity written or 24 h"},
        "extra": {"steady_iops": round(float(np.mean([r["iops"] for r in table[-30:]])), 1)},
    }
    w.finish(result, None, table)
    return result


def make_hir(root: Path, rng: np.random.Generator, gain: float, stop: Optional[int], iterations: int = 36) -> dict[str, Any]:
    w = Writer(root, "hir", rng)
    el = rnd_4k_w_job(w, 60)
    rnd_4k_w_job(w, 5)
    base = 350_000 * gain
    t = 0.0
    seg = 0
    pre = []
    for rnd in range(1, 8):
        seg += 1
        row = rnd_4k_w_segment(w, seg, t, 60, settle(base, rnd + 3, rng), round=rnd, phase="pre")
        t += 60
        pre.append(float(row["iops"]))
    baseline = float(np.mean(pre[-5:]))
    # As the harness writes it: the pre-HIR rounds judged from the first after the drive
    # fills (--hir-pre-fills), here round 3; the window is steady.json's, not result.json's.
    judged = list(range(3, 8))
    var = {"name": "RND 4KiB 100% W IOPS (pre-HIR)", "element": el, "column": "iops", "unit": "IOPS"}
    ev = steady_eval(judged, pre[2:])
    variables = [{**var, "rounds": judged, "values": pre[2:], **ev}]
    steady = steady_doc(variables, ev["steady"], 7, ev["window"], 25) | {"pass": "hir-pre", "first_round": 3}
    table = []
    done = True
    for wait in (5, 10, 15, 25, 50):
        if stop is not None and wait > stop:
            done = False
            break
        for phase, n in (("A", iterations), ("C", iterations)):
            for it in range(1, n + 1):
                seg += 1
                boost = min(1.0, wait / 40) * 1.4 * math.exp(-it / (iterations * 3)) if phase == "A" else 0.0
                iops = base * (1 + boost) * (1 + rng.normal(0, 0.03))
                row = rnd_4k_w_segment(w, seg, t, 5, iops, wait_s=wait, phase=phase)
                table.append({"wait_s": wait, "phase": phase, "iteration": it, "t_s": t, "iops": row["iops"]})
                t += 5 + (wait if phase == "A" else 0)
    result = {
        "test": "hir",
        "status": "complete" if done else "interrupted",
        "message": "5 wait states of 5/10/15/25/50 s" if done else "interrupted during the wait states",
        "rounds_run": len(pre),  # as the harness writes it: HIR's preconditioning rounds
        "window": None,
        "settings": {"tc_qd": "TC4/QD32", "wait_states_s": [5, 10, 15, 25, 50], "iterations": iterations},
        "extra": {
            "baseline_iops": round(baseline, 1),
            "notes": ["A scaled twin: the wait states are not scaled, so idle GC recovers a larger share of a small drive's free space."],
        },
    }
    w.finish(result, steady, table)
    return result


def make_curve(root: Path, rng: np.random.Generator, gain: float, stop: Optional[int]) -> dict[str, Any]:
    w = Writer(root, "curve", rng)
    table = []
    t = 0.0
    peak = 640_000 * gain
    # As the harness writes it: RND 4KiB 70/30 preconditioning rounds at TC16/QD32 ("pre"
    # rows with a round) judged in steady.json, then the points ("curve" rows with a segment).
    pre_el = "rnd-4k-70_30-j16-qd32-pre"
    w.job(pre_el, "rw=randrw\nrwmixread=70\nbs=4k\nnumjobs=16\niodepth=32\nruntime=60\ntime_based=1")
    pre = []
    for rnd in range(1, 7):
        row = w.row(
            round=rnd,
            element=pre_el,
            rw="randrw",
            read_pct=70,
            bs_bytes=4096,
            numjobs=16,
            iodepth=32,
            runtime_s=60,
            t_start_s=t,
            t_end_s=t + 60,
            iops=settle(peak * 0.97, rnd + 2, rng),
            phase="pre",
        )
        t += 60
        pre.append(float(row["iops"]))
        w.fio_json(f"r{rnd:02d}-{pre_el}", row)
    var = {"name": "RND 4KiB 70/30 IOPS (preconditioning)", "element": pre_el, "column": "iops", "unit": "IOPS"}
    ev = steady_eval(list(range(2, 7)), pre[1:])
    steady = steady_doc([{**var, "rounds": list(range(1, 7)), "values": pre, **ev}], ev["steady"], 6, ev["window"], 25)
    seg = 0
    for nj in (1, 2, 4, 8, 16):
        for qd in (1, 2, 4, 8, 16, 32):
            seg += 1
            el = f"rnd-4k-70-30-j{nj}-qd{qd}"
            w.job(el, f"rw=randrw\nrwmixread=70\nbs=4k\nnumjobs={nj}\niodepth={qd}\nruntime=60\ntime_based=1")
            oio = nj * qd
            iops = peak * oio / (oio + 12) * (1 + rng.normal(0, 0.01))
            row = w.row(
                segment=seg,
                element=el,
                rw="randrw",
                read_pct=70,
                bs_bytes=4096,
                numjobs=nj,
                iodepth=qd,
                runtime_s=60,
                t_start_s=t,
                t_end_s=t + 60,
                iops=iops,
                phase="curve",
            )
            t += 60
            w.fio_json(f"s{seg:04d}-{el}", row)
            table.append(
                {
                    "numjobs": nj,
                    "iodepth": qd,
                    "iops": row["iops"],
                    "lat_mean_us": row["lat_mean_us"],
                    "lat_p99_us": row["lat_p99_us"],
                    "lat_p99_9_us": row["lat_p99_9_us"],
                }
            )
    result = {
        "test": "curve",
        "status": "complete",
        "message": "30 points: 1-16 jobs x QD 1-32",
        "rounds_run": len(pre),  # as the harness writes it: the preconditioning rounds
        "window": None,
        "settings": {"tc_qd": "TC1-16 x QD1-32", "mix": "RND 4KiB 70/30"},
        "extra": {"pre_steady": ev["steady"]},
    }
    w.finish(result, steady, table)
    return result


MAKERS = {"iops": make_iops, "tp": make_tp, "lat": make_lat, "wsat": make_wsat, "hir": make_hir, "curve": make_curve}


def make_report(
    folder: Path,
    tests: tuple[str, ...] = ("iops", "tp", "lat", "wsat", "hir", "curve"),
    interrupt: Optional[tuple[str, int]] = None,
    gain: float = 1.0,
    seed: int = 1,
    model: str = "KCM6XRUL3T84",
) -> Path:
    """Write a report folder per the contract; returns it. ``interrupt=(test, n)`` stops that
    test after round/segment n (HIR: after wait state n s) and leaves the later tests unstarted."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {
        "format": "ssdtwin-pts",
        "version": 1,
        "complete": interrupt is None,
        "interrupted": interrupt is not None,
        "started": "2026-11-23T20:00:00+00:00",
        "finished": "2026-11-23T20:41:07+00:00",
        "wall_s": 2467.2,
        "device": {
            "kind": "twin",
            "uri": "./cm6",
            "vendor": "KIOXIA",
            "model": model,
            "serial": "SSDTWIN-0001",
            "firmware": "ssdtwin 0.1.0, preset kioxia-cm6-r-3.84t",
            "capacity_bytes": CAPACITY,
            "lba_bytes": 4096,
            "nand": "BiCS4 96-layer TLC",
            "interface": "PCIe 4.0 x4, NVMe 1.4",
            "preset": "kioxia-cm6-r-3.84t",
            "scale": "1/1",
            "simulated": True,
            "extra": {},
        },
        "platform": {
            "host": "ci-runner",
            "os": "Linux 6.1.0 x86_64",
            "cpu": "2 cores",
            "software": "ssdtwin 0.1.0",
            "fio": "ssdtwin fio (simulated time)",
        },
        "settings": {
            "round_s": 60,
            "min_rounds": 5,
            "max_rounds": 25,
            "purge": "twin: format ses=1 (FTL reset, wear kept)",
            "active_range_pct": 100,
            "write_cache": "disabled (PLP)",
            "data_pattern": "random (refill_buffers)",
            "wipc": "SEQ 128KiB 2x capacity",
            "tc_qd": {
                "iops": "TC4/QD32",
                "tp": "TC1/QD32",
                "lat": "TC1/QD1",
                "wsat": "TC4/QD32",
                "hir": "TC4/QD32",
                "curve": "TC1-16 x QD1-32",
            },
            "seed": seed,
        },
        "tests": {},
    }
    stopped = False
    for test in tests:
        entry: dict[str, Any] = {"status": "not run", "dir": test, "title": TITLES[test], "wall_s": 0.0, "sim_s": 0.0}
        manifest["tests"][test] = entry
        if stopped:
            continue
        stop = interrupt[1] if interrupt and interrupt[0] == test else None
        result = MAKERS[test](folder, rng, gain, stop)
        entry.update(status=result["status"], wall_s=round(float(rng.uniform(20, 400)), 1), sim_s=round(float(rng.uniform(600, 20000)), 1))
        stopped = stop is not None
    (folder / "pts.json").write_text(json.dumps(manifest, indent=1))
    return folder


if __name__ == "__main__":
    out = Path(sys.argv[1])
    make_report(out)
    make_report(out.with_name(out.name + "-interrupted"), tests=("iops", "lat", "wsat"), interrupt=("lat", 3))
    make_report(out.with_name(out.name + "-b"), gain=0.55, seed=2, model="KCD6XLUL3T84")
