"""The figures of a PTS report (docs/pts-report.md), drawn with matplotlib's Agg backend.

Every function takes the data of one or more reports as ``Series`` (a label and a pandas
frame; the report draws one, ``compare()`` two, solid and dashed) and returns a ``Plot``: the
PNG and the exact table the figure shows (written next to it as CSV and JSON, so every
number in a figure can be checked or re-plotted). Figures are built with
``matplotlib.figure.Figure`` on an Agg canvas directly, never pyplot: no global state, no
GUI backend, and the caller's own matplotlib backend (a notebook's) is left alone.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogFormatter, LogLocator, MaxNLocator, NullLocator

from .records import FolderJson

DPI = 96
WIDTH_IN = 9.0
MIX_ORDER = ["100/0", "95/5", "65/35", "50/50", "35/65", "5/95", "0/100"]
MIX_LABEL = re.compile(r"(\d+)/(\d+)")  # "R/W" read/write %, a table column or "mix" value


def mixes_in(labels: Any) -> list[str]:
    """The R/W mixes among ``labels`` (table columns, "mix" values) in the PTS order, most
    reads first: 100/0 .. 0/100, with mixes the PTS does not list (--iops-mixes 70) in place."""
    found = {str(x) for x in labels if MIX_LABEL.fullmatch(str(x))}
    return sorted(found, key=lambda m: -int(m.split("/")[0]))


LINESTYLES = ["-", "--", ":", "-."]


@dataclass
class Series:
    """One report's data for a figure: ``label`` names the report in a legend (empty for a
    single report)."""

    label: str
    frame: pd.DataFrame


@dataclass
class Plot:
    name: str  # file stem under <test>/plots/
    title: str
    caption: str
    data: pd.DataFrame  # what the figure shows, one row per plotted point/bar
    png: bytes
    meta: dict[str, Any] = field(default_factory=dict)  # open: the figure's other numbers (averages, limits), its own keys


def bs_text(bs_bytes: float) -> str:
    """512 -> "0.5KiB", 4096 -> "4KiB", 1048576 -> "1024KiB" (the PTS tables' labels)."""
    return f"{bs_bytes / 1024:g}KiB"


def si(value: float, _pos: Any = None) -> str:
    """Axis ticks in engineering units: 350000 -> "350K"."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= div:
            return f"{value / div:.4g}{suffix}"
    return f"{value:g}"


class SiLogFormatter(LogFormatter):
    """Log-axis tick labels in engineering units ("10K", "2M") rather than mathtext."""

    def _num_to_string(self, x: float, vmin: float, vmax: float) -> str:
        return si(x)


def _new(height_in: float = 4.2, width_in: float = WIDTH_IN, rows: int = 1, top_in: float = 0.55, bottom_in: float = 0.55) -> Figure:
    """A figure with fixed margins (in inches, so they hold for any height): constrained
    layout would place labels a little better but costs 2-3x the drawing time of a figure."""
    fig = Figure(figsize=(width_in, height_in), dpi=DPI)
    fig.subplots_adjust(
        left=0.8 / width_in,
        right=1 - 0.2 / width_in,
        bottom=bottom_in / height_in,
        top=1 - top_in / height_in,
        wspace=0.32,
        hspace=0.55 if rows > 1 else 0.2,
    )
    return fig


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, pil_kwargs={"compress_level": 3})  # zlib 3: 4x faster than 6, ~10 % larger
    return buf.getvalue()


def _style(series: list[Series], i: int) -> str:
    return LINESTYLES[i % len(LINESTYLES)] if len(series) > 1 else "-"


def _plain(text: Any) -> str:
    """Text from a report (a folder or drive name, an element) as matplotlib shows it
    literally: a pair of "$" would start mathtext (mangling "a$1 b$2", failing the figure
    on "x$\\foo$")."""
    return str(text).replace("$", r"\$")


def _label(s: Series, text: str) -> str:
    return _plain(f"{s.label}: {text}" if s.label else text)


def _tag(series: list[Series]) -> pd.DataFrame:
    """The figure's data: every series' frame with a "report" column when there are two."""
    frames = [s.frame.assign(report=s.label) if s.label else s.frame for s in series]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _finish(ax: Axes, xlabel: str, ylabel: str, *, logy: bool = False, logx: bool = False, legend: bool = True) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    if logx:
        ax.set_xscale("log")
    # Plain tick labels ("350K", "10K") instead of the log axes' mathtext ones ("$10^{4}$"):
    # easier to read, and mathtext parsing is a third of a figure's drawing time.
    for axis, log in ((ax.yaxis, logy), (ax.xaxis, logx)):
        if log:  # minor ticks get labels too when the axis spans less than ~2 decades
            # minor ticks at 2x and 5x only: every tick is an artist, and 8 per decade
            # made tick creation the largest cost of drawing a figure
            axis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
            axis.set_major_formatter(SiLogFormatter())
            axis.set_minor_formatter(SiLogFormatter(minor_thresholds=(1, 0.4)))
        elif axis is ax.yaxis:
            axis.set_major_formatter(FuncFormatter(si))
    ax.grid(True, which="major", alpha=0.35)
    if legend and ax.get_legend_handles_labels()[0]:
        fig = ax.get_figure()
        assert isinstance(fig, Figure)
        _outside_legend(fig, *ax.get_legend_handles_labels())


def _outside_legend(fig: Figure, handles: list[Artist], labels: list[str], fontsize: str = "small") -> None:
    """The figure's legend to the right of its panels, the figure widened by the legend's
    width so the panels keep their size: a legend inside a panel covered bars (the Latency
    test's 8 KiB max bars, CBW's matrix lines) wherever matplotlib's "best" spot was."""
    FigureCanvasAgg(fig)  # a renderer to measure the legend with
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    sp = fig.subplotpars
    width_in, height_in = fig.get_figwidth(), fig.get_figheight()
    left_in, right_in = sp.left * width_in, sp.right * width_in
    ncol = 1
    while True:
        leg = fig.legend(handles, labels, loc="center left", fontsize=fontsize, ncol=ncol)
        box = leg.get_window_extent(renderer)
        if box.height / fig.dpi <= 0.95 * height_in or ncol >= len(labels):
            break
        leg.remove()  # taller than the figure: more columns
        ncol += 1
    gap_in = 0.15
    new_w = right_in + gap_in + box.width / fig.dpi + 0.1
    fig.set_figwidth(new_w)
    fig.subplots_adjust(left=left_in / new_w, right=right_in / new_w)
    leg.set_bbox_to_anchor(((right_in + gap_in) / new_w, (sp.bottom + sp.top) / 2), transform=fig.transFigure)


def _shared_legend(fig: Figure, axes: Any, series: list[Series], spare: Optional[Axes] = None) -> None:
    """One legend for a figure of panels: in the spare (empty) panel if there is one; to
    the right of the panels when two reports are compared (long labels); else in the first
    panel."""
    entries: dict[str, Artist] = {}
    for ax in np.ravel(axes):
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    if not entries:
        return
    handles, labels = list(entries.values()), list(entries)
    ncol = 2 if len(labels) > 8 else 1
    if spare is not None:
        spare.set_axis_off()
        spare.legend(handles, labels, loc="center", fontsize="small", ncol=ncol)
    else:
        _outside_legend(fig, handles, labels, "x-small" if len(series) > 1 else "small")


def convergence(
    name: str,
    title: str,
    series: list[Series],
    value: str,
    ylabel: str,
    panel_by: Optional[str],
    line_by: str,
    line_text: Callable[[Any], str],
    scale: float = 1.0,
    logy: bool = False,
    windows: Optional[list[Optional[tuple[int, int]]]] = None,
    panel_windows: Optional[dict[Any, list[Optional[tuple[int, int]]]]] = None,
    panel_ylabels: Optional[dict[Any, str]] = None,
) -> Plot:
    """Steady-state convergence: ``value`` per round for every element, one panel per
    ``panel_by`` value (e.g. the R/W mix), one line per ``line_by`` value (e.g. the block
    size). The measurement window of each report (``windows``, one per series; or per
    panel, ``panel_windows``) is shaded; ``panel_ylabels`` gives panels of different units
    their own y label."""
    frame = _tag(series)
    panels = [None] if panel_by is None else sorted(frame[panel_by].unique(), key=_panel_key(panel_by))
    ncols = min(4, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = _new(2.6 * nrows + 0.6 if nrows > 1 else 4.2, rows=nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True)
    cmap = _colors(sorted(frame[line_by].unique()))
    drawn_windows: list[dict[str, Any]] = []
    for k, panel in enumerate(panels):
        ax = axes[k // ncols][k % ncols]
        for i, s in enumerate(series):
            sub = s.frame if panel is None else s.frame[s.frame[panel_by] == panel]
            for key, grp in sub.groupby(line_by, sort=True):
                grp = grp.sort_values("round")
                ax.plot(
                    grp["round"],
                    grp[value] * scale,
                    marker="o",
                    ms=3,
                    ls=_style(series, i),
                    color=cmap[key],
                    label=_label(s, line_text(key)),
                )
            shown = (panel_windows or {}).get(panel) or windows
            if shown and i < len(shown) and shown[i]:
                a, b = shown[i]  # type: ignore[misc]
                ax.axvspan(a - 0.5, b + 0.5, color="tab:green" if i == 0 else "tab:purple", alpha=0.08)
                drawn_windows.append({"panel": panel, "report": s.label, "window": [int(a), int(b)]})
        if panel is not None:
            ax.set_title(_plain(_panel_text(panel_by, panel)), fontsize="medium")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        own = (panel_ylabels or {}).get(panel)
        _finish(ax, "round", own if own is not None else ylabel if k % ncols == 0 else "", logy=logy, legend=False)
    for k in range(len(panels), nrows * ncols):
        axes[k // ncols][k % ncols].set_axis_off()
    spare = axes[-1][-1] if len(panels) < nrows * ncols else None
    _shared_legend(fig, [axes[k // ncols][k % ncols] for k in range(len(panels))], series, spare)
    fig.suptitle(title)
    data = frame[list(dict.fromkeys(c for c in ("report", "round", panel_by, line_by, value) if c and c in frame.columns))].copy()
    caption = "Tracking values per round for every element"
    caption += "; the shaded rounds are the measurement window." if drawn_windows else " (no measurement window: fewer than 5 rounds)."
    return Plot(name, title, caption, data, _png(fig), {"windows": drawn_windows})


def _panel_key(col: Optional[str]) -> Callable[[Any], Any]:
    if col == "mix":
        return lambda m: -int(m.split("/")[0]) if MIX_LABEL.fullmatch(str(m)) else 999
    if col == "read_pct":
        return lambda p: -float(p)
    return lambda v: v


def _panel_text(col: Optional[str], value: Any) -> str:
    if col == "read_pct":
        return f"R/W {int(value)}/{100 - int(value)}"
    if col == "bs_bytes":
        return bs_text(float(value))
    return str(value)


def _colors(keys: list[Any]) -> dict[Any, Any]:
    from matplotlib import colormaps

    cmap = colormaps["viridis" if len(keys) > 10 else "tab10"]
    if len(keys) > 10:
        return {k: cmap(i / max(1, len(keys) - 1)) for i, k in enumerate(keys)}
    return {k: cmap(i) for i, k in enumerate(keys)}


def window(name: str, variable: FolderJson, scale: float = 1.0, unit: str = "", step: str = "round") -> Plot:
    """The SNIA measurement-window plot of one tracking variable: every round, the 5-round
    window with its average, the band of the data-excursion limit (the spec's 90 % and
    110 % x average lines: a range of 20 % of the average), the least-squares line beside
    the steepest line the slope-excursion limit allows, and the two excursions against
    their limits (steady.json's numbers, not recomputed). ``step`` names what the variable
    is measured per: "round", or "segment" for WSAT's check (--wsat-stop-steady)."""
    rounds = np.asarray(variable.get("rounds") or [], dtype=float)
    values = np.asarray(variable.get("values") or [], dtype=float) * scale
    win = variable.get("window") or [rounds.min() if len(rounds) else 0, rounds.max() if len(rounds) else 0]
    a, b = float(win[0]), float(win[1])
    fig = _new(4.2, top_in=0.6)
    ax = fig.add_subplot()
    ax.plot(rounds, values, marker="o", color="tab:blue", label=_plain(variable.get("name", "value")))
    meta: dict[str, Any] = {k: variable.get(k) for k in ("name", "element", "column", "unit", "steady", "window")}  # Plot.meta
    if unit:  # the unit shown (MB/s for steady.json's B/s), which the numbers below are in
        meta.update(unit=unit, source_unit=variable.get("unit"))
    avg = variable.get("avg")
    if avg is not None:
        avg_s = float(avg) * scale
        xs = np.array([a - 0.4, b + 0.4])
        # The data excursion (max - min) may be at most data_limit, so the band is that tall
        # around the average: the spec's 90 % / 110 % x average lines under the 20 % rule.
        data_limit = _float_or(variable.get("data_limit"), 0.2 * float(avg)) * scale
        band_pct = data_limit / avg_s * 50 if avg_s else 10.0
        ax.fill_between(
            xs,
            avg_s - data_limit / 2,
            avg_s + data_limit / 2,
            color="tab:orange",
            alpha=0.18,
            label=f"average ±{band_pct:.3g} % (data excursion limit: range ≤ {2 * band_pct:.3g} %)",
        )
        ax.hlines(avg_s, xs[0], xs[1], color="tab:orange", lw=1.6, label=f"window average {si(avg_s)}")
        meta["data_band"] = [avg_s - data_limit / 2, avg_s + data_limit / 2]
        slope_limit = variable.get("slope_limit")
        if slope_limit is not None and b > a:
            # The least-squares line runs through (window centre, average); the slope
            # excursion (its rise across the window) may be at most slope_limit.
            fx, mid = np.array([a, b]), (a + b) / 2
            rise = float(slope_limit) * scale / (b - a)
            for sign, label in ((1, "steepest fit allowed (slope excursion limit)"), (-1, None)):
                ax.plot(fx, avg_s + sign * rise * (fx - mid), color="tab:gray", ls=":", lw=1.2, label=label)
        if variable.get("slope") is not None and variable.get("intercept") is not None:
            fx = np.array([a, b])
            ax.plot(
                fx,
                (float(variable["slope"]) * fx + float(variable["intercept"])) * scale,
                color="tab:red",
                ls="--",
                lw=1.4,
                label="least-squares fit",
            )
        meta.update(
            {
                k: (float(variable[k]) * scale if variable.get(k) is not None else None)
                for k in ("avg", "min", "max", "data_excursion", "data_limit", "slope_excursion", "slope_limit")
            }
        )
        meta.update(
            {k: (float(variable[k]) * scale if variable.get(k) is not None else None) for k in ("slope", "intercept")},
            scale=scale,  # every number here is steady.json's times scale, in ``unit``
        )
    ax.axvspan(a - 0.5, b + 0.5, color="tab:green", alpha=0.07)
    verdict = "steady" if variable.get("steady") else "NOT steady"
    title = f"{variable.get('name', '')}: measurement window {step}s {int(a)}–{int(b)}, {verdict}"
    if len(rounds) < 5:
        title = f"{variable.get('name', '')}: only {len(rounds)} {step}(s), fewer than the 5 of a measurement window; NOT steady"
    if avg is not None and variable.get("data_excursion") is not None and variable.get("slope_excursion") is not None:
        de = float(variable["data_excursion"]) / float(avg) * 100 if avg else float("nan")
        se = float(variable["slope_excursion"]) / float(avg) * 100 if avg else float("nan")
        dl = _pct_of(variable.get("data_limit"), avg, 20.0)
        sl = _pct_of(variable.get("slope_limit"), avg, 10.0)
        title += f"\ndata excursion {de:.1f} % (limit {dl:g} %), slope excursion {se:.1f} % (limit {sl:g} %)"
    ax.set_title(_plain(title), fontsize="medium")
    ax.set_xticks(rounds if len(rounds) <= 30 else ax.get_xticks())
    _finish(ax, step, unit or str(variable.get("unit", "")))
    data = pd.DataFrame({step: rounds.astype(int), "value": values, "in_window": (rounds >= a) & (rounds <= b)})
    caption = (
        f"{step.capitalize()}s of the tracking variable; the green {step}s are the measurement window with its average, "
        "a band as tall as the largest data excursion allowed (20 % of the average, drawn as ±10 %), "
        "the least-squares line and the steepest line the slope excursion allows (10 % across the window)."
    )
    return Plot(name, str(variable.get("name", name)), caption, data, _png(fig), meta)


def _float_or(value: Any, default: float) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return default
    return out if math.isfinite(out) else default


def _pct_of(limit: Any, avg: Any, default: float) -> float:
    """A limit from steady.json as % of the average (20 and 10 under the SNIA rule)."""
    try:
        return round(float(limit) / float(avg) * 100, 1)
    except (TypeError, ValueError, ZeroDivisionError):
        return default


def iops_2d(series: list[Series]) -> Plot:
    """IOPS against block size, one line per R/W mix (the PTS 2D plot), log-log."""
    fig = _new(4.6)
    ax = fig.add_subplot()
    rows = []
    cmap = _colors(mixes_in(MIX_ORDER + [c for s in series for c in s.frame.columns]))  # the same colour per mix in A and B
    for i, s in enumerate(series):
        t = s.frame.sort_values("bs_bytes")
        for mix in mixes_in(t.columns):
            ax.plot(t["bs_bytes"] / 1024, t[mix], marker="o", ms=4, ls=_style(series, i), color=cmap[mix], label=_label(s, f"R/W {mix}"))
            rows += [{"report": s.label, "bs_bytes": int(bs), "mix": mix, "iops": v} for bs, v in zip(t["bs_bytes"], t[mix])]
    _finish(ax, "block size (KiB)", "IOPS", logy=True)
    ax.set_xscale("log", base=2)
    sizes = sorted({float(b) / 1024 for s in series for b in s.frame["bs_bytes"]})
    ax.set_xticks(sizes, [f"{v:g}" for v in sizes])  # the tested block sizes, not powers of 4
    ax.xaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(si))
    fig.suptitle("IOPS by block size and R/W mix")
    data = pd.DataFrame(rows)
    return Plot(
        "iops-2d", "IOPS vs block size", "Average IOPS over the measurement window, one line per R/W mix.", _drop_report(data), _png(fig)
    )


def _drop_report(frame: pd.DataFrame) -> pd.DataFrame:
    if "report" in frame.columns and not frame["report"].astype(bool).any():
        return frame.drop(columns="report")
    return frame


def iops_3d(table: pd.DataFrame) -> Plot:
    """The PTS 3D bar chart of the IOPS table: block size x R/W mix x IOPS."""
    t = table.sort_values("bs_bytes", ascending=False).reset_index(drop=True)
    mixes = mixes_in(t.columns)
    fig = _new(6.0, top_in=0.3, bottom_in=0.0)
    fig.subplots_adjust(left=0.0, right=0.95)
    ax = fig.add_subplot(projection="3d")
    cmap = _colors(mixes)
    rows = []
    for j, mix in enumerate(mixes):
        z = t[mix].astype(float).to_numpy()
        xs = np.arange(len(t), dtype=float)
        ax.bar3d(xs, np.full_like(xs, j), np.zeros_like(xs), 0.6, 0.6, np.nan_to_num(z), color=cmap[mix], shade=True)
        rows += [{"bs_bytes": int(bs), "mix": mix, "iops": v} for bs, v in zip(t["bs_bytes"], z)]
    ax.set_xticks(np.arange(len(t)) + 0.3)
    ax.set_xticklabels([bs_text(b) for b in t["bs_bytes"]], fontsize="small")
    ax.set_yticks(np.arange(len(mixes)) + 0.3)
    ax.set_yticklabels(mixes, fontsize="small")
    ax.zaxis.set_major_formatter(FuncFormatter(si))
    ax.set_xlabel("block size")
    ax.set_ylabel("R/W mix")
    ax.set_zlabel("IOPS", labelpad=12)
    ax.view_init(elev=24, azim=-58)
    ax.set_box_aspect((1.25, 1.1, 0.8), zoom=1.15)
    fig.suptitle("IOPS table, 3D")
    return Plot("iops-3d", "IOPS table (3D bar chart)", "The tabular result as bars: block size x R/W mix.", pd.DataFrame(rows), _png(fig))


def tp_bars(series: list[Series]) -> Plot:
    """Throughput (MB/s, 10^6 B/s) per block size, read and write bars."""
    fig = _new(3.8)
    ax = fig.add_subplot()
    rows = []
    n = len(series)
    width = 0.8 / (2 * n)
    for i, s in enumerate(series):
        t = s.frame.sort_values("bs_bytes").reset_index(drop=True)
        x = np.arange(len(t))
        for k, (col, color) in enumerate((("read_mb_s", "tab:blue"), ("write_mb_s", "tab:red"))):
            off = (k * n + i - (2 * n - 1) / 2) * width
            vals = t[col].astype(float)
            bars = ax.bar(
                x + off,
                vals,
                width,
                color=color,
                alpha=1.0 if i == 0 else 0.55,
                hatch="" if i == 0 else "//",
                label=_label(s, col.split("_")[0]),
            )
            ax.bar_label(bars, fmt="%.0f", fontsize="x-small")
            rows += [
                {"report": s.label, "bs_bytes": int(bs), "direction": col.split("_")[0], "mb_s": v} for bs, v in zip(t["bs_bytes"], vals)
            ]
        ax.set_xticks(x)
        ax.set_xticklabels([f"SEQ {bs_text(b)}" for b in t["bs_bytes"]])
    _finish(ax, "access and block size", "MB/s (10^6 B/s)")
    fig.suptitle("Sequential throughput, 100 % read and 100 % write")
    return Plot("tp-bars", "Throughput", "Average MB/s over the measurement window.", _drop_report(pd.DataFrame(rows)), _png(fig))


def lat_bars(series: list[Series], tc_qd: str = "") -> Plot:
    """Mean, max and 99.99 % response times per block size x R/W mix (three panels);
    ``tc_qd`` ("TC1/QD1") is the test's, for the title."""
    fig = _new(4.0)
    axes = fig.subplots(1, 3)
    rows = []
    n = len(series)
    for ax, (col, text) in zip(axes, (("mean_us", "mean (ART)"), ("max_us", "max (MRT)"), ("p99_99_us", "99.99 %"))):
        for i, s in enumerate(series):
            t = s.frame
            bss = sorted(t["bs_bytes"].unique(), reverse=True)
            mixes = mixes_in(t["mix"].unique())
            cmap = _colors(mixes)
            width = 0.8 / (len(mixes) * n)
            for j, mix in enumerate(mixes):
                sub = t[t["mix"] == mix].set_index("bs_bytes").reindex(bss)
                x = np.arange(len(bss)) + (j * n + i - (len(mixes) * n - 1) / 2) * width
                ax.bar(
                    x,
                    sub[col].astype(float),
                    width,
                    color=cmap[mix],
                    alpha=1.0 if i == 0 else 0.55,
                    hatch="" if i == 0 else "//",
                    label=_label(s, f"R/W {mix}"),
                )
                rows += [{"report": s.label, "stat": col, "bs_bytes": int(b), "mix": mix, "us": v} for b, v in zip(bss, sub[col])]
            ax.set_xticks(np.arange(len(bss)))
            ax.set_xticklabels([bs_text(b) for b in bss])
        ax.set_title(text, fontsize="medium")
        _finish(ax, "block size", "µs", legend=False)
    _shared_legend(fig, axes, series)
    title = f"Response times, {tc_qd}" if tc_qd else "Response times"
    fig.suptitle(title)
    return Plot(
        "lat-bars",
        title,
        "Mean, maximum and 99.99th-percentile completion latency per block size and R/W mix.",
        _drop_report(pd.DataFrame(rows)),
        _png(fig),
    )


def _contiguous(lo: np.ndarray, hi: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bin edges and values for ``stairs`` from bins that may have gaps (empty bins are not
    in the CSV): a gap becomes a bin of value 0."""
    edges = [float(lo[0])]
    out: list[float] = []
    for a, b, v in zip(lo, hi, values):
        if a > edges[-1]:
            out.append(0.0)
            edges.append(float(a))
        out.append(float(v))
        edges.append(float(b))
    return np.array(edges), np.array(out)


PERCENTILES = (50.0, 99.0, 99.9, 99.99, 99.999, 99.9999)

# A direction's percentiles: ddir, ios, and p<q>_us (µs; None where the I/O count cannot resolve it) per PERCENTILES.
PercentileRow = dict[str, Union[str, int, Optional[float]]]


def hist_percentiles(frame: pd.DataFrame) -> list[PercentileRow]:
    """Completion-latency percentiles from histogram bins, per direction: the upper edge of
    the bin where the cumulative count reaches the percentile (fio's json+ bins are ~1.6 %
    wide, so this is within a bin of fio's own percentile). A percentile the I/O count
    cannot resolve (99.9999 % needs 10^6 I/Os) is None."""
    rows = []
    ddirs = sorted(frame["ddir"].astype(str).unique()) if "ddir" in frame.columns else [""]
    for d in ddirs:
        sub = (frame[frame["ddir"].astype(str) == d] if d else frame).sort_values("lo_us")
        counts = sub["count"].to_numpy(float)
        total = float(counts.sum())
        if total <= 0:
            continue
        cum = np.cumsum(counts) / total
        row: PercentileRow = {"ddir": d or "all", "ios": int(total)}
        for q in PERCENTILES:
            resolvable = total * (1 - q / 100) >= 1 - 1e-9
            idx = int(np.searchsorted(cum, q / 100 - 1e-12))
            row[f"p{q:g}_us"] = float(sub["hi_us"].iloc[min(idx, len(sub) - 1)]) if resolvable else None
        rows.append(row)
    return rows


def histograms(name: str, title: str, panels: list[tuple[str, list[Series]]]) -> Plot:
    """Response-time histograms (lo_us, hi_us, count, ddir), one panel per element, log-log,
    one step line per direction (and per report); the share of I/Os per bin, so runs of
    different lengths compare."""
    ncols = min(3, max(1, len(panels)))
    nrows = max(1, math.ceil(len(panels) / ncols))
    fig = _new(2.5 * nrows + 0.7, rows=nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True, sharey=True)
    colors = {"read": "tab:blue", "write": "tab:red"}
    rows = []
    for k, (element, series) in enumerate(panels):
        ax = axes[k // ncols][k % ncols]
        for i, s in enumerate(series):
            h = s.frame
            ddirs = sorted(h["ddir"].astype(str).unique()) if "ddir" in h.columns else [""]
            for d in ddirs:
                sub = (h[h["ddir"].astype(str) == d] if d else h).sort_values("lo_us")
                if sub.empty:
                    continue
                total = float(sub["count"].sum()) or 1.0
                share = sub["count"].to_numpy(float) / total
                edges, values = _contiguous(sub["lo_us"].to_numpy(float), sub["hi_us"].to_numpy(float), share)
                ax.stairs(values, edges, color=colors.get(d, "tab:gray"), ls=_style(series, i), lw=1.3, label=_label(s, f"{d or 'all'}"))
                for pct in hist_percentiles(sub.assign(ddir=d) if d else sub):
                    for q, style in ((99.0, ":"), (99.99, "--")):
                        if pct.get(f"p{q:g}_us"):
                            ax.axvline(pct[f"p{q:g}_us"], color=colors.get(d, "tab:gray"), ls=style, lw=0.8, alpha=0.8)
                rows += [
                    {"report": s.label, "element": element, "ddir": d, "lo_us": lo, "hi_us": hi, "count": c, "share": sh}
                    for lo, hi, c, sh in zip(sub["lo_us"], sub["hi_us"], sub["count"], share)
                ]
        ax.set_title(_plain(element), fontsize="small")
        ax.set_ylim(bottom=1e-7)
        _finish(
            ax,
            "completion latency (µs)" if k // ncols == nrows - 1 else "",
            "share of I/Os" if k % ncols == 0 else "",
            logx=True,
            logy=True,
            legend=False,
        )
    for k in range(len(panels), nrows * ncols):
        axes[k // ncols][k % ncols].set_axis_off()
    spare = axes[-1][-1] if len(panels) < nrows * ncols else None
    _shared_legend(fig, axes, panels[0][1] if panels else [], spare)
    fig.suptitle(title)
    caption = (
        "Response-time histograms from fio's json+ bins: the share of I/Os per latency bin, log axes; "
        "dotted and dashed lines mark the 99 % and 99.99 % percentiles."
    )
    return Plot(name, title, caption, _drop_report(pd.DataFrame(rows)), _png(fig))


def wsat(series: list[Series], x: str, log: bool = False) -> Plot:
    """WSAT IOPS against time (minutes) or against drive fills (TGBW / capacity)."""
    fig = _new(4.2, top_in=0.55 if x == "time" else 1.0)
    ax = fig.add_subplot()
    rows = []
    for i, s in enumerate(series):
        t = s.frame.sort_values("segment")
        xs = t["t_s"] / 60 if x == "time" else t["drive_fills"]
        ax.plot(xs, t["iops"], marker=".", ms=3, lw=1, ls=_style(series, i), color=f"C{i}", label=_label(s, "IOPS") if s.label else None)
        rows.append(t[["segment", "t_s", "bytes_written_total", "drive_fills", "iops"]].assign(report=s.label))
    xlabel = "time (minutes)" if x == "time" else "drive fills (TGBW / user capacity)"
    _finish(ax, xlabel, "IOPS", logx=log)
    capacities = {_capacity_tb(s.frame) for s in series}
    if x != "time" and len(capacities) == 1 and None not in capacities:
        tb = float(capacities.pop() or 0.0)  # a second scale on top: TGBW in TB (10^12 bytes)
        top = ax.secondary_xaxis("top", functions=(lambda f: np.asarray(f, dtype=float) * tb, lambda w: np.asarray(w, dtype=float) / tb))
        top.set_xlabel("TGBW (TB written)")
        top.xaxis.set_major_formatter(SiLogFormatter() if log else FuncFormatter(lambda v, _p: f"{v:g}"))
        if log:
            top.xaxis.set_minor_formatter(SiLogFormatter(minor_thresholds=(1, 0.4)))
    kind = "time" if x == "time" else "drive fills"
    name = f"wsat-{'time' if x == 'time' else 'fills'}{'-log' if log else ''}"
    title = f"WSAT: IOPS vs {kind}{' (log)' if log else ''}"
    fig.suptitle(title)
    return Plot(
        name, title, f"RND 4KiB write IOPS per segment against {kind}.", _drop_report(pd.concat(rows, ignore_index=True)), _png(fig)
    )


def _capacity_tb(frame: pd.DataFrame) -> Optional[float]:
    """The user capacity behind drive_fills (bytes written / fills), in TB, rounded to 4
    significant digits so two segments' rounding noise agrees (to 3 decimals, as it was, a
    32 MiB namespace was 0 TB: the TGBW axis divided by zero, and a 1.07 GB one 0.001 TB, 7 %
    off)."""
    ok = (
        frame[(frame["drive_fills"] > 0) & frame["bytes_written_total"].notna()]
        if "bytes_written_total" in frame.columns
        else frame.iloc[0:0]
    )
    if ok.empty:
        return None
    tb = float((ok["bytes_written_total"] / ok["drive_fills"]).median()) / 1e12
    return float(f"{tb:.4g}") if tb > 0 and np.isfinite(tb) else None


def wsat_latency(series: list[Series]) -> Plot:
    fig = _new(3.6)
    ax = fig.add_subplot()
    rows = []
    for i, s in enumerate(series):
        t = s.frame.sort_values("segment")
        ax.plot(t["t_s"] / 60, t["lat_mean_us"], lw=1.2, ls=_style(series, i), color="tab:blue", label=_label(s, "mean (ART)"))
        ax.plot(t["t_s"] / 60, t["lat_max_us"], lw=0.8, ls=_style(series, i), color="tab:red", label=_label(s, "max (MRT)"))
        rows.append(t[["segment", "t_s", "lat_mean_us", "lat_max_us"]].assign(report=s.label))
    _finish(ax, "time (minutes)", "µs", logy=True)
    fig.suptitle("WSAT: response times vs time")
    return Plot(
        "wsat-latency",
        "WSAT: response times",
        "Mean and maximum completion latency per segment.",
        _drop_report(pd.concat(rows, ignore_index=True)),
        _png(fig),
    )


def hir_overview(series: list[Series], baselines: list[Optional[float]]) -> Plot:
    """HIR: IOPS against time over all wait states, the baseline as a line."""
    fig = _new(3.8)
    ax = fig.add_subplot()
    rows = []
    waits = sorted({float(w) for s in series for w in s.frame["wait_s"].dropna().unique()})
    cmap = _colors(waits)
    for i, (s, base) in enumerate(zip(series, baselines)):
        writes = s.frame[s.frame["phase"].isin(["A", "C"])] if "phase" in s.frame.columns else s.frame  # B is the idle time
        for w, grp in writes.groupby("wait_s"):
            ax.plot(
                grp["t_s"] / 60,
                grp["iops"],
                ".",
                ms=2.5,
                color=cmap[float(w)],
                alpha=1.0 if i == 0 else 0.5,
                label=_label(s, f"wait {w:g} s"),
            )
        if base is not None:
            ax.axhline(base, color="black", ls=_style(series, i), lw=1, label=_label(s, f"baseline {si(base)}"))
        rows.append(s.frame.assign(report=s.label, baseline_iops=base))
    _finish(ax, "time (minutes)", "IOPS")
    fig.suptitle("HIR: IOPS vs time, all wait states")
    return Plot(
        "hir-overview",
        "HIR: IOPS vs time",
        "Access A (5 s writes between waits) and C (return to baseline) per wait state.",
        _drop_report(pd.concat(rows, ignore_index=True)),
        _png(fig),
    )


def hir_wait_states(series: list[Series], baselines: list[Optional[float]]) -> Plot:
    """HIR: one panel per wait state, IOPS vs time since the wait state began, A and C, against the baseline."""
    waits = sorted({float(w) for s in series for w in s.frame["wait_s"].dropna().unique()})
    ncols = min(3, max(1, len(waits)))
    nrows = max(1, math.ceil(len(waits) / ncols))
    fig = _new(2.7 * nrows + 0.5, rows=nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    rows = []
    for k, w in enumerate(waits):
        ax = axes[k // ncols][k % ncols]
        for i, (s, base) in enumerate(zip(series, baselines)):
            sub = s.frame[s.frame["wait_s"].astype(float) == w].sort_values("t_s")
            if sub.empty:
                continue
            t0 = float(sub["t_s"].min())
            for phase, color in (("A", "tab:green"), ("C", "tab:gray")):
                p = sub[sub["phase"] == phase]
                ax.plot(
                    (p["t_s"] - t0) / 60,
                    p["iops"],
                    ".",
                    ms=3,
                    color=color,
                    alpha=1.0 if i == 0 else 0.45,
                    label=_label(s, f"access {phase}"),
                )
            if base is not None:
                ax.axhline(base, color="black", ls=_style(series, i), lw=1, label=_label(s, "baseline"))
            rows.append(sub.assign(report=s.label, t_rel_s=sub["t_s"] - t0, baseline_iops=base))
        ax.set_title(f"wait state {w:g} s", fontsize="medium")
        _finish(ax, "minutes since the wait state began", "IOPS", legend=False)
    for k in range(len(waits), nrows * ncols):
        axes[k // ncols][k % ncols].set_axis_off()
    spare = axes[-1][-1] if len(waits) < nrows * ncols else None
    _shared_legend(fig, axes[:, :] if spare is None else [a for a in np.ravel(axes) if a is not spare], series, spare)
    fig.suptitle("HIR: each wait state against the baseline")
    data = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
    return Plot(
        "hir-wait-states",
        "HIR per wait state",
        "IOPS of access A (after each wait) and C (continuous writes) against the pre-HIR steady-state baseline.",
        _drop_report(data),
        _png(fig),
    )


def curve(series: list[Series]) -> Plot:
    """Latency against IOPS (mean, 99 %, 99.9 %), one line per numjobs, points along the queue depth."""
    fig = _new(4.0)
    axes = fig.subplots(1, 3, sharex=True)
    jobs = sorted({int(j) for s in series for j in s.frame["numjobs"].unique()})
    cmap = _colors(jobs)
    for ax, (col, text) in zip(axes, (("lat_mean_us", "mean"), ("lat_p99_us", "99 %"), ("lat_p99_9_us", "99.9 %"))):
        for i, s in enumerate(series):
            for nj, grp in s.frame.groupby("numjobs"):
                grp = grp.sort_values("iodepth")
                ax.plot(
                    grp["iops"], grp[col], marker="o", ms=3, ls=_style(series, i), color=cmap[int(nj)], label=_label(s, f"{int(nj)} jobs")
                )
        ax.set_title(f"{text} latency", fontsize="medium")
        _finish(ax, "IOPS", "µs", logy=True, legend=False)
        ax.xaxis.set_major_formatter(FuncFormatter(si))
    _shared_legend(fig, axes, series)
    depths = sorted({int(q) for s in series for q in s.frame["iodepth"].unique()})
    along = f"QD {depths[0]}–{depths[-1]}" if len(depths) > 1 else f"QD {depths[0]}" if depths else "QD"
    fig.suptitle(f"RND 4KiB 70/30: latency vs IOPS ({along} along each line)")
    return Plot(
        "curve",
        "Latency vs IOPS",
        "Mean, 99th and 99.9th-percentile latency against IOPS, one line per job count.",
        _tag(series),
        _png(fig),
    )


def diff_heatmap(
    name: str,
    title: str,
    frame: pd.DataFrame,
    rows_col: str,
    cols: list[str],
    row_text: Callable[[Any], str],
    xlabel: str = "R/W mix (read/write %)",
    ylabel: str = "block size",
) -> Plot:
    """compare(): the % difference of B against A per table cell, as a colour map (rows
    ``rows_col``, columns ``cols``: block size x R/W mix for the IOPS table)."""
    values = frame[cols].to_numpy(dtype=float)
    fig = _new(0.45 * len(frame) + 1.8, 7.5, top_in=0.45, bottom_in=0.75)
    fig.subplots_adjust(left=1.2 / 7.5)  # the block sizes and the axis label beside them
    ax = fig.add_subplot()
    lim = float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0
    im = ax.imshow(values, cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
    for (r, c), v in np.ndenumerate(values):
        if math.isfinite(v):  # white on the dark cells
            ax.text(c, r, f"{v:+.0f} %", ha="center", va="center", fontsize="small", color="white" if abs(v) > 0.55 * lim else "black")
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels(cols)
    ax.set_yticks(range(len(frame)))
    ax.set_yticklabels([row_text(v) for v in frame[rows_col]])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    fig.colorbar(im, ax=ax, label="B vs A (%)")
    fig.suptitle(title, fontsize="medium")
    return Plot(name, title, "Difference of report B against report A per cell, in % of A.", frame[[rows_col, *cols]], _png(fig))


# --------------------------------------------------------------------------- XSR, CBW, DIRTH

XSR_COLORS = {"AG1": "tab:blue", "AG2": "tab:orange", "AG3": "tab:green"}


def xsr_time(series: list[Series], value: str, ylabel: str, name: str, title: str, logy: bool = False, scale: float = 1.0) -> Plot:
    """XSR: ``value`` per segment against time, coloured by access group, with the group
    boundaries marked."""
    fig = _new(4.0)
    ax = fig.add_subplot()
    rows = []
    for i, s in enumerate(series):
        t = s.frame.sort_values("segment")
        for ag, grp in t.groupby("phase", sort=True):
            ax.plot(
                grp["t_end_s"] / 60,
                grp[value] * scale,
                marker=".",
                ms=3,
                lw=1,
                ls=_style(series, i),
                color=XSR_COLORS.get(str(ag), "gray"),
                label=_label(s, f"{ag}: {grp['element'].iloc[0]}"),
            )
        starts = t.groupby("phase", sort=True)["t_start_s"].min().iloc[1:]
        for x in starts:
            ax.axvline(x / 60, color="black", lw=0.8, ls=_style(series, i), alpha=0.6)
        rows.append(t[["segment", "phase", "element", "t_start_s", "t_end_s", value]].assign(report=s.label))
    _finish(ax, "time (minutes)", ylabel, logy=logy)
    fig.suptitle(title)
    caption = "One point per segment; the vertical lines mark the changes of access group (AG1 → AG2 → AG3)."
    return Plot(name, title, caption, _drop_report(pd.concat(rows, ignore_index=True)), _png(fig))


def _di_lines(ax: Axes, series: list[Series], x: str, y: str, scale_y: float = 1.0) -> list[pd.DataFrame]:
    tcs = sorted({int(t) for s in series for t in s.frame["numjobs"].unique()}, reverse=True)
    cmap = _colors(tcs)
    rows = []
    for i, s in enumerate(series):
        for tc, grp in s.frame.groupby("numjobs"):
            grp = grp.sort_values("iodepth")
            ax.plot(grp[x], grp[y] * scale_y, marker="o", ms=3, ls=_style(series, i), color=cmap[int(tc)], label=_label(s, f"TC {int(tc)}"))
        rows.append(s.frame.assign(report=s.label))
    return rows


def demand_variation(series: list[Series], title: str) -> Plot:
    """Demand variation: IOPS against queue depth, one line per thread count."""
    fig = _new(4.0)
    ax = fig.add_subplot()
    rows = _di_lines(ax, series, "iodepth", "iops")
    _finish(ax, "queue depth (per thread)", "IOPS", logx=True)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    fig.suptitle(title)
    caption = "IOPS at every thread count x queue depth of the matrix, averaged over the measurement window."
    return Plot("demand-variation", title, caption, _drop_report(pd.concat(rows, ignore_index=True)), _png(fig))


def demand_intensity(series: list[Series], title: str, limit_us: Optional[float] = None) -> Plot:
    """Demand intensity: mean response time against IOPS, one line per thread count
    (queue depth grows along each line); the max-IOPS point's response-time limit dashed."""
    fig = _new(4.0)
    ax = fig.add_subplot()
    rows = _di_lines(ax, series, "iops", "lat_mean_us", 1e-3)
    if limit_us:
        ax.axhline(limit_us / 1e3, color="red", ls="--", lw=1, label=f"ART limit {limit_us / 1e3:g} ms")
    _finish(ax, "IOPS", "mean response time (ms)", logy=True)
    ax.xaxis.set_major_formatter(FuncFormatter(si))
    fig.suptitle(title)
    caption = "Mean response time (ART) against IOPS; each line is one thread count, its points the queue depths."
    return Plot("demand-intensity", title, caption, _drop_report(pd.concat(rows, ignore_index=True)), _png(fig))


def di_writes(series: list[Series], title: str) -> Plot:
    """CBW/DIRTH: IOPS of the preconditioning intervals and the pre-writes against time."""
    fig = _new(3.8)
    ax = fig.add_subplot()
    rows = []
    for i, s in enumerate(series):
        t = s.frame
        for phase, color in (("pc", "tab:blue"), ("prewrite", "tab:orange")):
            p = t[t["phase"] == phase]
            if len(p):
                ax.plot(p["t_end_s"] / 60, p["iops"], ".", ms=3, color=color, alpha=1.0 if i == 0 else 0.5, label=_label(s, phase))
        rows.append(t[t["phase"].isin(["pc", "prewrite"])][["round", "phase", "element", "t_end_s", "iops"]].assign(report=s.label))
    _finish(ax, "time (minutes)", "IOPS")
    fig.suptitle(title)
    caption = "Preconditioning intervals (pc) and the pre-write before each matrix round, 100 % writes at the test's TC/QD."
    return Plot("di-writes", title, caption, _drop_report(pd.concat(rows, ignore_index=True)), _png(fig))
