"""WAF measurements as every command reports them (docs/models.md, "Measuring WAF").

The measurement itself is the core's (``_core.waf_measurement``, nvme/waf.rs): NAND / host
bytes between two vendor logs, its basis (``timed`` or ``fast_forward``), the host bytes and
GC cycles it spans and its verdict. ``waf`` is set only when the verdict is ``steady``; the
ratio of a window too short to say anything is kept as ``waf_window_raw``, never as the
drive's WAF. This module adds the one text form of a measurement."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional, cast

from . import _core
from .core_types import VendorLog

BASIS_TEXT = {"timed": "timed window", "fast_forward": "fast-forward pass at steady state"}


def measure(before: Mapping[str, Any], after: Mapping[str, Any], basis: str, namespace_bytes: int) -> dict[str, Any]:
    """The WAF of the window between two vendor logs of one drive (keys: nvme/waf.rs)."""
    m = _core.waf_measurement(cast(VendorLog, dict(before)), cast(VendorLog, dict(after)), basis, namespace_bytes)
    return dict(m)


def amount(m: Mapping[str, Any]) -> str:
    """What the window spans: host bytes, namespace passes and GC cycles."""
    return f"{_bytes(int(m['host_bytes']))} written, {m['namespace_passes']:.2f} namespace passes, {m['gc_cycles']:.1f} GC cycles"


def text(m: Optional[Mapping[str, Any]]) -> str:
    """One line: the WAF with its basis and amount, or why there is none."""
    if m is None:
        return "WAF: not measured"
    if m["verdict"] == "no_writes":
        return "WAF: none (the host wrote nothing)"
    if m["verdict"] != "steady":
        return (
            f"WAF: not measured (window wrote {_bytes(int(m['host_bytes']))}, {m['gc_cycles']:.1f} GC cycles, "
            f"{m['namespace_passes']:.2f} namespace passes; need >= 1 of either)"
        )
    return f"WAF {m['waf']:.2f} ({BASIS_TEXT[m['basis']]}: {amount(m)})"


def _bytes(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n / 1024:,.0f} KiB"
