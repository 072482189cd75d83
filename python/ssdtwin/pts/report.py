"""The SNIA PTS report: one self-contained HTML file from a report folder (docs/pts-report.md).

``render(folder)`` reads what the harness wrote (pts.json, and per test rounds.csv,
steady.json, table.csv, hist-*.csv, result.json, jobs/, fio/) and writes ``index.html``: a
summary of every test's status with links to every job file and fio JSON, then one page per
test with the SNIA header, the steady-state convergence and measurement-window plots, the
tabular result and the test's own figures. The plots are PNGs embedded as data: URIs (the
file needs nothing else and no network); the table behind every figure is written next to
it as ``<test>/plots/<figure>.csv`` and ``.json`` (and the PNG). A missing or unreadable
file makes the page say so; it never stops the report.

``compare(a, b, out)`` sets two reports side by side per figure (overlaid, A solid, B
dashed) with every table as A, B and the difference in % of A.

Re-render a folder by hand: ``python -m ssdtwin.pts.report FOLDER [--pdf]``.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Optional
from urllib.parse import quote

import jinja2
import pandas as pd

from . import plots
from .plots import MIX_ORDER, Plot, Series, bs_text
from .target import PtsError
from .tests import TEST_IDS as TESTS
from .tests import TITLES

FORMAT = "ssdtwin-pts"
COMPARE_FORMAT = "ssdtwin-pts-compare"
WDPC = {
    "iops": "the test's own stimulus in rounds until steady state",
    "tp": "the test's own stimulus in rounds until steady state",
    "lat": "the test's own stimulus in rounds until steady state",
    "wsat": "none (WSAT starts fresh-out-of-box)",
    "hir": "RND 4KiB W in rounds until steady state (the pre-HIR baseline)",
    "curve": "none",
    "xsr": "none (XSR starts fresh-out-of-box)",
    "cbw": "100% W of the CBW pattern at TC32/QD32 in rounds until steady state, then a pre-write before every matrix round",
    "dirth": "100% W of the DIRTH pattern at TC32/QD32 in rounds until steady state, then a pre-write before every matrix round",
}
UNFINISHED = ("running", "interrupted", "pending", "not run")
TEST_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")  # a test's id and folder: never a path out of the report
NUMERIC = re.compile(r"[-+−]?[\d,.]+(e[-+]?\d+)?|–|…")
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


# ---------------------------------------------------------------------------------------
# What the template shows


@dataclass
class Block:
    """One item of a page: a figure, a table or a note (``kind``)."""

    kind: str
    title: str = ""
    text: str = ""  # note text, figure caption
    level: str = "info"  # note: "info", "warn", "missing"
    img: str = ""  # figure: data: URI
    links: list[tuple[str, str]] = field(default_factory=list)  # (label, relative href)
    columns: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    name: str = ""


@dataclass
class ElementFiles:
    element: str
    job: Optional[str]
    runs: list[tuple[str, str]]  # (label r01/s0001, href)


@dataclass
class Page:
    id: str
    title: str
    status: str  # "steady", "not steady", "interrupted", "complete", "failed", "missing", "not run"
    message: str
    header: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    files: list[ElementFiles] = field(default_factory=list)
    other_files: list[tuple[str, str]] = field(default_factory=list)
    facts: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------
# Reading a folder


def load_manifest(folder: Path) -> dict[str, Any]:
    """pts.json of a report folder; PtsError (one line) when the folder is not a report."""
    path = folder / "pts.json"
    if not folder.is_dir():
        raise PtsError(f"{folder}: not a directory (a PTS report folder holds pts.json)")
    if not path.is_file():
        raise PtsError(f"{folder}: not a PTS report (no pts.json)")
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise PtsError(f"{path}: unreadable: {_one_line(e)}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise PtsError(f'{path}: not a PTS report (field "format" must be "{FORMAT}")')
    problems = []
    for key in ("device", "platform", "settings", "tests"):  # the page reads these as objects
        if key in doc and not isinstance(doc[key], dict):
            problems.append(f'pts.json: field "{key}" is not an object; ignored')
            doc[key] = {}
    tests = doc.setdefault("tests", {})
    for test, entry in list(tests.items()):
        if not isinstance(entry, dict):
            problems.append(f"pts.json: tests.{test} is not an object; ignored")
            tests[test] = {}
    doc["_problems"] = problems
    return doc


def _obj(value: Any) -> dict[str, Any]:
    """A JSON object from a document the harness wrote, or {} when it is anything else."""
    return value if isinstance(value, dict) else {}


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")


class TestFolder:
    """The files of one test; every read notes what is missing or unreadable."""

    def __init__(self, root: Path, test: str, entry: dict[str, Any]) -> None:
        self.root = root
        self.test = test
        self.rel = str(entry.get("dir") or test)
        self.dir = root / self.rel
        self.notes: list[Block] = []
        self.finished = True

    def _missing(self, name: str, why: str = "missing") -> None:
        if why == "missing" and not self.finished:
            self.notes.append(Block("note", text=f"not written yet (the test did not finish): {self.rel}/{name}", level="info"))
            return
        self.notes.append(Block("note", text=f"{why}: {self.rel}/{name}", level="missing"))

    def csv(self, name: str, required: tuple[str, ...] = ()) -> Optional[pd.DataFrame]:
        path = self.dir / name
        if not path.is_file():
            self._missing(name)
            return None
        try:
            frame = pd.read_csv(path)
        except (OSError, ValueError) as e:
            self._missing(name, f"unreadable ({_one_line(e)})")
            return None
        absent = [c for c in required if c not in frame.columns]
        if absent:
            self._missing(name, f"columns {', '.join(absent)} absent in")
            return None
        return frame

    def json(self, name: str, quiet: bool = False) -> Optional[dict[str, Any]]:
        path = self.dir / name
        if not path.is_file():
            if not quiet:
                self._missing(name)
            return None
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            self._missing(name, f"unreadable ({_one_line(e)})")
            return None
        if not isinstance(doc, dict):
            self._missing(name, "not a JSON object")
            return None
        return doc

    def rounds_done(self) -> Optional[int]:
        """The last round (WSAT/HIR: segment) in rounds.csv, for a test without result.json."""
        try:
            frame = pd.read_csv(self.dir / "rounds.csv")
            column = "segment" if self.test in ("wsat", "hir") and frame["segment"].notna().any() else "round"
            return int(frame[column].max())
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def hist_files(self) -> list[Path]:
        return sorted(self.dir.glob("hist-*.csv"))

    def files(self) -> tuple[list[ElementFiles], list[tuple[str, str]]]:
        """Every job file and fio JSON, grouped per element (r<NN>-/s<NNNN>-<element>.json)."""
        jobs = sorted((self.dir / "jobs").glob("*.fio"))
        runs = sorted((self.dir / "fio").glob("*.json"))
        by_element: dict[str, ElementFiles] = {}
        for j in jobs:
            by_element[j.stem] = ElementFiles(j.stem, self._href(j), [])
        other: list[tuple[str, str]] = []
        for r in runs:
            m = re.fullmatch(r"([rs]\d+)-(.+)\.json", r.name)
            if r.stem in by_element:  # a single-run element: jobs/wipc.fio -> fio/wipc.json
                by_element[r.stem].runs.append(("json", self._href(r)))
            elif m and m.group(2) in by_element:
                by_element[m.group(2)].runs.append((m.group(1), self._href(r)))
            elif m:
                by_element.setdefault(m.group(2), ElementFiles(m.group(2), None, [])).runs.append((m.group(1), self._href(r)))
            else:
                other.append((r.name, self._href(r)))
        other += [(p.name, self._href(p)) for p in sorted(self.dir.glob("*")) if p.is_file()]
        return list(by_element.values()), other

    def _href(self, path: Path) -> str:
        return quote(path.relative_to(self.root).as_posix())  # an element name may hold "%" or "#"


# ---------------------------------------------------------------------------------------
# Output helpers


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "item"):  # numpy scalars
        return _jsonable(value.item())
    return value


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [_jsonable(r) for r in frame.astype(object).where(frame.notna(), None).to_dict(orient="records")]


class Sink:
    """Writes a figure's PNG, CSV and JSON under <out>/<test>/plots/ and makes its Block."""

    def __init__(self, out: Path, test: str, sources: list[str], subdir: str = "") -> None:
        self.out = out
        self.test = test
        self.sources = sources
        self.rel = f"{subdir or test}/plots"  # next to the test's own files (pts.json tests.<id>.dir)
        self.dir = out / self.rel
        # The figures of an earlier rendering go: a figure that is no longer drawn (its
        # data went missing) must not leave a stale PNG/CSV/JSON behind.
        for stale in self.dir.glob("*"):
            if stale.is_file() and stale.suffix in (".png", ".csv", ".json"):
                stale.unlink()

    def figure(self, make: Callable[[], Plot], what: str) -> Block:
        try:
            plot = make()
        except Exception as e:  # a damaged input file must cost one figure, never the report
            return Block("note", text=f"{what}: could not be drawn ({_one_line(e)})", level="warn")
        self.dir.mkdir(parents=True, exist_ok=True)
        stem = self.dir / plot.name
        stem.with_suffix(".png").write_bytes(plot.png)
        plot.data.to_csv(stem.with_suffix(".csv"), index=False)
        doc = {
            "figure": plot.name,
            "test": self.test,
            "title": plot.title,
            "caption": plot.caption,
            "sources": self.sources,
            **_jsonable(plot.meta),
            "columns": [str(c) for c in plot.data.columns],
            "data": _records(plot.data),
        }
        stem.with_suffix(".json").write_text(json.dumps(doc, indent=1, allow_nan=False))
        rel = quote(f"{self.rel}/{plot.name}")
        return Block(
            "figure",
            title=plot.title,
            text=plot.caption,
            img="data:image/png;base64," + base64.b64encode(plot.png).decode("ascii"),
            links=[("CSV", rel + ".csv"), ("JSON", rel + ".json"), ("PNG", rel + ".png")],
            name=plot.name,
        )


def fmt(value: Any) -> str:
    """Table cells: 361993.8 -> "361,994", 85.25 -> "85.3", NaN/None -> "–"."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, (int,)) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.3g}"
    return str(value)


def table_block(title: str, frame: pd.DataFrame, href: str = "", max_rows: int = 60, text: str = "") -> Block:
    shown = frame if len(frame) <= max_rows else pd.concat([frame.head(max_rows // 2), frame.tail(max_rows // 2)])
    rows = [[fmt(v.item() if hasattr(v, "item") else v) for v in row] for row in shown.itertuples(index=False)]
    if len(frame) > max_rows:
        rows.insert(max_rows // 2, ["…"] * len(frame.columns))
        text = (text + " " if text else "") + f"{len(frame)} rows; the first and last {max_rows // 2} are shown."
    return Block("table", title=title, text=text, columns=[str(c) for c in frame.columns], rows=rows, links=[("CSV", href)] if href else [])


def note(text: str, level: str = "info") -> Block:
    return Block("note", text=text, level=level)


# ---------------------------------------------------------------------------------------
# Status and header


def status_text(test: str, entry: dict[str, Any], result: Optional[dict[str, Any]], steady: Optional[dict[str, Any]]) -> tuple[str, str]:
    """(status, one-line text) for the summary: "steady at round 8 (window 4–8)", ..."""
    status = str((result or {}).get("status") or entry.get("status") or "missing")
    rounds = (result or {}).get("rounds_run")
    window = (result or {}).get("window") or (steady or {}).get("window")
    win = f" (measurement window rounds {window[0]}–{window[1]})" if isinstance(window, list) and len(window) == 2 else ""
    max_rounds = (steady or {}).get("max_rounds", 25)
    unit = "segment" if test in ("wsat", "hir") else "round"
    if status == "steady":
        at = (steady or {}).get("steady_round") or (window[1] if isinstance(window, list) and window else rounds)
        return status, f"steady at round {at}{win}"
    if status == "not steady":
        return status, f"NOT in steady state after {rounds or max_rounds} rounds{win}"
    if status == "interrupted":
        return status, f"interrupted after {unit} {rounds}" if rounds else "interrupted before the first round ended"
    if status == "complete":
        msg = (result or {}).get("message")
        return status, f"complete: {msg}" if msg else "complete"
    if status == "failed":
        return status, f"failed: {(result or {}).get('message') or 'no message'}"
    if status == "running":
        return status, f"running: {unit} {rounds} done" if rounds else "running"
    if status in ("not run", "pending"):
        return status, {"not run": "not run (the run stopped before this test)", "pending": "not started"}[status]
    return status, str((result or {}).get("message") or status)


def _items(doc: dict[str, Any], keys: list[tuple[str, str]]) -> list[tuple[str, str]]:
    out = []
    for key, label in keys:
        v = doc.get(key)
        if v not in (None, "", {}, []):
            out.append((label, _value_text(key, v)))
    return out


def _tc_qd_text(v: Any) -> str:
    if isinstance(v, dict) and {"tc", "qd"} <= set(v):
        return f"TC {v['tc']} x QD {v['qd']} (OIO {v.get('oio', int(v['tc']) * int(v['qd']))})"
    if isinstance(v, (list, tuple)) and len(v) == 2:
        return f"TC {v[0]} x QD {v[1]} (OIO {int(v[0]) * int(v[1])})"
    return str(v)


# Result settings keys shown under the run settings' own labels (one row per setting).
_SETTING_LABELS = {
    "tc_qd": "TC/QD",
    "purge": "Purge",
    "wipc": "WIPC",
    "round_s": "Round length (s)",
    "min_rounds": "Rounds (min)",
    "max_rounds": "Rounds (max)",
    "tc": "TC (threads)",
    "qd": "QD (per thread)",
    "bs_bytes": "Block sizes (bytes)",
}


def _value_text(key: str, v: Any) -> str:
    if key == "tc_qd":
        return _tc_qd_text(v)
    if key == "capacity_bytes" and isinstance(v, (int, float)):
        return f"{v / 1e9:,.1f} GB ({int(v):,} bytes)"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, dict):
        return "; ".join(f"{k}: {_value_text(k, x)}" for k, x in v.items())
    if isinstance(v, list):
        return ", ".join(str(x) for x in v)
    return str(v)


def header(manifest: dict[str, Any], test: str, result: Optional[dict[str, Any]]) -> list[tuple[str, list[tuple[str, str]]]]:
    """The SNIA report header: device under test, test platform, test settings."""
    device = manifest.get("device") or {}
    dev = _items(
        device,
        [
            ("vendor", "Vendor"),
            ("model", "Model"),
            ("serial", "Serial"),
            ("firmware", "Firmware"),
            ("capacity_bytes", "Capacity"),
            ("lba_bytes", "LBA size (bytes)"),
            ("nand", "NAND"),
            ("interface", "Interface"),
            ("uri", "Target"),
            ("scale", "Scale"),
        ],
    )
    if device.get("simulated"):
        dev.append(("Simulated", "yes: a twin in simulated time"))
    plat = _items(
        manifest.get("platform") or {}, [("host", "Host"), ("os", "OS"), ("cpu", "CPU"), ("software", "Test software"), ("fio", "fio")]
    )
    s = dict(manifest.get("settings") or {})
    tc = s.pop("tc_qd", None)
    sets = _items(
        s,
        [
            ("purge", "Purge"),
            ("wipc", "WIPC"),
            ("active_range_pct", "ActiveRange (%)"),
            ("data_pattern", "Data pattern"),
            ("write_cache", "Write cache"),
            ("power_state", "Power state"),
            ("round_s", "Round length (s)"),
            ("min_rounds", "Rounds (min)"),
            ("max_rounds", "Rounds (max)"),
            ("seed", "Seed"),
        ],
    )
    if isinstance(tc, dict) and tc.get(test):
        sets.insert(3, ("TC/QD", _tc_qd_text(tc[test])))
    elif isinstance(tc, str):
        sets.insert(3, ("TC/QD", tc))
    for k, v in _obj((result or {}).get("settings")).items():
        label = _SETTING_LABELS.get(k, k.replace("_", " "))
        sets = [(lbl, x) for lbl, x in sets if lbl != label] + [(label, _value_text(k, v))]
    sets.insert(0, ("WDPC", WDPC.get(test, "none")))
    win = (result or {}).get("window")
    if isinstance(win, list) and len(win) == 2:
        sets.append(("Measurement window", f"rounds {win[0]}–{win[1]}"))
    return [("Device under test", dev), ("Test platform", plat), ("Test settings", sets)]


# ---------------------------------------------------------------------------------------
# Pages


def _tracking_blocks(sink: Sink, steady: Optional[dict[str, Any]], scale: float, unit: str) -> list[Block]:
    if steady is None:
        return []
    blocks = []
    rule = steady.get("rule")
    if rule:
        blocks.append(note(f"Steady-state rule: {rule}. {_steady_sentence(steady)}"))
    for k, var in enumerate(steady.get("variables") or []):
        slug = re.sub(r"[^a-z0-9]+", "-", str(var.get("name", k)).lower()).strip("-") or str(k)
        blocks.append(sink.figure(partial(plots.window, f"window-{slug}", var, scale, unit), f"window {var.get('name')}"))
    return blocks


def _steady_sentence(steady: dict[str, Any]) -> str:
    if steady.get("steady"):
        return f"All tracking variables are steady at round {steady.get('steady_round')}."
    bad = [str(v.get("name")) for v in steady.get("variables") or [] if not v.get("steady")]
    return "Not in steady state: " + ", ".join(bad) + "." if bad else "Not in steady state."


def _window_of(steady: Optional[dict[str, Any]], result: Optional[dict[str, Any]]) -> Optional[tuple[int, int]]:
    w = (steady or {}).get("window") or (result or {}).get("window")
    return (int(w[0]), int(w[1])) if isinstance(w, list) and len(w) == 2 and None not in w else None


def page_iops(tf: TestFolder, sink: Sink, result: Optional[dict[str, Any]]) -> list[Block]:
    blocks: list[Block] = []
    rounds = tf.csv("rounds.csv", ("round", "read_pct", "bs_bytes", "iops"))
    steady = tf.json("steady.json")
    table = tf.csv("table.csv", ("bs_bytes",))
    if rounds is not None:
        win = _window_of(steady, result)
        blocks.append(
            sink.figure(
                lambda: plots.convergence(
                    "convergence",
                    "IOPS steady-state convergence: every element per round",
                    [Series("", rounds)],
                    "iops",
                    "IOPS",
                    "read_pct",
                    "bs_bytes",
                    bs_text,
                    logy=True,
                    windows=[win],
                ),
                "convergence",
            )
        )
    blocks += _tracking_blocks(sink, steady, 1.0, "IOPS")
    if table is not None:
        mixes = [m for m in MIX_ORDER if m in table.columns]
        shown = table[["bs", *mixes]] if "bs" in table.columns else table
        blocks.append(
            table_block("IOPS table: average over the measurement window (rows: block size, columns: R/W %)", shown, f"{tf.rel}/table.csv")
        )
        blocks.append(sink.figure(lambda: plots.iops_2d([Series("", table)]), "IOPS 2D"))
        blocks.append(sink.figure(lambda: plots.iops_3d(table), "IOPS 3D"))
    return blocks


def page_tp(tf: TestFolder, sink: Sink, result: Optional[dict[str, Any]]) -> list[Block]:
    blocks: list[Block] = []
    rounds = tf.csv("rounds.csv", ("round", "element", "read_bw_bytes_s", "write_bw_bytes_s"))
    steady = tf.json("steady.json")
    table = tf.csv("table.csv", ("bs_bytes", "read_mb_s", "write_mb_s"))
    if rounds is not None:
        r = rounds.assign(mb_s=(rounds["read_bw_bytes_s"].fillna(0) + rounds["write_bw_bytes_s"].fillna(0)) / 1e6)
        win = _window_of(steady, result)
        blocks.append(
            sink.figure(
                lambda: plots.convergence(
                    "convergence",
                    "Throughput steady-state convergence: every element per round",
                    [Series("", r)],
                    "mb_s",
                    "MB/s",
                    None,
                    "element",
                    str,
                    windows=[win],
                ),
                "convergence",
            )
        )
    unit_scale = 1e-6 if steady and all((v.get("unit") == "B/s") for v in steady.get("variables") or []) else 1.0
    blocks += _tracking_blocks(sink, steady, unit_scale, "MB/s" if unit_scale != 1.0 else "")
    if table is not None:
        cols = [c for c in ("bs", "read_mb_s", "write_mb_s", "read_mib_s", "write_mib_s") if c in table.columns]
        blocks.append(
            table_block(
                "Throughput: average over the measurement window (MB/s = 10^6 B/s, MiB/s = 2^20 B/s)", table[cols], f"{tf.rel}/table.csv"
            )
        )
        blocks.append(sink.figure(lambda: plots.tp_bars([Series("", table)]), "throughput bars"))
    return blocks


def page_lat(tf: TestFolder, sink: Sink, result: Optional[dict[str, Any]]) -> list[Block]:
    blocks: list[Block] = []
    rounds = tf.csv("rounds.csv", ("round", "read_pct", "bs_bytes", "lat_mean_us"))
    steady = tf.json("steady.json")
    table = tf.csv("table.csv", ("bs_bytes", "mix", "mean_us", "max_us", "p99_99_us"))
    if rounds is not None:
        win = _window_of(steady, result)
        blocks.append(
            sink.figure(
                lambda: plots.convergence(
                    "convergence",
                    "Latency steady-state convergence: mean latency of every element per round",
                    [Series("", rounds)],
                    "lat_mean_us",
                    "mean latency (µs)",
                    "bs_bytes",
                    "read_pct",
                    lambda p: f"R/W {int(p)}/{100 - int(p)}",
                    windows=[win],
                ),
                "convergence",
            )
        )
    blocks += _tracking_blocks(sink, steady, 1.0, "µs")
    if table is not None:
        cols = [c for c in table.columns if c != "bs_bytes"]
        blocks.append(table_block("Response times: average over the measurement window (µs)", table[cols], f"{tf.rel}/table.csv"))
        blocks.append(sink.figure(lambda: plots.lat_bars([Series("", table)]), "latency bars"))
    blocks += hist_blocks(tf, sink)
    return blocks


def hist_blocks(tf: TestFolder, sink: Sink) -> list[Block]:
    panels = []
    for path in tf.hist_files():
        h = tf.csv(path.name, ("lo_us", "hi_us", "count"))
        if h is not None:
            panels.append((path.stem[len("hist-") :], [Series("", h)]))
    if not panels:
        return []
    title = f"{TITLES.get(tf.test, tf.test)}: response-time histograms"
    rows = [{"element": element, **p} for element, series in panels for p in plots.hist_percentiles(series[0].frame)]
    return [
        sink.figure(partial(plots.histograms, "histograms", title, panels), "histograms"),
        table_block(
            "Percentiles from the histogram bins (µs, upper bin edge; – where there are too few I/Os)",
            pd.DataFrame(rows),
            text="A percentile is as precise as the bins it comes from (fio's json+ bins are at most 1.6 % wide).",
        ),
    ]


def page_wsat(tf: TestFolder, sink: Sink, result: Optional[dict[str, Any]]) -> list[Block]:
    blocks: list[Block] = []
    table = tf.csv("table.csv", ("segment", "t_s", "drive_fills", "iops"))
    if table is None:
        return blocks
    s = [Series("", table)]
    blocks.append(sink.figure(lambda: plots.wsat(s, "time"), "WSAT vs time"))
    blocks.append(sink.figure(lambda: plots.wsat(s, "fills"), "WSAT vs drive fills"))
    blocks.append(sink.figure(lambda: plots.wsat(s, "fills", log=True), "WSAT vs drive fills (log)"))
    if {"lat_mean_us", "lat_max_us"} <= set(table.columns):
        blocks.append(sink.figure(lambda: plots.wsat_latency(s), "WSAT latency"))
    blocks.append(table_block("WSAT summary", wsat_summary(table), f"{tf.rel}/table.csv", text="The whole table is in the CSV."))
    blocks += hist_blocks(tf, sink)
    return blocks


def wsat_summary(table: pd.DataFrame) -> pd.DataFrame:
    t = table.sort_values("segment")
    tail = t.tail(max(1, len(t) // 10))
    return pd.DataFrame(
        [
            {"quantity": "segments", "value": float(len(t))},
            {"quantity": "drive fills written", "value": float(t["drive_fills"].iloc[-1])},
            {"quantity": "FOB IOPS (first segment)", "value": float(t["iops"].iloc[0])},
            {"quantity": "peak IOPS", "value": float(t["iops"].max())},
            {"quantity": f"final IOPS (mean of the last {len(tail)} segments)", "value": float(tail["iops"].mean())},
        ]
    )


def hir_baseline(result: Optional[dict[str, Any]], rounds: Optional[pd.DataFrame]) -> Optional[float]:
    """The pre-HIR steady-state IOPS: result.json extra.baseline_iops, else the mean of the last 5 "pre" rounds."""
    base = _obj((result or {}).get("extra")).get("baseline_iops")
    if isinstance(base, (int, float)):
        return float(base)
    if rounds is not None and "phase" in rounds.columns:
        pre = rounds[rounds["phase"] == "pre"]
        if len(pre):
            return float(pre["iops"].tail(5).mean())
    return None


def hir_summary(table: pd.DataFrame, baseline: Optional[float]) -> pd.DataFrame:
    rows = []
    for w, grp in table.groupby("wait_s"):
        a = grp[grp["phase"] == "A"]["iops"].mean()
        c = grp[grp["phase"] == "C"]["iops"].mean()
        rows.append(
            {
                "wait_s": float(w),
                "access A mean IOPS": a,
                "access C mean IOPS": c,
                "baseline IOPS": baseline,
                "A vs baseline (%)": (a / baseline - 1) * 100 if baseline else float("nan"),
            }
        )
    return pd.DataFrame(rows)


def page_hir(tf: TestFolder, sink: Sink, result: Optional[dict[str, Any]]) -> list[Block]:
    blocks: list[Block] = []
    rounds = tf.csv("rounds.csv", ("iops",))
    table = tf.csv("table.csv", ("wait_s", "phase", "t_s", "iops"))
    baseline = hir_baseline(result, rounds)
    if rounds is not None and {"phase", "round", "element"} <= set(rounds.columns):
        pre = rounds[rounds["phase"] == "pre"]
        if len(pre):
            blocks.append(
                sink.figure(
                    lambda: plots.convergence(
                        "convergence",
                        "HIR preconditioning: RND 4KiB W IOPS per round until steady state",
                        [Series("", pre)],
                        "iops",
                        "IOPS",
                        None,
                        "element",
                        str,
                        windows=[_window_of(None, result)],
                    ),
                    "pre-HIR convergence",
                )
            )
    if baseline is None:
        blocks.append(note('no baseline: result.json has no extra.baseline_iops and rounds.csv no "pre" rounds', "warn"))
    if table is not None:
        blocks.append(sink.figure(lambda: plots.hir_overview([Series("", table)], [baseline]), "HIR overview"))
        blocks.append(sink.figure(lambda: plots.hir_wait_states([Series("", table)], [baseline]), "HIR wait states"))
        blocks.append(table_block("HIR: mean IOPS per wait state", hir_summary(table, baseline), f"{tf.rel}/table.csv"))
    return blocks


def page_curve(tf: TestFolder, sink: Sink, result: Optional[dict[str, Any]]) -> list[Block]:
    blocks: list[Block] = []
    table = tf.csv("table.csv", ("numjobs", "iodepth", "iops", "lat_mean_us", "lat_p99_us", "lat_p99_9_us"))
    if table is not None:
        blocks.append(sink.figure(lambda: plots.curve([Series("", table)]), "latency vs IOPS"))
        blocks.append(table_block("Latency vs IOPS", table, f"{tf.rel}/table.csv"))
    return blocks


def page_xsr(tf: TestFolder, sink: Sink, result: Optional[dict[str, Any]]) -> list[Block]:
    blocks: list[Block] = []
    rounds = tf.csv("rounds.csv", ("segment", "phase", "element", "t_start_s", "t_end_s", "iops", "write_bw_bytes_s"))
    table = tf.csv("table.csv", ("access_group", "tp_end_mb_s"))
    rec = _obj((result or {}).get("extra")).get("recovery_s")
    if rounds is not None:
        r = _with_mb_s(rounds)
        s = [Series("", r)]
        blocks.append(sink.figure(lambda: plots.xsr_time(s, "mb_s", "MB/s", "xsr-tp", "XSR: throughput vs time"), "XSR throughput"))
        blocks.append(sink.figure(lambda: plots.xsr_time(s, "iops", "IOPS", "xsr-iops", "XSR: IOPS vs time"), "XSR IOPS"))
        for col, text in (("lat_mean_us", "mean (ART)"), ("lat_max_us", "maximum (MRT)")):
            if col in r.columns:
                blocks.append(
                    sink.figure(
                        partial(plots.xsr_time, s, col, "µs", f"xsr-{col[4:-3]}", f"XSR: {text} response time vs time", True),
                        f"XSR {text}",
                    )
                )
    if table is not None:
        text = "Throughput at the end of each access group is the mean of its last 5 segments (MB/s = 10^6 B/s); peaks over the group."
        blocks.append(table_block("XSR: access groups", table, f"{tf.rel}/table.csv", text=text))
    if rec is not None:
        blocks.insert(0, note(f"Recovery: AG3 reached 90 % of AG1's final throughput {fmt(rec)} s after the RND 8KiB stimulus ended."))
    elif table is not None:
        blocks.insert(0, note("Recovery: AG3 did not reach 90 % of AG1's final throughput before it ended.", "warn"))
    return blocks


def _with_mb_s(rounds: pd.DataFrame) -> pd.DataFrame:
    """rounds.csv with the segment's throughput in MB/s (10^6 B/s, reads and writes)."""
    read = rounds["read_bw_bytes_s"].fillna(0) if "read_bw_bytes_s" in rounds.columns else 0
    return rounds.assign(mb_s=(read + rounds["write_bw_bytes_s"].fillna(0)) / 1e6)


def page_di(tf: TestFolder, sink: Sink, result: Optional[dict[str, Any]]) -> list[Block]:
    """CBW and DIRTH: preconditioning, the demand-intensity rounds, DV and DI curves, and
    the response-time histograms at the max, mid and min IOPS points."""
    blocks: list[Block] = []
    name = tf.test.upper()
    rounds = tf.csv("rounds.csv", ("round", "phase", "element", "t_end_s", "iops"))
    steady = tf.json("steady.json")
    table = tf.csv("table.csv", ("numjobs", "iodepth", "iops", "lat_mean_us"))
    extra = _obj((result or {}).get("extra"))
    limit = _obj(_obj((result or {}).get("settings"))).get("art_limit_us")
    if rounds is not None and len(rounds[rounds["phase"].isin(["pc", "prewrite"])]):
        blocks.append(
            sink.figure(lambda: plots.di_writes([Series("", rounds)], f"{name}: preconditioning and pre-writes"), "100% W phases")
        )
    blocks += _tracking_blocks(sink, steady, 1.0, "IOPS")
    if table is not None:
        s = [Series("", table)]
        blocks.append(sink.figure(lambda: plots.demand_variation(s, f"{name}: demand variation"), "demand variation"))
        lim = float(limit) if isinstance(limit, (int, float)) else None
        blocks.append(sink.figure(lambda: plots.demand_intensity(s, f"{name}: demand intensity", lim), "demand intensity"))
        blocks.append(
            table_block(
                f"{name}: TC x QD matrix, average over the measurement window (point: the histogram points)", table, f"{tf.rel}/table.csv"
            )
        )
    rth = extra.get("rth")
    if isinstance(rth, list) and rth:
        blocks.append(table_block(f"{name}: response times at the max, mid and min IOPS points (µs)", pd.DataFrame(rth)))
    blocks += hist_blocks(tf, sink)
    return blocks


PAGES: dict[str, Callable[[TestFolder, Sink, Optional[dict[str, Any]]], list[Block]]] = {
    "iops": page_iops,
    "tp": page_tp,
    "lat": page_lat,
    "wsat": page_wsat,
    "hir": page_hir,
    "curve": page_curve,
    "xsr": page_xsr,
    "cbw": page_di,
    "dirth": page_di,
}


def _test_ids(manifest: dict[str, Any]) -> list[str]:
    tests = manifest.get("tests") if isinstance(manifest.get("tests"), dict) else {}
    assert isinstance(tests, dict)
    return list(tests) if tests else []


def build_page(folder: Path, manifest: dict[str, Any], test: str) -> Page:
    entry = (manifest.get("tests") or {}).get(test) or {}
    entry = entry if isinstance(entry, dict) else {}
    title = str(entry.get("title") or TITLES.get(test, test))
    if not TEST_ID.fullmatch(test) or not TEST_ID.fullmatch(str(entry.get("dir") or test)):
        message = f"pts.json: test id {test!r} (or its dir) is not a plain folder name; not rendered"
        return Page(re.sub(r"[^A-Za-z0-9_-]", "_", test), title, "failed", message, blocks=[note(message, "missing")])
    tf = TestFolder(folder, test, entry)
    if not tf.dir.is_dir():
        status, message = status_text(test, entry, None, None)
        if status not in ("not run", "pending"):
            status, message = "missing", f"missing: {tf.rel}/ not found in the report folder"
        level = "info" if status in UNFINISHED else "missing"
        return Page(test, title, status, message, header(manifest, test, None), [note(message, level)])
    unfinished = entry.get("status") in UNFINISHED
    result = tf.json("result.json", quiet=unfinished)
    unfinished = unfinished or (result or {}).get("status") in UNFINISHED
    tf.finished = not unfinished  # files a running or stopped test has not written yet are no fault
    steady = tf.json("steady.json", quiet=True)
    if unfinished and not (result or {}).get("rounds_run"):
        result = {**(result or {}), "rounds_run": tf.rounds_done()}  # result.json not written yet: count rounds.csv
    status, message = status_text(test, entry, result, steady)
    sink = Sink(folder, test, [f"{tf.rel}/{n}" for n in ("rounds.csv", "steady.json", "table.csv", "result.json")], tf.rel)
    maker = PAGES.get(test)
    blocks = maker(tf, sink, result) if maker else [note(f"no page for test {test!r} in this version of the report")]
    files, other = tf.files()
    facts = {"rounds": str((result or {}).get("rounds_run", "–")), "wall_s": fmt(entry.get("wall_s")), "sim_s": fmt(entry.get("sim_s"))}
    extra_notes = _obj((result or {}).get("extra")).get("notes") or []
    for text in [extra_notes] if isinstance(extra_notes, str) else extra_notes:
        blocks.insert(0, note(str(text)))  # e.g. what a scaled twin changes for this test
    if status == "interrupted":
        blocks.insert(0, note(f"This test was interrupted: {message}. The figures show the rounds done so far.", "warn"))
    if status == "not steady":
        blocks.insert(0, note(f"{message}: the results are the averages of the last 5 rounds, NOT in steady state.", "warn"))
    return Page(test, title, status, message, header(manifest, test, result), tf.notes + blocks, files, other, facts)


# ---------------------------------------------------------------------------------------
# HTML


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fmt"] = fmt
    env.tests["numeric"] = lambda v: bool(NUMERIC.fullmatch(str(v)))
    return env


def _write_html(path: Path, template: str, **context: Any) -> Path:
    html = _environment().get_template(template).render(**context)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, path)  # a reader (or a browser reload) never sees half a report
    return path


def _software() -> str:
    try:
        from importlib.metadata import version

        return f"ssdtwin {version('ssdtwin')}"
    except Exception:  # not installed (PYTHONPATH use): the report still renders
        return "ssdtwin"


def render(folder: Path, pdf: bool = False) -> Path:
    """Write <folder>/index.html (and the figures' files under <folder>/<test>/plots/);
    with ``pdf``, also <folder>/report.pdf through headless Chromium. Returns index.html."""
    folder = Path(folder)
    manifest = load_manifest(folder)
    pages = [build_page(folder, manifest, t) for t in _test_ids(manifest)]
    device = manifest.get("device") or {}
    title = " ".join(str(x) for x in (device.get("vendor"), device.get("model")) if x) or folder.name
    banner = []
    if manifest.get("interrupted"):
        banner.append(note("The run was interrupted (Ctrl-C): the report holds the rounds done so far.", "warn"))
    elif not manifest.get("complete"):
        banner.append(note("The run is not complete (still running, or it stopped): the report holds the rounds done so far.", "warn"))
    if not pages:
        banner.append(note("pts.json lists no tests.", "missing"))
    banner += [note(text, "missing") for text in manifest.get("_problems") or []]
    run_header = header(manifest, "", None)
    index = _write_html(
        folder / "index.html",
        "report.html.j2",
        title=f"SNIA PTS report: {title}",
        manifest=manifest,
        pages=pages,
        banner=banner,
        generated_by=_software(),
        device_items=run_header[0][1],
        platform_items=run_header[1][1],
        settings_items=[(k, v) for k, v in run_header[2][1] if k != "WDPC"] + _tc_qd_items(manifest),
    )
    if pdf:
        print_pdf(index, folder / "report.pdf")
    return index


def _tc_qd_items(manifest: dict[str, Any]) -> list[tuple[str, str]]:
    tc = (manifest.get("settings") or {}).get("tc_qd")
    if isinstance(tc, dict):
        return [(f"TC/QD {TITLES.get(t, t)}", _tc_qd_text(v)) for t, v in tc.items()]
    return [("TC/QD", str(tc))] if tc else []


def find_chromium() -> Optional[str]:
    override = os.environ.get("SSDTWIN_CHROMIUM")
    if override:
        return override
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def print_pdf(html: Path, pdf: Path, timeout_s: float = 120.0) -> Path:
    """Print a rendered report to PDF with headless Chromium (one test per page)."""
    chromium = find_chromium()
    if chromium is None:
        raise PtsError(f"PDF needs Chromium (Debian: apt install chromium; or set SSDTWIN_CHROMIUM); {html} is written")
    cmd = [
        chromium,
        "--headless=new",
        "--disable-gpu",
        "--no-sandbox",
        "--no-pdf-header-footer",
        f"--print-to-pdf={pdf}",
        html.resolve().as_uri(),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PtsError(f"{chromium}: could not print {html} to PDF: {_one_line(e)}") from None
    if proc.returncode != 0 or not pdf.is_file() or pdf.stat().st_size == 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise PtsError(f"{chromium}: printing {html} to PDF failed (exit {proc.returncode}): {last}")
    return pdf


# ---------------------------------------------------------------------------------------
# compare


@dataclass
class Side:
    label: str
    folder: Path
    manifest: dict[str, Any]

    def test(self, test: str) -> Optional[TestFolder]:
        entry = (self.manifest.get("tests") or {}).get(test)
        if not isinstance(entry, dict):
            return None
        tf = TestFolder(self.folder, test, entry)
        return tf if tf.dir.is_dir() else None


def _side_label(tag: str, folder: Path, manifest: dict[str, Any]) -> str:
    model = (manifest.get("device") or {}).get("model") or ""
    return f"{tag}: {model} ({folder.name})" if model else f"{tag}: {folder.name}"


def diff_table(a: pd.DataFrame, b: pd.DataFrame, keys: list[str], values: list[str]) -> pd.DataFrame:
    """One row per key: A, B and (B − A) / A in % for every value column."""
    merged = a[keys + values].merge(b[keys + values], on=keys, how="outer", suffixes=(" A", " B"))
    out = merged[keys].copy()
    for v in values:
        va = merged[f"{v} A"].astype(float)
        vb = merged[f"{v} B"].astype(float)
        out[f"{v} A"] = va
        out[f"{v} B"] = vb
        out[f"{v} Δ%"] = ((vb / va - 1) * 100).round(1)
    return out


def _both(
    a: Optional[TestFolder], b: Optional[TestFolder], name: str, required: tuple[str, ...]
) -> Optional[tuple[pd.DataFrame, pd.DataFrame]]:
    if a is None or b is None:
        return None
    fa, fb = a.csv(name, required), b.csv(name, required)
    return (fa, fb) if fa is not None and fb is not None else None


def _tracking_frame(tf: TestFolder) -> Optional[pd.DataFrame]:
    steady = tf.json("steady.json", quiet=True)
    if not steady:
        return None
    rows = [
        {"round": r, "variable": v.get("name"), "value": x}
        for v in steady.get("variables") or []
        for r, x in zip(v.get("rounds") or [], v.get("values") or [])
    ]
    return pd.DataFrame(rows) if rows else None


def compare_test(test: str, sa: Side, sb: Side, sink: Sink) -> list[Block]:
    a, b = sa.test(test), sb.test(test)
    blocks: list[Block] = []
    if a is None or b is None:
        missing = [s.label for s, t in ((sa, a), (sb, b)) if t is None]
        return [note(f"{test}: not in {' and '.join(missing)}; nothing to compare", "missing")]
    ta, tb = _tracking_frame(a), _tracking_frame(b)
    if ta is not None and tb is not None:
        blocks.append(
            sink.figure(
                lambda: plots.convergence(
                    "tracking",
                    "Tracking variables per round",
                    [Series(sa.label, ta), Series(sb.label, tb)],
                    "value",
                    "value",
                    "variable",
                    "variable",
                    str,
                ),
                "tracking variables",
            )
        )
    blocks += COMPARERS[test](a, b, sa, sb, sink)
    blocks = a.notes + b.notes + blocks
    return blocks


def _cmp_iops(a: TestFolder, b: TestFolder, sa: Side, sb: Side, sink: Sink) -> list[Block]:
    pair = _both(a, b, "table.csv", ("bs_bytes",))
    if pair is None:
        return []
    ta, tb = pair
    mixes = [m for m in MIX_ORDER if m in ta.columns and m in tb.columns]
    long_a = ta.melt(id_vars=["bs_bytes"], value_vars=mixes, var_name="mix", value_name="iops")
    long_b = tb.melt(id_vars=["bs_bytes"], value_vars=mixes, var_name="mix", value_name="iops")
    d = diff_table(long_a, long_b, ["bs_bytes", "mix"], ["iops"])
    d = d.assign(order=d["mix"].map(MIX_ORDER.index)).sort_values(["bs_bytes", "order"], ascending=[False, True]).drop(columns="order")
    pivot = (
        d.pivot(index="bs_bytes", columns="mix", values="iops Δ%")
        .reindex(columns=mixes)
        .reset_index()
        .sort_values("bs_bytes", ascending=False)
    )
    return [
        sink.figure(lambda: plots.iops_2d([Series(sa.label, ta), Series(sb.label, tb)]), "IOPS 2D"),
        sink.figure(lambda: plots.diff_heatmap("iops-diff", "IOPS: B against A (%)", pivot, "bs_bytes", mixes, bs_text), "IOPS difference"),
        table_block(
            "IOPS: A, B and the difference", d.assign(bs_bytes=d["bs_bytes"].map(bs_text)).rename(columns={"bs_bytes": "bs"}), max_rows=80
        ),
    ]


def _cmp_tp(a: TestFolder, b: TestFolder, sa: Side, sb: Side, sink: Sink) -> list[Block]:
    pair = _both(a, b, "table.csv", ("bs_bytes", "read_mb_s", "write_mb_s"))
    if pair is None:
        return []
    ta, tb = pair
    d = diff_table(ta, tb, ["bs_bytes"], ["read_mb_s", "write_mb_s"])
    return [
        sink.figure(lambda: plots.tp_bars([Series(sa.label, ta), Series(sb.label, tb)]), "throughput bars"),
        table_block("Throughput (MB/s): A, B and the difference", d),
    ]


def _cmp_lat(a: TestFolder, b: TestFolder, sa: Side, sb: Side, sink: Sink) -> list[Block]:
    blocks: list[Block] = []
    pair = _both(a, b, "table.csv", ("bs_bytes", "mix", "mean_us", "max_us", "p99_99_us"))
    if pair is not None:
        ta, tb = pair
        blocks.append(sink.figure(lambda: plots.lat_bars([Series(sa.label, ta), Series(sb.label, tb)]), "latency bars"))
        blocks.append(
            table_block(
                "Response times (µs): A, B and the difference", diff_table(ta, tb, ["bs_bytes", "mix"], ["mean_us", "max_us", "p99_99_us"])
            )
        )
    blocks += _cmp_hists(a, b, sa, sb, sink)
    return blocks


def _cmp_hists(a: TestFolder, b: TestFolder, sa: Side, sb: Side, sink: Sink) -> list[Block]:
    names_b = {p.name for p in b.hist_files()}
    panels = []
    for path in a.hist_files():
        pair = _both(a, b, path.name, ("lo_us", "hi_us", "count")) if path.name in names_b else None
        if pair is not None:
            panels.append((path.stem[len("hist-") :], [Series(sa.label, pair[0]), Series(sb.label, pair[1])]))
    if not panels:
        return []
    title = f"{TITLES.get(a.test, a.test)}: response-time histograms"
    return [sink.figure(partial(plots.histograms, "histograms", title, panels), "histograms")]


def _cmp_wsat(a: TestFolder, b: TestFolder, sa: Side, sb: Side, sink: Sink) -> list[Block]:
    pair = _both(a, b, "table.csv", ("segment", "t_s", "drive_fills", "iops"))
    if pair is None:
        return []
    s = [Series(sa.label, pair[0]), Series(sb.label, pair[1])]
    d = diff_table(wsat_summary(pair[0]), wsat_summary(pair[1]), ["quantity"], ["value"])
    return [
        sink.figure(lambda: plots.wsat(s, "time"), "WSAT vs time"),
        sink.figure(lambda: plots.wsat(s, "fills"), "WSAT vs drive fills"),
        sink.figure(lambda: plots.wsat(s, "fills", log=True), "WSAT vs drive fills (log)"),
        table_block("WSAT summary: A, B and the difference", d),
        *_cmp_hists(a, b, sa, sb, sink),
    ]


def _cmp_hir(a: TestFolder, b: TestFolder, sa: Side, sb: Side, sink: Sink) -> list[Block]:
    pair = _both(a, b, "table.csv", ("wait_s", "phase", "t_s", "iops"))
    if pair is None:
        return []
    ba = hir_baseline(a.json("result.json", quiet=True), a.csv("rounds.csv"))
    bb = hir_baseline(b.json("result.json", quiet=True), b.csv("rounds.csv"))
    s = [Series(sa.label, pair[0]), Series(sb.label, pair[1])]
    d = diff_table(
        hir_summary(pair[0], ba), hir_summary(pair[1], bb), ["wait_s"], ["access A mean IOPS", "access C mean IOPS", "baseline IOPS"]
    )
    return [sink.figure(lambda: plots.hir_wait_states(s, [ba, bb]), "HIR wait states"), table_block("HIR: A, B and the difference", d)]


def _cmp_curve(a: TestFolder, b: TestFolder, sa: Side, sb: Side, sink: Sink) -> list[Block]:
    pair = _both(a, b, "table.csv", ("numjobs", "iodepth", "iops", "lat_mean_us", "lat_p99_us", "lat_p99_9_us"))
    if pair is None:
        return []
    d = diff_table(pair[0], pair[1], ["numjobs", "iodepth"], ["iops", "lat_mean_us", "lat_p99_us", "lat_p99_9_us"])
    return [
        sink.figure(lambda: plots.curve([Series(sa.label, pair[0]), Series(sb.label, pair[1])]), "latency vs IOPS"),
        table_block("Latency vs IOPS: A, B and the difference", d),
    ]


def _cmp_xsr(a: TestFolder, b: TestFolder, sa: Side, sb: Side, sink: Sink) -> list[Block]:
    blocks: list[Block] = []
    req = ("segment", "phase", "element", "t_start_s", "t_end_s", "iops", "write_bw_bytes_s")
    pair = _both(a, b, "rounds.csv", req)
    if pair is not None:
        s = [Series(lbl, _with_mb_s(f)) for lbl, f in zip((sa.label, sb.label), pair)]
        blocks.append(sink.figure(lambda: plots.xsr_time(s, "mb_s", "MB/s", "xsr-tp", "XSR: throughput vs time"), "XSR throughput"))
    tables = _both(a, b, "table.csv", ("access_group", "tp_end_mb_s"))
    if tables is not None:
        cols = [c for c in ("tp_end_mb_s", "iops_end", "art_peak_us", "mrt_peak_us") if c in tables[0].columns and c in tables[1].columns]
        blocks.append(table_block("XSR: A, B and the difference", diff_table(tables[0], tables[1], ["access_group"], cols)))
    return blocks


def _cmp_di(a: TestFolder, b: TestFolder, sa: Side, sb: Side, sink: Sink) -> list[Block]:
    pair = _both(a, b, "table.csv", ("numjobs", "iodepth", "iops", "lat_mean_us"))
    if pair is None:
        return _cmp_hists(a, b, sa, sb, sink)
    s = [Series(sa.label, pair[0]), Series(sb.label, pair[1])]
    name = a.test.upper()
    d = diff_table(pair[0], pair[1], ["numjobs", "iodepth"], ["iops", "lat_mean_us"])
    return [
        sink.figure(lambda: plots.demand_variation(s, f"{name}: demand variation"), "demand variation"),
        sink.figure(lambda: plots.demand_intensity(s, f"{name}: demand intensity"), "demand intensity"),
        table_block(f"{name}: A, B and the difference", d),
        *_cmp_hists(a, b, sa, sb, sink),
    ]


COMPARERS: dict[str, Callable[[TestFolder, TestFolder, Side, Side, Sink], list[Block]]] = {
    "iops": _cmp_iops,
    "tp": _cmp_tp,
    "lat": _cmp_lat,
    "wsat": _cmp_wsat,
    "hir": _cmp_hir,
    "curve": _cmp_curve,
    "xsr": _cmp_xsr,
    "cbw": _cmp_di,
    "dirth": _cmp_di,
}


def _prepare_out(out: Path, a: Path, b: Path) -> None:
    for src in (a, b):
        if out.resolve() == src.resolve():
            raise PtsError(f"{out}: the comparison must go to its own folder, not into report {src}")
    if out.exists() and not out.is_dir():
        raise PtsError(f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        marker = out / "compare.json"
        try:
            ok = json.loads(marker.read_text()).get("format") == COMPARE_FORMAT
        except (OSError, ValueError, AttributeError):
            ok = False
        if not ok:
            raise PtsError(f"{out}: exists, is not empty and is not a previous comparison (no compare.json); choose another folder")
    out.mkdir(parents=True, exist_ok=True)


def compare(a: Path, b: Path, out: Path) -> Path:
    """Write <out>/index.html: reports A and B side by side per figure, every table with
    both values and the difference in % of A, and the CSV/JSON behind each figure."""
    a, b, out = Path(a), Path(b), Path(out)
    ma, mb = load_manifest(a), load_manifest(b)
    _prepare_out(out, a, b)
    sa, sb = Side(_side_label("A", a, ma), a, ma), Side(_side_label("B", b, mb), b, mb)
    tests = [t for t in TESTS if t in _test_ids(ma) or t in _test_ids(mb)]
    tests += [t for t in _test_ids(ma) + _test_ids(mb) if t not in tests and t in COMPARERS]
    pages = []
    for test in tests:
        sink = Sink(out, test, [f"A: {a}/{test}", f"B: {b}/{test}"])
        status = []
        for side in (sa, sb):
            entry = (side.manifest.get("tests") or {}).get(test) or {}
            tf = side.test(test)
            result = tf.json("result.json", quiet=True) if tf else None
            steady = tf.json("steady.json", quiet=True) if tf else None
            status.append(f"{side.label}: {status_text(test, entry if isinstance(entry, dict) else {}, result, steady)[1]}")
        page = Page(test, TITLES.get(test, test), "compare", " · ".join(status), blocks=compare_test(test, sa, sb, sink))
        pages.append(page)
    headers = [(sa.label, header(ma, "", None)), (sb.label, header(mb, "", None))]
    (out / "compare.json").write_text(
        json.dumps({"format": COMPARE_FORMAT, "version": 1, "a": str(a.resolve()), "b": str(b.resolve()), "tests": tests}, indent=1)
    )

    def link(folder: Path) -> str:  # the report's page if it was rendered, else its manifest
        target = folder / "index.html" if (folder / "index.html").is_file() else folder / "pts.json"
        return Path(os.path.relpath(target.resolve(), out.resolve())).as_posix()

    return _write_html(
        out / "index.html",
        "compare.html.j2",
        title=f"SNIA PTS comparison: {sa.label} vs {sb.label}",
        pages=pages,
        headers=headers,
        sides=[(sa.label, link(a)), (sb.label, link(b))],
        generated_by=_software(),
    )


# ---------------------------------------------------------------------------------------
# python -m ssdtwin.pts.report


def main(argv: Optional[list[str]] = None) -> int:
    """Re-render a report folder: ``python -m ssdtwin.pts.report FOLDER [--pdf]``, or compare
    two: ``python -m ssdtwin.pts.report A B --compare OUT``. Prints the index.html path."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m ssdtwin.pts.report", description="Render (or compare) SNIA PTS report folders.")
    ap.add_argument("folders", nargs="+", type=Path, help="a report folder (or two with --compare)")
    ap.add_argument("--pdf", action="store_true", help="also print report.pdf with headless Chromium")
    ap.add_argument("--compare", type=Path, metavar="OUT", help="compare the two report folders into OUT")
    args = ap.parse_args(argv)
    try:
        if args.compare is not None:
            if len(args.folders) != 2:
                raise PtsError("--compare needs exactly two report folders")
            path = compare(args.folders[0], args.folders[1], args.compare)
        else:
            if len(args.folders) != 1:
                raise PtsError("render takes one report folder (use --compare OUT for two)")
            path = render(args.folders[0], pdf=args.pdf)
    except PtsError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    except KeyboardInterrupt:
        return 130
    sys.stdout.write(f"{path}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
