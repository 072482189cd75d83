"""``ssdtwin sweep`` and ``ssdtwin advise``: sweeps on Ray and the what-if advisor (docs/sweep.md).

The library (``ssdtwin.sweep``) runs the points and returns rows; this module checks the
options, shows progress with an ETA on stderr (a line per point when stderr is not a
terminal) and prints the summary.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from .. import _core
from ..drive import parse_scale
from .common import U64, OutputFmt, check_fmt, ctrl_c_lets_clean_up, emit_json, fail, interrupt_note, plain_float, say, sigterm_cleans_up

Address = typer.Option(
    None,
    "--address",
    help="a Ray cluster: HOST:PORT of its head (GCS, 6379 by default) or ray://HOST:PORT (Ray Client); default: a local Ray",
)
InProcessOpt = typer.Option(False, "--in-process/--ray", help="run the points one after another in this process, without Ray")
NumCpus = typer.Option(None, "--num-cpus", min=1, max=4096, help="CPUs of the local Ray (default: every core)")
Quiet = typer.Option(False, "--quiet/--no-quiet", "-q", help="no progress display")


def _executor(address: Optional[str], in_process: bool, num_cpus: Optional[int]) -> Callable[[], Any]:
    from ..sweep.runner import InProcess, RayExecutor

    if in_process and (address is not None or num_cpus is not None):
        fail("--in-process runs without Ray: leave out --address and --num-cpus")
    if address is not None and num_cpus is not None:
        fail("--num-cpus sizes a local Ray: a cluster given by --address has its own CPUs")
    cores = os.cpu_count() or 1
    if num_cpus is not None and num_cpus > cores:
        # A point per CPU, each a process with its drive in memory: more than the cores
        # only makes them share the cores (and the memory) at once.
        fail(f"--num-cpus {num_cpus}: at most this machine's {cores} cores (a local Ray runs a point per CPU)")
    if in_process:
        return InProcess
    return lambda: RayExecutor(address=address, num_cpus=num_cpus)


class _Progress:
    """Points done, failed and the ETA: the shared progress display (commands/progress.py) on a
    terminal, else a line per point."""

    def __init__(self, quiet: bool, prog: str) -> None:
        self.quiet, self.prog = quiet, prog
        self.tty = sys.stderr.isatty()
        self.display: Any = None
        self.task: Any = None
        self.total = self.done = self.failed = 0
        self.t0 = time.perf_counter()

    def _detail(self) -> str:
        return f"{self.done}/{self.total} points, {self.failed} failed"

    def start(self, total: int, kept: int, where: str, out: Optional[Path] = None) -> None:
        self.total, self.done, self.t0 = total, kept, time.perf_counter()
        if self.quiet:
            return
        if kept == total and out is not None:  # a --resume of a finished sweep: no executor started
            table = out / "results.parquet"
            say(f"{self.prog}: all {total} points were done before (kept in {out / 'points'}); nothing to run; the table: {table}")
            return
        say(f"{self.prog}: {total} points ({kept} done before) on {where}")
        if self.display is not None:
            self.task = self.display.task("points", total=total, completed=kept, detail=self._detail())

    def point(self, p: Any, res: dict[str, Any]) -> None:
        self.done += 1
        ok = res["row"]["status"] == "ok"
        self.failed += not ok
        if self.quiet:
            return
        if self.task is not None:
            self.display.update(self.task, completed=self.done, detail=self._detail())
        elif not self.tty:
            wall = res.get("wall_s")
            status = "ok" if ok else f"failed: {res['row']['error']}"
            say(f"[{self.done}/{self.total}] {p.point_id} {p.label()}: {status}" + (f" ({wall:.1f} s)" if wall is not None else ""))

    @contextmanager
    def shown(self) -> Iterator[_Progress]:
        from .progress import shown

        with shown(self.quiet) as display:
            self.display = display
            yield self
            self.display = None


def sweep_cmd(
    config: Path = typer.Argument(..., metavar="SWEEP.toml", help="the sweep: [point], [grid], [[cases]], [[plot]] (docs/sweep.md)"),
    out: Path = typer.Option(..., "--out", help="folder for results.parquet, plots/, points/ and the image cache"),
    address: Optional[str] = Address,
    in_process: bool = InProcessOpt,
    num_cpus: Optional[int] = NumCpus,
    resume: bool = typer.Option(False, "--resume/--no-resume", help="run only the points not yet done in --out (failed ones again)"),
    quiet: bool = Quiet,
    fmt: str = OutputFmt,
) -> None:
    """Run a parameter sweep: one task per point (a preconditioned drive and a job), on Ray."""
    from ..sweep import SweepConfigError, SweepError, load, run_sweep

    check_fmt(fmt)
    make = _executor(address, in_process, num_cpus)
    try:
        sweep = load(config)
    except SweepConfigError as e:
        fail(str(e))
    if out.exists() and not out.is_dir():
        fail(f"--out {out}: not a directory")
    prog = _Progress(quiet, "ssdtwin sweep")

    def on_point(p: Any, res: dict[str, Any]) -> None:
        prog.point(p, res)
        interrupt_note(f"{prog.done} of {prog.total} points done and kept in {out}; --resume continues")

    def on_start(total: int, kept: int, where: str) -> None:
        prog.start(total, kept, where, out)
        interrupt_note(f"the points done are kept in {out}; --resume continues")

    # Until the executor has started (Ray: seconds) a stop leaves --out as it was.
    interrupt_note(f"no point run; {out} is as it was")

    def make_taking_sigterm_back() -> Any:
        ex = make()
        reinstall()  # ray.init sets its own SIGTERM handler (exit 15, Ray's stack dump on stderr)
        return ex

    # SIGTERM stops the sweep as Ctrl-C does: the tasks in flight are cancelled, Ray is shut
    # down and the table of the points done is written (it used to exit 1 or 15 under Ray,
    # or die at once in process, leaving no table).
    with sigterm_cleans_up() as reinstall, ctrl_c_lets_clean_up():
        try:
            with prog.shown():
                res = run_sweep(
                    sweep,
                    out,
                    make_taking_sigterm_back,
                    resume=resume,
                    on_start=on_start,
                    on_point=on_point,
                    on_note=lambda s: say(f"ssdtwin sweep: note: {s}"),
                )
        except SweepError as e:
            fail(str(e))
    if quiet or sys.stderr.isatty():  # else the progress lines named them already
        for p, err in res.failed:
            say(f"ssdtwin sweep: point {p.point_id} ({p.label()}): failed: {err}")
    summary = {
        "points": len(sweep.points),
        "run": res.done,
        "resumed": res.resumed,
        "failed": [{"point_id": p.point_id, "params": p.params, "error": e} for p, e in res.failed],
        "wall_s": round(res.wall_s, 3),
        "where": res.where,
        "results": str(res.parquet),
        "plots": [str(p) for p in res.plots],
    }
    if fmt == "json":
        emit_json(summary)
        return
    # A --resume of a finished sweep starts no executor: "0.0 s wall on nothing to run" it said.
    ran = f"{res.wall_s:.1f} s wall on {res.where}" if res.resumed < len(sweep.points) else "every point was done before, nothing run"
    typer.echo(f"{len(sweep.points)} points: {res.done} run, {res.resumed} kept from before, {len(res.failed)} failed; {ran}")
    typer.echo(f"results: {res.parquet} ({len(res.rows)} rows)")
    for plot, path in zip(sweep.plots, res.plots):
        # A figure of a column no point filled (`waf` over windows too short to measure it) is
        # drawn empty: say so, and why, rather than leave an empty PNG to be found.
        empty = not any(r.get("status") == "ok" and r.get(plot.y) is not None for r in res.rows)
        typer.echo(f"plot: {path}" + (f" (empty: {plot.y} is null in every row; docs/sweep.md, Columns)" if empty else ""))


def _iops(text: str) -> float:
    t = text.strip().lower()
    mult = {"k": 1e3, "m": 1e6}.get(t[-1:], 1.0)
    try:
        v = plain_float(t[:-1] if t[-1:] in ("k", "m") else t) * mult
    except ValueError:
        fail(f"--target-iops '{text}': a number of IOPS, e.g. 300k or 1.2m")
    if not (v > 0 and math.isfinite(v)):
        fail(f"--target-iops '{text}': a finite number above 0")
    return v


def _costs(text: Optional[str], drives: list[str]) -> Optional[dict[str, float]]:
    if text is None:
        return None
    out: dict[str, float] = {}
    for item in text.split(","):
        name, eq, value = item.strip().partition("=")
        try:
            v = plain_float(value)
        except ValueError:
            v = math.nan
        if not eq or not (v >= 0 and math.isfinite(v)):
            fail(f"--cost-per-tb '{item.strip()}': NAME=PRICE with PRICE a number >= 0 (e.g. kioxia-cm6-r-3.84t=95)")
        if name in out:  # the last price was taken, the other dropped unsaid
            fail(f"--cost-per-tb: {name} priced twice (one price for each drive)")
        out[name] = v
    others = [n for n in out if n not in drives]
    if others:
        # A price for a drive not advised on is a typo of one that is (or a forgotten --drives).
        fail(f"--cost-per-tb: {others[0]} is not one of --drives ({', '.join(drives)})")
    missing = [d for d in drives if d not in out]
    if missing:
        fail(f"--cost-per-tb: no price for {', '.join(missing)} (give one for every drive of --drives)")
    return out


def advise_cmd(
    job: Path = typer.Argument(..., metavar="JOB.fio", help="the workload: an fio job file (its queue depths and mix)"),
    target_iops: str = typer.Option(..., "--target-iops", help="IOPS the drives must deliver together (300k, 1.2m)"),
    p99_us: Optional[float] = typer.Option(None, "--p99-us", help="p99 completion latency at that load, in us"),
    lifetime_years: Optional[float] = typer.Option(None, "--lifetime-years", help="years the drives must last at that load"),
    drives: str = typer.Option(..., "--drives", help="candidate presets, comma-separated (ssdtwin models)"),
    capacity: Optional[str] = typer.Option(None, "--capacity", help="user capacity needed in all, e.g. 20TB (default: no capacity target)"),
    extra_op: str = typer.Option("0,0.1,0.2,0.35,0.5", "--extra-op", help="extra OP levels: namespace = capacity / (1 + x)"),
    cost_per_tb: Optional[str] = typer.Option(
        None, "--cost-per-tb", help="NAME=PRICE per TB for every drive (default: every TB priced the same)"
    ),
    scale: str = typer.Option("1/64", "--scale", help="1/N: the drives simulated (results hold at full scale, docs/models.md)"),
    runtime: str = typer.Option("10s", "--runtime", help="simulated run per measurement (overrides the job's runtime)"),
    ramp: str = typer.Option("1s", "--ramp", help="simulated ramp before each measurement"),
    precondition: str = typer.Option("rand", "--precondition", help="drive state: rand (steady state), seq or none"),
    rounds: int = typer.Option(3, "--rounds", min=1, max=10, help="load rounds (more drives for a candidate that misses)"),
    seed: int = typer.Option(1, "--seed", min=0, max=U64 >> 1),
    out: Optional[Path] = typer.Option(None, "--out", help="keep the sweeps here (default: a temporary folder)"),
    cache: Optional[Path] = typer.Option(None, "--cache", help="keep the preconditioned images here and reuse them (default: under --out)"),
    address: Optional[str] = Address,
    in_process: bool = InProcessOpt,
    num_cpus: Optional[int] = NumCpus,
    quiet: bool = Quiet,
    fmt: str = OutputFmt,
) -> None:
    """Which drive, namespace size and OP meet a workload's targets at the lowest cost and wear."""
    from ..fio import FioJobError, parse_string
    from ..fio.limits import MAX_RUN_DAYS, MAX_RUN_US
    from ..fio.run import job_file_problem
    from ..fio.units import parse_time_us
    from ..sweep.advise import Targets, advise, report, to_json
    from ..sweep.config import PRECONDITIONS, SweepConfigError, scale_problem
    from ..sweep.runner import SweepError, images_problem

    check_fmt(fmt)
    iops = _iops(target_iops)
    names = [d.strip() for d in drives.split(",") if d.strip()]
    known = [n for n, _ in _core.presets()]
    for n in names:
        if n not in known:
            fail(f"--drives: no preset '{n}' (ssdtwin models lists: {', '.join(known)})")
    if not names:
        fail("--drives: give at least one preset")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        fail(f"--drives: {twice[0]} given twice (each candidate drive once)")
    if p99_us is not None and not (p99_us > 0 and math.isfinite(p99_us)):
        fail(f"--p99-us {p99_us}: a finite number above 0")
    if lifetime_years is not None and not (0 < lifetime_years <= 100):
        fail(f"--lifetime-years {lifetime_years}: above 0 and at most 100")
    cap = None
    if capacity is not None:
        try:
            cap = _core.parse_size(capacity)
        except ValueError as e:
            fail(f"--capacity: {e}")
        if cap <= 0:
            fail(f"--capacity {capacity}: above 0")
    ops = []
    for x in extra_op.split(","):
        try:
            ops.append(plain_float(x.strip()))
        except ValueError:
            fail(f"--extra-op '{extra_op}': '{x.strip()}' is not a number (e.g. 0,0.2,0.5)")
        if not (0 <= ops[-1] <= 10):
            fail(f"--extra-op {ops[-1]}: from 0 to 10 (namespace = capacity / (1 + x))")
        if ops.count(ops[-1]) > 1:
            fail(f"--extra-op '{extra_op}': {ops[-1]:g} given twice (each OP level once)")
    costs = _costs(cost_per_tb, names)
    try:
        scale_n = parse_scale(scale)
    except ValueError as e:
        fail(f"--scale: {e}")
    for n in names:
        problem = scale_problem(n, scale_n)  # every candidate's run failed, after Ray had started
        if problem:
            fail(f"--scale {problem}")
    if precondition not in PRECONDITIONS:
        fail(f"--precondition '{precondition}': one of {', '.join(PRECONDITIONS)}")
    # As `ssdtwin fio` checks its job files: a directory, a FIFO (it blocked) or a binary
    # file (a UnicodeDecodeError traceback) is one line.
    problem = job_file_problem(job)
    if problem:
        fail(problem)
    try:
        data = job.read_bytes()
        text = data.decode("utf-8")
        parse_string(text, name=str(job), env={}, cwd=job.parent)
    except OSError as e:
        fail(f"{job}: {e.strerror or e}")
    except UnicodeDecodeError as e:
        fail(f"{job}: not a text file (byte 0x{data[e.start]:02x} at offset {e.start} is not UTF-8)")
    except FioJobError as e:
        fail(*e.lines())
    for flag, value in (("--runtime", runtime), ("--ramp", ramp)):
        try:
            us = parse_time_us(value, default_unit="s")
        except ValueError as e:
            fail(f"{flag} '{value}': {e} (e.g. 10s, 500ms)")
        if flag == "--runtime" and us <= 0:
            fail(f"--runtime {value}: above 0")
    if sum(parse_time_us(v, default_unit="s") for v in (runtime, ramp)) > MAX_RUN_US:
        # A point past it simulated 200 days (hours of CPU) before the engine refused it.
        fail(f"--ramp {ramp} + --runtime {runtime}: at most {MAX_RUN_DAYS} days together (the engine's run limit)")
    make = _executor(address, in_process, num_cpus)
    keep = out is not None
    folder = out if out is not None else Path(tempfile.mkdtemp(prefix="ssdtwin-advise-"))
    if keep and folder.exists() and not folder.is_dir():
        fail(f"--out {folder}: not a directory (advise keeps its sweeps there: give a new folder)")
    if keep and folder.exists() and any(folder.iterdir()):
        fail(f"--out {folder}: not empty (advise keeps its sweeps there: give a new folder)")
    if cache is not None:
        problem = images_problem(cache)  # before Ray starts and round 1 is announced
        if problem:
            fail(f"--cache {cache}: {problem}")
    prog = _Progress(quiet, "ssdtwin advise")
    log = (lambda s: None) if quiet else (lambda s: say(f"ssdtwin advise: {s}"))
    # Until the first sweep has started (Ray: seconds) --out does not exist yet.
    interrupt_note("no sweep run; nothing kept")

    def on_start(total: int, kept: int, where: str) -> None:
        prog.start(total, kept, where, out)
        interrupt_note(f"the sweeps done so far are in {folder}" if keep else "nothing kept")

    ex = None
    # SIGTERM removes the temporary folder as Ctrl-C does (it used to kill the process and
    # leave it behind, or, once ray.init had set its handler, exit 15).
    with sigterm_cleans_up() as reinstall, ctrl_c_lets_clean_up():
        try:
            ex = make()
            reinstall()
            with prog.shown():
                a = advise(
                    job.resolve(),
                    Targets(iops, p99_us, lifetime_years, cap),
                    names,
                    ops,
                    ex,
                    folder,
                    cost_per_tb=costs,
                    scale=scale_n,
                    runtime=runtime,
                    ramp_time=ramp,
                    precondition=precondition,
                    seed=seed,
                    rounds=rounds,
                    cache=cache,
                    log=log,
                    note=lambda s: say(f"ssdtwin advise: note: {'--cache ' + str(cache) + ': ' if cache else ''}{s}"),
                    on_start=on_start,
                    on_point=prog.point,
                )
        except (SweepError, SweepConfigError) as e:  # e.g. a ${NAME} the job file uses
            fail(str(e))
        finally:
            reinstall(signal.SIG_IGN)  # a second SIGTERM must not cut the clean-up short
            if ex is not None:
                ex.close()
            if not keep:
                shutil.rmtree(folder, ignore_errors=True)
    if fmt == "json":
        emit_json(to_json(a))
    else:
        for line in report(a):
            typer.echo(line)
    if not a.ranked:
        raise typer.Exit(1)
