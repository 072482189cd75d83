"""Replay a production block trace on a drive (``ssdtwin replay``, docs/traces.md).

The core reads the trace (crates/ssdtwin-core/src/workload/trace/): blktrace binaries as
fio 3.33 reads them, fio's iologs, and the public CSVs of MSR Cambridge, Alibaba Cloud and
Tencent CBS. A first pass checks every line and sums the trace up before the drive is
touched; the replay then streams the file through the fio engine in bounded memory, paced
by the trace's timestamps as fio paces an iolog, and reports in fio's JSON shape with the
drive's write amplification and counters added. Python never sees an I/O.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional, TypedDict, cast

from . import _core
from . import waf as wafm
from .core_types import SmartLog, VendorLog, WafMeasurement
from .drive import Drive, Namespace
from .fio.contract import Beyond, CloneOut, JobSpec, TracePlan, TraceSummary
from .fio.facts import DDIR_NAMES

__all__ = ["FORMATS", "DEFAULT_IODEPTH", "Options", "Replayed", "scan", "replay", "report"]

# What --format takes; "auto" sniffs the file's first bytes.
FORMATS = ("auto", "blktrace", "msr", "alibaba", "tencent", "fio-iolog")
# Queue depth of a replay whose trace records none (only blktrace's does, as fio probes it):
# the I/Os a host keeps in flight at most, when the drive falls behind the trace.
DEFAULT_IODEPTH = 32
DDIRS = DDIR_NAMES  # the core's order of directions
# What an I/O past the namespace's end becomes.
BEYOND = ("refuse", "wrap", "fit")

Progress = Callable[[int, int], None]


@dataclass
class Options:
    """How to replay: the trace's format, the namespace it lands on, its pacing and limits."""

    format: str = "auto"
    namespace: int = 1
    # The trace's gaps times this (0.5: twice the trace's I/O rate; 0: no waits at all).
    time_scale: float = 1.0
    max_ios: Optional[int] = None
    beyond: str = "refuse"
    skip_bad: bool = False
    iodepth: Optional[int] = None
    volume: Optional[str] = None
    idle_gc: bool = True


class ReplayDrive(TypedDict):
    """The drive over a replay: its writes, its WAF measurement (waf.py) and its logs after."""

    host_write_bytes: int
    nand_write_bytes: int
    waf: Optional[float]
    waf_window_raw: Optional[float]
    waf_verdict: str
    waf_gc_cycles: float
    waf_namespace_passes: float
    smart_log: SmartLog
    vendor_log: VendorLog


class ReplayReport(TypedDict):
    """``-o json``'s ``replay`` object (docs/cli.md): the trace as read, by direction where
    it counts I/Os or bytes, and the drive over the replay."""

    trace: str
    format: str
    trace_ios: dict[str, int]
    trace_bytes: dict[str, int]
    trace_syncs: int
    trace_span_ns: int
    trace_end_bytes: int
    volumes: int
    skipped_lines: int
    realigned_ios: int
    moved_ios: int
    iodepth: int
    drive: ReplayDrive


@dataclass
class Replayed:
    """A replay's outcome: the fio job it ran as, the engine's result, the trace's summary,
    and the drive's logs before and after."""

    run: Any
    result: CloneOut
    summary: TraceSummary
    vendor_before: VendorLog
    vendor_after: VendorLog
    smart_after: SmartLog
    trace: str
    notes: list[str] = field(default_factory=list)
    namespace_bytes: int = 0  # of the namespace replayed onto

    @property
    def waf(self) -> WafMeasurement:
        """The drive's WAF measurement over the replay (waf.py)."""
        return wafm.measure(self.vendor_before, self.vendor_after, "timed", self.namespace_bytes)


def _plan(opts: Options, ns: Namespace, trace_end: int = 0, format: Optional[str] = None) -> TracePlan:
    return {
        "format": format or opts.format,
        "fio": {"time_scale": opts.time_scale, "no_stall": opts.time_scale == 0},
        "volume": opts.volume,
        "target": {"bytes": ns.bytes, "lba": ns.lba_bytes, "beyond": cast(Beyond, opts.beyond), "widen": True},  # check()ed
        "limits": {"max_ios": (1 << 64) - 1 if opts.max_ios is None else opts.max_ios, "skip_bad": opts.skip_bad},
        "trace_end": trace_end,
    }


# Each option's type (None: may be left unset): a value of another type went on to a check
# that misread it (namespace "1": "--namespace 1: not an attached namespace (attached: 1)";
# iodepth True: "iodepth=True: not a size") or to a bare TypeError naming no option.
OPTION_TYPES: dict[str, tuple[type, bool, str]] = {
    "format": (str, False, "a string"),
    "namespace": (int, False, "an int"),
    "time_scale": (float, False, "a number"),
    "max_ios": (int, True, "an int or None"),
    "beyond": (str, False, "a string"),
    "skip_bad": (bool, False, "True or False"),
    "iodepth": (int, True, "an int or None"),
    "volume": (str, True, "a string or None"),
    "idle_gc": (bool, False, "True or False"),
}


def check(opts: Options) -> None:
    """The options' own problems (TypeError or ValueError, one line)."""
    for name, (kind, optional, what) in OPTION_TYPES.items():
        v = getattr(opts, name)
        # bool is an int, and an int is a number here; numpy's ints and floats count as theirs.
        kinds = (numbers.Real,) if kind is float else (numbers.Integral,) if kind is int else (kind,)
        ok = isinstance(v, kinds) and (kind is bool or not isinstance(v, bool))
        if not (ok or (optional and v is None)):
            raise TypeError(f"Options.{name} {v!r}: must be {what}, not {type(v).__name__}")
    if opts.format not in FORMATS:
        raise ValueError(f"--format {opts.format}: one of {', '.join(FORMATS)}")
    if opts.beyond not in BEYOND:
        raise ValueError(f"offsets past the namespace: one of {', '.join(BEYOND)}")
    if not (opts.time_scale >= 0 and opts.time_scale < float("inf")):
        raise ValueError(f"--time-scale {opts.time_scale}: a factor of 0 (no waits) or more")
    if opts.max_ios is not None and not 1 <= opts.max_ios < 1 << 64:
        raise ValueError(f"--max-ios {opts.max_ios}: from 1 to {(1 << 64) - 1}")
    if opts.iodepth is not None and not 1 <= opts.iodepth <= 65536:
        raise ValueError(f"--iodepth {opts.iodepth}: from 1 to 65536 (an NVMe queue's depth)")


def _namespace(drive: Drive, nsid: int) -> Namespace:
    nss = {n.nsid: n for n in drive.namespaces() if n.attached}
    if nsid not in nss:
        raise ValueError(f"--namespace {nsid}: not an attached namespace (attached: {', '.join(map(str, nss)) or 'none'})")
    return nss[nsid]


def scan(drive: Drive, trace: os.PathLike[str] | str, opts: Options, progress: Optional[Callable[[int], None]] = None) -> TraceSummary:
    """Check every line of ``trace`` for namespace ``opts.namespace`` and sum it up (the
    core's ``Summary``). A bad line, an I/O past the namespace (with ``beyond="refuse"``) or
    a trace of no I/O raises ``_core.TraceError`` naming the file and line."""
    check(opts)
    ns = _namespace(drive, opts.namespace)
    summary = _core.trace_scan(os.fspath(trace), str(trace), _plan(opts, ns), progress)
    if not sum(summary["ios"]) and not summary["waits"]:
        # A version 2 iolog of waits alone is replayed, as fio replays it: its waits.
        if opts.volume is not None:
            # Name the volumes there are: a --volume the trace does not hold is the usual cause.
            everything = dataclasses.replace(opts, volume=None, max_ios=None, format=summary["format"])
            names = _core.trace_scan(os.fspath(trace), str(trace), _plan(everything, ns), None)["volumes"]
            shown = ", ".join(names[:8]) + (f", … ({len(names)} in all)" if len(names) > 8 else "")
            raise _core.TraceError(f"{trace}: --volume {opts.volume}: no I/O of that volume in the trace (its volumes: {shown or 'none'})")
        skipped = summary["skipped_lines"]
        why = f": --skip-bad skipped its {skipped} bad line(s), the first: {trace}{summary['first_skipped']}" if skipped else ""
        raise _core.TraceError(f"{trace}: no I/O to replay ({summary['format']} trace){why}")
    from .fio.limits import MAX_RUN_NS

    if summary["span_ns"] > MAX_RUN_NS:
        days = MAX_RUN_NS / 86_400e9
        raise ValueError(
            f"{trace}: --time-scale {opts.time_scale}: the trace's gaps add up to {'more than ' * (summary['span_ns'] >= (1 << 64) - 1)}"
            f"{summary['span_ns'] / 86_400e9:.4g} days of drive "
            f"time, past the {days:.0f} days a run may simulate (a smaller --time-scale, or 0 for no waits)"
        )
    if opts.beyond == "fit" and summary["end_bytes"] > ns.bytes:
        # The first pass places each I/O before it knows the trace's span, which --fit scales
        # by: count the I/Os moved and realigned where the replay will put them.
        placed = _core.trace_scan(os.fspath(trace), str(trace), _plan(opts, ns, summary["end_bytes"], summary["format"]), None)
        summary["realigned"], summary["moved"] = placed["realigned"], placed["moved"]
    return summary


def _job(opts: Options, ns: Namespace, summary: TraceSummary, drive: Drive) -> tuple[Any, JobSpec]:
    """The fio job the replay runs as (its depth, its namespace), resolved for the engine."""
    from .fio import parse_string

    depth = opts.iodepth or summary.get("depth") or DEFAULT_IODEPTH
    text = f"[replay]\nioengine=libaio\niodepth={depth}\nfilename=ns{ns.nsid}\nrw=randrw\n"
    run = parse_string(text, name="<replay>")
    nss = [n for n in drive.namespaces() if n.attached]
    (spec,) = run.to_engine(
        ns.bytes,
        ns.lba_bytes,
        namespace_sizes={n.nsid: n.bytes for n in nss},
        namespace_lba_bytes={n.nsid: n.lba_bytes for n in nss},
    )
    # A trace of waits alone has no direction; fio's job reads and writes then
    # (iolog.c read_iolog2), and the engine wants one.
    spec["directions"] = [d for d, n in zip(DDIRS, summary["ios"]) if n] or ["read", "write"]
    return run, spec


def replay(
    drive: Drive,
    trace: os.PathLike[str] | str,
    opts: Options,
    progress: Optional[Progress] = None,
    summary: Optional[TraceSummary] = None,
) -> Replayed:
    """Replay ``trace`` on ``drive`` (changed as a real drive changes; the caller commits).
    ``progress(done, total)`` gets the I/Os issued and the trace's I/O count now and then,
    and may raise to stop (Ctrl-C). ``summary`` is a ``scan`` of the same trace, if done."""
    if summary is None:
        summary = scan(drive, trace, opts)
    ns = _namespace(drive, opts.namespace)
    run, spec = _job(opts, ns, summary, drive)
    total = sum(summary["ios"])
    if opts.max_ios is not None:
        total = min(total, opts.max_ios)
    plan = _plan(opts, ns, trace_end=summary["end_bytes"], format=summary["format"])
    cb = None if progress is None else (lambda done, now_ns: progress(done, total))
    before = drive.vendor_log()
    result = drive.replay_trace(os.fspath(trace), str(trace), plan, spec, opts.namespace, opts.idle_gc, cb)
    notes = [f"warning: {n}" for n in summary["notes"]]
    if summary["skipped_lines"]:
        notes.append(f"skipped {summary['skipped_lines']} bad line(s), the first: {trace}{summary['first_skipped']}")
    if summary["realigned"]:
        notes.append(f"{summary['realigned']} I/O(s) grown to whole {ns.lba_bytes}-byte LBAs of namespace {ns.nsid}")
    if summary["moved"]:
        how = "folded onto" if opts.beyond == "wrap" else "scaled onto"
        notes.append(f"{summary['moved']} I/O(s) {how} namespace {ns.nsid} ({ns.bytes} bytes; the trace spans {summary['end_bytes']})")
    return Replayed(run, result, summary, before, drive.vendor_log(), drive.smart_log(), str(trace), notes, ns.bytes)


def report(r: Replayed) -> ReplayReport:
    """What ``-o json`` adds to fio's JSON under ``replay``: the trace as read, the drive's
    write amplification over the replay and its counters after it."""
    host = r.vendor_after["host_write_bytes"] - r.vendor_before["host_write_bytes"]
    nand = r.vendor_after["nand_write_bytes"] - r.vendor_before["nand_write_bytes"]
    m = r.waf
    s = r.summary
    return {
        "trace": r.trace,
        "format": s["format"],
        "trace_ios": dict(zip(DDIRS, s["ios"])),
        "trace_bytes": dict(zip(DDIRS, s["bytes"])),
        "trace_syncs": s["syncs"],
        "trace_span_ns": s["span_ns"],
        "trace_end_bytes": s["end_bytes"],
        "volumes": len(s["volumes"]),
        "skipped_lines": s["skipped_lines"],
        "realigned_ios": s["realigned"],
        "moved_ios": s["moved"],
        "iodepth": r.run.jobs[0].state["iodepth"],
        "drive": {
            "host_write_bytes": host,
            "nand_write_bytes": nand,
            # The drive's WAF only over a GC cycle or a namespace pass (docs/models.md,
            # "Measuring WAF"); the replay's ratio whatever it spans is waf_window_raw.
            "waf": m["waf"],
            "waf_window_raw": m["waf_window_raw"],
            "waf_verdict": m["verdict"],
            "waf_gc_cycles": m["gc_cycles"],
            "waf_namespace_passes": m["namespace_passes"],
            "smart_log": r.smart_after,
            "vendor_log": r.vendor_after,
        },
    }
