"""Conformance with real fio 3.33 (docs/fio.md §8).

Every job file in tests/fio/conformance runs through fio (``--ioengine=null``,
``--write_iolog``) and through ssdtwin's engine on an in-memory CM6; for every clone the
test asserts equal ``total_ios`` and ``io_bytes`` per direction and, where ssdtwin claims
fio's generators, the identical I/O sequence (ddir, offset, length) from both iologs. For
the non-uniform distributions it asserts the totals and the number of distinct offsets.

Cases that do not match yet are strict xfails naming the issue item that fixes them: a fix
makes them XPASS, which fails the run until the mark is removed. ``make fio-conformance``
prints the same comparison as a table.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from fio_conformance import Comparison, compare

from ssdtwin.drive import Drive

pytestmark = pytest.mark.tools

JOBS = Path(__file__).resolve().parent / "conformance"
CM6 = "kioxia-cm6-r-3.84t"

# What each case asserts: "iolog" = totals and the I/O sequence; "distinct" = totals and
# the number of distinct offsets (the distributions' spread), exactly.
CHECK = {"zipf": "distinct", "pareto": "distinct", "normal": "distinct", "zoned": "distinct"}

# Cases that fail without a known cause (strict: a fixed case fails as XPASS). Cases whose
# result depends on where the target ends carry fio_conformance.FILE_SIZED.
XFAIL: dict[str, str] = {}

CASES = sorted(p.stem for p in JOBS.glob("*.fio"))


@pytest.fixture(scope="module")
def fio_333() -> str:
    """The fio binary, if it is 3.33: the cases (and their xfails) pin its behaviour."""
    fio = shutil.which("fio")
    if fio is None:
        pytest.skip("the real fio binary is not installed")
    version = subprocess.run([fio, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    if not version.startswith("fio-3.33"):
        pytest.skip(f"the conformance cases pin fio 3.33; this is {version or 'an unknown version'}")
    return fio


@pytest.fixture(scope="module")
def drive() -> Iterator[Drive]:
    # Size-terminated jobs at QD 1 issue the same I/Os whatever the drive did before, so
    # one drive serves every case.
    with Drive.in_memory(CM6, scale=454) as d:
        yield d


def _params() -> list[object]:
    return [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=XFAIL[c])) if c in XFAIL else c for c in CASES]


@pytest.mark.parametrize("case", _params())
def test_same_ios_as_fio(fio_333: str, drive: Drive, tmp_path: Path, case: str) -> None:
    c: Comparison = compare(fio_333, JOBS / f"{case}.fio", tmp_path, drive)
    assert c.error is None, c.error
    assert c.fio and all(f.ios for f in c.fio), "fio wrote an iolog line per I/O"
    assert len(c.twin) == len(c.fio), "one result per fio thread"
    for k, (f, t) in enumerate(zip(c.fio, c.twin)):
        assert t.totals == {d: f.totals.get(d, (0, 0)) for d in t.totals}, f"clone {k}: (total_ios, io_bytes) per direction"
    if CHECK.get(case, "iolog") == "iolog":
        assert c.iologs_match(), c.first_difference()
    else:
        assert [t.distinct_offsets for t in c.twin] == [f.distinct_offsets for f in c.fio], "distinct offsets per clone"


def test_every_rw_mode_is_covered() -> None:
    modes = {"read", "write", "trim", "randread", "randwrite", "randtrim", "rw", "randrw", "trimwrite", "randtrimwrite"}
    written = {
        line.split("=", 1)[1].split(":")[0] for p in JOBS.glob("*.fio") for line in p.read_text().splitlines() if line.startswith("rw=")
    }
    assert modes <= written, modes - written


def test_past_the_region_on_a_larger_namespace_as_fio_on_a_block_device(drive: Drive, tmp_path: Path) -> None:
    """fio's null file ends at `size`; a block device does not. Measured with fio 3.33,
    ``fio --ioengine=psync --filename=/dev/loop0 end-of-region.fio`` on a 4 MiB loop device:
    16 writes, 1,048,576 bytes (the 16th runs from 960 KiB to 1 MiB, past the 1000 KiB
    region but inside the device), where the null engine stops at 15. The twin on a
    namespace larger than the region does what fio does on the device."""
    from ssdtwin.fio.run import run_jobs

    job = tmp_path / "eor.fio"
    job.write_text("[eor]\nrw=write\nbs=64k\nsize=1000k\n")
    _, results = run_jobs(drive, [str(job)], cmdline=("--ioengine=psync",))
    assert (results[0]["write"]["total_ios"], results[0]["write"]["io_bytes"]) == (16, 1048576)
