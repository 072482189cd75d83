"""fio's per-job log files (write_bw_log, write_iops_log, write_lat_log, write_hist_log).

Names follow init.c ``gen_log_name``: ``PREFIX_TYPE.N.log`` with N the thread number,
or ``PREFIX_TYPE.log`` with ``per_job_logs=0`` (all clones then share one file; fio
appends each thread's rows, we write them in thread order). PREFIX is the option's
value, or the job name when the option has none. ``write_lat_log`` makes three files:
``lat``, ``slat`` and ``clat``; ``write_hist_log`` makes ``clat_hist``.

Rows follow iolog.c ``flush_samples``: ``time_ms, value, ddir, bs, prio`` and, with
``log_offset=1``, ``time_ms, value, ddir, bs, offset, prio`` (prio is 0 here). Histogram
rows are ``time_ms, ddir, bs, bin0, ..., binK`` with 1856 >> coarseness bins, each the
sum of ``2**coarseness`` adjacent fio buckets over the window (``hist_sum``).

The engine sends the rows ready to print (windowed when log_avg_msec > 0) so that Python
never walks individual I/Os of a long run; :func:`window_rows` is the reference of fio's
windowing rule, used by the tests and documented for the engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

from .contract import CloneOut
from .errors import EngineResultError
from .hist import PLAT_NR, dense
from .parser import Clone, Run

__all__ = ["log_names", "render_logs", "write_logs", "format_rows", "format_hist_rows", "window_rows", "LOG_KINDS"]

# Engine "logs" key -> (job option that asks for it, file type in the name)
LOG_KINDS = {
    "bw": ("bw", "bw"),
    "iops": ("iops", "iops"),
    "lat": ("lat", "lat"),
    "slat": ("lat", "slat"),
    "clat": ("lat", "clat"),
    "clat_hist": ("hist", "clat_hist"),
}


def log_names(clone: Clone) -> dict[str, str]:
    """File name of every log this clone writes, by engine log key."""
    st = clone.job.state
    out = {}
    for key, (option, kind) in LOG_KINDS.items():
        prefix = st["logs"][option]
        if prefix is None:
            continue
        # init.c make_log_name: an empty value means the job name.
        prefix = prefix or clone.job.name
        if st["per_job_logs"]:
            out[key] = f"{prefix}_{kind}.{clone.thread_number}.log"
        else:
            out[key] = f"{prefix}_{kind}.log"
    return out


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise EngineResultError(f"{where}: expected an integer >= 0")
    return value


def format_rows(rows: Iterable[Sequence[Any]], log_offset: bool) -> str:
    """Rows ``[time_ms, value, ddir, bs, offset]`` in fio's text (iolog.c flush_samples)."""
    out = []
    for row in rows:
        if len(row) not in (4, 5):
            raise EngineResultError(f"log row {list(row)!r}: expected [time_ms, value, ddir, bs, offset]")
        t, value, ddir, bs = (_int(v, "log row") for v in row[:4])
        if isinstance(row[1], bool) or not isinstance(row[1], int):
            raise EngineResultError(f"log row {list(row)!r}: value must be an integer")
        if ddir > 2:
            raise EngineResultError(f"log row {list(row)!r}: ddir must be 0, 1 or 2")
        if log_offset:
            offset = _int(row[4] if len(row) == 5 else 0, "log row offset")
            out.append(f"{t}, {value}, {ddir}, {bs}, {offset}, 0\n")
        else:
            out.append(f"{t}, {value}, {ddir}, {bs}, 0\n")
    return "".join(out)


def format_hist_rows(rows: Iterable[Sequence[Any]], coarseness: int) -> str:
    """Rows ``[time_ms, ddir, bs, hist]`` (hist as [index, count] pairs or dense counts)."""
    if not 0 <= coarseness <= 6:
        raise ValueError("log_hist_coarseness must be 0..6")
    stride = 1 << coarseness
    out = []
    for row in rows:
        if len(row) != 4:
            raise EngineResultError(f"histogram log row: expected [time_ms, ddir, bs, hist], got {len(row)} fields")
        t, ddir, bs = (_int(v, "histogram log row") for v in row[:3])
        counts = dense(row[3])
        bins = [sum(counts[j : j + stride]) for j in range(0, PLAT_NR, stride)]
        out.append(f"{t}, {ddir}, {bs}, " + ", ".join(str(b) for b in bins) + "\n")
    return "".join(out)


def render_logs(run: Run, results: Sequence[CloneOut]) -> dict[str, str]:
    """Every log file of the run: name → content, in thread order."""
    by_thread = {r["thread_number"]: r for r in results}
    files: dict[str, list[str]] = {}
    for clone in run.clones:
        names = log_names(clone)
        if not names:
            continue
        result = by_thread.get(clone.thread_number)
        if result is None:
            raise EngineResultError(f"no engine result for thread {clone.thread_number}")
        logs: Mapping[str, Any] = result["logs"]  # by LOG_KINDS key
        st = clone.job.state
        for key, name in names.items():
            rows = logs.get(key, [])
            text = format_hist_rows(rows, st["log_hist_coarseness"]) if key == "clat_hist" else format_rows(rows, st["log_offset"])
            files.setdefault(name, []).append(text)
    return {name: "".join(parts) for name, parts in files.items()}


def write_logs(run: Run, results: Sequence[CloneOut], directory: Union[str, Path]) -> list[Path]:
    """Write the log files into ``directory``; return their paths."""
    directory = Path(directory)
    logs = render_logs(run, results)
    if logs:  # a run without logs leaves --log-dir alone (it made the folder, or failed after the run)
        directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in logs.items():
        path = directory / name
        path.write_text(text)
        written.append(path)
    return written


def window_rows(
    samples: Iterable[tuple[int, int, int]],
    avg_msec: int,
    *,
    max_value: bool = False,
    end_ms: Optional[int] = None,
) -> list[list[int]]:
    """fio's averaging of a latency log (stat.c add_log_sample, finalize_logs).

    ``samples`` are ``(time_ms, value, ddir)`` per I/O in time order. Each direction
    keeps a window that starts at ``avg_last`` (0 at the start). A sample at ``t`` joins
    the window; when ``t - avg_last >= avg_msec`` the window is written as one row at
    time ``t`` with the mean rounded half up (or the maximum with log_max_value), bs and
    offset 0, and ``avg_last`` becomes ``t`` rounded down to a multiple of avg_msec. At
    ``end_ms`` every open window is written. With ``avg_msec == 0`` each sample is a row.
    """
    if avg_msec <= 0:
        return [[t, v, d, 0, 0] for t, v, d in samples]
    rows: list[list[int]] = []
    last = [0, 0, 0]
    windows: list[list[int]] = [[], [], []]

    def flush(ddir: int, t: int) -> None:
        values = windows[ddir]
        if values:
            value = max(values) if max_value else int(_fio_mean(values) + 0.5)
            rows.append([t, value, ddir, 0, 0])
        windows[ddir] = []

    for t, v, d in samples:
        windows[d].append(v)
        if t < last[d] or t - last[d] < avg_msec:
            continue
        flush(d, t)
        last[d] = t - (t % avg_msec)
    if end_ms is not None:
        for d in range(3):
            flush(d, end_ms)
    return rows


def _fio_mean(values: Sequence[int]) -> float:
    # The window's mean is kept with the same running update as add_stat_sample.
    mean = 0.0
    for n, v in enumerate(values):
        delta = float(v) - mean
        if delta:
            mean += delta / (n + 1.0)
    return mean
