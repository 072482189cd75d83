"""Size, time and number syntax (fio 3.33 parse.c), and num2str."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ssdtwin.fio.units import (
    N2S_BYTE,
    N2S_BYTEPERSEC,
    N2S_NONE,
    Percent,
    evaluate_expression,
    num2str,
    parse_bool,
    parse_flag,
    parse_size,
    parse_time_us,
)

# Values measured with `fio --parse-only --debug=parse` on fio-3.33 (docs/fio.md §2.1).
MEASURED_SIZES_1024 = {
    "4k": 4096,
    "4K": 4096,
    "4kb": 4096,
    "4KB": 4096,
    "4ki": 4096,
    "4Ki": 4096,
    "4KiB": 4000,
    "4kib": 4000,
    "1m": 1048576,
    "1mi": 1048576,
    "1Mi": 1048576,
    "1MiB": 1000000,
    "0x10": 16,
    "1g": 1073741824,
    "1t": 1099511627776,
    "1p": 1125899906842624,
    "4b": 4,
    "4B": 4,
    "4096": 4096,
}
MEASURED_SIZES_1000 = {"4k": 4000, "4KiB": 4096, "1m": 1000000, "1MiB": 1048576}


@pytest.mark.parametrize("text,expected", sorted(MEASURED_SIZES_1024.items()))
def test_sizes_match_fio_with_default_kb_base(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text,expected", sorted(MEASURED_SIZES_1000.items()))
def test_kb_base_1000_flips_the_suffixes(text: str, expected: int) -> None:
    assert parse_size(text, kb_base=1000) == expected


# fio accepts these and silently reads something else; we refuse them.
@pytest.mark.parametrize(
    "text,fio_reads",
    [("4q", 4), ("4kq", 4096), ("1.5k", 1), (" 4k", 4), ("4 KiB", 4), ("4096x", 4096), ("", None), ("k", None), ("-4k", None)],
)
def test_sizes_fio_misreads_are_errors(text: str, fio_reads: object) -> None:
    with pytest.raises(ValueError, match="not a size|empty value"):
        parse_size(text)


@pytest.mark.parametrize("text,expected", [("+3", 3), ("+4k", 4096), ("+0x10", 16)])
def test_leading_plus_is_accepted_as_fio_does(text: str, expected: int) -> None:
    # fio 3.33 --debug=parse: iodepth=+3 -> 3, size=+4k -> 4096, size=+0x10 -> 16 (strtoll)
    assert parse_size(text) == expected


def test_leading_plus_percentage_is_refused() -> None:
    # fio 3.33 reads size=+50% as 50 bytes
    with pytest.raises(ValueError, match="50 bytes"):
        parse_size("+50%", allow_percent=True)
    with pytest.raises(ValueError):
        parse_size("++4k")


def test_percent_only_where_allowed() -> None:
    assert parse_size("50%", allow_percent=True) == Percent(50)
    with pytest.raises(ValueError, match="percentage is not allowed"):
        parse_size("50%")


MEASURED_TIMES_S = {
    "10": 10_000_000,
    "10s": 10_000_000,
    "10S": 10_000_000,
    "1m": 60_000_000,
    "1M": 60_000_000,
    "10m": 600_000_000,
    "2h": 7_200_000_000,
    "1d": 86_400_000_000,
    "500ms": 500_000,
    "500msec": 500_000,
    "100us": 100,
    "100usec": 100,
}


@pytest.mark.parametrize("text,expected", sorted(MEASURED_TIMES_S.items()))
def test_times_in_seconds_options(text: str, expected: int) -> None:
    assert parse_time_us(text, default_unit="s") == expected


@pytest.mark.parametrize("text,expected", [("10", 10), ("10ms", 10_000), ("1s", 1_000_000), ("1m", 60_000_000), ("10us", 10)])
def test_thinktime_defaults_to_microseconds(text: str, expected: int) -> None:
    assert parse_time_us(text, default_unit="us") == expected


@pytest.mark.parametrize("text", ["10sec", "10min", "1.5", "10x", "5 s", "0x10"])
def test_time_misreads_are_errors(text: str) -> None:
    # fio-3.33: 10sec = 10 us, 1.5 = 1 s, 10x = 16 us (hex because of "0x"), "5 s" = 5 s,
    # 0x10 = 16 us (a hex number skips the time multiplier: runtime=0x10 is not 16 s).
    with pytest.raises(ValueError):
        parse_time_us(text, default_unit="s")


def test_leading_plus_time() -> None:
    # fio 3.33 --debug=parse: runtime=+3 -> 3000000, thinktime=+3ms -> 3000
    assert parse_time_us("+3", default_unit="s") == 3_000_000
    assert parse_time_us("+3ms", default_unit="us") == 3_000


def test_hex_time_is_microseconds_as_in_fio() -> None:
    # fio 3.33 --debug=parse: thinktime=0x10 -> 16, runtime=0x10 -> 16 (us, both).
    assert parse_time_us("0x10", default_unit="us") == 16
    with pytest.raises(ValueError, match="16 microseconds"):
        parse_time_us("0x10", default_unit="s")


def test_unknown_time_unit_message_explains_fio() -> None:
    with pytest.raises(ValueError, match="microseconds"):
        parse_time_us("10sec", default_unit="s")


def test_bool_and_flag() -> None:
    assert parse_bool("1") is True and parse_bool("0") is False
    assert parse_flag("2") == 2
    for bad in ("yes", "true", "2"):
        with pytest.raises(ValueError):
            parse_bool(bad)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("(1+2)*4k", 12288),
        ("(4k)", 4096),
        ("(2*4k)", 8192),
        ("(1+2k)", 2049),  # the suffix binds tighter than +
        ("(6/3k)", 2048),  # but looser than / (fio's grammar): (6/3)k
        ("(2^10)", 1024),
        ("(10%3)", 1),
        ("(-2+10)", 8),
        ("(10-2)*1m", 8 * 1048576),  # upstream fio would split at '-' and read 2 bytes
        ("(1.5*4k)", 6144),
        ("(0x10*2)", 32),
    ],
)
def test_size_expressions(text: str, expected: int) -> None:
    assert parse_size(text) == expected


def test_time_expressions() -> None:
    assert parse_time_us("(1+2)", default_unit="s") == 3_000_000
    assert parse_time_us("(500ms)", default_unit="s") == 500_000
    assert parse_time_us("(2*1m)", default_unit="s") == 120_000_000
    assert parse_time_us("(10*2)", default_unit="us") == 20


@pytest.mark.parametrize("text", ["(1+", "(1/0)", "(1q)", "(2.5%2)", "()"])
def test_bad_expressions(text: str) -> None:
    with pytest.raises(ValueError):
        evaluate_expression(text)


# --- hypothesis: the size parser --------------------------------------------------------

_SUFFIX_POWER = {"": 0, "b": 0, "k": 1, "kb": 1, "ki": 1, "m": 2, "mb": 2, "mi": 2, "g": 3, "gb": 3, "gi": 3, "t": 4, "p": 5}


@given(
    st.integers(min_value=0, max_value=10**9),
    st.sampled_from(sorted(_SUFFIX_POWER)),
    st.sampled_from([1024, 1000]),
    st.booleans(),
)
def test_size_suffixes_property(number: int, suffix: str, kb_base: int, upper: bool) -> None:
    text = f"{number}{suffix.upper() if upper else suffix}"
    assert parse_size(text, kb_base=kb_base) == number * kb_base ** _SUFFIX_POWER[suffix]


@given(st.integers(min_value=0, max_value=10**9), st.sampled_from(["kib", "mib", "gib", "tib", "pib"]), st.sampled_from([1024, 1000]))
def test_ib_suffixes_use_the_other_base(number: int, suffix: str, kb_base: int) -> None:
    power = "kmgtp".index(suffix[0]) + 1
    other = 1000 if kb_base == 1024 else 1024
    assert parse_size(f"{number}{suffix}", kb_base=kb_base) == number * other**power


@given(st.integers(min_value=0, max_value=2**40), st.integers(min_value=0, max_value=2**20))
def test_expression_arithmetic_property(a: int, b: int) -> None:
    assert parse_size(f"({a}+{b})") == a + b
    assert parse_size(f"({a}*{b})") == a * b


@given(st.text(alphabet="0123456789kKmMgGiIbBqQxX.% -", max_size=8))
def test_size_parser_never_crashes(text: str) -> None:
    try:
        value = parse_size(text, allow_percent=True)
    except ValueError:
        return
    assert isinstance(value, (int, Percent))


# --- num2str ------------------------------------------------------------------------------


# Strings taken from real fio-3.33 output (tests/fio/data/real/*.normal and headers).
@pytest.mark.parametrize(
    "num,maxlen,pow2,units,expected",
    [
        (4096, 4, True, N2S_BYTE, "4096B"),
        (32768, 4, True, N2S_BYTE, "32.0KiB"),
        (131072, 4, True, N2S_BYTE, "128KiB"),
        (65536, 4, True, N2S_BYTE, "64.0KiB"),
        (20005, 4, False, N2S_NONE, "20.0k"),
        (4997, 4, False, N2S_NONE, "4997"),
        (81881107, 4, True, N2S_BYTEPERSEC, "78.1MiB/s"),
        (81881107, 4, False, N2S_BYTEPERSEC, "81.9MB/s"),
        (163844096, 4, True, N2S_BYTE, "156MiB"),
        (3632500, 6, False, N2S_NONE, "3632.5k"),
        (95641, 6, False, N2S_NONE, "95641"),
        (33554432, 5, False, N2S_BYTE, "33554kB"),
        (33554432, 5, True, N2S_BYTE, "32768KiB"),
        (37000, 5, False, N2S_NONE, "37000"),
        (1290964138, 5, False, N2S_BYTEPERSEC, "1291MB/s"),
        (1290964138, 5, True, N2S_BYTEPERSEC, "1231MiB/s"),
    ],
)
def test_num2str_matches_fio(num: int, maxlen: int, pow2: bool, units: int, expected: str) -> None:
    assert num2str(num, maxlen, 1, pow2, units) == expected


@given(st.integers(min_value=0, max_value=2**63), st.integers(min_value=1, max_value=10), st.booleans())
def test_num2str_width_property(num: int, maxlen: int, pow2: bool) -> None:
    text = num2str(num, maxlen, 1, pow2, N2S_NONE)
    digits = text.rstrip("kKMGTPEi")
    # At most maxlen digits, plus one when rounding carries (9.5Ki -> 10Ki), unless even
    # the largest prefix cannot make the number that short.
    if num < (1024 if pow2 else 1000) ** 6:
        assert len(digits.replace(".", "")) <= maxlen + 1
