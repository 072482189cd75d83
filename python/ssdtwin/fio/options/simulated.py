"""The values of the options ssdtwin simulates whose grammar is more than a number, a size,
a time or a choice: block-size ranges and splits, random distributions, steady-state
criteria, percentile lists, and the options that set several job-state fields at once.

Checks here return the value the job state keeps (table.py names the field); handlers
(``Handler``) write their fields themselves and say which in their docstring.
"""

from __future__ import annotations

import re
from typing import Any, Optional, Union

from ..limits import FIO_NUMBER_MAX, FIO_UINT_MAX, MAX_BS, MAX_RUN_US
from ..units import Percent, parse_size
from .values import (
    WHY_BS,
    WHY_NUMBER,
    WHY_RUN,
    WHY_UINT,
    Handler,
    State,
    check_max,
    number,
    per_direction_segments,
    require,
    size_of,
    size_or_percent,
    split_ddir,
    split_top,
    time_us,
    uint_in,
    warn,
)

# Engines whose I/O is synchronous: fio caps their queue depth at 1 (backend.c, "queue
# depth will be capped at 1") and records no submission latency.
SYNC_ENGINES = ("sync", "psync", "vsync", "pvsync", "pvsync2")
# Engines that honour iodepth. "null" is asynchronous only when iodepth > 1, as in fio
# (engines/null.c sets FIO_SYNCIO for iodepth=1).
ASYNC_ENGINES = ("libaio", "io_uring", "io_uring_cmd", "posixaio", "nbd", "null")

RW_MODES = ("read", "write", "trim", "randread", "randwrite", "randtrim", "rw", "readwrite", "randrw", "trimwrite", "randtrimwrite")
RANDOM_MODES = ("randread", "randwrite", "randtrim", "randrw", "randtrimwrite")


# --- the target -------------------------------------------------------------------------

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


def set_filename(st: State, value: Optional[str]) -> None:
    """Sets ``filename`` and ``namespace`` (None: the default target)."""
    text = require(value).strip()
    if text == "":
        raise ValueError("empty value")
    if ":" in text.replace("\\:", ""):
        raise ValueError("several files (':'-separated) are not supported; one target per job")
    st["filename"] = text
    st["namespace"] = namespace_of(text)


def ioengine(st: State, text: str) -> Any:
    if text not in SYNC_ENGINES + ASYNC_ENGINES:
        raise ValueError(f"I/O engine '{text}' is not supported (supported: {', '.join(SYNC_ENGINES + ASYNC_ENGINES)})")
    return text


# --- direction, mix and block sizes -----------------------------------------------------


def set_rw(st: State, value: Optional[str]) -> None:
    """Sets ``rw`` (readwrite reads as rw), ``rw_nr`` and ``rw_seq_add`` from ``mode[:N]``."""
    text = require(value)
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
            # options.c str_rw_cb: for random I/O the suffix counts I/Os per new offset, read
            # with atoi: fio 3.33 takes randread:4k as 4, randread:x and :0 as 0 (then every
            # I/O is sequential), measured with write_iolog.
            if not re.fullmatch(r"\+?[0-9]+", postfix):
                m = re.match(r"[-+]?[0-9]*", postfix)  # matches every string (possibly empty)
                digits = m.group(0) if m else ""
                read = int(digits) if digits.strip("+-") else 0
                raise ValueError(f"the I/O count after ':' must be a plain number (fio 3.33 reads '{postfix}' with atoi, as {read})")
            nr = uint_in(st, postfix, lo=1, hi=FIO_UINT_MAX, why=WHY_UINT)
            st["rw_nr"] = nr
        else:
            # For sequential I/O it is a byte gap added after each I/O; fio reads it as a
            # signed number, so "read:-8k" walks backwards (io_u.c get_next_seq_offset).
            negative = postfix.startswith("-")
            gap = uint_in(st, postfix[1:] if negative else postfix, hi=FIO_NUMBER_MAX, why=WHY_NUMBER)
            st["rw_seq_add"] = -gap if negative else gap


def set_rwmixread(st: State, value: Optional[str]) -> None:
    """Sets ``rwmix`` to [read %, write %]."""
    v = uint_in(st, require(value), hi=100)
    st["rwmix"] = [v, 100 - v]


def set_rwmixwrite(st: State, value: Optional[str]) -> None:
    """Sets ``rwmix`` to [read %, write %]."""
    v = uint_in(st, require(value), hi=100)
    st["rwmix"] = [100 - v, v]


def block_size_range(st: State, text: str) -> Any:
    """One direction of bsrange: ``min-max`` or ``min:max``."""
    cut = split_top(text, "-")
    if cut is None:
        cut = split_top(text, ":")
    if cut is None:
        raise ValueError("not a range (use min-max or min:max)")
    lo = uint_in(st, text[:cut], lo=1, hi=MAX_BS, why=WHY_BS)
    hi = uint_in(st, text[cut + 1 :], lo=1, hi=MAX_BS, why=WHY_BS)
    # fio swaps a reversed range (parse.c FIO_OPT_RANGE).
    return (min(lo, hi), max(lo, hi))


def _parse_split(st: State, text: str) -> Optional[list[list[int]]]:
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
        bs = uint_in(st, bs_text, lo=1, hi=MAX_BS, why=WHY_BS)
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


def set_bssplit(st: State, value: Optional[str]) -> None:
    """Sets the directions of ``bssplit`` the value names ([[bs, pct], ...] each)."""
    parts = split_ddir(require(value))
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


# --- timing and seeds -------------------------------------------------------------------


def startdelay(st: State, text: str) -> Any:
    """(low, high) microseconds: a range ("1-5", "1:5") draws a delay per clone (fixup_options)."""
    segments = per_direction_segments(text)
    values = [time_us(t, "s", MAX_RUN_US, WHY_RUN) for t, _, _ in segments if t != ""]
    if not values or len(values) > 2:
        raise ValueError("expected a time or a time range low-high")
    lo = values[0]
    hi = values[1] if len(values) == 2 else lo
    if len(values) == 2 and segments[0][0] != "":
        low_text, high_text = segments[0][0], segments[1][0]
        low = re.fullmatch(r"([0-9]+)([A-Za-z]*)", low_text)
        high = re.fullmatch(r"[0-9]+([A-Za-z]*)", high_text)
        # fio's get_mult_time reads the low end's unit from the whole value: it skips digits
        # and '+'/'-', then needs "s", "m", "h" or "d" to end the string ("us"/"ms" need only
        # start it). Measured with fio 3.33 --debug=parse: 2-3ms = 2 ms..3 ms, 2s-3s = 2 us..3 s.
        if low and low.group(2) == "" and high and text[len(low_text)] == "-":
            lo = time_us(low_text + high.group(1), "s", MAX_RUN_US, WHY_RUN)
        elif low and low.group(2).lower() in ("s", "m", "h", "d"):
            raise ValueError(
                f"the low end '{low_text}' of a range: fio 3.33 would read it as {low.group(1)} microseconds "
                f"(write the unit once, after the high end: {low.group(1)}-{high_text})"
            )
    return (lo, hi)


def loops(st: State, text: str) -> Any:
    """fio 3.33's loops has no minimum, and loops=0 runs one pass like loops=1 (measured with
    ioengine=null: the same bytes and I/Os, with io_size and number_ios too)."""
    return max(1, uint_in(st, text, hi=FIO_UINT_MAX, why=WHY_UINT))


def _negative_magnitude(st: State, text: str, *, allow_percent: bool = False) -> Optional[Union[int, Percent]]:
    """The bytes or count after the '-' of a negative value, None for any other value.

    fio 3.33 splits an option's value at a '-' (a range, bs=4k-8k) before reading it: the
    first piece is the whole text (-16k), the last the magnitude (16k). An option with a
    callback keeps the last (zoneskip=-16k skips 16k); a plain integer keeps the first,
    wrapped to 32 bits (thinktime_blocks=-5 is 4294967291). Measured with write_iolog and
    --debug=parse."""
    if not text.startswith("-"):
        return None
    try:
        return parse_size(text[1:], kb_base=st["kb_base"], allow_percent=allow_percent)
    except ValueError:
        return None


def thinktime_blocks(st: State, text: str) -> Any:
    """fio 3.33 accepts thinktime_blocks=0 and thinks after every block, as with 1 (measured:
    number_ios=6 thinktime=50ms runs 304 ms with 0 and with 1, 154 ms with 2)."""
    magnitude = _negative_magnitude(st, text)
    if isinstance(magnitude, int):
        wrapped = -magnitude % (FIO_UINT_MAX + 1)
        raise ValueError(
            f"negative: allowed 0 to {FIO_UINT_MAX} blocks (fio 3.33 wraps it to {wrapped} blocks: "
            "no think time in a job of fewer I/Os; leave thinktime out for that)"
        )
    return max(1, uint_in(st, text, hi=FIO_UINT_MAX, why=WHY_UINT))


def randseed(st: State, text: str) -> Any:
    # fio 3.33 reads it with strtoll like every number: 2^63 and above fail to parse there
    return check_max(uint_in(st, text), FIO_NUMBER_MAX, WHY_NUMBER)


# --- random distributions and zones -----------------------------------------------------


def random_distribution(st: State, text: str) -> Any:
    """``{"kind", "param", "center", "zones"}`` from random, zipf/pareto/normal[:v[:center]],
    zoned:... or zoned_abs:... (options.c str_random_distribution_cb)."""
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
            param = number(fields[0])
            if len(fields) == 2:
                center = number(fields[1])
                if not 0.0 <= center <= 1.0:
                    raise ValueError("distribution center out of range (0 <= center <= 1.0)")
        # Range checks from options.c str_random_distribution_cb.
        if kind == "zipf" and param == 1.0:
            raise ValueError("zipf theta must be different than 1.0")
        # fio takes any theta; the engine's Zipf needs a finite one above 0 (checked here to
        # name the line, not in the engine).
        if kind == "zipf" and not 0.0 < param < float("inf"):
            raise ValueError("zipf theta out of range (0 < theta, finite, not 1.0)")
        if kind == "pareto" and not 0.0 < param < 1.0:
            raise ValueError("pareto input out of range (0 < input < 1.0)")
        if kind == "normal" and not 0.0 <= param < 100.0:
            raise ValueError("normal deviation out of range (0 <= input < 100.0)")
        dist["param"] = param
        dist["center"] = center
    return dist


def _parse_zones(st: State, text: str, *, absolute: bool) -> list[Optional[list[dict[str, int]]]]:
    out: list[Optional[list[dict[str, int]]]] = [None, None, None]
    for ddir, part in enumerate(split_ddir(text)):
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
            access = uint_in(st, access_text, hi=100)
            access_total += access
            if absolute:
                if not slash or range_text == "":
                    raise ValueError("zoned_abs needs access%/size for every zone")
                size = uint_in(st, range_text, lo=1, hi=FIO_NUMBER_MAX, why=WHY_NUMBER)
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


def zonemode(st: State, text: str) -> Any:
    if text == "zbd":
        raise ValueError("zoned block devices (zonemode=zbd) are not simulated; use none or strided")
    if text not in ("none", "strided"):
        raise ValueError("not one of none, strided, zbd")
    return text


def zone_skip(st: State, text: str) -> Any:
    """zoneskip: fio 3.33 reads zoneskip=-16k as 16k, a skip forward, not the overlap it
    looks like (measured: the same offsets as zoneskip=16k)."""
    magnitude = _negative_magnitude(st, text)
    if magnitude is not None:
        raise ValueError(f"negative: allowed 0 to {FIO_NUMBER_MAX} bytes (fio 3.33 reads it as {text[1:]}, a skip forward, not an overlap)")
    return zone_bytes(st, text)


def zone_bytes(st: State, text: str) -> Any:
    """zonesize, zonerange, zoneskip in bytes (zonemode=strided)."""
    if text.rstrip().lower().endswith("z"):
        raise ValueError("zone-count values ('z' suffix) are only meaningful with zonemode=zbd")
    return uint_in(st, text, hi=FIO_NUMBER_MAX, why=WHY_NUMBER)


def offset_increment(st: State, text: str) -> Any:
    """offset_increment: bytes or a percentage of the target (size_or_percent). fio 3.33 reads
    offset_increment=-4k as 4k (measured: clones at 0, 4k, 8k) and aborts on -2 to -101
    (read as a percentage, then as bytes: an assertion in get_start_offset)."""
    magnitude = _negative_magnitude(st, text, allow_percent=True)
    if magnitude is not None:
        aborts = isinstance(magnitude, int) and 2 <= magnitude <= 101 and text[1:].isdigit()
        fio_reads = "aborts on it" if aborts else f"reads it as {text[1:]}"
        raise ValueError(f"negative: allowed 0 to {FIO_NUMBER_MAX} bytes or 0% to 100% (fio 3.33 {fio_reads})")
    return size_or_percent(st, text)


# --- reporting and logs -----------------------------------------------------------------


# fio's FIO_IO_U_LIST_MAX_LEN: the entries a FIO_OPT_FLOAT_LIST holds.
FLOAT_LIST_MAX = 20


def _float_list_kept(st: State, items: list[str]) -> list[str]:
    """The entries fio keeps of a ':' list: the first 20. fio 3.33 (parse.c, FIO_OPT_FLOAT_LIST)
    logs "the list exceeding max length 20" once per further entry, reads none of them and
    runs the job with the first 20 (measured: 21 entries, the 21st "abc" or "150", exit 0)."""
    if len(items) <= FLOAT_LIST_MAX:
        return items
    warn(
        st,
        f"the list exceeds max length {FLOAT_LIST_MAX}: its first {FLOAT_LIST_MAX} of {len(items)} "
        f"values kept, the rest not read (as fio 3.33 does)",
    )
    return items[:FLOAT_LIST_MAX]


def set_percentile_list(st: State, value: Optional[str]) -> None:
    """Sets ``percentile_list`` and ``percentile_precision`` (the most decimals written)."""
    text = require(value)
    items = text.split(":")
    kept = _float_list_kept(st, items)
    values = []
    precision = 0
    for i, item in enumerate(kept):
        if "," in item:
            raise ValueError(f"'{item}' is not a number: percentiles are separated by ':' (allowed 0 to 100 each, at most 20)")
        v = number(item, "0 to 100 each, separated by ':'")
        if v > 100.0:
            raise ValueError(f"value out of range: {v:f} (range max: 100.000000)")
        values.append(v)
        # fio counts the decimals after the first '.' of the rest of the list, from this
        # entry on: an entry past the 20th is not read, but its decimals can still count
        # (measured: a 21st entry 21.12345 prints the percentiles with 5 decimals).
        rest = ":".join(items[i:])
        if "." in rest:
            precision = max(precision, len(re.match(r"[0-9]*", rest.split(".", 1)[1]).group(0)))  # type: ignore[union-attr]
    st["percentile_list"] = values
    st["percentile_precision"] = precision


def set_log(kind: str) -> Handler:
    """Sets ``logs[kind]``: the log's file name ("" = named after the job)."""

    def handler(st: State, value: Optional[str]) -> None:
        # Without a value fio names the log after the job (init.c make_log_name).
        logs = dict(st["logs"])
        logs[kind] = value if value else ""
        st["logs"] = logs

    return handler


# --- replay (read_iolog) ----------------------------------------------------------------


def float_list(st: State, text: str) -> Any:
    """fio's FIO_OPT_FLOAT_LIST: numbers separated by ':', the first 20 kept (parse.c)."""
    return [number(item) for item in _float_list_kept(st, text.split(":"))]


def replay_align(st: State, text: str) -> Any:
    align = uint_in(st, text, hi=FIO_UINT_MAX, why=WHY_UINT)
    if align == 0 or align & (align - 1):
        raise ValueError("must be a power-of-2")
    return align


def add_replay_skip(st: State, value: Optional[str]) -> None:
    """Adds to ``replay_skip`` (sorted): options.c str_replay_skip_cb accumulates a
    comma-separated list over the option's uses."""
    skip = set(st.get("replay_skip") or ())
    for word in require(value).strip().split(","):
        if word not in ("read", "write", "trim", "sync"):
            raise ValueError(f"Unknown skip type: {word} (valid: read, write, trim, sync)")
        skip.add(word)
    st["replay_skip"] = sorted(skip)


# --- latency_target and steady state ----------------------------------------------------


def latency_percentile(st: State, text: str) -> Any:
    """A float in [0, 100] (options.c minfp/maxfp)."""
    v = number(text, "0 to 100, a percentage")
    if not 0.0 <= v <= 100.0:
        raise ValueError(f"value out of range: {v:g} (allowed 0 to 100, a percentage)")
    return v


_SS_CRITERIA = ("iops", "iops_slope", "bw", "bw_slope")
_SS_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def _ss_float(text: str, what: str) -> float:
    if not _SS_NUMBER.fullmatch(text):
        raise ValueError(f"could not parse steadystate {what} '{text}' (expected a number)")
    return float(text)


def steadystate(st: State, text: str) -> Any:
    """``criterion:limit``: criterion one of iops, iops_slope, bw, bw_slope; the limit a
    number, a percentage of the window's mean (``10%``), or for bw a size per second
    (``2MiB``, read with kb_base like every fio size). Returns {criterion, percent, limit}."""
    criterion, sep, limit = text.partition(":")
    if criterion not in _SS_CRITERIA:
        raise ValueError(f"criterion '{criterion}' is not one of {', '.join(_SS_CRITERIA)} (form criterion:limit, e.g. iops_slope:0.1%)")
    limit = limit.strip()
    if not sep or not limit:
        raise ValueError("steadystate threshold must be specified in addition to criterion (form criterion:limit, e.g. iops:10%)")
    percent = limit.endswith("%")
    if percent:
        value = _ss_float(limit[:-1].strip(), "threshold percentage")
    elif criterion.startswith("iops"):
        value = _ss_float(limit, "IOPS threshold")
    else:
        negative = limit.startswith("-")
        try:
            value = float(size_of(st, limit.lstrip("-")))
        except ValueError:
            raise ValueError(f"could not parse steadystate BW threshold '{limit}' (expected bytes/s, e.g. 2MiB)") from None
        value = -value if negative else value
    return {"criterion": criterion, "percent": percent, "limit": value}


# --- protection information (io_uring_cmd) ----------------------------------------------


def pi_chk(st: State, text: str) -> Any:
    """PRCHK bits: fio looks for GUARD, APPTAG and REFTAG in the string."""
    return (4 if "GUARD" in text else 0) | (2 if "APPTAG" in text else 0) | (1 if "REFTAG" in text else 0)
