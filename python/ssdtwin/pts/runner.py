"""The PTS flow: purge, WIPC, rounds until steady state, and the report folder (docs/pts.md).

``run(target, tests=[...], report=...)`` runs the tests one after the other on one target
and writes the folder the report renders (format "ssdtwin-pts" version 1: pts.json, and
per test jobs/, fio/, rounds.csv, steady.json, table.csv, hist-*.csv, result.json). The
manifest and the CSV files are rewritten after every round, so a run stopped by Ctrl-C
(or a crash) keeps every round done so far. Results come back as pandas frames.
"""

from __future__ import annotations

import contextlib
import csv
import importlib
import json
import os
import platform
import shutil
import socket
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional, Union

from .. import _core
from ..fio.hist import PLAT_NR, index_bounds, percentiles, value_to_index
from . import steady as ss
from . import tests as T
from .target import PtsError, PtsTarget

FORMAT = "ssdtwin-pts"
VERSION = 1

# rounds.csv, in this order (the contract with the report: docs/pts.md, Report folder).
COLUMNS = [
    "round",
    "segment",
    "element",
    "rw",
    "read_pct",
    "bs_bytes",
    "numjobs",
    "iodepth",
    "runtime_s",
    "t_start_s",
    "t_end_s",
    "read_iops",
    "write_iops",
    "iops",
    "read_bw_bytes_s",
    "write_bw_bytes_s",
    "read_lat_mean_us",
    "read_lat_max_us",
    "read_lat_p99_us",
    "read_lat_p99_9_us",
    "read_lat_p99_99_us",
    "write_lat_mean_us",
    "write_lat_max_us",
    "write_lat_p99_us",
    "write_lat_p99_9_us",
    "write_lat_p99_99_us",
    "lat_mean_us",
    "lat_max_us",
    "lat_p99_us",
    "lat_p99_9_us",
    "lat_p99_99_us",
    "bytes_written_total",
    "drive_fills",
    "wait_s",
    "phase",
    "timed_s",
    "timed_share",
    "iops_ci_rel",
    "lat_mean_ci_rel",
]
PCTS = (99.0, 99.9, 99.99)
PCT_COLS = ("p99", "p99_9", "p99_99")


# ------------------------------------------------------------------------------ settings


@dataclass
class Settings:
    """Everything that shapes a PTS run (pts.json "settings"; CLI options in docs/pts.md)."""

    round_s: float = 60.0
    min_rounds: int = 5
    max_rounds: int = 25
    iops_bs: tuple[int, ...] = T.IOPS_BS
    iops_mixes: tuple[int, ...] = T.MIXES
    tp_bs: tuple[int, ...] = T.TP_BS
    lat_bs: tuple[int, ...] = T.LAT_BS
    lat_mixes: tuple[int, ...] = T.LAT_MIXES
    tc_qd: dict[str, tuple[int, int]] = field(default_factory=lambda: dict(T.TC_QD))
    wsat_fills: float = 4.0
    wsat_max_time_s: float = 24 * 3600.0
    wsat_segment_s: Optional[float] = None  # default: round_s, divided by N on a 1/N twin (at least 1 s)
    wsat_stop_steady: bool = False
    hir_reps: int = T.HIR_REPS
    hir_waits_s: tuple[float, ...] = T.HIR_WAITS_S
    hir_burst_s: float = T.HIR_BURST_S
    hir_pre_fills: float = 2.0  # HIR's steady state is judged only after this many capacities written
    curve_jobs: tuple[int, ...] = T.CURVE_JOBS
    curve_qd: tuple[int, ...] = T.CURVE_QD
    xsr_hours: tuple[float, ...] = T.XSR_HOURS  # full-drive durations of the three access groups
    xsr_segment_s: Optional[float] = None  # default: round_s, divided by N on a 1/N twin (at least 1 s)
    di_tc: tuple[int, ...] = T.DI_TC
    di_qd: tuple[int, ...] = T.DI_QD
    di_pc_intervals: int = T.DI_PC_INTERVALS
    di_prewrite_s: float = T.DI_PREWRITE_S
    di_rth_prewrite_s: float = T.DI_RTH_PREWRITE_S
    di_rth_s: float = T.DI_RTH_S
    di_art_limit_us: float = T.DI_ART_LIMIT_US
    dirth_bs: int = T.DIRTH_BS
    dirth_mix: int = T.DIRTH_READ_PCT
    purge: str = "auto"
    seed: int = 0
    converge: bool = True  # twin: time each round until its figures converge, the rest in fast-forward

    def validate(self) -> None:
        if not (self.round_s >= 1.0):
            raise PtsError(f"--round {self.round_s:g}s: a round must be at least 1 s (PTS rounds are 1 minute)")
        if self.round_s > 86400:
            raise PtsError(f"--round {self.round_s:g}s: at most 1 day")
        if not (ss.WINDOW_ROUNDS <= self.min_rounds <= self.max_rounds <= 1000):
            raise PtsError(
                f"--min-rounds {self.min_rounds} / --max-rounds {self.max_rounds}: need 5 <= min <= max <= 1000 (the window is 5 rounds)"
            )
        if not (0 < self.wsat_fills <= 1000):
            raise PtsError(f"--wsat-fills {self.wsat_fills:g}: a number of drive fills above 0, at most 1000")
        if not (1 <= self.wsat_max_time_s <= 200 * 86400):
            raise PtsError(f"--wsat-max-time {self.wsat_max_time_s:g}s: from 1 s to 200 days")
        if self.wsat_segment_s is not None and not (1.0 <= self.wsat_segment_s <= 86400):
            raise PtsError(f"--wsat-segment {self.wsat_segment_s:g}s: from 1 s to 1 day")
        if not (0 <= self.hir_pre_fills <= 100):
            raise PtsError(f"--hir-pre-fills {self.hir_pre_fills:g}: drive fills from 0 to 100")
        if not (1 <= self.hir_reps <= 100000):
            raise PtsError(f"--hir-reps {self.hir_reps}: from 1 to 100000 (the spec's is 360)")
        if not self.hir_waits_s or any(not 0 < w <= 86400 for w in self.hir_waits_s):
            raise PtsError("--hir-waits: wait states above 0 s, at most 1 day (e.g. 5s,10s,15s,25s,50s)")
        if not 1.0 <= self.hir_burst_s <= 3600:
            raise PtsError(f"HIR burst {self.hir_burst_s:g} s: from 1 s to 1 hour (the spec's is 5 s)")
        self._validate_xsr_di()
        for label, vals in (("--curve-jobs", self.curve_jobs), ("--curve-qd", self.curve_qd)):
            if not vals or any(not 1 <= v <= 1024 for v in vals):
                raise PtsError(f"{label}: values from 1 to 1024")
        for name, (tc, qd) in self.tc_qd.items():
            if name not in T.TEST_IDS:
                raise PtsError(f"--tc-qd {name}: unknown test (choose from {', '.join(T.TEST_IDS)})")
            if not (1 <= tc <= 256 and 1 <= qd <= 65536):
                raise PtsError(f"--tc-qd {name}={tc}x{qd}: threads 1..256, queue depth 1..65536")
        for label, vals in (("--iops-bs", self.iops_bs), ("--tp-bs", self.tp_bs), ("--lat-bs", self.lat_bs)):
            if not vals or any(v < 512 or v % 512 for v in vals):
                raise PtsError(f"{label}: block sizes are multiples of 512 bytes (e.g. 4k,128k)")
        for label, vals in (("--iops-mixes", self.iops_mixes), ("--lat-mixes", self.lat_mixes)):
            if not vals or any(not 0 <= v <= 100 for v in vals):
                raise PtsError(f"{label}: read percentages from 0 to 100 (e.g. 100,65,0)")

    def _validate_xsr_di(self) -> None:
        if len(self.xsr_hours) != 3 or any(not 0 < h <= 24 * 30 for h in self.xsr_hours):
            raise PtsError("--xsr-hours: three access-group durations in hours, above 0, at most 720 (the spec's are 8,6,8)")
        if self.xsr_segment_s is not None and not (1.0 <= self.xsr_segment_s <= 86400):
            raise PtsError(f"--xsr-segment {self.xsr_segment_s:g}s: from 1 s to 1 day")
        for label, vals in (("--di-tc", self.di_tc), ("--di-qd", self.di_qd)):
            if not vals or any(not 1 <= v <= 1024 for v in vals):
                raise PtsError(f"{label}: values from 1 to 1024 (the spec's are 32,16,8,6,4,2,1)")
        if not 1 <= self.di_pc_intervals <= 1000:
            raise PtsError(f"--di-pc-intervals {self.di_pc_intervals}: from 1 to 1000 (the spec's is 30)")
        for label, v in (
            ("--di-prewrite", self.di_prewrite_s),
            ("--di-rth-prewrite", self.di_rth_prewrite_s),
            ("--di-rth", self.di_rth_s),
        ):
            if not 1.0 <= v <= 86400:
                raise PtsError(f"{label} {v:g}s: from 1 s to 1 day")
        if not 1.0 <= self.di_art_limit_us <= 1e8:
            raise PtsError(f"--di-art-limit {self.di_art_limit_us:g}us: from 1 µs to 100 s (the spec's is 5 ms)")
        if self.dirth_bs < 512 or self.dirth_bs % 512:
            raise PtsError(f"--dirth-bs {self.dirth_bs}: a block size, a multiple of 512 bytes (e.g. 4k)")
        if not 0 <= self.dirth_mix <= 100:
            raise PtsError(f"--dirth-mix {self.dirth_mix}: a read percentage from 0 to 100")

    def scaled_s(self, seconds: float, scale: int = 1) -> float:
        """A capacity-relative duration on a 1/N twin: ``seconds`` / N, at least 1 s (a full
        drive and real targets: ``seconds``). Preconditioning and pre-writes bring a drive to
        a state measured in drive fills, which a scaled drive reaches N times sooner."""
        return seconds if scale <= 1 else max(1.0, round(seconds / scale, 3))

    def xsr_segment(self, scale: int = 1) -> float:
        """XSR's segment: --xsr-segment, else the round divided by N on a 1/N twin (as WSAT)."""
        if self.xsr_segment_s is not None:
            return self.xsr_segment_s
        return self.scaled_s(self.round_s, scale)

    def segment_s(self, scale: int = 1) -> float:
        """WSAT's segment: --wsat-segment, else the round divided by the twin's scale N (at
        least 1 s), so a scaled drive gets as many segments per drive fill as a full one."""
        if self.wsat_segment_s is not None:
            return self.wsat_segment_s
        return max(1.0, round(self.round_s / max(1, scale), 3))

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["tc_qd"] = {k: {"tc": v[0], "qd": v[1], "oio": v[0] * v[1]} for k, v in self.tc_qd.items()}
        return d


# ------------------------------------------------------------------------------ progress


class Events:
    """What the runner tells a progress display (the CLI's rich display implements it)."""

    def test_started(self, test: str, title: str, plan: str) -> None:
        """A test begins; ``plan`` says what it will do (e.g. "56 elements x 5-25 rounds")."""

    def step(self, test: str, what: str, frac: Optional[float], status: str) -> None:
        """Before each fio run: ``what`` ("round 3/25: RND 4KiB 0/100"), ``frac`` the share of
        the test done at most (rounds count to --max-rounds, so an ETA from it is an upper
        bound; None: unknown), ``status`` the steady-state state so far."""

    def test_done(self, test: str, status: str, message: str) -> None:
        """A test ended (steady, not steady, complete, failed or interrupted)."""


# ------------------------------------------------------------------------------ fio output


def _bins(d: dict[str, Any]) -> dict[int, int]:
    """json+ ``clat_ns.bins`` (value → count) as bucket index → count."""
    out: dict[int, int] = {}
    for k, c in (d.get("clat_ns", {}).get("bins") or {}).items():
        if c:
            i = value_to_index(int(k))
            out[i] = out.get(i, 0) + int(c)
    return out


def _pcts(hist: dict[int, int]) -> list[Optional[float]]:
    n = sum(hist.values())
    if n == 0:
        return [None] * len(PCTS)
    dense = [0] * PLAT_NR
    for i, c in hist.items():
        dense[i] += c
    return [v / 1000.0 for _, v in percentiles(dense, n, PCTS)]


def _merge(*hists: dict[int, int]) -> dict[int, int]:
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
            for col, v in zip(PCT_COLS, _pcts(h)):
                row[f"{ddir}_lat_{col}_us"] = v
            n_total += n
            mean_sum += mean * n
            max_all = mx if max_all is None else max(max_all, mx)
    row["iops"] = row["read_iops"] + row["write_iops"]
    row.update(timing_columns(j))
    if n_total:
        row["lat_mean_us"] = mean_sum / n_total
        row["lat_max_us"] = max_all
        for col, v in zip(PCT_COLS, _pcts(_merge(hists["read"], hists["write"]))):
            row[f"lat_{col}_us"] = v
    return row, hists


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


def fio_runtime_s(j: dict[str, Any]) -> float:
    """How long the element ran: the longer direction's ``runtime`` (ms)."""
    job = _job(j)
    ms = max(float((job.get(d) or {}).get("runtime", 0) or 0) for d in ("read", "write", "trim"))
    if ms == 0:
        ms = float(job.get("job_runtime", 0) or 0)
    return ms / 1000.0


def fio_written(j: dict[str, Any]) -> int:
    return int((_job(j).get("write") or {}).get("io_bytes", 0) or 0)


# ------------------------------------------------------------------------------ results


@dataclass
class PtsResult:
    """What ``run`` returns: per test the rounds (``frames``), the tabular result
    (``tables``), the steady-state evaluation (``steady``) and the status (``status``)."""

    folder: Path
    manifest: dict[str, Any]
    status: dict[str, str]
    frames: dict[str, Any]
    tables: dict[str, Any]
    steady: dict[str, Optional[dict[str, Any]]]
    results: dict[str, dict[str, Any]]

    @property
    def interrupted(self) -> bool:
        return bool(self.manifest.get("interrupted"))

    def to_json(self) -> dict[str, Any]:
        """The CLI's ``-o json``: the manifest, and per test its result and table."""
        return {
            "folder": str(self.folder),
            "manifest": self.manifest,
            "tests": {
                t: {"status": self.status[t], "result": self.results.get(t), "table": _records(self.tables.get(t))} for t in self.status
            },
        }


def _records(df: Any) -> Optional[list[dict[str, Any]]]:
    if df is None:
        return None
    recs: list[dict[str, Any]] = json.loads(df.to_json(orient="records"))
    return recs


def load(folder: Union[str, Path]) -> PtsResult:
    """Read a report folder back (frames from rounds.csv and table.csv, steady.json, result.json)."""
    import pandas as pd

    folder = Path(folder)
    man = read_manifest(folder)
    if man is None:
        raise PtsError(f"{folder}: not an ssdtwin PTS report (no pts.json of format {FORMAT})")
    frames, tables, steadies, results, status = {}, {}, {}, {}, {}
    for test, meta in (man.get("tests") or {}).items():
        d = folder / meta.get("dir", test)
        status[test] = meta.get("status", "")
        frames[test] = pd.read_csv(d / "rounds.csv") if (d / "rounds.csv").is_file() else pd.DataFrame(columns=COLUMNS)
        tables[test] = pd.read_csv(d / "table.csv") if (d / "table.csv").is_file() else None
        steadies[test] = json.loads((d / "steady.json").read_text()) if (d / "steady.json").is_file() else None
        results[test] = json.loads((d / "result.json").read_text()) if (d / "result.json").is_file() else {}
    return PtsResult(folder, man, status, frames, tables, steadies, results)


def read_manifest(folder: Path) -> Optional[dict[str, Any]]:
    """pts.json of a previous report, or None when ``folder`` holds none."""
    try:
        man = json.loads((folder / "pts.json").read_text())
    except (OSError, ValueError):
        return None
    return man if isinstance(man, dict) and man.get("format") == FORMAT else None


def prepare_folder(folder: Path, force: bool) -> None:
    """Check (before anything touches the target) that ``folder`` may hold the report."""
    if folder.exists() and not folder.is_dir():
        raise PtsError(f"--report {folder}: exists and is not a directory")
    if folder.is_dir() and any(folder.iterdir()):
        if read_manifest(folder) is None:
            raise PtsError(f"--report {folder}: exists and is not a previous ssdtwin PTS report (no pts.json); choose a new folder")
        if not force:
            raise PtsError(f"--report {folder}: holds a previous PTS report; pass --force to replace it")


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _csv_text(rows: Iterable[dict[str, Any]], columns: Sequence[str]) -> str:
    import io

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r[k]) for k in columns})
    return buf.getvalue()


# ------------------------------------------------------------------------------ one test


class TestRun:
    """The state of one test while it runs: its folder, rows, clock and bytes written."""

    def __init__(self, runner: Runner, test: str) -> None:
        self.runner = runner
        self.test = test
        self.dir = runner.folder / test
        for sub in ("jobs", "fio"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        self.rows: list[dict[str, Any]] = []
        self.hists: dict[tuple[int, str], dict[str, dict[int, int]]] = {}
        self.clock_s = 0.0  # since the test's start: simulated on a twin, fio's runtimes on a real target
        self.written = 0
        self.wall0 = time.perf_counter()
        self.status = "running"
        self.message = ""
        self.window: Optional[list[int]] = None
        self.steady_doc: Optional[dict[str, Any]] = None
        self.extra: dict[str, Any] = {}
        self.rounds_run = 0
        self.purge_method = ""
        self.ss_status = ""
        self.last_hists: dict[str, dict[int, int]] = {}  # the read/write clat histograms of the last run

    # -- writing -----------------------------------------------------------------------
    def write_job(self, el: T.Element) -> Path:
        path = self.dir / "jobs" / f"{el.name}.fio"
        text = el.job_text(self.runner.target.target_lines(), T.TITLES[self.test])
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
        return path

    def save_rows(self) -> None:
        _write_atomic(self.dir / "rounds.csv", _csv_text(self.rows, COLUMNS))

    def save_steady(self, doc: dict[str, Any]) -> None:
        self.steady_doc = doc
        _write_atomic(self.dir / "steady.json", json.dumps(doc, indent=1) + "\n")

    def result_doc(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "title": T.TITLES[self.test],
            "status": self.status,
            "message": self.message,
            "rounds_run": self.rounds_run,
            "window": self.window,
            "purge": self.purge_method,
            "settings": {**self.runner.test_settings(self.test), **({"purge": self.purge_method} if self.purge_method else {})},
            "wall_s": round(time.perf_counter() - self.wall0, 3),
            "sim_s": round(self.clock_s, 6),
            "bytes_written_total": self.written,
            "extra": self.extra,
        }

    def save_result(self) -> None:
        _write_atomic(self.dir / "result.json", json.dumps(self.result_doc(), indent=1) + "\n")

    # -- running -----------------------------------------------------------------------
    def purge(self) -> None:
        self.runner.events.step(self.test, "purge", None, "")
        self.purge_method = self.runner.purge()
        self.written = 0

    def run(
        self,
        el: T.Element,
        *,
        round_no: Optional[int] = None,
        segment: Optional[int] = None,
        phase: str = "",
        wait_s: Optional[float] = None,
        json_name: Optional[str] = None,
        record: bool = True,
        what: str = "",
        frac: Optional[float] = None,
    ) -> dict[str, Any]:
        """Run one element: its job file, its fio JSON, and (``record``) its rounds.csv row."""
        job = self.write_job(el)
        if json_name is None:
            json_name = f"r{round_no:02d}-{el.name}" if round_no is not None else f"s{segment:04d}-{el.name}"
        self.runner.events.step(self.test, what or el.label, frac, self.ss_status)
        j = self.runner.target.run_fio(job, self.dir / "fio" / f"{json_name}.json")
        dur = fio_runtime_s(j)
        t0 = self.clock_s
        self.clock_s += dur
        self.written += fio_written(j)
        vals, hists = fio_row(j)
        self.last_hists = hists
        cap = self.runner.target.info.capacity_bytes or 1
        row: dict[str, Any] = {
            "round": round_no,
            "segment": segment,
            "element": el.name,
            "rw": el.rw,
            "read_pct": el.read_pct,
            "bs_bytes": el.bs_bytes,
            "numjobs": el.numjobs,
            "iodepth": el.iodepth,
            "runtime_s": dur,
            "t_start_s": round(t0, 6),
            "t_end_s": round(self.clock_s, 6),
            **vals,
            "bytes_written_total": self.written,
            "drive_fills": self.written / cap,
            "wait_s": wait_s,
            "phase": phase,
        }
        if record:
            self.rows.append(row)
            if self.test == "lat" and round_no is not None:
                self.hists[(round_no, el.name)] = hists
        return row

    def idle(self, seconds: float) -> None:
        self.runner.target.idle(seconds)
        self.clock_s += seconds

    def wipc(self, el: T.Element) -> None:
        """Workload-independent preconditioning (not a round: its summary goes to result.json)."""
        row = self.run(el, json_name=el.name, record=False, what=el.label)
        self.extra.setdefault("wipc", []).append(
            {
                "element": el.name,
                "bytes": row["bytes_written_total"],
                "runtime_s": row["runtime_s"],
                "write_bw_bytes_s": row["write_bw_bytes_s"],
            }
        )

    def rounds(
        self, p: T.Pass, eval_prefix: Sequence[dict[str, Any]] = (), min_fills: float = 0.0, phase_of: Optional[dict[str, str]] = None
    ) -> dict[str, Any]:
        """WDPC: rounds of ``p.elements`` until every tracking variable is steady (or max rounds).
        With ``min_fills``, rounds first run until that many capacities are written since the
        purge (saturation rounds: recorded, but neither judged nor counted against
        --max-rounds). Returns this pass's steady-state evaluation."""
        st = self.runner.settings
        state: dict[str, Any] = {}
        n = len(p.elements)
        cap = self.runner.target.info.capacity_bytes
        first: Optional[int] = None  # the first round judged
        self.ss_status = f"steady state: needs {st.min_rounds} rounds"
        r = 0
        while first is None or r - first + 1 < st.max_rounds:
            r += 1
            saturating = first is None and min_fills > 0
            for i, el in enumerate(p.elements, 1):
                fills = self.written / cap if cap else 0.0
                what = f"{p.name} round {r}" + (f", {fills:.2f}/{min_fills:g} fills" if saturating else f"/{st.max_rounds}")
                done = 0.0 if first is None else (r - first) / st.max_rounds
                self.run(
                    el,
                    round_no=r,
                    phase=(phase_of or {}).get(el.name, "pre" if self.test in ("hir", "curve") else ""),
                    what=f"{what}, {i}/{n} {el.label}",
                    frac=min(1.0, done + (i - 1) / (st.max_rounds * n)) if first is not None else None,
                )
            self.rounds_run = max(self.rounds_run, r)
            self.save_rows()
            if first is None:
                if cap and self.written < min_fills * cap:
                    if not any(x["round"] == r and x["write_iops"] for x in self.rows):
                        raise PtsError(f"{p.name}: round {r} wrote nothing; cannot reach {min_fills:g} drive fills")
                    self.ss_status = f"saturating: {self.written / cap:.2f}/{min_fills:g} drive fills"
                    self.runner.save_manifest()
                    continue
                first = r
            series = []
            for v in p.tracking:
                rows = [x for x in self.rows if x["element"] == v.element and x["round"] and x["round"] >= first]
                series.append([(int(x["round"]), float(x[v.column] or 0.0)) for x in rows])
            variables = [ss.Variable(v.name, v.element, v.column, v.unit) for v in p.tracking]
            state = ss.evaluate(variables, series, st.min_rounds, st.max_rounds)
            state["pass"] = p.name
            state["first_round"] = first
            self.save_steady(self._combine([*eval_prefix, state]))
            self.ss_status = _ss_text(state, r - first + 1, st.min_rounds)
            self.runner.save_manifest()
            if r - first + 1 >= st.min_rounds and state["steady"]:
                break
        return state

    def _combine(self, passes: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """steady.json of a test with one or more passes (Throughput: one per block size)."""
        if len(passes) == 1:
            return dict(passes[0])
        wins = [p["window"] for p in passes if p.get("window")]
        return {
            "rule": ss.RULE,
            "min_rounds": passes[0]["min_rounds"],
            "max_rounds": passes[0]["max_rounds"],
            "steady": all(p["steady"] for p in passes),
            "steady_round": max((p["steady_round"] or 0) for p in passes) if all(p["steady"] for p in passes) else None,
            "window": [min(w[0] for w in wins), max(w[1] for w in wins)] if wins else None,
            "variables": [v for p in passes for v in p["variables"]],
            "passes": [{k: p[k] for k in ("pass", "steady", "steady_round", "window")} for p in passes],
        }


# ------------------------------------------------------------------------------ the runner


class Runner:
    def __init__(self, target: PtsTarget, folder: Path, settings: Settings, events: Optional[Events] = None) -> None:
        self.target = target
        self.folder = folder
        self.settings = settings
        self.events = events or Events()
        self.tests: dict[str, TestRun] = {}
        self.manifest: dict[str, Any] = {}
        self.wall0 = time.perf_counter()
        scale = target.info.scale if target.info.simulated else ""
        self.scale = int(scale[2:]) if scale.startswith("1/") and scale[2:].isdigit() else 1

    # -- manifest -------------------------------------------------------------------------
    def start_manifest(self, tests: Sequence[str]) -> None:
        info = self.target.info
        st = self.settings
        fio = info.extra.get("fio") if not info.simulated else "ssdtwin fio (simulated time)"
        self.manifest = {
            "format": FORMAT,
            "version": VERSION,
            "complete": False,
            "interrupted": False,
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "finished": None,
            "wall_s": 0.0,
            "device": asdict(info),
            "platform": {
                "host": socket.gethostname(),
                "os": f"{platform.system()} {platform.release()}",
                "cpu": platform.processor() or platform.machine(),
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "software": f"ssdtwin {_core.__version__}",
                "fio": fio or "fio",
            },
            "settings": {
                "round_s": st.round_s,
                "min_rounds": st.min_rounds,
                "max_rounds": st.max_rounds,
                "purge": st.purge,
                "active_range_pct": 100,
                "write_cache": "disabled (PLP)" if info.simulated else "as the device reports (Enterprise: WCD)",
                "data_pattern": "random (refill_buffers)",
                "wipc": "SEQ 128KiB 2x capacity (SEQ 1024KiB for the 1024KiB Throughput pass)",
                "power_state": info.extra.get("power_state_desc", ""),
                "tc_qd": st.to_json()["tc_qd"],
                "seed": st.seed,
                "all": st.to_json(),
            },
            "tests": {t: {"status": "pending", "dir": t, "title": T.TITLES[t], "wall_s": 0.0, "sim_s": 0.0} for t in tests},
        }
        self.save_manifest()

    def save_manifest(self) -> None:
        self.manifest["wall_s"] = round(time.perf_counter() - self.wall0, 3)
        for t, tr in self.tests.items():
            m = self.manifest["tests"][t]
            m.update(status=tr.status, wall_s=round(time.perf_counter() - tr.wall0, 3) if tr.status == "running" else m["wall_s"])
            m["sim_s"] = round(tr.clock_s, 6)
        _write_atomic(self.folder / "pts.json", json.dumps(self.manifest, indent=1) + "\n")

    def test_settings(self, test: str) -> dict[str, Any]:
        st = self.settings
        tc, qd = st.tc_qd[test]
        base: dict[str, Any] = {"tc": tc, "qd": qd, "round_s": st.round_s, "min_rounds": st.min_rounds, "max_rounds": st.max_rounds}
        base["purge"] = st.purge
        if test == "iops":
            base.update(bs_bytes=list(st.iops_bs), mixes=[T.mix_label(m) for m in st.iops_mixes], wipc="SEQ 128KiB 2x")
        elif test == "tp":
            base.update(bs_bytes=list(st.tp_bs), wipc="SEQ at the pass's block size, 2x")
        elif test == "lat":
            base.update(bs_bytes=list(st.lat_bs), mixes=[T.mix_label(m) for m in st.lat_mixes], wipc="SEQ 128KiB 2x")
        elif test == "wsat":
            base.update(
                segment_s=st.segment_s(self.scale),
                stop_fills=st.wsat_fills,
                stop_time_s=st.wsat_max_time_s,
                stop_steady=st.wsat_stop_steady,
                wipc="none (starts FOB)",
            )
        elif test == "hir":
            base.update(
                reps=st.hir_reps,
                waits_s=list(st.hir_waits_s),
                burst_s=st.hir_burst_s,
                pre_fills=st.hir_pre_fills,
                wipc=f"none (RND 4KiB W: {st.hir_pre_fills:g} drive fills, then to steady state)",
            )
        elif test == "curve":
            base.update(jobs=list(st.curve_jobs), qd_list=list(st.curve_qd), read_pct=T.CURVE_READ_PCT, wipc="SEQ 128KiB 2x")
        elif test == "xsr":
            hours = [h / self.scale if self.scale > 1 else h for h in st.xsr_hours]
            base.update(
                access_groups=["SEQ 1024KiB W", "RND 8KiB W", "SEQ 1024KiB W"],
                hours_full_drive=list(st.xsr_hours),
                hours_run=hours,
                segment_s=st.xsr_segment(self.scale),
                wipc="none (starts FOB)",
            )
        elif test in ("cbw", "dirth"):
            wl = self.di_workload(test)
            base.update(
                pattern=wl.bssplit or T.bs_title(wl.bs_bytes),
                distribution=wl.distribution or "uniform",
                mix=T.mix_label(wl.read_pct),
                tc_list=list(st.di_tc),
                qd_list=list(st.di_qd),
                pc_intervals=st.di_pc_intervals,
                pc_interval_s=st.scaled_s(st.round_s, self.scale),
                prewrite_s=st.scaled_s(st.di_prewrite_s, self.scale),
                rth_prewrite_s=st.scaled_s(st.di_rth_prewrite_s, self.scale),
                rth_s=st.di_rth_s,
                art_limit_us=st.di_art_limit_us,
                wipc=f"none (100% W of the pattern at TC{tc}/QD{qd} in rounds of {st.di_pc_intervals} intervals until steady)",
            )
        return base

    def di_workload(self, test: str) -> T.DiWorkload:
        st = self.settings
        return T.cbw_workload() if test == "cbw" else T.dirth_workload(st.dirth_bs, st.dirth_mix)

    def purge(self) -> str:
        """Purge the target; the header shows the method used (``--purge auto`` resolved)."""
        method = self.target.purge()
        self.manifest["settings"]["purge"] = method
        return method

    # -- the suite --------------------------------------------------------------------------
    def run(self, tests: Sequence[str]) -> None:
        self.start_manifest(tests)
        try:
            for test in tests:
                tr = TestRun(self, test)
                self.tests[test] = tr
                self.events.test_started(test, T.TITLES[test], self.plan(test))
                try:
                    getattr(self, f"run_{test}")(tr)
                except (PtsError, _core.SsdtwinError) as e:  # this test failed; the next one still runs
                    tr.status, tr.message = "failed", str(e)
                self.finish_test(tr)
        except KeyboardInterrupt:
            running = [tr for tr in self.tests.values() if tr.status == "running"]
            for tr in running:
                tr.status, tr.message = "interrupted", "stopped by Ctrl-C; the rounds done so far are kept"
                tr.window = tr.window or (tr.steady_doc or {}).get("window")
                self.finish_test(tr)
            for t in tests:
                if t not in self.tests:
                    self.manifest["tests"][t]["status"] = "not run"
            self.manifest["interrupted"] = True
            self.close_manifest()
            raise
        self.manifest["complete"] = True
        self.close_manifest()

    def close_manifest(self) -> None:
        self.manifest["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.save_manifest()

    def finish_test(self, tr: TestRun) -> None:
        if tr.rows:
            tr.save_rows()
            try:
                write_tables(tr)
            except (KeyError, ValueError, ZeroDivisionError) as e:  # a partial run may lack cells
                tr.extra["table_error"] = str(e)
        m = self.manifest["tests"][tr.test]
        m["wall_s"] = round(time.perf_counter() - tr.wall0, 3)
        tr.save_result()
        m["status"] = tr.status
        m["message"] = tr.message
        self.save_manifest()
        self.events.test_done(tr.test, tr.status, tr.message)

    def plan(self, test: str) -> str:
        st = self.settings
        rounds = f"{st.min_rounds}-{st.max_rounds} rounds of {st.round_s:g} s"
        return {
            "iops": f"purge, WIPC, {len(st.iops_bs) * len(st.iops_mixes)} elements x {rounds}",
            "tp": f"per block size ({len(st.tp_bs)}): purge, WIPC, 2 elements x {rounds}",
            "lat": f"purge, WIPC, {len(st.lat_bs) * len(st.lat_mixes)} elements x {rounds}",
            "wsat": f"purge, RND 4KiB W in {st.segment_s(self.scale):g} s segments to {st.wsat_fills:g} fills or {st.wsat_max_time_s:g} s",
            "hir": f"purge, RND 4KiB W to {st.hir_pre_fills:g} fills then {rounds}, "
            f"then {len(st.hir_waits_s)} wait states x {st.hir_reps} x (A+B, C)",
            "curve": f"purge, WIPC, 4KiB 70/30 {rounds}, then {len(st.curve_jobs) * len(st.curve_qd)} points",
            "xsr": f"purge, SEQ 1024KiB W / RND 8KiB W / SEQ 1024KiB W for {'/'.join(f'{h:g}' for h in st.xsr_hours)} h"
            + (f" / {self.scale}" if self.scale > 1 else "")
            + f" in {st.xsr_segment(self.scale):g} s segments",
            "cbw": self._di_plan("cbw"),
            "dirth": self._di_plan("dirth"),
        }[test]

    def _di_plan(self, test: str) -> str:
        st = self.settings
        wl = self.di_workload(test)
        n = len(st.di_tc) * len(st.di_qd)
        return (
            f"purge, {wl.title} 100% W to steady state ({st.di_pc_intervals} intervals a round), "
            f"then {st.min_rounds}-{st.max_rounds} rounds of pre-write + {n} TC x QD points at {T.mix_label(wl.read_pct)}, "
            "then histograms at the max, mid and min IOPS points"
        )

    # -- the tests --------------------------------------------------------------------------
    def _pass(self, tr: TestRun, p: T.Pass, prev: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
        tr.purge()
        if p.wipc is not None:
            tr.wipc(p.wipc)
        return tr.rounds(p, prev)

    def _conclude(self, tr: TestRun) -> None:
        doc = tr.steady_doc or {}
        tr.window = doc.get("window")
        if doc.get("steady"):
            tr.status, tr.message = "steady", f"steady state in rounds {tr.window[0]}-{tr.window[1]}" if tr.window else "steady"
        else:
            bad = [v["name"] for v in doc.get("variables", []) if not v.get("steady")]
            tr.status = "not steady"
            tr.message = f"not in steady state after {tr.rounds_run} rounds ({', '.join(bad)}); window {tr.window} reported as measured"

    def run_iops(self, tr: TestRun) -> None:
        st = self.settings
        tc, qd = st.tc_qd["iops"]
        p = T.iops_pass(st.iops_bs, st.iops_mixes, tc, qd, st.round_s)
        self._pass(tr, p)
        self._conclude(tr)

    def run_tp(self, tr: TestRun) -> None:
        st = self.settings
        tc, qd = st.tc_qd["tp"]
        states: list[dict[str, Any]] = []
        for p in T.tp_passes(st.tp_bs, tc, qd, st.round_s):
            tr.rounds_run = 0
            states.append(self._pass(tr, p, states))
        tr.rounds_run = max(len(s["variables"][0]["rounds"]) for s in states)
        self._conclude(tr)

    def run_lat(self, tr: TestRun) -> None:
        st = self.settings
        tc, qd = st.tc_qd["lat"]
        p = T.lat_pass(st.lat_bs, st.lat_mixes, tc, qd, st.round_s)
        self._pass(tr, p)
        self._conclude(tr)

    def run_wsat(self, tr: TestRun) -> None:
        st = self.settings
        tc, qd = st.tc_qd["wsat"]
        el = T.wsat_element(tc, qd, st.segment_s(self.scale))
        cap = self.target.info.capacity_bytes
        tr.purge()
        seg = 0
        reason = ""
        while not reason:
            seg += 1
            fills = tr.written / cap if cap else 0.0
            tr.run(
                el,
                segment=seg,
                what=f"segment {seg}: {fills:.2f}/{st.wsat_fills:g} fills, {tr.clock_s:.0f}/{st.wsat_max_time_s:g} s",
                frac=min(1.0, max(fills / st.wsat_fills, tr.clock_s / st.wsat_max_time_s)),
            )
            tr.rounds_run = seg
            tr.save_rows()
            self.save_manifest()
            if cap and tr.written >= st.wsat_fills * cap:
                reason = f"{st.wsat_fills:g}x capacity written"
            elif tr.clock_s >= st.wsat_max_time_s:
                reason = f"time limit {st.wsat_max_time_s:g} s reached"
            elif st.wsat_stop_steady:
                check = ss.last_window([(int(r["segment"]), float(r["iops"])) for r in tr.rows])
                if check is not None and check.steady:
                    reason = f"steady state in segments {check.rounds[0]}-{check.rounds[-1]}"
                    tr.extra["steady"] = check.to_dict()
        tr.window = [max(1, seg - ss.WINDOW_ROUNDS + 1), seg]
        tr.status, tr.message = "complete", f"stopped after {seg} segments: {reason}"
        tr.extra["stop"] = reason

    def run_hir(self, tr: TestRun) -> None:
        st = self.settings
        tc, qd = st.tc_qd["hir"]
        pre = T.rnd(4 * T.KIB, 0, tc, qd, st.round_s)
        p = T.Pass("hir-pre", None, (pre,), (T.Tracking("RND 4KiB 100% W IOPS (pre-HIR)", pre.name, "iops", "IOPS"),))
        tr.purge()
        state = tr.rounds(p, min_fills=st.hir_pre_fills)
        tr.extra["pre_steady"] = bool(state.get("steady"))
        tr.extra["pre_window"] = state.get("window")
        tr.extra["pre_fills"] = tr.written / self.target.info.capacity_bytes if self.target.info.capacity_bytes else None
        var = (state.get("variables") or [{}])[0]
        tr.extra["baseline_iops"] = var.get("avg")  # the pre-HIR window's average: what A and C are set against
        if not tr.extra["pre_steady"]:
            note = "the pre-HIR write phase did not reach steady state; its last 5 rounds are the baseline"
            tr.extra.setdefault("notes", []).append(note)
        burst = T.rnd(4 * T.KIB, 0, tc, qd, st.hir_burst_s, suffix=f"-{T.fio_seconds(st.hir_burst_s)}s")
        seg = 0
        n = st.hir_reps
        total = 2 * n * len(st.hir_waits_s)
        tr.ss_status = "pre-HIR steady" if tr.extra["pre_steady"] else "pre-HIR NOT steady"
        for wait in st.hir_waits_s:
            for phase in ("A", "C"):
                for i in range(1, n + 1):
                    seg += 1
                    what = f"wait state {wait:g} s, {phase} {i}/{n}"
                    tr.run(burst, segment=seg, phase=phase, wait_s=wait, what=what, frac=(seg - 1) / total)
                    if phase == "A":
                        tr.idle(wait)
                    if i % 10 == 0 or i == n:
                        tr.save_rows()
                        self.save_manifest()
        tr.status = "complete"
        tr.message = f"{len(st.hir_waits_s)} wait states x {n} repetitions" + (
            "" if tr.extra["pre_steady"] else "; the pre-HIR write phase did not reach steady state"
        )

    def run_curve(self, tr: TestRun) -> None:
        st = self.settings
        tc, qd = st.tc_qd["curve"]
        pre = T.rnd(4 * T.KIB, T.CURVE_READ_PCT, tc, qd, st.round_s, suffix=f"-j{tc}-qd{qd}-pre")
        p = T.Pass("curve-pre", T.wipc(), (pre,), (T.Tracking("RND 4KiB 70/30 IOPS (preconditioning)", pre.name, "iops", "IOPS"),))
        state = self._pass(tr, p)
        tr.extra["pre_steady"] = bool(state.get("steady"))
        pts = T.curve_elements(st.curve_jobs, st.curve_qd, st.round_s)
        for i, el in enumerate(pts, 1):
            what = f"point {i}/{len(pts)}: {el.numjobs} jobs x QD{el.iodepth}"
            tr.run(el, segment=i, phase="curve", what=what, frac=(i - 1) / len(pts))
            tr.save_rows()
            self.save_manifest()
        tr.status = "complete"
        tr.message = f"{len(pts)} points" + ("" if tr.extra["pre_steady"] else "; preconditioning did not reach steady state")

    def run_xsr(self, tr: TestRun) -> None:
        """Cross Stimulus Recovery: from FOB, SEQ 1024 KiB W, then RND 8 KiB W, then SEQ
        1024 KiB W again, each for its duration (divided by N on a 1/N twin), in segments."""
        st = self.settings
        tc, qd = st.tc_qd["xsr"]
        seg_s = st.xsr_segment(self.scale)
        groups = T.xsr_groups(tc, qd, seg_s)
        counts = [max(1, round(h * 3600.0 / max(1, self.scale) / seg_s)) for h in st.xsr_hours]
        tr.purge()
        seg = 0
        total = sum(counts)
        for ag, (el, n) in enumerate(zip(groups, counts), 1):
            for i in range(1, n + 1):
                seg += 1
                tr.run(el, segment=seg, phase=f"AG{ag}", what=f"AG{ag} {el.label}: segment {i}/{n}", frac=(seg - 1) / total)
                tr.rounds_run = seg
                if i % 10 == 0 or i == n:
                    tr.save_rows()
                    self.save_manifest()
        summary = xsr_summary(tr.rows)
        tr.extra["access_groups"] = summary
        tr.extra["recovery_s"] = xsr_recovery_s(tr.rows)
        tr.window = [max(1, seg - ss.WINDOW_ROUNDS + 1), seg]
        rec = tr.extra["recovery_s"]
        back = "AG3 did not return to 90 % of AG1's final throughput"
        if rec is not None:
            back = f"AG3 back to 90 % of AG1's final throughput after {rec:g} s"
        tr.status = "complete"
        tr.message = f"{seg} segments in 3 access groups; {back}"

    def run_cbw(self, tr: TestRun) -> None:
        self._run_di(tr, self.di_workload("cbw"))

    def run_dirth(self, tr: TestRun) -> None:
        self._run_di(tr, self.di_workload("dirth"))

    def _run_di(self, tr: TestRun, wl: T.DiWorkload) -> None:
        """CBW and DIRTH: purge; preconditioning rounds (100 % W of the pattern) to steady
        state; demand-intensity rounds (pre-write, then the TC x QD matrix) to steady state;
        then the response-time histogram at the max, mid and min IOPS points."""
        st = self.settings
        tc, qd = st.tc_qd[tr.test]
        tr.purge()
        pc = T.di_pc_pass(wl, tc, qd, st.scaled_s(st.round_s, self.scale), st.di_pc_intervals)
        pc_state = tr.rounds(pc, phase_of={e.name: "pc" for e in pc.elements})
        di = T.di_pass(wl, tc, qd, st.scaled_s(st.di_prewrite_s, self.scale), st.di_tc, st.di_qd, st.round_s)
        phases = {e.name: "di" for e in di.elements}
        phases[di.elements[0].name] = "prewrite"
        di_state = tr.rounds(di, [pc_state], phase_of=phases)
        tr.window = di_state.get("window")
        table = di_table(tr.rows, di.elements[1:], tr.window)
        points = di_points(table, st.di_art_limit_us)
        tr.extra["pc_steady"] = bool(pc_state.get("steady"))
        tr.extra["di_steady"] = bool(di_state.get("steady"))
        tr.extra["points"] = points
        rth = []
        seg = 0
        for k, (kind, (ptc, pqd)) in enumerate(points.items()):
            pre = wl.element(0, ptc, pqd, st.scaled_s(st.di_rth_prewrite_s, self.scale), f"-{kind}-prewrite")
            meas = wl.element(wl.read_pct, ptc, pqd, st.di_rth_s, f"-{kind}")
            for el, phase in ((pre, f"rth-prewrite-{kind}"), (meas, f"rth-{kind}")):
                seg += 1
                row = tr.run(el, segment=seg, phase=phase, what=f"{kind} IOPS point TC{ptc}/QD{pqd}: {el.label}", frac=(2 * k + 1) / 6)
            _write_hist(tr.dir / f"hist-{meas.name}.csv", tr.last_hists)
            rth.append({"point": kind, "tc": ptc, "qd": pqd, "element": meas.name, **{c: row.get(c) for c in RTH_COLUMNS}})
            tr.save_rows()
            self.save_manifest()
        tr.extra["rth"] = rth
        if pc_state.get("steady") and di_state.get("steady"):
            tr.status = "steady"
            where = f"rounds {tr.window[0]}-{tr.window[1]}" if tr.window else "steady"
            tr.message = f"preconditioning and demand intensity steady ({where}); histograms at {', '.join(points)}"
        else:
            bad = [n for n, stt in (("preconditioning", pc_state), ("demand intensity", di_state)) if not stt.get("steady")]
            tr.status = "not steady"
            tr.message = f"{' and '.join(bad)} not in steady state after {st.max_rounds} rounds; window {tr.window} reported as measured"


RTH_COLUMNS = ("iops", "lat_mean_us", "lat_max_us", "lat_p99_us", "lat_p99_9_us", "lat_p99_99_us")


def xsr_summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per access group: segments, its stimulus, throughput at its end (the last 5
    segments' mean), peak mean and peak maximum response time (ADATA's XSR table)."""
    out = []
    for ag in ("AG1", "AG2", "AG3"):
        grp = [r for r in rows if r.get("phase") == ag]
        if not grp:
            continue
        tail = grp[-ss.WINDOW_ROUNDS :]
        mb = [(float(r["read_bw_bytes_s"]) + float(r["write_bw_bytes_s"])) / 1e6 for r in tail]
        out.append(
            {
                "access_group": ag,
                "stimulus": f"{'SEQ' if grp[0]['rw'] in ('read', 'write') else 'RND'} {T.bs_title(int(grp[0]['bs_bytes']))} W",
                "segments": len(grp),
                "duration_s": round(sum(float(r["runtime_s"]) for r in grp), 6),
                "tp_end_mb_s": sum(mb) / len(mb),
                "iops_end": sum(float(r["iops"]) for r in tail) / len(tail),
                "art_peak_us": max(float(r["lat_mean_us"] or 0.0) for r in grp),
                "mrt_peak_us": max(float(r["lat_max_us"] or 0.0) for r in grp),
            }
        )
    return out


def xsr_recovery_s(rows: Sequence[dict[str, Any]], share: float = 0.9) -> Optional[float]:
    """Seconds from the start of AG3 until its throughput first reaches ``share`` of AG1's
    final throughput (the mean of AG1's last 5 segments); None if it never does."""
    ag1 = [r for r in rows if r.get("phase") == "AG1"][-ss.WINDOW_ROUNDS :]
    ag3 = [r for r in rows if r.get("phase") == "AG3"]
    if not ag1 or not ag3:
        return None
    target = share * sum(float(r["write_bw_bytes_s"]) for r in ag1) / len(ag1)
    t0 = float(ag3[0]["t_start_s"])
    for r in ag3:
        if float(r["write_bw_bytes_s"]) >= target:
            return round(float(r["t_end_s"]) - t0, 6)
    return None


DI_COLUMNS = ["numjobs", "iodepth", "oio", "iops", "read_iops", "write_iops", "lat_mean_us", "lat_max_us", "lat_p99_us", "lat_p99_9_us"]


def di_table(rows: Sequence[dict[str, Any]], grid: Sequence[T.Element], window: Optional[Sequence[int]]) -> list[dict[str, Any]]:
    """The demand-intensity matrix averaged over the measurement window: one row per TC x QD."""
    out = []
    for el in grid:
        win = [r for r in rows if r["element"] == el.name and r.get("phase") == "di" and r["round"] is not None]
        win = [r for r in win if window[0] <= int(r["round"]) <= window[1]] if window else win[-ss.WINDOW_ROUNDS :]
        if not win:
            continue
        row: dict[str, Any] = {"numjobs": el.numjobs, "iodepth": el.iodepth, "oio": el.numjobs * el.iodepth}
        for col in DI_COLUMNS[3:]:
            row[col] = _mean(win, col)
        row["lat_mean_us"] = _weighted_mean(win, "")
        row["lat_max_us"] = max((float(r["lat_max_us"]) for r in win if r.get("lat_max_us") is not None), default=None)
        out.append(row)
    return out


def di_points(table: Sequence[dict[str, Any]], art_limit_us: float) -> dict[str, tuple[int, int]]:
    """The PTS's histogram points: max (the highest IOPS whose mean response time is below
    the limit), mid (the point whose IOPS is nearest to the mean of max and min) and min
    (TC1/QD1, else the lowest outstanding I/O of the grid)."""
    ok = [r for r in table if r.get("lat_mean_us") is not None and float(r["lat_mean_us"]) < art_limit_us and r.get("iops")]
    if not table:
        return {}
    low = min(table, key=lambda r: (r["oio"], r["numjobs"]))
    points: dict[str, tuple[int, int]] = {}
    if ok:
        top = max(ok, key=lambda r: float(r["iops"]))
        bottom = min(ok, key=lambda r: float(r["iops"]))
        mid_iops = (float(top["iops"]) + float(bottom["iops"])) / 2
        mid = min(ok, key=lambda r: (abs(float(r["iops"]) - mid_iops), r["oio"]))
        points["max"] = (int(top["numjobs"]), int(top["iodepth"]))
        points["mid"] = (int(mid["numjobs"]), int(mid["iodepth"]))
    points["min"] = (int(low["numjobs"]), int(low["iodepth"]))
    return points


def _ss_text(state: dict[str, Any], r: int, min_rounds: int) -> str:
    """The progress display's steady-state column after round ``r``."""
    if state.get("steady") and r >= min_rounds:
        return f"steady (rounds {state['window'][0]}-{state['window'][1]})"
    if r < ss.WINDOW_ROUNDS:
        return f"steady state: {r}/{ss.WINDOW_ROUNDS} rounds for a window"
    worst = []
    for v in state["variables"]:
        if v.get("window") and not v["steady"]:
            d = v["data_excursion"] / v["avg"] if v["avg"] else float("inf")
            sl = v["slope_excursion"] / v["avg"] if v["avg"] else float("inf")
            worst.append(f"data {d:.0%}/20%, slope {sl:.0%}/10%")
    return "not steady: " + "; ".join(worst) if worst else "steady (needs min rounds)"


# ------------------------------------------------------------------------------ tables


def _window_rows(tr: TestRun, elements: Sequence[str], window: Optional[Sequence[int]]) -> list[dict[str, Any]]:
    rows = [r for r in tr.rows if r["element"] in elements and r["round"] is not None]
    if not rows:
        return []
    if window is None:
        last = max(int(r["round"]) for r in rows)
        window = [max(1, last - ss.WINDOW_ROUNDS + 1), last]
    return [r for r in rows if window[0] <= int(r["round"]) <= window[1]]


def _mean(rows: Sequence[dict[str, Any]], col: str) -> Optional[float]:
    vals = [float(r[col]) for r in rows if r.get(col) is not None]
    return sum(vals) / len(vals) if vals else None


def _pass_window(tr: TestRun, name: str) -> Optional[list[int]]:
    doc = tr.steady_doc or {}
    for p in doc.get("passes", []):
        if p["pass"] == name:
            w: Optional[list[int]] = p.get("window")
            return w
    w2: Optional[list[int]] = doc.get("window")
    return w2


def write_tables(tr: TestRun) -> None:
    """table.csv (and hist-*.csv for Latency) from the measurement window's rounds."""
    st = tr.runner.settings
    t = tr.test
    rows: list[dict[str, Any]] = []
    cols: list[str]
    if t == "iops":
        tc, qd = st.tc_qd[t]
        cols = ["bs_bytes", "bs", *[T.mix_label(m) for m in st.iops_mixes]]
        for bs in st.iops_bs:
            row: dict[str, Any] = {"bs_bytes": bs, "bs": T.bs_title(bs)}
            for m in st.iops_mixes:
                name = T.rnd(bs, m, tc, qd, st.round_s).name
                row[T.mix_label(m)] = _mean(_window_rows(tr, [name], tr.window), "iops")
            rows.append(row)
    elif t == "tp":
        tc, qd = st.tc_qd[t]
        cols = ["bs_bytes", "bs", "read_mb_s", "write_mb_s", "read_mib_s", "write_mib_s"]
        for p in T.tp_passes(st.tp_bs, tc, qd, st.round_s):
            win = _pass_window(tr, p.name)
            r_bw = _mean(_window_rows(tr, [p.elements[0].name], win), "read_bw_bytes_s")
            w_bw = _mean(_window_rows(tr, [p.elements[1].name], win), "write_bw_bytes_s")
            bs = p.elements[0].bs_bytes
            rows.append(
                {
                    "bs_bytes": bs,
                    "bs": T.bs_title(bs),
                    "read_mb_s": None if r_bw is None else r_bw / 1e6,
                    "write_mb_s": None if w_bw is None else w_bw / 1e6,
                    "read_mib_s": None if r_bw is None else r_bw / 2**20,
                    "write_mib_s": None if w_bw is None else w_bw / 2**20,
                }
            )
    elif t == "lat":
        rows, cols = _lat_table(tr)
    elif t == "wsat":
        cols = ["segment", "t_s", "bytes_written_total", "drive_fills", "iops", "lat_mean_us", "lat_max_us"]
        rows = [{**r, "t_s": r["t_end_s"]} for r in tr.rows]
    elif t == "hir":
        cols = ["wait_s", "phase", "iteration", "t_s", "iops"]
        count: dict[tuple[Any, str], int] = {}
        for r in tr.rows:
            key = (r["wait_s"], r["phase"])
            count[key] = count.get(key, 0) + 1
            rows.append({**r, "iteration": r["round"] if r["phase"] == "pre" else count[key], "t_s": r["t_end_s"]})
    elif t == "curve":
        cols = ["numjobs", "iodepth", "iops", "lat_mean_us", "lat_p99_us", "lat_p99_9_us"]
        rows = [r for r in tr.rows if r["phase"] == "curve"]
    elif t == "xsr":
        cols = ["access_group", "stimulus", "segments", "duration_s", "tp_end_mb_s", "iops_end", "art_peak_us", "mrt_peak_us"]
        rows = xsr_summary(tr.rows)
    else:  # cbw, dirth: the demand-intensity matrix, the histogram points marked
        tc, qd = st.tc_qd[t]
        wl = tr.runner.di_workload(t)
        di = T.di_pass(wl, tc, qd, 1.0, st.di_tc, st.di_qd, st.round_s)
        rows = di_table(tr.rows, di.elements[1:], tr.window)
        marks = {v: k for k, v in di_points(rows, st.di_art_limit_us).items()}
        rows = [{**r, "point": marks.get((r["numjobs"], r["iodepth"]), "")} for r in rows]
        cols = [*DI_COLUMNS, "point"]
    _write_atomic(tr.dir / "table.csv", _csv_text(rows, cols))


def _lat_table(tr: TestRun) -> tuple[list[dict[str, Any]], list[str]]:
    st = tr.runner.settings
    tc, qd = st.tc_qd["lat"]
    cols = ["bs_bytes", "bs", "mix", "mean_us", "max_us", "p99_99_us"]
    for d in ("read", "write"):
        cols += [f"{d}_mean_us", f"{d}_max_us", f"{d}_p99_99_us"]
    out = []
    for bs in st.lat_bs:
        for m in st.lat_mixes:
            name = T.rnd(bs, m, tc, qd, st.round_s).name
            win = _window_rows(tr, [name], tr.window)
            if not win:
                continue
            rounds = [int(r["round"]) for r in win]
            h = {d: _merge(*(tr.hists.get((r, name), {}).get(d, {}) for r in rounds)) for d in ("read", "write")}
            row: dict[str, Any] = {"bs_bytes": bs, "bs": T.bs_title(bs), "mix": T.mix_label(m)}
            row["mean_us"] = _weighted_mean(win, "")
            row["max_us"] = max((float(r["lat_max_us"]) for r in win if r.get("lat_max_us") is not None), default=None)
            row["p99_99_us"] = _pcts(_merge(h["read"], h["write"]))[2]
            for d in ("read", "write"):
                row[f"{d}_mean_us"] = _weighted_mean(win, d)
                row[f"{d}_max_us"] = max((float(r[f"{d}_lat_max_us"]) for r in win if r.get(f"{d}_lat_max_us") is not None), default=None)
                row[f"{d}_p99_99_us"] = _pcts(h[d])[2]
            out.append(row)
            _write_hist(tr.dir / f"hist-{name}.csv", h)
    return out, cols


def _weighted_mean(rows: Sequence[dict[str, Any]], ddir: str) -> Optional[float]:
    """IO-weighted mean latency over rounds (weights: IOPS x runtime = I/Os)."""
    col = f"{ddir}_lat_mean_us" if ddir else "lat_mean_us"
    iops = f"{ddir}_iops" if ddir else "iops"
    num = den = 0.0
    for r in rows:
        if r.get(col) is None:
            continue
        w = float(r[iops]) * float(r["runtime_s"])
        num += float(r[col]) * w
        den += w
    return num / den if den else None


def _write_hist(path: Path, h: dict[str, dict[int, int]]) -> None:
    """Response-time histogram: one row per fio bucket with I/Os, per direction and merged."""
    rows = []
    for ddir, hist in (("read", h["read"]), ("write", h["write"]), ("all", _merge(h["read"], h["write"]))):
        for i in sorted(hist):
            lo, hi = index_bounds(i)
            rows.append({"ddir": ddir, "lo_us": lo / 1000.0, "hi_us": (hi + 1) / 1000.0, "count": hist[i]})
    _write_atomic(path, _csv_text(rows, ["ddir", "lo_us", "hi_us", "count"]))


# ------------------------------------------------------------------------------ entry point


def open_target(
    spec: str, *, namespace: Optional[int] = None, purge: str = "auto", allow_destroy: bool = False, seed: int = 0, converge: bool = True
) -> PtsTarget:
    """A target from what the user typed: a drive image directory (``./cm6``, ``./cm6:ns2``)
    is a twin; an NBD URI, a block device or a regular file is a real target run by fio."""
    from .twin import TwinTarget, is_image, split_spec

    path, _ = split_spec(spec)
    if path.is_dir():
        if not is_image(path):
            raise PtsError(f"{spec}: a directory that is not a drive image (no ssdtwin.toml; create one with `ssdtwin create`)")
        return TwinTarget(spec, namespace=namespace, seed=seed, purge=purge, converge=converge)
    if "://" not in spec and not spec.startswith("/dev/") and not path.exists():
        raise PtsError(f"{spec}: no such drive image directory, block device, file or nbd:// URI")
    try:
        realfio = _optional("realfio")
    except ImportError:
        raise PtsError(f"{spec}: real targets (NBD, block devices, files) need ssdtwin.pts.realfio, not in this build") from None
    if not realfio.is_real_target(spec):
        raise PtsError(f"{spec}: no such drive image, block device, file or nbd:// URI")
    # A path made absolute: fio may run in another directory (the job's) than the user's.
    where = spec if "://" in spec else os.path.abspath(spec)
    target: PtsTarget = realfio.RealFioTarget(where, allow_destroy=allow_destroy, purge=purge)
    return target


def run(
    target: Union[str, PtsTarget],
    tests: Union[str, Sequence[str]] = ("iops", "tp", "lat", "wsat", "hir"),
    report: Union[None, str, Path] = None,
    round_s: float = 60.0,
    *,
    force: bool = False,
    namespace: Optional[int] = None,
    allow_destroy: bool = False,
    events: Optional[Events] = None,
    render: bool = True,
    jobs: int = 1,
    **settings: Any,
) -> PtsResult:
    """Run SNIA PTS tests on ``target`` and return the results (docs/pts.md, Python API).

    ``target``: a drive image directory (twin), an NBD URI, a block device or a file (real
    fio), or a PtsTarget. ``tests``: ids from iops, tp, lat, wsat, hir, curve (or a comma
    list). ``report``: the report folder (None: a new temporary folder, kept). Further
    keyword arguments are :class:`Settings` fields (``max_rounds=25``, ``hir_reps=360`` ...).
    Ctrl-C stops after saving the rounds done (pts.json ``interrupted``) and re-raises
    KeyboardInterrupt. Raises PtsError (one line) on bad input, before touching the target.
    ``jobs``: on a twin, run up to this many tests at once, each in its own process on an
    in-memory copy of the image as it was at the start (the image is left unchanged)."""
    names = T.parse_tests(tests if isinstance(tests, str) else ",".join(tests))
    if not 1 <= jobs <= 64:
        raise PtsError(f"--jobs {jobs}: from 1 to 64 tests at once")
    unknown = [k for k in settings if k not in Settings.__dataclass_fields__]
    if unknown:
        raise PtsError(f"unknown setting '{unknown[0]}' (settings: {', '.join(Settings.__dataclass_fields__)})")
    cfg = Settings(round_s=float(round_s), **settings)
    cfg.validate()
    folder = Path(tempfile.mkdtemp(prefix="ssdtwin-pts-")) if report is None else Path(report)
    prepare_folder(folder, force)
    if isinstance(target, str) and _inside(Path(target.split(":ns")[0]), folder):
        raise PtsError(f"--report {folder}: holds the target {target}; choose a folder outside it")
    if jobs > 1 and len(names) > 1:
        if not isinstance(target, str) or not _is_twin(target):
            raise PtsError(f"--jobs {jobs}: tests run in parallel only on a twin (a drive image); a real target runs one test at a time")
        return _run_parallel(target, names, folder, cfg, events, jobs, namespace, render)
    own = isinstance(target, str)
    tgt: PtsTarget = (
        open_target(target, namespace=namespace, purge=cfg.purge, allow_destroy=allow_destroy, seed=cfg.seed, converge=cfg.converge)
        if isinstance(target, str)
        else target
    )
    try:
        if folder.is_dir() and any(folder.iterdir()):
            shutil.rmtree(folder)  # a previous report, and --force (prepare_folder checked)
        folder.mkdir(parents=True, exist_ok=True)
        runner = Runner(tgt, folder, cfg, events)
        try:
            runner.run(names)
        except KeyboardInterrupt:
            if render:
                with contextlib.suppress(PtsError):  # the interruption is what the user must hear about
                    render_report(folder)
            raise
        if render:
            render_report(folder)
    finally:
        if own:
            tgt.close()
    return load(folder)


def _is_twin(spec: str) -> bool:
    from .twin import is_image, split_spec

    path, _ = split_spec(spec)
    return path.is_dir() and is_image(path)


def _run_parallel(
    spec: str, names: list[str], folder: Path, cfg: Settings, events: Optional[Events], jobs: int, namespace: Optional[int], render: bool
) -> PtsResult:
    """Tests at once on a twin: each in a process of its own (``spawn``) on an in-memory copy
    of the image, the parent owning pts.json and the progress display. A test's results do
    not depend on which tests run beside it or before it: every one starts from the image as
    it was (with --jobs 1 a test starts from the state the previous one left, wear included)."""
    import multiprocessing as mp
    import queue as queue_mod
    import signal

    from .twin import TwinTarget

    events = events or Events()
    probe = TwinTarget(
        spec, namespace=namespace, seed=cfg.seed, purge=cfg.purge, writable=False, converge=cfg.converge
    )  # checks, and the header
    try:
        if folder.is_dir() and any(folder.iterdir()):
            shutil.rmtree(folder)
        folder.mkdir(parents=True, exist_ok=True)
        parent = Runner(probe, folder, cfg, events)
        parent.start_manifest(names)
    finally:
        probe.close()
    parent.manifest["settings"]["jobs"] = jobs
    parent.manifest["settings"]["image"] = "unchanged: each test ran on an in-memory copy of the image (--jobs)"
    parent.save_manifest()
    ctx = mp.get_context("spawn")
    messages: Any = ctx.Queue()
    pending = list(names)
    running: dict[str, Any] = {}
    finished: set[str] = set()
    interrupted = False
    while pending or running:
        try:
            while pending and len(running) < jobs and not interrupted:
                test = pending.pop(0)
                proc = ctx.Process(target=_parallel_worker, args=(spec, namespace, cfg, str(folder), test, messages))
                proc.start()
                running[test] = proc
            with contextlib.suppress(queue_mod.Empty):
                _dispatch(messages.get(timeout=0.2), parent, events, finished)
            for test, proc in list(running.items()):
                if not proc.is_alive() and proc.exitcode is not None:
                    _drain(messages, parent, events, finished)
                    proc.join()
                    del running[test]
                    if test not in finished:  # the process died without a word (killed, out of memory)
                        _mark(parent, test, "failed", f"the test's process ended with exit code {proc.exitcode}")
                        events.test_done(test, "failed", parent.manifest["tests"][test]["message"])
                        finished.add(test)
        except KeyboardInterrupt:
            interrupted = True
            for proc in running.values():  # Ctrl-C at a terminal reached them too; a kill -INT of the parent did not
                if proc.is_alive() and proc.pid:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(proc.pid, signal.SIGINT)
    _drain(messages, parent, events, finished)
    if interrupted:
        for t in names:
            if t not in finished:
                parent.manifest["tests"][t]["status"] = "not run" if t in pending else "interrupted"
        parent.manifest["interrupted"] = True
    else:
        parent.manifest["complete"] = True
    parent.close_manifest()
    if render:
        with contextlib.suppress(PtsError) if interrupted else contextlib.nullcontext():
            render_report(folder)
    if interrupted:
        raise KeyboardInterrupt
    return load(folder)


def _mark(parent: Runner, test: str, status: str, message: str) -> None:
    m = parent.manifest["tests"][test]
    m["status"], m["message"] = status, message
    parent.save_manifest()


def _dispatch(msg: tuple[Any, ...], parent: Runner, events: Events, finished: set[str]) -> None:
    """One message from a test's process: a progress event, or its manifest entry."""
    kind, test, payload = msg
    if kind == "event":
        method, args = payload
        getattr(events, method)(*args)
        if method == "test_done":
            finished.add(test)
    elif kind == "manifest":
        entry, purge = payload
        parent.manifest["tests"][test].update(entry)
        if purge:
            parent.manifest["settings"]["purge"] = purge
        parent.save_manifest()


def _drain(messages: Any, parent: Runner, events: Events, finished: set[str]) -> None:
    import queue as queue_mod

    while True:
        try:
            _dispatch(messages.get(timeout=0.05), parent, events, finished)
        except queue_mod.Empty:
            return


class _QueueEvents(Events):
    """A test process's progress, sent to the parent's display."""

    def __init__(self, messages: Any) -> None:
        self.messages = messages

    def test_started(self, test: str, title: str, plan: str) -> None:
        self.messages.put(("event", test, ("test_started", (test, title, plan))))

    def step(self, test: str, what: str, frac: Optional[float], status: str) -> None:
        self.messages.put(("event", test, ("step", (test, what, frac, status))))

    def test_done(self, test: str, status: str, message: str) -> None:
        self.messages.put(("event", test, ("test_done", (test, status, message))))


class _WorkerRunner(Runner):
    """The runner of one test in its own process: pts.json is the parent's, so its manifest
    updates go to the parent as messages."""

    messages: Any = None

    def save_manifest(self) -> None:
        if not self.manifest:
            return
        for t, tr in self.tests.items():
            m = self.manifest["tests"][t]
            m.update(status=tr.status, wall_s=round(time.perf_counter() - tr.wall0, 3) if tr.status == "running" else m["wall_s"])
            m["sim_s"] = round(tr.clock_s, 6)
            self.messages.put(("manifest", t, (dict(m), self.manifest["settings"].get("purge") if tr.purge_method else None)))


def _parallel_worker(spec: str, namespace: Optional[int], settings: Settings, folder: str, test: str, messages: Any) -> None:
    """A test process (``_run_parallel``): the test on an in-memory copy of the image."""
    from .twin import TwinTarget

    tgt = TwinTarget(spec, namespace=namespace, seed=settings.seed, purge=settings.purge, writable=False, converge=settings.converge)
    try:
        r = _WorkerRunner(tgt, Path(folder), settings, _QueueEvents(messages))
        r.messages = messages
        r.run([test])
    except KeyboardInterrupt:
        pass  # Runner.run marked the test interrupted and told the parent
    finally:
        tgt.close()


def render_report(folder: Path) -> Optional[Path]:
    """index.html through ssdtwin.pts.report when that module is present (None otherwise).
    A failure to render is a one-line PtsError: the folder's data are complete without it."""
    try:
        rep = _optional("report")
    except ImportError:
        return None
    try:
        out: Optional[Path] = rep.render(folder)
    except PtsError:
        raise
    except Exception as e:  # the report module's bug must not hide where the results are
        raise PtsError(f"{folder}: the results are saved, but rendering index.html failed: {type(e).__name__}: {e}") from e
    return out


def _optional(name: str) -> Any:
    """``ssdtwin.pts.<name>``, a module this one uses when it is there (the real-fio target,
    the HTML report), imported by name: they import the runner's helpers, so a static import
    here would be a cycle. ImportError when it is not installed."""
    return importlib.import_module(f"{__package__}.{name}")


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or lies inside it (a --force would delete it)."""
    try:
        p, f = path.resolve(), folder.resolve()
    except OSError:
        return False
    return p == f or f in p.parents
