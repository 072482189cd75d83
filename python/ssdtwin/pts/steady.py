"""The SNIA PTS steady-state rule, computed by ssdtwin itself (docs/pts.md, Steady state).

PTS 2.0.2 (and PTS-E 1.1) call a tracking variable ``y`` (one value per round) steady at
round ``x`` when, over the measurement window of the 5 rounds ``x-4 .. x``:

1. data excursion: ``max(y) - min(y) <= 0.20 * avg(y)``, and
2. slope excursion: the least-squares line ``y = a*r + b`` through the 5 ``(round, y)``
   points rises or falls by at most ``0.10 * avg(y)`` across the window: ``|a| * 4 <= 0.10 * avg(y)``.

This is cloudharmony's ``isSteadyState`` (lib/BlockStorageTest.php; SNIA PTS
implementations in docs/sources.md); fio's own ``ss=`` option is a different rule. A test
runs at least ``min_rounds`` (5) and at most ``max_rounds`` (25) rounds; when the last
round is reached without steady state the window ``x-4 .. x`` is reported as "not in
steady state". Several tracking variables (IOPS in PTS 2.0 has three) must all be steady
in the same window.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from .records import SteadyState, SteadyVariable, WindowCheckDoc

RULE = "SNIA PTS 2.0.2: 5-round window, data excursion <= 20 %, slope excursion <= 10 %"
WINDOW_ROUNDS = 5
DATA_EXCURSION = 0.20
SLOPE_EXCURSION = 0.10


@dataclass(frozen=True)
class WindowCheck:
    """The rule applied to one window of one tracking variable."""

    rounds: list[int]
    values: list[float]
    steady: bool
    avg: float
    min: float
    max: float
    data_excursion: float  # max - min, in the variable's unit
    data_limit: float  # 0.20 * avg
    slope: float  # least-squares slope per round
    intercept: float
    slope_excursion: float  # |slope| * (window rounds - 1): the fitted line's rise across the window
    slope_limit: float  # 0.10 * avg

    def to_dict(self) -> WindowCheckDoc:
        return {
            "rounds": list(self.rounds),
            "values": list(self.values),
            "steady": self.steady,
            "avg": self.avg,
            "min": self.min,
            "max": self.max,
            "data_excursion": self.data_excursion,
            "data_limit": self.data_limit,
            "slope": self.slope,
            "intercept": self.intercept,
            "slope_excursion": self.slope_excursion,
            "slope_limit": self.slope_limit,
        }


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares line ``y = slope * x + intercept`` (ordinary, unweighted)."""
    n = len(xs)
    if n != len(ys) or n < 2:
        raise ValueError(f"a line needs at least 2 points of (x, y), got {n} x and {len(ys)} y")
    mx = sum(xs) / n
    my = sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError("a line needs at least 2 distinct x values")
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return slope, my - slope * mx


def check_window(
    rounds: Sequence[int], values: Sequence[float], data_excursion: float = DATA_EXCURSION, slope_excursion: float = SLOPE_EXCURSION
) -> WindowCheck:
    """The SNIA rule on one measurement window (normally 5 consecutive rounds).

    A window whose average is 0 or negative, or holds a value that is not finite, is not
    steady (nothing meaningful to compare against)."""
    vals = [float(v) for v in values]
    if len(vals) != len(rounds) or len(vals) < 2:
        raise ValueError(f"a window needs at least 2 rounds with one value each, got {len(rounds)} rounds and {len(vals)} values")
    avg = sum(vals) / len(vals)
    lo, hi = min(vals), max(vals)
    slope, intercept = fit_line([float(r) for r in rounds], vals)
    span = float(rounds[-1] - rounds[0])
    data = hi - lo
    rise = abs(slope) * span
    finite = all(math.isfinite(v) for v in vals)
    steady = finite and avg > 0 and data <= data_excursion * avg and rise <= slope_excursion * avg
    return WindowCheck(
        rounds=[int(r) for r in rounds],
        values=vals,
        steady=steady,
        avg=avg,
        min=lo,
        max=hi,
        data_excursion=data,
        data_limit=data_excursion * avg,
        slope=slope,
        intercept=intercept,
        slope_excursion=rise,
        slope_limit=slope_excursion * avg,
    )


@dataclass(frozen=True)
class Variable:
    """A tracking variable: the ``column`` of ``rounds.csv`` for one ``element``."""

    name: str  # "RND 4KiB 100% W IOPS"
    element: str
    column: str
    unit: str


def last_window(series: Sequence[tuple[int, float]], window: int = WINDOW_ROUNDS) -> Optional[WindowCheck]:
    """The rule on the last ``window`` points of ``(round, value)`` pairs; None while there are fewer."""
    if len(series) < window:
        return None
    tail = list(series)[-window:]
    return check_window([r for r, _ in tail], [v for _, v in tail])


def evaluate(
    variables: Sequence[Variable],
    series: Sequence[Sequence[tuple[int, float]]],
    min_rounds: int = WINDOW_ROUNDS,
    max_rounds: int = 25,
) -> SteadyState:
    """steady.json (docs/pts.md, Report folder): every variable judged on its last 5 rounds.

    ``series[i]`` are the ``(round, value)`` pairs of ``variables[i]`` so far. The test is
    steady when at least ``min_rounds`` rounds are done and every variable is steady in the
    same window."""
    checks = [last_window(s) for s in series]
    rounds_done = min((len(s) for s in series), default=0)
    steady = rounds_done >= max(min_rounds, WINDOW_ROUNDS) and all(c is not None and c.steady for c in checks)
    window: Optional[list[int]] = None
    if checks and all(c is not None for c in checks):
        window = [min(c.rounds[0] for c in checks if c), max(c.rounds[-1] for c in checks if c)]
    out_vars = [_variable(var, s, c) for var, s, c in zip(variables, series, checks)]
    return {
        "rule": RULE,
        "min_rounds": min_rounds,
        "max_rounds": max_rounds,
        "steady": steady,
        "steady_round": window[1] if steady and window else None,
        "window": window,
        "variables": out_vars,
    }


def _variable(var: Variable, series: Sequence[tuple[int, float]], c: Optional[WindowCheck]) -> SteadyVariable:
    """One tracking variable in steady.json: its rounds, and the check of its last window."""
    rounds = [int(r) for r, _ in series]
    values = [float(v) for _, v in series]
    if c is None:
        return {
            "name": var.name,
            "element": var.element,
            "column": var.column,
            "unit": var.unit,
            "rounds": rounds,
            "values": values,
            "steady": False,
            "window": None,
        }
    return {
        "name": var.name,
        "element": var.element,
        "column": var.column,
        "unit": var.unit,
        "rounds": rounds,
        "values": values,
        "steady": c.steady,
        "avg": c.avg,
        "min": c.min,
        "max": c.max,
        "data_excursion": c.data_excursion,
        "data_limit": c.data_limit,
        "slope": c.slope,
        "intercept": c.intercept,
        "slope_excursion": c.slope_excursion,
        "slope_limit": c.slope_limit,
        "window": [c.rounds[0], c.rounds[-1]],
    }


def is_done(state: SteadyState, rounds_done: int) -> bool:
    """Whether a test stops after ``rounds_done`` rounds: steady, or at ``max_rounds``."""
    return bool(state["steady"]) or rounds_done >= int(state["max_rounds"])
