"""Type stubs of the compiled module ``ssdtwin._core`` (crates/ssdtwin-py/src/lib.rs).

Checked against the build by ``python -m mypy.stubtest ssdtwin._core`` (``make test``).
Dicts are the core's serde structures converted by pythonize (structs and maps become dicts,
sequences lists, fixed-length arrays tuples); their keys are documented in docs/cli.md (the
JSON outputs of the CLI are exactly these dicts).
"""

from collections.abc import Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any, Callable, Optional, Union, final

__all__ = [
    "__version__",
    "Drive",
    "DriveView",
    "read_live_snapshot",
    "presets",
    "parse_size",
    "parse_spec",
    "preset",
    "waf_greedy",
    "serve",
    "SsdtwinError",
    "NvmeError",
    "ImageError",
    "SpecError",
    "EngineError",
]

__version__: str

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
    ) -> Drive: ...
    @staticmethod
    def open(path: _Path, writable: bool = True, repair: bool = False) -> Drive: ...
    @staticmethod
    def in_memory(
        preset: Optional[str] = None,
        scale: int = 1,
        seed: int = 1,
        spec_toml: Optional[str] = None,
    ) -> Drive: ...
    @property
    def path(self) -> Optional[Path]: ...
    def commit(self) -> None: ...
    def close(self) -> None: ...
    def manifest(self) -> dict[str, Any]: ...
    def recovery(self) -> Optional[dict[str, Any]]: ...
    def ftl_fingerprint(self) -> dict[str, Any]: ...
    def generation(self) -> int: ...
    def spec_toml(self) -> str: ...
    def id_ctrl(self) -> dict[str, Any]: ...
    def id_ns(self, nsid: int) -> dict[str, Any]: ...
    def list_ns(self) -> list[dict[str, Any]]: ...
    def namespace(self, nsid: int) -> dict[str, Any]: ...
    def lba_format_index(self, block_bytes: int) -> int: ...
    def view(self) -> DriveView: ...
    def create_ns(self, nsze: int, ncap: int, flbas: int = 0, nmic: int = 0) -> int: ...
    def delete_ns(self, nsid: int) -> None: ...
    def attach_ns(self, nsid: int, controllers: list[int]) -> None: ...
    def detach_ns(self, nsid: int, controllers: list[int]) -> None: ...
    def format(self, nsid: int, lbaf: int = 0, ses: int = 0) -> None: ...
    def get_feature(self, fid: int, nsid: int = 0) -> int: ...
    def set_feature(self, fid: int, value: int, nsid: int = 0) -> None: ...
    def smart_log(self) -> dict[str, Any]: ...
    def vendor_log(self) -> dict[str, Any]: ...
    def power_cycle(self, unsafe_shutdown: bool = False) -> None: ...
    def next_seed(self) -> int: ...
    def write(self, nsid: int, slba: int, nlb: int) -> None: ...
    def read(self, nsid: int, slba: int, nlb: int) -> dict[str, int]: ...
    def deallocate(self, nsid: int, slba: int, nlb: int) -> int: ...
    def precondition(
        self,
        nsid: int,
        pattern: str,
        block_bytes: int,
        amount_bytes: int,
        seed: int,
        progress: Optional[Callable[[int, int], object]] = None,
    ) -> dict[str, Any]: ...
    def run_fio(
        self,
        specs: Sequence[Mapping[str, Any]],
        default_nsid: int = 1,
        idle_gc: bool = True,
        progress: Optional[Callable[[int], object]] = None,
        timing_toml: Optional[str] = None,
    ) -> list[dict[str, Any]]: ...
    def check(self) -> None: ...
    def ftl_info(self) -> dict[str, Any]: ...

@final
class DriveView:
    """Identify data, namespaces and logs: from ``Drive.view()`` or a server's live.json."""

    def id_ctrl(self) -> dict[str, Any]: ...
    def id_ns(self, nsid: int) -> dict[str, Any]: ...
    def list_ns(self) -> list[dict[str, Any]]: ...
    def smart_log(self) -> dict[str, Any]: ...
    def vendor_log(self) -> dict[str, Any]: ...

def read_live_snapshot(path: _Path) -> Optional[tuple[dict[str, Any], DriveView]]: ...
def parse_size(text: str) -> int: ...
def presets() -> list[tuple[str, str]]: ...
def parse_spec(text: str, origin: str = "spec") -> dict[str, Any]: ...
def preset(name: str) -> dict[str, Any]: ...
def waf_greedy(alpha: float, units_per_block: Optional[float] = None) -> float: ...
def serve(
    path: _Path,
    tcp: list[str] = ...,
    unix: list[_Path] = ...,
    metrics: Optional[str] = None,
    pace: str = "model",
    spin_us: int = 0,
    ready: Optional[Callable[[dict[str, Any]], object]] = None,
    max_connections: int = 0,
    max_inflight_bytes: int = 0,
    handshake_timeout_s: Optional[float] = None,
    send_timeout_s: Optional[float] = None,
    tls: str = "off",
    tls_certificates: Optional[_Path] = None,
    tls_verify_peer: bool = False,
    unix_group: Optional[str] = None,
) -> dict[str, Any]: ...
