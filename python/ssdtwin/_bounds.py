"""Integers out of a parameter's range, named at the binding boundary.

pyo3 turns an int that does not fit the Rust parameter (a negative seed, ``2**70`` for a
u64) into an OverflowError that names nothing ("can't convert negative int to unsigned"),
with only a note "while processing 'seed'". ``names_out_of_range`` wraps a class's public
methods so that error becomes an :class:`ArgumentRangeError` naming the parameter, the
value given and the range the core accepts.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
from collections.abc import Callable
from typing import Any, Optional, TypeVar

#: The binding's parameters narrower than u32 (crates/ssdtwin-py/src; every other integer
#: parameter is a u32 or a u64, told apart by pyo3's message). tests/test_api.py checks
#: this table against the Rust signatures.
NARROW_BITS: dict[str, int] = {
    **dict.fromkeys(
        ("flbas", "nmic", "lbaf", "ses", "pi", "sanact", "owpass", "tags", "prchk", "ps", "fid", "sel", "atype", "class", "lid", "cns"), 8
    ),
    **dict.fromkeys(("nvmsetid", "endgid", "rl"), 16),
}
#: pyo3's messages for a u64 (PyLong_AsUnsignedLongLong); the narrower types go through a C long.
_U64_MESSAGES = ("can't convert negative int to unsigned", "int too big to convert")
_NOTE = re.compile(r"while processing '(\w+)'")


class ArgumentRangeError(OverflowError, ValueError):
    """An integer argument outside the range of the core's parameter (a ValueError too)."""


def _renamed(e: OverflowError, bound: Optional[inspect.BoundArguments]) -> Optional[ArgumentRangeError]:
    notes = [m.group(1) for n in getattr(e, "__notes__", ()) if (m := _NOTE.search(str(n)))]
    if not notes:
        return None
    name = notes[-1]
    bits = 64 if str(e) in _U64_MESSAGES else NARROW_BITS.get(name, 32)
    given = ""
    if bound is not None and name in bound.arguments and isinstance(bound.arguments[name], int):
        given = f"={bound.arguments[name]}"
    return ArgumentRangeError(f"{name}{given}: out of range; must be an integer in 0..={2**bits - 1} (u{bits})")


F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound=type)


def _wrap(fn: F) -> F:
    try:
        sig: Optional[inspect.Signature] = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except OverflowError as e:
            if isinstance(e, ArgumentRangeError):
                raise
            bound = None
            if sig is not None:
                with contextlib.suppress(TypeError):
                    bound = sig.bind(*args, **kwargs)
            better = _renamed(e, bound)
            if better is None:
                raise
            raise better from None

    return call  # type: ignore[return-value]


def names_out_of_range(cls: C) -> C:
    """Wrap every public method (and classmethod/staticmethod) of ``cls``."""
    for attr, value in list(vars(cls).items()):
        if attr.startswith("_"):
            continue
        if isinstance(value, classmethod):
            setattr(cls, attr, classmethod(_wrap(value.__func__)))
        elif isinstance(value, staticmethod):
            setattr(cls, attr, staticmethod(_wrap(value.__func__)))
        elif inspect.isfunction(value):
            setattr(cls, attr, _wrap(value))
    return cls
