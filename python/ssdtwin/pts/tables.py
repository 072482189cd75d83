"""The tabular results of each test (table.csv, hist-*.csv) from its rows: the
measurement window's means, Latency's histograms, XSR's access groups and the demand-
intensity matrix of CBW and DIRTH with its histogram points."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

from . import steady as ss
from . import tests as T
from .folder import csv_text, write_atomic, write_hist
from .measurements import merge, pcts
from .records import (
    DiTableRow,
    HirTableRow,
    IopsTableRow,
    LatTableRow,
    RoundRow,
    TpTableRow,
    WsatTableRow,
    XsrGroup,
    cell,
    cell_or_none,
)
from .testrun import TestRun


def xsr_summary(rows: Sequence[RoundRow]) -> list[XsrGroup]:
    """Per access group: segments, its stimulus, throughput at its end (the last 5
    segments' mean), peak mean and peak maximum response time (ADATA's XSR table)."""
    out: list[XsrGroup] = []
    for ag in ("AG1", "AG2", "AG3"):
        grp = [r for r in rows if r.get("phase") == ag]
        if not grp:
            continue
        tail = grp[-ss.WINDOW_ROUNDS :]
        mb = [(float(r["read_bw_bytes_s"]) + float(r["write_bw_bytes_s"])) / 1e6 for r in tail]
        out.append(
            {
                "access_group": ag,
                "stimulus": f"{'SEQ' if grp[0]['rw'] in ('read', 'write') else 'RND'} {T.bs_title(grp[0]['bs_bytes'])} W",
                "segments": len(grp),
                "duration_s": round(sum(float(r["runtime_s"]) for r in grp), 6),
                "tp_end_mb_s": sum(mb) / len(mb),
                "iops_end": sum(float(r["iops"]) for r in tail) / len(tail),
                "art_peak_us": max(float(r["lat_mean_us"] or 0.0) for r in grp),
                "mrt_peak_us": max(float(r["lat_max_us"] or 0.0) for r in grp),
            }
        )
    return out


def xsr_recovery_s(rows: Sequence[RoundRow], share: float = 0.9) -> Optional[float]:
    """Seconds from the start of AG3 until its throughput first reaches ``share`` of AG1's
    final throughput (the mean of AG1's last 5 segments); None if it never does."""
    found = _xsr_recovery(rows, share)
    return found[0] if found else None


def _xsr_recovery(rows: Sequence[RoundRow], share: float) -> Optional[tuple[float, int]]:
    """(seconds from AG3's start to the end of its first segment at ``share`` of AG1's final
    throughput, that segment's number in AG3 from 1), or None."""
    ag1 = [r for r in rows if r.get("phase") == "AG1"][-ss.WINDOW_ROUNDS :]
    ag3 = [r for r in rows if r.get("phase") == "AG3"]
    if not ag1 or not ag3:
        return None
    target = share * sum(float(r["write_bw_bytes_s"]) for r in ag1) / len(ag1)
    t0 = float(ag3[0]["t_start_s"])
    for k, r in enumerate(ag3, 1):
        if float(r["write_bw_bytes_s"]) >= target:
            return round(float(r["t_end_s"]) - t0, 6), k
    return None


def xsr_recovery_text(rows: Sequence[RoundRow], share: float = 0.9) -> str:
    """What :func:`xsr_recovery_s` found, in words a reader can check against the segments:
    the recovery time is known to a segment, so it is "within" the end of the segment that
    first reached ``share`` of AG1's final throughput; with one segment per access group
    there is no recovery time to give (the one segment's average is all there is; "after
    1.011 s" read as a measured recovery)."""
    ag3 = [r for r in rows if r.get("phase") == "AG3"]
    pct = f"{share * 100:g} %"
    if not ag3:
        return "AG3 did not run"
    found = _xsr_recovery(rows, share)
    span = round(float(ag3[-1]["t_end_s"]) - float(ag3[0]["t_start_s"]), 6)
    if found is None:
        return f"AG3 did not return to {pct} of AG1's final throughput in its {_count(len(ag3), 'segment')} ({span:g} s)"
    rec, k = found
    if len(ag3) == 1:
        return (
            f"AG3's one segment ({rec:g} s) averaged {pct} of AG1's final throughput or more: "
            "AG3 in one segment cannot time the recovery (a shorter --xsr-segment can)"
        )
    return f"AG3 back to {pct} of AG1's final throughput in its segment {k} of {len(ag3)}, within {rec:g} s"


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


DI_COLUMNS = ["numjobs", "iodepth", "oio", "iops", "read_iops", "write_iops", "lat_mean_us", "lat_max_us", "lat_p99_us", "lat_p99_9_us"]


def di_table(rows: Sequence[RoundRow], grid: Sequence[T.Element], window: Optional[Sequence[int]]) -> list[DiTableRow]:
    """The demand-intensity matrix averaged over the measurement window: one row per TC x QD."""
    out: list[DiTableRow] = []
    for el in grid:
        win = [r for r in rows if r["element"] == el.name and r.get("phase") == "di" and r["round"] is not None]
        win = [r for r in win if window[0] <= _round(r) <= window[1]] if window else win[-ss.WINDOW_ROUNDS :]
        if not win:
            continue
        out.append(
            {
                "numjobs": el.numjobs,
                "iodepth": el.iodepth,
                "oio": el.numjobs * el.iodepth,
                "iops": _mean(win, "iops"),
                "read_iops": _mean(win, "read_iops"),
                "write_iops": _mean(win, "write_iops"),
                "lat_mean_us": _weighted_mean(win, ""),
                "lat_max_us": max((x for r in win if (x := r.get("lat_max_us")) is not None), default=None),
                "lat_p99_us": _mean(win, "lat_p99_us"),
                "lat_p99_9_us": _mean(win, "lat_p99_9_us"),
            }
        )
    return out


def _round(row: RoundRow) -> int:
    """The round of a row judged for steady state (the rows compared by round have one)."""
    r = row["round"]
    if r is None:
        raise ValueError(f"{row['element']}: a row without a round where rounds are compared")
    return r


def di_points(table: Sequence[DiTableRow], art_limit_us: float) -> dict[str, tuple[int, int]]:
    """The PTS's histogram points: max (the highest IOPS whose mean response time is below
    the limit), mid (the point whose IOPS is nearest to the mean of max and min) and min
    (TC1/QD1, else the lowest outstanding I/O of the grid)."""
    ok = [r for r in table if (lat := r.get("lat_mean_us")) is not None and lat < art_limit_us and r.get("iops")]
    if not table:
        return {}
    low = min(table, key=lambda r: (r["oio"], r["numjobs"]))
    points: dict[str, tuple[int, int]] = {}
    if ok:
        top = max(ok, key=_iops)
        bottom = min(ok, key=_iops)
        mid_iops = (_iops(top) + _iops(bottom)) / 2
        mid = min(ok, key=lambda r: (abs(_iops(r) - mid_iops), r["oio"]))
        points["max"] = (int(top["numjobs"]), int(top["iodepth"]))
        points["mid"] = (int(mid["numjobs"]), int(mid["iodepth"]))
    points["min"] = (int(low["numjobs"]), int(low["iodepth"]))
    return points


def _iops(row: DiTableRow) -> float:
    return float(row["iops"] or 0.0)


def _window_rows(tr: TestRun, elements: Sequence[str], window: Optional[Sequence[int]]) -> list[RoundRow]:
    rows = [r for r in tr.rows if r["element"] in elements and r["round"] is not None]
    if not rows:
        return []
    if window is None:
        last = max(_round(r) for r in rows)
        window = [max(1, last - ss.WINDOW_ROUNDS + 1), last]
    return [r for r in rows if window[0] <= _round(r) <= window[1]]


def _mean(rows: Sequence[RoundRow], col: str) -> Optional[float]:
    vals = [x for r in rows if (x := cell_or_none(r, col)) is not None]
    return sum(vals) / len(vals) if vals else None


def _pass_window(tr: TestRun, name: str) -> Optional[list[int]]:
    doc = tr.steady_doc
    if doc is None:
        return None
    for p in doc.get("passes", []):
        if p["pass"] == name:
            return p["window"]
    return doc["window"]


def write_tables(tr: TestRun) -> None:
    """table.csv (and hist-*.csv for Latency) from the measurement window's rounds."""
    st = tr.runner.settings
    t = tr.test
    rows: Sequence[Mapping[str, object]]
    cols: list[str]
    if t == "iops":
        rows, cols = _iops_table(tr)
    elif t == "tp":
        rows, cols = _tp_table(tr)
    elif t == "lat":
        rows, cols = _lat_table(tr)
    elif t == "wsat":
        cols = ["segment", "t_s", "bytes_written_total", "drive_fills", "iops", "lat_mean_us", "lat_max_us"]
        wsat_rows: list[WsatTableRow] = [{**r, "t_s": r["t_end_s"]} for r in tr.rows]
        rows = wsat_rows
    elif t == "hir":
        cols = ["wait_s", "phase", "iteration", "t_s", "iops"]
        count: dict[tuple[Optional[float], str], int] = {}
        hir_rows: list[HirTableRow] = []
        for r in tr.rows:
            key = (r["wait_s"], r["phase"])
            count[key] = count.get(key, 0) + 1
            hir_rows.append({**r, "iteration": r["round"] if r["phase"] == "pre" else count[key], "t_s": r["t_end_s"]})
        rows = hir_rows
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
        matrix = di_table(tr.rows, di.elements[1:], tr.window)
        marks = {v: k for k, v in di_points(matrix, st.di_art_limit_us).items()}
        marked: list[DiTableRow] = [{**r, "point": marks.get((r["numjobs"], r["iodepth"]), "")} for r in matrix]
        rows = marked
        cols = [*DI_COLUMNS, "point"]
    write_atomic(tr.dir / "table.csv", csv_text(rows, cols))


def _iops_table(tr: TestRun) -> tuple[list[IopsTableRow], list[str]]:
    st = tr.runner.settings
    tc, qd = st.tc_qd["iops"]
    cols = ["bs_bytes", "bs", *[T.mix_label(m) for m in st.iops_mixes]]
    out: list[IopsTableRow] = []
    for bs in st.iops_bs:
        row: IopsTableRow = {"bs_bytes": bs, "bs": T.bs_title(bs)}
        for m in st.iops_mixes:
            name = T.rnd(bs, m, tc, qd, st.round_s).name
            row[T.mix_label(m)] = _mean(_window_rows(tr, [name], tr.window), "iops")
        out.append(row)
    return out, cols


def _tp_table(tr: TestRun) -> tuple[list[TpTableRow], list[str]]:
    st = tr.runner.settings
    tc, qd = st.tc_qd["tp"]
    cols = ["bs_bytes", "bs", "read_mb_s", "write_mb_s", "read_mib_s", "write_mib_s"]
    out: list[TpTableRow] = []
    for p in T.tp_passes(st.tp_bs, tc, qd, st.round_s):
        win = _pass_window(tr, p.name)
        r_bw = _mean(_window_rows(tr, [p.elements[0].name], win), "read_bw_bytes_s")
        w_bw = _mean(_window_rows(tr, [p.elements[1].name], win), "write_bw_bytes_s")
        bs = p.elements[0].bs_bytes
        out.append(
            {
                "bs_bytes": bs,
                "bs": T.bs_title(bs),
                "read_mb_s": None if r_bw is None else r_bw / 1e6,
                "write_mb_s": None if w_bw is None else w_bw / 1e6,
                "read_mib_s": None if r_bw is None else r_bw / 2**20,
                "write_mib_s": None if w_bw is None else w_bw / 2**20,
            }
        )
    return out, cols


def _lat_table(tr: TestRun) -> tuple[list[LatTableRow], list[str]]:
    st = tr.runner.settings
    tc, qd = st.tc_qd["lat"]
    cols = ["bs_bytes", "bs", "mix", "mean_us", "max_us", "p99_99_us"]
    for d in ("read", "write"):
        cols += [f"{d}_mean_us", f"{d}_max_us", f"{d}_p99_99_us"]
    out: list[LatTableRow] = []
    for bs in st.lat_bs:
        for m in st.lat_mixes:
            name = T.rnd(bs, m, tc, qd, st.round_s).name
            win = _window_rows(tr, [name], tr.window)
            if not win:
                continue
            rounds = [_round(r) for r in win]
            h = {d: merge(*(tr.hists.get((r, name), {}).get(d, {}) for r in rounds)) for d in ("read", "write")}
            out.append(
                {
                    "bs_bytes": bs,
                    "bs": T.bs_title(bs),
                    "mix": T.mix_label(m),
                    "mean_us": _weighted_mean(win, ""),
                    "max_us": _max(win, "lat_max_us"),
                    "p99_99_us": pcts(merge(h["read"], h["write"]))[2],
                    "read_mean_us": _weighted_mean(win, "read"),
                    "read_max_us": _max(win, "read_lat_max_us"),
                    "read_p99_99_us": pcts(h["read"])[2],
                    "write_mean_us": _weighted_mean(win, "write"),
                    "write_max_us": _max(win, "write_lat_max_us"),
                    "write_p99_99_us": pcts(h["write"])[2],
                }
            )
            write_hist(tr.dir / f"hist-{name}.csv", h)
    return out, cols


def _max(rows: Sequence[RoundRow], col: str) -> Optional[float]:
    """The largest value of a column over rows (None where no row holds one)."""
    return max((x for r in rows if (x := cell_or_none(r, col)) is not None), default=None)


def _weighted_mean(rows: Sequence[RoundRow], ddir: str) -> Optional[float]:
    """IO-weighted mean latency over rounds (weights: IOPS x runtime = I/Os)."""
    col = f"{ddir}_lat_mean_us" if ddir else "lat_mean_us"
    iops = f"{ddir}_iops" if ddir else "iops"
    num = den = 0.0
    for r in rows:
        lat = cell_or_none(r, col)
        if lat is None:
            continue
        w = (cell(r, iops) or 0.0) * r["runtime_s"]
        num += lat * w
        den += w
    return num / den if den else None
