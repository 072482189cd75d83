"""Run fio job files against a drive image in simulated time.

The job files are parsed with fio's semantics (``ssdtwin.fio``), resolved against the
target namespace, simulated by the Rust engine in virtual time, and reported in fio's own
formats (normal text, JSON, json+, log files).
"""

from __future__ import annotations

import errno
import numbers
import os
import stat
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Optional, Union

from .. import waf as wafm
from ..core_types import VendorLog
from ..drive import Drive
from . import iolog as fio_iolog
from . import logs as fio_logs
from . import output as fio_output
from .contract import CloneOut, ConvergeOut, ConvergeRule, JobSpec
from .errors import FioJobError, where
from .parser import PathLike, Run, file_kind, parse

# A job file, or several, as `parse` takes them (a str given for a list ran each of its
# characters as a job file).
JobFiles = Union[PathLike, Sequence[PathLike]]


def run_jobs(
    drive: Drive,
    files: JobFiles,
    *,
    namespace: int = 1,
    run_seed: int = 0,
    idle_gc: bool = True,
    progress: Optional[Any] = None,
    cmdline: Sequence[str] = (),
    notes: Optional[Callable[[str], None]] = None,
    log_dir: Optional[Path] = None,
) -> tuple[Run, list[CloneOut]]:
    """Parse ``files`` and simulate them on ``drive``; returns (parsed run, engine results).
    ``notes`` gets each line of ``fio_notes`` once the jobs are resolved, before the run;
    with ``log_dir``, the run's log files are checked to be writable there first."""
    run, specs = _prepare(drive, files, namespace, run_seed, cmdline, notes, log_dir)
    before = drive.vendor_log()
    results = drive.run_fio(specs, namespace, idle_gc, progress)
    _measure_waf(drive, run, before)
    return run, results


def run_jobs_converging(
    drive: Drive,
    files: JobFiles,
    *,
    rule: Optional[ConvergeRule] = None,
    namespace: int = 1,
    run_seed: int = 0,
    idle_gc: bool = True,
    progress: Optional[Any] = None,
    cmdline: Sequence[str] = (),
    notes: Optional[Callable[[str], None]] = None,
    log_dir: Optional[Path] = None,
) -> tuple[Run, list[CloneOut], ConvergeOut]:
    """``run_jobs``, timing each round until its figures converge under ``rule`` and the rest
    of it in fast-forward (docs/fio.md, "Converging rounds"); also returns how that went."""
    run, specs = _prepare(drive, files, namespace, run_seed, cmdline, notes, log_dir)
    before = drive.vendor_log()
    results, timing = drive.run_fio_converging(specs, rule, namespace, idle_gc, progress)
    _measure_waf(drive, run, before)  # the fast-forwarded I/Os went through the FTL too
    return run, results, timing


def _measure_waf(drive: Drive, run: Run, before: VendorLog) -> None:
    """The drive's WAF over the run (waf.py), kept on the run for fio's ``ssdtwin`` block."""
    ns_bytes = sum(n.bytes for n in drive.namespaces() if n.attached)
    run.waf = wafm.measure(before, drive.vendor_log(), "timed", ns_bytes)


def _prepare(
    drive: Drive,
    files: JobFiles,
    namespace: int,
    run_seed: int,
    cmdline: Sequence[str],
    notes: Optional[Callable[[str], None]],
    log_dir: Optional[Path] = None,
) -> tuple[Run, list[JobSpec]]:
    run = parse(files, run_seed=run_seed, cmdline=tuple(cmdline))
    specs = engine_specs(drive, run, namespace)
    if log_dir is not None:
        log_file_problems(run, log_dir)
    if notes is not None:
        for note in fio_notes(run):
            notes(note)
    return run, specs


def engine_specs(drive: Drive, run: Run, namespace: int = 1) -> list[JobSpec]:
    """The engine input of a parsed run on ``drive``: jobs that name no namespace go to
    ``namespace``; every attached namespace's size and LBA size, and the host link's rate."""
    if isinstance(namespace, bool) or not isinstance(namespace, numbers.Integral):  # "1" read as a missing namespace
        raise TypeError(f"namespace {namespace!r}: must be an int, not {type(namespace).__name__}")
    nss = {n.nsid: n for n in drive.namespaces() if n.attached}
    if namespace not in nss:
        raise ValueError(f"--namespace {namespace}: not an attached namespace (attached: {', '.join(map(str, nss)) or 'none'})")
    target = nss[namespace]
    sizes = {nsid: ns.bytes for nsid, ns in nss.items()}
    lbas = {nsid: ns.lba_bytes for nsid, ns in nss.items()}
    link = int(drive.spec()["timing"]["host_link_bytes_per_s"]["value"])
    specs = run.to_engine(target.bytes, target.lba_bytes, namespace_sizes=sizes, namespace_lba_bytes=lbas, link_bytes_per_s=link)
    return specs


def job_file_problem(path: Path) -> Optional[str]:
    """Why ``path`` cannot be a job file (missing, not a regular file, a name the OS
    refuses), as a one-line message; None when it can be read. The parser reads it under
    its own limits (docs/fio.md §2.9)."""
    try:
        info = os.stat(path)
    except OSError as e:
        return f"{path}: no such job file" if e.errno == errno.ENOENT else f"{path}: {e.strerror}"
    if not stat.S_ISREG(info.st_mode):
        return f"{path}: not a regular file ({file_kind(info.st_mode)})"
    return None


def render(
    run: Run, results: list[CloneOut], fmt: str, timestamp_ms: Optional[int] = None, ssdtwin_extra: Optional[dict[str, Any]] = None
) -> str:
    """The report in fio's ``fmt``; ``ssdtwin_extra`` adds keys to the JSON's ``ssdtwin``
    object (docs/fio.md §6.1)."""
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    if fmt == "json":
        return fio_output.json_text(run, results, timestamp_ms=ts, ssdtwin_extra=ssdtwin_extra)
    if fmt == "json+":
        return fio_output.json_text(run, results, plus=True, timestamp_ms=ts, ssdtwin_extra=ssdtwin_extra)
    return fio_output.normal_text(run, results, timestamp_ms=ts)


def write_logs(run: Run, results: list[CloneOut], directory: Path) -> list[Path]:
    """The write_*_log files, then the write_iolog files (appended, as fio does)."""
    return list(fio_logs.write_logs(run, results, directory)) + fio_iolog.write_iologs(run, results, directory)


def log_file_problems(run: Run, directory: Path) -> None:
    """Raise FioJobError (every problem, located at its option) when a write_*_log or
    write_iolog file of ``run`` could not be written under ``directory`` (the --log-dir):
    checked before the run, so that a log that cannot be written never follows a run
    committed to the image. ``write_logs`` makes ``directory``, and each write_iolog
    file's folder."""
    errors: list[FioJobError] = []
    seen: set[tuple[str, Path]] = set()
    for clone in run.clones:
        st = clone.job.state
        targets = [(f"write_{fio_logs.LOG_KINDS[key][0]}_log", name, directory) for key, name in fio_logs.log_names(clone).items()]
        if st.get("write_iolog"):
            targets.append(("write_iolog", st["write_iolog"], (directory / st["write_iolog"]).parent))
        for option, name, made in targets:
            path = directory / name
            if (option, path) in seen:
                continue
            seen.add((option, path))
            problem = _write_problem(path, made)
            if problem:
                errors.append(FioJobError(f"cannot write the log file {path}: {problem}", **where(st, option, clone.job)))
    if errors:
        raise FioJobError.collect(errors)


def _write_problem(path: Path, made: Path) -> Optional[str]:
    """Why ``path`` could not be written once the folder ``made`` and its parents exist."""
    if path.is_dir():
        return "it is a directory"
    parent = path.parent
    if not parent.is_dir() and parent != made and parent not in made.parents:
        return f"no such directory {parent}"
    existing = parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a directory"
    if not os.access(existing, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return "no permission to write it"
    # os.access answers for the permission bits only: as root it says yes to a read-only file
    # system or to /proc, where the write itself then fails after the run. So try it: open an
    # existing log for appending (nothing written), or create and remove a scratch entry
    # where the log or its folder would go.
    if path.exists():
        try:
            with open(path, "ab"):
                pass
        except OSError as e:
            return e.strerror or str(e)
        return None
    probe = existing / f".ssdtwin-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as e:
        return f"cannot create a file in {existing} ({e.strerror or e})"
    return None


def fio_notes(run: Any) -> list[str]:
    """What the CLI tells the user on stderr about a run, one line each: fio's warnings
    (docs/fio.md §2.8), then every option written that has no effect on a simulated drive
    (§2.6), once per place it was written (a [global] line is not repeated per job)."""
    notes = [f"warning: {w}" for w in run.warnings]
    seen = set()
    for e in run.ignored:
        key = (e["file"], e["line"], e["option"])
        if key in seen:
            continue
        seen.add(key)
        written = e["option"] if e["value"] is None else f"{e['option']}={e['value']}"
        notes.append(f"note: {e['file']}:{e['line']}: {written}: ignored: {e['reason']}")
    return notes
