"""Limits on fio input (docs/fio.md §2.9).

Every limit is either fio's own (a value fio refuses or silently truncates), what the
engine can represent, or far beyond any physical meaning; a value a user could reasonably
want stays inside. Input past a limit is refused with a one-line error naming the file,
line, option and allowed range, before anything runs: bad input never hangs, never
grows memory with what it asks for, and never reaches the engine.
"""

from __future__ import annotations

from .facts import FACTS

__all__ = [
    "MAX_JOB_TEXT_BYTES",
    "MAX_INCLUDE_DEPTH",
    "MAX_INCLUDES",
    "MAX_SECTIONS",
    "MAX_THREADS",
    "MAX_IODEPTH",
    "MAX_INFLIGHT",
    "FIO_UINT_MAX",
    "FIO_NUMBER_MAX",
    "MAX_BS",
    "MAX_RUN_DAYS",
    "MAX_RUN_NS",
    "MAX_RUN_US",
    "MAX_NUMBER_CHARS",
    "MAX_EXPR_BITS",
    "MAX_EXPR_DEPTH",
    "MAX_EXPR_TOKENS",
    "MAX_ERROR_LINES",
    "MAX_TRACE_BYTES",
    "MAX_TRACE_IOS",
    "MAX_TRACE_LINE_CHARS",
    "MAX_TRACE_NAME_CHARS",
    "describe_bytes",
    "short_bytes",
    "describe_us",
]

# Job text read in one run: every job file and every include, each time it is read. A
# job file for the largest run (4,096 jobs) with a dozen options each is well under 1 MiB.
MAX_JOB_TEXT_BYTES = 4 << 20
# Includes: nesting depth (fio has no limit and recurses until its stack ends) and how
# many a run may read, each time one is read (options shared by many jobs belong in a
# [global] section, not in an include per job).
MAX_INCLUDE_DEPTH = 16
MAX_INCLUDES = 1024
# [sections] of a run: as many job sections as threads, and as many global ones.
MAX_SECTIONS = 8192
# Errors the CLI prints, one per line, before "... and N more errors": a screenful, enough
# to fix a job file in one pass; a generated job file with one mistake repeated in 4,096
# jobs should not scroll 4,096 lines.
MAX_ERROR_LINES = 50

# Threads (jobs times numjobs) of a run: fio's REAL_MAX_JOBS (fio.h). fio 3.33 itself stops
# at 4,088 ("error: maximum number of jobs reached": its last 8-thread segment is unused).
MAX_THREADS = 4096
# An NVMe submission queue holds at most 65,536 commands (CAP.MQES is 16 bits, 0's based).
MAX_IODEPTH = 65536
# I/Os in flight over all threads of a run (sum of queue depths): the engine holds ~100
# bytes per I/O in flight; Linux's NVMe driver queues 1,023 per hardware queue by default.
MAX_INFLIGHT = 1 << 20

# fio keeps FIO_OPT_INT options in 32-bit fields and silently truncates larger values
# (fio 3.33: loops=4294967296 runs 1 loop, 4294967298 runs 2; thinktime=2h is parsed as
# 7,200,000,000 us and stored in 32 bits).
FIO_UINT_MAX = (1 << 32) - 1
# fio reads every number with strtoll: larger ones fail ("failed parsing").
FIO_NUMBER_MAX = (1 << 63) - 1
# One read or write call moves at most MAX_RW_COUNT bytes on Linux (INT_MAX rounded down to
# a page): a larger fio block would come back short.
MAX_BS = 2_147_479_552

# The engine simulates at most 200 days per run (its device timing counts picoseconds in
# 64 bits: the core's MAX_RUN_NS, FioFacts.max_run_ns). Times and byte counts that cannot
# fit in that are refused before the run starts.
MAX_RUN_NS = FACTS["max_run_ns"]
MAX_RUN_DAYS = MAX_RUN_NS // (86_400 * 1_000_000_000)
MAX_RUN_US = MAX_RUN_NS // 1000

# Numbers and expressions: characters of one number (fio's largest has 19 digits), bits of
# any value an expression reaches, nesting of parentheses and unary minus, and tokens (which
# also bounds the nesting of right-associative powers).
MAX_NUMBER_CHARS = 40
MAX_EXPR_BITS = 128
MAX_EXPR_DEPTH = 64
MAX_EXPR_TOKENS = 256

# --- issue 10: iolog --- A read_iolog trace is read whole before the run (fio's default;
# read_iolog_chunked only saves fio memory): ~40 bytes a line while parsing, 40 bytes an I/O
# in the engine. fio reads a line with fgets(4096) and a file name with %256s.
MAX_TRACE_BYTES = 512 << 20
MAX_TRACE_IOS = 1 << 24
MAX_TRACE_LINE_CHARS = 4095
MAX_TRACE_NAME_CHARS = 256


def short_bytes(n: int) -> str:
    """``13.77 EiB``: a byte count rounded to a binary unit."""
    for unit, shift in (("EiB", 60), ("PiB", 50), ("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.4g} {unit}"
    return f"{n} bytes"


def describe_bytes(n: int) -> str:
    """``4194304 (4 MiB)``: exact bytes and a rounded binary unit."""
    short = short_bytes(n)
    return short if short.endswith(" bytes") else f"{n} ({short})"


def describe_us(us: int) -> str:
    """A time for messages: ``200 days``, ``31,710 years``, ``4294967295 us (1.193 h)``."""
    s = us / 1e6
    for unit, size in (("years", 365 * 86_400), ("days", 86_400), ("h", 3600), ("min", 60), ("s", 1)):
        if s >= size:
            if us % (size * 1_000_000) == 0:
                return f"{us // (size * 1_000_000)} {unit}"
            n = s / size
            approx = f"{n:,.0f} {unit}" if n >= 1000 else f"{n:.4g} {unit}"
            return approx if unit == "years" else f"{us} us ({approx})"
    return f"{us} us"
