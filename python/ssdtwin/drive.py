"""The Python API: a drive image and its NVMe controller.

Mirrors the CLI: ``Drive.create(...)``, ``drive.nvme.create_ns(...)``,
``drive.precondition(...)``, ``drive.smart_log()``. Everything heavy runs in the Rust
core with the GIL released; this module only shapes arguments and results.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import math
import numbers
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from . import _core
from ._bounds import ArgumentRangeError, names_out_of_range
from ._core import HostStack, ImageError, NvmeError, SpecError, SsdtwinError
from .core_types import (
    AnaLog,
    EnduranceGroupLog,
    FtlFingerprint,
    FtlInfo,
    IdCtrl,
    IdNs,
    LbaStatus,
    Manifest,
    NvmSetList,
    PlmSet,
    PredLatEventAgg,
    PredLatLog,
    QosRow,
    ReadSummary,
    Recovery,
    SanitizeTimes,
    SmartLog,
    VendorLog,
)

if TYPE_CHECKING:  # the fio package is imported when a run needs it
    from .fio.contract import CloneOut, ConvergeOut, ConvergeRule, JobSpec, TracePlan

__all__ = [
    "Drive",
    "Nvme",
    "Namespace",
    "PreconditionReport",
    "SsdtwinError",
    "NvmeError",
    "ImageError",
    "SpecError",
    "ArgumentRangeError",
    "parse_scale",
    "parse_amount",
]

PathLike = Union[str, "os.PathLike[str]"]
IDLE_MAX_S = 200 * 86400  # the engine's longest run (engine/fio.rs MAX_RUN_NS)


# The core takes the scale as a u32 (a larger N leaves no drive: the core's own check then
# says how few superblocks it would have).
MAX_SCALE = 0xFFFF_FFFF


def parse_scale(text: Union[str, int]) -> int:
    """``"1/64"`` or ``64`` → 64; ``"1"`` → 1."""
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise TypeError(f"scale {text!r}: use 1/N (a string such as '1/64') or the int N")
    if isinstance(text, int):
        n = text
    else:
        t = text.strip()
        if t.startswith("1/"):
            t = t[2:]
        try:
            if "_" in t:  # int() takes Python's digit separators (1/6_4 for 1/64): no scale does
                raise ValueError(t)
            n = int(t)
        except ValueError:
            raise ValueError(f"scale '{text}': use 1/N with N a positive integer (e.g. 1/64)") from None
    if n < 1:
        raise ValueError(f"scale '{text}': N must be at least 1")
    if n > MAX_SCALE:
        raise ValueError(f"scale '{text}': N must be at most {MAX_SCALE}")
    return n


#: How errors name the scale: the Python API's keyword (``scale=64``); the CLI sets
#: ``"--scale"`` (``--scale 1/64``).
SCALE_NAME = "scale"


def _scale_named(e: SpecError, given: Union[str, int], n: int) -> SpecError:
    """The core's error on a scale it cannot build (``scale 1/N: too small ...``), naming the
    scale as the caller gave it."""
    msg = str(e)
    for prefix in (f"scale 1/{n}: ", f"--scale 1/{n}: "):
        if msg.startswith(prefix):
            name = f"--scale 1/{n}" if SCALE_NAME == "--scale" else f"{SCALE_NAME}={given!r}"
            return SpecError(f"{name}: {msg[len(prefix) :]}")
    return e


def parse_amount(text: str, capacity_bytes: int) -> int:
    """``"2x"`` → twice the capacity; otherwise a size (``"300GiB"``, ``"1TB"``)."""
    t = text.strip()
    if t.lower().endswith("x"):
        try:
            factor = float(t[:-1])
        except ValueError:
            raise ValueError(f"amount '{text}': use e.g. 2x or a size such as 300GiB") from None
        if not factor > 0:
            raise ValueError(f"amount '{text}': must be positive")
        if not math.isfinite(factor):
            raise ValueError(f"amount '{text}': must be finite")
        amount = factor * capacity_bytes
        if not math.isfinite(amount):  # 1e300x: int(inf) raised OverflowError
            raise ValueError(f"amount '{text}': {factor} x {capacity_bytes} bytes is more than 2^64 bytes")
        return int(round(amount))
    return _core.parse_size(t)


#: NVMe submission-queue priority classes (QPRIO 0..3).
SQ_PRIORITIES = ("urgent", "high", "medium", "low")


@dataclass(frozen=True)
class Namespace:
    nsid: int
    nsze: int
    ncap: int
    nuse: int
    lba_bytes: int
    flbas: int
    attached: bool
    write_protect: int
    nmic: int
    bytes: int
    #: A DRAM namespace (no NAND behind it).
    dram: bool = False
    #: Its NVM Set (= Endurance Group); 0 on a drive without sets and for a DRAM namespace.
    nvmsetid: int = 0
    #: Metadata bytes per block and protection information type (0: none) of its format.
    ms: int = 0
    pi: int = 0


@dataclass(frozen=True)
class PreconditionReport:
    nsid: int
    pattern: str
    block_bytes: int
    seed: int
    host_bytes: int
    ios: int
    nand_bytes: int
    waf: float
    interrupted: bool


@names_out_of_range
class Nvme:
    """nvme-cli verbs against one drive (admin commands)."""

    def __init__(self, core: _core.Drive) -> None:
        self._core = core

    def id_ctrl(self) -> IdCtrl:
        return self._core.id_ctrl()

    def id_ns(self, nsid: int) -> IdNs:
        return self._core.id_ns(nsid)

    def list(self) -> list[Namespace]:
        return [Namespace(**row) for row in self._core.list_ns()]

    def create_ns(
        self,
        nsze: int,
        ncap: Optional[int] = None,
        flbas: int = 0,
        nmic: int = 0,
        block_size: Optional[int] = None,
        dram: bool = False,
        nvmsetid: int = 0,
    ) -> int:
        """Namespace Management create; ``block_size`` picks the LBA format by size; ``dram``
        makes a DRAM namespace (within the preset's DRAM budget, no NAND behind it);
        ``nvmsetid`` places it in that NVM Set (0: the controller picks the first with room)."""
        if block_size is not None:
            flbas = self.lba_format_index(block_size)
        return self._core.create_ns(nsze, nsze if ncap is None else ncap, flbas, nmic, dram, nvmsetid)

    def id_nvmset(self, nvmsetid: int = 0) -> NvmSetList:
        """Identify CNS 04h: the NVM Set List from ``nvmsetid`` on (0: every set)."""
        return self._core.id_nvmset(nvmsetid)

    def endurance_log(self, endgid: int) -> EnduranceGroupLog:
        """Log page 09h: the Endurance Group Information log of group ``endgid``."""
        return self._core.endurance_log(endgid)

    def lba_sizes(self) -> builtins.list[int]:
        """The drive's LBA formats: data size in bytes, by format index (FLBAS)."""
        sizes: builtins.list[int] = _core.parse_spec(self._core.spec_toml())["capacity"]["lba_bytes"]["value"]
        return sizes

    def lba_format_index(self, block_size: int) -> int:
        """The LBA format (FLBAS) of ``block_size`` bytes; NvmeError INVALID_FORMAT if none."""
        return self._core.lba_format_index(block_size)

    def namespace(self, nsid: int) -> Namespace:
        """One namespace's row of :meth:`list`; NvmeError INVALID_NS if there is none."""
        return Namespace(**self._core.namespace(nsid))

    def delete_ns(self, nsid: int) -> None:
        self._core.delete_ns(nsid)

    def attach_ns(self, nsid: int, controllers: Optional[builtins.list[int]] = None) -> None:
        """Namespace Attachment (attach) to ``controllers`` (None: controller 1, the drive's
        only one). An empty list is sent as it is, as nvme-cli sends `-c ''`, and the
        drive refuses it: NvmeError CTRL_LIST_INVALID."""
        self._core.attach_ns(nsid, [1] if controllers is None else controllers)

    def detach_ns(self, nsid: int, controllers: Optional[builtins.list[int]] = None) -> None:
        """Namespace Attachment (detach) from ``controllers``, as :meth:`attach_ns`."""
        self._core.detach_ns(nsid, [1] if controllers is None else controllers)

    def format(self, nsid: int, lbaf: int = 0, ses: int = 0, pi: int = 0, pil: bool = False, ms: bool = False) -> None:
        """Format NVM: LBA format ``lbaf``, secure erase ``ses``, protection information type
        ``pi`` (0 none, 1-3) in the first (``pil``) or last 8 bytes of the metadata, metadata
        at the end of each LBA (``ms``, extended) or in a separate buffer."""
        self._core.format(nsid, lbaf, ses, pi, pil, ms)

    def inject_pi_error(self, nsid: int, lba: int, tags: int) -> None:
        """Vendor error injection: the stored PI of ``lba`` fails the tags in ``tags`` (PRCHK
        bits: 4 guard, 2 application tag, 1 reference tag) until the LBA is written again."""
        self._core.inject_pi_error(nsid, lba, tags)

    def check_pi(self, nsid: int, slba: int, nlb: int, prchk: int = 7) -> None:
        """The end-to-end check of a read of ``nlb`` blocks at ``slba`` with PRCHK ``prchk``:
        raises the NVMe status (GUARD_CHECK, APPTAG_CHECK, REFTAG_CHECK) of the first bad LBA,
        after the read's own checks (INVALID_NS, LBA_RANGE; INVALID_FIELD for a ``prchk``
        outside 0..=7)."""
        self._core.check_pi(nsid, slba, nlb, prchk)

    def get_feature(self, fid: int, nsid: int = 0, cdw11: int = 0, sel: int = 0) -> int:
        """Get Features; ``cdw11`` is the NVM Set of 0x13/0x14 (Predictable Latency Mode),
        ``sel`` the Select field: 0 current, 1 default, 2 saved, 3 supported capabilities."""
        return self._core.get_feature(fid, nsid, cdw11, sel)

    def set_feature(self, fid: int, value: int, nsid: int = 0, cdw12: int = 0, save: bool = False) -> None:
        """Set Features: ``value`` is CDW11 (the NVM Set of 0x13/0x14), ``cdw12`` the value
        of 0x13 (1: enable Predictable Latency Mode) and 0x14 (1 DTWIN, 2 NDWIN); ``save``
        is SV: the value is also saved, and a power cycle restores it (FEATURE_NOT_SAVEABLE
        for a feature that is not saveable)."""
        self._core.set_feature(fid, value, nsid, cdw12, save)

    def pred_lat_log(self, nvmsetid: int) -> PredLatLog:
        """Log page 0Ah: Predictable Latency Per NVM Set (nvme-cli's JSON names)."""
        return self._core.pred_lat_log(nvmsetid)

    def plm_state(self) -> builtins.list[PlmSet]:
        """Every NVM Set's Predictable Latency Mode state (vendor view: window, since_ns,
        last_dtwin_ns, ended_by …; empty if never enabled)."""
        return self._core.plm_state()

    def set_ana_state(self, grpid: int, state: str) -> None:
        """The vendor ANA command: put group ``grpid`` (= the NSID of its namespace) in
        ``state`` (optimized, non-optimized, inaccessible, persistent-loss, change, or its
        number); NvmeError INVALID_FIELD for any other."""
        self._core.set_ana_state(grpid, state)

    def ana_log(self) -> AnaLog:
        """Log page 0Ch: every ANA group's state and namespaces (nvme-cli's JSON names)."""
        return self._core.ana_log()

    def inject_media_error(self, nsid: int, slba: int, nlb: int) -> None:
        """Vendor command: ``nlb`` blocks at ``slba`` of namespace ``nsid`` become
        unrecoverable (reads fail with READ_ERROR until they are written again)."""
        self._core.inject_media_error(nsid, slba, nlb)

    def get_lba_status(self, nsid: int, slba: int = 0, mndw: int = 0xFFFF, atype: int = 0x11, rl: int = 0) -> LbaStatus:
        """Get LBA Status (rebuild assist): ``{nlsd, cmpc, descs: [{dslba, nlb}]}``."""
        return self._core.get_lba_status(nsid, slba, mndw, atype, rl)

    def pred_lat_event_agg(self) -> PredLatEventAgg:
        """Log page 0Bh: the NVM Sets with Predictable Latency events."""
        return self._core.pred_lat_event_agg()

    def set_qos(self, nsid: int, read_bytes_per_s: int = 0, write_bytes_per_s: int = 0, iops: int = 0) -> None:
        """The vendor QoS command: cap namespace ``nsid`` (0 = no cap; all 0 clears its caps)."""
        self._core.set_qos(nsid, read_bytes_per_s, write_bytes_per_s, iops)

    def qos(self) -> builtins.list[QosRow]:
        """Every namespace's QoS caps: ``{nsid, read_bytes_per_s, write_bytes_per_s, iops,
        sq_priority}``."""
        return self._core.qos()

    def set_sq_priority(self, nsid: int, cls: str) -> None:
        """The priority class of namespace ``nsid``'s submission queues: urgent, high,
        medium or low (what weighted round robin arbitration sorts by)."""
        if cls not in SQ_PRIORITIES:  # was the core's "queue priority 255: ...", a number never given
            raise ValueError(f"cls {cls!r}: one of {', '.join(SQ_PRIORITIES)}")
        self._core.set_sq_priority(nsid, SQ_PRIORITIES.index(cls))

    def smart_log(self) -> SmartLog:
        return self._core.smart_log()

    def vendor_log(self) -> VendorLog:
        return self._core.vendor_log()

    def sanitize(
        self, sanact: int, ause: bool = False, owpass: int = 0, oipbp: bool = False, no_dealloc: bool = False, ovrpat: int = 0
    ) -> None:
        """The Sanitize command (2 block erase, 3 overwrite, 4 crypto erase; 1 exit failure
        mode). Every mapping and every namespace's served data goes at once; the operation
        then runs on the drive's clock, refusing I/O until it ends (docs/cli.md)."""
        self._core.sanitize(sanact, ause, owpass, oipbp, no_dealloc, ovrpat)

    def wait_sanitize(self) -> int:
        """Run the drive (idle) until the sanitize in progress ends; nanoseconds waited."""
        return self._core.wait_sanitize()

    def sanitize_times(self, ps: int = 0) -> Optional[SanitizeTimes]:
        """Sanitize durations (ns) of this drive in power state ``ps``; None without timing."""
        return self._core.sanitize_times(ps)


@names_out_of_range
class Drive:
    """A drive image (or an in-memory drive).

    Changes are committed to the image by :meth:`commit` (or on leaving a ``with`` block
    without an exception); a crash or an exception leaves the last committed state.
    """

    def __init__(self, core: _core.Drive, writable: bool = True) -> None:
        self._core = core
        self.nvme = Nvme(core)
        self.writable = writable
        self._closed = False

    # -- construction -------------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: PathLike,
        model: str,
        scale: Union[str, int] = 1,
        seed: int = 1,
        nvm_sets: Optional[int] = None,
        partitions: Optional[int] = None,
    ) -> Drive:
        """A new image; ``nvm_sets`` builds it with that many NVM Sets (presets with [nvm_sets]),
        ``partitions`` with that many FTL partitions per set (docs/models.md §13)."""
        return cls._create(path, scale, dict(preset=model, seed=seed, nvm_sets=nvm_sets, partitions=partitions))

    @classmethod
    def create_from_spec(
        cls,
        path: PathLike,
        spec_toml: str,
        scale: Union[str, int] = 1,
        seed: int = 1,
        nvm_sets: Optional[int] = None,
        partitions: Optional[int] = None,
    ) -> Drive:
        """`create` from a spec TOML (a preset's text, `ssdtwin models NAME`, edited) instead of a preset name."""
        return cls._create(path, scale, dict(spec_toml=spec_toml, seed=seed, nvm_sets=nvm_sets, partitions=partitions))

    @classmethod
    def _create(cls, path: PathLike, scale: Union[str, int], source: dict[str, Any]) -> Drive:
        """`_core.Drive.create` of a preset or spec (`source`), a scale error naming the
        scale as the caller gave it."""
        n = parse_scale(scale)
        try:
            core = _core.Drive.create(os.fspath(path), scale=n, **source)
        except SpecError as e:
            raise _scale_named(e, scale, n) from None
        return cls(core)

    @classmethod
    def open(cls, path: PathLike, writable: bool = True, repair: bool = False) -> Drive:
        """Open an image. ``repair=True`` (implies writable) replays a damaged command journal up
        to the damage and drops the rest, keeping a copy (see :meth:`recovery`)."""
        writable = writable or repair
        return cls(_core.Drive.open(os.fspath(path), writable=writable, repair=repair), writable=writable)

    @classmethod
    def in_memory(
        cls,
        model: Optional[str] = None,
        scale: Union[str, int] = 1,
        seed: int = 1,
        spec_toml: Optional[str] = None,
        nvm_sets: Optional[int] = None,
        partitions: Optional[int] = None,
    ) -> Drive:
        """A drive held only in memory, from a preset or a spec TOML (no image, no commit);
        ``nvm_sets`` builds it with that many NVM Sets, ``partitions`` with that many FTL
        partitions per set (a power of two, docs/models.md "FTL partitions")."""
        if model is not None and spec_toml is not None:
            raise ValueError("model and spec_toml: give one of them, not both")
        n = parse_scale(scale)
        try:
            core = _core.Drive.in_memory(preset=model, scale=n, seed=seed, spec_toml=spec_toml, nvm_sets=nvm_sets, partitions=partitions)
        except SpecError as e:
            raise _scale_named(e, scale, n) from None
        return cls(core)

    def __enter__(self) -> Drive:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            # A drive closed inside the block has nothing left to commit (close() drops what
            # was not committed), as a file closed inside its ``with`` is fine.
            if exc_type is None and self.path is not None and self.writable and not self._closed:
                self.commit()
        finally:
            self.close()

    # -- image --------------------------------------------------------------------
    @property
    def path(self) -> Optional[Path]:
        p = self._core.path
        return None if p is None else Path(p)

    def commit(self) -> None:
        self._core.commit()  # ImageError if the image was opened read-only

    def close(self) -> None:
        """Release the image (and its lock) without committing; calling it again does nothing."""
        self._core.close()
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def recovery(self) -> Optional[Recovery]:
        """What opening did with a journal left by a killed ``ssdtwin serve`` (None if none)."""
        return self._core.recovery()

    def ftl_fingerprint(self) -> FtlFingerprint:
        """Map checksums and FTL counters: equal fingerprints mean the same FTL state."""
        return self._core.ftl_fingerprint()

    def manifest(self) -> Manifest:
        return self._core.manifest()

    def generation(self) -> int:
        """The committed generation this drive was opened at (or last committed); 0 in memory."""
        return self._core.generation()

    def spec(self) -> dict[str, Any]:
        return _core.parse_spec(self._core.spec_toml())

    def spec_toml(self) -> str:
        return self._core.spec_toml()

    def ftl_info(self) -> FtlInfo:
        return self._core.ftl_info()

    def check(self) -> None:
        """Full FTL consistency check (raises SsdtwinError on a violation). It changes
        nothing, so a Ctrl-C stops it as it walks the maps (KeyboardInterrupt)."""
        self._core.check()

    def next_seed(self) -> int:
        """Draws the next seed of the image's deterministic sequence (a function of the
        image's seed and how many were drawn). Each call consumes one: the count is drive
        state, committed with the image, so the next seeded command given no seed of its own
        (:meth:`precondition`, ``ssdtwin precondition``) gets the seed after this one."""
        return self._core.next_seed()

    def power_cycle(self, unsafe_shutdown: bool = False) -> None:
        self._core.power_cycle(unsafe_shutdown)

    # -- logs (shortcuts) -------------------------------------------------------------
    def smart_log(self) -> SmartLog:
        return self.nvme.smart_log()

    def vendor_log(self) -> VendorLog:
        return self.nvme.vendor_log()

    def namespaces(self) -> list[Namespace]:
        return self.nvme.list()

    def view(self) -> _core.DriveView:
        """Identify data, namespaces and logs in one structure: the one a running server
        publishes in ``live.json`` (``ssdtwin.live``), so either can be shown the same way."""
        return self._core.view()

    def namespaces_frame(self) -> Any:
        """The namespace table as a pandas DataFrame."""
        pd = _pandas()

        return pd.DataFrame([ns.__dict__ for ns in self.namespaces()])

    # -- I/O ----------------------------------------------------------------------------
    def write(self, nsid: int, slba: int, nlb: int) -> None:
        self._core.write(nsid, slba, nlb)

    def read(self, nsid: int, slba: int, nlb: int) -> ReadSummary:
        return self._core.read(nsid, slba, nlb)

    def deallocate(self, nsid: int, slba: int, nlb: int) -> int:
        return self._core.deallocate(nsid, slba, nlb)

    def run_fio_stack(
        self,
        specs: Sequence[JobSpec],
        stack: HostStack,
        nsid: int = 1,
        idle_gc: bool = True,
        progress: Optional[Callable[[int, int, str, int], object]] = None,
    ) -> builtins.list[CloneOut]:
        """``run_fio`` through the host stack ``stack`` (ssdtwin.stack, docs/host.md), which
        advances in place with the drive; returns the per-clone results. A run that stops
        on an error leaves ``stack`` unusable (reload it from its state.json). A stack made for
        another namespace size or IU (``stack.config()``) is refused before the run: it
        placed its writes for that drive (past this namespace's end: LBA_RANGE part way, the
        stack left unusable; on a larger one, silently in the wrong places)."""
        made = stack.config()
        ns = self.nvme.namespace(nsid)  # NvmeError INVALID_NS if there is none
        iu = self.vendor_log()["iu_bytes"]
        if (made["drive_bytes"], made["iu_bytes"]) != (ns.bytes, iu):
            raise ValueError(
                f"stack: made for a {made['drive_bytes']:,}-byte namespace of {made['iu_bytes']}-byte IUs; "
                f"namespace {nsid} here is {ns.bytes:,} bytes of {iu}-byte IUs"
            )
        return self._core.run_fio_stack(specs, nsid, idle_gc, progress, stack)

    def run_fio(
        self,
        specs: Union[Sequence[JobSpec], str],
        nsid: int = 1,
        idle_gc: bool = True,
        progress: Optional[Callable[[int, int, str, int], object]] = None,
        timing_toml: Optional[str] = None,
    ) -> builtins.list[CloneOut]:
        """Run engine-contract job specs (docs/fio.md §3; a list of ``JobSpec``, or its JSON
        text, parsed here) in simulated time; `nsid` is the namespace of jobs that name none.
        Returns the per-clone results (§4, ``CloneOut``: fixed-length arrays such as
        ``iodepth_level`` as tuples)."""
        parsed: Sequence[JobSpec] = json.loads(specs) if isinstance(specs, str) else specs
        return self._core.run_fio(parsed, nsid, idle_gc, progress, timing_toml)

    def replay_trace(
        self,
        path: str,
        shown: str,
        plan: TracePlan,
        spec: JobSpec,
        nsid: int = 1,
        idle_gc: bool = True,
        progress: Optional[Callable[[int, int], object]] = None,
    ) -> CloneOut:
        """Replay the trace file at ``path`` streamed, as the clone ``spec`` (an engine-contract
        job, its generator unused), under ``plan`` (the core's trace plan: format, target,
        limits; docs/traces.md). ``progress(ios_done, now_ns)`` is called now and then and
        may raise. Returns the clone's result (docs/fio.md §4). ``ssdtwin.replay`` builds
        the plan and the spec."""
        return _core.replay_trace(self._core, path, shown, plan, spec, nsid, idle_gc, progress)

    def run_fio_converging(
        self,
        specs: Sequence[JobSpec],
        rule: Optional[ConvergeRule] = None,
        nsid: int = 1,
        idle_gc: bool = True,
        progress: Optional[Callable[[int, int, str, int], object]] = None,
    ) -> tuple[builtins.list[CloneOut], ConvergeOut]:
        """``run_fio``, timing each round only until its figures converge under ``rule``
        (default: the core's, 95 % confidence, intervals within 0.5 %) and carrying the rest
        through the FTL in fast-forward (docs/fio.md, "Converging rounds"). Returns the
        per-clone results and how the run converged (how much was timed, each figure's
        interval); a run the rule does not apply to is timed in full and says why."""
        return self._core.run_fio_converging(specs, rule or {}, nsid, idle_gc, progress)

    def idle(self, seconds: float) -> int:
        """Leave the drive idle for ``seconds`` of simulated time: background GC reclaims
        space while its NAND work fits, and the power-on clock advances. Returns how many
        IUs GC moved (0 when nothing was worth collecting). SNIA's Host Idle Recovery test
        (docs/pts.md) uses it for its wait states."""
        _number("seconds", seconds)
        if not (0 <= seconds <= IDLE_MAX_S):
            raise ValueError(f"idle {seconds} s: must be from 0 to {IDLE_MAX_S} s (200 days, the longest simulated run)")
        return self._core.idle(int(round(seconds * 1e9)))

    def precondition(
        self,
        nsid: int = 1,
        pattern: str = "seq",
        block_bytes: int = 131072,
        amount_bytes: Optional[int] = None,
        loops: Optional[float] = None,
        seed: Optional[int] = None,
        progress: Optional[Callable[[int, int, str, int], object]] = None,
    ) -> PreconditionReport:
        """Write the namespace in fast-forward: ``pattern`` "seq" or "rand", ``block_bytes``
        per write, ``amount_bytes`` in all (or ``loops`` × the namespace size)."""
        ns = self.nvme.namespace(nsid)  # NvmeError INVALID_NS from the core if there is none
        if loops is not None and amount_bytes is not None:  # loops was ignored
            raise ValueError(f"loops {loops} and amount_bytes {amount_bytes}: give one of them, not both")
        if loops is not None:
            _number("loops", loops)
        if loops is not None and not (loops >= 0 and math.isfinite(loops)):
            raise ValueError(f"loops {loops}: a finite number of namespace passes, at least 0")
        if amount_bytes is None:
            amount_bytes = int(round((1.0 if loops is None else loops) * ns.bytes))
            if amount_bytes >= 1 << 64:
                raise ValueError(f"loops {loops}: {loops} x {ns.bytes} bytes is more than 2^64 bytes")
        if not 0 <= amount_bytes < 1 << 64:
            raise ValueError(f"amount_bytes {amount_bytes}: from 0 to 2^64 - 1 bytes")
        if seed is None:
            seed = self.next_seed()
        r = self._core.precondition(nsid, pattern, block_bytes, amount_bytes, seed, progress)
        return PreconditionReport(**r)

    def set_fast_forward_threads(self, threads: int) -> None:
        """Threads fast-forward may use (0, the default: one per core): one per FTL
        partition, or on a drive of one partition, a second that runs the write buffer
        ahead of the maps. The results are the same for every count."""
        self._core.set_fast_forward_threads(threads)

    def precondition_touches(
        self, nsid: int, pattern: str, block_bytes: int, amount_bytes: int, seed: int
    ) -> tuple[PreconditionReport, dict[str, int]]:
        """``precondition`` that also counts the FTL's random map accesses (``ssdtwin bench
        ftl``): the report, and {"host_l2p": programmed host IUs' L2P lines, "gc_checks":
        victim IUs checked through the L2P}. Same drive state as ``precondition``."""
        r = self._core.precondition_touches(nsid, pattern, block_bytes, amount_bytes, seed)
        return PreconditionReport(**r["report"]), {"host_l2p": r["host_l2p"], "gc_checks": r["gc_checks"]}


def _number(name: str, value: object) -> None:
    """TypeError naming ``name`` unless ``value`` is a real number (a str was Python's
    "'>=' not supported between instances of 'str' and 'int'", naming nothing)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy's numbers too
        raise TypeError(f"{name} {value!r}: must be a number, not {type(value).__name__}")


def _values(obj: Any) -> Any:
    """A spec's parameters without their sources: what the drive is built from."""
    if isinstance(obj, dict):
        return {k: _values(v) for k, v in obj.items() if k != "source"}
    if isinstance(obj, list):
        return [_values(v) for v in obj]
    return obj


def spec_digest(spec: dict[str, Any]) -> str:
    """A hash of a spec's parameter values (sources and published corners left out: they
    change no drive): the identity of a preset or spec file in sweep's image cache and rows
    and in a PTS report's ``device.spec``."""
    values = {k: v for k, v in spec.items() if k != "corners"}
    return hashlib.sha256(json.dumps(_values(values), sort_keys=True).encode()).hexdigest()[:16]


def models() -> list[dict[str, Any]]:
    """Every built-in preset as a dict (validated)."""
    return [_core.preset(name) for name, _ in _core.presets()]


def models_frame() -> Any:
    """Built-in presets as a pandas DataFrame (one row each, key numbers only)."""
    pd = _pandas()

    rows = []
    for s in models():
        n = s["nand"]
        dies = n["channels"]["value"] * n["dies_per_channel"]["value"]
        raw = (
            dies * n["planes_per_die"]["value"] * n["blocks_per_plane"]["value"] * n["pages_per_block"]["value"] * n["page_bytes"]["value"]
        )
        rows.append(
            {
                "name": s["drive"]["name"],
                "model": f"{s['drive']['vendor']} {s['drive']['model']}",
                "tnvmcap_bytes": s["capacity"]["tnvmcap_bytes"]["value"],
                "raw_nand_bytes": raw,
                "iu_bytes": s["ftl"]["iu_bytes"]["value"],
                "bits_per_cell": n["bits_per_cell"]["value"],
                "dies": dies,
                "dwpd": s["drive"]["dwpd"]["value"],
            }
        )
    return pd.DataFrame(rows)


def _pandas() -> Any:
    """pandas, which only the DataFrame helpers need (the `frames` extra)."""
    try:
        import pandas
    except ImportError:
        raise ImportError("DataFrames need pandas: pip install 'ssdtwin[frames]'") from None
    return pandas
