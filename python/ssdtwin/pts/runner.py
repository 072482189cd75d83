"""Running SNIA PTS (docs/pts.md): ``run(target, tests=[...], report=...)``.

``run`` checks the settings and the report folder, opens the target, runs the tests one
after the other (suite.py) or at once on copies of a twin (parallel.py), renders the
report and returns the folder's results as pandas frames (folder.py). The folder (format
"ssdtwin-pts" version 1: pts.json, and per test jobs/, fio/, rounds.csv, steady.json,
table.csv, hist-*.csv, result.json) is rewritten after every round, so a run stopped by
Ctrl-C (or a crash) keeps every round done so far.

Where the rest lives: settings.py (what shapes a run), flows.py (each test's flow),
testrun.py (one test: element runs, rounds to steady state), measurements.py (fio's json+
to a row), tables.py (table.csv and the histograms), records.py (the records written, typed),
progress.py (the display's events).
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional, Union

from . import tests as T
from .folder import COLUMNS, PtsResult, load, prepare_folder, read_manifest, render_report
from .parallel import run_parallel
from .progress import Events
from .settings import Settings
from .suite import Runner
from .target import PtsError, PtsTarget

__all__ = ["run", "open_target", "render_report", "Settings", "Events", "PtsResult", "load", "read_manifest", "COLUMNS"]


def _check_exists(spec: str) -> None:
    """Refuse a target that names no drive image, file or device: a directory without an
    image in it, or nothing at its path that is not an NBD URI (a typo of an image's name)."""
    from .twin import is_image, split_spec

    path, _ = split_spec(spec)
    if path.is_dir() and not is_image(path):
        raise PtsError(f"{spec}: a directory that is not a drive image (no ssdtwin.toml; create one with `ssdtwin create`)")
    if "://" not in spec and not spec.startswith("/dev/") and not path.exists():
        raise PtsError(f"{spec}: no such drive image directory, block device, file or nbd:// URI")


def open_target(
    spec: str, *, namespace: Optional[int] = None, purge: str = "auto", allow_destroy: bool = False, seed: int = 0, converge: bool = True
) -> PtsTarget:
    """A target from what the user typed: a drive image directory (``./cm6``, ``./cm6:ns2``)
    is a twin; an NBD URI, a block device or a regular file is a real target run by fio."""
    from .twin import TwinTarget, split_spec

    _check_exists(spec)
    path, _ = split_spec(spec)
    if path.is_dir():
        return TwinTarget(spec, namespace=namespace, seed=seed, purge=purge, converge=converge)
    try:
        realfio = _optional("realfio")
    except ImportError:
        raise PtsError(f"{spec}: real targets (NBD, block devices, files) need ssdtwin.pts.realfio, not in this build") from None
    if not realfio.is_real_target(spec):
        raise PtsError(f"{spec}: no such drive image, block device, file or nbd:// URI")
    # Twin-only settings a real target would silently ignore: refused, so a lab run is not
    # taken for what it is not (the whole device, not namespace N; fio's own random seeds).
    if namespace is not None:
        raise PtsError(
            f"--namespace {namespace}: only for a twin (a drive image); {spec} is a real target: "
            "give the namespace's own block device (e.g. /dev/nvme0n2)"
        )
    if seed != 0:
        raise PtsError(f"--seed {seed}: only for a twin (a drive image); on {spec} fio draws its own seeds (randrepeat=0)")
    # A path made absolute: fio may run in another directory (the job's) than the user's.
    where = spec if "://" in spec else os.path.abspath(spec)
    target: PtsTarget = realfio.RealFioTarget(where, allow_destroy=allow_destroy, purge=purge)
    return target


def run(
    target: Union[str, PtsTarget],
    tests: Union[str, Sequence[str]] = ("iops", "tp", "lat", "wsat", "hir"),
    report: Union[None, str, Path] = None,
    round_s: float = 60.0,
    *,
    force: bool = False,
    namespace: Optional[int] = None,
    allow_destroy: bool = False,
    events: Optional[Events] = None,
    render: bool = True,
    jobs: int = 1,
    **settings: Any,
) -> PtsResult:
    """Run SNIA PTS tests on ``target`` and return the results (docs/pts.md, Python API).

    ``target``: a drive image directory (twin), an NBD URI, a block device or a file (real
    fio), or a PtsTarget. ``tests``: ids from iops, tp, lat, wsat, hir, curve (or a comma
    list). ``report``: the report folder (None: a new temporary folder, kept). Further
    keyword arguments are :class:`Settings` fields (``max_rounds=25``, ``hir_reps=360`` ...).
    Ctrl-C stops after saving the rounds done (pts.json ``interrupted``) and re-raises
    KeyboardInterrupt. Raises PtsError (one line) on bad input, before touching the target.
    ``jobs``: on a twin, run up to this many tests at once, each in its own process on an
    in-memory copy of the image as it was at the start (the image is left unchanged)."""
    names = T.parse_tests(tests if isinstance(tests, str) else ",".join(tests))
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= 64:
        raise PtsError(f"--jobs {jobs!r}: a whole number from 1 to 64 tests at once")
    unknown = [k for k in settings if k not in Settings.__dataclass_fields__]
    if unknown:
        near = difflib.get_close_matches(unknown[0], list(Settings.__dataclass_fields__), n=1)
        hint = f"did you mean '{near[0]}'? " if near else ""
        raise PtsError(f"unknown setting '{unknown[0]}' ({hint}the settings are the fields of ssdtwin.pts.Settings)")
    number = isinstance(round_s, (int, float)) and not isinstance(round_s, bool)
    cfg = Settings(round_s=float(round_s) if number else round_s, **settings)  # anything else: validate() says so
    cfg.validate()
    folder = Path(tempfile.mkdtemp(prefix="ssdtwin-pts-")) if report is None else Path(report)
    prepare_folder(folder, force)
    if isinstance(target, str) and _inside(Path(target.split(":ns")[0]), folder):
        raise PtsError(f"--report {folder}: holds the target {target}; choose a folder outside it")
    if jobs > 1 and len(names) > 1:
        if not isinstance(target, str) or not _is_twin(target):
            if isinstance(target, str):
                _check_exists(target)
            raise PtsError(f"--jobs {jobs}: tests run in parallel only on a twin (a drive image); a real target runs one test at a time")
        return run_parallel(
            target,
            names,
            folder,
            cfg,
            events,
            jobs,
            namespace,
            render,
        )
    own = isinstance(target, str)
    tgt: PtsTarget = (
        open_target(target, namespace=namespace, purge=cfg.purge, allow_destroy=allow_destroy, seed=cfg.seed, converge=cfg.converge)
        if isinstance(target, str)
        else target
    )
    try:
        cfg.check_block_sizes(names, tgt.info.lba_bytes, tgt.info.capacity_bytes, tgt.info.uri)
        if folder.is_dir() and any(folder.iterdir()):
            shutil.rmtree(folder)  # a previous report, and --force (prepare_folder checked)
        folder.mkdir(parents=True, exist_ok=True)
        runner = Runner(tgt, folder, cfg, events)
        try:
            runner.run(names)
        except KeyboardInterrupt:
            if render:
                with contextlib.suppress(PtsError):  # the interruption is what the user must hear about
                    render_report(folder)
            raise
        if render:
            render_report(folder)
    finally:
        if own:
            tgt.close()
    return load(folder)


def _is_twin(spec: str) -> bool:
    from .twin import is_image, split_spec

    path, _ = split_spec(spec)
    return path.is_dir() and is_image(path)


def _optional(name: str) -> Any:
    """``ssdtwin.pts.<name>``, a module this one uses when it is there (the real-fio target),
    imported only when a run needs it. ImportError when it is not installed."""
    return importlib.import_module(f"{__package__}.{name}")


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or lies inside it (a --force would delete it)."""
    try:
        p, f = path.resolve(), folder.resolve()
    except OSError:
        return False
    return p == f or f in p.parents
