"""What every ``ssdtwin`` command shares: one-line errors, JSON output, option types, the
Ctrl-C note, opening an image, and the read-only view of a drive (served or not).

Command modules import this one and never each other's internals, so the commands have no
import cycle (commands/cli.py assembles them).
"""

from __future__ import annotations

import copy
import json
import os
import re
import signal
import stat
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any, Callable, NoReturn, Optional

import typer

from .. import _core
from ..drive import Drive, parse_scale
from ..live import LiveState, live_state

# Ranges of the NVMe fields behind integer options (a larger value is a usage error, exit 2).
U8, U16, U32, U64 = 0xFF, 0xFFFF, 0xFFFF_FFFF, 0xFFFF_FFFF_FFFF_FFFF
# The longest run a benchmark's --seconds may ask for: a day.
MAX_BENCH_SECONDS = 86_400
# The shortest: a millisecond of simulated time (a few hundred I/Os at QD32).
MIN_BENCH_SECONDS = 0.001
OutputFmt = typer.Option("normal", "-o", "--output-format", help="normal or json")
ImageDir = typer.Argument(..., metavar="DIR", help="drive image directory (ssdtwin create)")


def Seed(default: Optional[int], help: Optional[str] = None) -> Any:
    """A typer option ``--seed N``: every seed the core takes is a u64 (a larger one is a
    usage error, exit 2)."""
    return typer.Option(default, "--seed", min=0, max=U64, help=help)


class CliError(Exception):
    """A user-facing error: printed as one line, exit status 1. ``more`` are further
    errors of the same command (every problem of a job file), one line each."""

    def __init__(self, msg: str, more: Sequence[str] = ()) -> None:
        super().__init__(msg)
        self.lines = [msg, *more]


class Terminated(BaseException):
    """Raised by ``ssdtwin serve``'s SIGTERM handler; the server loop notices it and stops cleanly."""

    signal_name = "SIGTERM"


class HungUp(Terminated):
    """Raised by ``ssdtwin serve``'s SIGHUP handler (its terminal hung up): a stop like SIGTERM's."""

    signal_name = "SIGHUP"


def fail(msg: str, *more: str) -> NoReturn:
    raise CliError(msg, more)


def say(msg: str) -> None:
    """A note for the user on stderr (stdout carries only the command's output)."""
    print(msg, file=sys.stderr, flush=True)


def emit_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, indent=2))


def write_binary(data: bytes) -> None:
    """Raw bytes on stdout (nvme-cli's -b/--raw-binary)."""
    sys.stdout.buffer.write(data)
    sys.stdout.flush()


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, as `nproc` counts them)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def check_output_file(flag: str, path: Optional[Path]) -> None:
    """Refuse an output file that could not be written (a directory, or in a missing folder):
    checked before a run, so that a report that cannot be written never follows a committed
    run."""
    if path is not None and (path.is_dir() or not path.parent.is_dir()):
        fail(f"{flag} {path}: " + ("a directory" if path.is_dir() else f"no such directory {path.parent}"))


def write_output_file(flag: str, path: Path, text: str, note: str = "") -> None:
    """Write a report to the file ``check_output_file`` let through. A failure now (a full
    disk, /dev/full) is one line naming the file and, in ``note``, what was done already; it
    was "[Errno 28] No space left on device", naming neither."""
    try:
        path.write_text(text)
    except OSError as e:
        fail(f"{flag} {path}: {e.strerror or e}" + (f"; {note}" if note else ""))


def check_fmt(fmt: str, raw: bool = False) -> str:
    """The -o/--output-format value; with ``raw`` (-b/--raw-binary), refuse ``json``: raw
    bytes on stdout are not the JSON that -o json promises (nvme-cli prints the bytes)."""
    if fmt not in ("normal", "json"):
        fail(f"-o/--output-format '{fmt}': must be normal or json")
    if raw and fmt == "json":
        fail("-b/--raw-binary and -o json: choose one (raw bytes on stdout are not JSON)")
    return fmt


class Interrupt:
    """What Ctrl-C found: whether it came, and what is true of the image afterwards.

    The SIGINT handler records the signal before raising KeyboardInterrupt, because typer
    turns a KeyboardInterrupt into a plain exit status that a caller cannot tell from a
    command's own; ``ssdtwin serve`` stops cleanly on Ctrl-C without raising at all."""

    seen = False
    by_sigterm = False  # SIGTERM to a command that takes it as Ctrl-C (sigterm_cleans_up)
    note = "interrupted"

    @classmethod
    def on_sigint(cls, signum: int, frame: Optional[FrameType]) -> None:
        cls.seen = True
        raise KeyboardInterrupt

    @classmethod
    def on_sigterm(cls, signum: int, frame: Optional[FrameType]) -> None:
        # A KeyboardInterrupt, not an exception of our own: it is what Ray's waits and the
        # core's signal checks pass through (Ray turns any other into a SystemError).
        cls.by_sigterm = True
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the clean-up short
        cls.on_sigint(signum, frame)


@contextmanager
def sigterm_cleans_up() -> Iterator[Callable[..., None]]:
    """SIGTERM stops the block as Ctrl-C does (its ``finally`` blocks run; the CLI says
    "stopped by SIGTERM" and exits 143, 128 + SIGTERM); the old handler is back after it.
    Yields a function that installs a handler again: this one after code that replaces it
    (``ray.init`` sets its own, which exits with status 15), or SIG_IGN while cleaning up."""

    def install(handler: Any = Interrupt.on_sigterm) -> None:
        signal.signal(signal.SIGTERM, handler)

    old = signal.getsignal(signal.SIGTERM)
    install()
    try:
        yield install
    finally:
        signal.signal(signal.SIGTERM, old)


@contextmanager
def ctrl_c_lets_clean_up() -> Iterator[None]:
    """Within the block, a Ctrl-C once the command is stopping (a first Ctrl-C, or SIGTERM)
    is ignored: the first stops the work, and the clean-up its ``finally`` blocks do is not
    cut short by the next (an impatient second Ctrl-C while Ray shut down left a sweep
    without its table, and advise's temporary folder of images behind). Left alone when
    SIGINT is not the CLI's handler (ignored by the shell, a caller's own)."""
    import threading

    old = signal.getsignal(signal.SIGINT)
    if old != Interrupt.on_sigint or threading.current_thread() is not threading.main_thread():
        yield
        return

    def once(signum: int, frame: Optional[FrameType]) -> None:
        if not Interrupt.seen:
            Interrupt.on_sigint(signum, frame)

    signal.signal(signal.SIGINT, once)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def interrupt_note(note: str) -> None:
    """Say what a Ctrl-C from now on leaves behind (one line, after ``interrupted; ``)."""
    Interrupt.note = f"interrupted; {note}"


@contextmanager
def opened(path: Path, writable: bool) -> Iterator[Drive]:
    """Open an image; commit on success (when writable); never commit on failure.

    A failed commit (a full disk) is a one-line error: the image keeps its last committed
    state, so callers print what they did only after this block has ended."""
    d = Drive.open(path, writable=writable)
    try:
        rec = d.recovery()
        if rec:  # a killed `ssdtwin serve` left a journal (docs/nbd.md, Durability)
            say(f"ssdtwin: {path}: {rec['detail']}")
        if writable:
            interrupt_note(f"{path} keeps its last committed state")
        yield d
        if writable:
            try:
                d.commit()
            except _core.ImageError as e:
                fail(f"could not commit {path}: {e}; the image keeps its last committed state")
    finally:
        d.close()


def live_note(path: Path, live: LiveState) -> None:
    say(f"ssdtwin: {path} is being served (pid {live.pid}); showing the server's live state of {live.age_s:.1f} s ago")


def drive_view(path: Path, fresh: bool = False) -> _core.DriveView:
    """What the read-only commands show: a running server's live state when it holds the
    image (noted on stderr; with ``fresh``, silently and from a snapshot taken after this
    call, so nothing written before it is missed), else the committed image's. Both are the
    core's one structure (``DriveView``), so both answer alike, errors included."""
    live = live_state(path, newer_than=time.time()) if fresh else live_state(path)
    if live is not None:
        if not fresh:
            live_note(path, live)
        return live.view
    with opened(path, writable=False) as d:
        return d.view()


def int_range(low: int, top: int) -> str:
    """``0..255``, or ``0..0xffffffff`` for the wide fields."""
    return f"{low}..{top}" if top <= 0xFFFF else f"{low}..{top:#x}"


def plain_float(text: str) -> float:
    """``float(text)`` without Python's digit separators (``1_000``, which float takes): no
    number on the command line has them (docs/cli.md, "Sizes"). ValueError otherwise."""
    if "_" in text:
        raise ValueError(f"'{text}': digit separators are not part of a number here")
    return float(text)


def refuse_digit_separators(command: Any) -> None:
    """The int and float options of `command` and of every command below it (click's INT
    and FLOAT and their ranges) refuse Python's digit separators, which ``int()`` and
    ``float()`` take (``--seed 1_0`` was seed 10), as every other number on the command line
    does. Each such option gets its own copy of its type, so click's shared types, and any
    other program's commands in the process, are left as they are. Idempotent."""
    if getattr(command, "_plain_numbers", False):
        return
    from typer import main as typer_main

    types: Any = getattr(typer_main, "types")  # noqa: B009 (typer's click, not in typer.main's __all__)
    for param in getattr(command, "params", []):
        if isinstance(param.type, types.IntParamType):
            param.type = _plain_number_type(param.type, "integer")
        elif isinstance(param.type, types.FloatParamType):
            param.type = _plain_number_type(param.type, "number")
    command._plain_numbers = True
    for sub in getattr(command, "commands", {}).values():
        refuse_digit_separators(sub)


def _plain_number_type(number_type: Any, what: str) -> Any:
    """A copy of click's `number_type` whose convert refuses ``1_000``."""
    plain = copy.copy(number_type)
    convert = plain.convert

    def refusing(value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, str) and "_" in value:
            plain.fail(f"{value!r} is not a valid {what} (1000, not 1_000)", param, ctx)
        return convert(value, param, ctx)

    plain.convert = refusing
    return plain


def plain_int(text: str, base: int = 10) -> int:
    """``int(text, base)`` without Python's digit separators (``int('1_000')`` is 1000)."""
    if "_" in text:
        raise ValueError(f"'{text}': digit separators are not part of a number here")
    return int(text, base)


def parse_whole(text: str) -> Optional[int]:
    """A decimal or 0x hex integer as nvme-cli reads one (strtoul), or None: Python's digit
    separators (``1_000``, ``0x_10``), which ``int(text, 0)`` takes, are not a number there."""
    if "_" in text:
        return None
    try:
        return int(text, 0)
    except ValueError:
        return None


def int_arg(flag: str, text: str, what: str, top: int, low: int = 0) -> int:
    """An integer option nvme-cli takes in decimal or 0x hex (NSIDs, feature IDs, values),
    or a one-line error naming the flag and the allowed range."""
    v = parse_whole(text)
    if v is None:
        fail(f"{flag} '{text}': must be {what}, a decimal or 0x hex integer in {int_range(low, top)}")
    if not low <= v <= top:
        fail(f"{flag} {text}: must be {what} in {int_range(low, top)}")
    return v


def NvmeInt(default: Any, *flags: str, what: str, top: int, low: int = 0, help: Optional[str] = None) -> Any:
    """A typer option for an integer NVMe field: decimal or 0x hex, as nvme-cli takes every
    number (``-n 0x1``, ``-f 0x84``), in ``low..top``; anything else is :func:`int_arg`'s
    one-line error naming the flag and the range (exit 1), before the image is opened."""
    # How errors name it: its first short and first long flag (-v/--value of -v, -V, --value).
    flag = "/".join([f for f in flags if not f.startswith("--")][:1] + [f for f in flags if f.startswith("--")][:1])

    def parse(text: Any) -> int:
        return text if isinstance(text, int) and low <= text <= top else int_arg(flag, str(text), what, top, low)

    return typer.Option(default, *flags, parser=parse, metavar="NUM", help=f"{help + '; ' if help else ''}{int_range(low, top)}")


# --------------------------------------------------------------------------- specs and scales


def read_spec(path: Path) -> str:
    """The text of a `--spec` file, or a one-line error naming it. Only a regular file:
    opening a FIFO would wait for a writer forever, and a device is no spec."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        fail(f"--spec {path}: no such file")
    except OSError as e:
        fail(f"--spec {path}: cannot read it ({e.strerror or e.__class__.__name__})")
    if not stat.S_ISREG(mode):
        fail(f"--spec {path}: not a regular file ({_file_kind(mode)}); give a spec TOML file")
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        fail(f"--spec {path}: no such file")
    except (OSError, UnicodeDecodeError) as e:
        fail(f"--spec {path}: cannot read it as UTF-8 text ({e.__class__.__name__})")


# The counts a [DERIVED] source may start from, as it writes them ("64 dies", "/ 16 channels",
# "2 planes x 1152 pages"), and where the spec keeps each now.
_COUNTS = (
    ("dies", "nand.channels x nand.dies_per_channel"),
    ("channels", "nand.channels"),
    ("planes", "nand.planes_per_die"),
    ("pages", "nand.pages_per_block"),
)


def stale_derivations(text: str) -> list[str]:
    """One line per [DERIVED] value whose source starts from a count of dies, channels,
    planes or pages per block that the spec no longer has (an edited geometry keeps the
    preset's derived values and their sources: a write buffer of 2 program units per die
    for 64 dies on a drive of 32). The value is the user's to derive again; nothing is
    changed. A source may state several counts of one kind (a derivation's steps); it is
    stale when none is the spec's."""
    try:
        spec = _core.parse_spec(text)
        nand = spec["nand"]
        have = {
            "channels": int(nand["channels"]["value"]),
            "planes": int(nand["planes_per_die"]["value"]),
            "pages": int(nand["pages_per_block"]["value"]),
        }
        have["dies"] = have["channels"] * int(nand["dies_per_channel"]["value"])
    except (_core.SpecError, KeyError, TypeError, ValueError):
        return []  # the caller fails on a spec the core refuses
    notes = []
    for table, fields in spec.items():
        if not isinstance(fields, dict):
            continue
        for field, entry in fields.items():
            source = entry.get("source") if isinstance(entry, dict) else None
            if not isinstance(source, str) or not source.startswith("[DERIVED]"):
                continue
            for kind, where in _COUNTS:
                said = [int(n.replace(",", "")) for n in re.findall(rf"(?<![\d.,])(\d[\d,]*) {kind}\b", source)]
                if said and have[kind] not in said:
                    now = f"{have[kind]} ({where})"
                    if kind == "dies":
                        now = f"{have['dies']} ({where}: {have['channels']} x {have['dies'] // have['channels']})"
                    notes.append(
                        f"{table}.{field} = {entry.get('value')} was derived from {said[-1]} {kind}; this spec has {now}: "
                        "derive it again, or keep it with a source saying why"
                    )
    return notes


def note_stale_derivations(prog: str, path: Path, text: str) -> None:
    """The notes of `stale_derivations` on stderr, each naming the spec file."""
    for note in stale_derivations(text):
        say(f"{prog}: note: --spec {path}: {note}")


def _file_kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return kind
    return "not a file"


def spec_error(path: Path, text: str, msg: str) -> str:
    """The core's spec error, naming the file (and the line, where it names a byte offset,
    with the field on that line: a type error names only what it expected)."""
    msg = msg.removeprefix("spec: ")
    m = re.search(r" at byte (\d+)", msg)
    if m:
        line = text.encode("utf-8")[: int(m.group(1))].count(b"\n") + 1
        field = _field_at(text, line)
        msg = msg.replace(m.group(0), f" at line {line}" + (f" ({field})" if field else ""))
    return f"--spec {path}: {msg}"


_TABLE = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.-]+)\s*\]\]?")
_KEY = re.compile(r"^\s*([A-Za-z0-9_-]+(?:\s*\.\s*[A-Za-z0-9_-]+)*)\s*=")


def _field_at(text: str, line: int) -> str:
    """The dotted path of the field on `line` (1-based) of a spec TOML, as the core's range
    errors name it (`nand.channels`, `power_states[2].max_power_mw`); the table's for a table
    header; "" when the line holds neither. A plain scan of headers and keys, enough for the
    spec's layout (multi-line strings and arrays are not followed)."""
    table, counts = "", dict[str, int]()
    lines = text.splitlines()
    for i, raw in enumerate(lines[:line], 1):
        t = _TABLE.match(raw)
        if t:
            name = t.group(2)
            if t.group(1) == "[[":
                counts[name] = counts.get(name, -1) + 1
                table = f"{name}[{counts[name]}]"
            else:
                table = name
            if i == line:
                return table
            continue
        if i == line:
            k = _KEY.match(raw)
            if k is None:
                return table
            key = re.sub(r"\s+", "", k.group(1))
            return f"{table}.{key}" if table else key
    return ""


def _superblocks(
    model: Optional[str], n: int, spec_toml: Optional[str] = None, nvm_sets: Optional[int] = None, partitions: Optional[int] = None
) -> int:
    d = Drive.in_memory(model, scale=n, spec_toml=spec_toml, nvm_sets=nvm_sets, partitions=partitions)
    try:
        return int(d.ftl_info()["superblocks"])
    finally:
        d.close()


def scale_rounding(
    model: Optional[str], n: int, spec_toml: Optional[str] = None, nvm_sets: Optional[int] = None, partitions: Optional[int] = None
) -> Optional[str]:
    """What 1/N really is when whole superblocks make it the same drive as a smaller N
    (1/65 of a CM6 has the 32 superblocks of 1/64), else None. docs/cli.md, --scale. With
    ``nvm_sets`` or ``partitions``, of the drive built with them: its superblocks are the
    ones `create` then reports (each set and partition has its own)."""
    blocks = _superblocks(model, n, spec_toml, nvm_sets, partitions)
    k = n
    while k > 1 and _superblocks(model, k - 1, spec_toml, nvm_sets, partitions) == blocks:
        k -= 1
    if k == n:
        return None
    pools = []
    for m in (1, n):
        d = Drive.in_memory(model, scale=m, spec_toml=spec_toml, nvm_sets=nvm_sets, partitions=partitions)
        pools.append(d.ftl_info()["data_pool_bytes"])
        d.close()
    return (
        f"rounded to whole superblocks: {blocks}, the same drive as 1/{k}; its data pool is 1/{pools[0] / pools[1]:.2f} of the full drive's"
    )


def scale_arg(text: str, model: str, prog: str) -> int:
    """--scale for a command that builds its own drives: 1/N checked against the preset
    (too small is an error naming the limit) and its rounding noted on stderr."""
    try:
        n = parse_scale(text)
    except ValueError as e:
        fail(f"--scale: {e}")
    rounded = scale_rounding(model, n)  # builds the drive: a bad scale or preset fails here
    if rounded:
        print(f"{prog}: note: --scale 1/{n} {rounded}", file=sys.stderr)
    return n


def sizes_arg(text: str) -> list[float]:
    """--sizes 3.84,3.20: namespace sizes in TB at full scale."""
    tbs = []
    for x in text.split(","):
        try:
            tbs.append(plain_float(x))
        except ValueError:
            fail(f"--sizes '{text}': '{x.strip()}' is not a number of TB (e.g. --sizes 3.84,3.20)")
    return tbs


def make_plot_folder(plot: Path) -> None:
    """--plot DIR (`cluster sweep`; `reproduce` kumoscale, ceph-reef, spdk-tcp, spdk-rdma): made
    before the work starts, so a path that cannot be one fails at once, not after minutes."""
    try:
        plot.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        fail(f"--plot {plot}: not a folder")
    except OSError as e:
        fail(f"--plot {plot}: {e.strerror or e}")
    if not os.access(plot, os.W_OK):
        fail(f"--plot {plot}: not writable")


def check_maps_fit(model: str, n: int, scale: str, partitions: Optional[int] = None, also: str = "", drives: int = 1) -> None:
    """A drive in memory writes every map page as it is preconditioned: a scale whose maps
    (of `drives` such drives alive at once) do not fit in the memory available is refused
    before any work (bench engine and bench rate, and reproduce cm6, ran on, for the
    kernel's OOM killer to end without a word)."""
    from .. import nvmefmt
    from ..studies.benchmarks import maps_bytes, mem_available_bytes

    probe = Drive.in_memory(model, scale=n, partitions=partitions)  # maps not yet touched: costs nothing
    need = drives * maps_bytes(probe.ftl_info())
    probe.close()
    avail = mem_available_bytes()
    if avail is not None and need + (256 << 20) > avail:
        what = model if drives == 1 else f"{drives} {model} drives"
        fail(
            f"--scale {scale}: the FTL maps of {what} at 1/{n} need {nvmefmt.si_bytes(need)}{also}, this machine has "
            f"{nvmefmt.si_bytes(avail)} available (MemAvailable): use a smaller scale"
        )
