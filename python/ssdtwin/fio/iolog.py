"""fio's I/O logs: ``write_iolog`` (the issued I/Os, replayable by real fio) and
``read_iolog`` (replay a trace instead of generating I/O), docs/fio.md §2.10.

Formats (fio 3.33 iolog.c, HOWTO "Trace file format"):

* version 2: ``fio version 2 iolog``, then ``FILE add|open|close`` and
  ``FILE read|write|trim|sync|datasync|wait OFFSET LENGTH``;
* version 3 (what fio 3.33 writes, the only one it writes): ``fio version 3 iolog``, then
  the same lines each led by a timestamp in **microseconds** since the thread started
  (``utime_since_now(&td->io_log_start_time)``; the HOWTO does not give the unit).

Replay timing (iolog.c ``delay_since_ttime``, ``iolog_delay``): a version 3 line waits
its timestamp minus the previous line's (scaled by 100/``replay_time_scale``, none when
the previous timestamp is 0 or larger) after the previous issue; a version 2 ``wait`` line
holds the next I/O until OFFSET **milliseconds** after the start (``mtime_since_genesis``).
The engine applies it (crates/ssdtwin-core/src/engine/iolog.rs).
"""

from __future__ import annotations

import array
import os
import stat
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional, Union

from . import blktrace as fio_blktrace
from . import limits as L
from .errors import FioJobError

__all__ = [
    "MAX_TRACE_BYTES",
    "MAX_TRACE_IOS",
    "MAX_LINE_CHARS",
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
DDIR_NAMES = ("read", "write", "trim")
FILE_ACTIONS = ("add", "open", "close")
IO_ACTIONS = ("read", "write", "trim", "sync", "datasync", "wait")

# Limits (docs/fio.md §2.9).
MAX_TRACE_BYTES = L.MAX_TRACE_BYTES
MAX_TRACE_IOS = L.MAX_TRACE_IOS
MAX_LINE_CHARS = L.MAX_TRACE_LINE_CHARS
MAX_FILENAME_CHARS = L.MAX_TRACE_NAME_CHARS
# fio scans LENGTH with %u (32 bits) and OFFSET, timestamps with %llu.
MAX_LENGTH = (1 << 32) - 1
MAX_U64 = (1 << 64) - 1

# Packed records the engine reads (engine/iolog.rs): kind, offset, len, delay_ns, extra_ns.
_REPLAY_ABSOLUTE = 1 << 8
_RECORD = struct.Struct("<4Q")  # the engine's write_iolog records: issue_ns, ddir, offset, len


ACTIONS = ("read", "write", "trim", "sync", "datasync", "wait", "add", "open", "close")
_CODE = {name: code for code, name in enumerate(ACTIONS)}
_FIRST_FILE_ACTION = _CODE["add"]


@dataclass
class Trace:
    """A parsed trace, one entry per action line in columns (~40 bytes a line)."""

    path: str  # as the job wrote it (for messages)
    version: int
    names: list[str] = field(default_factory=list)
    line: array.array = field(default_factory=lambda: array.array("Q"))  # type: ignore[type-arg]
    time_us: array.array = field(default_factory=lambda: array.array("Q"))  # type: ignore[type-arg]
    action: array.array = field(default_factory=lambda: array.array("B"))  # type: ignore[type-arg]
    file: array.array = field(default_factory=lambda: array.array("I"))  # type: ignore[type-arg]
    offset: array.array = field(default_factory=lambda: array.array("Q"))  # type: ignore[type-arg]
    length: array.array = field(default_factory=lambda: array.array("Q"))  # type: ignore[type-arg]
    ios: int = 0

    def __len__(self) -> int:
        return len(self.action)


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


def _number(path: str, line: int, name: str, text: str, hi: int) -> int:
    if not text.isdigit() or not text.isascii():
        raise _fail(path, line, "not a decimal number", name, text)
    value = int(text)
    if value > hi:
        raise _fail(path, line, f"out of range (0..{hi})", name, text)
    return value


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
    return info


def load_trace(path: str, shown: Optional[str] = None) -> Trace:
    """Parse a version 2 or 3 trace. Raises FioJobError naming the file, line and field
    (the file alone, without a line, when it cannot be read at all)."""
    shown = shown or path
    info = _check_file(path, shown)
    try:
        return _load_cached(path, shown, info.st_mtime_ns, info.st_size)
    except OSError as e:  # unreadable (permissions, I/O error)
        raise _fail(shown, None, e.strerror or str(e)) from None


@lru_cache(maxsize=4)
def _load_cached(path: str, shown: str, mtime_ns: int, size: int) -> Trace:
    del mtime_ns, size  # cache keys only: a changed file is read again
    with open(path, "rb") as f:
        first = f.readline(MAX_LINE_CHARS + 1).decode("utf-8", "replace")
        if first.startswith(HEADER_V3):
            version = 3
        elif first.startswith(HEADER_V2):
            version = 2
        else:
            raise _fail(shown, 1, f"not a fio iolog: the first line must be '{HEADER_V2}' or '{HEADER_V3}' (fio dropped version 1)")
        trace = Trace(shown, version)
        files: dict[str, int] = {}
        for number, raw in enumerate(f, start=2):
            _parse_line(trace, files, number, raw)
        trace.names = list(files)
    return trace


def _parse_line(trace: Trace, files: dict[str, int], number: int, raw: bytes) -> None:
    shown = trace.path
    if len(raw) > MAX_LINE_CHARS + 1:
        raise _fail(shown, number, f"line longer than {MAX_LINE_CHARS} characters (fio reads lines with fgets(4096))")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _fail(shown, number, "not UTF-8 text") from None
    words = text.split()
    if not words:
        return
    if text.startswith((HEADER_V2, HEADER_V3)):
        return  # fio appends to an iolog: a second run's header (fio skips it as a bad line)
    time_us = 0
    if trace.version == 3:
        time_us = _number(shown, number, "timestamp", words[0], MAX_U64)
        words = words[1:]
    if len(words) not in (2, 4):
        want = "TIMESTAMP FILE ACTION [OFFSET LENGTH]" if trace.version == 3 else "FILE ACTION [OFFSET LENGTH]"
        raise _fail(shown, number, f"expected '{want}', got {text.strip()[:80]!r}")
    filename, action = words[0], words[1]
    if len(filename) > MAX_FILENAME_CHARS:
        raise _fail(shown, number, f"file name longer than {MAX_FILENAME_CHARS} characters", "file", filename[:40] + "...")
    offset = length = 0
    if len(words) == 2:
        if action not in FILE_ACTIONS:
            raise _fail(shown, number, f"unknown file action (valid: {', '.join(FILE_ACTIONS)})", "action", action)
        if action == "add":
            files.setdefault(filename, len(files))
    else:
        if action not in IO_ACTIONS:
            raise _fail(shown, number, f"unknown I/O action (valid: {', '.join(IO_ACTIONS)})", "action", action)
        offset = _number(shown, number, "offset", words[2], MAX_U64)
        length = _number(shown, number, "length", words[3], MAX_LENGTH)
        if action in DDIR_NAMES:
            trace.ios += 1
            if trace.ios > MAX_TRACE_IOS:
                raise _fail(shown, number, f"more than {MAX_TRACE_IOS} I/O lines in one trace (the engine holds 40 bytes each)")
    if filename not in files:
        if action == "wait":
            files.setdefault(filename, len(files))  # fio never looks the file of a wait up
        else:
            raise _fail(shown, number, "file not added to the trace first (a 'FILE add' line)", "file", filename)
    trace.line.append(number)
    trace.time_us.append(time_us)
    trace.action.append(_CODE[action])
    trace.file.append(files[filename])
    trace.offset.append(offset)
    trace.length.append(length)


@dataclass
class Replay:
    """A trace resolved for one clone: the engine's packed records and what they hold."""

    records: bytes
    ios: int
    bytes_by_dir: list[int]

    @property
    def directions(self) -> list[str]:
        return [n for d, n in enumerate(DDIR_NAMES) if self.bytes_by_dir[d]]


def replay_target(
    st: Mapping[str, Any], subjob: int, cwd: Optional[str], where: Mapping[str, Any], namespace_of: Any
) -> tuple[Union[Trace, fio_blktrace.BlkTrace], Optional[str]]:
    """Load the clone's trace (``read_iolog`` list entry subjob % count, fio's
    get_name_by_idx, or the ``merge_blktrace_file`` of them all) and find its target:
    ``replay_redirect``, else the one file its I/O lines name (a blktrace's: None, the
    job's default target). Returns (trace, target name); the caller maps the name like
    ``filename=``."""
    names = split_names(st["read_iolog"])
    name = names[subjob % len(names)]
    if name == "-":
        raise FioJobError("reading a trace from stdin is not supported by ssdtwin; give a file", **where)
    if st.get("merge_blktrace_file"):
        name = _merged(st, names, cwd, where)
    path = name if os.path.isabs(name) or cwd is None else os.path.join(cwd, name)
    try:
        _check_file(path, name)
        if fio_blktrace.is_blktrace(path):
            blk = fio_blktrace.load(path, name, st)
            return blk, fio_blktrace.target_name(blk, st, where)
        trace = load_trace(path, name)
    except FioJobError as e:
        if e.line is None and e.file == name:  # the file itself: say which option named it
            what = e.reason if e.option is None else f"{e.option}={e.value}: {e.reason}"
            raise FioJobError(f"{name}: {what}", **where) from None
        raise
    redirect = st.get("replay_redirect")
    if redirect:
        return trace, redirect
    io_codes = {_CODE[a] for a in DDIR_NAMES}
    used = sorted({trace.names[f] for f, a in zip(trace.file, trace.action) if a in io_codes})
    if len(used) > 1:
        shown = ", ".join(used[:4]) + (", ..." if len(used) > 4 else "")
        raise FioJobError(
            f"{name}: the trace addresses {len(used)} files ({shown}); a job replays onto one target: set replay_redirect=", **where
        )
    target = used[0] if used else (trace.names[0] if trace.names else "")
    return trace, target


def _merged(st: Mapping[str, Any], names: list[str], cwd: Optional[str], where: Mapping[str, Any]) -> str:
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


def _ns(us: int) -> int:
    # A delay past 2^64 ns (584 years) ends the run at the engine's 200-day limit anyway.
    return min(us * 1000, MAX_U64)


def pack_replay(trace: Union[Trace, fio_blktrace.BlkTrace], st: Mapping[str, Any], target_bytes: int, lba_bytes: int) -> Replay:
    """The engine's records for ``trace`` under the job's replay options; every I/O line is
    checked against the target (errors name the trace's file, line and field)."""
    if isinstance(trace, fio_blktrace.BlkTrace):
        records, summary = fio_blktrace.pack(trace, st, target_bytes, lba_bytes, MAX_TRACE_IOS)
        return Replay(records, sum(summary["ios"]), list(summary["bytes"]))
    no_stall = bool(st.get("replay_no_stall"))
    time_scale = st.get("replay_time_scale") or 100
    scale = st.get("replay_scale", 1)
    align = st.get("replay_align") or 0
    skip = {_CODE[a] for a in st.get("replay_skip") or ()}
    if _CODE["sync"] in skip:
        skip.add(_CODE["datasync"])
    wait, n_dirs = _CODE["wait"], len(DDIR_NAMES)
    out = array.array("Q")
    last_ttime = 0
    specials: list[int] = []  # delays (us) of lines between two I/Os that issue nothing
    wait_ms: Optional[int] = None
    ios = 0
    bytes_by_dir = [0, 0, 0]
    errors: list[FioJobError] = []
    v3 = trace.version == 3
    for i, code in enumerate(trace.action):
        delay = 0
        if v3:
            # iolog.c delay_since_ttime: none after a 0 timestamp or when time runs back.
            t = trace.time_us[i]
            if last_ttime and not no_stall and t >= last_ttime:
                delay = t - last_ttime if time_scale == 100 else int(float(t - last_ttime) * (100.0 / time_scale))
            last_ttime = t
        if code == wait:
            if not v3 and not no_stall:  # fio ignores wait in version 3
                wait_ms = max(wait_ms or 0, trace.offset[i])
            continue
        if code in skip:
            continue  # fio >= 3.34 (ff6131af); its delay is not waited
        if code >= n_dirs:  # add/open/close, sync/datasync: timing only (the engine has no flush)
            specials.append(delay)
            continue
        length = trace.length[i]
        offset = trace.offset[i] // scale if scale else trace.offset[i]
        if align:
            offset &= ~(align - 1)
        line = trace.line[i]
        if length == 0:
            errors.append(_fail(trace.path, line, "zero-length I/O", "length", "0"))
        elif length % lba_bytes:
            errors.append(_fail(trace.path, line, f"not a multiple of the target's {lba_bytes}-byte LBA", "length", str(length)))
        if offset % lba_bytes:
            errors.append(_fail(trace.path, line, f"not a multiple of the target's {lba_bytes}-byte LBA", "offset", str(offset)))
        elif offset + length > target_bytes:
            errors.append(
                _fail(
                    trace.path,
                    line,
                    f"I/O ends at {offset + length}, past the end of the target ({target_bytes} bytes)",
                    "offset",
                    str(offset),
                )
            )
        if len(errors) >= 20:
            break
        if wait_ms is not None:
            out.extend((code | _REPLAY_ABSOLUTE, offset, length, _ns(wait_ms * 1000), 0))
        elif specials:
            out.extend((code, offset, length, _ns(specials[0]), _ns(sum(specials[1:]) + delay)))
        else:
            out.extend((code, offset, length, _ns(delay), 0))
        specials = []
        wait_ms = None
        ios += 1
        bytes_by_dir[code] += length
    if errors:
        raise FioJobError.collect(errors)
    return Replay(out.tobytes(), ios, bytes_by_dir)


# --- write_iolog --------------------------------------------------------------------------


def iolog_name(clone: Any) -> str:
    """The file name fio writes in the iolog lines: the job's filename, or fio's default
    ``jobname.subjob.0`` (filesetup.c, one file per job)."""
    st = clone.job.state
    return st["filename"] if st.get("filename") else f"{clone.job.name}.{clone.subjob}.0"


def _records(blob: Any) -> Any:
    data = bytes(blob) if not isinstance(blob, (bytes, bytearray)) else blob
    return _RECORD.iter_unpack(data)


def render_iolog(clone: Any, result: Mapping[str, Any]) -> str:
    """One clone's iolog as fio 3.33 writes it (iolog.c init_iolog_write, log_io_u,
    log_file): header, add and open at the start, one line per issued I/O with its issue
    time in microseconds since the clone started, close at its end."""
    name = iolog_name(clone)
    start = int(result.get("start_ns", 0))
    end_us = int(result.get("elapsed_ns", 0)) // 1000
    out = [HEADER_V3, f"0 {name} add", f"0 {name} open"]
    for issue_ns, ddir, offset, length in _records(result.get("iolog") or b""):
        out.append(f"{(issue_ns - start) // 1000} {name} {DDIR_NAMES[ddir]} {offset} {length}")
    out.append(f"{end_us} {name} close")
    return "\n".join(out) + "\n"


def render_iologs(run: Any, results: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """write_iolog file → text, the clones sharing a file in thread order (fio appends)."""
    by_thread = {r.get("thread_number"): r for r in results}
    files: dict[str, list[str]] = {}
    for clone in run.clones:
        target = clone.job.state.get("write_iolog")
        if not target:
            continue
        files.setdefault(target, []).append(render_iolog(clone, by_thread[clone.thread_number]))
    return {name: "".join(parts) for name, parts in files.items()}


def write_iologs(run: Any, results: Sequence[Mapping[str, Any]], directory: Union[str, Path]) -> list[Path]:
    """Append each write_iolog file (relative names under ``directory``), as fio does."""
    written = []
    for name, text in render_iologs(run, results).items():
        path = Path(directory) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write(text)
        written.append(path)
    return written
