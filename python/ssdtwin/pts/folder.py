"""The report folder (format "ssdtwin-pts" version 1, docs/pts.md "Report folder"):
pts.json, and per test jobs/, fio/, rounds.csv, steady.json, table.csv, hist-*.csv,
result.json; written atomically, read back as pandas frames."""

from __future__ import annotations

import csv
import importlib
import io
import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Union, cast

from ..fio.hist import index_bounds
from .measurements import merge
from .records import FolderJson, Manifest, NoResult, RunOutput, SteadyState, TableRecord, TestOutput, TestResult
from .target import PtsError

if TYPE_CHECKING:
    import pandas as pd

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


@dataclass
class PtsResult:
    """What ``run`` returns: per test the rounds (``frames``), the tabular result
    (``tables``), the steady-state evaluation (``steady``) and the status (``status``)."""

    folder: Path
    manifest: Manifest
    status: dict[str, str]
    frames: dict[str, pd.DataFrame]
    tables: dict[str, Optional[pd.DataFrame]]
    steady: dict[str, Optional[SteadyState]]
    results: dict[str, Union[TestResult, NoResult]]  # {}: the test wrote no result.json

    @property
    def interrupted(self) -> bool:
        return bool(self.manifest.get("interrupted"))

    def to_json(self) -> RunOutput:
        """The CLI's ``-o json``: the manifest, and per test its result and table."""
        tests: dict[str, TestOutput] = {
            t: {"status": self.status[t], "result": self.results.get(t), "table": _records(self.tables.get(t))} for t in self.status
        }
        return {"folder": str(self.folder), "manifest": self.manifest, "tests": tests}


def _records(df: Optional[pd.DataFrame]) -> Optional[list[TableRecord]]:
    if df is None:
        return None
    recs: list[TableRecord] = json.loads(df.to_json(orient="records"))
    return recs


def load(folder: Union[str, Path]) -> PtsResult:
    """Read a report folder back (frames from rounds.csv and table.csv, steady.json, result.json)."""
    import pandas as pd

    folder = Path(folder)
    man = read_manifest(folder)
    if man is None:
        raise PtsError(f"{folder}: not an ssdtwin PTS report ({manifest_problem(folder)})")
    frames: dict[str, pd.DataFrame] = {}
    tables: dict[str, Optional[pd.DataFrame]] = {}
    steadies: dict[str, Optional[SteadyState]] = {}
    results: dict[str, Union[TestResult, NoResult]] = {}
    status: dict[str, str] = {}
    for test, meta in (man.get("tests") or {}).items():
        d = folder / meta.get("dir", test)
        status[test] = meta.get("status", "")
        frames[test] = pd.read_csv(d / "rounds.csv") if (d / "rounds.csv").is_file() else pd.DataFrame(columns=COLUMNS)
        tables[test] = pd.read_csv(d / "table.csv") if (d / "table.csv").is_file() else None
        steadies[test] = json.loads((d / "steady.json").read_text()) if (d / "steady.json").is_file() else None
        results[test] = json.loads((d / "result.json").read_text()) if (d / "result.json").is_file() else {}
    # The files are taken as this version writes them (records.py); only pts.json's format is checked.
    return PtsResult(folder, cast(Manifest, man), status, frames, tables, steadies, results)


def read_manifest(folder: Path) -> Optional[FolderJson]:
    """pts.json of a previous report, or None when ``folder`` holds none."""
    try:
        man = json.loads((folder / "pts.json").read_text())
    except (OSError, ValueError):
        return None
    return man if isinstance(man, dict) and man.get("format") == FORMAT else None


def manifest_problem(folder: Path) -> str:
    """Why ``folder`` holds no report (read_manifest gave None), naming pts.json's fault: none,
    not JSON (a damaged report), or another format."""
    path = folder / "pts.json"
    try:
        text = path.read_text()
    except FileNotFoundError:
        return "no pts.json"
    except (OSError, UnicodeDecodeError) as e:
        return f"{path} cannot be read ({getattr(e, 'strerror', None) or e.__class__.__name__})"
    if not text.strip():
        return f"{path} is empty (a damaged report)"
    try:
        man = json.loads(text)
    except ValueError as e:
        return f"{path} is not JSON ({str(e).split(':')[0]}: a damaged report)"
    found = man.get("format") if isinstance(man, dict) else None
    return f"{path} is not of format {FORMAT} (format {found!r})"


def prepare_folder(folder: Path, force: bool) -> None:
    """Check (before anything touches the target) that ``folder`` may hold the report."""
    if folder.exists() and not folder.is_dir():
        raise PtsError(f"--report {folder}: exists and is not a directory")
    if folder.is_dir() and any(folder.iterdir()):
        if read_manifest(folder) is None:
            why = manifest_problem(folder)
            raise PtsError(f"--report {folder}: exists and is not a previous ssdtwin PTS report ({why}); choose a new folder")
        if not force:
            raise PtsError(f"--report {folder}: holds a previous PTS report; pass --force to replace it")
    check_writable(folder)


def check_writable(folder: Path) -> None:
    """A folder the run can create and write in (or the run would fail after the target was
    opened, with an OSError naming no option): a probe directory made and removed in
    ``folder`` or its nearest existing ancestor."""
    base = folder
    while not base.exists() and base != base.parent:
        base = base.parent
    if not base.is_dir():
        raise PtsError(f"--report {folder}: {base} is not a directory")
    try:
        probe = tempfile.mkdtemp(prefix=".ssdtwin-pts-probe-", dir=base)
    except OSError as e:
        raise PtsError(f"--report {folder}: cannot create a folder in {base} ({e.strerror or e})") from None
    os.rmdir(probe)


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def csv_text(rows: Iterable[Mapping[str, object]], columns: Sequence[str]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r[k]) for k in columns})
    return buf.getvalue()


def write_hist(path: Path, h: dict[str, dict[int, int]]) -> None:
    """Response-time histogram: one row per fio bucket with I/Os, per direction and merged."""
    rows = []
    for ddir, hist in (("read", h["read"]), ("write", h["write"]), ("all", merge(h["read"], h["write"]))):
        for i in sorted(hist):
            lo, hi = index_bounds(i)
            rows.append({"ddir": ddir, "lo_us": lo / 1000.0, "hi_us": (hi + 1) / 1000.0, "count": hist[i]})
    write_atomic(path, csv_text(rows, ["ddir", "lo_us", "hi_us", "count"]))


def render_report(folder: Path) -> Optional[Path]:
    """index.html through ssdtwin.pts.report (imported only here: it needs matplotlib and
    jinja2) when that module is present (None otherwise).
    A failure to render is a one-line PtsError: the folder's data are complete without it."""
    try:
        rep = importlib.import_module(f"{__package__}.report")
    except ImportError:
        return None
    try:
        out: Optional[Path] = rep.render(folder)
    except PtsError:
        raise
    except Exception as e:  # the report module's bug must not hide where the results are
        raise PtsError(f"{folder}: the results are saved, but rendering index.html failed: {type(e).__name__}: {e}") from e
    return out
