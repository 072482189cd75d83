"""What the SNIA PTS harness needs from a device under test.

Two kinds of target implement it: a twin (a drive image, simulated time, ``ssdtwin fio`` in
process: ``pts/twin.py``) and a real target driven by the real fio (an NBD export or a block
device: ``pts/realfio.py``). The harness (``pts/suite.py``, ``pts/testrun.py``) only ever
talks to this protocol, so every test element is the same fio job text on both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Protocol

from .records import DeviceDoc, DeviceExtra, FioJson, SpecDoc


@dataclass
class DeviceInfo:
    """The report header's "device under test" block."""

    kind: str  # "twin", "nbd", "device" or "file"
    uri: str  # what the user typed: ./cm6, nbd://127.0.0.1:10809/ns1, /dev/nvme0n1
    vendor: str = ""
    model: str = ""
    serial: str = ""
    firmware: str = ""  # a twin: "ssdtwin <version>, preset <name>" (or "spec differing from preset <name> (<fields>)")
    capacity_bytes: int = 0  # the tested range (ActiveRange 100 % = this many bytes)
    lba_bytes: int = 512
    nand: str = ""
    interface: str = ""
    preset: str = ""  # twin only: the preset it is, "" when made from a spec file that is not one (``spec``)
    spec: Optional[SpecDoc] = None  # twin only: preset or spec file, its name and digest
    scale: str = ""  # twin only: "1/64"
    simulated: bool = False
    extra: DeviceExtra = field(default_factory=lambda: DeviceExtra())

    def to_json(self) -> DeviceDoc:
        """The block as pts.json holds it (``device``)."""
        doc: DeviceDoc = {
            "kind": self.kind,
            "uri": self.uri,
            "vendor": self.vendor,
            "model": self.model,
            "serial": self.serial,
            "firmware": self.firmware,
            "capacity_bytes": self.capacity_bytes,
            "lba_bytes": self.lba_bytes,
            "nand": self.nand,
            "interface": self.interface,
            "preset": self.preset,
            "scale": self.scale,
            "simulated": self.simulated,
            "extra": self.extra.copy(),
        }
        if self.spec:
            doc["spec"] = self.spec
        return doc


class PtsTarget(Protocol):
    """A device the PTS harness can purge, write with fio jobs, and leave idle."""

    info: DeviceInfo

    def target_lines(self) -> str:
        """The fio lines that aim a job at this target (put in the job's [global] section):
        empty for a twin; ``ioengine=nbd``/``uri=...`` or ``ioengine=libaio``/``filename=...``
        for a real one. The saved job file is the element body plus these lines, so a reader
        can re-run it by hand with ``ssdtwin fio <image> job.fio`` or ``fio job.fio``."""
        ...

    def purge(self) -> str:
        """Return the device to fresh-out-of-box; returns the method used, for the report
        header (e.g. "nvme format --ses=1", "twin: format ses=1 (FTL reset, wear kept)",
        "TRIM of the whole range (fallback)")."""
        ...

    def run_fio(self, job_path: Path, json_path: Path) -> FioJson:
        """Run the fio job file ``job_path`` to completion; write fio's ``json+`` output to
        ``json_path`` and return it parsed. Raises PtsError with a one-line message on
        failure."""
        ...

    def idle(self, seconds: float) -> None:
        """Leave the device idle for ``seconds`` (HIR wait states): a twin advances its
        virtual clock with background GC; a real target sleeps."""
        ...

    def close(self) -> None: ...


class PtsError(Exception):
    """A one-line, user-facing error (the CLI prints it and exits 2)."""
