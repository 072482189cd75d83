"""Type stubs of the compiled module ``ssdtwin._core`` (crates/ssdtwin-py/src/lib.rs).

Checked against the build by ``python -m mypy.stubtest ssdtwin._core`` (``make test``).
Dicts are the core's serde structures converted by pythonize (structs and maps become dicts,
sequences lists, fixed-length arrays tuples). Where a TypedDict names one (fio/contract.py,
core_types.py), tests/test_binding_types.py checks it against the Rust structure; the keys of
the rest are documented in docs/cli.md (the JSON outputs of the CLI are exactly these dicts).
"""

from collections.abc import Sequence
from os import PathLike
from pathlib import Path
from typing import Any, Callable, Literal, Optional, Union, final

from ssdtwin.core_types import (
    AnaLog,
    ClusterInitOptions,
    ClusterRun,
    EnduranceGroupLog,
    ErrorLogEntry,
    FtlFingerprint,
    FtlInfo,
    IdCtrl,
    IdNs,
    LayoutInfo,
    LbaStatus,
    LiveSnapshot,
    Manifest,
    MediaSpec,
    NamespaceRow,
    NvmSetList,
    PlmSet,
    PreconditionReport,
    PreconditionTouches,
    PredLatEventAgg,
    PredLatLog,
    QosRow,
    ReadSummary,
    Recovery,
    RmwReport,
    SanitizeLog,
    SanitizeTimes,
    ServeInfo,
    SmartLog,
    StackFile,
    StackState,
    StackSummary,
    StoppedSummary,
    TierConfig,
    TierCounters,
    VendorLog,
    WafMeasurement,
)
from ssdtwin.fio.contract import CloneOut, ConvergeOut, ConvergeRule, FioFacts, JobSpec, TracePlan, TraceSummary

__all__ = [
    "__version__",
    "CALIBRATABLE",
    "WAF_MIN_GC_CYCLES",
    "WAF_MIN_NAMESPACE_PASSES",
    "WAF_MAX_BUFFER_SHARE",
    "Drive",
    "DriveView",
    "HostStack",
    "read_live_snapshot",
    "presets",
    "parse_size",
    "stack_new",
    "fio_facts",
    "fio_first_draw",
    "fio_latency_slot",
    "splitmix",
    "stack_toml",
    "media_presets",
    "parse_spec",
    "preset",
    "waf_greedy",
    "waf_measurement",
    "serve",
    "cluster_init",
    "cluster_spec",
    "cluster_field_ranges",
    "cluster_info",
    "cluster_run",
    "rmw_rate",
    "SsdtwinError",
    "NvmeError",
    "ImageError",
    "SpecError",
    "EngineError",
    "TraceError",
    "trace_scan",
    "trace_load",
    "blktrace_merge",
    "replay_trace",
]

__version__: str
CALIBRATABLE: tuple[str, ...]
WAF_MIN_GC_CYCLES: float
WAF_MIN_NAMESPACE_PASSES: float
WAF_MAX_BUFFER_SHARE: float

class SsdtwinError(Exception):
    """Base class of ssdtwin errors."""

class NvmeError(SsdtwinError):
    """A command completed with an NVMe error status.

    Instances carry ``status`` (nvme-cli's name, e.g. ``"NS_INSUFFICIENT_CAPACITY"``),
    ``code`` (the status field with DNR, e.g. ``0x4115``) and ``detail`` (what was wrong);
    they are set when the error is raised, so read them with ``getattr``.
    """

class ImageError(SsdtwinError):
    """A drive image could not be read or written."""

class SpecError(SsdtwinError):
    """A drive spec or preset is invalid."""

class EngineError(SsdtwinError):
    """A workload cannot run on this drive."""

class TraceError(SsdtwinError):
    """A trace file that cannot be replayed.

    Instances carry ``line`` (or None), ``place`` (a binary record, or ''), ``field``,
    ``value`` and ``reason``; they are set when the error is raised, so read them with
    ``getattr``.
    """

_Path = Union[str, PathLike[str]]

@final
class Drive:
    """An open drive: an image on disk, or a drive held only in memory."""

    @staticmethod
    def create(
        path: _Path,
        preset: Optional[str] = None,
        scale: int = 1,
        seed: int = 1,
        spec_toml: Optional[str] = None,
        nvm_sets: Optional[int] = None,
        partitions: Optional[int] = None,
    ) -> Drive: ...
    @staticmethod
    def open(path: _Path, writable: bool = True, repair: bool = False) -> Drive: ...
    @staticmethod
    def in_memory(
        preset: Optional[str] = None,
        scale: int = 1,
        seed: int = 1,
        spec_toml: Optional[str] = None,
        nvm_sets: Optional[int] = None,
        partitions: Optional[int] = None,
    ) -> Drive: ...
    @property
    def path(self) -> Optional[Path]: ...
    def commit(self) -> None: ...
    def close(self) -> None: ...
    def manifest(self) -> Manifest: ...
    def recovery(self) -> Optional[Recovery]: ...
    def ftl_fingerprint(self) -> FtlFingerprint: ...
    def generation(self) -> int: ...
    def spec_toml(self) -> str: ...
    def id_ctrl(self) -> IdCtrl: ...
    def id_ns(self, nsid: int) -> IdNs: ...
    def list_ns(self) -> list[NamespaceRow]: ...
    def namespace(self, nsid: int) -> NamespaceRow: ...
    def lba_format_index(self, block_bytes: int) -> int: ...
    def view(self) -> DriveView: ...
    def create_ns(self, nsze: int, ncap: int, flbas: int = 0, nmic: int = 0, dram: bool = False, nvmsetid: int = 0) -> int: ...
    def set_qos(self, nsid: int, read_bytes_per_s: int, write_bytes_per_s: int, iops: int) -> None: ...
    def qos(self) -> list[QosRow]: ...
    def set_sq_priority(self, nsid: int, cls: int) -> None: ...
    def delete_ns(self, nsid: int) -> None: ...
    def attach_ns(self, nsid: int, controllers: list[int]) -> None: ...
    def detach_ns(self, nsid: int, controllers: list[int]) -> None: ...
    def format(self, nsid: int, lbaf: int = 0, ses: int = 0, pi: int = 0, pil: bool = False, ms: bool = False) -> None: ...
    def inject_pi_error(self, nsid: int, lba: int, tags: int) -> None: ...
    def check_pi(self, nsid: int, slba: int, nlb: int, prchk: int) -> None: ...
    def get_feature(self, fid: int, nsid: int = 0, cdw11: int = 0, sel: int = 0) -> int: ...
    def set_feature(self, fid: int, value: int, nsid: int = 0, cdw12: int = 0, save: bool = False) -> None: ...
    def pred_lat_log(self, nvmsetid: int) -> PredLatLog: ...
    def pred_lat_event_agg(self) -> PredLatEventAgg: ...
    def plm_state(self) -> list[PlmSet]: ...
    def set_ana_state(self, grpid: int, state: str) -> None: ...
    def ana_log(self) -> AnaLog: ...
    def inject_media_error(self, nsid: int, slba: int, nlb: int) -> None: ...
    def get_lba_status(self, nsid: int, slba: int, mndw: int, atype: int, rl: int) -> LbaStatus: ...
    def smart_log(self) -> SmartLog: ...
    def id_nvmset(self, nvmsetid: int = 0) -> NvmSetList: ...
    def endurance_log(self, endgid: int) -> EnduranceGroupLog: ...
    def vendor_log(self) -> VendorLog: ...
    def power_cycle(self, unsafe_shutdown: bool = False) -> None: ...
    def sanitize(
        self, sanact: int, ause: bool = False, owpass: int = 0, oipbp: bool = False, no_dealloc: bool = False, ovrpat: int = 0
    ) -> None: ...
    def wait_sanitize(self) -> int: ...
    def sanitize_times(self, ps: int) -> Optional[SanitizeTimes]: ...
    def next_seed(self) -> int: ...
    def write(self, nsid: int, slba: int, nlb: int) -> None: ...
    def read(self, nsid: int, slba: int, nlb: int) -> ReadSummary: ...
    def deallocate(self, nsid: int, slba: int, nlb: int) -> int: ...
    def set_fast_forward_threads(self, threads: int) -> None: ...
    def precondition(
        self,
        nsid: int,
        pattern: str,
        block_bytes: int,
        amount_bytes: int,
        seed: int,
        progress: Optional[Callable[[int, int, str, int], object]] = None,
    ) -> PreconditionReport: ...
    def precondition_touches(
        self,
        nsid: int,
        pattern: str,
        block_bytes: int,
        amount_bytes: int,
        seed: int,
        progress: Optional[Callable[[int, int, str, int], object]] = None,
    ) -> PreconditionTouches: ...
    def run_fio(
        self,
        specs: Sequence[JobSpec],
        default_nsid: int = 1,
        idle_gc: bool = True,
        progress: Optional[Callable[[int, int, str, int], object]] = None,
        timing_toml: Optional[str] = None,
    ) -> list[CloneOut]: ...
    def run_fio_converging(
        self,
        specs: Sequence[JobSpec],
        rule: ConvergeRule,
        default_nsid: int = 1,
        idle_gc: bool = True,
        progress: Optional[Callable[[int, int, str, int], object]] = None,
    ) -> tuple[list[CloneOut], ConvergeOut]: ...
    def run_fio_stack(
        self,
        specs: Sequence[JobSpec],
        default_nsid: int,
        idle_gc: bool,
        progress: Optional[Callable[[int, int, str, int], object]],
        stack: HostStack,
    ) -> list[CloneOut]: ...
    def idle(self, ns: int) -> int: ...
    def check(self) -> None: ...
    def ftl_info(self) -> FtlInfo: ...

@final
class DriveView:
    """Identify data, namespaces and logs: from ``Drive.view()`` or a server's live.json."""

    def id_ctrl(self) -> IdCtrl: ...
    def id_ns(self, nsid: int) -> IdNs: ...
    def identify_ns(self, nsid: int, allocated: bool = False) -> IdNs: ...
    def list_ns(self) -> list[NamespaceRow]: ...
    def smart_log(self) -> SmartLog: ...
    def vendor_log(self) -> VendorLog: ...
    def id_nvmset(self, nvmsetid: int = 0) -> NvmSetList: ...
    def endurance_log(self, endgid: int) -> EnduranceGroupLog: ...
    def error_log(self) -> list[ErrorLogEntry]: ...
    def sanitize_log(self) -> SanitizeLog: ...
    def log_page(self, lid: int, length: int) -> bytes: ...
    def identify(self, cns: int, nsid: int = 0) -> bytes: ...

@final
class HostStack:
    """A host stack (fast media and the tier on it), kept in Rust between runs:
    ``Drive.run_fio_stack`` advances it in place; ``to_state``/``from_state`` convert it to
    and from state.json's ``stack`` (docs/host.md)."""

    def to_state(self) -> StackState: ...
    @staticmethod
    def from_state(state: StackState) -> HostStack: ...
    def summary(self) -> StackSummary: ...
    def counters(self) -> TierCounters: ...
    def config(self) -> TierConfig: ...
    def media(self) -> MediaSpec: ...

def read_live_snapshot(path: _Path) -> Optional[tuple[LiveSnapshot, DriveView]]: ...
def parse_size(text: str) -> int: ...
def stack_new(media: str, config: TierConfig, names: Optional[dict[str, str]] = None) -> HostStack: ...
def fio_facts() -> FioFacts: ...
def fio_first_draw(seed: int, use64: bool) -> tuple[int, int]: ...
def fio_latency_slot(clat_ns: int) -> tuple[Literal["ns", "us", "ms"], int]: ...
def splitmix(x: int) -> int: ...
def trace_scan(path: _Path, shown: str, plan: TracePlan, progress: Optional[Callable[[int], object]] = None) -> TraceSummary: ...
def trace_load(path: _Path, shown: str, plan: TracePlan, max_ios: int) -> tuple[bytes, TraceSummary]: ...
def blktrace_merge(inputs: Sequence[tuple[_Path, str]], scalars: Sequence[int], iters: Sequence[int], out: _Path) -> int: ...
def replay_trace(
    drive: Drive,
    path: _Path,
    shown: str,
    plan: TracePlan,
    spec: JobSpec,
    default_nsid: int = 1,
    idle_gc: bool = True,
    progress: Optional[Callable[[int, int], object]] = None,
) -> CloneOut: ...
def media_presets() -> list[MediaSpec]: ...
def stack_toml(text: str, origin: str) -> StackFile: ...
def presets() -> list[tuple[str, str]]: ...
def parse_spec(text: str, origin: str = "spec") -> dict[str, Any]: ...
def preset(name: str) -> dict[str, Any]: ...
def waf_greedy(alpha: float, units_per_block: Optional[float] = None) -> float: ...
def waf_measurement(before: VendorLog, after: VendorLog, basis: str, namespace_bytes: int) -> WafMeasurement: ...
def serve(
    path: _Path,
    tcp: list[str] = ...,
    unix: list[_Path] = ...,
    metrics: Optional[str] = None,
    pace: str = "model",
    spin_us: int = 0,
    ready: Optional[Callable[[ServeInfo], object]] = None,
    max_connections: int = 0,
    max_inflight_bytes: int = 0,
    handshake_timeout_s: Optional[float] = None,
    send_timeout_s: Optional[float] = None,
    tls: str = "off",
    tls_certificates: Optional[_Path] = None,
    tls_verify_peer: bool = False,
    unix_group: Optional[str] = None,
    stack: Optional[HostStack] = None,
    stack_nsid: int = 1,
    idle_gc: bool = True,
) -> StoppedSummary: ...
def cluster_init(options: ClusterInitOptions) -> str: ...
def cluster_spec(text: str, origin: str = "cluster.toml") -> dict[str, Any]: ...
def cluster_info(text: str, origin: str = "cluster.toml") -> LayoutInfo: ...
def cluster_field_ranges() -> dict[str, tuple[int, int]]: ...
def cluster_run(
    text: str,
    specs: Sequence[JobSpec],
    progress: Optional[Callable[[int, int, str, int], object]] = None,
    origin: str = "cluster.toml",
) -> ClusterRun: ...
def rmw_rate(array_bytes: int, ops: int, inflight: int = 32, seed: int = 1, threads: int = 1) -> RmwReport: ...
