"""Run a sweep's points in this process or on Ray, keep each finished point, write the table.

The output folder (docs/sweep.md, "The output folder")::

    OUT/points/ID.json     one per finished point: its row, wall time and node (kept at once,
                           so Ctrl-C or a crash loses only the points in flight)
    OUT/cache/images/KEY   preconditioned images shared by the points that need that state
    OUT/results.parquet    every point of the sweep, in the sweep's order (pyarrow)
    OUT/plots/Y-vs-X.png   the [[plot]] tables of the sweep file
    OUT/.lock              flock'ed while a sweep runs in OUT

Ray is the only scheduler: a local Ray (all cores) by default, or any cluster by address. A
point is one Ray task; the images are built by tasks the points depend on, one per state, so
no two points build the same image. On a cluster whose nodes do not share OUT, a point that
finds no image on its node builds it there (deterministic: the same image).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional
from urllib.parse import urlsplit

from .. import _core
from .columns import INPUT_TYPES, OUTPUT_COLUMNS
from .config import Point, Sweep, canonical
from .point import core_build, failed_row, image_path, prepare, remove_stopped_builds, run_point, stale_images, stale_row

__all__ = ["Executor", "InProcess", "RayExecutor", "SweepError", "SweepResult", "run_sweep", "table", "write_results"]


class SweepError(RuntimeError):
    """A sweep that cannot run (an unreachable Ray, an --out in use): one line."""


@dataclass
class SweepResult:
    rows: list[dict[str, Any]]
    done: int  # points run now
    resumed: int  # points taken from an earlier run
    failed: list[tuple[Point, str]] = field(default_factory=list)
    wall_s: float = 0.0
    where: str = ""
    parquet: Optional[Path] = None
    plots: list[Path] = field(default_factory=list)


Finished = Callable[[Point, dict[str, Any]], None]


class Executor:
    """Runs points; calls ``finished(point, result)`` as each one ends, in any order."""

    where = ""

    def run(self, points: Sequence[Point], cache: Path, finished: Finished) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class InProcess(Executor):
    """One point after another in this process (the reference the Ray runs must equal)."""

    where = "in process, one point after another"

    def run(self, points: Sequence[Point], cache: Path, finished: Finished) -> None:
        for p in points:
            finished(p, run_point(p, str(cache)))


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise SweepError("Ray is not installed: pip install 'ssdtwin[sweep]' (or run with --in-process)") from None
    return ray


def check_address(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast, in one line, when nothing listens at a Ray address (host:port or
    ray://host:port); ray.init would otherwise retry for a minute."""
    if address == "auto":
        return
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or not port:
        raise SweepError(f"--address {address}: give HOST:PORT (the head's GCS port, 6379 by default) or ray://HOST:PORT")
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as e:
        raise SweepError(f"--address {address}: no Ray cluster reachable there ({e.strerror or e})") from None


def task_error(e: BaseException) -> str:
    """Why a Ray task failed, in one line of at most 300 characters. A task whose code raised
    is a RayTaskError whose text is the worker's traceback (``ray::_run_after() (pid=...,
    ip=...) File ...``, in terminal colours): the error the code raised is its ``cause``. A
    task that never returned (its worker died, its node was lost) is Ray's own error."""
    from ray.exceptions import RayTaskError

    cause = getattr(e, "cause", None)
    if isinstance(e, RayTaskError) and isinstance(cause, BaseException):
        text = str(cause)
        why = f"{type(cause).__name__}: {text}" if text else type(cause).__name__
    else:
        why = str(e) or type(e).__name__
    return " ".join(why.split())[:300]


def _ray_notes_to_stderr() -> None:
    """Ray's driver prints what its raylets report (a worker that died, a task it retries)
    on stdout, between the lines of `-o json` (which prints only JSON there): they go to
    stderr. Ray has no option for it; its printer is a module function looked up at each
    message, replaced here (left as it is if a later Ray has none)."""
    try:
        from ray._private import worker as ray_worker
    except ImportError:
        return
    printer = getattr(ray_worker, "print_to_stdstream", None)
    if printer is None or getattr(printer, "ssdtwin_to_stderr", False):
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        printer({**data, "is_err": True}, ignore_prefix)

    to_stderr.ssdtwin_to_stderr = True  # type: ignore[attr-defined]
    ray_worker.print_to_stdstream = to_stderr


class RayExecutor(Executor):
    """Points as Ray tasks: on a local Ray started here (``address`` None: every core, or
    ``num_cpus``), or on the cluster at ``address``."""

    def __init__(self, address: Optional[str] = None, num_cpus: Optional[int] = None) -> None:
        import logging

        if address is None:
            # A local Ray serves this process only: its node address is the loopback, not
            # the machine's network address (Ray's switch for laptops, read when ray is
            # first imported), so nothing of it is reachable from the network.
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
            # Ray runs its workers at nice 15 (to keep its own processes responsive); here
            # the workers are the sweep, and on a shared machine nice 15 starves them.
            os.environ.setdefault("RAY_worker_niceness", "0")
        if address is not None:
            check_address(address)  # before importing Ray (seconds): a typo fails at once
        ray = _ray()
        _ray_notes_to_stderr()
        kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.ERROR, "log_to_driver": False}
        if address is None:
            kwargs["num_cpus"] = num_cpus
        said = ""
        try:
            # "local": always a new Ray for this sweep, never one that `ray start` left
            # running on the machine (ray.init's default when RAY_ADDRESS is unset).
            with _stderr_kept(address is not None) as kept:
                try:
                    ray.init(address=address or "local", **kwargs)
                finally:
                    said = kept()
        except Exception as e:  # Ray raises several types (ConnectionError, RuntimeError ...)
            msg = " ".join(str(e).split())[:300]
            if address is not None and ("InvalidAuthToken" in said or "Unauthenticated" in said):
                raise SweepError(
                    f"--address {address}: the cluster wants Ray's token authentication ({msg}): run with RAY_AUTH_MODE=token "
                    "and its token (RAY_AUTH_TOKEN or ~/.ray/auth_token) in the environment (docs/sweep.md, Ray)"
                ) from None
            raise SweepError(f"Ray: {'--address ' + address + ': ' if address else ''}{msg}") from None
        self.ray = ray
        self.cpus = cpus = int(ray.cluster_resources().get("CPU", 0))
        nodes = len([n for n in ray.nodes() if n.get("Alive")])
        self.where = f"Ray {'cluster ' + address if address else 'on this machine'} ({nodes} node{'s' * (nodes != 1)}, {cpus} CPUs)"
        self._check_workers()

    def _check_workers(self) -> None:
        """Workers must run this very ssdtwin: a point's row depends on its version."""
        ray = self.ray
        try:
            version = ray.get(ray.remote(_worker_version).options(num_cpus=0).remote(), timeout=300)
        except Exception as e:
            msg = " ".join(str(e).split())[:300]
            raise SweepError(f"Ray workers cannot run ssdtwin (install it on every node): {msg}") from None
        if version != _core.__version__:
            raise SweepError(f"Ray workers run ssdtwin {version}, this process {_core.__version__}: install the same version everywhere")

    def run(self, points: Sequence[Point], cache: Path, finished: Finished) -> None:
        ray = self.ray
        prep_task = ray.remote(prepare).options(num_cpus=1, max_retries=2)
        point_task = ray.remote(_run_after).options(num_cpus=1, max_retries=2)
        preps: dict[str, Any] = {}
        for p in points:
            if p.image_key not in preps:
                preps[p.image_key] = prep_task.remote(p, str(cache))

        def submit(p: Point) -> Any:
            return point_task.remote(p, str(cache), preps[p.image_key])

        def done(p: Point, ref: Any) -> None:
            try:
                result = ray.get(ref)
            except Exception as e:  # the worker died (out of memory, a node lost)
                result = {"row": failed_row(p, f"Ray task failed: {task_error(e)}"), "wall_s": None}
            finished(p, result)

        try:
            drain(ray, points, submit, done, window=in_flight_window(self.cpus))
        except BaseException:
            for ref in preps.values():
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            raise

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ray.shutdown()


def in_flight_window(cpus: int) -> int:
    """How many point tasks are submitted and not yet finished at a time: enough to keep
    every CPU busy with a queue behind it, few enough that each ray.wait is short."""
    return max(4 * cpus, 64)


def drain(ray: Any, items: Sequence[Point], submit: Callable[[Point], Any], done: Callable[[Point, Any], None], window: int) -> None:
    """Submit ``items`` as tasks (``submit`` gives a task's ref), at most ``window`` in
    flight, and call ``done(item, ref)`` as each ends, in any order. Each ray.wait is over
    the tasks in flight, not over every task not yet finished: waiting on all of them was
    quadratic in the number of points (20,000 trivial tasks: 43.2 s, 11.9 s now; docs/performance.md).
    On any exception (Ctrl-C, SIGTERM) the tasks in flight are cancelled; those never
    submitted never run."""
    todo = iter(items)
    flight: dict[Any, Point] = {}

    def fill() -> None:
        while len(flight) < window:
            item = next(todo, None)
            if item is None:
                return
            flight[submit(item)] = item

    try:
        fill()
        while flight:
            ready, rest = ray.wait(list(flight), num_returns=1, timeout=0.5)
            if ready and rest:  # and every other task already finished, in the same call
                more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                ready = [*ready, *more]
            for ref in ready:
                done(flight.pop(ref), ref)
            fill()
    except BaseException:
        for ref in list(flight):
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        raise


@contextlib.contextmanager
def _stderr_kept(keep: bool) -> Iterator[Callable[[], str]]:
    """While connecting to a cluster, what Ray's core writes to file descriptor 2 (a warning
    a second for 20 s when the cluster refuses the connection, say for want of its token) is
    kept aside instead of printed: the sweep's error is one line, and says why from it."""
    if not keep:
        yield lambda: ""
        return
    import tempfile

    with tempfile.TemporaryFile() as f:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(f.fileno(), 2)
        try:

            def text() -> str:
                f.seek(0)
                return f.read().decode(errors="replace")

            yield text
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


class Shared(Executor):
    """An executor used by several sweeps in a row (advise's rounds): closed by its owner."""

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.where = inner.where

    def run(self, points: Sequence[Point], cache: Path, finished: Finished) -> None:
        self.inner.run(points, cache, finished)


def _worker_version() -> str:
    return str(_core.__version__)


def _run_after(point: Point, cache: str, prep_error: Optional[str]) -> dict[str, Any]:
    """A point, once the task that builds its image has ended (its error is the point's)."""
    if prep_error is not None:
        return {"row": failed_row(point, prep_error), "wall_s": 0.0, "node": socket.gethostname(), "pid": os.getpid()}
    return run_point(point, cache)


# ------------------------------------------------------------------------------ the folder


@contextlib.contextmanager
def _out_lock(out: Path) -> Iterator[None]:
    with open(out / ".lock", "a+") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            raise SweepError(f"--out {out}: another sweep is running there (pid {f.read().strip() or 'unknown'})") from None
        f.truncate(0)
        f.write(str(os.getpid()))
        f.flush()
        yield


def _check_layout(out: Path, cache: Optional[Path]) -> None:
    """What a sweep writes in OUT (and the image cache) must be free for it, or of the right
    kind, before any point runs: a file named ``cache`` once failed every point (exit 0), one
    named ``points`` or ``plots`` stopped the sweep after every point had run."""
    option, root = ("--cache", cache) if cache else ("--out", out / "cache")
    folders = [("--out", out, out / "points", "finished points"), ("--out", out, out / "plots", "figures")]
    folders += [(option, cache or out, root, "images"), (option, cache or out, root / "images", "images")]
    for opt, given, path, what in folders:
        if (path.exists() or path.is_symlink()) and not path.is_dir():
            raise SweepError(f"{opt} {given}: {path} is not a folder (the sweep keeps its {what} there)")
    problem = images_problem(root)
    if problem:
        raise SweepError(f"{option} {cache or out}: {problem}")
    table = out / "results.parquet"
    if table.is_dir():
        raise SweepError(f"--out {out}: {table} is a folder (the sweep writes its table there)")


def images_problem(root: Path) -> Optional[str]:
    """Why the images cannot be kept under ``root`` (made if need be); None when they can. A
    cache that could not be made or written failed every point, each row with one OSError."""
    images = root / "images"
    for path in (root, images):
        if (path.exists() or path.is_symlink()) and not path.is_dir():
            return f"{path} is not a folder (the sweep keeps its images there)"
    try:
        images.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=images, prefix=".probe-"):
            pass
    except OSError as e:
        return f"cannot write the images to {images} ({e.strerror or e})"
    return None


def _kept(out: Path, points: Sequence[Point]) -> dict[str, dict[str, Any]]:
    """Rows of points finished by an earlier run (failed ones are run again)."""
    ids = {p.point_id for p in points}
    kept = {}
    for f in (out / "points").glob("*.json"):
        if f.stem not in ids:
            continue
        try:
            rec = json.loads(f.read_text())
        except (OSError, ValueError):
            continue  # a file cut short by a crash: the point runs again
        if rec.get("row", {}).get("status") == "ok":
            kept[f.stem] = rec["row"]
    return kept


def _current(kept: dict[str, dict[str, Any]], points: Sequence[Point]) -> tuple[dict[str, dict[str, Any]], Optional[str]]:
    """The kept rows this very ssdtwin would make (its version, the core's build, the preset's
    values: the identity a cached image is checked against), and one note on those that are
    not, which run again: a table mixing them would compare what cannot be compared (rows of
    another version were refused, and rows of another build or preset definition kept)."""
    by_id = {p.point_id: p for p in points}
    current, why = {}, Counter[str]()
    for pid, row in kept.items():
        stale = stale_row(by_id[pid], row)
        if stale is None:
            current[pid] = row
        else:
            why[stale] += 1
    if not why:
        return current, None
    n = sum(why.values())
    reasons = "; ".join(f"{k} ({c})" if len(why) > 1 else k for k, c in why.most_common())
    this = f"ssdtwin {_core.__version__}, core {core_build()}"
    return current, f"--resume: {n} of the {len(kept)} points kept run again, their rows {reasons} (this is {this})"


def _say(note: str) -> None:
    print(f"ssdtwin: note: {note}", file=sys.stderr, flush=True)


def _keep(out: Path, point: Point, result: dict[str, Any]) -> None:
    d = out / "points"
    tmp = d / f"{point.point_id}.json.tmp"
    tmp.write_text(json.dumps({"params": point.params, **result}, indent=1, allow_nan=True))
    os.replace(tmp, d / f"{point.point_id}.json")


def _remove_made(made: Sequence[Path]) -> None:
    """Remove what a run created (files, and folders it left empty), newest first."""
    for path in reversed(made):
        with contextlib.suppress(OSError):
            path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()


def run_sweep(
    sweep: Sweep,
    out: Path,
    executor: Callable[[], Executor],
    *,
    resume: bool = False,
    cache: Optional[Path] = None,
    on_start: Optional[Callable[[int, int, str], None]] = None,
    on_point: Optional[Callable[[Point, dict[str, Any]], None]] = None,
    on_note: Optional[Callable[[str], None]] = None,
) -> SweepResult:
    """Run every point not yet done, then write results.parquet and the plots. Ctrl-C
    (KeyboardInterrupt) stops the points in flight and writes the table of those done
    before it is raised again; ``resume`` continues from the points kept in ``out``. The
    images go to ``cache`` (default OUT/cache). ``executor`` makes the executor, which is
    closed at the end (a :class:`Shared` one stays open for the next sweep)."""
    try:
        import pyarrow.parquet  # noqa: F401  (the table: checked before any point runs, not after the last)
    except ImportError:
        raise SweepError("pyarrow is not installed (the table is Parquet): pip install 'ssdtwin[sweep]'") from None
    # What this run creates before its executor starts, removed again if it cannot start
    # (Ray refused, or Ctrl-C while Ray starts): a failed start leaves OUT as it was.
    made = [d for d in (*reversed(out.absolute().parents), out.absolute()) if not d.exists()]
    made += [p for p in (out / ".lock", out / "points") if not p.exists()]
    images_root = (cache or out / "cache").absolute()
    made += [d for d in (*reversed(images_root.parents), images_root, images_root / "images") if not d.exists() and d not in made]
    out.mkdir(parents=True, exist_ok=True)
    with _out_lock(out):
        try:
            _check_layout(out, cache)
            has_points = (out / "points").is_dir() and any((out / "points").iterdir())
            if has_points and not resume:
                raise SweepError(f"--out {out}: holds a sweep already; --resume continues it, or choose an empty folder")
            (out / "points").mkdir(exist_ok=True)
            kept, stale = _current(_kept(out, sweep.points), sweep.points) if resume else ({}, None)
            if stale:
                (on_note or _say)(stale)
            todo = [p for p in sweep.points if p.point_id not in kept]
            root = cache or out / "cache"
            for p, why in stale_images(todo, root):
                # Never used: the image is removed and built again by the first point needing it.
                name = f"{image_path(root, p).name} ({p.params['preset']} at 1/{p.params['scale']})"
                (on_note or _say)(f"cached image {name} is stale: {why}; building it again")
            rows: dict[str, dict[str, Any]] = dict(kept)
            result = SweepResult(rows=[], done=0, resumed=len(kept))
            t0 = time.perf_counter()
            ex = executor() if todo else None
        except BaseException:
            _remove_made(made)
            raise
        result.where = ex.where if ex else "nothing to run"
        if on_start:
            on_start(len(sweep.points), len(kept), result.where)

        def finished(p: Point, res: dict[str, Any]) -> None:
            _keep(out, p, res)
            rows[p.point_id] = res["row"]
            result.done += 1
            if res["row"]["status"] != "ok":
                result.failed.append((p, res["row"]["error"]))
            if on_point:
                on_point(p, res)

        # Absolute: a Ray worker resolves a relative path from its own working directory
        # (on a cluster, where `ray start` ran), not from this process's.
        images = (cache or out / "cache").absolute()
        try:
            if ex is not None:
                ex.run(todo, images, finished)
        finally:
            result.wall_s = time.perf_counter() - t0
            if ex is not None:
                ex.close()
                remove_stopped_builds(images)
            result.rows = [rows[p.point_id] for p in sweep.points if p.point_id in rows]
            result.parquet = write_results(sweep, result.rows, out)
        result.plots = plot_results(sweep, result.rows, out)
        return result


# ------------------------------------------------------------------------------ the table


def table(sweep: Sweep, rows: Sequence[dict[str, Any]]) -> Any:
    """The rows as a pyarrow Table with a fixed schema: inputs, var_NAME, outputs."""
    import pyarrow as pa

    var_names = sorted({n for p in sweep.points for n in p.params["vars"]})
    types = {**INPUT_TYPES, **{f"var_{n}": "string" for n in var_names}, **OUTPUT_COLUMNS}
    schema = pa.schema([(k, getattr(pa, t)()) for k, t in types.items()])
    meta = {"seed": sweep.seed, "title": sweep.title, "source": sweep.source, "ssdtwin_version": _core.__version__}
    schema = schema.with_metadata({"ssdtwin.sweep": canonical(meta)})
    cols = {k: [r.get(k) for r in rows] for k in types}
    return pa.table(cols, schema=schema)


def write_results(sweep: Sweep, rows: Sequence[dict[str, Any]], out: Path) -> Path:
    import pyarrow.parquet as pq

    path = out / "results.parquet"
    tmp = out / "results.parquet.tmp"
    pq.write_table(table(sweep, rows), tmp)
    os.replace(tmp, path)
    return path


def plot_results(sweep: Sweep, rows: Sequence[dict[str, Any]], out: Path) -> list[Path]:
    from .plots import draw

    return draw(sweep, rows, out / "plots") if sweep.plots and rows else []
