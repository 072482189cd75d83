"""The parts every PTS report page is made of: what the template shows (blocks, pages),
a report folder read defensively (a missing or damaged file costs one note, never the
report), the figure sink (PNG, CSV and JSON per figure), cell formatting, the status line,
the SNIA header, and the HTML writer."""

from __future__ import annotations

import base64
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional
from urllib.parse import quote

import jinja2
import pandas as pd

from ..plots import Plot
from ..records import FolderJson
from ..target import PtsError

FORMAT = "ssdtwin-pts"
COMPARE_FORMAT = "ssdtwin-pts-compare"
WDPC = {
    "iops": "the test's own stimulus in rounds until steady state",
    "tp": "the test's own stimulus in rounds until steady state",
    "lat": "the test's own stimulus in rounds until steady state",
    "wsat": "none (WSAT starts fresh-out-of-box)",
    "hir": "RND 4KiB W in rounds until steady state (the pre-HIR baseline)",
    "curve": "RND 4KiB 70/30 at the test's TC/QD (default TC16/QD32) in rounds until steady state",
    "xsr": "none (XSR starts fresh-out-of-box)",
    "cbw": "100% W of the CBW pattern at TC32/QD32 in rounds until steady state, then a pre-write before every matrix round",
    "dirth": "100% W of the DIRTH pattern at TC32/QD32 in rounds until steady state, then a pre-write before every matrix round",
}
UNFINISHED = ("running", "interrupted", "pending", "not run")
SEGMENTED = ("wsat", "xsr")  # tests run in segments, not rounds: their window is segments
# Tests whose result.json rounds_run counts their own preconditioning rounds, then run their
# steps as rounds.csv segments: HIR's bursts, the curve's points. What a step is called.
PRECONDITIONED = {"hir": "burst", "curve": "point"}
TEST_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")  # a test's id and folder: never a path out of the report
NUMERIC = re.compile(r"[-+−]?[\d,.]+(e[-+]?\d+)?|–|…")


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


def load_manifest(folder: Path) -> FolderJson:
    """pts.json of a report folder; PtsError (one line) when the folder is not a report."""
    path = folder / "pts.json"
    if not folder.is_dir():
        raise PtsError(f"{folder}: not a directory (a PTS report folder holds pts.json)")
    if not path.is_file():
        raise PtsError(f"{folder}: not a PTS report (no pts.json)")
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise PtsError(f"{path}: unreadable: {one_line(e)}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise PtsError(f'{path}: not a PTS report (field "format" must be "{FORMAT}")')
    problems = []
    for key in ("device", "platform", "settings", "tests"):  # the page reads these as objects
        if key in doc and not isinstance(doc[key], dict):
            problems.append(f'pts.json: field "{key}" is not an object; ignored')
            doc[key] = {}
    problems += _number_problems(doc)
    tests = doc.setdefault("tests", {})
    for test, entry in list(tests.items()):
        if not isinstance(entry, dict):
            problems.append(f"pts.json: tests.{test} is not an object; ignored")
            tests[test] = {}
    doc["_problems"] = problems
    return doc


def _whole(value: Any, lo: int, hi: int) -> bool:
    """A whole number from ``lo`` to ``hi`` (a bool, a float, a string is none)."""
    return isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi


def _number_problems(doc: FolderJson) -> list[str]:
    """pts.json's numbers the page computes with, each one line naming the field and its
    range when it is not one (a damaged or hand-edited file: nan or "abc" as a queue depth,
    inf as a capacity were a ValueError/OverflowError traceback of 59 lines); the page shows
    such a value as written."""
    out = []
    tc_qd = as_object(doc.get("settings")).get("tc_qd")
    for test, v in tc_qd.items() if isinstance(tc_qd, dict) else ():
        pair = (v.get("tc"), v.get("qd")) if isinstance(v, dict) else tuple(v) if isinstance(v, list) else (v,)
        if len(pair) != 2 or not (_whole(pair[0], 1, 256) and _whole(pair[1], 1, 65536)):
            out.append(f"pts.json: settings.tc_qd.{test} is not threads 1..256 x queue depth 1..65536 (whole numbers); shown as written")
    device = as_object(doc.get("device"))
    for key in ("capacity_bytes", "drive_capacity_bytes", "unallocated_bytes", "lba_bytes"):
        if key in device and device[key] is not None and not _whole(device[key], 0, 2**64):
            out.append(f"pts.json: device.{key} is not a whole number of bytes from 0 to 2^64; shown as written")
    return out


def as_object(value: Any) -> FolderJson:
    """A JSON object from a document the harness wrote, or {} when it is anything else."""
    return value if isinstance(value, dict) else {}


def one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")


class TestFolder:
    """The files of one test; every read notes what is missing or unreadable."""

    def __init__(self, root: Path, test: str, entry: FolderJson) -> None:
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
            self._missing(name, f"unreadable ({one_line(e)})")
            return None
        absent = [c for c in required if c not in frame.columns]
        if absent:
            self._missing(name, f"columns {', '.join(absent)} absent in")
            return None
        return frame

    def json(self, name: str, quiet: bool = False) -> Optional[FolderJson]:
        path = self.dir / name
        if not path.is_file():
            if not quiet:
                self._missing(name)
            return None
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            self._missing(name, f"unreadable ({one_line(e)})")
            return None
        if not isinstance(doc, dict):
            self._missing(name, "not a JSON object")
            return None
        return doc

    def progress(self) -> Optional[tuple[str, int]]:
        """How far rounds.csv goes: ("segment", the last) for WSAT, HIR and the curve once
        they have segments (HIR's bursts, the curve's points), else ("round", the last round)."""
        try:
            frame = pd.read_csv(self.dir / "rounds.csv")
            column = "segment" if self.test in ("wsat", *PRECONDITIONED) and frame["segment"].notna().any() else "round"
            return column, int(frame[column].max())
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def rounds_done(self) -> Optional[int]:
        """The last round (WSAT: segment) in rounds.csv, for a test without result.json; HIR's
        and the curve's rounds_run counts their preconditioning rounds, as the harness's does."""
        if self.test in PRECONDITIONED:
            try:
                return int(pd.read_csv(self.dir / "rounds.csv")["round"].max())
            except (OSError, ValueError, KeyError, TypeError):
                return None
        done = self.progress()
        return done[1] if done else None

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


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:  # open: a figure's data rows, its own columns
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
            return Block("note", text=f"{what}: could not be drawn ({one_line(e)})", level="warn")
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
            name=f"{self.test}-{plot.name}",  # the page's anchor: every test has a "convergence"
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


def status_text(
    test: str, entry: FolderJson, result: Optional[FolderJson], steady: Optional[FolderJson], progress: Optional[tuple[str, int]] = None
) -> tuple[str, str]:
    """(status, one-line text) for the summary: "steady at round 8 (window 4–8)", ...;
    ``progress`` (TestFolder.progress) says how far a stopped or running HIR or curve got."""
    status = str((result or {}).get("status") or entry.get("status") or "missing")
    rounds = (result or {}).get("rounds_run")
    window = (result or {}).get("window") or (steady or {}).get("window")
    win = f" (measurement window rounds {window[0]}–{window[1]})" if isinstance(window, list) and len(window) == 2 else ""
    per_pass = pass_windows(steady)
    if per_pass:
        win = f" (measurement windows: {per_pass})"
    max_rounds = (steady or {}).get("max_rounds", 25)
    unit = "segment" if test in ("wsat", "hir") else "round"
    if test in PRECONDITIONED and progress:  # rounds_run counts the preconditioning rounds, not the bursts or points
        unit = PRECONDITIONED[test] if progress[0] == "segment" else "preconditioning round"
        rounds = progress[1]
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


def pass_windows(steady: Optional[FolderJson]) -> str:
    """A test of several passes (Throughput: one per block size) judges each in its own
    window, and steady.json's top-level window spans them all (rounds 1-8 for passes steady
    in 1-5 and 4-8): "tp-128k rounds 1–5, tp-1m rounds 4–8" when they differ, else ""."""
    passes = [p for p in (steady or {}).get("passes") or [] if isinstance(p, dict)]
    windows = [(str(p.get("pass")), p.get("window")) for p in passes]
    shown = [(name, w) for name, w in windows if isinstance(w, list) and len(w) == 2]
    if len(shown) < 2 or len({tuple(w) for _, w in shown}) == 1:
        return ""
    return ", ".join(f"{name} rounds {w[0]}–{w[1]}" for name, w in shown)


def _items(doc: FolderJson, keys: list[tuple[str, str]]) -> list[tuple[str, str]]:
    out = []
    for key, label in keys:
        v = doc.get(key)
        if v not in (None, "", {}, []):
            out.append((label, _value_text(key, v)))
    return out


def tc_qd_text(v: Any) -> str:
    """ "TC 4 x QD 32 (OIO 128)"; without the OIO when either is not a whole number (a damaged
    file's: load_manifest names it)."""
    if isinstance(v, dict) and {"tc", "qd"} <= set(v):
        tc, qd = v["tc"], v["qd"]
    elif isinstance(v, (list, tuple)) and len(v) == 2:
        tc, qd = v
    else:
        return str(v)
    if not (_whole(tc, 0, 2**32) and _whole(qd, 0, 2**32)):
        return f"TC {tc} x QD {qd}"
    oio = v.get("oio", tc * qd) if isinstance(v, dict) else tc * qd
    return f"TC {tc} x QD {qd} (OIO {oio})"


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


_UNITS = {"_s": "s", "_us": "µs", "_bytes": "bytes", "_pct": "%"}


def _unit_label(key: str) -> str:
    """A test setting's label from its key, its unit in brackets: ``waits_s`` → "waits (s)"
    (the HIR header said "waits s 5.0, 10.0", "burst s 5.0")."""
    for suffix, unit in _UNITS.items():
        if key.endswith(suffix):
            return f"{key[: -len(suffix)].replace('_', ' ')} ({unit})"
    return key.replace("_", " ")


def _value_text(key: str, v: Any) -> str:
    if key == "tc_qd":
        return tc_qd_text(v)
    if key in ("capacity_bytes", "drive_capacity_bytes", "unallocated_bytes") and _whole(v, 0, 2**64):
        return f"{v / 1e9:,.1f} GB ({int(v):,} bytes)"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, dict):
        return "; ".join(f"{k}: {_value_text(k, x)}" for k, x in v.items())
    if isinstance(v, list):
        return ", ".join(str(x) for x in v)
    return str(v)


_FIRMWARE_SPEC = re.compile(r", (preset (?P<preset>\S+)|spec differing from preset (?P<edited>\S+) \(|spec (?P<file>\S+) \(not a preset\))")


def spec_text(device: FolderJson) -> str:
    """What a twin is made from, for the header: "preset NAME (digest D)" or "spec file NAME,
    not a preset's values (digest D)" from pts.json ``device.spec``. A pts.json from before it was
    recorded held the spec's name in ``device.preset`` whatever it was: its Firmware text
    ("preset NAME", "spec differing from preset NAME (...)", "spec NAME (not a preset)")
    says which, without a digest; "" when neither says (a real device)."""
    spec = as_object(device.get("spec"))
    name, origin, digest = spec.get("name"), spec.get("origin"), spec.get("digest")
    if not (isinstance(name, str) and origin in ("preset", "spec file")):
        m = _FIRMWARE_SPEC.search(str(device.get("firmware") or "")) if device.get("simulated") else None
        if not m:
            return ""
        name, origin, digest = (
            m.group("preset") or m.group("edited") or m.group("file"),
            "preset" if m.group("preset") else "spec file",
            None,
        )
    dig = f"digest {digest}" if isinstance(digest, str) and digest else "digest not recorded"
    if origin == "preset":
        return f"preset {name} ({dig})"
    return f"spec file {name}, not a preset's values ({dig})"


def header(
    manifest: FolderJson, test: str, result: Optional[FolderJson], steady: Optional[FolderJson] = None
) -> list[tuple[str, list[tuple[str, str]]]]:
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
    made = spec_text(device)
    if made:
        dev.append(("Drive spec", made))
    # A real block device: what the kernel reports (docs/pts-real.md, "What the report header
    # records"); PTS-E wants the write cache disabled, and the header must say if it was not.
    dev += _items(
        as_object(device.get("extra")),
        [
            ("namespace", "Namespace (NSID)"),
            ("drive_capacity_bytes", "Drive capacity (TNVMCAP)"),
            ("unallocated_bytes", "In no namespace (UNVMCAP; its NAND is spare for GC)"),
            ("iu_bytes", "Indirection unit (bytes)"),
            ("write_cache", "Write cache (kernel)"),
            ("scheduler", "I/O scheduler"),
            ("rotational", "Rotational"),
            ("backing_file", "Backing file"),
        ],
    )
    plat = _items(
        manifest.get("platform") or {}, [("host", "Host"), ("os", "OS"), ("cpu", "CPU"), ("software", "Test software"), ("fio", "fio")]
    )
    s = dict(manifest.get("settings") or {})
    tc = s.pop("tc_qd", None)
    if device and not device.get("simulated"):
        s.pop("seed", None)  # the real fio draws its own seeds (randrepeat=0): --seed is the twin's
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
            # --jobs N: every test started from the image as it was, not after the tests
            # before it (docs/pts.md), which a reader comparing two reports must know.
            ("jobs", "Tests at once (--jobs)"),
            ("image", "Image"),
        ],
    )
    if isinstance(tc, dict) and tc.get(test):
        sets.insert(3, ("TC/QD", tc_qd_text(tc[test])))
    elif isinstance(tc, str):
        sets.insert(3, ("TC/QD", tc))
    for k, v in as_object((result or {}).get("settings")).items():
        label = _SETTING_LABELS.get(k) or _unit_label(k)
        if test == "xsr" and k == "segment_s":  # the longest: each group runs in equal segments of at most this
            label = "segment, longest (s)"
        sets = [(lbl, x) for lbl, x in sets if lbl != label] + [(label, _value_text(k, v))]
    if test:  # a run's header (the summary, compare) has no one WDPC: each test has its own
        sets.insert(0, ("WDPC", WDPC.get(test, "none")))
    win = (result or {}).get("window")
    if pass_windows(steady):
        sets.append(("Measurement windows", pass_windows(steady)))
    elif isinstance(win, list) and len(win) == 2:
        unit = "segments" if test in SEGMENTED else "rounds"  # WSAT, XSR: the last 5 segments
        sets.append(("Measurement window", f"{unit} {win[0]}–{win[1]}"))
    return [("Device under test", dev), ("Test platform", plat), ("Test settings", sets)]


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


def write_html(path: Path, template: str, **context: Any) -> Path:
    html = _environment().get_template(template).render(**context)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, path)  # a reader (or a browser reload) never sees half a report
    return path


def software() -> str:
    try:
        from importlib.metadata import version

        return f"ssdtwin {version('ssdtwin')}"
    except Exception:  # not installed (PYTHONPATH use): the report still renders
        return "ssdtwin"
