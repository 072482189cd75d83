"""The fio options ssdtwin knows: how each one is parsed and what it does to a job.

Each option is described once, in table.py: its treatment (simulated, ignored, accepted
only when off, refused; spec.py), how its value is read and its range (values.py,
simulated.py), and for simulated options the job-state field it sets and that field's
default. The parser applies an option's handler to a job *state* dict (our counterpart of
fio's ``struct thread_options``); a job starts from a copy of the state built by the
``[global]`` sections above it, exactly as fio copies its ``def_thread``. This module
derives the views the parser and the tests use from that one table.
"""

from __future__ import annotations

import copy
from typing import Any, Optional

from .simulated import ASYNC_ENGINES, RANDOM_MODES, RW_MODES, SYNC_ENGINES, namespace_of
from .spec import GENERIC_REFUSAL, IGNORED, NOOP, OFF_ONLY, REFUSED, SIM, SIMULATED, Option, OptionDef
from .table import TABLE
from .values import per_direction_segments

__all__ = [
    "Option",
    "OptionDef",
    "OPTIONS",
    "ENGINE_OPTIONS",
    "IGNORED_REASONS",
    "OFF_ONLY_REASONS",
    "FIO_OPTION_NAMES",
    "FIO_ENGINE_OPTION_NAMES",
    "SIMULATED",
    "IGNORED",
    "OFF_ONLY",
    "REFUSED",
    "SIM",
    "NOOP",
    "SYNC_ENGINES",
    "ASYNC_ENGINES",
    "RW_MODES",
    "RANDOM_MODES",
    "DDIRS",
    "lookup",
    "lookup_engine_option",
    "closest_option",
    "ignored_reason",
    "unsupported_reason",
    "default_state",
    "copy_state",
    "namespace_of",
    "per_direction_segments",
]

DDIRS = ("read", "write", "trim")

_ACCEPTED = [o for o in TABLE if o.treatment != REFUSED]

# Options the parser applies in its first pass, by canonical name; engine options (applied
# in the second pass, once the engine is known) apart.
OPTIONS: dict[str, Option] = {o.name: o for o in _ACCEPTED if o.engines is None}
ENGINE_OPTIONS: dict[str, Option] = {o.name: o for o in _ACCEPTED if o.engines is not None}

_BY_NAME: dict[str, Option] = {name: o for o in OPTIONS.values() for name in (o.name, *o.aliases)}

# Why each accepted option has no effect (canonical name).
IGNORED_REASONS: dict[str, str] = {o.name: o.ignored_reason for o in _ACCEPTED if o.treatment in (IGNORED, OFF_ONLY)}
# Options accepted only at the value that turns them off, and why other values are refused.
OFF_ONLY_REASONS: dict[str, str] = {o.name: o.reason for o in _ACCEPTED if o.treatment == OFF_ONLY}
_REFUSAL_REASONS: dict[str, str] = {o.name: o.reason for o in TABLE if o.treatment == REFUSED and o.reason}

# Every option name and alias fio 3.33 knows (options.c; the profiles' options aside), to
# tell "unsupported" from "unknown" (a typo) and to suggest a name for a typo.
FIO_OPTION_NAMES = frozenset(name for o in TABLE if o.engines is None and not o.profile for name in (o.name, *o.aliases))
# Engine options fio knows for some engine (io_uring, libaio, sync, nbd ...).
FIO_ENGINE_OPTION_NAMES = frozenset(o.name for o in TABLE if o.engines is not None)

# Job-state fields no single option owns: the options given explicitly (fio's
# fio_option_is_set), the echo of no-op options, the read/write mix (rwmixread and
# rwmixwrite) and the four write_*_log files.
_BASE_STATE: dict[str, Any] = {
    "set": set(),
    "noop": {},
    "rwmix": [50, 50],
    "logs": {"bw": None, "iops": None, "lat": None, "hist": None},
}
_DEFAULT_STATE: dict[str, Any] = {**_BASE_STATE, **{k: v for o in _ACCEPTED for k, v in o.defaults.items()}}


def default_state() -> dict[str, Any]:
    """A job's options before any section is applied (fio's defaults from options.c)."""
    return copy.deepcopy(_DEFAULT_STATE)


def copy_state(state: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(state)


def ignored_reason(name: str) -> str:
    """Why an accepted option has no effect on a simulated drive (canonical name)."""
    return IGNORED_REASONS.get(name, "no effect on a simulated drive")


def unsupported_reason(name: str) -> str:
    """Why an option fio knows is refused."""
    return _REFUSAL_REASONS.get(name, GENERIC_REFUSAL)


def lookup(name: str) -> Optional[Option]:
    return _BY_NAME.get(name)


def lookup_engine_option(name: str) -> Optional[Option]:
    return ENGINE_OPTIONS.get(name)


def closest_option(name: str) -> Optional[str]:
    """fio's "Did you mean" (Levenshtein distance within half the length)."""
    best = None
    best_d = None
    for candidate in sorted(FIO_OPTION_NAMES):
        d = _distance(name, candidate)
        if best_d is None or d < best_d:
            best, best_d = candidate, d
    if best is not None and best_d is not None and best_d <= (len(name) + 1) // 2:
        return best
    return None


def _distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]
