"""One progress display for every long run: percent done, what is counted and an ETA, on
stderr through rich, and only when stderr is a terminal (never on stdout, so ``-o json``
stays one JSON document; nothing at all when stderr is a pipe or a file).

The core reports a run's progress as ``(done, total, unit, now_ns)``
(crates/ssdtwin-core/src/progress.rs, through the binding's progress callbacks): ``done``
of ``total`` bytes (io_size × loops, a preconditioning amount), I/Os (number_ios, a
replayed trace's records), simulated ns (ramp_time + runtime) or millionths of each job
(jobs that end by different measures); ``total`` 0 when no end is known in advance.
:func:`run_progress` turns that into a line; :class:`Display` is the same display for
commands that count their own steps (pts rounds, sweep points).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable, Optional

#: A core run's progress callback: (done, total, unit, now_ns).
Callback = Callable[[int, int, str, int], None]


def si(n: float, unit: str) -> str:
    """1.07 GB, 4.19 PB: decimal prefixes, as nvme-cli and fio's ETA line print sizes."""
    for prefix in ("", "k", "M", "G", "T", "P", "E"):
        if abs(n) < 1000 or prefix == "E":
            return f"{n:.0f} {prefix}{unit}" if prefix == "" else f"{n:.2f} {prefix}{unit}"
        n /= 1000
    raise AssertionError("unreachable")


def seconds(ns: float) -> str:
    s = ns / 1e9
    if s < 3600:
        return f"{s:.3f} s" if s < 60 else f"{s:.1f} s"
    return f"{s / 3600:.2f} h" if s < 86400 else f"{s / 86400:.2f} days"


def detail(done: int, total: int, unit: str, now_ns: int) -> str:
    """What is counted: "1.07 GB of 4.19 PB", "12.345 s of 60.0 s simulated", … and the
    simulated time of a timed run."""
    sim = f" · simulated {seconds(now_ns)}" if now_ns else ""
    if total <= 0:
        return f"simulated {seconds(now_ns)}" if now_ns else ""
    if unit == "bytes":
        return f"{si(done, 'B')} of {si(total, 'B')}{sim}"
    if unit == "ios":
        return f"{done:,} of {total:,} I/Os{sim}"
    if unit == "ns":
        return f"{seconds(done)} of {seconds(total)} of job time{sim}"
    return sim.removeprefix(" · ")


def _percent(task: Any) -> str:
    if not task.total:
        return "    ?  "
    p = 100.0 * task.completed / task.total
    return f"{p:6.2f}%" if p < 100 else " 100.0%"


class Display:
    """A rich progress display on stderr: one line per task, with the bar, the percentage,
    what is counted, the time elapsed and the ETA (rich's estimate from the recent rate)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
        from rich.text import Text

        class Percent(ProgressColumn):  # two decimals: a 4 PB job moves by hundredths of a percent
            def render(self, task: Any) -> Text:
                return Text(_percent(task))

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=24),
            Percent(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
            redirect_stdout=False,  # what the command prints on stdout stays on stdout
        )

    def task(self, label: str, total: Optional[float] = None, completed: int = 0, detail: str = "") -> Any:
        return self.progress.add_task(label, total=total or None, completed=completed, detail=detail)

    def update(self, task: Any, **kw: Any) -> None:
        if "total" in kw:
            kw["total"] = kw["total"] or None
        self.progress.update(task, **kw)


def on_terminal(quiet: bool = False) -> bool:
    """Whether a progress display may be drawn: stderr is a terminal and not ``-q``."""
    return not quiet and sys.stderr.isatty()


@contextmanager
def shown(quiet: bool = False) -> Iterator[Optional[Display]]:
    """A live :class:`Display` while the block runs, or None when it may not be drawn."""
    if not on_terminal(quiet):
        yield None
        return
    d = Display()
    with d.progress:
        yield d


def callback(display: Display, label: str) -> Callback:
    """A core run's progress callback drawing one task of `display`."""
    task = display.task(label)

    def cb(done: int, total: int, unit: str, now_ns: int) -> None:
        display.update(task, completed=done, total=total, detail=detail(done, total, unit, now_ns))

    return cb


class Steps:
    """`n` core runs of one kind (a sweep's points) as one task: each run's progress is
    its share of the task; :meth:`next` after each."""

    def __init__(self, display: Display, label: str, n: int, what: str = "point") -> None:
        self.display, self.n, self.what, self.i = display, max(1, n), what, 0
        self.task = display.task(label, total=self.n * 1_000_000, detail=f"{what} 1 of {self.n}")

    def callback(self, done: int, total: int, unit: str, now_ns: int) -> None:
        frac = min(1.0, done / total) if total > 0 else 0.0
        self.display.update(self.task, completed=int((self.i + frac) * 1_000_000))

    def next(self) -> None:
        self.i += 1
        self.display.update(self.task, completed=self.i * 1_000_000, detail=f"{self.what} {min(self.i + 1, self.n)} of {self.n}")


@contextmanager
def run_progress(label: str, quiet: bool = False) -> Iterator[Optional[Callback]]:
    """The progress callback for one long core run (`Drive.run_fio`, `Drive.precondition`,
    `cluster_run`, a trace replay): a line on stderr while the block runs, or None when
    stderr is not a terminal (the run then reports to no one; Ctrl-C still stops it)."""
    with shown(quiet) as d:
        yield None if d is None else callback(d, label)
