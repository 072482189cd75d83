"""One page per PTS test (IOPS, Throughput, Latency, WSAT, HIR, the response-time curve,
XSR, CBW and DIRTH): the steady-state figures, the tabular result and the test's own
figures. ``PAGES`` maps a test id to its page; ``build_page`` adds the status and header."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Callable, Optional, cast

import pandas as pd

from .. import plots
from ..plots import Series, bs_text, mixes_in
from ..records import FolderJson, RoundRow
from ..tables import xsr_recovery_text
from ..tests import TITLES
from .parts import (
    PRECONDITIONED,
    TEST_ID,
    UNFINISHED,
    Block,
    Page,
    Sink,
    TestFolder,
    as_object,
    fmt,
    header,
    note,
    status_text,
    table_block,
)


def shown_unit(unit: object) -> tuple[float, str]:
    """(scale, unit) a steady.json variable's values are shown in: B/s as MB/s (10^6 B/s, the
    unit the tracking variables' names give), us as µs."""
    if unit == "B/s":
        return 1e-6, "MB/s"
    if unit == "us":
        return 1.0, "µs"
    return 1.0, str(unit or "")


def _tracking_blocks(sink: Sink, steady: Optional[FolderJson], scale: float, unit: str) -> list[Block]:
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


def _steady_sentence(steady: FolderJson) -> str:
    if steady.get("steady"):
        return f"All tracking variables are steady at round {steady.get('steady_round')}."
    bad = [str(v.get("name")) for v in steady.get("variables") or [] if not v.get("steady")]
    return "Not in steady state: " + ", ".join(bad) + "." if bad else "Not in steady state."


def _window_of(steady: Optional[FolderJson], result: Optional[FolderJson]) -> Optional[tuple[int, int]]:
    w = (steady or {}).get("window") or (result or {}).get("window")
    return (int(w[0]), int(w[1])) if isinstance(w, list) and len(w) == 2 and None not in w else None


def page_iops(tf: TestFolder, sink: Sink, result: Optional[FolderJson]) -> list[Block]:
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
        mixes = mixes_in(table.columns)
        # The SNIA report's IOPS table: block sizes from the smallest (top) to the largest,
        # whatever order --iops-bs ran them in (compare's tables use the same order).
        ordered = table.sort_values("bs_bytes", kind="stable")
        shown = ordered[["bs", *mixes]] if "bs" in table.columns else ordered
        blocks.append(
            table_block(
                "IOPS table: average over the measurement window (rows: block size, smallest first; columns: R/W %)",
                shown,
                f"{tf.rel}/table.csv",
            )
        )
        blocks.append(sink.figure(lambda: plots.iops_2d([Series("", table)]), "IOPS 2D"))
        blocks.append(sink.figure(lambda: plots.iops_3d(table), "IOPS 3D"))
    return blocks


def page_tp(tf: TestFolder, sink: Sink, result: Optional[FolderJson]) -> list[Block]:
    blocks: list[Block] = []
    rounds = tf.csv("rounds.csv", ("round", "element", "read_bw_bytes_s", "write_bw_bytes_s"))
    steady = tf.json("steady.json")
    table = tf.csv("table.csv", ("bs_bytes", "read_mb_s", "write_mb_s"))
    if rounds is not None:
        r = rounds.assign(mb_s=(rounds["read_bw_bytes_s"].fillna(0) + rounds["write_bw_bytes_s"].fillna(0)) / 1e6)
        win = _window_of(steady, result)
        # One panel per pass (block size), each shaded with its own window: the passes are
        # judged apart, and their round numbers both start at 1.
        by_pass = "bs_bytes" in r.columns and r["bs_bytes"].nunique() > 1
        bs_of = r.drop_duplicates("element").set_index("element")["bs_bytes"].to_dict() if by_pass else {}
        panel_windows: dict[object, list[Optional[tuple[int, int]]]] = {}
        for v in (steady or {}).get("variables") or []:
            w = v.get("window")
            if v.get("element") in bs_of and isinstance(w, list) and len(w) == 2 and None not in w:
                panel_windows[bs_of[v["element"]]] = [(int(w[0]), int(w[1]))]
        blocks.append(
            sink.figure(
                lambda: plots.convergence(
                    "convergence",
                    "Throughput steady-state convergence: every element per round",
                    [Series("", r)],
                    "mb_s",
                    "MB/s",
                    "bs_bytes" if by_pass else None,
                    "element",
                    str,
                    windows=[win],
                    panel_windows=panel_windows,
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


def page_lat(tf: TestFolder, sink: Sink, result: Optional[FolderJson]) -> list[Block]:
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
        blocks.append(table_block("Response times over the measurement window (µs)", table[cols], f"{tf.rel}/table.csv", text=LAT_COLUMNS))
        blocks.append(sink.figure(lambda: plots.lat_bars([Series("", table)], tc_qd_of(result)), "latency bars"))
    blocks += hist_blocks(tf, sink)
    return blocks


# What each column of the latency table is, as tables.py computes it: the page must not call
# a maximum or a percentile an average, and two p99.99 values of one element on one page
# (this table's, the histogram table's) must each say which they are.
LAT_COLUMNS = (
    "mean: the window rounds' mean latencies weighted by their I/O counts; max: the largest of the"
    " rounds' maxima; p99.99: from the window rounds' fio histograms merged, the value fio reports"
    " for the bin holding the percentile (its midpoint). read_* and write_*: the same per direction."
)
HIST_PERCENTILES = (
    "A percentile is as precise as the bins it comes from (fio's json+ bins are at most 1.6 % wide):"
    " this table gives the upper edge of the bin holding the percentile; fio's own percentiles (the"
    " p99.99 and lat_p99_* columns of the other tables) give its midpoint, up to half a bin lower."
)


def tc_qd_of(result: Optional[FolderJson]) -> str:
    """The test's threads and queue depth from result.json settings ("TC1/QD1"), or ""."""
    settings = as_object((result or {}).get("settings"))
    tc, qd = settings.get("tc"), settings.get("qd")
    if isinstance(tc, int) and isinstance(qd, int):
        return f"TC{tc}/QD{qd}"
    text = settings.get("tc_qd")
    return text if isinstance(text, str) else ""


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
            text=HIST_PERCENTILES,
        ),
    ]


def page_wsat(tf: TestFolder, sink: Sink, result: Optional[FolderJson]) -> list[Block]:
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
    blocks += wsat_steady_blocks(sink, result, table)
    blocks += hist_blocks(tf, sink)
    return blocks


WSAT_STEADY_SHOWN = 25  # segments drawn up to the steady window: the PTS's most rounds


def wsat_steady_blocks(sink: Sink, result: Optional[FolderJson], table: pd.DataFrame) -> list[Block]:
    """--wsat-stop-steady: the steady-state check that stopped WSAT (result.json
    extra.steady: its 5-segment window judged by the PTS rule) as a window plot over the
    segments up to it and a table, or a line saying no window was steady."""
    settings = as_object((result or {}).get("settings"))
    check = as_object(as_object((result or {}).get("extra")).get("steady"))
    window = check.get("rounds")
    if not (isinstance(window, list) and window and all(isinstance(x, int) for x in window)):
        if settings.get("stop_steady") and (result or {}).get("status") == "complete":
            return [note("--wsat-stop-steady: no 5-segment window of IOPS met the PTS steady-state rule before WSAT stopped.")]
        return []
    first, last = window[0], window[-1]
    shown = table[(table["segment"] <= last) & (table["segment"] > last - WSAT_STEADY_SHOWN)].sort_values("segment")
    variable = {
        **check,
        "name": "RND 4KiB 100% W IOPS (WSAT)",
        "column": "iops",
        "unit": "IOPS",
        "rounds": [int(x) for x in shown["segment"]],
        "values": [float(x) for x in shown["iops"]],
        "window": [first, last],
    }
    avg = check.get("avg")

    def pct(key: str) -> str:
        """One of the check's numbers as a % of the window average."""
        value = check.get(key)
        ok = isinstance(value, (int, float)) and isinstance(avg, (int, float)) and avg
        return fmt(float(value) / float(avg) * 100) if ok else "–"  # type: ignore[arg-type]

    rows = pd.DataFrame(
        [
            {"quantity": "measurement window (segments)", "value": f"{first}–{last}"},
            {"quantity": "steady", "value": "yes" if check.get("steady") else "no"},
            {"quantity": "window average IOPS", "value": avg},
            {"quantity": "data excursion (% of the average; limit)", "value": f"{pct('data_excursion')} % ({pct('data_limit')} %)"},
            {"quantity": "slope excursion (% of the average; limit)", "value": f"{pct('slope_excursion')} % ({pct('slope_limit')} %)"},
        ]
    )
    return [
        sink.figure(partial(plots.window, "window-wsat-steady", variable, 1.0, "IOPS", "segment"), "WSAT steady state"),
        table_block("WSAT steady-state check (--wsat-stop-steady)", rows, text="From result.json extra.steady, as the harness judged it."),
    ]


def wsat_summary(table: pd.DataFrame) -> pd.DataFrame:
    t = table.sort_values("segment")
    tail = t.tail(max(1, len(t) // 10))
    # the last tenth of the segments ("mean of the last 1 segments" under 20 segments)
    final = "final IOPS (the last segment)" if len(tail) == 1 else f"final IOPS (mean of the last {len(tail)} segments)"
    return pd.DataFrame(
        [
            {"quantity": "segments", "value": float(len(t))},
            {"quantity": "drive fills written", "value": float(t["drive_fills"].iloc[-1])},
            {"quantity": "FOB IOPS (first segment)", "value": float(t["iops"].iloc[0])},
            {"quantity": "peak IOPS", "value": float(t["iops"].max())},
            {"quantity": final, "value": float(tail["iops"].mean())},
        ]
    )


def hir_baseline(result: Optional[FolderJson], rounds: Optional[pd.DataFrame]) -> Optional[float]:
    """The pre-HIR steady-state IOPS: result.json extra.baseline_iops, else the mean of the last 5 "pre" rounds."""
    base = as_object((result or {}).get("extra")).get("baseline_iops")
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


def _pre_blocks(tf: TestFolder, sink: Sink, result: Optional[FolderJson], rounds: Optional[pd.DataFrame], title: str) -> list[Block]:
    """A test's own preconditioning rounds until steady state (HIR, curve: the "pre" rows of
    rounds.csv) with the measurement window steady.json judged, and its window plot."""
    blocks: list[Block] = []
    steady = tf.json("steady.json", quiet=True)
    if rounds is not None and {"phase", "round", "element"} <= set(rounds.columns):
        pre = rounds[rounds["phase"] == "pre"]
        if len(pre):
            win = _window_of(steady, result)
            blocks.append(
                sink.figure(
                    lambda: plots.convergence("convergence", title, [Series("", pre)], "iops", "IOPS", None, "element", str, windows=[win]),
                    "preconditioning convergence",
                )
            )
    return blocks + _tracking_blocks(sink, steady, 1.0, "IOPS")


def page_hir(tf: TestFolder, sink: Sink, result: Optional[FolderJson]) -> list[Block]:
    rounds = tf.csv("rounds.csv", ("iops",))
    table = tf.csv("table.csv", ("wait_s", "phase", "t_s", "iops"))
    baseline = hir_baseline(result, rounds)
    blocks = _pre_blocks(tf, sink, result, rounds, "HIR preconditioning: RND 4KiB W IOPS per round until steady state")
    if baseline is None:
        blocks.append(note('no baseline: result.json has no extra.baseline_iops and rounds.csv no "pre" rounds', "warn"))
    if table is not None:
        blocks.append(sink.figure(lambda: plots.hir_overview([Series("", table)], [baseline]), "HIR overview"))
        blocks.append(sink.figure(lambda: plots.hir_wait_states([Series("", table)], [baseline]), "HIR wait states"))
        blocks.append(table_block("HIR: mean IOPS per wait state", hir_summary(table, baseline), f"{tf.rel}/table.csv"))
    return blocks


def page_curve(tf: TestFolder, sink: Sink, result: Optional[FolderJson]) -> list[Block]:
    rounds = tf.csv("rounds.csv", ("iops",))
    blocks = _pre_blocks(tf, sink, result, rounds, "Latency vs IOPS preconditioning: RND 4KiB 70/30 IOPS per round until steady state")
    table = tf.csv("table.csv", ("numjobs", "iodepth", "iops", "lat_mean_us", "lat_p99_us", "lat_p99_9_us"))
    if table is not None:
        blocks.append(sink.figure(lambda: plots.curve([Series("", table)]), "latency vs IOPS"))
        blocks.append(table_block("Latency vs IOPS", table, f"{tf.rel}/table.csv"))
    return blocks


def page_xsr(tf: TestFolder, sink: Sink, result: Optional[FolderJson]) -> list[Block]:
    blocks: list[Block] = []
    rounds = tf.csv("rounds.csv", ("segment", "phase", "element", "t_start_s", "t_end_s", "iops", "write_bw_bytes_s"))
    table = tf.csv("table.csv", ("access_group", "tp_end_mb_s"))
    rec = as_object((result or {}).get("extra")).get("recovery_s")
    if rounds is not None:
        r = with_mb_s(rounds)
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
    if rounds is not None and (rounds["phase"] == "AG3").any():
        text = xsr_recovery_text(cast(list[RoundRow], rounds.to_dict("records")))
        blocks.insert(0, note(f"Recovery: {text}.", "warn" if "did not" in text else "info"))
    elif rec is not None:
        blocks.insert(0, note(f"Recovery: AG3 back to 90 % of AG1's final throughput within {fmt(rec)} s of its start."))
    elif table is not None:
        blocks.insert(0, note("Recovery: AG3 did not reach 90 % of AG1's final throughput before it ended.", "warn"))
    return blocks


def with_mb_s(rounds: pd.DataFrame) -> pd.DataFrame:
    """rounds.csv with the segment's throughput in MB/s (10^6 B/s, reads and writes)."""
    read = rounds["read_bw_bytes_s"].fillna(0) if "read_bw_bytes_s" in rounds.columns else 0
    return rounds.assign(mb_s=(read + rounds["write_bw_bytes_s"].fillna(0)) / 1e6)


def page_di(tf: TestFolder, sink: Sink, result: Optional[FolderJson]) -> list[Block]:
    """CBW and DIRTH: preconditioning, the demand-intensity rounds, DV and DI curves, and
    the response-time histograms at the max, mid and min IOPS points."""
    blocks: list[Block] = []
    name = tf.test.upper()
    rounds = tf.csv("rounds.csv", ("round", "phase", "element", "t_end_s", "iops"))
    steady = tf.json("steady.json")
    table = tf.csv("table.csv", ("numjobs", "iodepth", "iops", "lat_mean_us"))
    extra = as_object((result or {}).get("extra"))
    limit = as_object(as_object((result or {}).get("settings"))).get("art_limit_us")
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


PAGES: dict[str, Callable[[TestFolder, Sink, Optional[FolderJson]], list[Block]]] = {
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


def test_ids(manifest: FolderJson) -> list[str]:
    tests = manifest.get("tests") if isinstance(manifest.get("tests"), dict) else {}
    assert isinstance(tests, dict)
    return list(tests) if tests else []


def build_page(folder: Path, manifest: FolderJson, test: str) -> Page:
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
    progress = tf.progress() if test in PRECONDITIONED else None
    status, message = status_text(test, entry, result, steady, progress)
    sink = Sink(folder, test, [f"{tf.rel}/{n}" for n in ("rounds.csv", "steady.json", "table.csv", "result.json")], tf.rel)
    maker = PAGES.get(test)
    blocks = maker(tf, sink, result) if maker else [note(f"no page for test {test!r} in this version of the report")]
    files, other = tf.files()
    rounds = str((result or {}).get("rounds_run", "–"))
    if progress and progress[0] == "round":  # HIR, curve: their preconditioning rounds until they have a burst or point
        rounds = f"{progress[1]} (preconditioning)"
    elif progress:  # HIR's bursts, the curve's points, after their preconditioning rounds (result.json rounds_run)
        pre = (result or {}).get("rounds_run")
        step = PRECONDITIONED[test]
        after = f" after {pre} preconditioning rounds" if isinstance(pre, int) else ""
        rounds = f"{progress[1]} {step}{'' if progress[1] == 1 else 's'}{after}"
    facts = {"rounds": rounds, "wall_s": fmt(entry.get("wall_s")), "sim_s": fmt(entry.get("sim_s"))}
    extra_notes = as_object((result or {}).get("extra")).get("notes") or []
    for text in [extra_notes] if isinstance(extra_notes, str) else extra_notes:
        blocks.insert(0, note(str(text)))  # e.g. what a scaled twin changes for this test
    if status == "interrupted":
        blocks.insert(0, note(f"This test was interrupted: {message}. The figures show the rounds done so far.", "warn"))
    if status == "not steady":
        blocks.insert(0, note(f"{message}: the results are the averages of the last 5 rounds, NOT in steady state.", "warn"))
    return Page(test, title, status, message, header(manifest, test, result, steady), tf.notes + blocks, files, other, facts)
