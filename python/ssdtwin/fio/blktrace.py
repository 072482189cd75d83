"""blktrace binary traces in ``read_iolog=`` (docs/fio.md §2.10), replayed as fio 3.33
replays them: the core reads the file (crates/ssdtwin-core/src/workload/trace/blktrace.rs:
which events become I/Os, their delays, the probed queue depth); this module resolves the
job's options, the target and ``merge_blktrace_file``.

* The target: ``replay_redirect``, else the trace's one device, which the twin replays on
  the job's default target (fio looks its major:minor up under /dev; "fio: did not find
  replay device(s)" when the host has none). A trace of several devices needs
  ``replay_redirect``, as an iolog of several files does.
* The queue depth: without ``iodepth=`` in the job, the depth fio probes from the trace.
* ``merge_blktrace_file``: the ``read_iolog`` traces merged by time into that file, which
  all the job's clones then replay (what fio documents; fio 3.33's merge is dead code).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from .. import _core
from .errors import FioJobError

__all__ = ["BlkTrace", "is_blktrace", "load", "target_name", "pack", "merge"]

# blktrace_api.h: BLK_IO_TRACE_MAGIC in the top 24 bits of a record's first word; a record
# is 48 bytes, and fio wants a whole one before it calls a file a blktrace.
_MAGIC = 0x65617400
_RECORD_BYTES = 48
_SKIP = ("read", "write", "trim", "sync")


@dataclass
class BlkTrace:
    """A blktrace file checked under the job's replay options (the core's Summary)."""

    path: str
    shown: str
    summary: dict[str, Any]


def is_blktrace(path: str) -> bool:
    """fio's ``is_blktrace``: a whole first record whose magic reads in either byte order."""
    try:
        with open(path, "rb") as f:
            head = f.read(_RECORD_BYTES)
    except OSError:
        return False
    if len(head) < _RECORD_BYTES:
        return False
    return any(struct.unpack(order, head[:4])[0] & 0xFFFFFF00 == _MAGIC for order in ("<I", ">I"))


def _fio(st: Mapping[str, Any]) -> dict[str, Any]:
    """The core's FioReplay of the job's replay options."""
    skip = set(st.get("replay_skip") or ())
    return {
        "replay_scale": int(st.get("replay_scale") or 0),
        "replay_align": int(st.get("replay_align") or 0),
        "time_scale": 100.0 / int(st.get("replay_time_scale") or 100),
        "no_stall": bool(st.get("replay_no_stall")),
        "skip": [name in skip for name in _SKIP],
    }


def _plan(st: Mapping[str, Any], target_bytes: int, lba_bytes: int) -> dict[str, Any]:
    target = {"bytes": target_bytes, "lba": lba_bytes, "beyond": "refuse", "widen": False}
    return {"format": "blktrace", "fio": _fio(st), "target": target}


def _error(e: Exception, shown: str) -> FioJobError:
    """The core's TraceError as the job file's error: the trace, its record, why."""
    place = getattr(e, "place", "")
    reason = getattr(e, "reason", str(e))
    field, value = getattr(e, "field", None), getattr(e, "value", None)
    return FioJobError(f"{place}: {reason}" if place else reason, file=shown, option=field, value=value)


def load(path: str, shown: str, st: Mapping[str, Any]) -> BlkTrace:
    """Read the whole trace under the job's options (every record checked), before any
    target is known: what it holds, which devices, the depth fio would probe."""
    try:
        summary = _core.trace_scan(path, shown, _plan(st, (1 << 64) - 1, 1))
    except _core.TraceError as e:
        raise _error(e, shown) from None
    if not sum(summary["ios"]) and not summary["syncs"]:
        raise FioJobError("found no ios in blktrace data (fio: failed initializing iolog)", file=shown)
    return BlkTrace(path, shown, summary)


def target_name(trace: BlkTrace, st: Mapping[str, Any], where: Mapping[str, Any]) -> Optional[str]:
    """``replay_redirect``; None (the job's default target) for a trace of one device."""
    redirect: Optional[str] = st.get("replay_redirect")
    if redirect:
        return redirect
    devices = trace.summary["volumes"]
    if trace.summary["volumes_with_io"] > 1:
        shown = ", ".join(devices[:4]) + (", ..." if len(devices) > 4 else "")
        raise FioJobError(
            f"{trace.shown}: the trace addresses {len(devices)} devices ({shown}); a job replays onto one target: set replay_redirect=",
            **where,
        )
    return None


def pack(trace: BlkTrace, st: Mapping[str, Any], target_bytes: int, lba_bytes: int, max_ios: int) -> tuple[bytes, dict[str, Any]]:
    """The engine's replay records for the target (every I/O checked against it) and the
    trace's summary; errors name the trace's record."""
    try:
        records, summary = _core.trace_load(trace.path, trace.shown, _plan(st, target_bytes, lba_bytes), max_ios)
    except _core.TraceError as e:
        raise _error(e, trace.shown) from None
    return bytes(records), summary


def probed_depth(trace: BlkTrace) -> int:
    """The queue depth fio probes from the trace (blktrace.c: queue events since the last
    completion, capped at 1024), used when the job sets no ``iodepth``."""
    return int(trace.summary["depth"] or 1)


def merge(st: Mapping[str, Any], names: list[str], cwd: Optional[str], where: Mapping[str, Any]) -> str:
    """``merge_blktrace_file``: merge the ``read_iolog`` traces ``names`` into it (relative to
    ``cwd``, as fio's working directory) and return its path."""
    out = st["merge_blktrace_file"]
    out_path = out if os.path.isabs(out) or cwd is None else os.path.join(cwd, out)
    n = len(names)

    def per_trace(key: str, default: int) -> list[int]:
        # fio (blktrace.c init_merge_param_list): a list as long as read_iolog's, or none.
        vals = [int(v) for v in st.get(key) or []]
        if vals and len(vals) != n:
            raise FioJobError(f"{key}({len(vals)}) != nr_logs({n})", **where)
        return vals or [default] * n

    scalars, iters = per_trace("merge_blktrace_scalars", 100), per_trace("merge_blktrace_iters", 1)
    inputs = []
    for name in names:
        path = name if os.path.isabs(name) or cwd is None else os.path.join(cwd, name)
        if not is_blktrace(path):
            raise FioJobError(f"file is not a blktrace: {name}", **where)
        inputs.append((path, name))
    try:
        _core.blktrace_merge(inputs, scalars, iters, out_path)
    except _core.TraceError as e:
        raise FioJobError(f"merge_blktrace_file: {e}", **where) from None
    except OSError as e:
        raise FioJobError(f"merge_blktrace_file={out}: {e.strerror or e}", **where) from None
    return out_path
