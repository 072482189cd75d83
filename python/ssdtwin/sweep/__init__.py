"""Parameter sweeps on Ray (local by default, any cluster by address) and the what-if
advisor built on them (docs/sweep.md).

``load("sweep.toml")`` expands a sweep file into points; ``run_sweep`` runs them (in this
process or as Ray tasks), keeps each finished point in the output folder and writes one
Parquet table; ``advise`` answers "which drive, namespace size and OP meet these targets at
the lowest cost" from sweeps of the candidates.
"""

from __future__ import annotations

from .config import Plot, Point, Sweep, SweepConfigError, from_dict, load, loads
from .runner import InProcess, RayExecutor, SweepError, SweepResult, run_sweep

__all__ = [
    "InProcess",
    "Plot",
    "Point",
    "RayExecutor",
    "Sweep",
    "SweepConfigError",
    "SweepError",
    "SweepResult",
    "from_dict",
    "load",
    "loads",
    "run_sweep",
]
