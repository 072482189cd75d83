"""`ssdtwin calibrate`: fit the timing parameters that docs/sources.md marks "calibrate".

Only the four CM6-R 3.84 TB figures marked "calibrate" in the KIOXIA CM6 namespace brief are used, each to
fit exactly one parameter whose datasheet value is unknown:

| figure (3.84 TB namespace)          | parameter               | why this one                          |
|-------------------------------------|-------------------------|---------------------------------------|
| seq read 128 KiB QD16, 6,971 MB/s   | host_link_bytes_per_s   | link/controller data path is the limit |
| rand read 4 KiB QD32, 1,549,202 IOPS| t_read_ns               | 256 reads in flight: NAND read latency and link set it (Little's law) |
| seq write 128 KiB QD16, 4,246 MB/s  | t_prog_ns               | NAND program bandwidth is the limit    |
| rand write 4 KiB QD32, 173,067 IOPS | gc_page_reads_per_iu    | φ of docs/models.md §3: GC read cost  |

Everything else (the 3.20 TB namespace, mixed workloads, other presets) is a prediction.
Each parameter is solved by a secant search on the simulated figure, in the order above
(later figures depend on earlier parameters, not the reverse). The figures are measured
exactly as `ssdtwin reproduce cm6` measures them (experiments.cm6_drive, measure_cm6).
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .. import _core
from ..drive import Drive
from .experiments import CM6_WINDOWS_MS, cm6_drive, cm6_figure, measure_cm6


@dataclass(frozen=True)
class Target:
    name: str
    test: str  # the CM6 corner (experiments.CM6_TESTS): job file, drive state and window
    value: float  # the published figure: MB/s for sequential tests, IOPS for random ones
    param: str

    @property
    def state(self) -> str:
        return "seq" if self.test.startswith("seq") else "rand"

    @property
    def unit(self) -> str:
        return "MB/s" if self.test.startswith("seq") else "IOPS"


CM6_TARGETS = [
    Target("seq read 128 KiB QD16", "seq-read", 6971.0, "host_link_bytes_per_s"),
    Target("rand read 4 KiB QD32", "rand-read", 1_549_202.0, "t_read_ns"),
    Target("seq write 128 KiB QD16", "seq-write", 4246.0, "t_prog_ns"),
    Target("rand write 4 KiB QD32", "rand-write", 173_067.0, "gc_page_reads_per_iu"),
]


# A figure that moves less than this (relative) while its parameter moves by FLAT_STEP or
# more does not respond to it: the figures' noise is under 0.05 %.
FLAT_CHANGE = 5e-4
FLAT_STEP = 0.05


@dataclass(frozen=True)
class Fit:
    x: float
    y: float
    # False when the figure stopped responding to the parameter short of the target
    # (something else binds it: on a drive of few superblocks, GC binds sequential writes).
    responds: bool = True


def solve(f: Callable[[float], float], target: float, x0: float, tol: float, log: Callable[[str], None]) -> Fit:
    """Secant search for f(x) = target on log x (f monotone). A start already within `tol`
    is kept (calibrating calibrated presets changes nothing). Two steps in a row that move x
    by FLAT_STEP or more but the figure by under FLAT_CHANGE end the search with the start
    value and `responds` False: extrapolating a flat figure would run the parameter to an
    extreme (a program time of 0 ns) without reaching the target."""
    xs, ys = [x0], [f(x0)]
    if abs(ys[0] / target - 1) <= tol:
        return Fit(x0, ys[0])
    xs.append(x0 * 1.1)
    ys.append(f(xs[1]))
    flat = 0
    for _ in range(14):
        if abs(ys[-1] / target - 1) <= tol:
            break
        moved = abs(math.log(xs[-1] / xs[-2])) >= FLAT_STEP
        flat = flat + 1 if moved and abs(ys[-1] / ys[-2] - 1) < FLAT_CHANGE else 0
        if flat >= 2:
            log(f"    stopped responding short of the target: {ys[-1]:,.1f} at {xs[-1]:,.4g} (from {ys[0]:,.1f} at {xs[0]:,.4g})")
            return Fit(x0, ys[0], responds=False)
        (xa, xb), (ya, yb) = xs[-2:], ys[-2:]
        if ya == yb:
            xn = xb * (target / yb)
        else:
            la, lb = math.log(xa), math.log(xb)
            ln = lb + (target - yb) * (lb - la) / (yb - ya)
            xn = math.exp(max(min(ln, lb + 1.0), lb - 1.0))
        xs.append(xn)
        ys.append(f(xn))
        log(f"    {xn:,.4g} -> {ys[-1]:,.1f}")
    best = min(range(len(xs)), key=lambda i: abs(ys[i] / target - 1))
    return Fit(xs[best], ys[best])


def calibrate(model: str, scale: int, tol: float, log: Callable[[str], None], seed: int = 1) -> dict[str, Any]:
    """Fit the four parameters; every figure is then measured once more with all four fitted
    values (the second sweep can move a figure fitted before) and checked against `tol`.

    Every trial starts from the same drive state: the preconditioned drives are images in
    a temporary directory, and each trial runs on a fresh read-only open of one (writes
    stay in memory). A trial is therefore a function of the parameters alone, not of the
    trials before it, and the figures are those `ssdtwin reproduce cm6` measures."""
    spec = _core.preset(model)
    timing = json.loads(json.dumps(spec["timing"]))
    fitted: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="ssdtwin-calibrate-") as tmp:
        images = {s: str(Path(tmp) / s) for s in ("seq", "rand")}
        for state, path in images.items():
            cm6_drive(model, scale, state, 1.0, seed, path=path).drive.close()

        def figure(t: Target, trial: dict[str, Any]) -> float:
            d = Drive.open(images[t.state], writable=False)
            try:
                return cm6_figure(t.test, measure_cm6(d, t.test, trial))
            finally:
                d.close()

        for t in CM6_TARGETS + CM6_TARGETS:  # two sweeps: the figures are weakly coupled
            log(f"{t.name}: fit {t.param} to {t.value:,.0f} {t.unit}")
            t0 = time.perf_counter()
            is_float = isinstance(timing[t.param]["value"], float)

            def f(x: float, t: Target = t, is_float: bool = is_float) -> float:
                trial = json.loads(json.dumps(timing))
                trial[t.param]["value"] = x if is_float else int(round(x))
                return figure(t, trial)

            # Aim well inside --tol (the figures' noise is under 0.05 %), so that the check
            # with all four fitted values does not fail on the coupling between them.
            fit = solve(f, t.value, float(timing[t.param]["value"]), tol / 4, log)
            val = fit.x if is_float else int(round(fit.x))
            timing[t.param]["value"] = val
            fitted[t.param] = {
                "value": val,
                "figure": t.name,
                "target": t.value,
                "unit": t.unit,
                "responds": fit.responds,  # the last sweep's search decides
                "seconds": time.perf_counter() - t0,
            }
            kept = "" if fit.responds else f"; the figure stops responding to {t.param} short of the target: its start value kept"
            log(f"  {t.param} = {val:,} (simulated {fit.y:,.1f}, {fit.y / t.value - 1:+.2%}{kept})")
        log("every figure with all four fitted values:")
        for t in CM6_TARGETS:
            y = figure(t, timing)
            fitted[t.param].update(simulated=y, error=y / t.value - 1)
            log(f"  {t.name}: {y:,.1f} {t.unit} ({y / t.value - 1:+.2%})")
    outside = [k for k, v in fitted.items() if abs(v["error"]) > tol or not v["responds"]]
    return {
        "model": model,
        "scale": scale,
        "seed": seed,
        "tol": tol,
        "windows_ms": CM6_WINDOWS_MS,
        "fitted": fitted,
        "outside_tolerance": outside,
        "timing": timing,
    }


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


def write_presets(result: dict[str, Any], directory: Any = None) -> list[str]:
    """Rewrite the calibrated parameters of the CM6-family presets with `result["fitted"]`.

    The TOML is edited with tomlkit, so every other line, comment and source stays as it was."""
    import tomlkit

    base = Path(directory) if directory else _source_presets_dir()
    changed = []
    for name, params in FAMILY.items():
        path = base / f"{name}.toml"
        doc = tomlkit.parse(path.read_text())
        for k in sorted(params):
            v = result["fitted"][k]["value"]
            value = float(f"{v:.4g}") if isinstance(v, float) else int(v)
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
