"""Two PTS reports side by side (``ssdtwin pts compare``; docs/pts-report.md, Comparing):
per figure A solid and B dashed, every table with A, B and the difference in % of A."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable, Optional
from urllib.parse import quote

import pandas as pd

from .. import plots
from ..plots import Series, bs_text, mixes_in
from ..records import FolderJson
from ..target import PtsError
from ..tests import TEST_IDS as TESTS
from ..tests import TITLES
from .pages import hir_baseline, hir_summary, shown_unit, tc_qd_of, test_ids, with_mb_s, wsat_summary
from .parts import (
    COMPARE_FORMAT,
    PRECONDITIONED,
    TEST_ID,
    Block,
    Page,
    Sink,
    TestFolder,
    header,
    load_manifest,
    note,
    software,
    status_text,
    table_block,
    write_html,
)


@dataclass
class Side:
    label: str
    folder: Path
    manifest: FolderJson

    def test(self, test: str) -> Optional[TestFolder]:
        entry = (self.manifest.get("tests") or {}).get(test)
        if not isinstance(entry, dict):
            return None
        tf = TestFolder(self.folder, test, entry)
        return tf if tf.dir.is_dir() else None


def _side_label(tag: str, folder: Path, manifest: FolderJson) -> str:
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


@dataclass
class Tracking:
    """steady.json's tracking variables as rows (round, variable, value) in the units the
    report shows (B/s as MB/s), and each variable's unit and measurement window."""

    frame: pd.DataFrame
    units: dict[str, str]
    windows: dict[str, Optional[tuple[int, int]]]


def _tracking_frame(tf: TestFolder) -> Optional[Tracking]:
    steady = tf.json("steady.json", quiet=True)
    if not steady:
        return None
    rows = []
    out = Tracking(pd.DataFrame(), {}, {})
    for v in steady.get("variables") or []:
        scale, unit = shown_unit(v.get("unit"))
        name = str(v.get("name"))
        win = v.get("window")
        out.units[name] = unit
        out.windows[name] = (int(win[0]), int(win[1])) if isinstance(win, list) and len(win) == 2 and None not in win else None
        rows += [{"round": r, "variable": name, "value": x * scale} for r, x in zip(v.get("rounds") or [], v.get("values") or [])]
    out.frame = pd.DataFrame(rows)
    return out if rows else None


def compare_test(test: str, sa: Side, sb: Side, sink: Sink) -> list[Block]:
    a, b = sa.test(test), sb.test(test)
    blocks: list[Block] = []
    if a is None or b is None:
        missing = [s.label for s, t in ((sa, a), (sb, b)) if t is None]
        return [note(f"{test}: not in {' and '.join(missing)}; nothing to compare", "missing")]
    ta, tb = _tracking_frame(a), _tracking_frame(b)
    if ta is not None and tb is not None:
        names = {**ta.windows, **tb.windows}
        blocks.append(
            sink.figure(
                lambda: plots.convergence(
                    "tracking",
                    "Tracking variables per round",
                    [Series(sa.label, ta.frame), Series(sb.label, tb.frame)],
                    "value",
                    "",
                    "variable",
                    "variable",
                    str,
                    panel_windows={v: [ta.windows.get(v), tb.windows.get(v)] for v in names},
                    panel_ylabels={v: ta.units.get(v) or tb.units.get(v) or "" for v in names},
                ),
                "tracking variables",
            )
        )
    blocks += COMPARERS[test](a, b, sa, sb, sink)
    qa, qb = tc_qd_of(a.json("result.json", quiet=True)), tc_qd_of(b.json("result.json", quiet=True))
    if qa and qb and qa != qb:  # the differences below are then the load's as much as the drives'
        blocks.insert(0, note(f"A ran this test at {qa}, B at {qb}: the figures compare different loads.", "warn"))
    blocks = a.notes + b.notes + blocks
    return blocks


def _cmp_iops(a: TestFolder, b: TestFolder, sa: Side, sb: Side, sink: Sink) -> list[Block]:
    pair = _both(a, b, "table.csv", ("bs_bytes",))
    if pair is None:
        return []
    ta, tb = pair
    mixes = [m for m in mixes_in(ta.columns) if m in tb.columns]
    long_a = ta.melt(id_vars=["bs_bytes"], value_vars=mixes, var_name="mix", value_name="iops")
    long_b = tb.melt(id_vars=["bs_bytes"], value_vars=mixes, var_name="mix", value_name="iops")
    d = diff_table(long_a, long_b, ["bs_bytes", "mix"], ["iops"])
    # Block sizes smallest first, as the report page's IOPS table (the SNIA report's order).
    d = d.assign(order=d["mix"].map(mixes.index)).sort_values(["bs_bytes", "order"]).drop(columns="order")
    pivot = d.pivot(index="bs_bytes", columns="mix", values="iops Δ%").reindex(columns=mixes).reset_index().sort_values("bs_bytes")
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
        tc_qd = {tc_qd_of(a.json("result.json", quiet=True)), tc_qd_of(b.json("result.json", quiet=True))}
        title = tc_qd.pop() if len(tc_qd) == 1 else ""  # one TC/QD in the title only when A and B share it
        blocks.append(sink.figure(lambda: plots.lat_bars([Series(sa.label, ta), Series(sb.label, tb)], title), "latency bars"))
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
        s = [Series(lbl, with_mb_s(f)) for lbl, f in zip((sa.label, sb.label), pair)]
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
            previous = json.loads(marker.read_text())
            ok = previous.get("format") == COMPARE_FORMAT
        except (OSError, ValueError, AttributeError):
            ok = False
        if not ok:
            raise PtsError(f"{out}: exists, is not empty and is not a previous comparison (no compare.json); choose another folder")
        _remove_figures(out, previous.get("tests"))
    out.mkdir(parents=True, exist_ok=True)


def _remove_figures(out: Path, tests: object) -> None:
    """The previous comparison's figure files (<test>/plots/*.png|csv|json): a test this
    comparison does not have must not leave them behind as if they were its."""
    for test in tests if isinstance(tests, list) else []:
        if not isinstance(test, str) or not TEST_ID.fullmatch(test):
            continue  # never a path out of the folder
        plots_dir = out / test / "plots"
        for f in plots_dir.glob("*"):
            if f.is_file() and f.suffix in (".png", ".csv", ".json"):
                f.unlink()
        for d in (plots_dir, out / test):
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()


def compare(a: Path, b: Path, out: Path) -> Path:
    """Write <out>/index.html: reports A and B side by side per figure, every table with
    both values and the difference in % of A, and the CSV/JSON behind each figure."""
    a, b, out = Path(a), Path(b), Path(out)
    ma, mb = load_manifest(a), load_manifest(b)
    _prepare_out(out, a, b)
    sa, sb = Side(_side_label("A", a, ma), a, ma), Side(_side_label("B", b, mb), b, mb)
    tests = [t for t in TESTS if t in test_ids(ma) or t in test_ids(mb)]
    tests += [t for t in test_ids(ma) + test_ids(mb) if t not in tests and t in COMPARERS]
    pages = []
    for test in tests:
        sink = Sink(out, test, [f"A: {a}/{test}", f"B: {b}/{test}"])
        status = []
        for side in (sa, sb):
            entry = (side.manifest.get("tests") or {}).get(test) or {}
            tf = side.test(test)
            result = tf.json("result.json", quiet=True) if tf else None
            steady = tf.json("steady.json", quiet=True) if tf else None
            progress = tf.progress() if tf and test in PRECONDITIONED else None
            status.append(f"{side.label}: {status_text(test, entry if isinstance(entry, dict) else {}, result, steady, progress)[1]}")
        page = Page(test, TITLES.get(test, test), "compare", " · ".join(status), blocks=compare_test(test, sa, sb, sink))
        pages.append(page)
    headers = [(sa.label, header(ma, "", None)), (sb.label, header(mb, "", None))]
    (out / "compare.json").write_text(
        json.dumps({"format": COMPARE_FORMAT, "version": 1, "a": str(a.resolve()), "b": str(b.resolve()), "tests": tests}, indent=1)
    )

    def link(folder: Path) -> str:  # the report's page if it was rendered, else its manifest
        target = folder / "index.html" if (folder / "index.html").is_file() else folder / "pts.json"
        return quote(Path(os.path.relpath(target.resolve(), out.resolve())).as_posix())  # a folder name may hold "#", "%", "?"

    return write_html(
        out / "index.html",
        "compare.html.j2",
        title=f"SNIA PTS comparison: {sa.label} vs {sb.label}",
        pages=pages,
        headers=headers,
        sides=[(sa.label, link(a)), (sb.label, link(b))],
        generated_by=software(),
    )
