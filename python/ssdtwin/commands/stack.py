"""``ssdtwin stack``: make a stack image (a write-shaping tier over a drive image) or show
its counters (docs/host.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from .. import stack as stacklib
from .. import waf as wafm
from .common import U32, OutputFmt, check_fmt, emit_json, fail


def stack_cmd(
    path: Path = typer.Argument(..., metavar="DIR", help="stack image directory"),
    drive: Optional[Path] = typer.Option(None, "--drive", help="drive image under the stack (to create it)"),
    shaping: Optional[str] = typer.Option(
        None, "--shaping", help="fast media and tier size, MEDIA:SIZE (pmem:64GiB, optane-ssd:400GB, dram:64MiB)"
    ),
    policy_given: Optional[str] = typer.Option(None, "--policy", help="iu-fill (DAOS-like, the default) or log (CSAL/SPDK-FTL-like)"),
    namespace_given: Optional[int] = typer.Option(
        None, "--namespace", min=1, max=U32, help="the drive's namespace the stack sits on (default 1)"
    ),
    high: Optional[int] = typer.Option(
        None, "--high-watermark", help="percent full at which the tier starts evicting/compacting (default 80)"
    ),
    low: Optional[int] = typer.Option(None, "--low-watermark", help="percent full at which it stops (default 60)"),
    concurrency: Optional[int] = typer.Option(None, "--destage-concurrency", help="destage writes in flight (default 8)"),
    stripe: Optional[str] = typer.Option(None, "--stripe", help="log: one destage write (default 1MiB, a multiple of the IU)"),
    band: Optional[str] = typer.Option(None, "--band", help="log: the host GC unit (default 1GiB, smaller on small drives)"),
    host_op: Optional[int] = typer.Option(None, "--host-op", help="log: percent of the drive area kept spare for host GC (default 20)"),
    area: Optional[str] = typer.Option(None, "--area", help="log: the host-mapped area from the namespace's start (default: all of it)"),
    show: bool = typer.Option(False, "--show", help="print the stack's counters instead of creating it"),
    fmt: str = OutputFmt,
) -> None:
    """Make a stack image over a drive image, or show its counters (--show)."""
    from .. import _core

    check_fmt(fmt)
    try:
        if show:
            # A stack is shown as it was made: creation options beside --show were ignored.
            given = (
                ("--drive", drive),
                ("--shaping", shaping),
                ("--policy", policy_given),
                ("--namespace", namespace_given),
                ("--high-watermark", high),
                ("--low-watermark", low),
                ("--destage-concurrency", concurrency),
                ("--stripe", stripe),
                ("--band", band),
                ("--host-op", host_op),
                ("--area", area),
            )
            making = [n for n, v in given if v is not None]
            if making:
                fail(f"{', '.join(making)}: not with --show (they make a stack; --show reads {path} as it was made)")
            config, state = stacklib.load(path)
            show_counters(stacklib.counters(config, state), fmt)
            return
        if drive is None or shaping is None:
            fail("--drive and --shaping are needed to create a stack (or --show to read one)")
        policy = "iu-fill" if policy_given is None else policy_given
        namespace = 1 if namespace_given is None else namespace_given
        # The log policy's own options: with iu-fill they were stored and silently unused.
        log_only = [n for n, v in (("--stripe", stripe), ("--band", band), ("--host-op", host_op), ("--area", area)) if v is not None]
        if log_only and policy != "log":
            fail(f"{', '.join(log_only)}: only with --policy log (the {policy} policy has no host log)")
        # Negative or huge values failed in the binding's conversion: "tier parameters:
        # OverflowError: out of range integral type conversion attempted", naming no option.
        for flag, v, allowed in (
            ("--high-watermark", high, "1 to 100 (percent of the tier)"),
            ("--low-watermark", low, "0 to the high watermark - 1 (percent of the tier)"),
            ("--destage-concurrency", concurrency, "1 to 1024"),
            ("--host-op", host_op, "5 to 50 (percent of the drive area)"),
        ):
            if v is not None and not 0 <= v <= 1024:
                fail(f"{flag} {v}: {allowed}")
        sizes = {}
        for name, text in (("--stripe", stripe), ("--band", band), ("--area", area)):
            if text is not None:
                try:
                    sizes[name] = _core.parse_size(text)
                except ValueError as e:
                    fail(f"{name} {text}: {e}")
        if sizes.get("--area") == 0:  # 0 is how stack.toml says "all of it"; given, it is a mistake
            fail(f"--area {area}: above 0 (leave --area out for the whole namespace)")
        # The tier's problems name the flags typed (the core names its fields by their
        # stack.toml keys: "low_watermark_pct 60: 0 to high_watermark_pct - 1"); a value
        # left to its default is named as such.
        flags: tuple[tuple[str, str, object], ...] = (
            ("high_watermark_pct", "--high-watermark", high),
            ("low_watermark_pct", "--low-watermark", low),
            ("destage_concurrency", "--destage-concurrency", concurrency),
            ("stripe_bytes", "--stripe", stripe),
            ("band_bytes", "--band", band),
            ("host_op_pct", "--host-op", host_op),
            ("area_bytes", "--area", area),
        )
        names = {key: flag if v is not None else f"the default {flag}" for key, flag, v in flags}
        names.update({"capacity_bytes": "capacity", "iu_bytes": "the drive's IU", "drive_bytes": f"namespace {namespace}'s size"})
        created = stacklib.create(
            path,
            drive,
            shaping,
            policy,
            namespace=namespace,
            high_watermark_pct=high,
            low_watermark_pct=low,
            destage_concurrency=concurrency,
            stripe_bytes=sizes.get("--stripe"),
            band_bytes=sizes.get("--band"),
            host_op_pct=host_op,
            area_bytes=sizes.get("--area", 0),
            names=names,
        )
    except stacklib.StackError as e:
        fail(*[str(a) for a in e.args])
    if fmt == "json":
        emit_json(created)
    else:
        t = created["tier"]
        typer.echo(
            f"{path}: {created['policy']} tier of {t['capacity_bytes']:,} bytes on {created['media']} over {created['drive']} "
            f"(namespace {created['namespace']}, watermarks {t['high_watermark_pct']}/{t['low_watermark_pct']} %, "
            f"{t['destage_concurrency']} destages in flight)"
        )


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def show_counters(c: dict[str, Any], fmt: str) -> None:
    """The counters, one a line; the drive's WAF as ``ssdtwin waf`` prints one: what the
    stack's runs span, then the figure or why there is none (docs/models.md, "Measuring
    WAF")."""
    if fmt == "json":
        emit_json(c)
        return
    span = tuple(f"drive_waf_{k}" for k in wafm.KEYS)
    for k, v in c.items():
        if k not in span:
            typer.echo(f"{k:<26} {_fmt(v)}")
    m = wafm.from_keys(c, "drive_waf")
    if m is None:
        typer.echo(f"{'drive window':<26} not known (a stack image made before the drive's logs were kept)")
        typer.echo(f"{'drive WAF':<26} not measured")
        return
    typer.echo(f"{'drive window':<26} {wafm.amount(m)} (basis: timed, the stack's runs)")
    typer.echo(f"{'drive WAF':<26} {wafm.verdict_text(m)}")
