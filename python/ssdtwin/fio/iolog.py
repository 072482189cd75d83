"""fio's I/O logs: ``write_iolog`` (the issued I/Os, replayable by real fio) and
``read_iolog`` (replay a trace instead of generating I/O), docs/fio.md §2.10.

Formats (fio 3.33 iolog.c and blktrace.c, HOWTO "Trace file format"):

* version 2: ``fio version 2 iolog``, then ``FILE add|open|close`` and
  ``FILE read|write|trim|sync|datasync|wait OFFSET LENGTH``;
* version 3 (what fio 3.33 writes, the only one it writes): ``fio version 3 iolog``, then
  the same lines each led by a timestamp in **microseconds** since the thread started
  (``utime_since_now(&td->io_log_start_time)``; the HOWTO does not give the unit);
* blktrace binaries (fio/blktrace.py).

The core reads the traces (crates/ssdtwin-core/src/workload/trace/: iolog.rs,
blktrace.rs), checks every line against the target and packs the engine's records; the
engine paces them as fio does (engine/iolog.rs): a version 3 line waits its timestamp
minus the previous line's (scaled by 100/``replay_time_scale``, none when the previous
timestamp is 0 or larger) after the previous issue; a version 2 ``wait`` line holds the
next I/O until OFFSET **milliseconds** after the start (``mtime_since_genesis``). This
module resolves the job's options, the trace's target and the files.
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from .. import _core
from . import blktrace as fio_blktrace
from . import limits as L
from .contract import CloneOut, Ddir, TraceFioReplay, TracePlan, TraceSummary
from .errors import FioJobError, Where
from .facts import DDIR_NAMES, FACTS

__all__ = [
    "MAX_TRACE_BYTES",
    "MAX_TRACE_IOS",
    "Trace",
    "Replay",
    "load_trace",
    "replay_target",
    "pack_replay",
    "render_iologs",
    "write_iologs",
    "iolog_name",
]

HEADER_V2 = "fio version 2 iolog"
HEADER_V3 = "fio version 3 iolog"

# Limits (docs/fio.md §2.9).
MAX_TRACE_BYTES = L.MAX_TRACE_BYTES
MAX_TRACE_IOS = L.MAX_TRACE_IOS

# The engine's write_iolog records (engine/iolog.rs): little-endian u64 fields in the order
# the core names them; a field the core adds or drops fails here.
_LOG_FIELDS = FACTS["iolog_record"]
_LOG_RECORD = struct.Struct(f"<{len(_LOG_FIELDS)}Q")
_LOG_ISSUE, _LOG_DDIR, _LOG_OFFSET, _LOG_LEN = (_LOG_FIELDS.index(f) for f in ("issue_ns", "ddir", "offset_bytes", "len_bytes"))
_SKIP = ("read", "write", "trim", "sync")


@dataclass
class Trace:
    """A trace checked under the job's replay options: a fio iolog (``fio-iolog``) or a
    blktrace binary, and the core's summary of it (I/Os, files or devices, notes)."""

    path: str  # to open
    shown: str  # as the job wrote it (for messages)
    format: str
    summary: TraceSummary

    @property
    def ios(self) -> int:
        return sum(self.summary["ios"])


def split_names(value: str) -> list[str]:
    """``read_iolog=a:b``: one trace per clone, by subjob modulo their count; ``\\:`` escapes."""
    names, cur, i = [], "", 0
    while i < len(value):
        if value[i] == "\\" and i + 1 < len(value) and value[i + 1] == ":":
            cur += ":"
            i += 2
            continue
        if value[i] == ":":
            names.append(cur)
            cur = ""
        else:
            cur += value[i]
        i += 1
    names.append(cur)
    return [n for n in names if n] or [value]


def _fail(path: str, line: Optional[int], reason: str, option: Optional[str] = None, value: Optional[str] = None) -> FioJobError:
    return FioJobError(reason, file=path, line=line, option=option, value=value)


def _check_file(path: str, shown: str) -> os.stat_result:
    """A trace is a regular file within the size limit (docs/fio.md §2.9)."""
    try:
        info = os.stat(path)
    except OSError as e:
        raise _fail(shown, None, "no such trace file" if not os.path.lexists(path) else (e.strerror or str(e))) from None
    if not stat.S_ISREG(info.st_mode):
        raise _fail(shown, None, "not a regular file (a trace is read whole before the run)")
    if info.st_size > MAX_TRACE_BYTES:
        raise _fail(shown, None, f"trace of {info.st_size} bytes; at most {MAX_TRACE_BYTES} ({MAX_TRACE_BYTES >> 20} MiB) are read")
    try:
        with open(path, "rb"):
            pass
    except OSError as e:  # unreadable (permissions, I/O error)
        raise _fail(shown, None, e.strerror or str(e)) from None
    return info


def fio_options(st: Mapping[str, Any]) -> TraceFioReplay:
    """The core's FioReplay of the job's replay options (docs/fio.md §2.10)."""
    skip = set(st.get("replay_skip") or ())
    return {
        "replay_scale": int(st.get("replay_scale") or 0),
        "replay_align": int(st.get("replay_align") or 0),
        "time_scale": 100.0 / int(st.get("replay_time_scale") or 100),
        "no_stall": bool(st.get("replay_no_stall")),
        # replay_skip=sync drops datasync lines too (ff6131af).
        "skip": (_SKIP[0] in skip, _SKIP[1] in skip, _SKIP[2] in skip, _SKIP[3] in skip),
    }


def _plan(fmt: str, st: Mapping[str, Any], target_bytes: int, lba_bytes: int, max_ios: Optional[int] = None) -> TracePlan:
    plan: TracePlan = {
        "format": fmt,
        "fio": fio_options(st),
        "target": {"bytes": target_bytes, "lba": lba_bytes, "beyond": "refuse", "widen": False},
    }
    return plan


def _trace_error(e: Exception, shown: str) -> FioJobError:
    """The core's TraceError as a job-file error: the trace, its line (or record), the field."""
    place = getattr(e, "place", "")
    reason = getattr(e, "reason", str(e))
    line = getattr(e, "line", None)
    return _fail(shown, line, f"{place}: {reason}" if place else reason, getattr(e, "field", None), getattr(e, "value", None))


def load_trace(path: str, shown: Optional[str] = None, st: Optional[Mapping[str, Any]] = None) -> Trace:
    """Read a version 2 or 3 iolog or a blktrace (every line checked) under the job's
    replay options ``st``, before any target is known. Raises FioJobError naming the file,
    line and field (the file alone, without a line, when it cannot be read at all)."""
    shown = shown or path
    st = st or {}
    _check_file(path, shown)
    fmt = "blktrace" if fio_blktrace.is_blktrace(path) else "fio-iolog"
    try:
        summary = _core.trace_scan(path, shown, _plan(fmt, st, (1 << 64) - 1, 1))
    except _core.TraceError as e:
        raise _trace_error(e, shown) from None
    if fmt == "blktrace" and not sum(summary["ios"]) and not summary["syncs"]:
        raise _fail(shown, None, "found no ios in blktrace data (fio: failed initializing iolog)")
    return Trace(path, shown, fmt, summary)


@dataclass
class Replay:
    """A trace resolved for one clone: the engine's packed records and what they hold."""

    records: bytes
    ios: int
    bytes_by_dir: list[int]
    # Version 2 `wait` lines kept: fio replays a trace of waits and no I/O (it waits).
    waits: int = 0

    @property
    def directions(self) -> list[Ddir]:
        return [n for d, n in enumerate(DDIR_NAMES) if self.bytes_by_dir[d]]


def replay_target(st: Mapping[str, Any], subjob: int, cwd: Optional[str], where: Where, namespace_of: Any) -> tuple[Trace, Optional[str]]:
    """Load the clone's trace (``read_iolog`` list entry subjob % count, fio's
    get_name_by_idx, or the ``merge_blktrace_file`` of them all) and find its target:
    ``replay_redirect``, else the one file its I/O lines name (a blktrace's device: None,
    the job's default target). Returns (trace, target name); the caller maps the name like
    ``filename=``."""
    names = split_names(st["read_iolog"])
    name = names[subjob % len(names)]
    if name == "-":
        raise FioJobError("reading a trace from stdin is not supported by ssdtwin; give a file", **where)
    if st.get("merge_blktrace_file"):
        name = _merged(st, names, cwd, where)
    path = name if os.path.isabs(name) or cwd is None else os.path.join(cwd, name)
    try:
        trace = load_trace(path, name, st)
    except FioJobError as e:
        if e.line is None and e.file == name:  # the file itself: say which option named it
            what = e.reason if e.option is None else f"{e.option}={e.value}: {e.reason}"
            raise FioJobError(f"{name}: {what}", **where) from None
        raise
    redirect: Optional[str] = st.get("replay_redirect")
    if redirect:
        return trace, redirect
    used: list[str] = trace.summary["volumes_with_io"]
    what = "devices" if trace.format == "blktrace" else "files"
    if len(used) > 1:
        shown = ", ".join(used[:4]) + (", ..." if len(used) > 4 else "")
        raise FioJobError(
            f"{name}: the trace addresses {len(used)} {what} ({shown}); a job replays onto one target: set replay_redirect=", **where
        )
    if trace.format == "blktrace":
        return trace, None  # fio looks the device up by major:minor; the twin's default target
    names_added: list[str] = trace.summary["volumes"]
    return trace, used[0] if used else (names_added[0] if names_added else "")


def _merged(st: Mapping[str, Any], names: list[str], cwd: Optional[str], where: Where) -> str:
    """The ``merge_blktrace_file`` every clone of the job replays, merged once per run of
    unchanged inputs (fio merges once per job, before its clones exist)."""
    key = (
        tuple(names),
        cwd,
        st["merge_blktrace_file"],
        tuple(st.get("merge_blktrace_scalars") or ()),
        tuple(st.get("merge_blktrace_iters") or ()),
        tuple(_mtime(n if os.path.isabs(n) or cwd is None else os.path.join(cwd, n)) for n in names),
    )
    if key not in _MERGED:
        _MERGED[key] = fio_blktrace.merge(st, names, cwd, where)
    merged: str = st["merge_blktrace_file"]
    return merged


_MERGED: dict[tuple[Any, ...], str] = {}


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def pack_replay(trace: Trace, st: Mapping[str, Any], target_bytes: int, lba_bytes: int) -> Replay:
    """The engine's records for ``trace`` under the job's replay options; every I/O is
    checked against the target (errors name the trace's file, line and field)."""
    try:
        records, summary = _core.trace_load(trace.path, trace.shown, _plan(trace.format, st, target_bytes, lba_bytes), MAX_TRACE_IOS)
    except _core.TraceError as e:
        raise _trace_error(e, trace.shown) from None
    return Replay(bytes(records), sum(summary["ios"]), list(summary["bytes"]), summary["waits"])


# --- write_iolog --------------------------------------------------------------------------


def iolog_name(clone: Any) -> str:
    """The file name fio writes in the iolog lines: the job's filename, or fio's default
    ``jobname.subjob.0`` (filesetup.c, one file per job)."""
    st = clone.job.state
    return st["filename"] if st.get("filename") else f"{clone.job.name}.{clone.subjob}.0"


def render_iolog(clone: Any, result: CloneOut) -> str:
    """One clone's iolog as fio 3.33 writes it (iolog.c init_iolog_write, log_io_u,
    log_file): header, add and open at the start, one line per issued I/O with its issue
    time in microseconds since the clone started, close at its end."""
    name = iolog_name(clone)
    start = result["start_ns"]
    end_us = result["elapsed_ns"] // 1000
    out = [HEADER_V3, f"0 {name} add", f"0 {name} open"]
    for r in _LOG_RECORD.iter_unpack(result.get("iolog", b"")):
        out.append(f"{(r[_LOG_ISSUE] - start) // 1000} {name} {DDIR_NAMES[r[_LOG_DDIR]]} {r[_LOG_OFFSET]} {r[_LOG_LEN]}")
    out.append(f"{end_us} {name} close")
    return "\n".join(out) + "\n"


def render_iologs(run: Any, results: Sequence[CloneOut]) -> dict[str, str]:
    """write_iolog file → text, the clones sharing a file in thread order (fio appends)."""
    by_thread = {r["thread_number"]: r for r in results}
    files: dict[str, list[str]] = {}
    for clone in run.clones:
        target = clone.job.state.get("write_iolog")
        if not target:
            continue
        files.setdefault(target, []).append(render_iolog(clone, by_thread[clone.thread_number]))
    return {name: "".join(parts) for name, parts in files.items()}


def write_iologs(run: Any, results: Sequence[CloneOut], directory: Union[str, Path]) -> list[Path]:
    """Append each write_iolog file (relative names under ``directory``), as fio does."""
    written = []
    for name, text in render_iologs(run, results).items():
        path = Path(directory) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write(text)
        written.append(path)
    return written
