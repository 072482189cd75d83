"""blktrace binary traces in ``read_iolog=`` (docs/fio.md §2.10), replayed as fio 3.33
replays them: the core reads the file (crates/ssdtwin-core/src/workload/trace/blktrace.rs:
which events become I/Os, their delays, the probed queue depth); fio/iolog.py loads it
like an iolog; this module tells a blktrace, its depth and ``merge_blktrace_file``.

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
from typing import Any, Optional

from .. import _core
from .errors import FioJobError, Where

__all__ = ["is_blktrace", "probed_depth", "merge"]

# blktrace_api.h: BLK_IO_TRACE_MAGIC in the top 24 bits of a record's first word; a record
# is 48 bytes, and fio wants a whole one before it calls a file a blktrace.
_MAGIC = 0x65617400
_RECORD_BYTES = 48


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


def probed_depth(summary: Mapping[str, Any]) -> int:
    """The queue depth fio probes from a trace's summary (blktrace.c: queue events since
    the last completion, capped at 1024), used when the job sets no ``iodepth``."""
    return int(summary["depth"] or 1)


def merge(st: Mapping[str, Any], names: list[str], cwd: Optional[str], where: Where) -> str:
    """``merge_blktrace_file``: merge the ``read_iolog`` traces ``names`` into it (relative to
    ``cwd``, as fio's working directory) and return its path."""
    out = st["merge_blktrace_file"]
    out_path = out if os.path.isabs(out) or cwd is None else os.path.join(cwd, out)
    n = len(names)

    def per_trace(key: str, default: int) -> list[int]:
        # fio (blktrace.c init_merge_param_list): a list as long as read_iolog's, or none;
        # a 0 ends the list.
        vals = []
        for v in st.get(key) or []:
            if v == 0:
                break
            vals.append(int(v))
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
