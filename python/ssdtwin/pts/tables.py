"""The tabular results of each test (table.csv, hist-*.csv) from its rows: the
measurement window's means, Latency's histograms, XSR's access groups and the demand-
intensity matrix of CBW and DIRTH with its histogram points."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from . import steady as ss
from . import tests as T
from .folder import csv_text, write_atomic, write_hist
from .measurements import merge, pcts
from .testrun import TestRun

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
    write_atomic(tr.dir / "table.csv", csv_text(rows, cols))


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
            h = {d: merge(*(tr.hists.get((r, name), {}).get(d, {}) for r in rounds)) for d in ("read", "write")}
            row: dict[str, Any] = {"bs_bytes": bs, "bs": T.bs_title(bs), "mix": T.mix_label(m)}
            row["mean_us"] = _weighted_mean(win, "")
            row["max_us"] = max((float(r["lat_max_us"]) for r in win if r.get("lat_max_us") is not None), default=None)
            row["p99_99_us"] = pcts(merge(h["read"], h["write"]))[2]
            for d in ("read", "write"):
                row[f"{d}_mean_us"] = _weighted_mean(win, d)
                row[f"{d}_max_us"] = max((float(r[f"{d}_lat_max_us"]) for r in win if r.get(f"{d}_lat_max_us") is not None), default=None)
                row[f"{d}_p99_99_us"] = pcts(h[d])[2]
            out.append(row)
            write_hist(tr.dir / f"hist-{name}.csv", h)
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
