"""Does a value have a TypedDict's shape? Used on what the binding returns and takes.

``mismatches(value, T)`` lists every difference between ``value`` and the type ``T``: a key
a TypedDict lacks or does not know (NotRequired keys may be absent), a value of the wrong
kind. It understands what pythonize produces and the types fio/contract.py and
core_types.py use: TypedDict, int, float (an int is a float), bool, str, bytes, None,
Any, Optional/Union, Literal, list[X], tuple[X, ...], tuple[X, Y, ...], dict[K, V], and the
binding's own classes (an instance of it).
With ``from_json``, the value was read back from JSON, where a tuple is a list.
"""

from __future__ import annotations

import types
from typing import Any, Literal, NotRequired, Required, Union, get_args, get_origin, get_type_hints, is_typeddict

from ssdtwin.fio import contract


def fields(td: Any) -> tuple[dict[str, Any], set[str]]:
    """A TypedDict's (field → type, required field names)."""
    # core_types.py names fio's CloneOut only for the type checker (the fio package is
    # imported where a run needs it), so its names are resolved here too.
    hints = get_type_hints(td, localns=vars(contract), include_extras=True)
    # A key is required as the class's totality says (``__required_keys__``) unless marked;
    # the marks are read from the hints, as string annotations hide them from the class.
    marked = {k: get_origin(t) for k, t in hints.items() if get_origin(t) in (NotRequired, Required)}
    required = {k for k in hints if marked.get(k) is Required or (k not in marked and k in td.__required_keys__)}
    return {k: (get_args(t)[0] if k in marked else t) for k, t in hints.items()}, required


def mismatches(value: Any, tp: Any, path: str = "value", from_json: bool = False) -> list[str]:
    if tp is Any:
        return []
    if is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{path}: expected a dict ({tp.__name__}), got {type(value).__name__}"]
        hints, required = fields(tp)
        out = [f"{path}: missing {k} ({tp.__name__})" for k in sorted(required - set(value))]
        out += [f"{path}: {k} is not a field of {tp.__name__}" for k in sorted(set(value) - set(hints))]
        for k in sorted(set(value) & set(hints)):
            out += mismatches(value[k], hints[k], f"{path}.{k}", from_json)
        return out
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        found = [mismatches(value, a, path, from_json) for a in args]
        return [] if any(not f for f in found) else [f"{path}: {value!r} is none of {tp}"]
    if origin is Literal:
        return [] if value in args else [f"{path}: {value!r} is not one of {args}"]
    if tp is None or tp is type(None):
        return [] if value is None else [f"{path}: expected None, got {value!r}"]
    if tp is bool:
        return [] if isinstance(value, bool) else [f"{path}: expected a bool, got {value!r}"]
    if tp is int:
        return [] if isinstance(value, int) and not isinstance(value, bool) else [f"{path}: expected an int, got {value!r}"]
    if tp is float:
        return [] if isinstance(value, (int, float)) and not isinstance(value, bool) else [f"{path}: expected a float, got {value!r}"]
    if tp in (str, bytes):
        return [] if isinstance(value, tp) else [f"{path}: expected {tp.__name__}, got {type(value).__name__}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {type(value).__name__}"]
        return [m for i, v in enumerate(value) for m in mismatches(v, args[0], f"{path}[{i}]", from_json)]
    if origin is tuple:
        if from_json and isinstance(value, list):
            value = tuple(value)
        if not isinstance(value, tuple):
            return [f"{path}: expected a tuple, got {type(value).__name__}"]
        if len(args) == 2 and args[1] is Ellipsis:
            args = (args[0],) * len(value)
        elif len(value) != len(args):
            return [f"{path}: expected {len(args)} items, got {len(value)}"]
        return [m for i, (v, a) in enumerate(zip(value, args)) for m in mismatches(v, a, f"{path}[{i}]", from_json)]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{path}: expected a dict, got {type(value).__name__}"]
        out = []
        for k, v in value.items():
            out += mismatches(k, args[0], f"{path} key {k!r}", from_json) + mismatches(v, args[1], f"{path}[{k!r}]", from_json)
        return out
    if isinstance(tp, type) and not is_typeddict(tp):  # a class the binding defines (``_core.HostStack``)
        return [] if isinstance(value, tp) else [f"{path}: expected {tp.__name__}, got {type(value).__name__}"]
    raise TypeError(f"{path}: shape.py does not understand {tp!r}")
