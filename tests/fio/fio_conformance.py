"""Conformance with real fio: the same job file through fio 3.33 (``--ioengine=null``) and
through ``ssdtwin fio``, compared on what fio reports and logs (docs/fio.md §8).

For every clone: ``total_ios`` and ``io_bytes`` per direction (fio's JSON against the
engine's result), the issued I/Os (ddir, offset, length) in order (fio's ``write_iolog``
against ours), and the number of distinct offsets touched. Job files must be
size-terminated and name no ``filename``: fio then gives each clone its own file
``jobname.subjob.0``, which is how its iolog lines are told apart.

``python tests/fio/fio_conformance.py [JOBFILE|DIR ...]`` prints the comparison table
(``make fio-conformance`` runs it on tests/fio/conformance); the exit status is 1 when a
job differs. Needs the fio binary and the compiled core; tests/fio/test_fio_conformance.py
asserts the same comparisons.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ssdtwin import _core
from ssdtwin.drive import Drive
from ssdtwin.fio.iolog import DDIR_NAMES, HEADER_V3
from ssdtwin.fio.run import run_jobs

__all__ = ["CloneIO", "Comparison", "run_real_fio", "run_twin", "compare", "table", "main"]

CM6 = "kioxia-cm6-r-3.84t"
IO = tuple[str, int, int]  # ddir, offset, length


@dataclass
class CloneIO:
    """What one clone did: per direction (total_ios, io_bytes), and its issued I/Os."""

    totals: dict[str, tuple[int, int]]
    ios: list[IO] = field(default_factory=list)

    @property
    def distinct_offsets(self) -> int:
        return len({(d, off) for d, off, _ in self.ios})


def _totals(entry: Any) -> dict[str, tuple[int, int]]:
    return {d: (int(entry[d]["total_ios"]), int(entry[d]["io_bytes"])) for d in DDIR_NAMES if d in entry}


def parse_iolog(text: str) -> dict[str, list[IO]]:
    """I/O lines of a version 3 iolog by file name (several runs' blocks may follow)."""
    out: dict[str, list[IO]] = {}
    for line in text.splitlines():
        words = line.split()
        if line.startswith(HEADER_V3) or len(words) != 5:
            continue
        _, name, action, offset, length = words
        if action in DDIR_NAMES:
            out.setdefault(name, []).append((action, int(offset), int(length)))
    return out


def run_real_fio(fio: str, job: Path, workdir: Path) -> list[CloneIO]:
    """Run ``job`` through fio with the null engine; one CloneIO per thread, in order."""
    log = workdir / "fio.iolog"
    log.unlink(missing_ok=True)
    proc = subprocess.run(
        [fio, "--ioengine=null", "--output-format=json", f"--write_iolog={log}", str(job.resolve())],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"fio {job.name}: exit {proc.returncode}: {proc.stderr.strip()[:400]}")
    text = proc.stdout
    doc = json.loads(text[text.index("{") :])  # fio prints notes before the JSON
    logs = parse_iolog(log.read_text()) if log.exists() else {}
    return [CloneIO(_totals(entry), logs.get(name, [])) for name, entry in zip(_file_names(doc["jobs"]), doc["jobs"])]


def _file_names(jobs: Sequence[Any]) -> list[str]:
    """fio's file name of each thread without filename=: ``jobname.subjob.0``; the threads
    of a numjobs=N job are subjobs 0, N-1, ..., 1 in thread order (docs/fio.md §2.4)."""
    names: list[str] = []
    i = 0
    while i < len(jobs):
        name = jobs[i]["jobname"]
        n = 1
        while i + n < len(jobs) and jobs[i + n]["jobname"] == name and jobs[i + n]["job options"] == jobs[i]["job options"]:
            n += 1
        names.extend(f"{name}.{sub}.0" for sub in [0, *range(n - 1, 0, -1)])
        i += n
    return names


# A job file with this comment runs on a namespace exactly `size` bytes long. fio's null
# engine has no device: its file is `size` bytes (filesetup.c: real_file_size = size when
# the engine cannot size the file), so fio stops or wraps where that file ends. On a real
# block device fio goes on to the device's end (measured: fio 3.33, psync on a 4 MiB loop
# device, `rw=write bs=64k size=1000k` issues 16 writes, 1 MiB), which is what the twin does
# on a namespace larger than the region. Sizing the namespace like fio's file compares the
# same thing on both sides.
FILE_SIZED = "# conformance: target is size bytes"


def _size_bytes(job: Path) -> Optional[int]:
    """The job's `size` if the job file asks for a target of that size (FILE_SIZED)."""
    text = job.read_text()
    if FILE_SIZED not in text:
        return None
    from ssdtwin.fio import parse

    return int(parse(job, env={}).jobs[0].state["size"])


def run_twin(job: Path, drive: Any = None) -> list[CloneIO]:
    """Run ``job`` through ssdtwin's engine (null engine, write_iolog on) on ``drive``, by
    default a fresh in-memory CM6 at 1/454; a FILE_SIZED job on its own drive whose only
    namespace is the job's `size` long."""
    size = _size_bytes(job)
    own = drive is None or size is not None
    d = Drive.in_memory(CM6, scale=454) if own else drive
    nsid = 1
    try:
        if size is not None:
            d.nvme.delete_ns(1)
            nsid = d.nvme.create_ns(size // 4096, block_size=4096)
            d.nvme.attach_ns(nsid)
        _, results = run_jobs(d, [str(job)], cmdline=("--ioengine=null", "--write_iolog=twin.iolog"), namespace=nsid)
    finally:
        if own:
            d.close()
    clones = []
    for r in sorted(results, key=lambda r: r["thread_number"]):
        blob = bytes(r.get("iolog") or b"")
        ios = [(DDIR_NAMES[dd], off, n) for _, dd, off, n in _records(blob)]
        clones.append(CloneIO(_totals(r), ios))
    return clones


def _records(blob: bytes) -> Any:
    import struct

    return struct.iter_unpack("<4Q", blob)


@dataclass
class Comparison:
    job: str
    fio: list[CloneIO]
    twin: list[CloneIO]
    error: Optional[str] = None  # a side that refused the job or failed

    def totals_match(self) -> bool:
        return (
            self.error is None
            and len(self.fio) == len(self.twin)
            and all(all(f.totals.get(d, (0, 0)) == t.totals.get(d, (0, 0)) for d in DDIR_NAMES) for f, t in zip(self.fio, self.twin))
        )

    def iologs_match(self) -> bool:
        return self.error is None and len(self.fio) == len(self.twin) and all(f.ios == t.ios for f, t in zip(self.fio, self.twin))

    def distinct_match(self, tolerance: float = 0.0) -> bool:
        return len(self.fio) == len(self.twin) and all(
            abs(f.distinct_offsets - t.distinct_offsets) <= tolerance * max(f.distinct_offsets, 1) for f, t in zip(self.fio, self.twin)
        )

    def first_difference(self) -> Optional[str]:
        """Where the I/O sequences part (for messages)."""
        for k, (f, t) in enumerate(zip(self.fio, self.twin)):
            for i, (a, b) in enumerate(zip(f.ios, t.ios)):
                if a != b:
                    return f"clone {k}, I/O {i}: fio {a}, ssdtwin {b}"
            if len(f.ios) != len(t.ios):
                return f"clone {k}: fio issued {len(f.ios)} I/Os, ssdtwin {len(t.ios)}"
        return None


def compare(fio: str, job: Path, workdir: Path, drive: Any = None) -> Comparison:
    """Both runs of ``job``; a side that refuses it gives a row with ``error`` set."""
    try:
        real = run_real_fio(fio, job, workdir)
    except (RuntimeError, ValueError) as e:
        return Comparison(job.stem, [], [], f"fio: {str(e).splitlines()[0]}")
    try:
        twin = run_twin(job, drive)
    except (ValueError, _core.SsdtwinError) as e:  # FioJobError, engine errors
        return Comparison(job.stem, real, [], f"ssdtwin: {str(e).splitlines()[0]}")
    return Comparison(job.stem, real, twin)


def _sum(clones: Sequence[CloneIO], d: str) -> tuple[int, int]:
    ios = sum(c.totals.get(d, (0, 0))[0] for c in clones)
    return ios, sum(c.totals.get(d, (0, 0))[1] for c in clones)


def _cell(clones: Sequence[CloneIO]) -> str:
    parts = []
    for d in DDIR_NAMES:
        ios, nbytes = _sum(clones, d)
        if ios:
            parts.append(f"{d[0]} {ios}/{nbytes}")
    return " ".join(parts) or "-"


def table(rows: Sequence[Comparison]) -> str:
    """The comparison table: per job, fio's and ssdtwin's total_ios/io_bytes per direction
    (r/w/t, summed over clones), distinct offsets, and whether totals and iologs match."""
    head = ("job", "fio ios/bytes", "ssdtwin ios/bytes", "distinct fio/twin", "totals", "iolog")
    body = []
    for c in rows:
        distinct = f"{sum(x.distinct_offsets for x in c.fio)}/{sum(x.distinct_offsets for x in c.twin)}"
        twin = _cell(c.twin) if c.error is None else c.error[:60]
        body.append((c.job, _cell(c.fio), twin, distinct, "yes" if c.totals_match() else "NO", "yes" if c.iologs_match() else "NO"))
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip() for r in [head, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


def job_files(paths: Sequence[str]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        out.extend(sorted(p.glob("*.fio")) if p.is_dir() else [p])
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="fio_conformance.py", description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("paths", nargs="*", default=["tests/fio/conformance"], help="job files or directories of *.fio")
    ap.add_argument("--fio", default=shutil.which("fio"), help="the fio binary (default: fio on PATH)")
    args = ap.parse_args(argv)
    if not args.fio:
        print("fio-conformance: the fio binary is not installed", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Drive.in_memory(CM6, scale=454) as drive:
        for job in job_files(args.paths):
            rows.append(compare(args.fio, job, Path(tmp), drive))
    sys.stdout.write(table(rows))
    for c in rows:
        if c.error:
            print(f"{c.job}: {c.error}", file=sys.stderr)
    return 0 if all(c.error is None and c.totals_match() and c.iologs_match() for c in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
