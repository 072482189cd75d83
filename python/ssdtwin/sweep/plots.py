"""The sweep file's [[plot]] tables as PNG figures: y against x, one line per combination of
the other swept columns (failed points left out), each written atomically (cluster.save_figure)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Optional

from ..cluster import save_figure
from .config import Sweep, plot_file_name


def draw(sweep: Sweep, rows: Sequence[dict[str, Any]], folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for plot in sweep.plots:
        others = [c for c in sweep.swept if c != plot.x]
        drawn = [r for r in rows if r.get("status") == "ok" and r.get(plot.y) is not None and r.get(plot.x) is not None]
        place, categories = x_axis([r[plot.x] for r in drawn])
        lines: dict[tuple[Any, ...], list[tuple[Any, Any]]] = {}
        for r in drawn:
            lines.setdefault(tuple(r.get(c) for c in others), []).append((place(r[plot.x]), r[plot.y]))
        fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
        if categories is not None:
            ax.set_xticks(range(len(categories)), [plain(str(c)) for c in categories])
        for key, pts in lines.items():
            pts.sort(key=lambda xy: xy[0])
            label = plain(", ".join(f"{c}={v}" for c, v in zip(others, key))) or None
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", markersize=3, label=label)
        ax.set_xlabel(plot.x)
        ax.set_ylabel(plot.y)
        ax.set_title(plain(plot.title or f"{plot.y} vs {plot.x}" + (f" ({sweep.title})" if sweep.title else "")), fontsize=10)
        ax.grid(True, alpha=0.3)
        if len(lines) > 1:
            ax.legend(fontsize=7)
        # Written beside its name and renamed (at 110 dpi, the figure's own: 770 x 495 px, as
        # docs/img/sweep-cm6-*.png): a Ctrl-C or a full disk while it is written left a
        # truncated PNG under the name (and over the figure of an earlier run).
        paths.append(save_figure(fig, folder / plot_file_name(plot.x, plot.y)))
    return paths


def x_axis(values: Sequence[Any]) -> tuple[Callable[[Any], float], Optional[list[Any]]]:
    """Where each x value goes: at its number when every value is one (a variable's values
    are strings: "16" is 16, where it was drawn between "1" and "2", in the strings' order),
    else at its place among the values in the sweep's order (the order the file wrote them),
    which are then returned as the axis's categories."""

    def number(v: Any) -> float:
        if isinstance(v, bool):
            raise ValueError(v)
        return float(v)

    try:
        for v in values:
            number(v)
    except (TypeError, ValueError):
        categories = list(dict.fromkeys(values))
        where = {v: float(i) for i, v in enumerate(categories)}
        return where.__getitem__, categories
    return number, None


def plain(text: str) -> str:
    """The file's text as written: matplotlib reads what stands between two $ as TeX, so a
    title "$5 to $6" was drawn as math and one with an unknown command ("$\\foo$") stopped the
    sweep with a traceback once every point had run."""
    return text.replace("$", r"\$")
