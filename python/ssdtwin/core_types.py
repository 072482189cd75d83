"""The types the binding (``ssdtwin._core``) returns and takes beyond a fio run's (those are in
fio/contract.py): one TypedDict per Rust structure, named as in Rust, with the crate file that
defines it. pythonize converts them (structs and maps become dicts, sequences lists,
fixed-length arrays tuples). tests/test_binding_types.py checks real values from the
binding against them, so a field added to or dropped from a Rust structure fails there.
"""

from __future__ import annotations

from typing import Any, TypedDict

# --- host stacks (host/tier.rs, host/media.rs, engine/stack.rs) -------------------------------


class TierCounters(TypedDict):
    host_write_bytes: int
    host_read_bytes: int
    tier_write_bytes: int
    bypass_bytes: int
    overwrite_hit_bytes: int
    read_hit_bytes: int
    destage_bytes: int
    evict_bytes: int
    evictions: int
    dropped_bytes: int
    gc_read_bytes: int
    gc_write_bytes: int
    pad_bytes: int
    stalls: int


class TierConfig(TypedDict):
    policy: str
    capacity_bytes: int
    high_watermark_pct: int
    low_watermark_pct: int
    destage_concurrency: int
    iu_bytes: int
    drive_bytes: int
    stripe_bytes: int
    band_bytes: int
    host_op_pct: int
    area_bytes: int


class Tier(TypedDict):
    config: TierConfig
    counters: TierCounters
    next_id: int
    # The policy's own state ({"IuFill": ...} or {"Log": ...}): the core's alone to read.
    state: dict[str, Any]


class StackState(TypedDict):
    """A host stack's state (engine/stack.rs ``Stack``) in JSON's data model (map keys are
    strings): Python keeps it in the stack image's state.json and hands it back."""

    media: dict[str, Any]
    tier: Tier


class StackSummary(TypedDict):
    """Sizes and traffic of a stack, from the tier's own accounting (the binding's
    ``StackSummary``)."""

    user_bytes: int
    resident_bytes: int
    drive_write_bytes: int
