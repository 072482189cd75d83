"""What the PTS report's figures and pages say, read as a storage engineer reads them: the
steady-state figures draw the SNIA limits as steady.json holds them, every axis has its
unit, titles state the run's own settings, names are shown as typed, links resolve.

Small synthetic folders (report_fixture.py) or hand-written steady.json variables: each
test renders in a second or two."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure

from ssdtwin.pts import plots
from ssdtwin.pts.steady import Variable, evaluate


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """The matplotlib figures the plots module draws (before they become PNGs)."""
    figures: list[Figure] = []
    real = plots._png

    def keep(fig: Figure) -> bytes:
        figures.append(fig)
        return real(fig)

    monkeypatch.setattr(plots, "_png", keep)
    return figures


def variable(values: list[float]) -> dict[str, Any]:
    """A steady.json tracking variable over rounds 1-5, evaluated by the harness's rule."""
    var = Variable("RND 4KiB 100% W IOPS", "rnd-4k-0_100", "iops", "IOPS")
    return dict(evaluate([var], [list(enumerate(values, start=1))])["variables"][0])


def test_window_band_is_as_tall_as_the_data_excursion_allowed(drawn: list[Figure]) -> None:
    """PTS 2.0: the range (max - min) over the window may be at most 20 % of its average; the
    spec's window plot draws that as 90 % / 110 % x average. Here the range is 30 %: the
    points must not all sit inside the band drawn for the data-excursion limit."""
    var = variable([85.0, 100.0, 115.0, 100.0, 100.0])
    assert not var["steady"] and var["data_excursion"] > var["data_limit"]
    plot = plots.window("window-x", var)
    ax = drawn[-1].axes[0]
    bands = [c for c in ax.collections if isinstance(c, PolyCollection) and "data excursion" in str(c.get_label())]
    assert len(bands) == 1, [c.get_label() for c in ax.collections]
    ys = np.concatenate([p.vertices[:, 1] for p in bands[0].get_paths()])
    assert ys.max() - ys.min() == pytest.approx(var["data_limit"])
    assert plot.meta["data_band"] == pytest.approx([ys.min(), ys.max()])
    assert not all(ys.min() <= v <= ys.max() for v in var["values"])
