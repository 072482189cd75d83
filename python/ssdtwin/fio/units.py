"""fio's number syntax: sizes, times, percentages, expressions, and ``num2str``.

The rules follow fio 3.33 (``parse.c``), measured on the real binary (docs/fio.md §2).
Where fio silently reads garbage (``4q`` = 4 bytes, ``10sec`` = 10 µs, ``1.5k`` = 1 byte,
`` 4k`` = 4 bytes) we raise ``ValueError`` instead: a digital twin that quietly runs a
different workload than the user meant is worse than one that refuses.
"""

from __future__ import annotations

import math
import re
from typing import Callable, NamedTuple, Union

from .limits import MAX_EXPR_BITS, MAX_EXPR_DEPTH, MAX_EXPR_TOKENS, MAX_NUMBER_CHARS

__all__ = [
    "Percent",
    "parse_size",
    "parse_uint",
    "parse_time_us",
    "parse_bool",
    "parse_flag",
    "evaluate_expression",
    "num2str",
    "N2S_NONE",
    "N2S_PERSEC",
    "N2S_BYTE",
    "N2S_BIT",
    "N2S_BYTEPERSEC",
    "N2S_BITPERSEC",
]


class Percent(NamedTuple):
    """A value written with a ``%`` suffix (``size=50%``)."""

    value: int


# Size suffixes, lower-cased, to (power, inverted). fio compares only prefixes and
# ignores anything after them ("4kq" = 4096); we accept exactly these spellings.
# "kib"-style suffixes use the *opposite* base of kb_base (parse.c __get_mult_bytes):
# with the default kb_base=1024, 4KiB = 4000 and 4k = 4ki = 4kb = 4096.
_SIZE_SUFFIXES = {"": (0, False), "b": (0, False)}
for _pow, _letter in enumerate("kmgtp", start=1):
    for _spelling in (_letter, _letter + "b", _letter + "i"):
        _SIZE_SUFFIXES[_spelling] = (_pow, False)
    _SIZE_SUFFIXES[_letter + "ib"] = (_pow, True)

# Time suffixes to microseconds. "m" is minutes in time options. fio takes any unknown
# suffix as microseconds ("10sec" = 10 us); we refuse those.
_TIME_SUFFIXES = {
    "us": 1,
    "usec": 1,
    "ms": 1_000,
    "msec": 1_000,
    "s": 1_000_000,
    "m": 60_000_000,
    "h": 3_600_000_000,
    "d": 86_400_000_000,
}

# fio reads numbers with strtoll, which takes a leading "+" (iodepth=+3 is 3, size=+4k is 4096)
_NUMBER_RE = re.compile(r"^\+?(0[xX][0-9a-fA-F]+|[0-9]+)([A-Za-z%]*)$")


def _size_multiplier(suffix: str, kb_base: int) -> int:
    key = suffix.lower()
    if key not in _SIZE_SUFFIXES:
        raise ValueError(f"unknown size suffix '{suffix}'")
    power, inverted = _SIZE_SUFFIXES[key]
    base = kb_base
    if inverted:
        base = 1000 if kb_base == 1024 else 1024
    return int(base**power)


def _check_plain(text: str, what: str) -> None:
    if text == "":
        raise ValueError(f"empty value is not {what}")
    if len(text) > MAX_NUMBER_CHARS and not text.startswith("("):
        # fio's largest number has 19 digits; reading a huge one would only cost time.
        raise ValueError(f"not {what}: longer than {MAX_NUMBER_CHARS} characters")
    if text != text.strip() or any(c.isspace() for c in text):
        # fio stops at the first space: "bs = 4k" gives a 4-byte block size.
        raise ValueError(f"not {what}: whitespace inside the value (fio 3.33 would stop reading at the space)")


def parse_size(text: str, *, kb_base: int = 1024, allow_percent: bool = False) -> Union[int, Percent]:
    """Parse a size like fio: ``4k``, ``1MiB``, ``0x1000``, ``(1+2)*4k``, ``50%``.

    Returns bytes, or a :class:`Percent` when ``allow_percent`` and the value ends in ``%``.
    """
    _check_plain(text, "a size")
    if text.startswith("("):
        value = evaluate_expression(text, kb_base=kb_base, is_time=False)
        if value < 0:
            raise ValueError("not a size: negative (allowed 0 or more)")
        return value
    m = _NUMBER_RE.match(text)
    if not m:
        if text.startswith("-") and _NUMBER_RE.match(text[1:]):
            raise ValueError("not a size: negative (allowed 0 or more)")
        raise ValueError("not a size")
    digits, suffix = m.groups()
    is_hex = digits[:2].lower() == "0x"
    number = int(digits, 16 if is_hex else 10)
    if suffix == "%":
        if text.startswith("+"):
            # parse.c takes a value as a percentage only when it starts with a digit
            raise ValueError(f"not a size: fio 3.33 would read {text} as {number} bytes, not a percentage")
        if not allow_percent:
            raise ValueError("not a size: a percentage is not allowed here")
        return Percent(number)
    if is_hex and suffix:
        raise ValueError("not a size: no unit suffix allowed after a hex number")
    try:
        return number * _size_multiplier(suffix, kb_base)
    except ValueError as e:
        raise ValueError(f"not a size: {e}") from None


def parse_uint(text: str, *, kb_base: int = 1024) -> int:
    """An integer option (fio parses these with the size parser, so ``iodepth=1k`` is 1024)."""
    value = parse_size(text, kb_base=kb_base, allow_percent=False)
    assert isinstance(value, int)
    return value


def parse_time_us(text: str, *, default_unit: str) -> int:
    """Parse a time option to microseconds.

    ``default_unit`` is ``"s"`` for runtime/ramp_time/startdelay and ``"us"`` for
    thinktime-like options (fio's ``is_seconds``).
    """
    _check_plain(text, "a time")
    if text.startswith("("):
        value = evaluate_expression(text, is_time=True, default_time_unit=default_unit)
        if value < 0:
            raise ValueError("not a time: negative (allowed 0 or more)")
        return value
    m = _NUMBER_RE.match(text)
    if not m:
        if text.startswith("-") and _NUMBER_RE.match(text[1:]):
            raise ValueError("not a time: negative (allowed 0 or more)")
        raise ValueError("not a time: a number with an optional unit (us, ms, s, m, h or d)")
    digits, suffix = m.groups()
    if digits[:2].lower() == "0x":
        number = int(digits, 16)
        if suffix:
            raise ValueError("not a time: no unit suffix allowed after a hex number")
        if default_unit != "us":
            # parse.c str_to_decimal skips the time multiplier for hex numbers: fio 3.33 reads
            # runtime=0x10 as 16 us, not 16 s (measured with --debug=parse).
            raise ValueError(f"not a time: a hex number (fio 3.33 would read it as {number} microseconds, not {number} {default_unit})")
    else:
        number = int(digits)
    if suffix == "":
        return number * _TIME_SUFFIXES[default_unit]
    key = suffix.lower()
    if key not in _TIME_SUFFIXES:
        raise ValueError(f"not a time: unknown unit '{suffix}' (use us, ms, s, m, h or d; fio 3.33 would silently read it as microseconds)")
    return number * _TIME_SUFFIXES[key]


def parse_bool(text: str) -> bool:
    """A fio ``FIO_OPT_BOOL``: ``0`` or ``1`` (fio rejects ``yes``/``true`` and ``2``)."""
    value = _parse_flag_int(text)
    if value > 1:
        raise ValueError(f"max value out of range: {value} (1 max)")
    return bool(value)


def parse_flag(text: str) -> int:
    """A fio ``FIO_OPT_STR_SET`` given a value: any unsigned integer, nonzero = on."""
    return _parse_flag_int(text)


def _parse_flag_int(text: str) -> int:
    _check_plain(text, "an integer")
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", text):
        return int(text, 16)
    if re.fullmatch(r"[0-9]+", text):
        return int(text)
    raise ValueError("not an integer")


# --- arithmetic expressions -------------------------------------------------------------
#
# fio documents parenthesised expressions (HOWTO "Job file parameters"), but the Debian
# fio-3.33 build has no CONFIG_ARITHMETIC and rejects every value starting with "(".
# Upstream fio with arithmetic first splits the value at '-' ':' ',' (so "(10-2)" is
# misread) and evaluates time expressions in whole seconds. We evaluate the whole
# expression instead, with the same operator precedence as fio's yacc grammar
# (exp/expression-parser.y): + - < unit suffix < * / < ^ (right) < % < unary minus.
# So "2*4k" is (2*4)k and "6/3k" is (6/3)k = 2048, while "1+2k" is 1+2048.

_TOKEN_RE = re.compile(
    r"\s*(?:(?P<num>0[xX][0-9a-fA-F]+|[0-9]*\.[0-9]+(?:[eE][-+]?[0-9]+)?|[0-9]+(?:[eE][-+]?[0-9]+)?)"
    r"|(?P<word>[A-Za-z]+)|(?P<op>[-+*/%^()]))"
)

Number = Union[int, float]

_PREC_ADD = 1
_PREC_SUFFIX = 2
_BINARY = {"+": (1, "left"), "-": (1, "left"), "*": (3, "left"), "/": (3, "left"), "^": (4, "right"), "%": (5, "left")}


class _ExprParser:
    def __init__(self, text: str, unit_of: Callable[[str], int]) -> None:
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            if text[pos].isspace():
                pos += 1
                continue
            m = _TOKEN_RE.match(text, pos)
            if not m or m.end() == pos:
                raise ValueError(f"bad character '{text[pos]}' in expression")
            kind = m.lastgroup
            assert kind is not None
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        if len(self.tokens) > MAX_EXPR_TOKENS:
            raise ValueError(f"expression of more than {MAX_EXPR_TOKENS} numbers, units and operators")
        self.pos = 0
        self.unit_of = unit_of
        self.units_specified = False
        self.depth = 0

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else ("end", "")

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        self.pos += 1
        return tok

    def parse(self) -> Number:
        value = self.expr(0)
        if self.peek()[0] != "end":
            raise ValueError(f"unexpected '{self.peek()[1]}' in expression")
        return value

    def expr(self, min_prec: int) -> Number:
        lhs = self.unary()
        while True:
            kind, text = self.peek()
            if kind == "op" and text in _BINARY:
                prec, assoc = _BINARY[text]
                if prec < min_prec:
                    break
                self.take()
                rhs = self.expr(prec + 1 if assoc == "left" else prec)
                lhs = _apply(text, lhs, rhs)
            elif kind == "word" and min_prec <= _PREC_SUFFIX:
                self.take()
                lhs = _bounded(lhs * self.unit_of(text))
                self.units_specified = True
            else:
                break
        return lhs

    def unary(self) -> Number:
        kind, text = self.take()
        if kind == "op" and text in "-(":
            self.depth += 1
            if self.depth > MAX_EXPR_DEPTH:
                raise ValueError(f"expression nested more than {MAX_EXPR_DEPTH} deep")
            try:
                if text == "-":
                    return -self.unary()
                value = self.expr(0)
                if self.take() != ("op", ")"):
                    raise ValueError("missing ')' in expression")
                return value
            finally:
                self.depth -= 1
        if kind == "num":
            if len(text) > MAX_NUMBER_CHARS:
                raise ValueError(f"number longer than {MAX_NUMBER_CHARS} characters in expression")
            if text[:2].lower() == "0x":
                return int(text, 16)
            if any(c in text for c in ".eE"):
                return float(text)
            return int(text)
        raise ValueError("incomplete expression" if kind == "end" else f"unexpected '{text}' in expression")


def _bounded(value: Number) -> Number:
    """Refuse values no option can take before they cost time or overflow a float."""
    if isinstance(value, int):
        if value.bit_length() > MAX_EXPR_BITS:
            raise ValueError(f"expression value out of range (more than {MAX_EXPR_BITS} bits)")
    elif value != value or abs(value) >= 2.0**MAX_EXPR_BITS:
        raise ValueError(f"expression value out of range (beyond 2^{MAX_EXPR_BITS})")
    return value


def _apply(op: str, a: Number, b: Number) -> Number:
    try:
        return _bounded(_apply_unbounded(op, a, b))
    except OverflowError:
        raise ValueError(f"expression value out of range (beyond 2^{MAX_EXPR_BITS})") from None
    except ZeroDivisionError:  # 0 ^ -1
        raise ValueError("divide by zero in expression") from None


def _apply_unbounded(op: str, a: Number, b: Number) -> Number:
    both_int = isinstance(a, int) and isinstance(b, int)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        if b == 0:
            raise ValueError("divide by zero in expression")
        if both_int:
            # C integer division truncates toward zero.
            q = abs(a) // abs(b)
            return q if (a >= 0) == (b >= 0) else -q
        return a / b
    if op == "%":
        if not both_int:
            raise ValueError("modulo on floats in expression")
        if b == 0:
            raise ValueError("divide by zero in expression")
        r = abs(a) % abs(b)
        return r if a >= 0 else -r
    if op == "^":
        if abs(a) > 1 and b * math.log2(abs(a)) > MAX_EXPR_BITS + 1:
            # Out of range: refused without computing it (9^9^9 would take ages).
            raise ValueError(f"expression value out of range (more than {MAX_EXPR_BITS} bits)")
        if both_int and b >= 0:
            ipow: int = int(a) ** int(b)  # int ** negative would be a float: excluded above
            return ipow
        fpow: float = float(a) ** float(b)
        return fpow
    raise AssertionError(op)


def evaluate_expression(
    text: str,
    *,
    kb_base: int = 1024,
    is_time: bool = False,
    default_time_unit: str = "s",
) -> int:
    """Evaluate a parenthesised fio expression to bytes (or microseconds if ``is_time``)."""
    if is_time:

        def unit_of(word: str) -> int:
            key = word.lower()
            if key not in _TIME_SUFFIXES:
                raise ValueError(f"unknown time unit '{word}' in expression")
            return _TIME_SUFFIXES[key]

    else:

        def unit_of(word: str) -> int:
            try:
                return _size_multiplier(word, kb_base)
            except ValueError:
                raise ValueError(f"unknown size unit '{word}' in expression") from None

    parser = _ExprParser(text, unit_of)
    value = parser.parse()
    if is_time and not parser.units_specified:
        value = value * _TIME_SUFFIXES[default_time_unit]
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("expression is not finite")
        return int(value)
    return value


# --- num2str ------------------------------------------------------------------------------

N2S_NONE = 0
N2S_PERSEC = 1
N2S_BYTE = 2
N2S_BIT = 3
N2S_BYTEPERSEC = 4
N2S_BITPERSEC = 5

_UNIT_STR = {N2S_NONE: "", N2S_PERSEC: "/s", N2S_BYTE: "B", N2S_BIT: "bit", N2S_BYTEPERSEC: "B/s", N2S_BITPERSEC: "bit/s"}
_SI = ["", "k", "M", "G", "T", "P", "E"]
_IEC = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


def num2str(num: int, maxlen: int, base: int, pow2: bool, units: int) -> str:
    """fio's ``num2str`` (lib/num2str.c): scale ``num`` until it has at most ``maxlen``
    digits, then fill the remaining width with decimals taken from the last remainder.

    The decimals come only from the last division (fio's "carry rounding error"), which is
    why 78.1MiB/s can print for 78.09; matching fio's text needs the same quirk.
    """
    thousand = 1024 if pow2 else 1000
    prefixes = _IEC if pow2 else _SI
    post_index = 0
    while base > 1:
        base //= thousand
        post_index += 1
    if units in (N2S_BIT, N2S_BITPERSEC):
        num *= 8
    modulo = None
    carry = False
    while post_index < len(_SI):
        if len(str(num)) <= maxlen:
            break
        modulo = num % thousand
        num //= thousand
        carry = modulo >= thousand // 2
        post_index += 1
    if post_index >= len(_SI):
        post_index = 0
    unit = _UNIT_STR[units]
    if modulo is None:
        return f"{num}{prefixes[post_index]}{unit}"
    width = len(str(num))
    if maxlen - width <= 1:
        if carry:
            num += 1
        return f"{num}{prefixes[post_index]}{unit}"
    decimals = maxlen - width - 1
    frac = "%.*f" % (decimals, modulo / thousand)
    if frac[0] == "1":
        num += 1
    return f"{num}.{frac[2:]}{prefixes[post_index]}{unit}"
