"""The ``ssdtwin`` command line.

Management verbs follow nvme-cli (``ssdtwin nvme create-ns DIR -s … -c … -b 512``) with a
drive image directory where nvme-cli takes a device. Every failure is one line on stderr
and a non-zero exit; a failed command never changes the image (changes are committed only
when a command succeeds).
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NotRequired, Optional, TypedDict

import typer
from typer.core import TyperCommand, TyperGroup

from .. import _core, nvmefmt
from .. import drive as drivemod
from .. import waf as wafm
from .._bounds import ArgumentRangeError
from ..core_types import WafMeasurement
from ..drive import Drive, parse_amount, parse_scale
from .common import (
    MAX_BENCH_SECONDS,
    MIN_BENCH_SECONDS,
    U32,
    U64,
    CliError,
    ImageDir,
    Interrupt,
    NvmeInt,
    OutputFmt,
    Seed,
    Terminated,
    check_fmt,
    check_maps_fit,
    check_output_file,
    drive_view,
    emit_json,
    fail,
    interrupt_note,
    note_stale_derivations,
    opened,
    read_spec,
    refuse_digit_separators,
    say,
    scale_arg,
    scale_rounding,
    sizes_arg,
    spec_error,
    write_output_file,
)
from .progress import run_progress

if TYPE_CHECKING:  # the fio package is imported by the commands that run jobs
    from ..fio.contract import CloneOut, ConvergeOut
    from ..fio.parser import Run


class _LazyGroup(TyperGroup):
    """A group whose sub-commands in ``LOADERS`` are built from their modules only when one
    is asked for (run, its help, the group's help, a completion): a start of ``ssdtwin``
    imports just the command it runs, not pts, cluster, serve, stack, sweep and nvme (each
    of the ~560 tests that start the CLI paid for all of them; docs/performance.md, "CI
    time"). Each sits in the group as a placeholder registered where the command was, so
    the help lists the commands in the same order."""

    LOADERS: dict[str, Callable[[], Any]] = {}

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        built: set[str] = self.__dict__.setdefault("_built", set())
        load = self.LOADERS.get(cmd_name)
        if load is not None and cmd_name not in built:
            self.commands[cmd_name] = _built(cmd_name, load())
            built.add(cmd_name)
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            refuse_digit_separators(command)
            name_by_command_path(command)
        return command


class CommandPath:
    """The command path (``ssdtwin cluster init``) of the deepest command whose context click
    has made in this run: the name that leads every error and interrupt line. Recorded by the
    contexts themselves, so each group and its sub-commands are named as click spells them,
    with no list of which commands have sub-commands (one named only nvme, bench and pts
    compare, so `cluster init` said "ssdtwin cluster")."""

    path = "ssdtwin"
    # No command's context made yet: nothing has run, so an interrupt is one while starting.
    started = False


_recording_contexts: dict[type, type] = {}


def name_by_command_path(command: Any) -> None:
    """Make `command` and every command below it record their command path in
    ``CommandPath`` when click makes their context (before their options are parsed).
    Idempotent; only these commands' own ``context_class`` changes."""
    if getattr(command, "_records_path", False):
        return
    base = command.context_class
    ctx_class = _recording_contexts.get(base)
    if ctx_class is None:

        class Recording(base):  # type: ignore[misc,valid-type]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                CommandPath.path = self.command_path
                CommandPath.started = True

        ctx_class = _recording_contexts[base] = Recording
    command.context_class = ctx_class
    command._records_path = True
    for sub in getattr(command, "commands", {}).values():
        name_by_command_path(sub)


def _placeholder() -> None:
    """Stands for a lazy command until _LazyGroup.get_command builds it; never runs."""


def _built(name: str, obj: Any) -> Any:
    """The click command typer makes of `obj` (a Typer or a command function) added under
    `name` to a group like ``app``: the same help, options and settings as if it had been
    added to ``app`` itself."""
    holder = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
    holder.callback()(_placeholder)
    if isinstance(obj, typer.Typer):
        holder.add_typer(obj, name=name)
    else:
        holder.command(name)(obj)
    return typer.main.get_command(holder).commands[name]  # type: ignore[attr-defined]


def _later(group: typer.Typer, name: str, load: Callable[[], Any]) -> None:
    """Register `name` in `group` (a Typer made with a _LazyGroup class) now, built from
    ``load()`` when first asked for."""
    cls = group.info.cls
    assert isinstance(cls, type) and issubclass(cls, _LazyGroup), name
    cls.LOADERS[name] = load
    group.command(name)(_placeholder)


def _nvme() -> typer.Typer:
    from .nvme import nvme

    return nvme


def _pts() -> typer.Typer:
    from .pts import pts

    return pts


def _cluster() -> typer.Typer:
    from .cluster import cluster

    return cluster


def _serve() -> Callable[..., None]:
    from .serve import serve_cmd

    return serve_cmd


def _bench_nbd() -> Callable[..., None]:
    from .serve import bench_nbd_cmd

    return bench_nbd_cmd


def _stack() -> Callable[..., None]:
    from .stack import stack_cmd

    return stack_cmd


def _sweep() -> Callable[..., None]:
    from .sweep import sweep_cmd

    return sweep_cmd


def _replay() -> Callable[..., None]:
    from .replay import replay_cmd

    return replay_cmd


def _advise() -> Callable[..., None]:
    from .sweep import advise_cmd

    return advise_cmd


def _calibrate() -> Callable[..., None]:
    from .calibrate import calibrate_cmd

    return calibrate_cmd


def _validate() -> Callable[..., None]:
    from .validate import validate_cmd

    return validate_cmd


class _TopGroup(_LazyGroup):
    LOADERS: dict[str, Callable[[], Any]] = {}


class _BenchGroup(_LazyGroup):
    LOADERS: dict[str, Callable[[], Any]] = {}


# Plain (click) help, not typer's rich panels: they label every flag `<bool>` instead of
# showing `--flag / --no-flag`, and a plain page is what `grep` and the README test read.
app = typer.Typer(
    cls=_TopGroup,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="ssdtwin: a calibrated digital twin of NVMe SSDs. See docs/cli.md.",
)
bench = typer.Typer(
    cls=_BenchGroup, no_args_is_help=True, rich_markup_mode=None, help="Benchmarks that print figures (docs/performance.md)."
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"ssdtwin {_core.__version__}")
        raise typer.Exit()


@app.callback()
def _top(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="print the version (ssdtwin X.Y.Z) and exit"
    ),
) -> None:
    pass


# --------------------------------------------------------------------------- top level


@app.command()
def models(
    name: Optional[str] = typer.Argument(None, metavar="NAME", help="show one preset in full, every number with its source"),
    fmt: str = OutputFmt,
) -> None:
    """List the built-in drive presets (capacities, NAND, IU) or show one with sources."""
    check_fmt(fmt)
    if name is not None:
        spec = _core.preset(name)
        if fmt == "json":
            emit_json(spec)
        else:
            text = dict(_core.presets())[name]
            typer.echo(text.rstrip())
        return
    from ..drive import models_frame

    df = models_frame()
    if fmt == "json":
        emit_json(df.to_dict(orient="records"))
        return
    typer.echo(f"{'preset':<28} {'drive':<32} {'user':>10} {'raw NAND':>10} {'OP':>6} {'IU':>7} {'cell':>5} {'dies':>5} {'DWPD':>5}")
    for r in df.to_dict(orient="records"):
        op = r["raw_nand_bytes"] / r["tnvmcap_bytes"] - 1
        cell = {1: "SLC", 2: "MLC", 3: "TLC", 4: "QLC"}[r["bits_per_cell"]]
        typer.echo(
            f"{r['name']:<28} {r['model']:<32} {nvmefmt.si_bytes(r['tnvmcap_bytes']):>10} "
            f"{nvmefmt.si_bytes(r['raw_nand_bytes']):>10} {op:>6.1%} {r['iu_bytes'] // 1024:>5}Ki {cell:>5} {r['dies']:>5} {r['dwpd']:>5g}"
        )
    typer.echo("\nOP = raw NAND / user capacity - 1. Sources: `ssdtwin models NAME`.")


@app.command()
def create(
    path: Path = typer.Argument(..., metavar="DIR", help="new image directory"),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="preset name (ssdtwin models)"),
    spec: Optional[Path] = typer.Option(
        None, "--spec", help="a drive spec TOML in place of --model: a preset's text (`ssdtwin models NAME > my.toml`), edited"
    ),
    scale: str = typer.Option("1", "--scale", help="1/N: divide blocks per plane by N (keeps dies, timing, OP)"),
    seed: int = Seed(1, "seed of every random choice made on this image"),
    nvm_sets: Optional[int] = typer.Option(
        None, "--nvm-sets", min=1, max=U32, help="NVM Sets on disjoint dies (presets with [nvm_sets]; default 1: no sets)"
    ),
    partitions: Optional[int] = typer.Option(
        None, "--partitions", min=1, max=U32, help="FTL partitions per NVM Set, each on its own dies (a power of two; default: the spec's)"
    ),
) -> None:
    """Create a drive image from a preset or a spec TOML (factory state: one namespace, whole
    capacity; with --nvm-sets, one namespace filling each set)."""
    if (model is None) == (spec is None):
        fail("create: give one of --model PRESET (ssdtwin models) or --spec FILE.toml")
    try:
        n = parse_scale(scale)
    except ValueError as e:
        fail(f"--scale: {e}")
    if spec is None:
        assert model is not None
        d = Drive.create(path, model, scale=n, seed=seed, nvm_sets=nvm_sets, partitions=partitions)
        rounded, name = scale_rounding(model, n, nvm_sets=nvm_sets, partitions=partitions), model
    else:
        text = read_spec(spec)
        try:
            d = Drive.create_from_spec(path, text, scale=n, seed=seed, nvm_sets=nvm_sets, partitions=partitions)
        except _core.SpecError as e:
            fail(spec_error(spec, text, str(e)))
        note_stale_derivations("ssdtwin create", spec, text)
        rounded = scale_rounding(None, n, spec_toml=text, nvm_sets=nvm_sets, partitions=partitions)
        name = f"{d.spec()['drive']['name']} (from {spec})"
    info = d.ftl_info()
    ctrl = d.nvme.id_ctrl()
    d.close()
    sets = f" in {info['nvm_sets']} NVM Sets" if info["nvm_sets"] > 1 else ""
    if info["partitions"] > info["nvm_sets"]:
        sets += f" ({info['partitions'] // info['nvm_sets']} FTL partitions per set)"
    typer.echo(
        f"created {path}: {name} at 1/{n} scale{f' ({rounded})' if rounded else ''}, "
        f"{nvmefmt.si_bytes(ctrl['tnvmcap'])} user, "
        f"{nvmefmt.si_bytes(info['raw_bytes'])} NAND in {info['superblocks']} superblocks{sets}, seed {seed}"
    )
    if info["superblocks"] < FEW_SUPERBLOCKS:
        say(
            f"ssdtwin create: note: {info['superblocks']} superblocks: GC reclaims whole superblocks, so on a drive this small a "
            "window of seconds can fall inside one victim's copying and its WAF and write IOPS swing from one "
            'window to the next (docs/models.md, "Scale"); for figures use a scale that leaves '
            f"{FEW_SUPERBLOCKS} or more"
        )


# Below this many superblocks a scaled drive's GC is coarse (docs/models.md, "Scale"): a
# PM983 at 1/256 (9 superblocks) wrote consecutive 2 s windows of 4 KiB random writes at WAF
# 4.2 up to 107 and back to 1.4 (2K to 273K IOPS), at 1/64 (25) between 1.0 and 5.3.
FEW_SUPERBLOCKS = 16


@app.command()
def check(
    path: Path = ImageDir,
    repair: bool = typer.Option(
        False,
        "--repair/--no-repair",
        help="replay a damaged command journal up to the damage and drop the rest (a copy is kept), then check",
    ),
) -> None:
    """Verify every FTL invariant of an image (maps, valid counts, page conservation); of a
    stack image, its tier's state and its drive (unchanged since the stack last ran)."""
    from .. import stack as stacklib

    if stacklib.is_stack(path) and not (path / "ssdtwin.toml").is_file():
        check_stack(path, repair)
        return
    if repair:
        d = Drive.open(path, repair=True)
        rec = d.recovery()
        if rec:
            print(f"ssdtwin check: {path}: {rec['detail']}", file=sys.stderr)
        with d:
            d.check()
        typer.echo(f"{path}: FTL consistent" + (" (repaired)" if rec and rec["action"] == "repaired" else ""))
        return
    with opened(path, writable=False) as d:
        d.check()
    typer.echo(f"{path}: FTL consistent")


def check_stack(path: Path, repair: bool) -> None:
    """`ssdtwin check STACKDIR`: it said "not an ssdtwin drive image (no ssdtwin.toml)". The
    stack image reads back (stack.toml and state.json agree, the tier's state fits its
    parameters and passes its own check), its drive is the one the stack last ran on, and
    the drive passes its FTL check."""
    from .. import stack as stacklib

    try:
        config, state = stacklib.load(path)
        if repair:
            fail(f"--repair: repairs a drive image's journal; a stack image has none (its drive: ssdtwin check {config['drive']} --repair)")
        d = stacklib.open_drive(path, config, state, writable=False)
    except stacklib.StackError as e:
        fail(*[str(a) for a in e.args])
    with d:
        d.check()
    typer.echo(f"{path}: stack consistent (its tier, and its drive {config['drive']} as the stack last left it); drive FTL consistent")


@app.command("power-cycle")
def power_cycle(path: Path = ImageDir) -> None:
    """Simulate power off and on (clears write protect until power cycle)."""
    with opened(path, writable=True) as d:
        d.power_cycle()
    typer.echo(f"{path}: power cycled")


@app.command()
def precondition(
    path: Path = ImageDir,
    nsid: int = NvmeInt(1, "-n", "--namespace-id", what="a namespace ID", low=1, top=U32),
    seq: Optional[str] = typer.Option(None, "--seq", help="sequential block size, e.g. 128k (SNIA WIPC)"),
    loops_arg: Optional[float] = typer.Option(None, "--loops", help="passes over the namespace for --seq (default 2)"),
    rand: Optional[str] = typer.Option(None, "--rand", help="random block size, e.g. 4k"),
    amount_arg: Optional[str] = typer.Option(None, "--amount", help="for --rand: Nx the namespace, or a size (300GiB; default 2x)"),
    seed: Optional[int] = Seed(None, "default: the image's next seed"),
    quiet: bool = typer.Option(False, "--quiet/--no-quiet", "-q", help="no progress bar"),
) -> None:
    """Write a namespace to a known state in fast-forward (no timing): --seq then --rand."""
    if seq is None and rand is None:
        fail("give --seq BS and/or --rand BS")
    # Each sizes its own step: taken without it, one was ignored and the step wrote its
    # default (--seq 128k --amount 1GiB wrote two whole passes).
    if loops_arg is not None and seq is None:
        fail(f"--loops {loops_arg}: sizes the --seq step, and there is none (--rand's amount is --amount)")
    if amount_arg is not None and rand is None:
        fail(f"--amount {amount_arg}: sizes the --rand step, and there is none (--seq's amount is --loops)")
    loops = 2.0 if loops_arg is None else loops_arg
    amount = "2x" if amount_arg is None else amount_arg
    if not (loops > 0 and math.isfinite(loops)):
        fail(f"--loops {loops}: must be positive and finite")
    with opened(path, writable=True) as d:
        ns = {n.nsid: n for n in d.namespaces()}.get(nsid)
        if ns is None:
            fail(f"-n {nsid}: no such namespace (namespaces: {', '.join(str(n.nsid) for n in d.namespaces()) or 'none'})")
        assert ns is not None
        steps: list[tuple[str, int, int]] = []
        if seq is not None:
            # The product, not its int(): 1e300 passes overflow a float to inf, which
            # int() refused with a traceback; a pass count that rounds to no byte wrote
            # nothing and said Success (as --loops 0 is refused, so is it).
            seq_bytes = loops * ns.bytes
            if not seq_bytes <= U64:
                fail(f"--loops {loops}: {loops} x {ns.bytes} bytes is more than 2^64 bytes")
            if round(seq_bytes) == 0:
                fail(f"--loops {loops}: {loops} x {ns.bytes} bytes rounds to no byte; must be positive")
            steps.append(("seq", size_arg("--seq", seq), int(round(seq_bytes))))
        if rand is not None:
            try:
                amt = parse_amount(amount, ns.bytes)
            except ValueError as e:
                fail(f"--amount: {e}")
            if amt > U64:
                fail(f"--amount {amount}: more than 2^64 bytes")
            if amt == 0:  # as --amount 0x and --loops 0 are
                fail(f"--amount {amount}: must be positive")
            steps.append(("rand", size_arg("--rand", rand), amt))
        # Every step's block size before any work: a bad --rand used to fail only after the
        # --seq step had run (minutes at full scale), with the core's message naming no option.
        for pattern, bs, _ in steps:
            flag = f"--{pattern} {rand if pattern == 'rand' else seq}"
            if bs % ns.lba_bytes:
                fail(f"{flag}: the block size ({bs} bytes) must be a multiple of namespace {nsid}'s {ns.lba_bytes}-byte LBA")
            if bs > ns.bytes:
                fail(f"{flag}: the block size ({bs} bytes) is larger than namespace {nsid} ({ns.bytes} bytes)")
        done: list[str] = []
        for pattern, bs, total in steps:
            s = d.next_seed() if seed is None else seed
            t0 = time.perf_counter()
            before = d.vendor_log()
            with run_progress(f"precondition {pattern} {human_bs(bs)}", quiet) as cb:
                r = d.precondition(nsid, pattern, bs, total, seed=s, progress=cb)
            dt = time.perf_counter() - t0
            # The pass's WAF only when it spans a GC cycle or a namespace pass (docs/models.md).
            m = wafm.measure(before, d.vendor_log(), "fast_forward", ns.bytes)
            done.append(
                f"{pattern:>4} {human_bs(bs)}: wrote {nvmefmt.si_bytes(r.host_bytes)} in {r.ios} IOs, "
                f"NAND {nvmefmt.si_bytes(r.nand_bytes)}, {wafm.text(m)}, seed {r.seed}, {dt:.1f} s"
            )
    # Only now is it committed: a failure above (a later step, a full disk) printed nothing.
    for line in done:
        typer.echo(line)


def size_arg(flag: str, text: str) -> int:
    try:
        v = _core.parse_size(text)
    except ValueError as e:
        fail(f"{flag}: {e}")
    if v <= 0:
        fail(f"{flag} {text}: must be positive")
    return v


def human_bs(b: int) -> str:
    for unit, n in (("m", 1 << 20), ("k", 1 << 10)):
        if b % n == 0:
            return f"{b // n}{unit}"
    return str(b)


class WafReport(TypedDict):
    """``ssdtwin waf -o json``: the window's bytes, the drive's WAF (when the window spans a
    GC cycle or a namespace pass), Intel's 0xF4/0xF5 counters where the drive keeps them, and
    the measurement."""

    host_bytes_written: int
    nand_bytes_written: int
    waf: Optional[float]
    intel_0xf5_host_units: NotRequired[int]
    intel_0xf4_nand_units: NotRequired[int]
    intel_waf: NotRequired[Optional[float]]
    measurement: NotRequired[WafMeasurement]  # always: set last, the JSON's order


class _CommandAfterDir(TyperCommand):
    """``ssdtwin waf``'s parsing: everything from the command on is the command's, with or
    without ``--``. Click reads options anywhere, so ``waf DIR cmd ... -o json`` gave the
    ``-o json`` to waf (its JSON, the command's text); a ``--`` is put before the command's
    first word when the line has none, as ``time``, ``nice`` and ``env`` read theirs."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if "--" not in args:
            positionals, i = 0, 0
            while i < len(args):
                a = args[i]
                if a in ("-o", "--output-format") or a.startswith(("-o", "--output-format=")):
                    i += 2 if a in ("-o", "--output-format") else 1
                    continue
                if a.startswith("-"):
                    break  # --help or an unknown option: click's to refuse
                positionals += 1
                if positionals == 2:  # DIR, then the command's first word
                    args = [*args[:i], "--", *args[i:]]
                    break
                i += 1
        return list(super().parse_args(ctx, args))


@app.command(cls=_CommandAfterDir, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def waf(
    ctx: typer.Context,
    path: Path = typer.Argument(..., metavar="DIR", help="drive image to watch"),
    fmt: str = OutputFmt,
) -> None:
    """WAF of whatever a command writes: telemetry before, run the command, telemetry after.

    Usage: ssdtwin waf DIR [-o json] [--] COMMAND [ARGS...]   (the endurance-profiler flow)

    Everything from COMMAND on is the command's: `waf DIR cmd ... -o json` gives the -o to
    the command; waf's own -o goes before COMMAND.
    """
    check_fmt(fmt)
    cmd = list(ctx.args)
    if not cmd:
        fail("give the command to run after --, e.g. ssdtwin waf ./cm6 -- ssdtwin precondition ./cm6 --rand 4k --amount 1x")
    before = drive_view(path, fresh=True).vendor_log()
    # With -o json our stdout is one JSON document: the command's own output goes to stderr.
    rc = run_watched(cmd, stdout=sys.stderr if fmt == "json" else None)
    if rc in (130, -signal.SIGINT):  # the command was interrupted (its own Ctrl-C, or a kill -INT)
        interrupt_note(f"the command ended with status {rc}; WAF not computed")
        Interrupt.seen = True  # typer turns the KeyboardInterrupt into a bare status 130
        raise KeyboardInterrupt
    if rc != 0:
        fail(f"the command exited with status {rc}; WAF not computed")
    view = drive_view(path, fresh=True)
    after = view.vendor_log()
    # The command may have run timed (fio) or fast-forward (precondition) writes, or both:
    # this flow cannot tell, so the basis is "window"; the sufficiency rule is the same.
    ns_bytes = sum(n["bytes"] for n in view.list_ns() if n["attached"])
    try:
        m = wafm.measure(before, after, "window", ns_bytes)
    except wafm.WafWindowError as e:  # printed negative bytes written, and exit 0
        fail(f"{path}: {e}; WAF not computed")
    steady = m["verdict"] == "steady"
    dh = after["host_write_bytes"] - before["host_write_bytes"]
    dn = after["nand_write_bytes"] - before["nand_write_bytes"]
    # waf (and intel_waf) only when the window spans a GC cycle or a namespace pass.
    out: WafReport = {"host_bytes_written": dh, "nand_bytes_written": dn, "waf": m["waf"]}
    ia, ib = after.get("intel_smart_add"), before.get("intel_smart_add")
    if ia and ib:
        hs = ia["host_bytes_written_sectors"] - ib["host_bytes_written_sectors"]
        ns = ia["nand_bytes_written_sectors"] - ib["nand_bytes_written_sectors"]
        out["intel_0xf5_host_units"] = hs
        out["intel_0xf4_nand_units"] = ns
        out["intel_waf"] = (ns / hs) if hs and steady else None
    out["measurement"] = m
    if fmt == "json":
        emit_json(out)
        return
    typer.echo(f"host bytes written : {dh} ({nvmefmt.si_bytes(dh)})")
    typer.echo(f"NAND bytes written : {dn} ({nvmefmt.si_bytes(dn)})")
    typer.echo(f"window             : {wafm.amount(m)} (basis: window, timed or fast-forward not known)")
    typer.echo(f"WAF                : {wafm.verdict_text(m)}")
    if "intel_waf" in out:
        iw, hs = out["intel_waf"], out["intel_0xf5_host_units"]
        typer.echo(
            f"WAF from 0xF4/0xF5 : {iw:.4f} ({out['intel_0xf4_nand_units']} / {hs} units of 32 MiB)"
            if iw is not None
            else "WAF from 0xF4/0xF5 : - (less than 32 MiB written)"
            if not hs
            else "WAF from 0xF4/0xF5 : not measured (the same window)"
        )


def run_watched(cmd: list[str], stdout: Any) -> int:
    """Run `cmd` to its end and return its exit status (negative: the signal that ended it).

    A Ctrl-C does not cut it short: the terminal sends SIGINT to its whole foreground process
    group, the command included, and an ``ssdtwin`` command then stops as it does alone
    (exit 130, its image at the last commit); killing it instead (what ``subprocess.call``
    does 0.25 s after an interrupt) would cut its clean-up short, a commit included. A
    SIGINT that did not come from the terminal (``kill -INT`` of this process alone) is
    passed on to the command. Either way the command's status says what became of it."""
    # A Ctrl-C can come as soon as the command runs, before Popen has returned here (on a
    # loaded machine the command may start, and print, first): it is noted while Popen runs
    # and acted on below, so that waf waits for the command as it does for a later one.
    # (An ignored SIGINT stays ignored, for waf and, through exec, for the command.)
    early: list[int] = []
    default = signal.getsignal(signal.SIGINT)
    noting = default not in (signal.SIG_IGN, None)
    if noting:
        signal.signal(signal.SIGINT, lambda signum, _frame: early.append(signum))
    try:
        p = subprocess.Popen(cmd, stdout=stdout)
    except OSError as e:
        if noting:
            signal.signal(signal.SIGINT, default)
        fail(f"cannot run '{cmd[0]}': {e.strerror or e}")
    try:
        if noting:
            signal.signal(signal.SIGINT, default)  # from here a Ctrl-C raises inside this try
        if early:
            raise KeyboardInterrupt
        return p.wait()
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # further Ctrl-Cs are the command's to act on
        if not _terminal_signals_our_group():
            p.send_signal(signal.SIGINT)
        rc = p.wait()
        interrupt_note(f"the command ended with status {rc}; WAF not computed")
        # A Ctrl-C noted while Popen ran never reached Interrupt.on_sigint: unmarked, typer
        # would turn this KeyboardInterrupt into a bare status 130, without waf's line.
        Interrupt.seen = True
        raise


def _terminal_signals_our_group() -> bool:
    """Whether this process's group is its terminal's foreground group: a Ctrl-C there
    reaches every process of the group, a command this one started included."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:  # no controlling terminal: the signal was sent to this process
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)


@app.command()
def demo(
    model: str = typer.Option("kioxia-cm6-r-3.84t", "--model", "-m"),
    scale: str = typer.Option("1/64", "--scale"),
    sizes: str = typer.Option("3.84,3.52,3.20,2.56", "--sizes", help="namespace sizes in TB at full scale"),
    seed: int = Seed(1),
    quiet: bool = typer.Option(False, "--quiet/--no-quiet", "-q", help="no progress lines"),
) -> None:
    """The KIOXIA CM6 namespace experiment: steady-state random-write WAF per namespace size."""
    from ..studies.demo import run_demo
    from ..studies.experiments import namespace_fraction

    tbs = sizes_arg(sizes)
    for tb in tbs:  # every size checked before any work (and before the --scale note)
        try:
            namespace_fraction(model, tb)
        except ValueError as e:
            fail(f"--sizes: {e}")
    n = scale_arg(scale, model, "ssdtwin demo")
    try:
        run_demo(model, n, tbs, seed, log=typer.echo, note=None if quiet or not sys.stderr.isatty() else say)
    except ValueError as e:  # a size outside the drive
        fail(f"{e}")


@app.command("fio")
def fio_cmd(
    path: Path = typer.Argument(..., metavar="DIR", help="drive image"),
    jobs: list[Path] = typer.Argument(..., metavar="JOBFILE", help="fio job file(s)"),
    namespace: int = typer.Option(1, "--namespace", min=1, max=U32, help="namespace for jobs whose filename= names none"),
    output_format: str = typer.Option("normal", "-o", "--output-format", help="normal, json or json+"),
    output: Optional[Path] = typer.Option(None, "--output", help="write the report here instead of stdout"),
    seed: int = Seed(0, "seed for jobs with randrepeat=0 (fio would use OS entropy)"),
    scratch: bool = typer.Option(False, "--scratch/--no-scratch", help="run without changing the image"),
    idle_gc: bool = typer.Option(True, "--idle-gc/--no-idle-gc", help="background GC in idle gaps"),
    log_dir: Path = typer.Option(Path("."), "--log-dir", help="where write_*_log and relative write_iolog files go"),
    converge: bool = typer.Option(
        False,
        "--converge/--no-converge",
        help="time each round only until its figures converge (95 %% confidence, within 0.5 %%), the rest in fast-forward "
        "(docs/fio.md, Converging rounds); the JSON's ssdtwin.timing says how much was timed",
    ),
) -> None:
    """Run fio job files unchanged against a drive image, in simulated time."""
    from ..fio.run import job_file_problem, render, write_logs
    from ..fio.stats import job_verror

    if output_format not in ("normal", "json", "json+"):
        fail(f"-o/--output-format '{output_format}': must be normal, json or json+")
    problems = [p for p in map(job_file_problem, jobs) if p]
    if problems:
        fail(*problems)
    if log_dir.exists() and not log_dir.is_dir():
        fail(f"--log-dir {log_dir}: not a directory")
    check_output_file("--output", output)

    def fio_note(note: str) -> None:  # fio's warnings and the ignored options, before the run
        say(f"ssdtwin fio: {note}")

    from .. import stack as stacklib

    extra: dict[str, Any] = {}
    if stacklib.is_stack(path):  # fio through a host stack (docs/host.md)
        if converge:
            fail("--converge: not through a host stack (its runs are timed in full)")
        run, results, wall = fio_through_stack(path, jobs, seed, scratch, idle_gc, fio_note, log_dir)
    else:
        run, results, wall, timing = fio_on_drive(path, jobs, namespace, seed, scratch, idle_gc, fio_note, converge, log_dir)
        if timing is not None:
            extra["timing"] = timing
            say(f"ssdtwin fio: {timing_note(timing)}")
    text = render(run, results, output_format, ssdtwin_extra=extra)
    if output is not None:
        write_output_file("--output", output, text, "" if scratch else f"the run is committed to {path}; only its report is lost")
    else:
        typer.echo(text, nl=not text.endswith("\n"))
    write_logs(run, results, log_dir)
    virt = max((r["elapsed_ns"] + r.get("start_ns", 0) for r in results), default=0) / 1e9
    print(f"ssdtwin fio: {virt:.3f} s of drive time simulated in {wall:.2f} s", file=sys.stderr)
    # A job that ended with an error (latency_target's ETIMEDOUT, a minimum rate's EIO) is
    # reported on stderr like fio's "err=N/..." line, after fio's own log line, and fio exits 1.
    failed = [(c.job.name, r) for c, r in zip(run.clones, results) if r.get("error")]
    for name, r in failed:
        if r.get("error_text"):
            say(r["error_text"])
        say(f"ssdtwin fio: job '{name}': err={r['error']}/{job_verror(r['error'])}")
    if failed:
        raise typer.Exit(1)


def fio_on_drive(
    path: Path,
    jobs: list[Path],
    namespace: int,
    seed: int,
    scratch: bool,
    idle_gc: bool,
    fio_note: Callable[[str], None],
    converge: bool = False,
    log_dir: Optional[Path] = None,
) -> tuple[Run, list[CloneOut], float, Optional[ConvergeOut]]:
    """The run on a drive image; with ``converge``, also how its rounds converged; with
    ``log_dir``, its log files are checked to be writable there before it runs."""
    from .. import fio as fiolib
    from ..fio.run import run_jobs, run_jobs_converging

    timing: Optional[ConvergeOut] = None
    files = [str(j) for j in jobs]
    with opened(path, writable=not scratch) as d:
        try:
            t0 = time.perf_counter()
            with run_progress("fio") as cb:
                kw: dict[str, Any] = dict(namespace=namespace, run_seed=seed, idle_gc=idle_gc, progress=cb, notes=fio_note, log_dir=log_dir)
                if converge:
                    run, results, timing = run_jobs_converging(d, files, **kw)
                else:
                    run, results = run_jobs(d, files, **kw)
            wall = time.perf_counter() - t0
        except fiolib.FioJobError as e:
            fail(*e.lines())  # every problem, one per line (docs/fio.md §2.9)
        except ValueError as e:
            fail(str(e))
    return run, results, wall, timing


def timing_note(timing: ConvergeOut) -> str:
    """One line on how a converging run went: how much was timed, or why all of it."""
    if timing["timed_in_full"]:
        return f"timed in full: {timing['timed_in_full']}"
    # An interval with too few I/Os is infinite (null in JSON).
    widest = max((math.inf if f["rel_half_width"] is None else f["rel_half_width"] for f in timing["figures"]), default=0.0)
    return (
        f"timed {timing['timed_ns'] / 1e9:.3f} s of {(timing['timed_ns'] + timing['fast_forward_ns']) / 1e9:.3f} s "
        f"({100 * timing['timed_share']:.1f} %), the rest in fast-forward; widest interval ±{100 * widest:.2f} % "
        f"at {100 * timing['rule']['confidence']:.0f} % confidence" + (f"; {timing['timed_to_end']}" if timing["timed_to_end"] else "")
    )


def fio_through_stack(
    path: Path,
    jobs: list[Path],
    seed: int,
    scratch: bool,
    idle_gc: bool,
    fio_note: Callable[[str], None],
    log_dir: Optional[Path] = None,
) -> tuple[Run, list[CloneOut], float]:
    """The drive commits first, then the stack's state (docs/host.md, "Crash semantics")."""
    from .. import fio as fiolib
    from .. import stack as stacklib

    try:
        config, state = stacklib.load(path)
        d = stacklib.open_drive(path, config, state, writable=not scratch)
    except stacklib.StackError as e:
        fail(*[str(a) for a in e.args])
    drive_path = Path(config["drive"])
    try:
        if not scratch:
            interrupt_note(f"{path} and {drive_path} keep their last committed state")
        t0 = time.perf_counter()
        try:
            with run_progress("fio") as cb:
                run, results, new_state = stacklib.run_fio(
                    d, config, state, [str(j) for j in jobs], run_seed=seed, idle_gc=idle_gc, progress=cb, notes=fio_note, log_dir=log_dir
                )
        except fiolib.FioJobError as e:
            fail(*e.lines())
        except ValueError as e:
            fail(str(e))
        except _core.EngineError as e:
            fail(f"{path}: {e}")  # fail() prefixes "ssdtwin fio: error:"
        wall = time.perf_counter() - t0
        if not scratch:
            try:
                d.commit()
            except _core.ImageError as e:
                fail(f"could not commit {drive_path}: {e}; the drive and the stack keep their last committed state")
            stacklib.save_state(path, new_state)
    finally:
        d.close()
    return run, results, wall


_later(app, "serve", _serve)
_later(app, "stack", _stack)
_later(app, "sweep", _sweep)
_later(app, "replay", _replay)
_later(app, "advise", _advise)
_later(bench, "nbd", _bench_nbd)


_later(app, "calibrate", _calibrate)
_later(app, "validate", _validate)


def _reproduce() -> Callable[..., None]:
    from .reproduce import reproduce_cmd

    return reproduce_cmd


_later(app, "reproduce", _reproduce)


@bench.command("engine")
def bench_engine(
    model: str = typer.Option("kioxia-cm6-r-3.84t", "--model", "-m"),
    scale: str = typer.Option("1/64", "--scale"),
    seconds: float = typer.Option(2.0, "--seconds", help="simulated seconds per workload"),
    numjobs: int = typer.Option(1, "--numjobs", min=1, max=4096),
    fmt: str = OutputFmt,
) -> None:
    """Timed-engine speed: simulated 4 KiB random read/write I/Os per wall second (QD32)."""
    from ..studies.benchmarks import run_engine_bench

    check_fmt(fmt)
    # Under a microsecond the job's runtime came to 0, which fio reads as no limit: the job
    # ran until it had covered the namespace and its IOPS were divided by the --seconds asked.
    # inf and 1e300 were tracebacks (the fio job's runtime).
    if not MIN_BENCH_SECONDS <= seconds <= MAX_BENCH_SECONDS:
        fail(f"--seconds {seconds}: must be {MIN_BENCH_SECONDS} to {MAX_BENCH_SECONDS} simulated seconds per workload")
    n = scale_arg(scale, model, "ssdtwin bench engine")
    check_maps_fit(model, n, scale)
    log = (lambda s: typer.echo(s, err=True)) if fmt == "json" else typer.echo  # -o json: only JSON on stdout
    res = run_engine_bench(model, n, seconds, numjobs, log=log)
    if fmt == "json":
        emit_json(res)


@bench.command("rate")
def bench_rate(
    model: str = typer.Option("kioxia-cm6-r-3.84t", "--model", "-m"),
    scale: str = typer.Option("1/64", "--scale"),
    ios: int = typer.Option(500_000, "--ios", min=1, help="4 KiB I/Os per job (its size)"),
    rate_iops: int = typer.Option(20_000, "--rate-iops", min=1, max=U32, help="the limited run's rate_iops (fio keeps it in 32 bits)"),
    fmt: str = OutputFmt,
) -> None:
    """Rate-limit cost: the same job with and without rate_iops, simulated I/Os per wall second."""
    from ..studies.benchmarks import run_rate_bench

    check_fmt(fmt)
    n = scale_arg(scale, model, "ssdtwin bench rate")
    check_maps_fit(model, n, scale)
    log = (lambda s: typer.echo(s, err=True)) if fmt == "json" else typer.echo
    try:
        res = run_rate_bench(model, n, ios, rate_iops, log=log)
    except ValueError as e:
        fail(str(e))
    if fmt == "json":
        emit_json(res)


@bench.command("ftl")
def bench_ftl(
    model: str = typer.Option("kioxia-cm6-r-3.84t", "--model", "-m"),
    scale: str = typer.Option("1", "--scale"),
    steady: float = typer.Option(0.5, "--steady", help="capacity multiples measured at steady state (up to 100)"),
    count: float = typer.Option(0.1, "--count", help="capacity multiples written afterwards with random map lines counted (up to 100)"),
    inflight: int = typer.Option(32, "--inflight", min=1, max=64, help="prefetches in flight in the machine's read-modify-write loop"),
    # At least 2^20: a few thousand operations timed the threads' start and cold caches, not
    # the memory (--rmw-ops 1 measured 99 RMW/s and put the FTL at 15,214,305 % of its bound).
    rmw_ops: int = typer.Option(
        1 << 26, "--rmw-ops", min=1 << 20, max=10**11, help="random read-modify-writes per machine measurement (at least 1048576)"
    ),
    partitions: Optional[int] = typer.Option(
        None, "--partitions", min=1, max=16, help="FTL partitions per NVM Set (a power of two; default: the preset's)"
    ),
    threads: int = typer.Option(
        0,
        "--threads",
        min=0,
        max=256,
        help="fast-forward threads (0: one per core, at most one per partition, or 2 on one)",
    ),
    fmt: str = OutputFmt,
) -> None:
    """Fast-forward FTL speed against the machine's bound: precondition (seq 2x, rand 2x), steady
    random 4 KiB writes, random map lines per write, and the machine's random read-modify-write
    rate over an array of the L2P's size, on as many cores as fast-forward uses (docs/performance.md).
    Table on stderr; -o json: JSON on stdout."""
    from ..studies.benchmarks import run_ftl_bench

    check_fmt(fmt)
    for name, v in (("--steady", steady), ("--count", count)):
        if not 0 < v <= 100:
            fail(f"{name} {v}: must be more than 0 and at most 100 (capacity multiples)")
    n = scale_arg(scale, model, "ssdtwin bench ftl")
    check_maps_fit(model, n, scale, partitions, also=" (and the read-modify-write array as much again, at another time)")
    res = run_ftl_bench(model, n, steady, count, inflight, rmw_ops, log=say, partitions=partitions, threads=threads)
    if fmt == "json":
        emit_json(res)


# --------------------------------------------------------------------------- entry point


# The groups, after every command (where typer put them when they were added with add_typer).
_later(app, "nvme", _nvme)
_later(app, "bench", lambda: bench)
_later(app, "pts", _pts)
_later(app, "cluster", _cluster)


def _click_exceptions() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(usage-error types, abort types) of the click that typer runs on: typer >= 0.20
    vendors click as ``typer._click``; older typer uses the ``click`` package. The ``click``
    package only where it was imported (by typer, or a command): a start that never imported
    it cannot have raised its exceptions, and importing it costs every start ~9 ms."""
    usage: list[type[BaseException]] = []
    aborts: list[type[BaseException]] = [typer.Abort]
    try:
        from typer._click import exceptions as tce  # type: ignore[import-not-found,unused-ignore]

        usage.append(tce.ClickException)
    except ImportError:
        pass
    click = sys.modules.get("click")
    if click is not None:
        usage.append(click.ClickException)
        aborts.append(click.exceptions.Abort)
    return tuple(usage), tuple(aborts)


def _exit_interrupted(prog: str) -> typer.Exit:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the message short
    if not CommandPath.started and not Interrupt.by_sigterm:
        # Before click made any command's context (the CLI's own imports): the line entry.py
        # gives an interrupt earlier in the start-up, not a bare "ssdtwin: interrupted".
        print("ssdtwin: interrupted while starting; nothing was changed", file=sys.stderr, flush=True)
        sys.exit(130)
    if Interrupt.by_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print(f"{prog}: stopped by SIGTERM; {Interrupt.note.removeprefix('interrupted; ')}", file=sys.stderr, flush=True)
        sys.exit(143)
    print(f"{prog}: {Interrupt.note}", file=sys.stderr, flush=True)
    sys.exit(130)


def main(argv: Optional[list[str]] = None) -> None:
    """Console entry point: one-line errors, non-zero exit (1 error, 2 usage, 130 interrupted)."""
    api_name, drivemod.SCALE_NAME = drivemod.SCALE_NAME, "--scale"  # errors name the option
    try:
        _main(argv)
    finally:
        drivemod.SCALE_NAME = api_name  # a CLI run inside a Python process (tests) leaves the API's


def _main(argv: Optional[list[str]]) -> None:
    args = sys.argv[1:] if argv is None else argv
    CommandPath.path, CommandPath.started = "ssdtwin", False  # until click makes the first command's context
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, Interrupt.on_sigint)
    status = 0
    try:
        rv = app(args=args, prog_name="ssdtwin", standalone_mode=False)
        # Outside standalone mode typer returns the status of a typer.Exit (130 for Ctrl-C).
        status = rv if isinstance(rv, int) else 0
    except CliError as e:
        for line in e.lines:
            print(f"{CommandPath.path}: error: {line}", file=sys.stderr)
        sys.exit(1)
    except (_core.SsdtwinError, ArgumentRangeError) as e:
        # ArgumentRangeError: an integer past a core parameter's range that no option bounded
        # (it names the parameter and its range: one line, not a traceback).
        print(f"{CommandPath.path}: error: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        _exit_interrupted(CommandPath.path)
    except Terminated as e:
        print(f"{CommandPath.path}: stopped by {e.signal_name} before serving; the image is unchanged", file=sys.stderr)
        sys.exit(0)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except Exception as e:
        usage_errors, aborts = _click_exceptions()
        if isinstance(e, aborts):
            _exit_interrupted(CommandPath.path)
        if type(e).__name__ == "NoArgsIsHelpError":  # `ssdtwin` or `ssdtwin nvme` alone: the help
            print(str(e.format_message()).rstrip(), file=sys.stderr)  # type: ignore[attr-defined]
            sys.exit(2)
        if isinstance(e, usage_errors):
            # Click prints usage, a hint and the message on several lines; keep one.
            msg = " ".join(str(e.format_message()).split())  # type: ignore[attr-defined]
            # The command the error arose in: for an unknown command word it is the group
            # (`ssdtwin info` pointed at `ssdtwin info --help`, which does not exist).
            ctx = getattr(e, "ctx", None)
            where = str(getattr(ctx, "command_path", "")) or CommandPath.path
            if msg:  # empty: no arguments, and the help was already printed
                print(f"{where}: error: {msg} (see '{where} --help')", file=sys.stderr)
            sys.exit(int(getattr(e, "exit_code", 2)))
        if isinstance(e, OSError):  # e.g. a report or log file that cannot be written
            print(f"{CommandPath.path}: error: " + (f"{e.filename}: {e.strerror}" if e.filename else str(e)), file=sys.stderr)
            sys.exit(1)
        raise
    if Interrupt.seen:
        _exit_interrupted(CommandPath.path)
    sys.exit(status)


if __name__ == "__main__":
    main()
