"""The fio options ssdtwin knows: how each one is parsed and what it does to a job.

Each option has a handler that parses the value as fio 3.33 does and writes the result
into a job *state* dict (our counterpart of fio's ``struct thread_options``). A job
starts from a copy of the state built by the ``[global]`` sections above it, exactly as
fio copies its ``def_thread``.

Three kinds of options:

* ``SIM``: simulated; they shape the engine input (docs/fio.md §3).
* ``NOOP``: accepted and echoed into "job options" like fio, but a simulated drive has
  nothing to do with them (process model, CPU pinning, buffer contents ...).
* everything else fio knows is refused with "not supported by ssdtwin", and names fio
  does not know are refused as unknown options.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .limits import FIO_NUMBER_MAX, FIO_UINT_MAX, MAX_BS, MAX_IODEPTH, MAX_RUN_US, MAX_THREADS, describe_us
from .units import Percent, parse_bool, parse_flag, parse_size, parse_time_us, parse_uint

__all__ = [
    "OptionDef",
    "OPTIONS",
    "ENGINE_OPTIONS",
    "FIO_OPTION_NAMES",
    "SYNC_ENGINES",
    "ASYNC_ENGINES",
    "lookup",
    "lookup_engine_option",
    "default_state",
    "DDIRS",
]

DDIRS = ("read", "write", "trim")

SIM = "sim"
NOOP = "noop"

# Engines whose I/O is synchronous: fio caps their queue depth at 1 (backend.c, "queue
# depth will be capped at 1") and records no submission latency.
SYNC_ENGINES = ("sync", "psync", "vsync", "pvsync", "pvsync2")
# Engines that honour iodepth. "null" is asynchronous only when iodepth > 1, as in fio
# (engines/null.c sets FIO_SYNCIO for iodepth=1).
ASYNC_ENGINES = ("libaio", "io_uring", "io_uring_cmd", "posixaio", "nbd", "null")

RW_MODES = ("read", "write", "trim", "randread", "randwrite", "randtrim", "rw", "readwrite", "randrw", "trimwrite", "randtrimwrite")
RANDOM_MODES = ("randread", "randwrite", "randtrim", "randrw", "randtrimwrite")


Handler = Callable[[dict[str, Any], Optional[str]], None]


@dataclass(frozen=True)
class OptionDef:
    name: str
    handler: Callable[[dict[str, Any], Optional[str]], None]
    kind: str = SIM
    aliases: tuple[str, ...] = ()
    prio: int = 0
    # True: "name" alone is an error (fio: "Option X requires an argument").
    needs_value: bool = True
    engines: Optional[tuple[str, ...]] = None
    help: str = ""


def default_state() -> dict[str, Any]:
    """A job's options before any section is applied (fio's defaults from options.c)."""
    return {
        "set": set(),  # canonical names given explicitly (fio_option_is_set)
        "kb_base": 1024,
        "name": None,
        "description": None,
        "filename": None,
        "namespace": None,
        "rw": "read",
        "rw_nr": 1,
        "rw_seq_add": 0,
        "rwmix": [50, 50],
        "bs": [4096, 4096, 4096],
        "bsrange": [None, None, None],
        "bssplit": [None, None, None],
        "bs_unaligned": False,
        "ba": [0, 0, 0],
        "offset": 0,
        "offset_align": None,
        "offset_increment": 0,
        "size": None,
        "io_size": None,
        "fill_device": False,
        "loops": 1,
        "number_ios": 0,
        "iodepth": 1,
        "numjobs": 1,
        "time_based": 0,
        "runtime_us": 0,
        "ramp_time_us": 0,
        "startdelay_us": (0, 0),
        "norandommap": 0,
        "randrepeat": True,
        "randseed": 0x89,
        "allrandrepeat": False,
        "random_generator": "tausworthe",
        # --- issue 10: gen (zonemode=strided) ---
        "zonemode": "none",
        "zone_size": 0,
        "zone_range": 0,
        "zone_skip": 0,
        "random_distribution": {"kind": "random", "param": None, "center": None, "zones": [None, None, None]},
        "percentage_random": [100, 100, 100],
        "rate": [0, 0, 0],
        "rate_iops": [0, 0, 0],
        "rate_process": "linear",
        "thinktime_us": 0,
        "thinktime_spin_us": 0,
        "thinktime_blocks": 1,
        "thinktime_blocks_type": "complete",
        "stonewall": 0,
        "new_group": 0,
        "group_reporting": 0,
        "percentile_list": [1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99],
        "percentile_precision": 2,
        "clat_percentiles": True,
        "lat_percentiles": False,
        "slat_percentiles": False,
        "logs": {"bw": None, "iops": None, "lat": None, "hist": None},
        "log_avg_msec": 0,
        "log_hist_msec": 0,
        "log_hist_coarseness": 0,
        "per_job_logs": True,
        "log_offset": False,
        "log_max_value": False,
        "bwavgtime": 500,
        "iopsavgtime": 500,
        "ioengine": "psync",
        "significant_figures": 4,
        "unified_rw_reporting": "none",
        "noop": {},
    }


def copy_state(state: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(state)


# --- value helpers ------------------------------------------------------------------------


def _req(value: Optional[str]) -> str:
    if value is None:
        raise ValueError("requires a value")
    return value


def _size(st: dict[str, Any], text: str, *, allow_percent: bool = False) -> Any:
    return parse_size(text, kb_base=st["kb_base"], allow_percent=allow_percent)


# Why an upper limit exists (docs/fio.md §2.9), shown after fio's "(N max)".
_WHY_UINT = "fio keeps this option in 32 bits"
_WHY_NUMBER = "fio reads numbers as signed 64-bit"
_WHY_BS = "Linux moves at most this much in one read or write call"


def _uint(st: dict[str, Any], text: str, *, lo: Optional[int] = None, hi: Optional[int] = None, why: str = "") -> int:
    value = parse_uint(text, kb_base=st["kb_base"])
    if lo is not None and value < lo:
        raise ValueError(f"min value out of range: {value} ({lo} min)")
    if hi is not None and value > hi:
        raise ValueError(f"max value out of range: {value} ({hi} max{': ' + why if why else ''})")
    return value


def _check_max(value: int, hi: int, why: str) -> int:
    if value > hi:
        raise ValueError(f"max value out of range: {value} ({hi} max: {why})")
    return value


def _split_top(text: str, sep: str) -> Optional[int]:
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
            cut = _split_top(rest, sep)
            if cut is not None:
                break
        if cut is None:
            out.append((rest, index, False))
            return out
        out.append((rest[:cut], index, True))
        rest = rest[cut + 1 :]
        index += 1
        if rest == "":
            out.append(("", index, False))
            return out


def _store_per_dir(target: list[Any], segments: list[tuple[str, int, bool]], parse: Callable[[str], Any]) -> None:
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


def _split_ddir(text: str) -> list[Optional[str]]:
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


# --- handlers -----------------------------------------------------------------------------


def _h_str(key: str) -> Handler:
    def handler(st: dict[str, Any], value: Optional[str]) -> None:
        text = _req(value)
        if text == "":
            raise ValueError("empty value")
        st[key] = text

    return handler


_NS_RE = re.compile(r"^(?:ns(\d+)|ns=(\d+)|/dev/nvme\d+n(\d+)|/dev/ng\d+n(\d+))$")


def namespace_of(filename: str) -> Optional[int]:
    """Our rule for targets: ``nsN``, ``ns=N``, ``/dev/nvmeXnN`` and ``/dev/ngXnN`` name
    namespace N of the simulated drive; any other name means the default target."""
    m = _NS_RE.match(filename)
    if not m:
        return None
    number = int(next(g for g in m.groups() if g is not None))
    if number < 1:
        raise ValueError("namespace numbers start at 1")
    return number


def _h_filename(st: dict[str, Any], value: Optional[str]) -> None:
    text = _req(value).strip()
    if text == "":
        raise ValueError("empty value")
    if ":" in text.replace("\\:", ""):
        raise ValueError("several files (':'-separated) are not supported; one target per job")
    st["filename"] = text
    st["namespace"] = namespace_of(text)


def _h_rw(st: dict[str, Any], value: Optional[str]) -> None:
    text = _req(value)
    mode, sep, postfix = text.partition(":")
    if mode not in RW_MODES:
        raise ValueError(f"not a valid rw mode (valid: {', '.join(RW_MODES)})")
    mode = "rw" if mode == "readwrite" else mode
    st["rw"] = mode
    st["rw_nr"] = 1
    st["rw_seq_add"] = 0
    if sep:
        if postfix == "":
            raise ValueError("empty ':<nr>' suffix")
        if mode in RANDOM_MODES:
            # options.c str_rw_cb: for random I/O the suffix counts I/Os per new offset.
            nr = _uint(st, postfix, lo=1, hi=FIO_UINT_MAX, why=_WHY_UINT)
            st["rw_nr"] = nr
        else:
            # For sequential I/O it is a byte gap added after each I/O; fio reads it as a
            # signed number, so "read:-8k" walks backwards (io_u.c get_next_seq_offset).
            negative = postfix.startswith("-")
            gap = _uint(st, postfix[1:] if negative else postfix, hi=FIO_NUMBER_MAX, why=_WHY_NUMBER)
            st["rw_seq_add"] = -gap if negative else gap


def _h_rwmixread(st: dict[str, Any], value: Optional[str]) -> None:
    v = _uint(st, _req(value), hi=100)
    st["rwmix"] = [v, 100 - v]


def _h_rwmixwrite(st: dict[str, Any], value: Optional[str]) -> None:
    v = _uint(st, _req(value), hi=100)
    st["rwmix"] = [100 - v, v]


def _h_per_dir_uint(key: str, lo: Optional[int] = None, hi: Optional[int] = None, why: str = "") -> Handler:
    def handler(st: dict[str, Any], value: Optional[str]) -> None:
        target = list(st[key])
        _store_per_dir(target, per_direction_segments(_req(value)), lambda t: _uint(st, t, lo=lo, hi=hi, why=why))
        st[key] = target

    return handler


def _h_bsrange(st: dict[str, Any], value: Optional[str]) -> None:
    def parse_range(text: str) -> tuple[int, int]:
        cut = _split_top(text, "-")
        if cut is None:
            cut = _split_top(text, ":")
        if cut is None:
            raise ValueError("not a range (use min-max or min:max)")
        lo = _uint(st, text[:cut], lo=1, hi=MAX_BS, why=_WHY_BS)
        hi = _uint(st, text[cut + 1 :], lo=1, hi=MAX_BS, why=_WHY_BS)
        # fio swaps a reversed range (parse.c FIO_OPT_RANGE).
        return (min(lo, hi), max(lo, hi))

    target = list(st["bsrange"])
    _store_per_dir(target, per_direction_segments(_req(value), ","), parse_range)
    st["bsrange"] = target


def _parse_split(st: dict[str, Any], text: str) -> Optional[list[list[int]]]:
    """One direction of a bssplit: ``bs/pct:bs/pct...``; a blank pct shares the rest."""
    if text == "":
        return None
    entries: list[list[int]] = []
    missing = 0
    total = 0
    for item in text.split(":"):
        if item == "":
            break  # fio stops at an empty element ("4k/50:" is fine)
        bs_text, slash, pct_text = item.partition("/")
        bs = _uint(st, bs_text, lo=1, hi=MAX_BS, why=_WHY_BS)
        if slash and pct_text != "":
            if not re.fullmatch(r"[0-9]+", pct_text):
                raise ValueError(f"'{pct_text}' is not a percentage")
            pct = min(int(pct_text), 100)  # fio caps each entry at 100
            if pct == 0:
                pct = -1  # fio treats a zero like a blank (options.c split_parse_ddir)
        else:
            pct = -1
        if pct == -1:
            missing += 1
        else:
            total += pct
        entries.append([bs, pct])
        if len(entries) > 64:
            raise ValueError("more than 64 bssplit entries")
    if not entries:
        return None
    if total > 100 and missing > 1:
        raise ValueError("bssplit percentages add to more than 100%")
    if missing:
        if missing == 1 and len(entries) == 1:
            total = 100
        share = max(100 - total, 0) // missing
        for entry in entries:
            if entry[1] == -1:
                entry[1] = share
    return entries


def _h_bssplit(st: dict[str, Any], value: Optional[str]) -> None:
    parts = _split_ddir(_req(value))
    target = list(st["bssplit"])
    changed = False
    for i, part in enumerate(parts):
        parsed = _parse_split(st, part) if part is not None else None
        if parsed is not None:
            target[i] = parsed
            changed = True
    if not changed:
        raise ValueError("empty value")
    st["bssplit"] = target


def _h_flag(key: str) -> Handler:
    def handler(st: dict[str, Any], value: Optional[str]) -> None:
        st[key] = 1 if value is None else parse_flag(value)

    return handler


def _h_bool(key: str) -> Handler:
    def handler(st: dict[str, Any], value: Optional[str]) -> None:
        st[key] = parse_bool(_req(value))

    return handler


def _h_uint(key: str, lo: Optional[int] = None, hi: int = FIO_UINT_MAX, why: Optional[str] = None) -> Handler:
    """A fio FIO_OPT_INT: at most 2^32-1 unless the option has its own maximum."""
    reason = why if why is not None else (_WHY_UINT if hi == FIO_UINT_MAX else "")

    def handler(st: dict[str, Any], value: Optional[str]) -> None:
        st[key] = _uint(st, _req(value), lo=lo, hi=hi, why=reason)

    return handler


def _h_size_pct(key: str) -> Handler:
    def handler(st: dict[str, Any], value: Optional[str]) -> None:
        text = _req(value)
        if text.endswith(("z", "Z")) and re.fullmatch(r"[0-9]+[zZ]", text):
            raise ValueError("zone-count values ('z' suffix) are not supported")
        v = _size(st, text, allow_percent=True)
        if isinstance(v, Percent) and v.value > 100:
            # fio either refuses (io_size) or reads "150%" as an enormous byte count.
            raise ValueError("percentages above 100% are not supported")
        if isinstance(v, int):
            _check_max(v, FIO_NUMBER_MAX, _WHY_NUMBER)
        st[key] = v

    return handler


_WHY_RUN = "the longest run the engine simulates"
_WHY_THINK = "fio keeps it in 32-bit microseconds"


def _time_us(text: str, default_unit: str, hi: int, why: str) -> int:
    us = parse_time_us(text, default_unit=default_unit)
    if us > hi:
        raise ValueError(f"max value out of range: {describe_us(us)} ({describe_us(hi)} max: {why})")
    return us


def _h_time(key: str, default_unit: str, hi: int = MAX_RUN_US, why: str = _WHY_RUN) -> Handler:
    """runtime, ramp_time (seconds by default; the engine's run limit) and thinktime,
    thinktime_spin (microseconds; fio's 32-bit field)."""

    def handler(st: dict[str, Any], value: Optional[str]) -> None:
        st[key] = _time_us(_req(value), default_unit, hi, why)

    return handler


def _h_startdelay(st: dict[str, Any], value: Optional[str]) -> None:
    # A range ("1-5", "1:5") draws a start delay per clone (fixup_options).
    segments = per_direction_segments(_req(value))
    values = [_time_us(t, "s", MAX_RUN_US, _WHY_RUN) for t, _, _ in segments if t != ""]
    if not values or len(values) > 2:
        raise ValueError("expected a time or a time range low-high")
    lo = values[0]
    hi = values[1] if len(values) == 2 else lo
    st["startdelay_us"] = (lo, hi)


def _h_randseed(st: dict[str, Any], value: Optional[str]) -> None:
    v = _uint(st, _req(value))
    if v >= 1 << 64:
        raise ValueError("does not fit in 64 bits")
    st["randseed"] = v


def _h_choice(key: str, choices: Sequence[str], mapping: Optional[dict[str, str]] = None) -> Handler:
    def handler(st: dict[str, Any], value: Optional[str]) -> None:
        text = _req(value)
        if text not in choices:
            raise ValueError(f"not one of {', '.join(choices)}")
        st[key] = mapping.get(text, text) if mapping else text

    return handler


def _float(text: str) -> float:
    if not re.fullmatch(r"[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?", text):
        raise ValueError(f"'{text}' is not a number")
    return float(text)


def _h_random_distribution(st: dict[str, Any], value: Optional[str]) -> None:
    text = _req(value)
    kind = text.partition(":")[0].partition(",")[0]
    if kind not in ("random", "zipf", "pareto", "normal", "zoned", "zoned_abs"):
        raise ValueError("not one of random, zipf, pareto, normal, zoned, zoned_abs")
    dist: dict[str, Any] = {"kind": kind, "param": None, "center": None, "zones": [None, None, None]}
    if kind in ("zoned", "zoned_abs"):
        if not text.startswith(kind + ":"):
            raise ValueError(f"expected {kind}:<zones>")
        dist["zones"] = _parse_zones(st, text[len(kind) + 1 :].strip(), absolute=kind == "zoned_abs")
    elif kind == "random":
        if text != "random":
            raise ValueError("'random' takes no parameter")
    else:
        rest = text[len(kind) :]
        param = {"zipf": 1.1, "pareto": 0.2, "normal": 0.0}[kind]
        center = None
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"expected {kind}:<value>[:<center>]")
            fields = rest[1:].split(":")
            if len(fields) > 2 or fields[0] == "":
                raise ValueError(f"expected {kind}:<value>[:<center>]")
            param = _float(fields[0])
            if len(fields) == 2:
                center = _float(fields[1])
                if not 0.0 <= center <= 1.0:
                    raise ValueError("distribution center out of range (0 <= center <= 1.0)")
        # Range checks from options.c str_random_distribution_cb.
        if kind == "zipf" and param == 1.0:
            raise ValueError("zipf theta must be different than 1.0")
        if kind == "pareto" and not 0.0 < param < 1.0:
            raise ValueError("pareto input out of range (0 < input < 1.0)")
        if kind == "normal" and not 0.0 <= param < 100.0:
            raise ValueError("normal deviation out of range (0 <= input < 100.0)")
        dist["param"] = param
        dist["center"] = center
    st["random_distribution"] = dist


def _parse_zones(st: dict[str, Any], text: str, *, absolute: bool) -> list[Optional[list[dict[str, int]]]]:
    out: list[Optional[list[dict[str, int]]]] = [None, None, None]
    for ddir, part in enumerate(_split_ddir(text)):
        if not part:
            continue
        zones: list[dict[str, int]] = []
        access_total = 0
        range_total = 0
        range_missing = 0
        for item in part.split(":"):
            if item == "":
                break
            access_text, slash, range_text = item.partition("/")
            access = _uint(st, access_text, hi=100)
            access_total += access
            if absolute:
                if not slash or range_text == "":
                    raise ValueError("zoned_abs needs access%/size for every zone")
                size = _uint(st, range_text, lo=1, hi=FIO_NUMBER_MAX, why=_WHY_NUMBER)
                zones.append({"access_pct": access, "range_bytes": size})
            else:
                if slash and range_text != "":
                    if not re.fullmatch(r"[0-9]+", range_text):
                        raise ValueError(f"'{range_text}' is not a percentage")
                    pct = min(int(range_text), 100)
                    if pct == 0:
                        pct = -1
                else:
                    pct = -1
                if pct == -1:
                    range_missing += 1
                else:
                    range_total += pct
                zones.append({"access_pct": access, "range_pct": pct})
            if len(zones) > 256:
                raise ValueError("more than 256 zones")
        if access_total > 100 or range_total > 100:
            raise ValueError("zone percentages add to more than 100%")
        if access_total < 100:
            raise ValueError(f"access percentages don't add up to 100 (got {access_total})")
        if range_missing:
            if range_missing == 1 and len(zones) == 1:
                range_total = 100
            share = (100 - range_total) // range_missing
            for zone in zones:
                if zone.get("range_pct") == -1:
                    zone["range_pct"] = share
        out[ddir] = zones
    if out == [None, None, None]:
        raise ValueError("no zones given")
    return out


def _h_percentile_list(st: dict[str, Any], value: Optional[str]) -> None:
    text = _req(value)
    items = text.split(":")
    if len(items) > 20:
        raise ValueError("the list exceeds max length 20")
    values = []
    precision = 0
    for item in items:
        v = _float(item)
        if v > 100.0:
            raise ValueError(f"value out of range: {v:f} (range max: 100.000000)")
        values.append(v)
        if "." in item:
            precision = max(precision, len(re.match(r"[0-9]*", item.split(".", 1)[1]).group(0)))  # type: ignore[union-attr]
    st["percentile_list"] = values
    st["percentile_precision"] = precision


def _h_float_list(key: str) -> Handler:
    """fio's FIO_OPT_FLOAT_LIST: up to 20 numbers separated by ':' (parse.c)."""

    def handler(st: dict[str, Any], value: Optional[str]) -> None:
        items = _req(value).split(":")
        if len(items) > 20:
            raise ValueError("the list exceeds max length 20")
        st[key] = [_float(item) for item in items]

    return handler


def _h_log(kind: str) -> Handler:
    def handler(st: dict[str, Any], value: Optional[str]) -> None:
        # Without a value fio names the log after the job (init.c make_log_name).
        logs = dict(st["logs"])
        logs[kind] = value if value else ""
        st["logs"] = logs

    return handler


def _h_ioengine(st: dict[str, Any], value: Optional[str]) -> None:
    text = _req(value)
    if text not in SYNC_ENGINES + ASYNC_ENGINES:
        raise ValueError(f"I/O engine '{text}' is not supported (supported: {', '.join(SYNC_ENGINES + ASYNC_ENGINES)})")
    st["ioengine"] = text


def _h_kb_base(st: dict[str, Any], value: Optional[str]) -> None:
    text = _req(value)
    if text not in ("1024", "1000"):
        raise ValueError("not one of 1024, 1000")
    st["kb_base"] = int(text)


def _h_unified(st: dict[str, Any], value: Optional[str]) -> None:
    text = _req(value)
    mapping = {"none": "none", "0": "none", "mixed": "mixed", "1": "mixed", "both": "both", "2": "both"}
    if text not in mapping:
        raise ValueError("not one of none, mixed, both, 0, 1, 2")
    st["unified_rw_reporting"] = mapping[text]


def _h_noop(kind: str) -> Handler:
    """No-op options still get their value checked the way fio checks it."""

    def handler(st: dict[str, Any], value: Optional[str]) -> None:
        if kind == "bool":
            parse_bool(_req(value))
        elif kind == "flag":
            if value is not None:
                parse_flag(value)
        elif kind == "uint":
            _uint(st, _req(value))
        elif kind == "size":
            _size(st, _req(value))
        elif kind == "str":
            if _req(value) == "":
                raise ValueError("empty value")
        elif kind == "optstr":
            pass
        else:  # pragma: no cover - table error
            raise AssertionError(kind)

    return handler


# --- issue 10: iolog handlers ---


def _h_replay_align(st: dict[str, Any], value: Optional[str]) -> None:
    align = _uint(st, _req(value), hi=FIO_UINT_MAX, why=_WHY_UINT)
    if align == 0 or align & (align - 1):
        raise ValueError("must be a power-of-2")
    st["replay_align"] = align


def _h_replay_skip(st: dict[str, Any], value: Optional[str]) -> None:
    # options.c str_replay_skip_cb: a comma-separated list, accumulated over the option's uses.
    skip = set(st.get("replay_skip") or ())
    for word in _req(value).strip().split(","):
        if word not in ("read", "write", "trim", "sync"):
            raise ValueError(f"Unknown skip type: {word} (valid: read, write, trim, sync)")
        skip.add(word)
    st["replay_skip"] = sorted(skip)


def _opt(name: str, handler: Handler, **kw: Any) -> OptionDef:
    return OptionDef(name=name, handler=handler, **kw)


# --- issue 10: gen (zonemode=strided) ---
def _h_zonemode(st: dict[str, Any], value: Optional[str]) -> None:
    mode = _req(value)
    if mode == "zbd":
        raise ValueError("zoned block devices (zonemode=zbd) are not simulated; use none or strided")
    if mode not in ("none", "strided"):
        raise ValueError("not one of none, strided, zbd")
    st["zonemode"] = mode


def _h_zone_bytes(key: str) -> Handler:
    def handler(st: dict[str, Any], value: Optional[str]) -> None:
        text = _req(value)
        if text.rstrip().lower().endswith("z"):
            raise ValueError("zone-count values ('z' suffix) are only meaningful with zonemode=zbd")
        st[key] = _uint(st, text, hi=FIO_NUMBER_MAX, why=_WHY_NUMBER)

    return handler


_SIM_OPTIONS: list[OptionDef] = [
    _opt("name", _h_str("name"), help="job name"),
    _opt("description", _h_str("description")),
    _opt("filename", _h_filename, prio=-1, help="target: nsN, ns=N, /dev/nvmeXnN or a path (default target)"),
    _opt("rw", _h_rw, aliases=("readwrite",)),
    _opt("rwmixread", _h_rwmixread),
    _opt("rwmixwrite", _h_rwmixwrite),
    _opt("bs", _h_per_dir_uint("bs", lo=1, hi=MAX_BS, why=_WHY_BS), aliases=("blocksize",)),
    _opt("ba", _h_per_dir_uint("ba", lo=1, hi=FIO_NUMBER_MAX, why=_WHY_NUMBER), aliases=("blockalign",)),
    _opt("bsrange", _h_bsrange, aliases=("blocksize_range",)),
    _opt("bssplit", _h_bssplit),
    _opt("bs_unaligned", _h_flag("bs_unaligned"), aliases=("blocksize_unaligned",), needs_value=False),
    _opt("offset", _h_size_pct("offset"), aliases=("fileoffset",)),
    _opt("offset_align", _h_uint("offset_align", lo=1)),
    _opt("offset_increment", _h_size_pct("offset_increment")),
    _opt("size", _h_size_pct("size")),
    _opt("io_size", _h_size_pct("io_size"), aliases=("io_limit",)),
    _opt("fill_device", _h_bool("fill_device"), aliases=("fill_fs",)),
    _opt("loops", _h_uint("loops", lo=1)),
    _opt("number_ios", _h_uint("number_ios", hi=FIO_NUMBER_MAX, why=_WHY_NUMBER)),
    _opt("iodepth", _h_uint("iodepth", lo=1, hi=MAX_IODEPTH, why="an NVMe queue holds at most 65536 commands")),
    _opt("numjobs", _h_uint("numjobs", lo=1, hi=MAX_THREADS, why="fio's REAL_MAX_JOBS threads in a run")),
    _opt("time_based", _h_flag("time_based"), needs_value=False),
    _opt("runtime", _h_time("runtime_us", "s"), aliases=("timeout",)),
    _opt("ramp_time", _h_time("ramp_time_us", "s")),
    _opt("startdelay", _h_startdelay),
    _opt("norandommap", _h_flag("norandommap"), needs_value=False),
    _opt("randrepeat", _h_bool("randrepeat")),
    _opt("randseed", _h_randseed),
    _opt("allrandrepeat", _h_bool("allrandrepeat")),
    _opt("random_generator", _h_choice("random_generator", ("tausworthe", "lfsr", "tausworthe64"))),
    _opt("random_distribution", _h_random_distribution),
    _opt("percentage_random", _h_per_dir_uint("percentage_random", hi=100)),
    _opt("rate", _h_per_dir_uint("rate", hi=FIO_NUMBER_MAX, why=_WHY_NUMBER)),
    _opt("rate_iops", _h_per_dir_uint("rate_iops", hi=FIO_UINT_MAX, why=_WHY_UINT)),
    _opt("rate_process", _h_choice("rate_process", ("linear", "poisson"))),
    _opt("thinktime", _h_time("thinktime_us", "us", FIO_UINT_MAX, _WHY_THINK)),
    _opt("thinktime_spin", _h_time("thinktime_spin_us", "us", FIO_UINT_MAX, _WHY_THINK)),
    _opt("thinktime_blocks", _h_uint("thinktime_blocks", lo=1)),
    _opt("thinktime_blocks_type", _h_choice("thinktime_blocks_type", ("complete", "issue"))),
    _opt("stonewall", _h_flag("stonewall"), aliases=("wait_for_previous",), needs_value=False),
    _opt("new_group", _h_flag("new_group"), needs_value=False),
    _opt("group_reporting", _h_flag("group_reporting"), needs_value=False),
    _opt("percentile_list", _h_percentile_list),
    _opt("clat_percentiles", _h_bool("clat_percentiles")),
    _opt("lat_percentiles", _h_bool("lat_percentiles")),
    _opt("slat_percentiles", _h_bool("slat_percentiles")),
    _opt("write_bw_log", _h_log("bw"), needs_value=False),
    _opt("write_iops_log", _h_log("iops"), needs_value=False),
    _opt("write_lat_log", _h_log("lat"), needs_value=False),
    _opt("write_hist_log", _h_log("hist"), needs_value=False),
    _opt("log_avg_msec", _h_uint("log_avg_msec")),
    _opt("log_hist_msec", _h_uint("log_hist_msec")),
    _opt("log_hist_coarseness", _h_uint("log_hist_coarseness", hi=6)),
    _opt("per_job_logs", _h_bool("per_job_logs")),
    _opt("log_offset", _h_bool("log_offset")),
    _opt("log_max_value", _h_bool("log_max_value")),
    _opt("bwavgtime", _h_uint("bwavgtime", lo=1)),
    _opt("iopsavgtime", _h_uint("iopsavgtime", lo=1)),
    _opt("ioengine", _h_ioengine),
    _opt("kb_base", _h_kb_base, prio=1),
    _opt("significant_figures", _h_uint("significant_figures", lo=1, hi=10)),
    _opt("unified_rw_reporting", _h_unified),
    # --- issue 10: gen ---
    _opt("zonemode", _h_zonemode),
    _opt("zonesize", _h_zone_bytes("zone_size")),
    _opt("zonerange", _h_zone_bytes("zone_range")),
    _opt("zoneskip", _h_zone_bytes("zone_skip")),
    # --- issue 10: iolog (write_iolog, read_iolog and fio's replay options; docs/fio.md §2.10) ---
    _opt("write_iolog", _h_str("write_iolog"), help="append the issued I/Os to this file (fio's iolog version 3)"),
    _opt("read_iolog", _h_str("read_iolog"), help="replay a fio iolog (version 2 or 3); a:b gives one per clone"),
    _opt("read_iolog_chunked", _h_bool("read_iolog_chunked")),
    _opt("replay_no_stall", _h_bool("replay_no_stall")),
    _opt("replay_time_scale", _h_uint("replay_time_scale", lo=1)),
    _opt("replay_redirect", _h_str("replay_redirect")),
    _opt("replay_align", _h_replay_align),
    _opt("replay_scale", _h_uint("replay_scale")),
    _opt("replay_skip", _h_replay_skip),
    _opt("merge_blktrace_file", _h_str("merge_blktrace_file"), help="merge the read_iolog blktrace traces by time into this file, then replay it"),
    _opt("merge_blktrace_scalars", _h_float_list("merge_blktrace_scalars")),
    _opt("merge_blktrace_iters", _h_float_list("merge_blktrace_iters")),
]

# --- issue 10: sched ---
# Scheduling between jobs (docs/fio.md §2.6): exitall is one flag for the whole run in fio
# (options.c str_exitall_cb sets exitall_on_terminate), exit_what says what a finishing job
# terminates, wait_for names a job that must finish before this one starts (checked like
# init.c wait_for_ok after the whole run is read).
_SIM_OPTIONS += [
    _opt("exitall", _h_flag("exitall"), needs_value=False),
    _opt("exit_what", _h_choice("exit_what", ("group", "stonewall", "all"))),
    _opt("wait_for", _h_str("wait_for")),
    # flow.c: weight (0 = off, at most FLOW_MAX_WEIGHT), group id, and microseconds to sleep
    # after being held back (fio reads flow_sleep as a plain integer of microseconds).
    _opt("flow", _h_uint("flow", hi=1000, why="fio's FLOW_MAX_WEIGHT")),
    _opt("flow_id", _h_uint("flow_id", hi=FIO_UINT_MAX, why=_WHY_UINT)),
    _opt("flow_sleep", _h_uint("flow_sleep", hi=FIO_UINT_MAX, why=_WHY_UINT)),
]


# --- issue 10: latency_target ---
# fio's queue-depth search (io_u.c lat_target_*; docs/fio.md §2.6): latency_target and
# latency_window are times in microseconds by default (options.c FIO_OPT_STR_VAL_TIME,
# is_time), latency_percentile a float in [0, 100] (minfp/maxfp, default 100),
# latency_run a bool.
def _h_latency_percentile(st: dict[str, Any], value: Optional[str]) -> None:
    v = _float(_req(value))
    if not 0.0 <= v <= 100.0:
        raise ValueError(f"value out of range: {v:g} (allowed 0 to 100, a percentage)")
    st["latency_percentile"] = v


_SIM_OPTIONS += [
    _opt("latency_target", _h_time("latency_target", "us")),
    _opt("latency_window", _h_time("latency_window", "us")),
    _opt("latency_percentile", _h_latency_percentile),
    _opt("latency_run", _h_bool("latency_run")),
]


# --- issue 10: ss ---
# fio's steady-state detection (docs/fio.md §2.6; options.c str_steadystate_cb, steadystate.c).
_WHY_SS_DUR = "the window keeps one sample per second, at most a day of them"
_SS_CRITERIA = ("iops", "iops_slope", "bw", "bw_slope")
_SS_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def _ss_float(text: str, what: str) -> float:
    if not _SS_NUMBER.fullmatch(text):
        raise ValueError(f"could not parse steadystate {what} '{text}' (expected a number)")
    return float(text)


def _h_steadystate(st: dict[str, Any], value: Optional[str]) -> None:
    """``criterion:limit``: criterion one of iops, iops_slope, bw, bw_slope; the limit a
    number, a percentage of the window's mean (``10%``), or for bw a size per second
    (``2MiB``, read with kb_base like every fio size)."""
    criterion, sep, limit = _req(value).partition(":")
    if criterion not in _SS_CRITERIA:
        raise ValueError(f"criterion '{criterion}' is not one of {', '.join(_SS_CRITERIA)} (form criterion:limit, e.g. iops_slope:0.1%)")
    limit = limit.strip()
    if not sep or not limit:
        raise ValueError("steadystate threshold must be specified in addition to criterion (form criterion:limit, e.g. iops:10%)")
    percent = limit.endswith("%")
    if percent:
        number = _ss_float(limit[:-1].strip(), "threshold percentage")
    elif criterion.startswith("iops"):
        number = _ss_float(limit, "IOPS threshold")
    else:
        negative = limit.startswith("-")
        try:
            number = float(_size(st, limit.lstrip("-")))
        except ValueError:
            raise ValueError(f"could not parse steadystate BW threshold '{limit}' (expected bytes/s, e.g. 2MiB)") from None
        number = -number if negative else number
    st["steadystate"] = {"criterion": criterion, "percent": percent, "limit": number}


_SIM_OPTIONS += [
    _opt("steadystate", _h_steadystate, aliases=("ss",)),
    # Whole seconds (fio truncates ss_dur to seconds); 0 turns the detection off.
    _opt("steadystate_duration", _h_time("ss_dur_us", "s", 86_400 * 10**6, _WHY_SS_DUR), aliases=("ss_dur",)),
    _opt("steadystate_ramp_time", _h_time("ss_ramp_us", "s"), aliases=("ss_ramp",)),
]

# name, value kind, aliases
_NOOP_SPECS: list[tuple[str, str, tuple[str, ...]]] = [
    ("direct", "bool", ()),
    ("buffered", "bool", ()),
    ("thread", "flag", ()),
    ("refill_buffers", "flag", ()),
    ("zero_buffers", "flag", ()),
    ("scramble_buffers", "bool", ()),
    ("buffer_pattern", "str", ()),
    ("buffer_compress_percentage", "uint", ()),
    ("buffer_compress_chunk", "uint", ()),
    ("dedupe_percentage", "uint", ()),
    ("invalidate", "bool", ()),
    ("overwrite", "bool", ()),
    ("create_serialize", "bool", ()),
    ("create_fsync", "bool", ()),
    ("create_on_open", "bool", ()),
    ("allow_file_create", "bool", ()),
    ("allow_mounted_write", "bool", ()),
    ("fadvise_hint", "str", ()),
    ("unlink", "bool", ()),
    ("unlink_each_loop", "bool", ()),
    ("cpus_allowed", "str", ()),
    ("cpus_allowed_policy", "str", ()),
    ("cpumask", "uint", ()),
    ("numa_cpu_nodes", "str", ()),
    ("numa_mem_policy", "str", ()),
    ("nice", "str", ()),
    ("prio", "uint", ()),
    ("prioclass", "uint", ()),
    ("mem", "str", ("iomem",)),
    ("iomem_align", "uint", ("mem_align",)),
    ("hugepage-size", "size", ()),
    ("lockmem", "size", ()),
    ("clocksource", "str", ()),
    ("gtod_cpu", "uint", ()),
    ("disk_util", "bool", ()),
    ("iodepth_batch", "uint", ("iodepth_batch_submit",)),
    ("iodepth_batch_complete_min", "uint", ("iodepth_batch_complete",)),
    ("iodepth_batch_complete_max", "uint", ()),
    ("iodepth_low", "uint", ()),
    ("uid", "uint", ()),
    ("gid", "uint", ()),
    ("cgroup", "str", ()),
    ("cgroup_weight", "uint", ()),
    ("cgroup_nodelete", "bool", ()),
    ("error_dump", "bool", ()),
    ("ioscheduler", "str", ()),
    ("lockfile", "str", ()),
    ("filename_format", "str", ()),
    ("unique_filename", "bool", ()),
]

# Engine-specific options (fio loads the engine, then parses these in a second pass and
# echoes them after the general options). All are about host submission paths.
_ENGINE_NOOP_SPECS: list[tuple[str, str, tuple[str, ...]]] = [
    ("hipri", "flag", ("io_uring", "io_uring_cmd", "pvsync2")),
    ("hipri_percentage", "uint", ("pvsync2",)),
    ("fixedbufs", "flag", ("io_uring", "io_uring_cmd")),
    ("registerfiles", "flag", ("io_uring", "io_uring_cmd")),
    ("sqthread_poll", "flag", ("io_uring", "io_uring_cmd")),
    ("sqthread_poll_cpu", "uint", ("io_uring", "io_uring_cmd")),
    ("nonvectored", "uint", ("io_uring", "io_uring_cmd")),
    ("uncached", "uint", ("io_uring", "io_uring_cmd", "pvsync2")),
    ("nowait", "flag", ("io_uring", "io_uring_cmd", "libaio", "pvsync2")),
    ("force_async", "uint", ("io_uring", "io_uring_cmd")),
    ("cmd_type", "str", ("io_uring_cmd",)),
    ("userspace_reap", "flag", ("libaio",)),
    ("uri", "str", ("nbd",)),
]

_FLAG_NOOP_KINDS = ("flag",)

OPTIONS: dict[str, OptionDef] = {}
for _o in _SIM_OPTIONS:
    OPTIONS[_o.name] = _o
for _name, _kind, _aliases in _NOOP_SPECS:
    OPTIONS[_name] = OptionDef(
        name=_name,
        handler=_h_noop(_kind),
        kind=NOOP,
        aliases=_aliases,
        needs_value=_kind not in _FLAG_NOOP_KINDS,
    )

ENGINE_OPTIONS: dict[str, OptionDef] = {}
for _name, _kind, _engines in _ENGINE_NOOP_SPECS:
    ENGINE_OPTIONS[_name] = OptionDef(
        name=_name,
        handler=_h_noop(_kind),
        kind=NOOP,
        needs_value=_kind not in _FLAG_NOOP_KINDS,
        engines=_engines,
    )

# --- issue 10: opts ---
# Every other option fio 3.33 accepts in a job, sorted into (docs/fio.md §2.6):
#  * accepted with no effect on a simulated drive: checked the way fio checks the value,
#    echoed like fio, and listed as ignored (IGNORED_REASONS; Run.ignored, the CLI's
#    notes and the JSON's "ssdtwin" object);
#  * accepted only at the value that turns them off (fsync=0, sync=none ...): that value
#    is ignored like the others, any other value is refused with the reason;
#  * refused with a reason (_WHY_REFUSED).
# filesize is simulated (the target's size for the region, filesetup.c setup_files).

Check = Callable[[dict[str, Any], str], Any]


def _c_bool(st: dict[str, Any], text: str) -> Any:
    return int(parse_bool(text))


def _c_flag(st: dict[str, Any], text: str) -> Any:
    return parse_flag(text)


def _c_str(st: dict[str, Any], text: str) -> Any:
    if text == "":
        raise ValueError("empty value")
    return text


def _c_size(st: dict[str, Any], text: str) -> Any:
    return _check_max(_size(st, text), FIO_NUMBER_MAX, _WHY_NUMBER)


def _c_int(lo: Optional[int] = None, hi: int = FIO_UINT_MAX) -> Check:
    return lambda st, text: _uint(st, text, lo=lo, hi=hi, why=_WHY_UINT if hi == FIO_UINT_MAX else "")


def _c_sint(lo: int, hi: int) -> Check:
    """A signed fio FIO_OPT_INT with a range (nice)."""

    def check(st: dict[str, Any], text: str) -> Any:
        if not re.fullmatch(r"-?[0-9]{1,20}", text):
            raise ValueError("not an integer")
        value = int(text)
        if value < lo:
            raise ValueError(f"min value out of range: {value} ({lo} min)")
        if value > hi:
            raise ValueError(f"max value out of range: {value} ({hi} max)")
        return value

    return check


def _c_choice(*choices: str) -> Check:
    def check(st: dict[str, Any], text: str) -> Any:
        if text not in choices:
            raise ValueError(f"not one of {', '.join(choices)}")
        return text

    return check


def _c_time(default_unit: str) -> Check:
    return lambda st, text: _time_us(text, default_unit, FIO_UINT_MAX * 1_000_000, _WHY_UINT)


def _c_per_dir(check: Check) -> Check:
    """read,write[,trim] values, split like bs (parse.c handle_option)."""

    def per_dir(st: dict[str, Any], text: str) -> Any:
        target: list[Any] = [0, 0, 0]
        _store_per_dir(target, per_direction_segments(text, ","), lambda t: check(st, t))
        return target

    return per_dir


def _c_file_service_type(st: dict[str, Any], text: str) -> Any:
    # options.c str_fst_cb: a type, optionally ":N" (files per switch) or ":value" (the
    # distribution's parameter for zipf, pareto, normal/gauss).
    kind, sep, param = text.partition(":")
    if kind not in ("random", "zipf", "pareto", "normal", "gauss", "roundrobin", "sequential"):
        raise ValueError("not one of random, zipf, pareto, normal, gauss, roundrobin, sequential (optionally :N)")
    if sep:
        _float(param)
    return text


def _c_cmdprio_bssplit(st: dict[str, Any], text: str) -> Any:
    # engines/cmdprio.c: per direction (comma-separated) a ':' list of bs/pct, each
    # optionally followed by /class/level; fio refuses anything else at engine init.
    for part in text.split(","):
        for item in filter(None, part.split(":")):
            fields = item.split("/")
            if not 2 <= len(fields) <= 4:
                raise ValueError(f"'{item}' is not bs/percentage[/class/level]")
            _uint(st, fields[0], lo=1, hi=MAX_BS, why=_WHY_BS)
            for field in fields[1:]:
                if not re.fullmatch(r"[0-9]+", field):
                    raise ValueError(f"'{item}' is not bs/percentage[/class/level]")
    return text


def _c_filesize(st: dict[str, Any], text: str) -> Any:
    """filesize=N or low-high (FIO_OPT_STR_VAL with off1/off2): the target's size."""
    cut = _split_top(text, "-")
    if cut is None:
        cut = _split_top(text, ":")
    parts = [text] if cut is None else [text[:cut], text[cut + 1 :]]
    values = [_uint(st, p, lo=1, hi=FIO_NUMBER_MAX, why=_WHY_NUMBER) for p in parts]
    return (min(values), max(values))


def _h_checked(check: Check, *, off: Optional[Callable[[Any], bool]] = None, refuse: str = "", store: str = "") -> Handler:
    """Check the value like fio; with ``off``, refuse (``refuse`` says why) any value
    that does not turn the option off; with ``store``, keep the parsed value there."""

    def handler(st: dict[str, Any], value: Optional[str]) -> None:
        parsed = check(st, "1" if value is None else value)
        if off is not None and not off(parsed):
            raise ValueError(refuse)
        if store:
            st[store] = parsed

    return handler


def _is_zero(value: Any) -> bool:
    return not any(value) if isinstance(value, list) else not value


# (name, value check, reason it has no effect, aliases, flag: may be written alone)
_IGNORED_SPECS: list[tuple[str, Check, str, tuple[str, ...], bool]] = [
    (
        "directory",
        _c_str,
        "the target is a namespace, not a directory (only completes a relative filename: directory=/dev filename=nvme0n1)",
        (),
        False,
    ),
    ("gtod_reduce", _c_bool, "reading the clock costs nothing in simulated time; latencies are still reported", (), False),
    ("disable_lat", _c_bool, "measuring costs nothing in simulated time; lat is still reported", (), False),
    ("disable_clat", _c_bool, "measuring costs nothing in simulated time; clat is still reported", (), False),
    ("disable_slat", _c_bool, "measuring costs nothing in simulated time; slat is still reported", (), False),
    ("disable_bw_measurement", _c_bool, "measuring costs nothing in simulated time; bw is still reported", ("disable_bw",), False),
    (
        "io_submit_mode",
        _c_choice("inline", "offload"),
        "who submits I/O on the host (a thread pool or the job) only changes host CPU use",
        (),
        False,
    ),
    ("log_prio", _c_bool, "I/O priorities are not simulated; the prio column of log files stays 0", (), False),
    ("dedupe_mode", _c_choice("repeat", "working_set"), "buffer contents: the twin stores no data", (), False),
    ("dedupe_working_set_percentage", _c_int(0, 100), "buffer contents: the twin stores no data", (), False),
    ("dedupe_global", _c_bool, "buffer contents: the twin stores no data", (), False),
    ("do_verify", _c_bool, "acts only with verify=, which ssdtwin refuses", (), False),
    ("verify_interval", _c_int(80), "acts only with verify=, which ssdtwin refuses", (), False),
    ("verify_offset", _c_int(40), "acts only with verify=, which ssdtwin refuses", (), False),
    ("verify_pattern", _c_str, "acts only with verify= (and fills buffers): the twin stores no data", (), False),
    ("verify_fatal", _c_bool, "acts only with verify=, which ssdtwin refuses", (), False),
    ("verify_dump", _c_bool, "acts only with verify=, which ssdtwin refuses", (), False),
    ("verify_async", _c_int(), "acts only with verify=, which ssdtwin refuses", (), False),
    ("verify_async_cpus", _c_str, "acts only with verify=, which ssdtwin refuses", (), False),
    ("verify_backlog", _c_size, "acts only with verify=, which ssdtwin refuses", (), False),
    ("verify_backlog_batch", _c_int(), "acts only with verify=, which ssdtwin refuses", (), False),
    ("verify_state_load", _c_bool, "acts only with verify=, which ssdtwin refuses", (), False),
    ("verify_state_save", _c_bool, "acts only with verify=, which ssdtwin refuses", (), False),
    ("experimental_verify", _c_bool, "acts only with verify=, which ssdtwin refuses", (), False),
    ("trim_verify_zero", _c_bool, "acts only with verify=, which ssdtwin refuses", (), False),
    ("trim_backlog_batch", _c_int(), "acts only with trim_backlog, which ssdtwin refuses", (), False),
    ("verifysort", _c_str, "deprecated: fio 3.33 ignores it too", (), False),
    ("verifysort_nr", _c_str, "deprecated: fio 3.33 ignores it too", (), False),
    (
        "file_append",
        _c_bool,
        "fio applies it to regular files only; the target is a block device (filesetup.c get_start_offset)",
        (),
        False,
    ),
    (
        "fallocate",
        _c_choice("none", "native", "posix", "keep", "truncate", "0", "1"),
        "preallocates regular files; the target is a namespace",
        (),
        False,
    ),
    ("file_service_type", _c_file_service_type, "chooses among several files; a job has one target", (), False),
    ("openfiles", _c_int(), "a job has one target", (), False),
    ("atomic", _c_bool, "like direct=1: the simulated drive has no page cache", (), False),
    ("softrandommap", _c_bool, "the random map always fits in the twin", (), False),
    ("exitall_on_error", _c_flag, "the simulated drive reports no I/O errors", (), True),
    (
        "continue_on_error",
        _c_choice("none", "read", "write", "io", "verify", "all", "0", "1"),
        "the simulated drive reports no I/O errors",
        (),
        False,
    ),
    ("ignore_error", _c_str, "the simulated drive reports no I/O errors", (), False),
    (
        "write_hint",
        _c_choice("none", "short", "medium", "long", "extreme"),
        "a write lifetime hint: Linux no longer passes it to NVMe drives (streams went in 5.18), and the twin places no data by hint",
        (),
        False,
    ),
    ("log_entries", _c_int(1024, 1024 * 1024), "the initial size of fio's log buffers", (), False),
    ("log_compression", _c_int(1024, 512 * 1024 * 1024), "compresses logs in memory; the log files written are the same", (), False),
    ("log_compression_cpus", _c_str, "compresses logs in memory; the log files written are the same", (), False),
    ("log_alternate_epoch_clock_id", _c_int(), "acts only with log_unix_epoch/log_alternate_epoch, which ssdtwin refuses", (), False),
    ("rate_cycle", _c_int(), "the window of rate_min/rate_iops_min, which ssdtwin refuses", ("ratecycle",), False),
    ("gpu_dev_id", _c_int(), "only for buffers in GPU memory (mem=cudamalloc)", (), False),
    # Options of fio's built-in profiles (profiles/tiobench.c, act.c): fio registers them
    # for every job, and they act only with --profile, which ssdtwin does not take.
    ("threads", _c_int(), "an option of fio's tiobench profile (its thread count); acts only with --profile=tiobench", (), False),
    ("block", _c_int(), "an option of fio's tiobench profile; acts only with --profile=tiobench", (), False),
    ("numruns", _c_int(), "an option of fio's tiobench profile; acts only with --profile=tiobench", (), False),
    ("dir", _c_str, "an option of fio's tiobench profile; acts only with --profile=tiobench", (), False),
    ("device-names", _c_str, "an option of fio's act profile; acts only with --profile=act", (), False),
    ("load", _c_int(), "an option of fio's act profile; acts only with --profile=act", (), False),
    ("test-duration", _c_time("s"), "an option of fio's act profile; acts only with --profile=act", (), False),
    ("threads-per-queue", _c_int(), "an option of fio's act profile; acts only with --profile=act", (), False),
    ("read-req-num-512-blocks", _c_int(), "an option of fio's act profile; acts only with --profile=act", (), False),
    ("large-block-op-kbytes", _c_int(), "an option of fio's act profile; acts only with --profile=act", (), False),
    ("prep", _c_flag, "an option of fio's act profile; acts only with --profile=act", (), True),
]

_WHY_FLUSH = "flushes and FUA writes are not part of the engine contract yet"
_WHY_VERIFY_TRIM = "verify's trim phase (trims of verified blocks) is not simulated"

# (name, value check, is the value "off"?, why other values are refused, aliases, flag)
_OFF_ONLY_SPECS: list[tuple[str, Check, Callable[[Any], bool], str, tuple[str, ...], bool]] = [
    ("fsync", _c_int(), _is_zero, _WHY_FLUSH, (), False),
    ("fdatasync", _c_int(), _is_zero, _WHY_FLUSH, (), False),
    ("write_barrier", _c_int(), _is_zero, _WHY_FLUSH, (), False),
    ("end_fsync", _c_bool, _is_zero, _WHY_FLUSH, (), False),
    ("fsync_on_close", _c_bool, _is_zero, _WHY_FLUSH, (), False),
    ("sync", _c_choice("none", "0", "sync", "1", "dsync"), lambda v: v in ("none", "0"), _WHY_FLUSH, (), False),
    ("nrfiles", _c_int(1), lambda v: v == 1, "one target per job (the namespace)", ("nr_files",), False),
    ("pre_read", _c_bool, _is_zero, "reads the region into the page cache before the job; a simulated drive has none", (), False),
    ("create_only", _c_bool, _is_zero, "the job would only lay out files and do no I/O", (), False),
    ("verify_only", _c_flag, _is_zero, "a verification pass; data verification is not simulated", (), True),
    ("serialize_overlap", _c_bool, _is_zero, "holding back I/Os that overlap ones in flight is not simulated", (), False),
    (
        "rw_sequencer",
        _c_choice("sequential", "identical"),
        lambda v: v == "sequential",
        "repeating one offset (rw=randread:N with identical) is not simulated",
        (),
        False,
    ),
    ("bs_is_seq_rand", _c_bool, _is_zero, "block sizes by sequential/random instead of by direction are not simulated", (), False),
    ("thinktime_iotime", _c_time("s"), _is_zero, "think time after each interval of I/O time is not simulated", (), False),
    ("rate_min", _c_per_dir(_c_size), _is_zero, "minimum rates (fio ends a job that falls below one) are not checked", ("ratemin",), False),
    ("rate_iops_min", _c_per_dir(_c_int()), _is_zero, "minimum rates (fio ends a job that falls below one) are not checked", (), False),
    ("max_latency", _c_per_dir(_c_time("us")), _is_zero, "fio ends a job whose I/O exceeds it; not checked", (), False),
    ("rate_ignore_thinktime", _c_bool, _is_zero, "rate limits that ignore think time are not simulated", (), False),
    ("trim_percentage", _c_int(0, 100), _is_zero, _WHY_VERIFY_TRIM, (), False),
    ("trim_backlog", _c_size, _is_zero, _WHY_VERIFY_TRIM, (), False),
    ("stats", _c_bool, bool, "the twin always collects statistics", (), False),
    ("block_error_percentiles", _c_bool, _is_zero, "trim block error histograms are not produced", (), False),
    ("log_store_compressed", _c_bool, _is_zero, "compressed log files (.fz) are not written", (), False),
    ("log_unix_epoch", _c_bool, _is_zero, "a simulated run has no wall-clock times for log rows", (), False),
    ("log_alternate_epoch", _c_bool, _is_zero, "a simulated run has no wall-clock times for log rows", (), False),
    ("unit_base", _c_choice("0", "8", "1"), lambda v: v in ("0", "8"), "bit-based normal output is not produced", (), False),
]

_ENGINES_CMDPRIO = ("libaio", "io_uring", "io_uring_cmd")
_WHY_PRIO = "I/O priorities are not simulated: the twin's queues serve commands in order"
# Engine options (engines/libaio.c, io_uring.c: the cmdprio options of fio 3.33).
_IGNORED_ENGINE_SPECS: list[tuple[str, Check, str, tuple[str, ...]]] = [
    ("cmdprio_percentage", _c_per_dir(_c_int(0, 100)), _WHY_PRIO, _ENGINES_CMDPRIO),
    ("cmdprio_class", _c_per_dir(_c_int(1, 3)), _WHY_PRIO, _ENGINES_CMDPRIO),
    ("cmdprio", _c_per_dir(_c_int(0, 7)), _WHY_PRIO, _ENGINES_CMDPRIO),
    ("cmdprio_bssplit", _c_cmdprio_bssplit, _WHY_PRIO, _ENGINES_CMDPRIO),
]

# Why the options accepted before issue 10 have no effect (they are listed as ignored too).
IGNORED_REASONS: dict[str, str] = {
    "direct": "the simulated drive has no page cache: I/O always reaches it",
    "buffered": "the simulated drive has no page cache: I/O always reaches it",
    "invalidate": "the simulated drive has no page cache",
    "fadvise_hint": "the simulated drive has no page cache",
    "thread": "threads or processes only change the host; the header says threads",
    "refill_buffers": "buffer contents: the twin stores no data",
    "zero_buffers": "buffer contents: the twin stores no data",
    "scramble_buffers": "buffer contents: the twin stores no data",
    "buffer_pattern": "buffer contents: the twin stores no data",
    "buffer_compress_percentage": "buffer contents: the twin stores no data",
    "buffer_compress_chunk": "buffer contents: the twin stores no data",
    "dedupe_percentage": "buffer contents: the twin stores no data",
    "overwrite": "lays out regular files; the target is a namespace",
    "create_serialize": "lays out regular files; the target is a namespace",
    "create_fsync": "lays out regular files; the target is a namespace",
    "create_on_open": "lays out regular files; the target is a namespace",
    "allow_file_create": "lays out regular files; the target is a namespace",
    "allow_mounted_write": "the target is a namespace of the simulated drive",
    "unlink": "removes regular files; the target is a namespace",
    "unlink_each_loop": "removes regular files; the target is a namespace",
    "filename_format": "names regular files; the target is a namespace",
    "unique_filename": "names regular files; the target is a namespace",
    "lockfile": "host-side file locking; one run owns the image",
    "cpus_allowed": "host CPU placement",
    "cpus_allowed_policy": "host CPU placement",
    "cpumask": "host CPU placement",
    "numa_cpu_nodes": "host CPU placement",
    "numa_mem_policy": "host memory placement",
    "gtod_cpu": "host CPU placement",
    "nice": "host CPU priority",
    "prio": "I/O priorities are not simulated: the twin's queues serve commands in order",
    "prioclass": "I/O priorities are not simulated: the twin's queues serve commands in order",
    "mem": "host buffer memory",
    "iomem_align": "host buffer memory",
    "hugepage-size": "host buffer memory",
    "lockmem": "host memory",
    "clocksource": "the twin runs in virtual time",
    "disk_util": "no kernel disk statistics for a simulated drive",
    "iodepth_batch": "host submission batching; the twin's queue depth is iodepth",
    "iodepth_batch_complete_min": "host completion batching; the twin's queue depth is iodepth",
    "iodepth_batch_complete_max": "host completion batching; the twin's queue depth is iodepth",
    "iodepth_low": "host refill threshold; the twin keeps iodepth I/Os in flight",
    "uid": "host process identity",
    "gid": "host process identity",
    "cgroup": "host cgroups",
    "cgroup_weight": "host cgroups",
    "cgroup_nodelete": "host cgroups",
    "error_dump": "the simulated drive reports no I/O errors",
    "ioscheduler": "the simulated drive has no kernel I/O scheduler",
    "hipri": "host completion polling",
    "hipri_percentage": "host completion polling",
    "fixedbufs": "host buffer registration",
    "registerfiles": "host file registration",
    "sqthread_poll": "host submission thread",
    "sqthread_poll_cpu": "host submission thread",
    "nonvectored": "host submission path",
    "force_async": "host submission path",
    "uncached": "page cache hint; the simulated drive has no page cache",
    "nowait": "host submission path",
    "cmd_type": "io_uring_cmd passthrough: the same NVMe commands reach the twin",
    "userspace_reap": "host completion path",
    "uri": "the target is the simulated drive",
}

for _name, _check, _reason, _aliases, _flag in _IGNORED_SPECS:
    OPTIONS[_name] = OptionDef(name=_name, handler=_h_checked(_check), kind=NOOP, aliases=_aliases, needs_value=not _flag)
    IGNORED_REASONS[_name] = _reason
# Options accepted only at the value that turns them off, and why other values are refused.
OFF_ONLY_REASONS: dict[str, str] = {spec[0]: spec[3] for spec in _OFF_ONLY_SPECS}
for _name, _check, _off, _why, _aliases, _flag in _OFF_ONLY_SPECS:
    _handler = _h_checked(_check, off=_off, refuse=f"not supported by ssdtwin: {_why}")
    OPTIONS[_name] = OptionDef(name=_name, handler=_handler, kind=NOOP, aliases=_aliases, needs_value=not _flag)
    IGNORED_REASONS[_name] = f"this value has no effect (other values are refused: {_why})"
for _name, _check, _reason, _engines in _IGNORED_ENGINE_SPECS:
    ENGINE_OPTIONS[_name] = OptionDef(name=_name, handler=_h_checked(_check), kind=NOOP, engines=_engines)
    IGNORED_REASONS[_name] = _reason
# issue 16: protection information, the io_uring_cmd engine's options (fio engines/io_uring.c;
# docs/fio.md, Protection information). pi_act (default 1) is PRACT: the controller inserts
# and strips 8-byte PI, so the host moves none; pi_chk holds GUARD, REFTAG and APPTAG (fio
# looks for each word in the string) and sets PRCHK.
_PI_ENGINES = ("io_uring_cmd",)


def _h_pi_chk(st: dict[str, Any], value: Optional[str]) -> None:
    text = _req(value)
    st["pi_chk"] = (4 if "GUARD" in text else 0) | (2 if "APPTAG" in text else 0) | (1 if "REFTAG" in text else 0)


ENGINE_OPTIONS["pi_act"] = OptionDef(name="pi_act", handler=_h_bool("pi_act"), engines=_PI_ENGINES)
ENGINE_OPTIONS["pi_chk"] = OptionDef(name="pi_chk", handler=_h_pi_chk, engines=_PI_ENGINES)
for _name, _hi in (("apptag", 0xFFFF), ("apptag_mask", 0xFFFF), ("md_per_io_size", FIO_UINT_MAX)):
    ENGINE_OPTIONS[_name] = OptionDef(name=_name, handler=_h_uint(_name, hi=_hi), kind=NOOP, engines=_PI_ENGINES)
IGNORED_REASONS["apptag"] = "the twin checks tags by injected corruption (nvme inject-pi-error), not by tag values"
IGNORED_REASONS["apptag_mask"] = IGNORED_REASONS["apptag"]
IGNORED_REASONS["md_per_io_size"] = "the twin moves the metadata the namespace's format asks for"
# filesize is simulated: the size fio gives the target file (filesetup.c setup_files).
OPTIONS["filesize"] = OptionDef(name="filesize", handler=_h_checked(_c_filesize, store="filesize"))
# Tighter checks than the table above had, as fio checks them (options.c).
OPTIONS["nice"] = OptionDef(name="nice", handler=_h_checked(_c_sint(-20, 19)), kind=NOOP)
OPTIONS["prio"] = OptionDef(name="prio", handler=_h_checked(_c_int(0, 7)), kind=NOOP)
OPTIONS["prioclass"] = OptionDef(name="prioclass", handler=_h_checked(_c_int(0, 3)), kind=NOOP)
OPTIONS["fadvise_hint"] = OptionDef(name="fadvise_hint", handler=_h_checked(_c_choice("0", "1", "random", "sequential")), kind=NOOP)
OPTIONS["cpus_allowed_policy"] = OptionDef(name="cpus_allowed_policy", handler=_h_checked(_c_choice("shared", "split")), kind=NOOP)
OPTIONS["lockfile"] = OptionDef(name="lockfile", handler=_h_checked(_c_choice("none", "exclusive", "readwrite")), kind=NOOP)
OPTIONS["clocksource"] = OptionDef(name="clocksource", handler=_h_checked(_c_choice("gettimeofday", "clock_gettime", "cpu")), kind=NOOP)
_c_mem_type = _c_choice("malloc", "shm", "shmhuge", "mmap", "mmapshared", "mmaphuge", "cudamalloc")
# mmap types may name their file: mem=mmaphuge:/hugetlbfs/file (options.c str_mem_cb).
OPTIONS["mem"] = OptionDef(
    name="mem", handler=_h_checked(lambda st, t: _c_mem_type(st, t.partition(":")[0])), kind=NOOP, aliases=("iomem",)
)
OPTIONS["cgroup_weight"] = OptionDef(name="cgroup_weight", handler=_h_checked(_c_int(100, 1000)), kind=NOOP)
OPTIONS["buffer_compress_percentage"] = OptionDef(name="buffer_compress_percentage", handler=_h_checked(_c_int(0, 100)), kind=NOOP)
OPTIONS["dedupe_percentage"] = OptionDef(name="dedupe_percentage", handler=_h_checked(_c_int(0, 100)), kind=NOOP)

# Options fio knows that ssdtwin refuses, and why (the rest say "not supported by ssdtwin").
_WHY_REFUSED: dict[str, str] = {
    "opendir": "a file-system workload over a directory tree; jobs target a namespace",
    "profile": "fio's built-in profiles (tiobench, act) generate file-system jobs; write the jobs out instead",
    "exec_prerun": "ssdtwin does not run host commands from job files",
    "exec_postrun": "ssdtwin does not run host commands from job files",
    "sync_file_range": _WHY_FLUSH,
    "percentage_sequential": "deprecated: fio 3.33 refuses it too (use percentage_random)",
    "rwmixcycle": "deprecated: fio 3.33 refuses it too",
    "zonecapacity": "zoned block devices (zonemode=zbd): the twin's namespaces are conventional",
    "read_beyond_wp": "zoned block devices (zonemode=zbd): the twin's namespaces are conventional",
    "max_open_zones": "zoned block devices (zonemode=zbd): the twin's namespaces are conventional",
    "job_max_open_zones": "zoned block devices (zonemode=zbd): the twin's namespaces are conventional",
    "ignore_zone_limits": "zoned block devices (zonemode=zbd): the twin's namespaces are conventional",
    "zone_reset_threshold": "zoned block devices (zonemode=zbd): the twin's namespaces are conventional",
    "zone_reset_frequency": "zoned block devices (zonemode=zbd): the twin's namespaces are conventional",
}


def ignored_reason(name: str) -> str:
    """Why an accepted option has no effect on a simulated drive (canonical name)."""
    return IGNORED_REASONS.get(name, "no effect on a simulated drive")


_BY_NAME: dict[str, OptionDef] = {}
for _o in OPTIONS.values():
    _BY_NAME[_o.name] = _o
    for _a in _o.aliases:
        _BY_NAME[_a] = _o

# Every option name and alias fio 3.33 knows (options.c), to tell "unsupported" from
# "unknown" (a typo).
FIO_OPTION_NAMES = frozenset(
    [
        "allow_file_create",
        "allow_mounted_write",
        "allrandrepeat",
        "atomic",
        "ba",
        "block_error_percentiles",
        "blockalign",
        "blocksize",
        "blocksize_range",
        "blocksize_unaligned",
        "bs",
        "bs_is_seq_rand",
        "bs_unaligned",
        "bsrange",
        "bssplit",
        "buffer_compress_chunk",
        "buffer_compress_percentage",
        "buffer_pattern",
        "buffered",
        "bwavgtime",
        "cgroup",
        "cgroup_nodelete",
        "cgroup_weight",
        "clat_percentiles",
        "clocksource",
        "continue_on_error",
        "cpumask",
        "cpus_allowed",
        "cpus_allowed_policy",
        "create_fsync",
        "create_on_open",
        "create_only",
        "create_serialize",
        "dedupe_global",
        "dedupe_mode",
        "dedupe_percentage",
        "dedupe_working_set_percentage",
        "description",
        "direct",
        "directory",
        "disable_bw",
        "disable_bw_measurement",
        "disable_clat",
        "disable_lat",
        "disable_slat",
        "disk_util",
        "do_verify",
        "end_fsync",
        "error_dump",
        "exec_postrun",
        "exec_prerun",
        "exit_what",
        "exitall",
        "exitall_on_error",
        "experimental_verify",
        "fadvise_hint",
        "fallocate",
        "fdatasync",
        "file_append",
        "file_service_type",
        "filename",
        "filename_format",
        "fileoffset",
        "filesize",
        "fill_device",
        "fill_fs",
        "flow",
        "flow_id",
        "flow_sleep",
        "flow_watermark",
        "fsync",
        "fsync_on_close",
        "gid",
        "gpu_dev_id",
        "group_reporting",
        "gtod_cpu",
        "gtod_reduce",
        "hugepage-size",
        "ignore_error",
        "ignore_zone_limits",
        "invalidate",
        "io_limit",
        "io_size",
        "io_submit_mode",
        "iodepth",
        "iodepth_batch",
        "iodepth_batch_complete",
        "iodepth_batch_complete_max",
        "iodepth_batch_complete_min",
        "iodepth_batch_submit",
        "iodepth_low",
        "ioengine",
        "iomem",
        "iomem_align",
        "iopsavgtime",
        "ioscheduler",
        "job_max_open_zones",
        "kb_base",
        "lat_percentiles",
        "latency_percentile",
        "latency_run",
        "latency_target",
        "latency_window",
        "lockfile",
        "lockmem",
        "log_alternate_epoch",
        "log_alternate_epoch_clock_id",
        "log_avg_msec",
        "log_compression",
        "log_compression_cpus",
        "log_entries",
        "log_hist_coarseness",
        "log_hist_msec",
        "log_max_value",
        "log_offset",
        "log_prio",
        "log_store_compressed",
        "log_unix_epoch",
        "loops",
        "max_latency",
        "max_open_zones",
        "mem",
        "mem_align",
        "merge_blktrace_file",
        "merge_blktrace_iters",
        "merge_blktrace_scalars",
        "name",
        "new_group",
        "nice",
        "norandommap",
        "nr_files",
        "nrfiles",
        "numa_cpu_nodes",
        "numa_mem_policy",
        "number_ios",
        "numjobs",
        "offset",
        "offset_align",
        "offset_increment",
        "opendir",
        "openfiles",
        "overwrite",
        "per_job_logs",
        "percentage_random",
        "percentage_sequential",
        "percentile_list",
        "pre_read",
        "prio",
        "prioclass",
        "profile",
        "ramp_time",
        "random_distribution",
        "random_generator",
        "randrepeat",
        "randseed",
        "rate",
        "rate_cycle",
        "rate_ignore_thinktime",
        "rate_iops",
        "rate_iops_min",
        "rate_min",
        "rate_process",
        "ratecycle",
        "ratemin",
        "read_beyond_wp",
        "read_iolog",
        "read_iolog_chunked",
        "readwrite",
        "refill_buffers",
        "replay_align",
        "replay_no_stall",
        "replay_redirect",
        "replay_scale",
        "replay_skip",
        "replay_time_scale",
        "runtime",
        "rw",
        "rw_sequencer",
        "rwmixcycle",
        "rwmixread",
        "rwmixwrite",
        "scramble_buffers",
        "serialize_overlap",
        "significant_figures",
        "size",
        "slat_percentiles",
        "softrandommap",
        "ss",
        "ss_dur",
        "ss_ramp",
        "startdelay",
        "stats",
        "steadystate",
        "steadystate_duration",
        "steadystate_ramp_time",
        "stonewall",
        "sync",
        "sync_file_range",
        "thinktime",
        "thinktime_blocks",
        "thinktime_blocks_type",
        "thinktime_iotime",
        "thinktime_spin",
        "thread",
        "time_based",
        "timeout",
        "trim_backlog",
        "trim_backlog_batch",
        "trim_percentage",
        "trim_verify_zero",
        "uid",
        "unified_rw_reporting",
        "unique_filename",
        "unit_base",
        "unlink",
        "unlink_each_loop",
        "verify",
        "verify_async",
        "verify_async_cpus",
        "verify_backlog",
        "verify_backlog_batch",
        "verify_dump",
        "verify_fatal",
        "verify_interval",
        "verify_offset",
        "verify_only",
        "verify_pattern",
        "verify_state_load",
        "verify_state_save",
        "verifysort",
        "verifysort_nr",
        "wait_for",
        "wait_for_previous",
        "write_barrier",
        "write_bw_log",
        "write_hint",
        "write_hist_log",
        "write_iolog",
        "write_iops_log",
        "write_lat_log",
        "zero_buffers",
        "zone_reset_frequency",
        "zone_reset_threshold",
        "zonecapacity",
        "zonemode",
        "zonerange",
        "zonesize",
        "zoneskip",
    ]
)

# Engine options fio knows for some engine (io_uring, libaio, sync, nbd ...).
FIO_ENGINE_OPTION_NAMES = frozenset(
    [
        "hipri",
        "hipri_percentage",
        "cmdprio_percentage",
        "cmdprio_class",
        "cmdprio",
        "cmdprio_bssplit",
        "fixedbufs",
        "registerfiles",
        "sqthread_poll",
        "sqthread_poll_cpu",
        "nonvectored",
        "uncached",
        "nowait",
        "force_async",
        "cmd_type",
        "userspace_reap",
        "uri",
    ]
)

_WHY_UNSUPPORTED = {
    "verify": "data verification is not simulated",
    "fsync": "flushes are not part of the fio engine contract yet",
    "fdatasync": "flushes are not part of the fio engine contract yet",
    "nrfiles": "one target per job",
    "nr_files": "one target per job",
    "directory": "jobs target a namespace of the simulated drive, not a directory",
}


def unsupported_reason(name: str) -> str:
    return _WHY_REFUSED.get(name) or _WHY_UNSUPPORTED.get(name, "not supported by ssdtwin")


def lookup(name: str) -> Optional[OptionDef]:
    return _BY_NAME.get(name)


def lookup_engine_option(name: str) -> Optional[OptionDef]:
    return ENGINE_OPTIONS.get(name)


def closest_option(name: str) -> Optional[str]:
    """fio's "Did you mean" (Levenshtein distance within half the length)."""
    best = None
    best_d = None
    for candidate in sorted(FIO_OPTION_NAMES):
        d = _distance(name, candidate)
        if best_d is None or d < best_d:
            best, best_d = candidate, d
    if best is not None and best_d is not None and best_d <= (len(name) + 1) // 2:
        return best
    return None


def _distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]
