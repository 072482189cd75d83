"""How fio reads an option's value: numbers, sizes, times, choices and per-direction lists,
each with its range and fio's own error text (fio 3.33 parse.c and options.c).

A *check* reads the text of one value against the job state built so far (sizes depend on
``kb_base``) and returns the parsed value or raises ``ValueError`` with the message the CLI
prints after ``file:line: option=value:``. The table (table.py) gives every option its check.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Optional

from ..limits import FIO_NUMBER_MAX, FIO_UINT_MAX, MAX_BS, describe_us
from ..units import Percent, parse_bool, parse_flag, parse_size, parse_time_us, parse_uint

State = dict[str, Any]
# Reads one value (never None: a flag written alone reads as "1") or raises ValueError.
Check = Callable[[State, str], Any]
# Applies one option line to the job state (value None: the option written without "=").
Handler = Callable[[State, Optional[str]], None]

# Why an upper limit exists (docs/fio.md §2.9), shown after fio's "(N max)".
WHY_UINT = "fio keeps this option in 32 bits"
WHY_NUMBER = "fio reads numbers as signed 64-bit"
WHY_BS = "Linux moves at most this much in one read or write call"
WHY_RUN = "the longest run the engine simulates"
WHY_THINK = "fio keeps it in 32-bit microseconds"


# --- the grammar underneath every check -------------------------------------------------


def warn(st: State, message: str) -> None:
    """A warning about the option being applied: the parser prints it after the option's
    file, line and name (``_run_handler`` takes it out of the state at once)."""
    st.setdefault("option_warnings", []).append(message)


def require(value: Optional[str]) -> str:
    if value is None:
        raise ValueError("requires a value")
    return value


def size_of(st: State, text: str, *, allow_percent: bool = False) -> Any:
    return parse_size(text, kb_base=st["kb_base"], allow_percent=allow_percent)


def uint_in(st: State, text: str, *, lo: Optional[int] = None, hi: Optional[int] = None, why: str = "") -> int:
    """An unsigned number (with fio's suffixes and expressions) inside [lo, hi]."""
    value = parse_uint(text, kb_base=st["kb_base"])
    if lo is not None and value < lo:
        raise ValueError(f"min value out of range: {value} ({lo} min)")
    if hi is not None and value > hi:
        raise ValueError(f"max value out of range: {value} ({hi} max{': ' + why if why else ''})")
    return value


def check_max(value: int, hi: int, why: str) -> int:
    if value > hi:
        raise ValueError(f"max value out of range: {value} ({hi} max: {why})")
    return value


_DECIMAL = r"[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?"


def number(text: str, allowed: str = "0 or more") -> float:
    """A plain non-negative decimal (fio's FIO_OPT_FLOAT_LIST); ``allowed`` names the range
    in the error for a negative one (fio: "value out of range: -5.000000 (range min: 0.000000)")."""
    if re.fullmatch(r"-" + _DECIMAL, text):
        raise ValueError(f"value out of range: {text} (allowed {allowed})")
    if not re.fullmatch(_DECIMAL, text):
        if text == "":
            raise ValueError(f"an empty value where a number belongs (allowed {allowed})")
        raise ValueError(f"'{text}' is not a number (allowed {allowed})")
    return float(text)


def time_us(text: str, default_unit: str, hi: int, why: str) -> int:
    us = parse_time_us(text, default_unit=default_unit)
    if us > hi:
        raise ValueError(f"max value out of range: {describe_us(us)} ({describe_us(hi)} max: {why})")
    return us


def split_top(text: str, sep: str) -> Optional[int]:
    """Index of the first ``sep`` outside parentheses (expressions keep their '-')."""
    depth = 0
    for i, c in enumerate(text):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == sep and depth == 0:
            return i
    return None


def per_direction_segments(text: str, separators: str = ",:-") -> list[tuple[str, int, bool]]:
    """Split a per-direction value like fio's ``handle_option`` does.

    Returns ``(segment, index, more)`` triples. fio looks for ',' first, and only when
    there is none for ':' then '-' (so ``bs=4k-8k`` means 4k reads, 8k writes and trims,
    not a range). A trailing comma ends the list without filling the later directions
    (``bs=8k,`` leaves writes and trims at their default).
    """
    out: list[tuple[str, int, bool]] = []
    rest = text
    index = 0
    while True:
        cut = None
        for sep in separators:
            cut = split_top(rest, sep)
            if cut is not None:
                break
        if cut is None:
            out.append((rest, index, False))
            return out
        if sep == "-" and cut == 0 and rest[1:] not in ("", "-"):
            # fio hands the rest of the value, '-' included, to the next direction: bs=4k--8k
            # gives writes -8k and rate_iops=100--5 a write rate of 2^64-5 (measured)
            raise ValueError(f"'-' where a value should be: fio 3.33 would read '{rest.split(',')[0]}' as a negative number")
        segment = rest[:cut]
        if sep != "," and "0x" in rest.lower() and not segment.lower().lstrip("+").startswith(("0x", "(")):
            # only ',' ends the string fio parses; after ':' or '-' it sees the rest too, and
            # a "0x" anywhere there makes it read this field as hex: rate_iops=8612-0x8 is
            # 34322 reads (0x8612), startdelay=1-0x10 starts at 1 us (measured)
            raise ValueError(f"'{segment}' before a hex field: fio 3.33 would read '{segment}' as hex too (put a ',' after it)")
        out.append((segment, index, True))
        rest = rest[cut + 1 :]
        index += 1
        if rest == "":
            out.append(("", index, False))
            return out


def store_per_direction(target: list[Any], segments: list[tuple[str, int, bool]], parse: Callable[[str], Any]) -> None:
    """fio's off1/off2/off3 rule: segment k sets direction k; the last non-empty segment
    also fills the directions after it unless a trailing comma followed it."""
    any_value = False
    for text, index, more in segments:
        if text == "":
            continue
        if index > 2:
            raise ValueError("more than three values (read,write,trim)")
        value = parse(text)
        any_value = True
        target[index] = value
        if not more:
            for later in range(index + 1, 3):
                target[later] = value
    if not any_value:
        raise ValueError("empty value")


def split_ddir(text: str) -> list[Optional[str]]:
    """fio's ``str_split_parse`` for bssplit and zoned distributions: ``a`` applies to
    every direction, ``a,b`` is reads and writes+trims, ``a,b,c`` is one per direction.
    Returns read/write/trim strings (None = leave unchanged)."""
    parts = text.split(",")
    if len(parts) == 1:
        return [text, text, text]
    if len(parts) == 2:
        return [parts[0], parts[1], parts[1]]
    if len(parts) == 3:
        return [parts[0], parts[1], parts[2]]
    raise ValueError("more than three comma-separated lists (read,write,trim)")


# --- checks: what the table names -------------------------------------------------------


def boolean(st: State, text: str) -> Any:
    """fio's FIO_OPT_BOOL: 0 or 1."""
    return parse_bool(text)


def flag(st: State, text: str) -> Any:
    """fio's FIO_OPT_STR_SET given a value: any unsigned integer, nonzero = on."""
    return parse_flag(text)


def text_value(st: State, text: str) -> Any:
    """Any non-empty string."""
    if text == "":
        raise ValueError("empty value")
    return text


def any_size(st: State, text: str) -> Any:
    """A size with no upper limit of its own (a no-op option fio reads as a size)."""
    return size_of(st, text)


def size(st: State, text: str) -> Any:
    return check_max(size_of(st, text), FIO_NUMBER_MAX, WHY_NUMBER)


def size_or_percent(st: State, text: str) -> Any:
    """size, offset, io_size, offset_increment: bytes or a percentage of the target."""
    if text.endswith(("z", "Z")) and re.fullmatch(r"[0-9]+[zZ]", text):
        raise ValueError("zone-count values ('z' suffix) are not supported")
    v = size_of(st, text, allow_percent=True)
    if isinstance(v, Percent) and v.value > 100:
        # fio either refuses (io_size) or reads "150%" as an enormous byte count.
        raise ValueError("percentages above 100% are not supported")
    if isinstance(v, int):
        check_max(v, FIO_NUMBER_MAX, WHY_NUMBER)
    return v


def uint(lo: Optional[int] = None, hi: Optional[int] = FIO_UINT_MAX, why: Optional[str] = None) -> Check:
    """A fio FIO_OPT_INT: at most 2^32-1 unless the option has its own maximum (None: none)."""
    reason = why if why is not None else (WHY_UINT if hi == FIO_UINT_MAX else "")
    return lambda st, text: uint_in(st, text, lo=lo, hi=hi, why=reason)


def signed(lo: int, hi: int) -> Check:
    """A signed fio FIO_OPT_INT with a range (nice)."""

    def check(st: State, text: str) -> Any:
        if not re.fullmatch(r"-?[0-9]{1,20}", text):
            raise ValueError("not an integer")
        value = int(text)
        if value < lo:
            raise ValueError(f"min value out of range: {value} ({lo} min)")
        if value > hi:
            raise ValueError(f"max value out of range: {value} ({hi} max)")
        return value

    return check


def choice(*choices: str, mapping: Optional[dict[str, Any]] = None) -> Check:
    """One of ``choices``; ``mapping`` turns a synonym into the value the state keeps."""

    def check(st: State, text: str) -> Any:
        if text not in choices:
            raise ValueError(f"not one of {', '.join(choices)}")
        return mapping.get(text, text) if mapping else text

    return check


def duration(default_unit: str, hi: int = FIO_UINT_MAX * 1_000_000, why: str = WHY_UINT) -> Check:
    """A time in microseconds; a bare number is in ``default_unit``."""
    return lambda st, text: time_us(text, default_unit, hi, why)


def per_direction(check: Check) -> Check:
    """read,write[,trim] values of a no-op option, split at ',' (parse.c handle_option)."""

    def per_dir(st: State, text: str) -> Any:
        target: list[Any] = [0, 0, 0]
        store_per_direction(target, per_direction_segments(text, ","), lambda t: check(st, t))
        return target

    return per_dir


def is_zero(value: Any) -> bool:
    return not any(value) if isinstance(value, list) else not value


def file_service_type(st: State, text: str) -> Any:
    # options.c str_fst_cb: a type, optionally ":N" (files per switch) or ":value" (the
    # distribution's parameter for zipf, pareto, normal/gauss).
    kind, sep, param = text.partition(":")
    if kind not in ("random", "zipf", "pareto", "normal", "gauss", "roundrobin", "sequential"):
        raise ValueError("not one of random, zipf, pareto, normal, gauss, roundrobin, sequential (optionally :N)")
    if sep:
        number(param)
    return text


def cmdprio_bssplit(st: State, text: str) -> Any:
    # options.c parse_cmdprio_bssplit_entry: per direction (comma-separated) a ':' list of
    # bs[/percentage[/class/level[/hint]]]. fio 3.33 scans the first four fields and ignores
    # a fifth (fio 3.36 passes it as the I/O priority hint); bs/percentage/class alone is
    # refused at engine init.
    for part in text.split(","):
        for item in filter(None, part.split(":")):
            fields = item.split("/")
            if fields[-1] == "" and len(fields) == 2:
                fields = fields[:1]  # "bs/": percentage 0, the entry is skipped
            if len(fields) not in (1, 2, 4, 5) or not all(re.fullmatch(r"[0-9]+", f) for f in fields[1:]):
                raise ValueError(f"'{item}' is not bs[/percentage[/class/level[/hint]]]")
            uint_in(st, fields[0], lo=1, hi=MAX_BS, why=WHY_BS)
    return text


def byte_range(st: State, text: str) -> Any:
    """filesize=N or low-high (FIO_OPT_STR_VAL with off1/off2): the target's size."""
    cut = split_top(text, "-")
    if cut is None:
        cut = split_top(text, ":")
    parts = [text] if cut is None else [text[:cut], text[cut + 1 :]]
    values = [uint_in(st, p, lo=1, hi=FIO_NUMBER_MAX, why=WHY_NUMBER) for p in parts]
    return (min(values), max(values))


_MEM_TYPES = choice("malloc", "shm", "shmhuge", "mmap", "mmapshared", "mmaphuge", "cudamalloc")


def mem_type(st: State, text: str) -> Any:
    # mmap types may name their file: mem=mmaphuge:/hugetlbfs/file (options.c str_mem_cb).
    return _MEM_TYPES(st, text.partition(":")[0])
