"""``ssdtwin pts``: the SNIA PTS harness (docs/pts.md).

``ssdtwin pts TARGET --tests ... --report DIR`` runs the tests (``run`` is the default
sub-command, so the target comes right after ``pts``); ``ssdtwin pts compare A B --report
DIR`` sets two reports side by side; ``ssdtwin pts report DIR`` renders one again. A target
literally named ``compare``, ``report`` or ``run`` is written ``./compare``.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

import typer
from typer.core import TyperGroup

from .. import _core
from ..pts.target import PtsError
from .common import U32, Seed, check_fmt, emit_json, fail, interrupt_note, plain_float, plain_int, say


class _RunByDefault(TyperGroup):
    """A group whose first argument, when it names no sub-command, is run's TARGET."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


pts = typer.Typer(
    cls=_RunByDefault,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="SNIA PTS Enterprise tests on a twin or a real device, and the report (docs/pts.md). "
    "`ssdtwin pts TARGET --tests iops,tp --report DIR` runs; `ssdtwin pts compare A B --report DIR` compares.",
)

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_S = {None: 1.0, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(flag: str, text: str) -> float:
    """``60s``, ``1m``, ``24h``, ``1.5`` (seconds) → seconds."""
    m = _DURATION.match(text)
    if not m:
        fail(f"{flag} '{text}': a duration such as 60s, 1m, 24h")
    return float(m.group(1)) * _UNIT_S[m.group(2).lower() if m.group(2) else None]


def _sizes(flag: str, text: Optional[str]) -> Optional[tuple[int, ...]]:
    if text is None:
        return None
    out = []
    for item in text.split(","):
        try:
            v = _core.parse_size(item.strip())
        except ValueError:
            fail(f"{flag} '{text}': '{item.strip()}' is not a block size (e.g. 4k,128k,1m,512)")
        out.append(v)
    return tuple(out)


def _size(flag: str, text: str) -> int:
    sizes = _sizes(flag, text) or ()
    if len(sizes) != 1:
        fail(f"{flag} '{text}': one block size (e.g. 4k)")
    return sizes[0]


def _ints(flag: str, text: Optional[str], what: str) -> Optional[tuple[int, ...]]:
    if text is None:
        return None
    try:
        return tuple(plain_int(x.strip()) for x in text.split(","))
    except ValueError:
        fail(f"{flag} '{text}': a comma list of {what}")


def _floats(flag: str, text: Optional[str], what: str) -> Optional[tuple[float, ...]]:
    if text is None:
        return None
    vals = tuple(parse_duration(flag, x) for x in text.split(","))
    if any(v <= 0 for v in vals):
        fail(f"{flag} '{text}': {what} must be positive")
    return vals


def _tc_qd(values: list[str]) -> dict[str, tuple[int, int]]:
    """Each --tc-qd item, by test; a test named twice is an error (as any list option's value
    given twice): which of two settings was meant cannot be guessed."""
    out: dict[str, tuple[int, int]] = {}
    given: dict[str, str] = {}
    for text in values:
        for item in text.split(","):
            m = re.match(r"^\s*([a-z]+)\s*=\s*([0-9]+)\s*x\s*([0-9]+)\s*$", item, re.IGNORECASE)
            if not m:
                fail(f"--tc-qd '{item}': write TEST=THREADSxDEPTH, e.g. tp=1x256")
            test = m.group(1).lower()
            if test in given:
                fail(f"--tc-qd: {test} given more than once ({given[test]}, {item.strip()}); give each test once")
            given[test] = item.strip()
            out[test] = (int(m.group(2)), int(m.group(3)))
    return out


@pts.command("run")
def run_cmd(
    target: str = typer.Argument(..., metavar="TARGET", help="drive image dir (./cm6, ./cm6:ns2), nbd:// URI, /dev/... or a file"),
    tests: str = typer.Option(
        "iops,tp,lat,wsat,hir", "--tests", help="comma list of iops, tp, lat, wsat, hir, curve, xsr, cbw, dirth (or all)"
    ),
    report: Path = typer.Option(..., "--report", help="report folder (new, empty, or a previous report with --force)"),
    round_: str = typer.Option("60s", "--round", help="round (and segment) length: 60s, 1m, 10s; at least 1 s"),
    min_rounds: int = typer.Option(5, "--min-rounds", help="rounds before steady state may be declared (5..)"),
    max_rounds: int = typer.Option(25, "--max-rounds", help="stop and report 'not steady' after this many rounds (PTS: 25)"),
    iops_bs: Optional[str] = typer.Option(None, "--iops-bs", help="IOPS block sizes (default 1m,128k,64k,32k,16k,8k,4k,512)"),
    iops_mixes: Optional[str] = typer.Option(None, "--iops-mixes", help="IOPS read %% list (default 100,95,65,50,35,5,0)"),
    tp_bs: Optional[str] = typer.Option(None, "--tp-bs", help="Throughput block sizes (default 128k,1m)"),
    lat_bs: Optional[str] = typer.Option(None, "--lat-bs", help="Latency block sizes (default 8k,4k,512)"),
    lat_mixes: Optional[str] = typer.Option(None, "--lat-mixes", help="Latency read %% list (default 100,65,0)"),
    tc_qd: list[str] = typer.Option([], "--tc-qd", help="threads x queue depth per test, e.g. tp=1x256 (repeatable or comma list)"),
    wsat_fills: float = typer.Option(4.0, "--wsat-fills", help="WSAT stops after this many capacities written"),
    wsat_max_time: str = typer.Option("24h", "--wsat-max-time", help="WSAT stops after this much stimulus time"),
    wsat_segment: Optional[str] = typer.Option(None, "--wsat-segment", help="WSAT segment length (default: --round)"),
    wsat_stop_steady: bool = typer.Option(False, "--wsat-stop-steady/--no-wsat-stop-steady", help="WSAT also stops at steady state"),
    wsat_min_fills: float = typer.Option(
        2.0, "--wsat-min-fills", help="--wsat-stop-steady: drive fills written before a window is judged (the PTS WIPC's 2x)"
    ),
    hir_reps: int = typer.Option(360, "--hir-reps", help="HIR repetitions per wait state (PTS: 360)"),
    hir_waits: Optional[str] = typer.Option(None, "--hir-waits", help="HIR wait states (default 5s,10s,15s,25s,50s)"),
    hir_pre_fills: float = typer.Option(
        2.0, "--hir-pre-fills", help="HIR: drive fills of RND 4KiB W before its steady state is judged (out of FOB)"
    ),
    curve_jobs: Optional[str] = typer.Option(None, "--curve-jobs", help="latency-vs-IOPS thread counts (default 1,2,4,8,16)"),
    curve_qd: Optional[str] = typer.Option(None, "--curve-qd", help="latency-vs-IOPS queue depths (default 1,2,4,8,16,32)"),
    xsr_hours: Optional[str] = typer.Option(None, "--xsr-hours", help="XSR access-group durations in hours, full drive (default 8,6,8)"),
    xsr_segment: Optional[str] = typer.Option(None, "--xsr-segment", help="XSR segment length (default: --round, /N on a 1/N twin)"),
    di_tc: Optional[str] = typer.Option(None, "--di-tc", help="CBW/DIRTH matrix thread counts (default 32,16,8,6,4,2,1)"),
    di_qd: Optional[str] = typer.Option(None, "--di-qd", help="CBW/DIRTH matrix queue depths (default 32,16,8,6,4,2,1)"),
    di_pc_intervals: int = typer.Option(30, "--di-pc-intervals", help="CBW/DIRTH: intervals per preconditioning round (PTS: 30)"),
    di_prewrite: str = typer.Option("5m", "--di-prewrite", help="CBW/DIRTH: pre-write before each matrix round (full drive)"),
    di_rth_prewrite: str = typer.Option("60m", "--di-rth-prewrite", help="CBW/DIRTH: pre-write before each histogram (full drive)"),
    di_rth: str = typer.Option("10m", "--di-rth", help="CBW/DIRTH: measured run of each response-time histogram"),
    di_art_limit: str = typer.Option("5ms", "--di-art-limit", help="CBW/DIRTH: the max IOPS point's mean response-time limit"),
    dirth_bs: str = typer.Option("4k", "--dirth-bs", help="DIRTH: the random block size"),
    dirth_mix: int = typer.Option(65, "--dirth-mix", help="DIRTH: the matrix's read percentage"),
    purge: str = typer.Option("auto", "--purge", help="auto, nvme-format, trim or none (docs/pts.md, Purge)"),
    namespace: Optional[int] = typer.Option(None, "--namespace", min=1, max=U32, help="twin: the namespace under test (default 1)"),
    yes_destroy_data: bool = typer.Option(
        False, "--yes-destroy-data", help="real targets: allow writing (every test purges and overwrites the device)"
    ),
    seed: int = Seed(0, "twin: seed of the fio runs' random streams (randrepeat=0)"),
    force: bool = typer.Option(False, "--force", help="replace a previous report in --report"),
    converge: bool = typer.Option(
        True,
        "--converge/--no-converge",
        help="twin: time each round until its figures converge, the rest in fast-forward (docs/pts.md, Converging rounds)",
    ),
    jobs: int = typer.Option(
        1, "--jobs", "-j", help="twin: run this many tests at once, each on an in-memory copy of the image (the image stays unchanged)"
    ),
    render: bool = typer.Option(True, "--render/--no-render", help="write index.html at the end (needs the report module)"),
    quiet: bool = typer.Option(False, "--quiet/--no-quiet", "-q", help="no progress display"),
    fmt: str = typer.Option("normal", "-o", "--output-format", help="normal or json"),
) -> None:
    """Run SNIA PTS tests on TARGET and write the report folder (docs/pts.md)."""
    from ..pts import runner

    check_fmt(fmt)
    settings: dict[str, Any] = {
        "min_rounds": min_rounds,
        "max_rounds": max_rounds,
        "wsat_fills": wsat_fills,
        "wsat_max_time_s": parse_duration("--wsat-max-time", wsat_max_time),
        "wsat_stop_steady": wsat_stop_steady,
        "wsat_min_fills": wsat_min_fills,
        "hir_reps": hir_reps,
        "hir_pre_fills": hir_pre_fills,
        "di_pc_intervals": di_pc_intervals,
        "di_prewrite_s": parse_duration("--di-prewrite", di_prewrite),
        "di_rth_prewrite_s": parse_duration("--di-rth-prewrite", di_rth_prewrite),
        "di_rth_s": parse_duration("--di-rth", di_rth),
        "di_art_limit_us": parse_duration("--di-art-limit", di_art_limit) * 1e6,
        "dirth_bs": _size("--dirth-bs", dirth_bs),
        "dirth_mix": dirth_mix,
        "purge": purge,
        "seed": seed,
        "converge": converge,
    }
    if wsat_segment is not None:
        settings["wsat_segment_s"] = parse_duration("--wsat-segment", wsat_segment)
    if xsr_segment is not None:
        settings["xsr_segment_s"] = parse_duration("--xsr-segment", xsr_segment)
    if xsr_hours is not None:
        try:
            settings["xsr_hours"] = tuple(plain_float(h) for h in xsr_hours.split(","))
        except ValueError:
            fail(f"--xsr-hours '{xsr_hours}': three durations in hours, e.g. 8,6,8")
    for key, val in (
        ("iops_bs", _sizes("--iops-bs", iops_bs)),
        ("tp_bs", _sizes("--tp-bs", tp_bs)),
        ("lat_bs", _sizes("--lat-bs", lat_bs)),
        ("iops_mixes", _ints("--iops-mixes", iops_mixes, "read percentages")),
        ("lat_mixes", _ints("--lat-mixes", lat_mixes, "read percentages")),
        ("curve_jobs", _ints("--curve-jobs", curve_jobs, "thread counts")),
        ("curve_qd", _ints("--curve-qd", curve_qd, "queue depths")),
        ("di_tc", _ints("--di-tc", di_tc, "thread counts")),
        ("di_qd", _ints("--di-qd", di_qd, "queue depths")),
        ("hir_waits_s", _floats("--hir-waits", hir_waits, "wait states")),
    ):
        if val is not None:
            settings[key] = val
    if tc_qd:
        merged = dict(runner.Settings().tc_qd)
        merged.update(_tc_qd(tc_qd))
        settings["tc_qd"] = merged
    round_s = parse_duration("--round", round_)
    interrupt_note(f"the report folder {report} keeps the rounds done so far (pts.json: interrupted)")
    try:
        with _progress(quiet or fmt == "json") as events:
            t0 = time.perf_counter()
            res = runner.run(
                target,
                tests,
                report,
                round_s,
                force=force,
                namespace=namespace,
                allow_destroy=yes_destroy_data,
                events=events,
                render=render,
                jobs=jobs,
                **settings,
            )
    except PtsError as e:
        fail(str(e))
    wall = time.perf_counter() - t0
    if fmt == "json":
        emit_json(res.to_json())
    else:
        _summary(res, wall)
    failed = [t for t, s in res.status.items() if s == "failed"]
    if failed:
        fail(*[f"{t}: {res.results[t].get('message', 'failed')}" for t in failed])


def _summary(res: Any, wall: float) -> None:
    typer.echo(f"report: {res.folder}" + (f" ({res.folder / 'index.html'})" if (res.folder / "index.html").is_file() else ""))
    for test, status in res.status.items():
        r = res.results.get(test) or {}
        typer.echo(
            f"  {test:<6} {status:<11} {r.get('message', '')}  [wall {r.get('wall_s', 0):.1f} s, stimulus {r.get('sim_s', 0):.1f} s]"
        )
    typer.echo(f"({wall:.1f} s wall)")


@contextmanager
def _progress(quiet: bool) -> Iterator[Any]:
    """Events for the runner: a rich display on a terminal, one line per test otherwise."""
    from ..pts.runner import Events

    if quiet:
        yield Events()
        return
    if not sys.stderr.isatty():
        yield _LineEvents()
        return
    from .progress import shown

    with shown() as display:
        yield _RichEvents(display)


class _LineEvents:
    def test_started(self, test: str, title: str, plan: str) -> None:
        say(f"ssdtwin pts: {test}: {title}: {plan}")

    def step(self, test: str, what: str, frac: Optional[float], status: str) -> None:
        pass

    def test_done(self, test: str, status: str, message: str) -> None:
        say(f"ssdtwin pts: {test}: {status}: {message}")


class _RichEvents:
    """Each test a line of the shared progress display (commands/progress.py): the test and its
    step, the fraction of its rounds done, its status."""

    def __init__(self, display: Any) -> None:
        self.d = display
        self.tasks: dict[str, Any] = {}

    def test_started(self, test: str, title: str, plan: str) -> None:
        self.tasks[test] = self.d.task(f"{test:<5} {plan}", total=1000)

    def step(self, test: str, what: str, frac: Optional[float], status: str) -> None:
        task = self.tasks.get(test)
        if task is None:
            return
        kw: dict[str, Any] = {"description": f"{test:<5} {what}", "detail": status}
        if frac is not None:
            kw["completed"] = int(frac * 1000)
        self.d.update(task, **kw)

    def test_done(self, test: str, status: str, message: str) -> None:
        task = self.tasks.get(test)
        if task is not None:
            self.d.update(task, completed=1000, description=f"{test:<5} {message}", detail=status)


@pts.command("compare")
def compare_cmd(
    a: Path = typer.Argument(..., metavar="A", help="a report folder (ssdtwin pts --report)"),
    b: Path = typer.Argument(..., metavar="B", help="another report folder"),
    report: Path = typer.Option(..., "--report", help="folder for the side-by-side report"),
    force: bool = typer.Option(False, "--force", help="replace a previous comparison that is not empty"),
) -> None:
    """Set two PTS reports side by side, figure by figure (docs/pts-report.md, Comparing)."""
    from ..pts import report as rep
    from ..pts.folder import check_writable, manifest_problem
    from ..pts.runner import read_manifest

    for p in (a, b):
        if read_manifest(p) is None:
            fail(f"{p}: not an ssdtwin PTS report ({manifest_problem(p)})")
    if report.exists() and not report.is_dir():
        fail(f"--report {report}: exists and is not a directory")
    if report.is_dir() and any(report.iterdir()) and not force:
        fail(f"--report {report}: exists and is not empty; pass --force to replace a previous comparison")
    try:
        check_writable(report)
        out = rep.compare(a, b, report)
    except PtsError as e:
        fail(str(e))
    typer.echo(f"comparison: {out}")


@pts.command("report")
def report_cmd(
    folder: Path = typer.Argument(..., metavar="DIR", help="a report folder (ssdtwin pts --report)"),
    pdf: bool = typer.Option(False, "--pdf", help="also print report.pdf with headless Chromium"),
) -> None:
    """Render a report folder's index.html again (after an interrupted run, or to add a PDF)."""
    from ..pts import report as rep
    from ..pts.folder import manifest_problem
    from ..pts.runner import read_manifest

    if read_manifest(folder) is None:
        fail(f"{folder}: not an ssdtwin PTS report ({manifest_problem(folder)})")
    try:
        out = rep.render(folder, pdf=pdf)
    except PtsError as e:
        fail(str(e))
    typer.echo(f"report: {out}")
    if pdf:
        typer.echo(f"pdf: {folder / 'report.pdf'}")
