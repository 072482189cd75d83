"""``ssdtwin replay DRIVE TRACE``: replay a production block trace on a drive image
(docs/traces.md, docs/cli.md)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from .common import U32, U64, OutputFmt, check_fmt, fail, opened, say


@contextmanager
def _progress(enabled: bool) -> Iterator[tuple[Optional[Callable[[int], None]], Optional[Callable[[int, int], None]]]]:
    """Two hooks on one rich bar on stderr: the check's I/Os read, then the replay's I/Os
    done of the total, with percent and ETA."""
    if not enabled:
        yield None, None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TimeRemainingColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as p:
        task = p.add_task("reading the trace", total=None)

        def read(ios: int) -> None:
            p.update(task, completed=ios)

        def replayed(done: int, total: int) -> None:
            p.update(task, description="replaying", completed=done, total=total)

        yield read, replayed


def replay_cmd(
    path: Path = typer.Argument(..., metavar="DRIVE", help="drive image"),
    trace: Path = typer.Argument(..., metavar="TRACE", help="the trace file"),
    trace_format: str = typer.Option("auto", "--format", help="blktrace, msr, alibaba, tencent, fio-iolog, or auto (sniffed)"),
    namespace: int = typer.Option(1, "--namespace", min=1, max=U32, help="the namespace the trace lands on"),
    time_scale: float = typer.Option(1.0, "--time-scale", help="the trace's gaps times X (0.5: twice its I/O rate; 0: no waits)"),
    max_ios: Optional[int] = typer.Option(None, "--max-ios", min=1, max=U64, help="replay the trace's first N I/Os"),
    wrap: bool = typer.Option(False, "--wrap", help="fold offsets past the namespace's end (modulo its size)"),
    fit: bool = typer.Option(False, "--fit", help="scale the trace's offsets onto the namespace"),
    skip_bad: bool = typer.Option(False, "--skip-bad", help="skip lines that cannot be read (counted) instead of refusing the trace"),
    iodepth: Optional[int] = typer.Option(None, "--iodepth", help="I/Os in flight at most (default: a blktrace's probed depth, else 32)"),
    volume: Optional[str] = typer.Option(
        None, "--volume", help="CSV traces: this volume's lines only (MSR Hostname_DiskNumber, Alibaba device_id, Tencent VolumeID)"
    ),
    scratch: bool = typer.Option(False, "--scratch/--no-scratch", help="run without changing the image"),
    idle_gc: bool = typer.Option(True, "--idle-gc/--no-idle-gc", help="background GC in the trace's idle gaps"),
    quiet: bool = typer.Option(False, "--quiet/--no-quiet", "-q", help="no progress bar"),
    fmt: str = OutputFmt,
) -> None:
    """Replay a block trace (blktrace, MSR Cambridge, Alibaba, Tencent CBS, fio iolog) on a drive, in simulated time.

    Prints fio's report (-o json: fio's JSON with a "replay" object: the trace's totals, the
    drive's WAF and counters). The image changes as a real drive would (--scratch: not)."""
    from .. import replay as rp

    check_fmt(fmt)
    if wrap and fit:
        fail("--wrap and --fit: choose one way to place offsets past the namespace's end")
    opts = rp.Options(
        format=trace_format,
        namespace=namespace,
        time_scale=time_scale,
        max_ios=max_ios,
        beyond="wrap" if wrap else "fit" if fit else "refuse",
        skip_bad=skip_bad,
        iodepth=iodepth,
        volume=volume,
        idle_gc=idle_gc,
    )
    try:
        rp.check(opts)
    except ValueError as e:
        fail(str(e))
    if not trace.exists():
        fail(f"{trace}: no such trace file")
    if not trace.is_file():
        fail(f"{trace}: not a regular file")
    if trace.stat().st_size == 0:  # the format sniffer called it "binary data"
        fail(f"{trace}: an empty file: no I/O to replay")
    t0 = time.perf_counter()
    with opened(path, writable=not scratch) as d:
        try:
            with _progress(sys.stderr.isatty() and not quiet) as (read, replayed):
                summary = rp.scan(d, trace, opts, read)
                r = rp.replay(d, trace, opts, replayed, summary)
        except ValueError as e:
            fail(str(e))
    wall = time.perf_counter() - t0
    for note in r.notes:
        say(f"ssdtwin replay: {note}")
    _print(r, fmt)
    virt = (r.result["elapsed_ns"] + r.result.get("start_ns", 0)) / 1e9
    ios = sum(r.result[d]["total_ios"] for d in rp.DDIRS)
    say(f"ssdtwin replay: {ios} I/Os, {virt:.3f} s of drive time simulated in {wall:.2f} s")


def _print(r: Any, fmt: str) -> None:
    from .. import replay as rp
    from ..fio import output as fio_output

    extra = rp.report(r)
    if fmt == "json":
        doc = json.loads(fio_output.json_text(r.run, [r.result]))
        doc["replay"] = extra
        typer.echo(json.dumps(doc, indent=2))
        return
    typer.echo(fio_output.normal_text(r.run, [r.result]).rstrip("\n"))
    s, dr = r.summary, extra["drive"]
    from .. import waf as wafm

    waf = wafm.text(r.waf)
    by_dir = ", ".join(f"{d} {n}" for d, n in zip(rp.DDIRS, s["ios"]) if n)
    # A trace of waits alone (replayed, as fio does) has no I/O to break down.
    held = f"({by_dir})" if by_dir else f"(its {s['waits']} wait line(s) only)"
    typer.echo(
        f"\nreplay: {r.trace} ({s['format']}): {sum(s['ios'])} I/Os in the trace {held}, {len(s['volumes'])} volume(s), "
        f"iodepth {extra['iodepth']}"
    )
    typer.echo(f"drive: host wrote {dr['host_write_bytes']} bytes, NAND {dr['nand_write_bytes']} bytes, {waf}")
