"""Host stacks: a write-shaping tier on fast media in front of a drive image (docs/host.md).

A stack image is a directory: ``stack.toml`` (the drive's path, the media, the policy and
its parameters; written once) and ``state.json`` (the tier's state and counters, and the
identity of the drive state it was last committed with). Running fio through a stack
changes the tier and the drive together; a drive changed underneath the stack (by a run on
the drive alone, a format, another stack) is refused, never silently used.

In memory the stack is a ``_core.HostStack``, kept in Rust between runs (the log tier's maps
hold an entry per 4 KiB of the drive); it becomes JSON's data model only when state.json is
read (``load``) or written (``save_state``).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NotRequired, Optional, TypedDict, Union, cast

from . import _core
from . import waf as wafm
from ._core import HostStack
from .core_types import FtlCounters, StackFile, StackState, TierConfig, VendorLog, WafMeasurement
from .drive import Drive
from .live import lock_holder
from .nvmefmt import si_bytes

if TYPE_CHECKING:  # the fio package is imported when a run needs it
    from .fio.contract import CloneOut
    from .fio.parser import Run

PathLike = Union[str, "os.PathLike[str]"]
FORMAT = "ssdtwin-stack"
VERSION = 1
POLICIES = ("iu-fill", "log")
Policy = Literal["iu-fill", "log"]
DEFAULTS = {
    # [ASSUMED] start evicting/compacting at 80 % full, stop at 60 % (dm-writecache's
    # defaults are 50/45 %, docs/sources.md §7; DAOS aggregates continuously).
    "high_watermark_pct": 80,
    "low_watermark_pct": 60,
    # [ASSUMED] 8 destage writes in flight: enough to keep a P5316's 64 KiB writes streaming.
    "destage_concurrency": 8,
    # SPDK FTL writes its base device in 1 MiB write units (spdk doc/ftl.md, docs/sources.md §7).
    "stripe_bytes": 1 << 20,
    # SPDK FTL's overprovisioning default, 20 % (lib/ftl/utils/ftl_conf.c, docs/sources.md §7).
    "host_op_pct": 20,
}


class DriveIdentity(TypedDict):
    """What must not change under a stack between its runs (``identity``)."""

    l2p_xxh3: str
    p2l_xxh3: str
    counters: FtlCounters


class DriveTotals(TypedDict):
    """The drive's host and NAND bytes over the stack's runs, and its vendor logs when the
    stack was made and after its last run: the window of the drive's WAF measurement
    (``drive_waf``). Nothing else writes the drive in between (``open_drive`` refuses a drive
    changed underneath), so that window is the stack's runs. Stack images made before the
    logs were kept have none, and no measurement. ``drive_attached_bytes``: the bytes of the
    drive's attached namespaces at the end of the last run, the namespace-pass basis of that
    drive-wide measurement (as ``ssdtwin serve``'s and ``ssdtwin fio``'s)."""

    drive_host_write_bytes: int
    drive_nand_write_bytes: int
    drive_log_first: NotRequired[VendorLog]
    drive_log_last: NotRequired[VendorLog]
    drive_attached_bytes: NotRequired[int]


class StackImageState(TypedDict):
    """A stack image's state in memory: the stack, the drive it was last committed with, the
    drive's totals over the stack's runs. state.json holds it with the stack as
    ``HostStack.to_state()`` gives it (``StackImageFile``)."""

    drive_identity: Optional[DriveIdentity]
    drive_totals: DriveTotals
    stack: HostStack


class StackImageFile(TypedDict):
    """state.json, as ``json.loads`` reads it."""

    drive_identity: Optional[DriveIdentity]
    drive_totals: DriveTotals
    stack: StackState


class StackConfig(TypedDict):
    """What ``create`` made: the drive, its namespace, the media and the tier's parameters
    (stack.toml holds them without the ones the drive gives: ``StackFile``)."""

    drive: str
    namespace: int
    media: str
    policy: str
    tier: TierConfig


class StackError(ValueError):
    """A stack that cannot be made or used: one line per problem (one argument each)."""

    def __str__(self) -> str:
        # ValueError's own shows several arguments as a tuple: "('high_watermark 0: ...', ...)".
        return "\n".join(map(str, self.args))


def parse_shaping(text: str) -> tuple[str, int]:
    """``pmem:64GiB`` -> ("pmem", bytes)."""
    media, sep, size = text.partition(":")
    names = [m["name"] for m in _core.media_presets()]
    if not sep or not size:
        raise StackError(f"--shaping {text}: MEDIA:SIZE, MEDIA one of {', '.join(names)} (e.g. pmem:64GiB)")
    if media not in names:
        raise StackError(f"--shaping {text}: unknown media '{media}' (one of {', '.join(names)})")
    try:
        return media, _core.parse_size(size)
    except ValueError as e:
        raise StackError(f"--shaping {text}: {e}") from None


def _host_gc_can_always_collect(area_bytes: int, band_bytes: int, iu_bytes: int, host_op_pct: int) -> bool:
    """The core's rule for a log tier's bands (``TierConfig::host_gc_can_always_collect``,
    host/tier.rs): the bands outside the free one and the two open ones cannot all be within
    an IU of full, so the host GC always has a band worth collecting."""
    bands, band_blocks, iu_blocks = area_bytes // band_bytes, band_bytes // 4096, iu_bytes // 4096
    user_blocks = bands * band_blocks * (100 - host_op_pct) // 100
    return bands > 3 and band_blocks >= iu_blocks and user_blocks < (bands - 3) * (band_blocks - iu_blocks + 1)


def default_band_bytes(drive_bytes: int, stripe_bytes: int, iu_bytes: int = 0, host_op_pct: int = 20) -> int:
    """SPDK FTL's 1 GiB band, smaller on a small (scaled) drive: at least 64 bands, and as
    many more as the host GC needs with ``host_op_pct`` spare. A stripe times a power of two,
    so that the band is a whole number of stripes (a 1.5 MiB stripe got a 1 GiB band, which
    the stack then refused as not a multiple of the stripe nobody had chosen)."""
    band = stripe_bytes
    while band * 2 <= 1 << 30 and drive_bytes // (band * 2) >= 64:
        band *= 2
    while band > stripe_bytes and not _host_gc_can_always_collect(drive_bytes, band, iu_bytes or stripe_bytes, host_op_pct):
        band //= 2
    return band


def identity(d: Drive) -> DriveIdentity:
    """What must not change under a stack between its runs: the drive's map checksums and
    its FTL counters (any write, trim, GC or format moves one of them)."""
    fp = d.ftl_fingerprint()
    return {"l2p_xxh3": fp["l2p_xxh3"], "p2l_xxh3": fp["p2l_xxh3"], "counters": fp["counters"]}


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _toml(config: StackConfig) -> str:
    lines = [f'format = "{FORMAT}"', f"version = {VERSION}"]
    head: Mapping[str, object] = config
    for k in ("drive", "namespace", "media", "policy"):
        lines.append(f"{k} = {json.dumps(head[k])}")
    lines.append("\n[tier]")
    for k, v in config["tier"].items():
        if k not in ("policy", "iu_bytes", "drive_bytes"):
            lines.append(f"{k} = {v}")
    return "\n".join(lines) + "\n"


def create(
    path: PathLike,
    drive: PathLike,
    shaping: str,
    policy: str,
    *,
    namespace: int = 1,
    high_watermark_pct: Optional[int] = None,
    low_watermark_pct: Optional[int] = None,
    destage_concurrency: Optional[int] = None,
    stripe_bytes: Optional[int] = None,
    band_bytes: Optional[int] = None,
    host_op_pct: Optional[int] = None,
    area_bytes: int = 0,
    names: Optional[Mapping[str, str]] = None,
) -> StackConfig:
    """Make the stack image ``path`` over the drive image ``drive``; returns its config.
    Every check runs before anything is written. A bad parameter is named by its key
    (``high_watermark_pct``, as the arguments and stack.toml name it) or as ``names`` maps
    the key (the CLI's flags)."""
    path, drive = Path(path), Path(drive)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise StackError(f"{path}: exists and is not an empty directory")
    if not (drive / "ssdtwin.toml").is_file():
        raise StackError(f"--drive {drive}: no drive image there (make one with `ssdtwin create`)")
    if policy not in POLICIES:
        raise StackError(f"--policy {policy}: one of {', '.join(POLICIES)}")
    media, capacity = parse_shaping(shaping)
    holder = lock_holder(drive)
    if holder is not None and holder != os.getpid():
        # The stack records the drive as its last commit left it, which a server (or any
        # writer) holding it is moving away from: the stack would be refused at its first run.
        raise StackError(f"--drive {drive}: {drive} is in use by another ssdtwin process (pid {holder}); stop it first")
    with Drive.open(drive, writable=False) as d:
        nss = {n.nsid: n for n in d.namespaces() if n.attached and not n.dram}
        if namespace not in nss:
            raise StackError(
                f"--namespace {namespace}: not an attached namespace of {drive} (attached: {', '.join(map(str, nss)) or 'none'})"
            )
        ns = nss[namespace]
        log = d.vendor_log()
        iu = int(log["iu_bytes"])
        ident = identity(d)
    given = {
        "high_watermark_pct": high_watermark_pct,
        "low_watermark_pct": low_watermark_pct,
        "destage_concurrency": destage_concurrency,
        "stripe_bytes": stripe_bytes,
        "host_op_pct": host_op_pct,
    }
    p = {k: (DEFAULTS[k] if v is None else v) for k, v in given.items()}
    stripe = max(p["stripe_bytes"], iu) if stripe_bytes is None else p["stripe_bytes"]
    area = area_bytes or ns.bytes
    # In stack.toml's order: the parameters given or defaulted, then what follows from them.
    tier: TierConfig = {
        "high_watermark_pct": p["high_watermark_pct"],
        "low_watermark_pct": p["low_watermark_pct"],
        "destage_concurrency": p["destage_concurrency"],
        "stripe_bytes": stripe,
        "host_op_pct": p["host_op_pct"],
        "band_bytes": default_band_bytes(area, stripe, iu, p["host_op_pct"]) if band_bytes is None else band_bytes,
        "area_bytes": area_bytes,
        "policy": cast(Policy, policy),  # one of POLICIES, checked above
        "capacity_bytes": capacity,
        "iu_bytes": iu,
        "drive_bytes": ns.bytes,
    }
    try:
        stack = _core.stack_new(media, tier, dict(names or {}))
    except ValueError as e:
        raise StackError(
            *[f"--shaping {shaping}: {line}" if line.startswith("capacity") else line for line in str(e).splitlines()]
        ) from None
    config: StackConfig = {"drive": str(drive.resolve()), "namespace": namespace, "media": media, "policy": policy, "tier": tier}
    path.mkdir(parents=True, exist_ok=True)
    (path / "stack.toml").write_text(_toml(config))
    save_state(path, {"drive_identity": ident, "drive_totals": _zero_totals(log), "stack": stack})
    return config


def _zero_totals(log: Optional[VendorLog] = None) -> DriveTotals:
    totals: DriveTotals = {"drive_host_write_bytes": 0, "drive_nand_write_bytes": 0}
    if log is not None:
        totals["drive_log_first"] = totals["drive_log_last"] = log
    return totals


def add_totals(state: StackImageState, host_write_bytes: int, nand_write_bytes: int, after: VendorLog, attached_bytes: int) -> DriveTotals:
    """The state's drive totals with a run's (or a serving session's) bytes added; ``after``
    is the drive's vendor log at the end of it, ``attached_bytes`` the bytes of its attached
    namespaces then."""
    old = state.get("drive_totals") or _zero_totals()
    new: DriveTotals = {
        "drive_host_write_bytes": old["drive_host_write_bytes"] + host_write_bytes,
        "drive_nand_write_bytes": old["drive_nand_write_bytes"] + nand_write_bytes,
    }
    if "drive_log_first" in old:
        new["drive_log_first"] = old["drive_log_first"]
        new["drive_log_last"] = after
        new["drive_attached_bytes"] = attached_bytes
    return new


def drive_waf(config: StackFile, state: StackImageState) -> Optional[WafMeasurement]:
    """The drive's WAF measurement over the stack's runs (waf.py: timed writes); None for a
    stack image without the drive's logs. The vendor logs count every namespace's writes and
    the NAND WAF is the whole drive's, so namespace passes are over the drive's attached
    namespaces, as ``ssdtwin serve``'s summary and ``ssdtwin fio`` count them: over the
    stack's namespace alone, a small namespace beside a large one made 64 MiB 2 passes here
    and 0.01 in the server's line of the same session. A stack image saved before the
    attached bytes were kept falls back to the stack's namespace."""
    totals = state.get("drive_totals") or _zero_totals()
    if "drive_log_first" not in totals or "drive_log_last" not in totals:
        return None
    ns_bytes = int(totals.get("drive_attached_bytes", state["stack"].config()["drive_bytes"]))
    return wafm.measure(totals["drive_log_first"], totals["drive_log_last"], "timed", ns_bytes)


def is_stack(path: Path) -> bool:
    return (path / "stack.toml").is_file()


def load(path: PathLike) -> tuple[StackFile, StackImageState]:
    """(stack.toml, state.json with its stack read into a ``HostStack``); StackError if either
    is unreadable."""
    path = Path(path)
    try:
        config = _core.stack_toml((path / "stack.toml").read_text(), str(path / "stack.toml"))
        state_text = (path / "state.json").read_text()
    except OSError as e:
        raise StackError(f"{path}: not a readable stack image ({e.strerror}: {e.filename})") from None
    except ValueError as e:
        raise StackError(f"{path}: not a readable stack image ({e})") from None
    try:
        saved = json.loads(state_text)
    except ValueError as e:  # it named neither the file nor that it is JSON
        raise StackError(f"{path / 'state.json'}: not JSON ({e}): a damaged stack image") from None
    if config.get("format") != FORMAT or config.get("version") != VERSION:
        raise StackError(
            f"{path}/stack.toml: format {config.get('format')!r} version {config.get('version')!r}, expected {FORMAT!r} {VERSION}"
        )
    state = _state_from_file(path / "state.json", saved)
    _check_agrees(path, config, state["stack"])
    return config, state


def _check_agrees(path: Path, config: StackFile, stack: HostStack) -> None:
    """StackError unless stack.toml says what the stack in state.json was made with: runs use
    the state's tier, so an edited stack.toml (a larger capacity, another policy or media)
    was ignored by every run while ``--show`` printed its media and policy."""
    made = stack.config()
    fields: list[tuple[str, object, object]] = [
        ("media", config["media"], stack.media()["name"]),
        ("policy", config["policy"], made["policy"]),
    ]
    tier: Mapping[str, object] = config["tier"]
    fields += [(f"[tier] {k}", v, made.get(k, 0)) for k, v in tier.items()]
    for field, says, was in fields:
        if says != was:
            raise StackError(
                f"{path}/stack.toml: {field} = {json.dumps(says)}, but the stack was made with {json.dumps(was)} "
                "(its parameters are fixed when it is made: make a new stack with `ssdtwin stack` to change them)"
            )


def _state_from_file(where: Path, saved: object) -> StackImageState:
    """state.json's parsed JSON, its stack read into a ``HostStack``; its other keys, in their
    order, as they were (what ``save_state`` writes back)."""
    if not isinstance(saved, dict) or "stack" not in saved or "drive_identity" not in saved:
        raise StackError(f"{where}: not a stack image's state (an object with drive_identity and stack)")
    try:
        stack = HostStack.from_state(saved["stack"])
    except ValueError as e:
        raise StackError(f"{where}: {e}") from None
    return cast(StackImageState, {**saved, "stack": stack})


def open_drive(path: Path, config: StackFile, state: StackImageState, writable: bool) -> Drive:
    """The stack's drive, opened; StackError when it is missing or changed underneath."""
    drive = Path(config["drive"])
    if not (drive / "ssdtwin.toml").is_file():
        raise StackError(f"{path}: its drive {drive} is missing")
    d = Drive.open(drive, writable=writable)
    try:
        now = identity(d)
        if now != state["drive_identity"]:
            # The identity is the whole drive's, not the stack namespace's: another
            # namespace's writes make GC move this one's data (its map checksums change
            # though its contents do not) and would enter the drive WAF the stack measures
            # over its runs (drive_waf: the vendor logs from its making to its last run).
            raise StackError(
                f"{path}: its drive {drive} changed since the stack last ran on it ({_what_changed(state['drive_identity'], now)} "
                "on any namespace, without the stack or by a server of the stack that did not stop cleanly); a stack is tied "
                "to its whole drive (the other namespaces' writes make GC move its namespace's data, and its drive WAF spans "
                f"every namespace): make a new stack on {drive}"
            )
        nsid = int(config["namespace"])
        size = int(state["stack"].config()["drive_bytes"])
        ns = next((n for n in d.namespaces() if n.nsid == nsid), None)
        if ns is None or not ns.attached or ns.dram or ns.bytes != size:
            raise StackError(
                f"{path}/stack.toml: namespace = {nsid}, but the stack was made on a {size:,}-byte NAND namespace "
                f"and {drive}'s namespace {nsid} is "
                + ("missing" if ns is None else "detached" if not ns.attached else "in DRAM" if ns.dram else f"{ns.bytes:,} bytes")
            )
    except BaseException:
        d.close()
        raise
    return d


def _what_changed(before: Optional[DriveIdentity], after: DriveIdentity) -> str:
    """What moved the drive past a stack's recorded identity, from its FTL counters."""
    if before is None:
        return "no identity recorded"
    was, now = before["counters"], after["counters"]
    written = int(now["host_write_bytes"]) - int(was["host_write_bytes"])
    trimmed = int(now["host_trim_ius"]) - int(was["host_trim_ius"])
    if written < 0 or trimmed < 0:
        return "formatted or sanitized"
    said = ([f"{si_bytes(written)} written"] if written else []) + ([f"{trimmed} IUs trimmed"] if trimmed else [])
    return ", ".join(said) if said else "its mapping changed: formatted, sanitized or garbage-collected"


def run_fio(
    d: Drive,
    config: StackFile,
    state: StackImageState,
    files: Union[PathLike, Sequence[PathLike]],
    *,
    run_seed: int = 0,
    idle_gc: bool = True,
    progress: Optional[Any] = None,
    cmdline: Sequence[str] = (),
    notes: Optional[Callable[[str], None]] = None,
    log_dir: Optional[Path] = None,
) -> tuple[Run, list[CloneOut], StackImageState]:
    """fio job files through the stack on ``d`` (its drive, opened writable); returns (parsed
    run, results, the new state). The caller commits the drive, then saves the state. With
    ``log_dir``, the run's log files are checked to be writable there first."""
    from .fio.parser import parse
    from .fio.run import fio_notes, log_file_problems

    nsid = int(config["namespace"])
    run = parse(files, run_seed=run_seed, cmdline=tuple(cmdline))
    if log_dir is not None:
        log_file_problems(run, log_dir)
    if notes is not None:
        for note in fio_notes(run):
            notes(note)
    results, new_state = run_parsed(d, state, run, nsid, idle_gc, progress)
    new_state["drive_identity"] = identity(d)
    return run, results, new_state


def save_state(path: Path, state: StackImageState) -> None:
    """The stack image's state.json: ``state`` with the stack in JSON's data model."""
    saved: StackImageFile = {**state, "stack": state["stack"].to_state()}
    _write_atomic(path / "state.json", json.dumps(saved))


def counters(config: StackFile, state: StackImageState) -> dict[str, Any]:
    """The stack's counters and ratios (docs/host.md, "Counters"): one flat row, the tier's
    counters and the drive's WAF keys (``waf.keys``) among them."""
    stack = state["stack"]
    c = stack.counters()
    totals = state.get("drive_totals") or _zero_totals()
    host = c["host_write_bytes"]
    sizes = stack.summary()
    to_drive = sizes["drive_write_bytes"]
    writes_to_tier = c["tier_write_bytes"]
    reads = c["host_read_bytes"]

    def ratio(a: float, b: float) -> Optional[float]:
        return a / b if b else None

    # The drive's ratio over the stack's runs is its WAF only when they span a GC cycle or a
    # namespace pass (docs/models.md, "Measuring WAF"); so is the end-to-end one, which
    # carries it. Otherwise both are null and their window ratios are kept beside them.
    m = drive_waf(config, state)
    steady = m is not None and m["verdict"] == "steady"
    drive_raw = ratio(totals["drive_nand_write_bytes"], totals["drive_host_write_bytes"])
    end_to_end_raw = ratio(totals["drive_nand_write_bytes"], host)
    return {
        "media": config["media"],
        "policy": config["policy"],
        "capacity_bytes": stack.config()["capacity_bytes"],
        "user_bytes": sizes["user_bytes"],
        "resident_bytes": sizes["resident_bytes"],
        **c,
        "stack_drive_write_bytes": to_drive,
        "tier_write_hit_rate": ratio(c["overwrite_hit_bytes"], writes_to_tier),
        "tier_read_hit_rate": ratio(c["read_hit_bytes"], reads),
        # Bytes the stack sent to the drive per host byte (< 1 when the tier absorbs
        # overwrites; > 1 with host GC).
        "tier_waf": ratio(to_drive, host),
        "drive_host_write_bytes": totals["drive_host_write_bytes"],
        "drive_nand_write_bytes": totals["drive_nand_write_bytes"],
        "drive_waf": drive_raw if steady else None,
        "drive_waf_window_raw": drive_raw,
        **wafm.keys(m, "drive_waf"),
        # NAND bytes per host byte, over the stack's runs (the drive's vendor-log counter).
        "end_to_end_waf": end_to_end_raw if steady else None,
        "end_to_end_waf_window_raw": end_to_end_raw,
    }


def new_state(media: str, tier: TierConfig) -> StackImageState:
    """A fresh stack state (no image): for studies that run stacks in memory."""
    return {"drive_identity": None, "drive_totals": _zero_totals(), "stack": _core.stack_new(media, tier)}


def tier_params(d: Drive, policy: Policy, capacity_bytes: int, nsid: int = 1) -> TierConfig:
    """The tier parameters `create` would choose for ``d``'s namespace ``nsid`` (NvmeError
    INVALID_NS if there is none)."""
    ns = d.nvme.namespace(nsid)
    iu = d.vendor_log()["iu_bytes"]
    stripe = max(DEFAULTS["stripe_bytes"], iu)
    return {
        "high_watermark_pct": DEFAULTS["high_watermark_pct"],
        "low_watermark_pct": DEFAULTS["low_watermark_pct"],
        "destage_concurrency": DEFAULTS["destage_concurrency"],
        "stripe_bytes": stripe,
        "host_op_pct": DEFAULTS["host_op_pct"],
        "band_bytes": default_band_bytes(ns.bytes, stripe, iu, DEFAULTS["host_op_pct"]),
        "policy": policy,
        "capacity_bytes": capacity_bytes,
        "iu_bytes": iu,
        "drive_bytes": ns.bytes,
    }


def run_parsed(
    d: Drive, state: StackImageState, run: Any, nsid: int = 1, idle_gc: bool = True, progress: Optional[Any] = None
) -> tuple[list[CloneOut], StackImageState]:
    """A parsed fio run through the stack ``state`` on ``d`` (in memory or opened); returns
    (results, the new state: the same stack, advanced in place, and the drive's new totals).
    A run that stops on an error leaves the stack unusable."""
    stack = state["stack"]
    user_bytes = stack.summary()["user_bytes"]
    ns = d.nvme.namespace(nsid)  # NvmeError INVALID_NS if there is none
    link = int(d.spec()["timing"]["host_link_bytes_per_s"]["value"])
    # Every attached namespace, so that a job naming another one is told the stack is on
    # `nsid` only (the engine's check), not that the namespace "does not exist".
    others = [n for n in d.namespaces() if n.attached and n.nsid != nsid]
    specs = run.to_engine(
        user_bytes,
        ns.lba_bytes,
        namespace_sizes={nsid: user_bytes, **{n.nsid: n.bytes for n in others}},
        namespace_lba_bytes={nsid: ns.lba_bytes, **{n.nsid: n.lba_bytes for n in others}},
        link_bytes_per_s=link,
        io_unit=(4096, "4096-byte block a host stack maps"),  # host/tier.rs maps 4 KiB blocks (docs/host.md)
    )
    before = d.vendor_log()
    results = d.run_fio_stack(specs, stack, nsid, idle_gc, progress)
    after = d.vendor_log()
    attached = sum(n.bytes for n in d.namespaces() if n.attached)
    totals = add_totals(
        state,
        after["host_write_bytes"] - before["host_write_bytes"],
        after["nand_write_bytes"] - before["nand_write_bytes"],
        after,
        attached,
    )
    return results, {"drive_identity": state.get("drive_identity"), "drive_totals": totals, "stack": stack}
