"""`ssdtwin calibrate`: fit a drive's timing parameters to its published (or measured) corners.

The targets are the four corners of crates/ssdtwin-core/src/spec/corners.rs (studies/corners.py):
seq read MB/s, rand read IOPS, seq write MB/s, rand write IOPS, each with the one `[timing]`
parameter it sets. A corner without one is a prediction: measured, reported, not fitted.
With figures from a datasheet or a measurement and no `sets` in the spec, each sets the
parameter the CM6-R's calibration fits (corners.DEFAULT_SETS):

| figure                        | parameter               | why this one                          |
|-------------------------------|-------------------------|---------------------------------------|
| seq read 128 KiB QD16         | host_link_bytes_per_s   | link/controller data path is the limit |
| rand read 4 KiB QD32 x 8 jobs | t_read_ns               | 256 reads in flight: NAND read latency and link set it (Little's law) |
| seq write 128 KiB QD16        | t_prog_ns               | NAND program bandwidth is the limit    |
| rand write 4 KiB QD32 x 8 jobs| gc_page_reads_per_iu    | φ of docs/models.md §3: GC read cost  |

Each parameter is solved by a secant search on the simulated figure, in that order (later
figures depend on earlier parameters, not the reverse), and the order is swept twice. The
figures are measured exactly as `ssdtwin reproduce cm6` measures them (experiments.cm6_drive,
measure_cm6), with each corner's job shape. The CM6-R preset, which has no `[corners]` of its
own, is fitted on the KIOXIA CM6 namespace brief's four 3.84 TB figures (CM6_CORNERS).
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal, NotRequired, Optional, TypedDict, cast

from .. import _core
from ..core_types import TimingTable
from ..drive import Drive
from .corners import DEFAULT_SETS, NAMES, Corner, CornerFields, figure_text, spec_key
from .experiments import CM6_WINDOWS_MS, cm6_drive, measure_corner, run_corner

CM6_MODEL = "kioxia-cm6-r-3.84t"
CM6_SOURCE = "KIOXIA CM6 namespace brief, 3.84 TB namespace, marked calibrate"
CM6_CORNERS = {
    c.name: c
    for c in (
        Corner("seq-read", 6971.0, CM6_SOURCE, DEFAULT_SETS["seq-read"]),
        Corner("rand-read", 1_549_202.0, CM6_SOURCE, DEFAULT_SETS["rand-read"]),
        Corner("seq-write", 4246.0, CM6_SOURCE, DEFAULT_SETS["seq-write"]),
        Corner("rand-write", 173_067.0, CM6_SOURCE, DEFAULT_SETS["rand-write"]),
    )
}

# A figure that moves less than this many percent per percent of its parameter does not
# identify it: with the figures' noise of about 0.05 %, the parameter would be known to no
# better than +-1 % per 0.05 % of noise. Measured at the fit (`sensitivity`), and over every
# search step of FLAT_STEP or more (smaller steps are within the noise).
MIN_SENSITIVITY = 0.05
FLAT_STEP = 0.05


@dataclass(frozen=True)
class Fit:
    x: float
    y: float
    # False when the figure stopped responding to the parameter short of the target
    # (something else binds it: on a drive of few superblocks, GC binds sequential writes).
    responds: bool = True
    # Where it stopped responding (the most relaxed value tried): what binds it binds there.
    stuck: Optional[float] = None


def solve(
    f: Callable[[float], float],
    target: float,
    x0: float,
    tol: float,
    log: Callable[[str], None],
    bounds: tuple[float, float] = (0.0, math.inf),
    sign: int = -1,
) -> Fit:
    """Secant search for f(x) = target on log x (f monotone; `sign` -1 when the figure falls
    as x rises, a time, +1 when it rises, a ceiling). A start already within `tol` is kept
    (calibrating calibrated presets changes nothing). Where the figure barely follows the
    parameter (under MIN_SENSITIVITY over a step of FLAT_STEP or more: another limit holds
    it) or a step's slope has the wrong sign (noise), the next step is the one that would
    reach the target were the figure proportional to x**sign (and, where it barely follows,
    at least FLAT_STEP). Two such steps in a row that
    relax the parameter (to raise the figure) end the search with the start value and
    `responds` False: the figure stops responding short of the target, and extrapolating it
    would run the parameter to an extreme (a program time of 0 ns). Tightening it (to lower
    the figure) goes on: a parameter binds once it is tight enough."""
    xs, ys = [x0], [f(x0)]
    if abs(ys[0] / target - 1) <= tol:
        return Fit(x0, ys[0])
    xs.append(x0 * (1.1 if x0 * 1.1 <= bounds[1] else 1 / 1.1))  # 10 %, inside the range
    ys.append(f(xs[1]))
    flat = 0
    for _ in range(14):
        if abs(ys[-1] / target - 1) <= tol:
            break
        (xa, xb), (ya, yb) = xs[-2:], ys[-2:]
        la, lb = math.log(xa), math.log(xb)
        moved = abs(lb - la) >= FLAT_STEP
        weak = moved and abs(math.log(yb / ya)) < MIN_SENSITIVITY * abs(lb - la)
        flat = flat + 1 if weak and yb < target else 0
        if flat >= 2:
            log(f"    stopped responding short of the target: {yb:,.1f} at {xb:,.4g} (from {ys[0]:,.1f} at {xs[0]:,.4g})")
            return Fit(x0, ys[0], responds=False, stuck=xb)
        wrong_way = sign * (yb - ya) * (lb - la) < 0  # noise between close trials
        if ya == yb or weak:
            ln = lb + flat_step(sign * math.log(target / yb), relaxing=weak and yb < target)
        elif wrong_way:
            ln = lb + sign * math.log(target / yb)
        else:
            ln = lb + (target - yb) * (lb - la) / (yb - ya)
        xn = min(max(math.exp(max(min(ln, lb + 1.0), lb - 1.0)), bounds[0]), bounds[1])  # the range the core accepts
        if xn == xb:
            log(f"    at the end of its range: {yb:,.1f} at {xb:,.4g}")
            if flat:  # the figure had stopped following it on the way there
                return Fit(x0, ys[0], responds=False, stuck=xb)
            break
        xs.append(xn)
        ys.append(f(xn))
        log(f"    {xn:,.4g} -> {ys[-1]:,.1f}")
    best = min(range(len(xs)), key=lambda i: abs(ys[i] / target - 1))
    return Fit(xs[best], ys[best])


def flat_step(d: float, relaxing: bool) -> float:
    """The step (in ln x) where the secant cannot be trusted: `d` would reach the target were
    the figure proportional to x**sign. Relaxing a parameter whose figure stopped following
    it: a full step (e), to see at once whether anything comes of it; otherwise `d`, but at
    least FLAT_STEP."""
    if relaxing:
        return math.copysign(1.0, d)
    return math.copysign(max(abs(d), FLAT_STEP), d)


# The range the core accepts for each calibratable parameter (spec/mod.rs, validate_timing):
# the search stays inside it, and a fit that ends on a bound says so.
# Each one's sign: -1 for a time or a cost (the figure falls as it rises), +1 for a ceiling.
PARAM_RANGE: dict[str, tuple[float, float]] = {
    "host_link_bytes_per_s": (1e6, 1e12),
    "t_read_ns": (1e3, 1e7),
    "t_prog_ns": (1e4, 1e8),
    "gc_page_reads_per_iu": (1e-3, 1.0),
    "ctrl_max_iops": (1.0, 1e9),
    "ctrl_max_write_iops": (1.0, 1e9),
    "ctrl_max_write_bytes_per_s": (1.0, 1e12),
    "ctrl_backend_bytes_per_s": (1.0, 1e12),
}
PARAM_SIGN = {p: -1 if p in ("t_read_ns", "t_prog_ns", "gc_page_reads_per_iu") else 1 for p in PARAM_RANGE}


# A fitted parameter's value: a count, a float, or None when its figure does not identify it.
Value = int | float | bool | None


class FittedParameter(TypedDict):
    """How one parameter was fitted (``fit_one``), then judged with every fitted value
    (``final_row`` adds the figure it gives, its error and whether it identifies the value)."""

    value: Value
    figure: str
    target: float
    unit: str
    responds: bool
    at_bound: bool
    seconds: float
    reached: NotRequired[bool]  # the search ended within --tol of the figure
    stuck: NotRequired[Optional[float]]  # where the figure stopped responding (not kept)
    sensitivity: NotRequired[float]
    simulated: NotRequired[float]
    error: NotRequired[float]
    identified: NotRequired[bool]
    kept: NotRequired[Value]


class BoundBy(TypedDict):
    """What holds a figure that stopped responding to its parameter (``bound_by``): a
    ceiling of the spec (`relaxed` is twice it), a NAND time (`relaxed` is half it), a
    parameter fitted to another figure after this one had reached its target (`relaxed` is
    its value then), or GC during a sequential write (`param` "waf", `value` the WAF)."""

    param: str
    kind: Literal["ceiling", "time", "fitted", "gc"]
    value: float
    relaxed: float
    figure: float  # this figure with `param` at `relaxed`
    fitted_to: NotRequired[str]  # the figure that set it (kind "fitted"; a ceiling when another figure was fitted to it)
    kept_for: NotRequired[str]  # the figure that was to set it, whose fit left the spec's value (a ceiling or time)


class FigureRow(TypedDict):
    """A corner's line of the result; a calibrated one's also names its parameter's fit."""

    figure: str
    label: str
    unit: str
    target: float
    twin: float
    error: float
    kind: Literal["calibrated", "predicted"]
    sets: Optional[str]
    source: str
    block_bytes: int
    iodepth: int
    numjobs: int
    value: NotRequired[Value]
    kept: NotRequired[Value]
    identified: NotRequired[bool]
    sensitivity: NotRequired[float]
    responds: NotRequired[bool]
    at_bound: NotRequired[bool]
    within_tol: NotRequired[bool]
    bound_by: NotRequired[Optional[BoundBy]]


class Calibration(TypedDict):
    """What ``calibrate`` returns (``ssdtwin calibrate -o json``, docs/calibration.md)."""

    scale: int
    seed: int
    tol: float
    windows_ms: dict[str, tuple[int, int]]
    figures: list[FigureRow]
    fitted: dict[str, FittedParameter]
    outside_tolerance: list[Optional[str]]
    timing: TimingTable
    corners: dict[str, CornerFields]
    spec: NotRequired[str]  # the spec fitted, as the command names it
    implausible: NotRequired[list[str]]  # fitted NAND times outside what published dies do (`implausible`)
    kept: NotRequired[list[str]]  # parameters a figure sets whose fit left the spec's value


def start_value(param: str, timing: TimingTable, c: Corner) -> float:
    """Where the search for `param` starts: its value in the spec, or for a ceiling the spec
    leaves at 0 (none) the corner's own rate, where such a ceiling would bind."""
    v = float(timing[param]["value"])
    if v > 0:
        return v
    return c.bytes_per_s if param.endswith("bytes_per_s") else c.bytes_per_s / c.shape[0]


def prepare_images(spec_toml: str, corners: list[Corner], scale: int, seed: int, tmp: str) -> dict[str, str]:
    """The preconditioned drive of each state the corners need, as images in `tmp`."""
    rand_bs = next((c.shape[0] for c in corners if c.name == "rand-write"), 4096)
    images = {}
    for state in ("seq", "rand"):
        if any(c.state == state for c in corners):
            images[state] = str(Path(tmp) / state)
            cm6_drive(None, scale, state, 1.0, seed, path=images[state], spec_toml=spec_toml, rand_block_bytes=rand_bs).drive.close()
    return images


def measure_figures(
    spec_toml: str, corners: dict[str, Corner], scale: int, seed: int = 1, windows_ms: Optional[dict[str, tuple[int, int]]] = None
) -> dict[str, float]:
    """Each corner's figure on a twin of `spec_toml`, measured as `calibrate` measures it
    (the round trip's "measured drive": a twin whose parameters the fit does not see)."""
    order = [corners[n] for n in NAMES if n in corners]
    with tempfile.TemporaryDirectory(prefix="ssdtwin-figures-") as tmp:
        images = prepare_images(spec_toml, order, scale, seed, tmp)
        out = {}
        for c in order:
            d = Drive.open(images[c.state], writable=False)
            try:
                out[c.name] = measure_corner(d, c, None, windows_ms)
            finally:
                d.close()
    return out


def calibrate(
    spec_toml: str,
    corners: dict[str, Corner],
    scale: int,
    tol: float,
    log: Callable[[str], None],
    seed: int = 1,
    windows_ms: Optional[dict[str, tuple[int, int]]] = None,
) -> Calibration:
    """Fit the parameter of every corner that `sets` one; then every corner (predictions
    too) is measured once more with all the fitted values (the second sweep can move a
    figure fitted before) and checked against `tol`.

    Every trial starts from the same drive state: the preconditioned drives are images in
    a temporary directory, and each trial runs on a fresh read-only open of one (writes
    stay in memory). A trial is therefore a function of the parameters alone, not of the
    trials before it, and the figures are those `ssdtwin reproduce cm6` measures."""
    spec = _core.parse_spec(spec_toml)
    timing: TimingTable = json.loads(json.dumps(spec["timing"]))
    order = [corners[n] for n in NAMES if n in corners]
    fitting = [c for c in order if c.sets]
    fitted: dict[str, FittedParameter] = {}
    with tempfile.TemporaryDirectory(prefix="ssdtwin-calibrate-") as tmp:
        # Preparing the drives writes 2x (and 3x) their capacity, seconds at 1/64 and
        # minutes at larger scales, before the first search prints anything: say so.
        states = sorted({c.state for c in order}, key=("seq", "rand").index)
        log(
            f"preconditioning {len(states)} drive{'s' if len(states) > 1 else ''} of the spec at 1/{scale} "
            f"({', '.join('sequential 2x' if s == 'seq' else 'sequential 2x + random 3x' for s in states)} of the capacity, fast-forward)"
        )
        t_prep = time.perf_counter()
        images = prepare_images(spec_toml, order, scale, seed, tmp)
        log(f"  done in {time.perf_counter() - t_prep:.1f} s")

        def figure(c: Corner, trial: TimingTable) -> float:
            d = Drive.open(images[c.state], writable=False)
            try:
                return measure_corner(d, c, trial, windows_ms)
            finally:
                d.close()

        def waf(c: Corner, trial: TimingTable) -> Optional[float]:
            d = Drive.open(images[c.state], writable=False)
            try:
                return run_corner(d, c, trial, windows_ms).waf
            finally:
                d.close()

        # The values after the first sweep's fit of each parameter whose figure reached its
        # target then: if a later fit takes the figure away, `bound_by` finds which.
        reached: dict[str, dict[str, float]] = {}
        for i, c in enumerate(fitting + fitting):  # two sweeps: the figures are weakly coupled
            fitted[str(c.sets)] = fit_one(c, timing, figure, tol, log)
            if i < len(fitting) and fitted[str(c.sets)].get("reached"):
                reached[str(c.sets)] = {p: float(timing[p]["value"]) for p in PARAM_RANGE if p in timing}
        log("every figure with the fitted values:")
        rows = []
        for c in order:
            y = figure(c, timing)
            if c.sets:
                fitted[c.sets]["sensitivity"] = sensitivity(c, timing, y, figure)
            rows.append(final_row(c, y, fitted, tol, log))
            if c.sets and not rows[-1].get("responds", True):
                stuck = fitted[c.sets].get("stuck")
                rows[-1]["bound_by"] = bound_by(c, timing, y, stuck, figure, reached.get(c.sets), fitting, log, waf, spec["timing"])
    result: Calibration = {
        "scale": scale,
        "seed": seed,
        "tol": tol,
        "windows_ms": windows_ms or CM6_WINDOWS_MS,
        "figures": rows,
        "fitted": fitted,
        "outside_tolerance": [r["sets"] for r in rows if r["sets"] and not r["within_tol"]],
        "timing": timing,
        "corners": {c.name: c.toml_fields() for c in order},
    }
    result["implausible"] = implausible(spec["nand"], result)
    result["kept"] = [p for p in fitted if timing[p]["value"] == spec["timing"][p]["value"]]
    return result


def fit_one(
    c: Corner,
    timing: TimingTable,
    figure: Callable[[Corner, TimingTable], float],
    tol: float,
    log: Callable[[str], None],
) -> FittedParameter:
    """One sweep's search for the parameter corner `c` sets; `timing` takes the value (it
    keeps its value when the figure stops responding)."""
    p = str(c.sets)
    log(f"{c.label}: fit {p} to {c.value:,.0f} {c.unit}")
    t0 = time.perf_counter()
    is_float = isinstance(timing[p]["value"], float)
    lo, hi = PARAM_RANGE[p]

    def f(x: float) -> float:
        trial = json.loads(json.dumps(timing))
        trial[p]["value"] = x if is_float else int(round(x))
        return figure(c, trial)

    # Aim well inside --tol (the figures' noise is under 0.05 %), so that the check with
    # every fitted value does not fail on the coupling between them.
    x0 = min(max(start_value(p, timing, c), lo), hi)
    fit = solve(f, c.value, x0, tol / 4, log, bounds=(lo, hi), sign=PARAM_SIGN[p])
    x = fit.x
    if fit.responds:
        timing[p]["value"] = x if is_float else int(round(x))
    val = timing[p]["value"]
    kept = "" if fit.responds else f"; the figure stops responding to {p} short of the target: its start value kept"
    log(f"  {p} = {f'{val:.4g}' if is_float else f'{val:,}'} (simulated {fit.y:,.1f}, {fit.y / c.value - 1:+.2%}{kept})")
    return {
        "value": val,
        "figure": c.label,
        "target": c.value,
        "unit": c.unit,
        "responds": fit.responds,  # the last sweep's search decides
        "at_bound": x in (lo, hi) and fit.responds,
        "seconds": time.perf_counter() - t0,
        "reached": fit.responds and abs(fit.y / c.value - 1) <= tol,
        "stuck": fit.stuck,
    }


def sensitivity(c: Corner, timing: TimingTable, y: float, figure: Callable[[Corner, TimingTable], float]) -> float:
    """d ln(figure) / d ln(parameter) at the fit, over a 10 % step of the parameter (down
    at the top of its range): how well the figure pins the parameter."""
    p = str(c.sets)
    x = float(timing[p]["value"]) or start_value(p, timing, c)
    step = 1.1 if x * 1.1 <= PARAM_RANGE[p][1] else 1 / 1.1
    trial = json.loads(json.dumps(timing))
    trial[p]["value"] = x * step if isinstance(timing[p]["value"], float) else int(round(x * step))
    return math.log(figure(c, trial) / y) / math.log(step)


# Ceilings of the controller and link: a figure held by one rises when it is relaxed.
CEILINGS = ("host_link_bytes_per_s", "ctrl_max_iops", "ctrl_max_write_iops", "ctrl_max_write_bytes_per_s", "ctrl_backend_bytes_per_s")
# The NAND times each corner's own I/O waits on (halved: a figure the dies hold rises).
# A sequential write reads NAND only when GC copies, which on a large enough drive it does
# not (a small one: "at this scale"), so its reads are not probed.
TIMES_OF = {
    "seq-read": ("t_read_ns",),
    "rand-read": ("t_read_ns",),
    "seq-write": ("t_prog_ns",),
    "rand-write": ("t_read_ns", "t_prog_ns"),
}
BOUND_GAIN = 0.01  # a relaxed parameter that raises the figure by less does not hold it
SEQ_WAF_GC = 1.02  # a sequential overwrite above this WAF: GC copies data (too few superblocks)


def bound_by(
    c: Corner,
    timing: TimingTable,
    y: float,
    stuck: Optional[float],
    figure: Callable[[Corner, TimingTable], float],
    earlier: Optional[dict[str, float]],
    fitting: list[Corner],
    log: Callable[[str], None],
    waf: Optional[Callable[[Corner, TimingTable], Optional[float]]] = None,
    start: Optional[TimingTable] = None,
) -> Optional[BoundBy]:
    """What holds a figure that stopped responding to its parameter short of the target.

    When the figure had reached its target in the first sweep (`earlier`: the values then),
    each parameter fitted since, back at its value then, with every other value as fitted
    (`y` is the figure with them). Then, where the figure stopped responding (its parameter
    at `stuck`, the most relaxed value the search tried), each ceiling the spec sets (not 0)
    at twice its value and each NAND time the corner's I/O waits on (TIMES_OF) at half. The
    first that raises its figure by BOUND_GAIN, unless a later one raises it by as much
    again; None when none does (then something the fit does not vary binds it). A ceiling
    or time another figure was to set names that figure: `fitted_to` when its fit moved it,
    `kept_for` when it still has its value in `start` (the spec's timing).

    A sequential write that runs at WAF above SEQ_WAF_GC where it stopped is held by GC
    copying data, on a drive of too few superblocks (docs/calibration.md): that is named
    first, since with GC on, ceilings the copies pass through bind too."""
    own = str(c.sets)
    fitted_to = {str(o.sets): o.label for o in fitting}
    trials: list[tuple[BoundBy, TimingTable, float]] = []
    for p, then in (earlier or {}).items():
        now = float(timing[p]["value"])
        if p != own and now != then:
            b: BoundBy = {"param": p, "kind": "fitted", "value": now, "relaxed": then, "figure": y, "fitted_to": fitted_to.get(p, "")}
            trials.append((b, timing, y))
    base = json.loads(json.dumps(timing))
    if stuck is not None:
        base[own]["value"] = stuck if isinstance(timing[own]["value"], float) else int(round(stuck))
    y_stuck = figure(c, base)
    log(f"  {c.label}: {own} at {_num(float(base[own]['value']))} (where it stopped responding) gives {y_stuck:,.1f} {c.unit}")
    if c.name == "seq-write" and waf is not None:
        w = waf(c, base)
        log(f"  {c.label}: WAF {w or 0:.2f} there")
        if w is not None and w > SEQ_WAF_GC:
            return {"param": "waf", "kind": "gc", "value": w, "relaxed": w, "figure": y_stuck}
    probed = {b["param"] for b, _, _ in trials}
    for p, kind, factor in [(q, "ceiling", 2.0) for q in CEILINGS] + [(q, "time", 0.5) for q in TIMES_OF[c.name]]:
        v = float(timing[p]["value"]) if p in timing else 0.0
        if p != own and p not in probed and v > 0:
            lo, hi = PARAM_RANGE[p]
            b = {"param": p, "kind": cast(Any, kind), "value": v, "relaxed": min(max(v * factor, lo), hi), "figure": y_stuck}
            if p in fitted_to and start is not None and p in start and float(start[p]["value"]) == v:
                b["kept_for"] = fitted_to[p]  # its figure's fit left the spec's value: not fitted to it
            elif p in fitted_to:  # a parameter another figure set: the two conflict
                b["fitted_to"] = fitted_to[p]
            trials.append((b, base, y_stuck))
    best: Optional[BoundBy] = None
    best_gain = 1 + BOUND_GAIN
    for b, at, ref in trials:
        trial = json.loads(json.dumps(at))
        trial[b["param"]]["value"] = b["relaxed"] if isinstance(timing[b["param"]]["value"], float) else int(round(b["relaxed"]))
        b["figure"] = figure(c, trial)
        log(f"  {c.label}: {b['param']} at {_num(b['relaxed'])} gives {b['figure']:,.1f} {c.unit}")
        if b["figure"] / ref > best_gain:
            best, best_gain = b, b["figure"] / ref * (1 + BOUND_GAIN)
    return best


def final_row(c: Corner, y: float, fitted: dict[str, FittedParameter], tol: float, log: Callable[[str], None]) -> FigureRow:
    """A corner's line of the result: target, twin, error; for a calibrated one its
    parameter, and whether the figure identifies it."""
    bs, qd, jobs = c.shape
    err = y / c.value - 1
    row: FigureRow = {
        "figure": c.name,
        "label": c.label,
        "unit": c.unit,
        "target": c.value,
        "twin": y,
        "error": err,
        "kind": "calibrated" if c.sets else "predicted",
        "sets": c.sets,
        "source": c.source,
        "block_bytes": bs,
        "iodepth": qd,
        "numjobs": jobs,
    }
    if not c.sets:
        log(f"  {c.label}: {y:,.1f} {c.unit} ({err:+.2%}), predicted")
        return row
    f = fitted[c.sets]
    log(f"  {c.label}: {y:,.1f} {c.unit} ({err:+.2%}); it moves {f['sensitivity']:+.2f} % per 1 % of {c.sets}")
    identified = f["responds"] and abs(f["sensitivity"] or 0.0) >= MIN_SENSITIVITY
    f["simulated"], f["error"], f["identified"] = y, err, identified
    f["kept"] = None if identified else f["value"]
    if not identified:
        f["value"] = None  # no number for a parameter its figure does not identify
    row["value"], row["kept"], row["identified"] = f["value"], f["kept"], identified
    row["sensitivity"], row["responds"], row["at_bound"] = f["sensitivity"], f["responds"], f["at_bound"]
    row["within_tol"] = identified and abs(err) <= tol
    return row


# What published NAND dies do, by bits per cell (docs/calibration.md, "Plausible values"):
# a page read with ECC in µs, and one die's program throughput in MB/s (a program unit,
# planes x page x bits, over t_prog). A fitted value outside its range more likely stands
# for a limit the fit does not vary, a controller cap, than for the dies.
NAND_RANGES: dict[int, dict[str, tuple[float, float]]] = {
    3: {"t_read_us": (30.0, 100.0), "die_program_mb_s": (20.0, 200.0)},
    4: {"t_read_us": (60.0, 170.0), "die_program_mb_s": (10.0, 80.0)},
}
CELL_NAMES = {3: "TLC", 4: "QLC"}
# What else may hold a figure whose NAND time fits outside the range.
OTHER_LIMIT = {
    "t_read_ns": "for a random read, the controller's command rate: --sets rand-read=ctrl_max_iops",
    "t_prog_ns": "for a sequential write, the controller's back end: --sets seq-write=ctrl_backend_bytes_per_s",
}


def implausible(nand: Mapping[str, Any], result: Calibration) -> list[str]:
    """One line per fitted NAND time outside what published dies of the spec's cell type do
    (NAND_RANGES); empty for cell types without a range. `nand`: the spec's [nand] as the
    core parses it (`_core.parse_spec`)."""

    def value(key: str) -> float:
        return float(nand[key]["value"])

    bits = int(value("bits_per_cell"))
    ranges = NAND_RANGES.get(bits)
    if ranges is None:
        return []
    cell = CELL_NAMES[bits]
    notes = []
    for param in ("t_read_ns", "t_prog_ns"):
        entry = result["timing"].get(param)
        if param not in result["fitted"] or entry is None:
            continue
        ns = float(entry["value"])
        if param == "t_read_ns":
            lo, hi = ranges["t_read_us"]
            got, what = ns / 1e3, f"a page read of {ns / 1e3:,.1f} µs, where published {cell} dies take {lo:g}-{hi:g} µs"
        else:
            unit_bytes = value("planes_per_die") * value("page_bytes") * bits
            lo, hi = ranges["die_program_mb_s"]
            got = unit_bytes / ns * 1e3 if ns > 0 else 0.0
            what = (
                f"a die programming {got:,.1f} MB/s ({unit_bytes / 1024:g} KiB per program), "
                f"where published {cell} dies program {lo:g}-{hi:g} MB/s"
            )
        if not lo <= got <= hi:
            notes.append(
                f'timing.{param} fitted to {ns:,.0f} ns is {what} (docs/calibration.md, "Plausible values"): '
                f"the figure may be held by something the fit does not vary ({OTHER_LIMIT[param]})"
            )
    return notes


def why_not(row: FigureRow) -> str:
    """Why a calibrated figure's parameter is not identified ("" when it is)."""
    p = row["sets"]
    if not row["responds"]:
        b = row.get("bound_by")
        stops = f"it stops responding to {p} short of the target"
        conflict = (
            "the two figures ask for conflicting values under this spec; fit one with another parameter (--sets) or edit the spec "
            "(docs/calibration.md)"
        )
        if b and b["kind"] == "gc":
            return (
                f"{stops}: GC copies data during the sequential write (WAF {b['value']:.2f} where it stopped): the drive at this "
                "--scale has too few superblocks; calibrate a larger one (docs/calibration.md)"
            )
        if b and b["kind"] != "fitted":
            at = f"at {'twice' if b['kind'] == 'ceiling' else 'half'} that, {b['figure']:,.1f} {row['unit']}"
            if b.get("fitted_to"):
                return f"{stops}: timing.{b['param']} ({_num(b['value'])}), fitted to {b.get('fitted_to')}, binds it ({at}): {conflict}"
            if b.get("kept_for"):
                return (
                    f"{stops}: timing.{b['param']} ({_num(b['value'])}, the spec's value: its fit to {b.get('kept_for')} kept it) binds it "
                    f"({at}): {conflict}"
                )
            if b["kind"] == "ceiling":
                return f"{stops}: timing.{b['param']} ({_num(b['value'])}) binds it ({at}; raise or fit that ceiling: docs/calibration.md)"
            return (
                f"{stops}: timing.{b['param']} ({_num(b['value'])}) binds it ({at}): the spec's NAND is too slow for this figure "
                "(docs/calibration.md)"
            )
        if b:
            then, now = _num(b["relaxed"]), _num(b["value"])
            return (
                f"{stops}: it reached it before {b['param']} was fitted to {b.get('fitted_to', '')} ({then} -> {now}), which "
                f"binds it (at {then}, {b['figure']:,.1f} {row['unit']}): {conflict}"
            )
        return f"{stops}: something the fit does not vary bounds the figure (docs/calibration.md)"
    if row["identified"] is False:
        s = row["sensitivity"] or 0.0
        return f"it moves {abs(s):.2f} % per 1 % of {p}, too little to identify it (at least {MIN_SENSITIVITY:.2f}: docs/calibration.md)"
    if row["at_bound"]:
        return f"{p} is at the end of the range the core accepts ({row['value']:,})"
    return ""


def _num(v: float) -> str:
    """A parameter as the table prints it: 49,163 or 0.7136."""
    return f"{v:,.0f}" if v == round(v) else f"{v:.4g}"


def _inline(fields: Mapping[str, object]) -> Any:
    """`{ value = 1, source = "..." }` as the presets write it (tomlkit's own inline tables
    print without the inner spaces)."""
    import tomlkit

    body = ", ".join(f"{k} = {json.dumps(v) if isinstance(v, str) else v}" for k, v in fields.items())
    return tomlkit.parse(f"x = {{ {body} }}")["x"]


def fitted_spec(spec_text: str, result: Calibration, origin: str) -> str:
    """The spec text with the fitted values and `[CALIBRATED]` sources in `[timing]` and the
    corners it was fitted on in `[corners]`; every other line and comment kept (tomlkit).
    Checked by the core before it is returned."""
    import tomlkit

    doc = tomlkit.parse(spec_text)
    if "timing" not in doc:
        doc["timing"] = tomlkit.table()
    timing: Any = doc["timing"]
    for row in result["figures"]:
        if row["kind"] != "calibrated":
            continue
        v = row["value"]  # a number: a parameter not identified is refused before (within_tol)
        value = float(f"{v:.4g}") if isinstance(v, float) else int(cast(int, v))
        source = (
            f"[CALIBRATED] ssdtwin calibrate --scale 1/{result['scale']} (docs/calibration.md): "
            f"{row['label']} = {figure_text(row['target'])} {row['unit']} ({row['source']})"
        )
        if row["sets"] in timing:
            timing[row["sets"]]["value"] = value
            timing[row["sets"]]["source"] = source
        else:
            timing[row["sets"]] = _inline({"value": value, "source": source})
    head = "# The figures this spec was calibrated on (ssdtwin calibrate; docs/calibration.md)."
    if "corners" in doc:
        table: Any = doc["corners"]
        old = {k: table[k].get("source") for k in table}
        if any(old.get(spec_key(n)) != f["source"] for n, f in result["corners"].items()):
            # Figures from elsewhere (--datasheet, --measured): the table's comments spoke of
            # the figures they replace (a preset's "the KIOXIA CM6 namespace brief's measured
            # corners" above a datasheet's), so the table is written anew, in its place.
            fresh = tomlkit.table()
            fresh.add(tomlkit.comment(head[2:]))
            for name, fields in result["corners"].items():
                fresh.add(spec_key(name), _inline(fields))
            for k in table:  # a corner this fit did not take (none today: every corner is fitted or predicted)
                if k not in fresh:
                    fresh.add(k, table[k])
            doc["corners"] = fresh
        else:
            for name, fields in result["corners"].items():
                table[spec_key(name)] = _inline(fields)
        text = tomlkit.dumps(doc)
        if spec_text.endswith("\n") and not text.endswith("\n"):  # a new last table ends without one
            text += "\n"
    else:  # a new table at the end, written as the presets write theirs
        lines = [f"{spec_key(n)} = {_inline(f).as_string()}" for n, f in result["corners"].items()]
        head += "\n[corners]\n"
        text = tomlkit.dumps(doc).rstrip("\n") + "\n\n" + head + "\n".join(lines) + "\n"
    _core.parse_spec(text, origin)
    return text


FIGURES = {
    "host_link_bytes_per_s": "seq read 128 KiB QD16 = 6,971 MB/s",
    "t_read_ns": "rand read 4 KiB QD32 x 8 jobs = 1,549,202 IOPS",
    "t_prog_ns": "seq write 128 KiB QD16 = 4,246 MB/s",
    "gc_page_reads_per_iu": "rand write 4 KiB QD32 x 8 jobs = 173,067 IOPS",
}

# Presets sharing the CM6 NAND and firmware take the same calibrated numbers; the CD6 keeps
# its own (datasheet) link ceiling.
FAMILY = {
    "kioxia-cm6-r-3.84t": set(FIGURES),
    "kioxia-cm6-v-3.2t": set(FIGURES),
    "kioxia-cm6-v-1.6t": set(FIGURES),
    "kioxia-cd6-v-3.2t": set(FIGURES) - {"host_link_bytes_per_s"},
}


def _source_presets_dir() -> Path:
    """The presets of the source checkout this package runs from (crates/ssdtwin-core/presets).

    The extension embeds them when it is built, so they can only be rewritten in a checkout
    (an editable install), and take effect at the next `make install`."""
    here = Path(__file__).resolve()
    for root in here.parents:
        d = root / "crates" / "ssdtwin-core" / "presets"
        if d.is_dir():
            return d
    raise FileNotFoundError(
        "--write rewrites crates/ssdtwin-core/presets in a source checkout; "
        f"none found above {here.parent} (install with `pip install -e .` from a checkout)"
    )


def preset_path(name: str) -> Path:
    """A preset's TOML in the source checkout (`--write`)."""
    return _source_presets_dir() / f"{name}.toml"


def write_presets(result: Calibration, directory: Any = None) -> list[str]:
    """Rewrite the calibrated parameters of the CM6-family presets with `result["fitted"]`.

    The TOML is edited with tomlkit, so every other line, comment and source stays as it was."""
    import tomlkit

    base = Path(directory) if directory else _source_presets_dir()
    changed = []
    for name, params in FAMILY.items():
        path = base / f"{name}.toml"
        doc = tomlkit.parse(path.read_text())
        for k in sorted(params):
            v = result["fitted"][k]["value"]  # a number: the fit was within --tol
            value = float(f"{v:.4g}") if isinstance(v, float) else int(cast(int, v))
            src = (
                f"[CALIBRATED] ssdtwin calibrate kioxia-cm6-r-3.84t --scale 1/{result['scale']} (docs/calibration.md): "
                f"{FIGURES[k]} (KIOXIA CM6 namespace brief, 3.84 TB namespace, marked calibrate)"
            )
            if name != "kioxia-cm6-r-3.84t":
                src += "; same NAND and firmware platform as CM6-R 3.84 TB"
            tables = [t for t in doc.values() if isinstance(t, dict) and k in t]
            if len(tables) != 1:
                raise ValueError(f"{path}: no single '{k} = {{ value, source }}' entry to update")
            entry = tables[0][k]
            entry["value"] = value
            entry["source"] = src
        path.write_text(tomlkit.dumps(doc))
        changed.append(str(path))
    return changed
