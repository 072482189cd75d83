"""fio job files → resolved jobs → engine input (docs/fio.md §2–§3).

The reading follows fio 3.33's ``init.c __parse_jobs_ini`` and ``options.c
fio_options_parse``; every rule that surprised us was measured on the real binary and is
listed in docs/fio.md. In short:

* ``[global...]`` (any section whose name *starts* with "global") adds to the defaults of
  the jobs below it; several are allowed and they accumulate. Defaults do not carry over
  to the next job file, and the first job of every file after the first gets a stonewall.
* ``;`` and ``#`` start a comment anywhere on a line, so values cannot contain them.
* ``include FILE`` is looked up relative to the current directory first, then to the
  including file; included files cannot open sections.
* ``${VAR}`` is replaced by the environment (unset: empty); ``$pagesize``, ``$mb_memory``
  and ``$ncpus`` are replaced and the value is then evaluated as integer arithmetic
  (fio pipes it through ``bc``).
* Within a section, options are applied in order of priority (``kb_base`` first,
  ``filename`` last), otherwise as written; a later option overrides an earlier one.
* numjobs clones are numbered like fio: the job itself is subjob 0 and takes the next
  thread number; the following thread numbers get subjobs N-1, N-2, ..., 1.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, TypedDict, Union

from . import limits as L
from . import options as O
from .bc import bc_integer
from .contract import JobSpec
from .errors import FioJobError, Where
from .errors import where as _where
from .facts import splitmix
from .units import N2S_BYTE, num2str

__all__ = ["parse", "parse_string", "Run", "Job", "Clone", "ENGINE_INPUT_VERSION"]

ENGINE_INPUT_VERSION = 1

_MASK64 = (1 << 64) - 1
_FIO_RANDSEED = 0xB1899BED
_GOLDEN = 0x9E370001
_SEED_NAMES = (
    "bs_read",
    "bs_write",
    "bs_trim",
    "verify",
    "rwmix",
    "file",
    "offset",
    "file_size",
    "trim",
    "buffer",
    "seq_rand_read",
    "seq_rand_write",
    "seq_rand_trim",
    "start_delay",
    "dedupe",
    "poisson_read",
    "zone",
    "poisson_write",
    "poisson_trim",
    "prio_cmds",
    "dedupe_working_set",
)
_BLOCK_OFF = _SEED_NAMES.index("offset")


# --- data model ---------------------------------------------------------------------------

_SectionEcho = tuple[int, bool, str, list[tuple[str, Optional[str]]], int]


@dataclass
class _Line:
    name: str
    value: Optional[str]
    file: str
    line: int


@dataclass
class _Section:
    name: str
    is_global: bool
    file: str
    line: int
    file_index: int
    lines: list[_Line] = field(default_factory=list)


@dataclass
class Clone:
    """One fio thread: a job or one of its numjobs clones."""

    job: Job
    thread_number: int  # 1-based, over every job and clone of the run
    subjob: int  # fio's subjob_number: 0 for the job itself
    group_id: int
    seed: int  # the offset-stream seed (fio's FIO_RAND_BLOCK_OFF seed)
    seeds: dict[str, int]  # every fio random stream's seed, by name
    seed_source: str  # "randrepeat", "randseed" or "run_seed"
    startdelay_us: int
    batch: int  # start batch: a stonewall starts a new one after every earlier clone ends

    @property
    def name(self) -> str:
        return self.job.name


@dataclass
class Job:
    """A job section with inheritance applied."""

    name: str
    section: str
    file: str
    line: int
    file_index: int
    index: int
    group_id: int
    stonewall: bool
    options: list[tuple[str, Optional[str]]]  # "job options" echo: canonical name, value
    state: dict[str, Any] = field(repr=False)
    clones: list[Clone] = field(default_factory=list, repr=False)

    # Convenience views of the resolved options --------------------------------------
    @property
    def rw(self) -> str:
        return str(self.state["rw"])

    @property
    def numjobs(self) -> int:
        return int(self.state["numjobs"])

    @property
    def iodepth(self) -> int:
        """The iodepth as configured (fio prints and reports this one)."""
        return int(self.state["iodepth"])

    @property
    def effective_iodepth(self) -> int:
        """Queue depth the engine really keeps: 1 for synchronous engines, as in fio."""
        if self.state["ioengine"] in O.SYNC_ENGINES:
            return 1
        return int(self.state["iodepth"])

    @property
    def engine_async(self) -> bool:
        engine = self.state["ioengine"]
        if engine in O.SYNC_ENGINES:
            return False
        if engine == "null":
            return bool(self.state["iodepth"] > 1)
        return True

    @property
    def group_reporting(self) -> bool:
        return bool(self.state["group_reporting"])

    @property
    def description(self) -> Optional[str]:
        d = self.state["description"]
        return None if d is None else str(d)

    def block_sizes(self) -> list[tuple[int, int]]:
        """(min, max) block size per direction after fio's fixup rules."""
        return [_bs_range(self.state, d) for d in range(3)]

    def header_line(self) -> str:
        """The line fio prints for a job before it starts (init.c add_job)."""
        st = self.state
        i2p = _is_power_of_2(st["kb_base"])
        sig = st["significant_figures"]
        parts = []
        for label, (lo, hi) in zip("RWT", self.block_sizes()):
            parts.append(f"({label}) {num2str(lo, sig, 1, i2p, N2S_BYTE)}-{num2str(hi, sig, 1, i2p, N2S_BYTE)}")
        return f"{self.name}: (g={self.group_id}): rw={self.rw}, bs={', '.join(parts)}, ioengine={st['ioengine']}, iodepth={st['iodepth']}"


class IgnoredOption(TypedDict):
    """An option accepted with no effect on a simulated drive (docs/fio.md §2.6), once per job:
    its canonical name, its value as written (None for a flag), why, and where it was
    written (a [global] line for inherited ones)."""

    job: str
    option: str
    value: Optional[str]
    reason: str
    file: Optional[str]
    line: Optional[int]


@dataclass
class Run:
    """Everything parsed from the job files of one fio invocation."""

    jobs: list[Job]
    clones: list[Clone]
    global_options: list[tuple[str, Optional[str]]]
    files: list[str]
    warnings: list[str]
    run_seed: int
    # (file index, is_global, section name, echo, length) per section, for showcmd(); the
    # echo is echo[:length]. A global section's echo is the accumulated global list, as
    # fio's def_thread keeps it (a prefix of a list shared by the file's global sections).
    sections: list[_SectionEcho] = field(default_factory=list, repr=False)
    # Options accepted with no effect on a simulated drive (docs/fio.md §2.6), one dict per
    # job and option: job, option (canonical name), value (as written, None for a flag),
    # reason, file, line (where it was written: a [global] line for inherited ones).
    ignored: list[IgnoredOption] = field(default_factory=list)
    # The drive's WAF measurement over the run (keys of nvme/waf.rs), set by whoever ran it
    # on a drive (fio.run.run_jobs); the JSON's "ssdtwin" object carries it. The parser only
    # carries it (its type, core_types.WafMeasurement, is the library's).
    waf: Optional[Mapping[str, object]] = None

    def showcmd(self) -> str:
        """What ``fio --showcmd`` prints for these job files (init.c dump_opt_list):
        one ``fio ...`` line per file with every section's options as ``--name=value``."""
        lines = []
        for file_index in range(len(self.files)):
            parts = ["fio "]
            for index, is_global, name, echo, length in self.sections:
                if index != file_index:
                    continue
                if not is_global:
                    parts.append(f"--name={name} ")
                for opt, value in echo[:length]:
                    if value is None:
                        parts.append(f"--{opt} ")
                    else:
                        quote = '"' if opt == "description" else ""
                        parts.append(f"--{opt}={quote}{value}{quote} ")
            lines.append("".join(parts))
        return "\n".join(lines) + "\n"

    def header_text(self, fio_version: str = "fio-3.33") -> str:
        """What fio prints before the results: job lines, version, "Starting ..."."""
        out: list[str] = []
        for job in self.jobs:
            out.append(job.header_line())
            if job.numjobs > 1:
                out.append("...")
        out.append(fio_version)
        threads = sum(len(j.clones) for j in self.jobs if j.state["noop"].get("thread"))
        processes = len(self.clones) - threads
        words = []
        if threads:
            words.append(f"{threads} thread{'s' if threads > 1 else ''}")
        if processes:
            words.append(f"{processes} process{'es' if processes > 1 else ''}")
        out.append("Starting " + " and ".join(words))
        return "\n".join(out) + "\n"

    def to_engine(
        self,
        device_size_bytes: int,
        lba_bytes: int,
        namespace_sizes: Optional[Mapping[int, int]] = None,
        namespace_lba_bytes: Optional[Mapping[int, int]] = None,
        link_bytes_per_s: Optional[int] = None,
        io_unit: Optional[tuple[int, str]] = None,
    ) -> list[JobSpec]:
        """One engine input per clone, in thread order (docs/fio.md §3). A clone whose
        filename names a namespace in ``namespace_lba_bytes`` uses that LBA size;
        ``link_bytes_per_s`` (the drive's host link) bounds the bytes a job may move;
        ``io_unit`` (bytes, what it is), when larger than the LBA, is what block sizes and
        offsets must be multiples of instead (a host stack's 4 KiB block)."""
        from .engine import add_sched_fields, add_ss_fields, contract_range_error, engine_input  # local: keeps the parser importable alone

        errors: list[FioJobError] = []
        out = []
        run_exitall = any(j.state.get("exitall") for j in self.jobs)
        for clone in self.clones:
            try:
                spec = engine_input(clone, device_size_bytes, lba_bytes, namespace_sizes, namespace_lba_bytes, link_bytes_per_s, io_unit)
            except FioJobError as e:
                errors.extend(e.errors)
                continue
            add_sched_fields(spec, clone, run_exitall)
            add_ss_fields(spec, clone)
            bad = contract_range_error(spec)
            if bad:
                errors.append(
                    FioJobError(f"job {clone.job.name}: engine input {bad} is out of range", file=clone.job.file, line=clone.job.line)
                )
            out.append(spec)
        if errors:
            raise FioJobError.collect(errors)
        return out


# --- helpers used by the model ------------------------------------------------------------


def _is_power_of_2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _bs_range(st: dict[str, Any], d: int) -> tuple[int, int]:
    split = st["bssplit"][d]
    if split:
        sizes = [bs for bs, _ in split]
        return min(sizes), max(sizes)
    rng = st["bsrange"][d]
    if rng:
        lo, hi = rng
        return int(lo), int(hi)
    return int(st["bs"][d]), int(st["bs"][d])


def fio_seeds(
    thread_number: int,
    *,
    randrepeat: bool,
    randseed: int,
    randseed_set: bool,
    allrandrepeat: bool,
    is_random: bool,
    run_seed: int,
) -> tuple[list[int], str]:
    """fio's per-thread seeds (init.c setup_random_seeds / td_fill_rand_seeds).

    Every stream i gets ``s * thread_number + i`` where ``s`` starts from ``randseed``
    (default 0x89) and is multiplied by 0x9e370001 before each stream. With
    ``randrepeat=1`` (the default) the offset stream is then replaced by
    ``0xb1899bed * thread_number``. fio 3.33 does this *before* ``randseed=`` switches
    randrepeat off, so ``randseed`` alone does not change the offsets; it takes
    ``randrepeat=0`` too (verified against ``--debug=random`` first draws).

    Where fio would read the OS RNG (``randrepeat=0`` without ``randseed``) we use
    ``run_seed`` in place of ``randseed``, so every run is reproducible from its seed.
    """
    if not randrepeat and not randseed_set:
        # Mixed and forced odd: a run seed of 0 must not zero every stream of every thread
        # (fio's own default randseed, 0x89, is never 0).
        base, source = (((run_seed + 1) * 0x9E3779B97F4A7C15) & _MASK64) | 1, "run_seed"
    else:
        base, source = randseed, ("randseed" if randseed_set and not randrepeat else "randrepeat")
    seed = base & _MASK64
    for _ in range(4):
        seed = (seed * _GOLDEN) & _MASK64
    seeds = []
    for i in range(len(_SEED_NAMES)):
        seeds.append((seed * thread_number + i) & _MASK64)
        seed = (seed * _GOLDEN) & _MASK64
    if allrandrepeat:
        seeds = [(_FIO_RANDSEED * thread_number + i) & _MASK64 for i in range(len(_SEED_NAMES))]
    if is_random and randrepeat:
        seeds[_BLOCK_OFF] = (_FIO_RANDSEED * thread_number) & _MASK64
    return seeds, source


# --- reading job files --------------------------------------------------------------------


class _Budget:
    """What a run may still read (docs/fio.md §2.9): job text bytes, includes, sections.
    The first limit reached is reported once and ends the reading (``exhausted``)."""

    def __init__(self) -> None:
        self.text_bytes_left = L.MAX_JOB_TEXT_BYTES
        self.includes = 0
        self.sections = 0
        self.exhausted = False

    def take_text(self, nbytes: int) -> None:
        if nbytes > self.text_bytes_left:
            raise _TooLarge(_too_large(nbytes, self.text_bytes_left))
        self.text_bytes_left -= nbytes


class _TooLarge(ValueError):
    """The job text budget of the run is spent."""


def _too_large(nbytes: int, left: int) -> str:
    total = L.describe_bytes(L.MAX_JOB_TEXT_BYTES)
    if left == L.MAX_JOB_TEXT_BYTES:
        return f"too large: {nbytes} bytes (a run reads at most {total} of job files and includes)"
    return f"too large: {nbytes} bytes, {left} left of the {total} of job files and includes a run may read"


_FileKey = tuple[int, int]


def _file_key(path: Path) -> _FileKey:
    """(device, inode): the same file under any name or link, for include loops. Cheaper
    than resolving the path, which matters for a run with many includes. OSError when the
    file cannot be looked up (missing, a name too long ...)."""
    info = os.stat(path)
    return (info.st_dev, info.st_ino)


def _exists(path: Path) -> bool:
    """Path.exists() without its OSError for names the OS refuses (too long)."""
    try:
        os.stat(path)
    except OSError:
        return False
    return True


_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(st_mode: int) -> str:
    """``a directory``, ``a FIFO`` ...: what a path that is not a regular file is."""
    return next((name for test, name in _FILE_KINDS if test(st_mode)), "not a file")


def _read_text(path: Path, budget: _Budget) -> str:
    """The text of a job or include file, charged to ``budget``. Only a regular file of
    UTF-8 text is read, and never more than the budget allows: /dev/zero, a FIFO or a
    10 GB file fail at once. ValueError carries the reason; OSError is left to the caller."""
    # O_NONBLOCK: opening a FIFO must not wait for a writer.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"not a regular file ({file_kind(info.st_mode)})")
        budget.take_text(info.st_size)
        chunks = []
        left = info.st_size + 1  # one more: a file that grew since fstat
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > info.st_size:
        raise ValueError("changed while being read")
    return _decode(data)


def _decode(data: bytes) -> str:
    nul = data.find(b"\0")
    if nul >= 0:
        raise ValueError(f"not a text file (NUL byte at offset {nul})")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"not a text file (byte 0x{data[e.start]:02x} at offset {e.start} is not UTF-8)") from None


class _Reader:
    def __init__(
        self,
        *,
        env: Mapping[str, str],
        keywords: Mapping[str, str],
        cwd: Path,
        budget: _Budget,
    ) -> None:
        self.env = env
        self.keywords = keywords
        self.cwd = cwd
        self.budget = budget
        self.errors: list[FioJobError] = []
        self.warnings: list[str] = []

    def error(
        self, reason: str, *, file: Optional[str], line: Optional[int] = None, option: Optional[str] = None, value: Optional[str] = None
    ) -> None:
        self.errors.append(FioJobError(reason, file=file, line=line, option=option, value=value))

    def limit_reached(
        self, reason: str, *, file: Optional[str], line: Optional[int] = None, option: Optional[str] = None, value: Optional[str] = None
    ) -> None:
        """A run-wide limit: reported once, and nothing more is read."""
        if not self.budget.exhausted:
            self.budget.exhausted = True
            self.error(reason, file=file, line=line, option=option, value=value)

    # -- text level --
    def _statements(self, display: str, text: str) -> Iterator[tuple[int, str]]:
        """(line number, statement) of every line of a job or include file that holds one,
        read as fio reads it (`_fio_lines`, comments stripped); a line fio would cut is an
        error. Stops when a run-wide limit has been reached."""
        for lineno, raw in enumerate(_fio_lines(text), start=1):
            if self.budget.exhausted:
                return
            if _cut_by_fio(raw):
                self.error(_LONG_LINE, file=display, line=lineno)
                continue
            p = _strip_line(raw)
            if p:
                yield lineno, p

    def read_sections(self, display: str, text: str, path: Optional[Path], file_index: int) -> list[_Section]:
        sections: list[_Section] = []
        current: Optional[_Section] = None
        stack = [_file_key(path)] if path else []  # path was just read: it exists
        for lineno, p in self._statements(display, text):
            if p.startswith("["):
                m = re.fullmatch(r"\[(.+)\]", p)
                if not m:
                    self.error("malformed section header", file=display, line=lineno)
                    current = None
                    continue
                self.budget.sections += 1
                if self.budget.sections > L.MAX_SECTIONS:
                    self.limit_reached(
                        f"more than {L.MAX_SECTIONS} sections in a run ({L.MAX_THREADS} jobs and as many global sections)",
                        file=display,
                        line=lineno,
                    )
                    break
                name = m.group(1)
                is_global = name.startswith("global")
                if is_global and name != "global":
                    self.warnings.append(
                        f"{display}:{lineno}: section [{name}] is a global section (fio treats every name starting with 'global' as global)"
                    )
                current = _Section(name, is_global, display, lineno, file_index)
                sections.append(current)
                continue
            if current is None:
                self.error(f"option <{p}> outside of [] job section", file=display, line=lineno)
                continue
            self._statement(current, p, display, lineno, path, stack)
        return sections

    def _statement(
        self, section: _Section, p: str, display: str, lineno: int, path: Optional[Path], stack: list[_FileKey], depth: int = 0
    ) -> None:
        m = re.match(r"include(\s+(.*))?$", p)
        if m and (m.group(1) or p == "include"):
            # init.c __parse_jobs_ini: the name is everything after "include" and one blank
            target = p[len("include") + 1 :]
            if not target.strip():
                self.error("include needs a file name", file=display, line=lineno)
                return
            if target[0].isspace():
                self.error(
                    f"include: more than one blank before the file name (fio 3.33 takes the name after one blank as it "
                    f"is and would look for {target!r})",
                    file=display,
                    line=lineno,
                )
                return
            self._include(section, target, display, lineno, path, stack, depth + 1)
            return
        name, eq, value = p.partition("=")
        line = _Line(name.rstrip(), value if eq else None, display, lineno)
        if line.name == "":
            self.error("missing option name", file=display, line=lineno)
            return
        section.lines.append(line)

    def _include(
        self, section: _Section, target: str, display: str, lineno: int, path: Optional[Path], stack: list[_FileKey], depth: int
    ) -> None:
        if self.budget.exhausted:
            return
        if depth > L.MAX_INCLUDE_DEPTH:
            self.limit_reached(f"include {target}: includes nested more than {L.MAX_INCLUDE_DEPTH} deep", file=display, line=lineno)
            return
        self.budget.includes += 1
        if self.budget.includes > L.MAX_INCLUDES:
            self.limit_reached(f"include {target}: more than {L.MAX_INCLUDES} includes in a run", file=display, line=lineno)
            return
        # fio tries the name as given (relative to the current directory) and only then
        # relative to the including file (init.c __parse_jobs_ini).
        candidate = Path(target)
        if not candidate.is_absolute():
            candidate = self.cwd / target
        if not _exists(candidate) and path is not None and not Path(target).is_absolute():
            candidate = path.parent / target
        try:
            key = _file_key(candidate)
        except OSError as e:
            self.error(f"cannot open include file '{target}': {e.strerror}", file=display, line=lineno)
            return
        inc_display = str(Path(target)) if Path(target).is_absolute() else _display_path(candidate, self.cwd)
        if key in stack:
            self.error(f"include loop through '{target}'", file=display, line=lineno)
            return
        try:
            text = _read_text(candidate, self.budget)
        except OSError as e:
            self.error(f"cannot read include file '{target}': {e.strerror}", file=display, line=lineno)
            return
        except _TooLarge as e:
            self.limit_reached(f"include {target}: {e}", file=display, line=lineno)
            return
        except ValueError as e:
            self.error(f"include {target}: {e}", file=display, line=lineno)
            return
        for inc_lineno, p in self._statements(inc_display, text):
            if p.startswith("["):
                self.error("no new sections in included files", file=inc_display, line=inc_lineno)
                continue
            self._statement(section, p, inc_display, inc_lineno, candidate, stack + [key], depth)

    # -- substitution --
    def substitute(self, line: _Line) -> Optional[_Line]:
        text = line.name if line.value is None else f"{line.name}={line.value}"
        text = _expand_env(text, self.env)
        replaced = False
        for word in ("$pagesize", "$mb_memory", "$ncpus"):
            if word in text:
                text = text.replace(word, self.keywords[word[1:]])
                replaced = True
        name, eq, value = text.partition("=")
        new_value: Optional[str] = value if eq else None
        if replaced and new_value is not None and re.search(r"[-+*/]", text) and "'" not in text:
            try:
                new_value = str(bc_integer(new_value))
            except ValueError as e:
                self.error(f"cannot evaluate keyword arithmetic: {e}", file=line.file, line=line.line, option=name.rstrip(), value=value)
                return None
        return _Line(name.rstrip(), new_value, line.file, line.line)


# init.c __parse_jobs_ini reads job files with fgets(string, OPT_LEN_MAX = 8192): a longer
# line is cut after 8191 bytes and its rest parsed as the next line (measured: a description
# of 8179 characters plus "bs=16k" set bs=16k).
_FIO_LINE_MAX = 8191
_LONG_LINE = f"line longer than {_FIO_LINE_MAX} bytes (fio 3.33 reads {_FIO_LINE_MAX} and takes the rest as a line of its own)"


def _fio_lines(text: str) -> list[str]:
    """The lines as fgets gives them to fio: split at '\n' only. str.splitlines would also
    split at '\r', '\f', '\v', '\x1c'-'\x1e', NEL and U+2028/9, where fio 3.33 keeps one line
    (measured: "bs=8k\rbs=16k" is bs=8k there, not 16k)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _cut_by_fio(raw: str) -> bool:
    """Whether fio would split this line into two that are not blank after the first."""
    return len(raw) > _FIO_LINE_MAX and bool(raw.encode("utf-8", "surrogateescape")[_FIO_LINE_MAX:].strip())


def _strip_line(raw: str) -> str:
    # parse.c strip_blank_end: everything after the first ';' or '#' is a comment, even
    # in the middle of a value.
    p = raw.lstrip()
    for c in ";#":
        cut = p.find(c)
        if cut >= 0:
            p = p[:cut]
    return p.rstrip(" \t\r\n\f\v\0")


def _display_path(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


def _expand_env(text: str, env: Mapping[str, str]) -> str:
    # options.c fio_option_dup_subs: every ${NAME} is replaced, unset names by nothing.
    return re.sub(r"\$\{([^}]*)\}", lambda m: env.get(m.group(1), "") if m.group(1) else "", text)


def _default_keywords() -> dict[str, str]:
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    try:
        mb = os.sysconf("SC_PHYS_PAGES") * page // (1024 * 1024)
    except (ValueError, OSError, AttributeError):
        mb = 0
    return {"pagesize": str(page), "mb_memory": str(mb), "ncpus": str(os.cpu_count() or 1)}


# --- applying options ---------------------------------------------------------------------


def _apply(reader: _Reader, state: dict[str, Any], lines: Sequence[_Line]) -> list[tuple[str, Optional[str]]]:
    """Apply a section's option lines to ``state``; return the echo list."""
    subbed = [s for s in (reader.substitute(line) for line in lines) if s is not None]

    def prio(line: _Line) -> int:
        d = O.lookup(line.name)
        return d.prio if d else 0

    ordered = sorted(subbed, key=lambda line: -prio(line))  # stable, like glibc's qsort here
    echo: list[tuple[str, Optional[str]]] = []
    second_pass: list[_Line] = []
    for line in ordered:
        d = O.lookup(line.name)
        if d is None:
            second_pass.append(line)
            continue
        if _run_handler(reader, state, d, line):
            echo.append((d.name, line.value))
    for line in second_pass:
        d = O.lookup_engine_option(line.name)
        if d is not None:
            assert d.engines is not None
            if state["ioengine"] not in d.engines:
                reader.error(
                    f"only valid with ioengine={'/'.join(d.engines)} (this job uses {state['ioengine']})",
                    file=line.file,
                    line=line.line,
                    option=line.name,
                    value=line.value,
                )
                continue
            if _run_handler(reader, state, d, line):
                echo.append((d.name, line.value))
            continue
        if line.name in O.FIO_OPTION_NAMES or line.name in O.FIO_ENGINE_OPTION_NAMES:
            reader.error(O.unsupported_reason(line.name), file=line.file, line=line.line, option=line.name, value=line.value)
        else:
            hint = O.closest_option(line.name)
            reader.error(
                "unknown option" + (f" (did you mean {hint}?)" if hint else ""),
                file=line.file,
                line=line.line,
                option=line.name,
                value=line.value,
            )
    return echo


def _run_handler(reader: _Reader, state: dict[str, Any], d: O.OptionDef, line: _Line) -> bool:
    if line.value is None and d.needs_value:
        reader.error("requires a value", file=line.file, line=line.line, option=line.name)
        return False
    # fio stops reading a number at a space, so "bs = 4k" is a 4-byte block size; the
    # number parsers refuse such values (units.py), strings keep the space as fio does.
    try:
        d.handler(state, line.value)
    except ValueError as e:
        reader.error(str(e), file=line.file, line=line.line, option=line.name, value=line.value)
        return False
    finally:
        for message in state.pop("option_warnings", ()):
            reader.warnings.append(f"{line.file}:{line.line}: {line.name}: {message}")
    state["set"].add(d.name)
    state.setdefault("where", {})[d.name] = (line.file, line.line, line.name, line.value)
    if d.kind == O.NOOP:
        noop = dict(state["noop"])
        noop[d.name] = line.value if line.value is not None else "1"
        state["noop"] = noop
    return True


def _fixup(reader: _Reader, job_name: str, section: _Section, st: dict[str, Any]) -> None:
    """Checks and adjustments fio makes after parsing a job (init.c fixup_options)."""

    def loc(option: str) -> Where:
        return _where(st, option, section)

    directory = st["noop"].get("directory")
    if directory is not None and st["filename"] is not None and st["namespace"] is None and not st["filename"].startswith("/"):
        # fio prefixes a relative filename with directory= (filesetup.c add_file), so
        # directory=/dev filename=nvme0n1 is the namespace (nsN names stay namespaces).
        try:
            st["namespace"] = O.namespace_of(directory.rstrip("/") + "/" + st["filename"])
        except ValueError as e:
            reader.error(str(e), **loc("filename"))
    if st["time_based"] and not st["runtime_us"]:
        reader.warnings.append(
            f"{section.file}:{section.line}: {job_name}: time_based requires a runtime/timeout setting; ignored (as fio does)"
        )
        st["time_based"] = 0
    if sum(st["rate"]) and sum(st["rate_iops"]):
        reader.error("rate and rate_iops are mutually exclusive", **loc("rate_iops"))
    # init.c fixup_options: the minimums are exclusive too, and none may exceed its limit.
    if sum(st["rate_min"]) and sum(st["rate_iops_min"]):
        reader.error("rate and rate_iops are mutually exclusive", **loc("rate_iops_min"))
    for ddir in range(3):
        if (0 < st["rate"][ddir] < st["rate_min"][ddir]) or (0 < st["rate_iops"][ddir] < st["rate_iops_min"][ddir]):
            option = "rate_min" if 0 < st["rate"][ddir] < st["rate_min"][ddir] else "rate_iops_min"
            reader.error(f"minimum rate exceeds rate, ddir {ddir}", **loc(option))
    if st["thinktime_spin_us"] > st["thinktime_us"]:
        st["thinktime_spin_us"] = st["thinktime_us"]
    if st["ioengine"] in O.SYNC_ENGINES and st["iodepth"] > 1:
        reader.warnings.append(
            f"{section.file}:{section.line}: {job_name}: iodepth={st['iodepth']} with the synchronous engine "
            f"{st['ioengine']}: queue depth capped at 1 (as fio does)"
        )
    if any(st["bssplit"]) and any(st["bsrange"]):
        reader.warnings.append(
            f"{section.file}:{section.line}: {job_name}: both bssplit and bsrange given; bssplit decides the block sizes"
        )
    min_bs = min(_bs_range(st, d)[0] for d in range(3))
    if isinstance(st["size"], int) and st["size"] and st["size"] < min_bs:
        reader.error(f"size too small, must not be less than minimum block size: {st['size']} < {min_bs}", **loc("size"))
    if st["unified_rw_reporting"] != "none":
        reader.error("unified_rw_reporting=mixed/both is not supported yet", **loc("unified_rw_reporting"))
    is_random = st["rw"] in O.RANDOM_MODES
    if is_random and any(st["ba"][d] and st["ba"][d] != _bs_range(st, d)[0] for d in range(3)) and not st["norandommap"]:
        reader.warnings.append(f"{section.file}:{section.line}: {job_name}: any use of blockalign= turns off randommap (as in fio)")
    # --- iolog --- a trace path is relative to fio's working directory.
    if st.get("read_iolog"):
        st["iolog_cwd"] = str(reader.cwd)
        if st.get("write_iolog"):
            reader.warnings.append(f"{section.file}:{section.line}: {job_name}: read iolog overrides write_iolog (as in fio)")
            st["write_iolog"] = None


# --- entry points -------------------------------------------------------------------------

PathLike = Union[str, "os.PathLike[str]"]


def parse(
    files: Union[PathLike, Sequence[PathLike]],
    *,
    env: Optional[Mapping[str, str]] = None,
    cmdline: Sequence[str] = (),
    keywords: Optional[Mapping[str, str]] = None,
    cwd: Optional[PathLike] = None,
    run_seed: int = 0,
) -> Run:
    """Parse one or more fio job files, like ``fio [cmdline options] FILE...``.

    ``env`` replaces ``os.environ`` for ``${VAR}``. ``cmdline`` holds ``name=value``
    strings given before the job files (``--bs=8k`` → ``"bs=8k"``); as in fio they are
    defaults for the first job file only. ``keywords`` overrides ``pagesize``,
    ``mb_memory`` and ``ncpus``. ``run_seed`` seeds jobs that fio would seed from the OS.
    """
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    base = Path(cwd) if cwd is not None else Path.cwd()
    budget = _Budget()
    sources = []
    for f in files:
        path = Path(f)
        full = path if path.is_absolute() else base / path
        try:
            text = _read_text(full, budget)
        except OSError as e:
            raise FioJobError(f"unable to open job file: {e.strerror}", file=str(f)) from None
        except ValueError as e:
            raise FioJobError(str(e), file=str(f)) from None
        sources.append((str(f), text, full))
    return _parse_sources(sources, env=env, cmdline=cmdline, keywords=keywords, cwd=base, run_seed=run_seed, budget=budget)


def parse_string(
    text: Union[str, Sequence[str]],
    *,
    name: Union[str, Sequence[str]] = "<string>",
    env: Optional[Mapping[str, str]] = None,
    cmdline: Sequence[str] = (),
    keywords: Optional[Mapping[str, str]] = None,
    cwd: Optional[PathLike] = None,
    run_seed: int = 0,
) -> Run:
    """Parse job file text (or a list of texts, one per job file)."""
    texts = [text] if isinstance(text, str) else list(text)
    names = [name] if isinstance(name, str) else list(name)
    if len(names) == 1 and len(texts) > 1:
        names = [f"{names[0]}[{i}]" for i in range(len(texts))]
    base = Path(cwd) if cwd is not None else Path.cwd()
    budget = _Budget()
    sources = []
    for n, t in zip(names, texts):
        try:
            budget.take_text(len(t.encode("utf-8", "surrogatepass")))
            if "\0" in t:
                raise ValueError(f"not a text file (NUL character at offset {t.index(chr(0))})")
        except ValueError as e:
            raise FioJobError(str(e), file=n) from None
        sources.append((n, t, None))
    return _parse_sources(sources, env=env, cmdline=cmdline, keywords=keywords, cwd=base, run_seed=run_seed, budget=budget)


def _parse_sources(
    sources: Sequence[tuple[str, str, Optional[Path]]],
    *,
    env: Optional[Mapping[str, str]],
    cmdline: Sequence[str],
    keywords: Optional[Mapping[str, str]],
    cwd: Path,
    run_seed: int,
    budget: _Budget,
) -> Run:
    if not 0 <= run_seed < 1 << 64:
        raise ValueError("run_seed must fit in 64 bits")
    kw = _default_keywords()
    if keywords:
        kw.update({k: str(v) for k, v in keywords.items()})
    reader = _Reader(env=os.environ if env is None else env, keywords=kw, cwd=cwd, budget=budget)

    jobs: list[Job] = []
    clones: list[Clone] = []
    thread_number = 0
    group_id = 0
    prev_group_jobs = 0
    batch = 0
    section_echo: list[_SectionEcho] = []
    global_echo: list[tuple[str, Optional[str]]] = []

    for file_index, (display, text, path) in enumerate(sources):
        if budget.exhausted:
            break
        sections = reader.read_sections(display, text, path, file_index)
        # fio resets its defaults (def_thread) for every job file after the first.
        global_state = O.default_state()
        global_echo = []
        if file_index == 0 and cmdline:
            cmd_lines = []
            for i, item in enumerate(cmdline, start=1):
                item = item[2:] if item.startswith("--") else item
                name, eq, value = item.partition("=")
                cmd_lines.append(_Line(name, value if eq else None, "<cmdline>", i))
            global_echo.extend(_apply(reader, global_state, cmd_lines))
        file_stonewall = file_index > 0
        for section in sections:
            if budget.exhausted:
                break
            if section.is_global:
                global_echo.extend(_apply(reader, global_state, section.lines))
                # The accumulated list so far: a prefix of global_echo, which only grows
                # (a copy per section would be quadratic in the number of global options).
                section_echo.append((file_index, True, section.name, global_echo, len(global_echo)))
                continue
            st = O.copy_state(global_state)
            st["set"] = set(global_state["set"])
            if file_stonewall:
                st["stonewall"] = 1
                file_stonewall = False
            n_errors = len(reader.errors)
            echo = _apply(reader, st, section.lines)
            job_name = st["name"] or section.name
            _fixup(reader, job_name, section, st)
            if len(reader.errors) != n_errors:
                continue  # fio drops the job ("job x dropped"); we report and go on
            numjobs = st["numjobs"]
            if thread_number + numjobs > L.MAX_THREADS:
                reader.limit_reached(
                    f"job {job_name}: the run would have {thread_number + numjobs} threads (jobs x numjobs); "
                    f"at most {L.MAX_THREADS} (fio's REAL_MAX_JOBS)",
                    **_where(st, "numjobs", section),
                )
                break
            section_echo.append((file_index, False, section.name, echo, len(echo)))
            if (st["stonewall"] or st["new_group"]) and prev_group_jobs:
                prev_group_jobs = 0
                group_id += 1
            job = Job(
                name=job_name,
                section=section.name,
                file=section.file,
                line=section.line,
                file_index=file_index,
                index=len(jobs),
                group_id=group_id,
                stonewall=bool(st["stonewall"]),
                options=echo,
                state=st,
            )
            jobs.append(job)
            is_random = st["rw"] in O.RANDOM_MODES
            first_thread = thread_number + 1
            for k in range(numjobs):
                thread_number += 1
                prev_group_jobs += 1
                # init.c add_job: clones are added by "while (--numjobs)", so thread
                # first+1 is subjob numjobs-1, first+2 is numjobs-2, ... (measured with
                # offset_increment on fio 3.33).
                subjob = 0 if k == 0 else numjobs - k
                if k == 0 and st["stonewall"] and clones:
                    batch += 1
                seeds, source = fio_seeds(
                    thread_number,
                    randrepeat=st["randrepeat"],
                    randseed=st["randseed"],
                    randseed_set="randseed" in st["set"],
                    allrandrepeat=st["allrandrepeat"],
                    is_random=is_random,
                    run_seed=run_seed,
                )
                named = dict(zip(_SEED_NAMES, seeds))
                if st["rw"] in ("trimwrite", "randtrimwrite"):
                    named["bs_trim"] = named["bs_write"]
                lo, hi = st["startdelay_us"]
                delay = lo
                if hi > lo:
                    delay = lo + splitmix(named["start_delay"]) % (hi - lo + 1)
                clones.append(
                    Clone(
                        job=job,
                        thread_number=thread_number,
                        subjob=subjob,
                        group_id=group_id,
                        seed=named["offset"],
                        seeds=named,
                        seed_source=source,
                        startdelay_us=delay,
                        batch=batch,
                    )
                )
            job.clones = clones[first_thread - 1 :]
    if not reader.errors:
        _check_run_limits(reader, jobs)
        _check_wait_for(reader, jobs)
    if reader.errors:
        raise FioJobError.collect(reader.errors)
    if not jobs:
        # fio: "No job(s) defined", exit 1. An empty file, or one of only [global] sections
        # and comments, must not pass for a run that did nothing.
        raise FioJobError("no job defined (no [section] other than [global])", file=", ".join(s[0] for s in sources))
    _check_group_percentiles(jobs)
    _check_group_steadystate(jobs)  # ss
    return Run(
        jobs=jobs,
        clones=clones,
        global_options=global_echo,
        files=[s[0] for s in sources],
        warnings=reader.warnings,
        run_seed=run_seed,
        sections=section_echo,
        ignored=_ignored_options(jobs),
    )


def _ignored_options(jobs: Iterable[Job]) -> list[IgnoredOption]:
    """Every accepted option of every job that has no effect on a simulated drive."""
    out: list[IgnoredOption] = []
    for job in jobs:
        where = job.state.get("where", {})
        for name in job.state["noop"]:
            file, line, _written, value = where.get(name, (job.file, job.line, name, None))
            out.append({"job": job.name, "option": name, "value": value, "reason": O.ignored_reason(name), "file": file, "line": line})
    return out


def _check_wait_for(reader: _Reader, jobs: Sequence[Job]) -> None:
    """fio's init.c wait_for_ok: the waitee is another job, defined earlier, with a name no
    other earlier job has (sched)."""
    for job in jobs:
        waitee = job.state.get("wait_for")
        if waitee is None:
            continue
        where = _where(job.state, "wait_for", job)
        if waitee == job.name:
            reader.error(f"job {job.name}: a job cannot wait for itself (wait_for={waitee})", **where)
            continue
        earlier = sum(1 for j in jobs[: job.index] if j.name == waitee)
        if earlier == 0:
            later = any(j.name == waitee for j in jobs[job.index + 1 :])
            why = "it is defined after this job (fio allows no forward references)" if later else "no job has that name"
            reader.error(f"job {job.name}: waitee job {waitee} unknown: {why}", **where)
        elif earlier > 1:
            reader.error(f"job {job.name}: multiple waitees {waitee} found; wait_for needs a unique job name", **where)


def _check_run_limits(reader: _Reader, jobs: Sequence[Job]) -> None:
    """Limits over the whole run (docs/fio.md §2.9): I/Os in flight over all threads, and
    the simulated time the time-based jobs take at least, summed over stonewall batches."""
    inflight = 0
    for job in jobs:
        inflight += job.effective_iodepth * len(job.clones)
        if inflight > L.MAX_INFLIGHT:
            reader.error(
                f"job {job.name}: the run would keep {inflight} I/Os in flight (iodepth x numjobs, summed over jobs); "
                f"at most {L.MAX_INFLIGHT}",
                **_where(job.state, "iodepth", job),
            )
            return
    batch_us: dict[int, tuple[int, Clone]] = {}
    for clone in (c for j in jobs for c in j.clones):
        st = clone.job.state
        at_least = clone.startdelay_us + (st["ramp_time_us"] + st["runtime_us"] if st["time_based"] else 0)
        if clone.batch not in batch_us or at_least > batch_us[clone.batch][0]:
            batch_us[clone.batch] = (at_least, clone)
    total_us = 0
    for batch in sorted(batch_us):
        us, clone = batch_us[batch]
        total_us += us
        if total_us > L.MAX_RUN_US:
            reader.error(
                f"job {clone.job.name}: the run takes at least {L.describe_us(total_us)} of simulated time "
                f"(startdelay + ramp_time + runtime of its time_based jobs, summed over stonewall groups); "
                f"a run may simulate at most {L.describe_us(L.MAX_RUN_US)}",
                **_where(clone.job.state, "runtime", clone.job),
            )
            return


def _check_group_percentiles(jobs: Iterable[Job]) -> None:
    # init.c verify_per_group_options: under group_reporting every job of a group must
    # agree on lat_percentiles.
    seen: dict[int, Job] = {}
    errors = []
    for job in jobs:
        first = seen.setdefault(job.group_id, job)
        if job.group_reporting and first is not job and job.state["lat_percentiles"] != first.state["lat_percentiles"]:
            errors.append(FioJobError(f"lat_percentiles in job {job.name} differs from group", file=job.file, line=job.line))
    if errors:
        raise FioJobError.collect(errors)


# --- ss ---
def _check_group_steadystate(jobs: Iterable[Job]) -> None:
    """steadystate.c td_steadystate_init: every job of a group (stonewall/new_group, with or
    without group_reporting) must have the same ss, ss_dur and ss_ramp, or none."""
    from .engine import ss_key  # local: keeps the parser importable alone

    seen: dict[int, Job] = {}
    errors = []
    for job in jobs:
        first = seen.setdefault(job.group_id, job)
        if first is not job and ss_key(job.state) != ss_key(first.state):
            written = job.state.get("where", {})
            option = next((o for o in ("steadystate", "steadystate_duration", "steadystate_ramp_time") if o in written), "")
            where = _where(job.state, option, job) if option else {"file": job.file, "line": job.line}
            errors.append(
                FioJobError(
                    f"job {job.name}: steadystate options (ss, ss_dur, ss_ramp) must be consistent within reporting groups "
                    f"(job {first.name} of group {job.group_id} differs; fio: job rejected)",
                    **where,
                )
            )
    if errors:
        raise FioJobError.collect(errors)
