"""WAF measurements as every command reports them (docs/models.md, "Measuring WAF").

The measurement itself is the core's (``_core.waf_measurement``, nvme/waf.rs): NAND / host
bytes between two vendor logs, its basis (``timed``, ``fast_forward``, or ``window`` when
the measurer did not run the writes itself), the host bytes and GC cycles it spans and its
verdict. ``waf`` is set only when the verdict is ``steady``; the ratio of a window too short
to say anything is kept as ``waf_window_raw``, never as the drive's WAF. This module adds
the text forms of a measurement (``text``: the drive's WAF or why there is none;
``window_label``: what a window ratio compared with a published one spans) and a row's
flat keys for it (``keys``, ``from_keys``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal, NotRequired, Optional, TypedDict, Union

from . import _core
from .core_types import VendorLog, WafMeasurement

# A fast-forward pass is not at steady state by being one (the first fill of an empty drive
# is a pass too): the callers that measure one after preconditioning say so (``text``).
BASIS_TEXT = {
    "timed": "timed window",
    "fast_forward": "fast-forward pass",
    "window": "window of timed or fast-forward writes",
}
AT_STEADY_STATE = " at steady state"
KEYS = ("basis", "verdict", "host_bytes", "gc_cycles", "namespace_passes")


class WafSpan(TypedDict):
    """What a row keeps of a measurement (``keys``, read back by ``from_keys``): the row's WAF
    figure and what its window spanned; a sweep row keeps the window's ratio too."""

    waf: Optional[float]
    waf_window_raw: NotRequired[Optional[float]]
    basis: Literal["timed", "fast_forward", "window"]
    verdict: Literal["steady", "insufficient", "no_writes"]
    host_bytes: int
    gc_cycles: float
    namespace_passes: float
    buffered_change_bytes: NotRequired[int]


# A measurement, or what a row keeps of one: what the text forms read.
Measured = Union[WafMeasurement, WafSpan]

# What a window must span to be the drive's, and how little its write buffer may change
# (nvme/waf.rs, exported by the core).
MIN_GC_CYCLES, MIN_PASSES, BUFFER_SHARE = _core.WAF_MIN_GC_CYCLES, _core.WAF_MIN_NAMESPACE_PASSES, _core.WAF_MAX_BUFFER_SHARE
NEED = f"{MIN_GC_CYCLES:g} GC cycle or {MIN_PASSES:g} namespace pass"


# Lifetime counters of the vendor log: none of them ever goes down on one drive.
MONOTONIC = ("host_write_bytes", "nand_write_bytes", "gc_victims")


class WafWindowError(ValueError):
    """Two vendor logs that are not one drive's, before then after (one line)."""


def measure(before: VendorLog, after: VendorLog, basis: str, namespace_bytes: int) -> WafMeasurement:
    """The WAF of the window between two vendor logs of one drive (keys: nvme/waf.rs).
    WafWindowError if a lifetime counter went down between them (logs swapped, or the drive
    made again in between): the core counts what went down as nothing written."""
    before_map: Mapping[str, Any] = before
    after_map: Mapping[str, Any] = after
    for k in MONOTONIC:
        if k in before_map and k in after_map and after_map[k] < before_map[k]:
            raise WafWindowError(
                f"{k} went down from {before_map[k]:,} to {after_map[k]:,}: not two vendor logs of one drive, "
                "before then after (was the drive made again in between?)"
            )
    return _core.waf_measurement(before, after, basis, namespace_bytes)


def keys(m: Optional[Measured], prefix: str = "waf") -> dict[str, Any]:
    """A row's flat keys for what a WAF window spans (as sweep and replay rows name them):
    ``{prefix}_basis``, ``_verdict``, ``_host_bytes``, ``_gc_cycles``, ``_namespace_passes``
    (all None without a measurement). The keys are named by ``prefix``: a row's open columns."""
    span: Optional[Mapping[str, object]] = m
    return {f"{prefix}_{k}": None if span is None else span[k] for k in KEYS}


def from_keys(row: Mapping[str, Any], prefix: str = "waf") -> Optional[WafSpan]:
    """The measurement's span back from a row's ``keys``, with the row's ``{prefix}`` figure
    as its ``waf`` (None when the row has no measurement)."""
    if row.get(f"{prefix}_verdict") is None:
        return None
    return {
        "waf": row.get(prefix),
        "basis": row[f"{prefix}_basis"],
        "verdict": row[f"{prefix}_verdict"],
        "host_bytes": row[f"{prefix}_host_bytes"],
        "gc_cycles": row[f"{prefix}_gc_cycles"],
        "namespace_passes": row[f"{prefix}_namespace_passes"],
    }


def amount(m: Measured) -> str:
    """What the window spans: host bytes, namespace passes and GC cycles."""
    return (
        f"{_bytes(int(m['host_bytes']))} written, {_span(m['namespace_passes'], 2)} namespace passes, {_span(m['gc_cycles'], 1)} GC cycles"
    )


def _span(v: float, digits: int) -> str:
    """``v`` to ``digits`` places, never rounded up to the threshold of 1 it is below: a
    window of 0.9999 namespace passes (a sequential job that stops short of the end) is not
    printed as the 1.00 it does not reach."""
    text = f"{v:.{digits}f}"
    if v < 1.0 <= float(text):
        text = f"{math.floor(v * 10**digits) / 10**digits:.{digits}f}"
    return text


def spans_enough(m: Measured) -> bool:
    """Whether the window spans 1 GC cycle or 1 namespace pass (an insufficient window that
    does was refused for its write buffer: ``buffer_text``)."""
    return m["gc_cycles"] >= MIN_GC_CYCLES or m["namespace_passes"] >= MIN_PASSES


def buffer_text(m: Measured) -> str:
    """Why a window that spans enough is still not the drive's: its write buffer filled or
    drained by more than 1 % of the bytes written (those bytes are written and not programmed,
    or programmed and not written, in the window)."""
    change = m.get("buffered_change_bytes")
    if change is None:  # a row's span keeps no buffer figure
        return f"the write buffer's fill changed by more than {BUFFER_SHARE:.0%} of the bytes written"
    verb = "filled" if change > 0 else "drained"
    share = abs(change) / max(1, int(m["host_bytes"]))
    return f"the write buffer {verb} by {_bytes(abs(change))}, {share:.0%} of the bytes written (need <= {BUFFER_SHARE:.0%})"


def text(m: Optional[Measured], at_steady_state: bool = False) -> str:
    """One line: the WAF with its basis and amount, or why there is none; ``at_steady_state``
    when the caller preconditioned the drive into steady state before a fast-forward pass."""
    if m is None:
        return "WAF: not measured"
    if m["verdict"] == "no_writes":
        return "WAF: none (the host wrote nothing)"
    if m["verdict"] != "steady" and spans_enough(m):
        return f"WAF: not measured (window wrote {_bytes(int(m['host_bytes']))}, but {buffer_text(m)})"
    if m["verdict"] != "steady":
        return (
            f"WAF: not measured (window wrote {_bytes(int(m['host_bytes']))}, {_span(m['gc_cycles'], 1)} GC cycles, "
            f"{_span(m['namespace_passes'], 2)} namespace passes; need >= 1 of either)"
        )
    state = AT_STEADY_STATE if at_steady_state and m["basis"] == "fast_forward" else ""
    return f"WAF {m['waf']:.2f} ({BASIS_TEXT[m['basis']]}{state}: {amount(m)})"


def verdict_text(m: Measured) -> str:
    """The WAF figure of ``ssdtwin waf`` and ``ssdtwin stack --show``: the ratio when the
    window spans enough, else why there is none."""
    if m["verdict"] == "no_writes":
        return "- (nothing written)"
    if m["verdict"] != "steady" and spans_enough(m):
        return f"not measured ({buffer_text(m)}: its ratio is not the drive's WAF)"
    if m["verdict"] != "steady":
        return f"not measured (the window spans less than {NEED}: its ratio is not the drive's WAF)"
    return f"{m['waf']:.4f} (steady: the window spans at least {NEED})"


def window_label(m: Optional[Measured]) -> str:
    """What a window ratio compared with a published window ratio was measured over: its
    basis, amount and whether it is also the drive's WAF (reproduce rows)."""
    if m is None:
        return "window not measured"
    if m["verdict"] == "no_writes":
        return "the host wrote nothing"
    if m["verdict"] == "steady":
        what = "steady"
    elif spans_enough(m):
        what = f"{buffer_text(m)}: a window ratio, not the drive's WAF"
    else:
        what = f"under {NEED}: a window ratio, not the drive's WAF"
    return f"{BASIS_TEXT[m['basis']]}: {amount(m)}; {what}"


def _bytes(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n / 1024:,.0f} KiB"
