"""A drive's four corners (seq read MB/s, rand read IOPS, seq write MB/s, rand write IOPS):
what each is, where its figure comes from, and the fio job that measures it.

A corner is a figure in the datasheet convention (MB/s = 10^6 B/s for sequential corners,
IOPS for random ones), its source, the one `[timing]` parameter it calibrates (`sets`;
none: a prediction) and its job shape. Figures come from the spec's `[corners]`
(crates/ssdtwin-core/src/spec/corners.rs), from `--datasheet` text, or from the fio JSON of
a real drive (`--measured`): `read_measured` reads both the jobs `print_jobs` writes and the
SEQ 128 KiB / RND 4 KiB elements of an `ssdtwin pts` report. docs/calibration.md.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NotRequired, Optional, TypedDict

from ..core_types import TimingTable

NAMES = ("seq-read", "rand-read", "seq-write", "rand-write")  # also the calibration order

# Which parameter each corner sets when the spec names none (the CM6-R's calibration,
# docs/calibration.md, "Which figure sets which parameter").
DEFAULT_SETS = {
    "seq-read": "host_link_bytes_per_s",
    "rand-read": "t_read_ns",
    "seq-write": "t_prog_ns",
    "rand-write": "gc_page_reads_per_iu",
}

# The CM6 brief's job shapes: (block bytes, queue depth per job, jobs).
SEQ_SHAPE = (131072, 16, 1)
RAND_SHAPE = (4096, 32, 8)

FIO_RW = {"seq-read": "read", "rand-read": "randread", "seq-write": "write", "rand-write": "randwrite"}

# A figure may exceed the host link by this much before it is out of physical range (the
# link parameter is a payload rate; the CM6-R's fit puts it 0.02 % above its 6,971 MB/s).
LINK_SLACK = 1e-3
LINK_MAX = 1e12  # the fastest host link the core accepts (spec/mod.rs), B/s


class CornerError(ValueError):
    """Bad corner input; the message is one line naming the flag or file and the field."""


def spec_key(name: str) -> str:
    """`seq-read` -> `seq_read_mb_s`, `rand-write` -> `rand_write_iops` (the [corners] keys)."""
    return name.replace("-", "_") + ("_mb_s" if name.startswith("seq") else "_iops")


def human_bytes(b: int) -> str:
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b % n == 0:
            return f"{b // n} {unit}"
    return f"{b} B"


def figure_text(v: float) -> str:
    """5,200 / 1,549,202 / 219.3: a figure as a datasheet prints it."""
    return f"{v:,.0f}" if v == round(v) or v >= 10_000 else f"{v:,.1f}"


def fio_bs(b: int) -> str:
    for unit, n in (("m", 1 << 20), ("k", 1 << 10)):
        if b % n == 0:
            return f"{b // n}{unit}"
    return str(b)


class CornerFields(TypedDict):
    """A spec's ``[corners]`` entry as calibration writes it (spec/mod.rs ``CornersSpec``)."""

    value: float
    source: str
    sets: NotRequired[str]
    block_bytes: NotRequired[int]
    iodepth: NotRequired[int]
    numjobs: NotRequired[int]


@dataclass(frozen=True)
class Corner:
    name: str  # one of NAMES
    value: float  # MB/s (10^6 B/s) for sequential corners, IOPS for random ones
    source: str
    sets: Optional[str] = None  # the [timing] parameter it calibrates; None: a prediction
    block_bytes: Optional[int] = None  # None: the CM6 brief's shape (SEQ_SHAPE, RAND_SHAPE)
    iodepth: Optional[int] = None
    numjobs: Optional[int] = None
    origin: str = ""  # where the figure was read, for error messages (`--datasheet seq-read`)

    @property
    def sequential(self) -> bool:
        return self.name.startswith("seq")

    @property
    def shape(self) -> tuple[int, int, int]:
        d = SEQ_SHAPE if self.sequential else RAND_SHAPE
        return (self.block_bytes or d[0], self.iodepth or d[1], self.numjobs or d[2])

    @property
    def unit(self) -> str:
        return "MB/s" if self.sequential else "IOPS"

    @property
    def state(self) -> str:
        """The drive state it is measured in (experiments.cm6_drive): sequentially filled, or
        random-written to steady state."""
        return "seq" if self.sequential else "rand"

    @property
    def label(self) -> str:
        """`seq read 128 KiB QD16`, `rand write 4 KiB QD32`; the jobs when not the default."""
        bs, qd, jobs = self.shape
        default_jobs = (SEQ_SHAPE if self.sequential else RAND_SHAPE)[2]
        kind, d = self.name.split("-")
        return f"{kind} {d} {human_bytes(bs)} QD{qd}" + (f" x {jobs} job{'s' if jobs > 1 else ''}" if jobs != default_jobs else "")

    @property
    def bytes_per_s(self) -> float:
        return self.value * 1e6 if self.sequential else self.value * self.shape[0]

    def toml_fields(self) -> CornerFields:
        """The corner as a `[corners]` entry: value, source, sets, and the shape where it is
        not the default."""
        out: CornerFields = {"value": float(self.value), "source": self.source}
        if self.sets:
            out["sets"] = self.sets
        (bs, qd, jobs), (bs0, qd0, jobs0) = self.shape, SEQ_SHAPE if self.sequential else RAND_SHAPE
        if bs != bs0:
            out["block_bytes"] = bs
        if qd != qd0:
            out["iodepth"] = qd
        if jobs != jobs0:
            out["numjobs"] = jobs
        return out


def from_spec(spec: dict[str, Any], origin: str) -> dict[str, Corner]:
    """The corners of a parsed spec (`_core.parse_spec`), by name."""
    table = spec.get("corners") or {}
    out = {}
    for name in NAMES:
        c = table.get(spec_key(name))
        if c is None:
            continue
        out[name] = Corner(
            name,
            float(c["value"]),
            c["source"],
            c.get("sets"),
            c.get("block_bytes"),
            c.get("iodepth"),
            c.get("numjobs"),
            origin=f"{origin} corners.{spec_key(name)}",
        )
    return out


# --------------------------------------------------------------------------- --datasheet

_BYTES_UNITS = {
    "b/s": 1.0,
    "kb/s": 1e3,
    "kib/s": 2.0**10,
    "mb/s": 1e6,
    "mib/s": 2.0**20,
    "gb/s": 1e9,
    "gib/s": 2.0**30,
}
_NUMBER = re.compile(r"^[-+]?(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][-+]?\d+)?")
_COUNT = re.compile(r"^([kKM])?\s*(iops|IOPS)?$")
# A bit rate as the SI writes one (Mb/s, Gbit/s, kbps): a lower-case b after the prefix
_BITS = re.compile(r"^[kKMGT]i?(b/s|bit/s|bps)$")


@dataclass(frozen=True)
class Figure:
    number: float
    # "bytes": B/s; "ios": IOPS; "count": a number with k/M (IOPS for a random corner,
    # ambiguous for a sequential one); "bare": a plain number, in the corner's unit
    per_s: str
    text: str


def parse_figure(text: str, flag: str) -> Figure:
    """`5200MB/s`, `5.2GB/s`, `4958MiB/s`, `1100000`, `1.1M`, `1100k`, `120000IOPS`, `120kIOPS`.
    k/M multiply a count (IOPS or a bare number), never a byte unit."""
    t = text.strip()
    m = _NUMBER.match(t)
    if not m:
        raise CornerError(f"{flag}: '{text}' is not a figure (examples: 5200MB/s, 5.2GB/s, 1100000, 1.1M, 120kIOPS)")
    number = float(m.group(0).replace("_", ""))
    rest = t[m.end() :].strip()
    if _BITS.match(rest):
        # 1600Mb/s is 200 MB/s; read as bytes it was 8x the figure
        raise CornerError(f"{flag}: '{text}': {rest} is bits per second; give bytes: MB/s, MiB/s or GB/s (8 bits each)")
    if rest.lower() in _BYTES_UNITS:
        return Figure(number * _BYTES_UNITS[rest.lower()], "bytes", text)
    c = _COUNT.match(rest)
    if c is None:
        raise CornerError(f"{flag}: '{text}': unknown unit '{rest}' (MB/s, MiB/s, GB/s, GiB/s, KB/s, KiB/s, IOPS; k or M before IOPS)")
    mult = {"k": 1e3, "K": 1e3, "M": 1e6, None: 1.0}[c.group(1)]
    kind = "ios" if c.group(2) else "count" if c.group(1) else "bare"
    return Figure(number * mult, kind, text)


def parse_pairs(text: str, flag: str) -> dict[str, str]:
    """`a=x,b=y` -> {a: x, b: y}, the names checked against NAMES, none twice."""
    out: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        if "=" not in item:
            raise CornerError(
                f"{flag}: '{item.strip()}' is not NAME=VALUE (commas separate figures: 3100, not 3,100; names: {', '.join(NAMES)})"
            )
        k, v = (s.strip() for s in item.split("=", 1))
        if k not in NAMES:
            raise CornerError(f"{flag}: '{k}' is not a corner; choose from {', '.join(NAMES)}")
        if k in out:
            raise CornerError(f"{flag}: {k} given twice")
        out[k] = v
    if not out:
        raise CornerError(f"{flag}: no figures (example: seq-read=5200MB/s,rand-read=1100000)")
    return out


# fio runs at most this many jobs (REAL_MAX_JOBS); so does the twin's fio.
MAX_JOBS = 4096

# The largest block a corner's job runs (the core's [corners] check, spec/corners.rs).
MAX_BLOCK_BYTES = 16 << 20

# A figure past this (MB/s or IOPS) is a typo: a PCIe 6.0 x16 link moves ~128,000 MB/s.
MAX_FIGURE = 1e9


def corner_value(name: str, fig: Figure, block_bytes: int, flag: str) -> float:
    """The figure in the corner's unit: MB/s for sequential corners (a bare number is MB/s,
    IOPS are converted with the block size), IOPS for random ones (bytes/s converted)."""
    seq = name.startswith("seq")
    if fig.per_s == "count" and seq:
        raise CornerError(f"{flag}: '{fig.text}': k/M on a sequential figure is ambiguous; give MB/s, MiB/s or GB/s")
    if fig.per_s == "bare" or fig.per_s == "count":
        v = fig.number
    elif fig.per_s == "bytes":
        v = fig.number / 1e6 if seq else fig.number / block_bytes
    else:
        v = fig.number * block_bytes / 1e6 if seq else fig.number
    if not (math.isfinite(v) and v > 0):
        raise CornerError(f"{flag}: '{fig.text}': a figure must be finite and above 0")
    if v > MAX_FIGURE:  # 1e300 was refused later by the link check, in a 1,000-character line of digits
        unit = "MB/s" if seq else "IOPS"
        raise CornerError(f"{flag}: '{fig.text}': at most {MAX_FIGURE:.0e} {unit} (no drive comes near it)")
    return v


def apply_datasheet(corners: dict[str, Corner], text: str) -> dict[str, Corner]:
    """The spec's corners with `--datasheet` figures in place of theirs (shape kept), and
    new corners for figures the spec has none for."""
    out = dict(corners)
    for name, fig_text in parse_pairs(text, "--datasheet").items():
        flag = f"--datasheet {name}={fig_text}"
        base = corners.get(name) or Corner(name, 0.0, "")
        value = corner_value(name, parse_figure(fig_text, flag), base.shape[0], flag)
        # [SRC]: a generated spec's sources carry a mark as the presets' do (docs/sources.md)
        out[name] = replace(base, value=value, source=f"[SRC] {flag}", origin=flag)
    return out


def apply_sets(corners: dict[str, Corner], text: Optional[str], calibratable: tuple[str, ...], default: bool) -> dict[str, Corner]:
    """`sets` of each corner: the spec's, or with `default` (figures from --datasheet or
    --measured and no `sets` in the spec) DEFAULT_SETS; then `--sets NAME=PARAM|none`."""
    out = {n: replace(c, sets=DEFAULT_SETS[n]) if default else c for n, c in corners.items()}
    if text is None:
        return out
    for name, param in parse_pairs(text, "--sets").items():
        if name not in out:
            raise CornerError(
                f"--sets {name}={param}: there is no {name} figure (give it with --datasheet, --measured or the spec's [corners])"
            )
        if param != "none" and param not in calibratable:
            raise CornerError(
                f"--sets {name}={param}: not a calibratable [timing] parameter; choose one of: {', '.join(calibratable)}, or none"
            )
        out[name] = replace(out[name], sets=None if param == "none" else param)
    taken: dict[str, str] = {}
    for name in NAMES:
        p = out[name].sets if name in out else None
        if p is None:
            continue
        if p in taken:
            raise CornerError(f"--sets: {p} is set by both {taken[p]} and {name} (one parameter per figure)")
        taken[p] = name
    return out


def check_physical(corners: dict[str, Corner], timing: TimingTable) -> None:
    """Every figure within what the host link can carry: the spec's link, or the sequential
    read's figure when that corner sets the link (and no link beyond the core's 1 TB/s)."""
    link = float(timing["host_link_bytes_per_s"]["value"])
    what = "timing.host_link_bytes_per_s"
    sr = corners.get("seq-read")
    if sr is not None and sr.sets == "host_link_bytes_per_s":
        link, what = min(sr.bytes_per_s, LINK_MAX), "the seq-read figure, which sets host_link_bytes_per_s"
    for c in corners.values():
        if c.bytes_per_s > link * (1 + LINK_SLACK):
            raise CornerError(
                f"{c.origin}: {c.label} at {figure_text(c.value)} {c.unit} moves {c.bytes_per_s / 1e6:,.0f} MB/s, "
                f"more than the host link carries ({link / 1e6:,.0f} MB/s: {what}): out of physical range"
            )
    rr, rw = corners.get("rand-read"), corners.get("rand-write")
    if rr is not None and rw is not None and rr.sets and rw.sets and rr.shape[0] == rw.shape[0] and rw.value > rr.value:
        # Every steady-state random write programs NAND (and GC reads and rewrites more), where a
        # read only reads a page: no NAND writes faster than it reads. The twin cannot fit such a
        # pair: the read's parameter runs away (tR 3.7 ms for 40K IOPS) and binds the write, and
        # the fit failed after a minute naming neither figure's real fault.
        raise CornerError(
            f"{rw.origin}: {rw.label} at {figure_text(rw.value)} IOPS is above {rr.label} at {figure_text(rr.value)} IOPS "
            f"({rr.origin}): a drive's steady-state random writes (a NAND program each, and GC) are slower than its "
            f"random reads of the same size; give a write figure up to {figure_text(rr.value)} IOPS (a fresh-out-of-box "
            "burst is not the steady state), or make it a prediction (--sets rand-write=none)"
        )


def check_blocks(jobs: Iterable[tuple[str, str, int]], spec: dict[str, Any]) -> None:
    """Every job's block a whole number of the twin's LBAs: namespace 1 is created in LBA
    format 0 (`capacity.lba_bytes[0]`), and the twin's fio refuses part of one (a traceback
    from calibrate and validate until 2026-11-30: fio JSON of 2 KiB jobs, a 4 KiB-LBA spec).
    `jobs`: (where the shape was read, label, block bytes)."""
    lba = int(spec["capacity"]["lba_bytes"]["value"][0])
    for where, label, bs in jobs:
        if bs % lba:
            raise CornerError(
                f"{where}: {label}: a {bs:,}-byte block is not a whole number of the twin's {lba:,}-byte LBAs "
                "(capacity.lba_bytes[0]: the LBA format its namespace is created in); measure the drive in that format"
            )


# --------------------------------------------------------------------------- fio jobs


def job_section(c: Corner) -> str:
    bs, qd, jobs = c.shape
    return f"[{c.name}]\nrw={FIO_RW[c.name]}\nbs={fio_bs(bs)}\niodepth={qd}\nnumjobs={jobs}\n"


def job_text(c: Corner, ramp: str, runtime: str, target: str = "") -> str:
    """The job that measures corner `c`: the options of python/ssdtwin/jobs/cm6-*.fio with
    the corner's shape (the same run on a twin), `target` lines added to [global]; `ramp`
    and `runtime` as fio takes them (`1000ms`, `60s`)."""
    return (
        f"[global]\nioengine=libaio\ndirect=1\ntime_based\nruntime={runtime}\nramp_time={ramp}\ngroup_reporting\n{target}\n{job_section(c)}"
    )


# Windows of the printed jobs on a real drive (ramp, runtime) in seconds: long enough that a
# drive's own variation averages out (on the twin, experiments.CM6_WINDOWS_MS).
REAL_WINDOWS_S = {"seq-read": (30, 60), "rand-read": (30, 60), "seq-write": (30, 120), "rand-write": (30, 300)}
DEVICE = "/dev/nvme0n1"

_WARNING = f"""; THE DEVICE: filename={DEVICE} is a placeholder. Change it to the namespace to measure in every
; file (sed -i 's,{DEVICE},/dev/nvmeXnY,' *.fio). The write jobs DESTROY ALL DATA on it.
"""


def _precondition_seq() -> str:
    return (
        "; SNIA WIPC: sequential 128 KiB writes over twice the capacity (what the twin does before\n"
        "; the sequential corners; experiments.cm6_drive).\n"
        f"[global]\nioengine=libaio\ndirect=1\nfilename={DEVICE}\nsize=100%\n\n"
        "[precondition-seq]\nrw=write\nbs=128k\niodepth=32\nnumjobs=1\nloops=2\n"
    )


def _precondition_rand(bs: int) -> str:
    return (
        f"; Random {human_bytes(bs)} writes over three times the capacity, after precondition-seq (the twin:\n"
        "; 2x, then one more pass whose WAF is the steady-state WAF; experiments.cm6_drive). Uniform\n"
        "; random with replacement, as the twin's (norandommap): fio's random map would write each\n"
        "; loop as a permutation of the blocks, a state of lower WAF than the twin's.\n"
        f"[global]\nioengine=libaio\ndirect=1\nfilename={DEVICE}\nsize=100%\nnorandommap\n\n"
        f"[precondition-rand]\nrw=randwrite\nbs={fio_bs(bs)}\niodepth=32\nnumjobs=1\nloops=3\n"
    )


def print_jobs(
    directory: Path, corners: dict[str, Corner], after: Sequence[tuple[str, str]] = (), spec: str = "--spec mine.toml "
) -> list[Path]:
    """Write the fio jobs behind the figures, numbered in the order to run them, then the
    jobs `after` ((stem, text): `measured.printed_jobs`, in random steady state), and
    run.sh, which runs them and keeps each one's JSON in results/ (its comment names the
    calibrate command with `spec`, how the command named the spec). Returns the files.

    A file of the folder that differs from the one printed now is not replaced (CornerError,
    nothing written): it is a job the user edited, most likely its `filename=`, and the
    placeholder put back would aim the write jobs at /dev/nvme0n1 again."""
    rand_bs = corners["rand-write"].shape[0] if "rand-write" in corners else RAND_SHAPE[0]
    files: list[tuple[str, str]] = [("1-precondition-seq", _precondition_seq())]
    for n, name in enumerate(("seq-read", "seq-write"), 2):
        if name in corners:
            files.append((f"{n}-{name}", _measure_job(corners[name])))
    files.append(("4-precondition-rand", _precondition_rand(rand_bs)))
    for n, name in enumerate(("rand-read", "rand-write"), 5):
        if name in corners:
            files.append((f"{n}-{name}", _measure_job(corners[name])))
    files += after
    texts = {
        directory / f"{stem}.fio": _WARNING + text.replace("[global]\n", f"[global]\n{_seed_lines(n)}", 1)
        for n, (stem, text) in enumerate(files, 1)
    }
    run = directory / "run.sh"
    texts[run] = _run_sh([stem for stem, _ in files], directory, spec)
    for p, text in texts.items():
        try:
            old = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as e:
            raise CornerError(f"--print-jobs {directory}: {p} exists and cannot be read ({e.__class__.__name__}); nothing written") from e
        if old != text:
            device = re.search(r"(?m)^filename=(.*)$", old)
            edited = f" (its filename={device.group(1)})" if device and device.group(1) != DEVICE else ""
            raise CornerError(
                f"--print-jobs {directory}: {p} exists and differs from the file printed now{edited}: an edited job is not "
                "replaced; print to a new folder, or remove the old jobs first; nothing written"
            )
    directory.mkdir(parents=True, exist_ok=True)
    for p, text in texts.items():
        p.write_text(text)
    run.chmod(0o755)
    return list(texts)


def _seed_lines(n: int) -> str:
    """A seed of its own for each printed job. fio seeds every job of a run alike
    (randrepeat=1, thread 1: each file here is a run of one job), so without this a random
    read job reads the blocks in the very order the random precondition wrote them, and
    reads meet the pages they share in the NAND's page registers: a replay, not random
    reads (measured on a twin: 4 KiB QD1 reads 119 us against 366 us with their own seed).
    fio 3.33 takes randseed only with randrepeat=0 (init.c), and stays reproducible."""
    return f"randrepeat=0\nrandseed={n}\n"


def _measure_job(c: Corner) -> str:
    ramp, runtime = REAL_WINDOWS_S[c.name]
    head = f"; {c.label}: {figure_text(c.value)} {c.unit} ({c.source})\n" if c.value else f"; {c.label}\n"
    return head + job_text(c, f"{ramp}s", f"{runtime}s", target=f"filename={DEVICE}\n" + _NO_MAP.get(c.name, ""))


# Random jobs draw offsets with replacement, as the twin's random writes do: one fio job with
# its random map writes a permutation of the blocks each pass, whose WAF is lower (CM6-R at
# 1/256 after 2x random: 3.13 over two such passes against 4.12 without the map;
# docs/calibration.md, "Uniform random, as the twin's").
_NO_MAP = {"rand-read": "norandommap\n", "rand-write": "norandommap\n"}


def _run_sh(stems: list[str], directory: Path, spec: str) -> str:
    """run.sh: the jobs in order, each one's JSON in results/ beside them (it cds there), so
    the folder to give --measured is `directory`/results/ from where --print-jobs ran; `spec`
    is how the calibrate command it names gives the spec (`--spec acme.toml `)."""
    lines = "\n".join(f"fio --output-format=json --output=results/{s}.json {s}.fio" for s in stems)
    return (
        "#!/bin/sh\n"
        f"# Runs the jobs in order on the device named in them ({DEVICE} until you change it:\n"
        "# the write jobs destroy all data on it), each one's fio JSON kept in results/ here, then:\n"
        f"#   ssdtwin calibrate {spec}--measured {directory / 'results'}/ --out mine-fitted.toml\n"
        f"#   ssdtwin validate --spec mine-fitted.toml --measured {directory / 'results'}/\n"
        'set -e\ncd "$(dirname "$0")"\nmkdir -p results\n' + lines + "\n"
    )


# --------------------------------------------------------------------------- --measured

# `ssdtwin pts` element names (pts/tests.py) of the corners: SEQ 128 KiB (tp) and RND 4 KiB
# (iops) at 100 % reads or writes; any block size, matched against the corner's.
_PTS_ELEMENT = re.compile(r"^(seq|rnd)-([0-9.]+[km]?)-(100_0|0_100)$")


@dataclass(frozen=True)
class _Found:
    name: str
    jobname: str
    value: float
    shape: tuple[int, int, int]
    file: Path
    fio: str


def _figure_of(name: str, found: list[_Found], where: str) -> Corner:
    """The corner from its matched jobs (several: the rounds of a PTS window, averaged)."""
    shapes = {f.shape for f in found}
    if len(shapes) > 1:
        raise CornerError(f"{where}: {name} is measured with different job shapes in {', '.join(str(f.file) for f in found)}")
    value = sum(f.value for f in found) / len(found)
    bs, qd, jobs = found[0].shape
    files = found[0].file.name if len(found) == 1 else f"{len(found)} rounds {found[0].file.name} .. {found[-1].file.name}"
    c = Corner(name, value, "", None, bs, qd, jobs, origin=str(found[0].file))
    return replace(c, source=f"[SRC] measured: {found[0].fio} JSON {files}, {c.label} = {value:,.6g} {c.unit}")


def check_measured_dir(directory: Path) -> None:
    """A `--measured` folder exists and is a folder, or a one-line error naming it."""
    try:
        is_dir = directory.is_dir()
    except OSError as e:  # a parent not searchable
        raise CornerError(f"--measured {directory}: cannot read it ({e.strerror or e.__class__.__name__})") from None
    if is_dir:
        return
    if not directory.exists() and not directory.is_symlink():
        raise CornerError(f"--measured {directory}: no such folder (it does not exist; give the folder holding the drive's fio JSON)")
    raise CornerError(f"--measured {directory}: not a folder (give the folder holding the drive's fio JSON, not a file in it)")


def read_measured(directory: Path, shapes: dict[str, Corner], required: bool = True) -> dict[str, Corner]:
    """Corners from the fio JSON files under `directory` (recursively): jobs named as a
    corner (`print_jobs`), or an `ssdtwin pts` report's elements (SEQ/RND at 100 % reads or
    writes with the corner's block size; the rounds of the measurement window, averaged).
    The job shape is the one fio ran (`job options`), which the twin then repeats. Finding
    none is an error when `required` (calibration), an empty result otherwise."""
    check_measured_dir(directory)
    found: dict[str, list[_Found]] = {}
    for path in json_files(directory):
        if path.name in ("pts.json", "result.json", "steady.json"):
            continue
        for where, report in load_reports(path):
            for f in _jobs_of(path, where, report, shapes):
                if _in_window(path, f.jobname):
                    found.setdefault(f.name, []).append(f)
    if not found and required:
        names = f"{', '.join(NAMES[:-1])} or {NAMES[-1]}"
        raise CornerError(
            f"--measured {directory}: no fio JSON job named {names} (the jobs of `ssdtwin calibrate --print-jobs`) "
            "nor an `ssdtwin pts` report's seq-128k or rnd-4k element at 100 % reads or writes"
        )
    out = {}
    for name in NAMES:
        fs = found.get(name, [])
        if len(fs) > 1 and not all(_ROUND.match(f.file.name) for f in fs) or len({f.file.parent for f in fs}) > 1:
            raise CornerError(f"--measured {directory}: {name} is in more than one result: {', '.join(str(f.file) for f in fs)}")
        if fs:
            out[name] = _figure_of(name, fs, f"--measured {directory}")
    return out


def json_files(directory: Path) -> list[Path]:
    """The files named *.json under `directory`, recursively; a directory of that name (a
    run's folder called results.json) is walked, not read."""
    return sorted(p for p in directory.rglob("*.json") if not p.is_dir())


def load_reports(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The fio JSON reports in a file, each with the name its errors use: fio's notes and
    normal output around the JSON skipped (`--output-format=json,normal`), and every report
    of a file that holds several (`fio ... >> all.json` per job; then `all.json report 2`).
    Other JSON (a PTS table, a note) is not ours to judge and is left out."""
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise CornerError(f"{path}: not readable ({e.strerror or e.__class__.__name__})") from None
    start = text.find("{")
    if start < 0:
        raise CornerError(f"{path}: holds no JSON")
    docs: list[Any] = []
    while start >= 0:
        try:
            doc, end = json.JSONDecoder().raw_decode(text, start)
        except json.JSONDecodeError as e:
            where = f"{path}" if not docs else f"{path} report {len(docs) + 1}"
            raise CornerError(f"{where}: not valid JSON ({e.msg} at line {e.lineno})") from None
        docs.append(doc)
        # The next report starts a line, as fio prints one; braces inside fio's normal
        # output after the JSON do not.
        nxt = re.compile(r"^\{", re.M).search(text, end)
        start = nxt.start() if nxt else -1
    out = []
    for k, doc in enumerate(docs, 1):
        if not isinstance(doc, dict) or "fio version" not in doc:
            continue
        where = str(path) if len(docs) == 1 else f"{path} report {k}"
        if not isinstance(doc.get("jobs"), list):
            raise CornerError(f'{where}: jobs: missing or not a list (a fio report has a "jobs" list)')
        out.append((where, doc))
    return out


# The PTS test whose elements are a corner's figure: IOPS (TC4/QD32) for the random corners,
# Throughput for the sequential ones. The LAT test's RND 4KiB 100/0 and 0/100 are QD1 runs of
# the same names: not corners.
_PTS_TEST_OF = {"rnd": "iops", "seq": "tp"}


def _corner_name(path: Path, job: str, bs: tuple[int, int], shapes: dict[str, Corner]) -> Optional[str]:
    """The corner a job measures, from its name; `bs`: its (read, write) block sizes."""
    if job in NAMES:
        return job
    m = _PTS_ELEMENT.match(job)
    if not m:
        return None
    if path.parent.name == "fio" and path.parent.parent.name != _PTS_TEST_OF[m.group(1)]:
        return None  # a PTS report's round of another test
    name = f"{'seq' if m.group(1) == 'seq' else 'rand'}-{'read' if m.group(3) == '100_0' else 'write'}"
    want = shapes[name].shape[0] if name in shapes else (SEQ_SHAPE if name.startswith("seq") else RAND_SHAPE)[0]
    return name if bs[0 if name.endswith("read") else 1] == want else None


def _jobs_of(path: Path, where: str, report: dict[str, Any], shapes: dict[str, Corner]) -> list[_Found]:
    """The corners' jobs of one fio report of `path` (`where` names it in errors)."""
    glob = options(report, "global options", f"{where}: ")
    by_name: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for i, job in enumerate(report["jobs"]):
        if not isinstance(job, dict) or not isinstance(job.get("jobname"), str):
            raise CornerError(f"{where}: jobs[{i}].jobname: missing or not a string")
        by_name.setdefault(job["jobname"], []).append((i, job))
    out = []
    for jobname, jobs in by_name.items():
        i0, j0 = jobs[0]
        job_opts = options(j0, "job options", f"{where}: jobs[{i0}].")
        opts = {**glob, **job_opts}
        field = f"{where}: jobs[{i0}] ({jobname})"
        read_bs, write_bs, _ = block_sizes(glob, job_opts, field)
        name = _corner_name(path, jobname, (read_bs, write_bs), shapes)
        if name is None:
            continue
        check_merged(j0, opts, field)
        if not _rw_fits(name, opts):
            rw = opts.get("rw", opts.get("readwrite"))
            raise CornerError(f"{field}: job options.rw = {rw}: a {name} figure is measured with rw={FIO_RW[name]}")
        kb = kb_base_of(glob, job_opts, field)
        qd = whole(opts.get("iodepth", 1), f"{field}: job options.iodepth", kb_base=kb)
        njobs = whole(opts.get("numjobs", 1), f"{field}: job options.numjobs", MAX_JOBS, kb_base=kb)
        d = "read" if name.endswith("read") else "write"
        total = 0.0
        for i, job in jobs:
            check_error(job, f"{where}: jobs[{i}]")
            check_depth(job, qd, f"{where}: jobs[{i}]")
            # unified_rw_reporting=1: fio reports one "mixed" direction, this job's only one
            at = d if d in job or not isinstance(job.get("mixed"), dict) else "mixed"
            total += _rate(job.get(at), name.startswith("seq"), f"{where}: jobs[{i}].{at}", d)
        value = total / 1e6 if name.startswith("seq") else total
        # Without group_reporting fio reports each of numjobs clones on its own: summed above.
        shape = (read_bs if d == "read" else write_bs, qd, njobs if len(jobs) == 1 else len(jobs))
        out.append(_Found(name, jobname, value, shape, path, str(report["fio version"])))
    return out


def options(obj: dict[str, Any], key: str, prefix: str) -> dict[str, Any]:
    """fio's `global options` of a report or `job options` of a job: an object of strings
    (absent: none). `prefix` + `key` names the field in errors."""
    v = obj.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise CornerError(f'{prefix}{key}: not an object (fio writes the options as "name" : "value")')
    return v


def _rate(stats: Any, sequential: bool, where: str, d: str) -> float:
    """A direction's bytes per second (sequential) or IOPS. fio before 3.2 has no bw_bytes,
    only bw in KiB/s (1024 B, whatever kb_base; fio's JSON docs); 3.2 added bw_bytes."""
    key = "bw_bytes" if sequential else "iops"
    v = stats.get(key) if isinstance(stats, dict) else None
    if v is None and sequential and isinstance(stats, dict) and isinstance(stats.get("bw"), (int, float)):
        key, v = "bw", stats["bw"] * 1024
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        also = " (nor bw, fio's KiB/s before 3.2)" if sequential else ""
        raise CornerError(f"{where}.{key}: missing or not a number{also}")
    if not math.isfinite(v):  # JSON's 1e400 reads as inf, and Python's reader takes NaN
        raise CornerError(f"{where}.{key} = {stats[key]}: not a finite number")
    if not v > 0:
        raise CornerError(f"{where}.{key} = {stats[key]}: the job did no {d}s")
    if (v / 1e6 if sequential else v) > MAX_FIGURE:  # as for --datasheet: a line of digits otherwise
        raise CornerError(
            f"{where}.{key} = {stats[key]}: more than {MAX_FIGURE:.0e} {'MB/s' if sequential else 'IOPS'} (no drive comes near it)"
        )
    return float(v)


def _rw_fits(name: str, opts: dict[str, Any]) -> bool:
    """rw= as the corner's (`read`, `randwrite`), or the mixed form at 100 % or 0 % reads
    (`randrw` with `rwmixread=100`: what an `ssdtwin pts` IOPS element runs)."""
    rw = opts.get("rw", opts.get("readwrite"))
    if rw == FIO_RW[name] or (name == "seq-read" and rw == "seqread"):
        return True
    mixed = {"seq": ("rw", "readwrite"), "rand": ("randrw",)}[name.split("-")[0]]
    want = "100" if name.endswith("read") else "0"
    return rw in mixed and str(opts.get("rwmixread", "50")) == want


def block_sizes(glob: dict[str, Any], job: dict[str, Any], field: str) -> tuple[int, int, int]:
    """The block size of reads, writes and trims as fio ran the job: `bs` of the global
    options, then the job's, in fio's own syntax (`4k,64k`: 4 KiB reads, 64 KiB writes;
    `128KiB` is 128,000 bytes under fio's default kb_base=1024, fio 3.33 measured)."""
    from ..fio.options.values import per_direction_segments, store_per_direction
    from ..fio.units import parse_size

    kb_base = kb_base_of(glob, job, field)

    def one(text: str) -> int:
        n = parse_size(text, kb_base=kb_base)
        assert isinstance(n, int)  # no percentages without allow_percent
        return n

    sizes = [4096, 4096, 4096]  # fio's default
    for where, opts in (("global options", glob), ("job options", job)):
        if "bs" not in opts:
            continue
        v = opts["bs"]
        try:
            store_per_direction(sizes, per_direction_segments(str(v)), one)
        except ValueError as e:
            raise CornerError(f"{field}: {where}.bs = {v}: not a block size ({e})") from None
        bad = [n for n in sizes if n <= 0 or n % 512 or n > MAX_BLOCK_BYTES]
        if bad:
            raise CornerError(
                f"{field}: {where}.bs = {v}: {bad[0]} bytes is not a block size the twin runs (a multiple of 512 bytes up to 16 MiB)"
            )
    return sizes[0], sizes[1], sizes[2]


def kb_base_of(glob: dict[str, Any], job: dict[str, Any], field: str) -> int:
    """fio's kb_base for the job (1024 unless set): what `k` means in its sizes and numbers."""
    kb = job.get("kb_base", glob.get("kb_base", "1024"))
    if str(kb) not in ("1000", "1024"):
        raise CornerError(f"{field}: job options.kb_base = {kb}: fio takes 1000 or 1024")
    return int(str(kb))


def check_error(job: dict[str, Any], where: str) -> None:
    """Refuse a job fio stopped with an error. fio's `error` is the errno the job failed
    with: an I/O error (EIO, 5) or a full device (ENOSPC, 28), but as often a setup that
    failed (EINVAL, 22: an option the engine or file refused; ENOENT, 2: no such file)."""
    err = job.get("error", 0)
    if not err:
        return
    name = errno.errorcode.get(err) if isinstance(err, int) and not isinstance(err, bool) else None
    what = f" ({name}: {os.strerror(err)})" if name else ""
    raise CornerError(
        f"{where}.error = {err}{what}: the job failed (fio's error is the errno it stopped on, from its setup or its I/O; "
        "its normal output's err= line says where)"
    )


def check_merged(job: dict[str, Any], opts: dict[str, Any], field: str) -> None:
    """Refuse an entry in which fio folded several jobs. With group_reporting fio reports
    one entry per reporting group, named after its first job, with its last job's `job
    options` and the I/O of all (stat.c __show_run_stats); jobs of different sections
    share a group unless `stonewall` or `new_group` starts one. The JSON keeps no count of
    the jobs folded, but shows them two ways: I/O in a direction the `rw` does not do
    (verify's reads aside), and a `job_runtime` (the jobs' runtimes, summed) longer than
    numjobs jobs run for (each at most the longest direction's `runtime`; 1.5x: a job's
    own time can pass its I/O's by a few ms)."""
    rw = str(opts.get("rw", opts.get("readwrite", "read")))
    verify = str(opts.get("verify", "0")) not in ("0", "none", "null")
    other = {"read": "write", "randread": "write", "write": "read", "randwrite": "read"}.get(rw)
    ios = _stat(job, other).get("total_ios") if other else None
    sign = ""
    if isinstance(ios, (int, float)) and ios > 0 and not (other == "read" and verify):
        sign = f"{other}.total_ios = {ios:,.0f} under rw={rw}"
    runtimes = [_stat(job, d).get("runtime") for d in ("read", "write", "trim")]
    longest = max((r for r in runtimes if isinstance(r, (int, float))), default=0)
    total = job.get("job_runtime")
    try:
        njobs = int(str(opts.get("numjobs", 1)))
    except ValueError:
        njobs = 1  # whole() names it
    if not sign and isinstance(total, (int, float)) and longest > 0 and total > 1.5 * njobs * longest:
        sign = f"job_runtime = {total:,.0f} ms, about {total / longest:.0f} jobs of {longest:,.0f} ms, against numjobs = {njobs}"
    if sign:
        raise CornerError(
            f"{field}: several jobs reported as one ({sign}): fio's group_reporting folded the jobs of its reporting "
            f"group into this entry, named after the first, with the last one's job options (rw={rw}); "
            "run each job on its own, or give each section stonewall or new_group"
        )


def _stat(job: dict[str, Any], d: str) -> dict[str, Any]:
    st = job.get(d)
    return st if isinstance(st, dict) else {}


def check_depth(job: dict[str, Any], iodepth: int, where: str) -> None:
    """Refuse a job that ran at a far lower queue depth than its `iodepth`: the twin runs
    the iodepth, so the figure would fit a parameter to another load. fio's iodepth_level
    (% of the I/O by the depth it was submitted at, in power-of-2 buckets: `16` holds
    16-31) says so: a sync engine (psync) runs one I/O at a time at any iodepth, a rate
    cap keeps the queue short. Half the I/O below the iodepth's bucket is refused."""
    levels = job.get("iodepth_level")
    if not isinstance(levels, dict) or iodepth < 2:
        return
    bucket = min(1 << (min(iodepth, 64).bit_length() - 1), 64)
    below = {k: v for k, v in levels.items() if k.isdigit() and int(k) < bucket and isinstance(v, (int, float))}
    if sum(below.values()) > 50:
        k, v = max(below.items(), key=lambda kv: kv[1])
        raise CornerError(
            f"{where}.iodepth_level: {v:g} % of the I/O at depth {k}{'' if k == '1' else '+'}, against "
            f"job options.iodepth = {iodepth}: the drive did not run at that depth, and the twin would "
            "(a sync ioengine such as psync runs one I/O at a time; use libaio or io_uring, and no rate cap)"
        )


def whole(v: Any, field: str, hi: int = 65536, kb_base: int = 1024) -> int:
    """iodepth (an NVMe queue holds 65536 commands) or numjobs (hi 4096: fio's
    REAL_MAX_JOBS, which the twin's fio keeps) as fio ran them: fio reads both with its
    size syntax (`iodepth=1k` is 1024, 1000 under kb_base=1000; fio 3.33 measured)."""
    from ..fio.units import parse_uint

    try:
        n = parse_uint(str(v), kb_base=kb_base)
    except ValueError:
        raise CornerError(f"{field} = {v}: not a whole number") from None
    if not 1 <= n <= hi:
        raise CornerError(f"{field} = {n}: must be 1..{hi}")
    return n


def _pts_window(test_dir: Path, element: str) -> Optional[tuple[int, int]]:
    """The measurement window (first and last round) of an `ssdtwin pts` test for one of
    its elements: its pass's (steady.json `passes`: Throughput runs one pass per block
    size, each numbering its rounds from 1), else the test's; None outside a PTS report."""
    token = element.split("-")[1]
    for name in ("steady.json", "result.json"):
        path = test_dir / name
        if not path.is_file():
            continue
        try:
            doc = json.loads(path.read_text())
        except (json.JSONDecodeError, OSError) as e:
            raise CornerError(f"{path}: not readable as JSON ({e.__class__.__name__})") from None
        if not isinstance(doc, dict):
            raise CornerError(f"{path}: not a PTS {name[:-5]} document (a JSON object)")
        for p in doc.get("passes") or []:
            if isinstance(p, dict) and p.get("pass") == f"{test_dir.name}-{token}" and _is_window(p.get("window")):
                return (p["window"][0], p["window"][1])
        if _is_window(doc.get("window")):
            return (doc["window"][0], doc["window"][1])
    return None


def _is_window(w: Any) -> bool:
    return isinstance(w, list) and len(w) == 2 and all(isinstance(x, int) for x in w)


_ROUND = re.compile(r"^r(\d+)-")


def _in_window(path: Path, jobname: str) -> bool:
    """A PTS round file (<test>/fio/rNN-<element>.json) counts when NN is in its window;
    any other file always counts."""
    m = _ROUND.match(path.name)
    if m is None or path.parent.name != "fio":
        return True
    w = _pts_window(path.parent.parent, jobname)
    return w is None or w[0] <= int(m.group(1)) <= w[1]
