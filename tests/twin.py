"""Helpers shared by the CLI, API, crash and physics tests (fixtures are in conftest.py).

A module of its own, not conftest.py: tests/fio has a conftest.py too, and `import
conftest` would find whichever was loaded last.

``run_cli`` runs the CLI in the test process (inprocess.py: the exit status, stdout and
stderr exactly as a subprocess of the console script would give them, the process state put
back after), or with ``process=True`` as a real subprocess of the installed console script
(what a user types): for start-up, signals, servers, and commands given their own
environment. ``SSDTWIN_TEST_CLI=process`` runs every call as a subprocess, to check that
the two agree on the whole suite.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import inprocess

CM6 = "kioxia-cm6-r-3.84t"
P5316 = "intel-p5316-15.36t"


def _ssdtwin_command() -> list[str]:
    """The installed console script next to this interpreter, else ``python -m ssdtwin``."""
    exe = shutil.which("ssdtwin", path=os.path.dirname(sys.executable))
    return [exe] if exe else [sys.executable, "-m", "ssdtwin"]


SSDTWIN = _ssdtwin_command()


@dataclass
class Run:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    @property
    def stderr_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on now (for servers a test starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


ALWAYS_A_PROCESS = os.environ.get("SSDTWIN_TEST_CLI") == "process"


def run_cli(
    *args: str | os.PathLike[str],
    check: bool = True,
    timeout: float = 300,
    env: dict[str, str] | None = None,
    process: bool = False,
) -> Run:
    """``ssdtwin ARGS``: in this process, or (``process``, ``env`` or SSDTWIN_TEST_CLI=process)
    as a subprocess of the console script with ``timeout``. ``check``: fail the test on a
    non-zero exit."""
    argv = [os.fspath(a) for a in args]
    if process or env is not None or ALWAYS_A_PROCESS:
        p = subprocess.run(SSDTWIN + argv, check=False, capture_output=True, text=True, timeout=timeout, env=env)
        r = Run(argv, p.returncode, p.stdout, p.stderr)
    else:
        r = Run(argv, *inprocess.run(argv))
    if check and r.returncode != 0:
        raise AssertionError(f"ssdtwin {' '.join(argv)} exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def namespace_rows(path: Path) -> list[dict[str, Any]]:
    """The drive's namespace table (nsid, attached, nuse, lba_bytes, ms, pi, dram,
    nvmsetid …), read in process as the read-only verbs read it (a served image's live
    state included); `nvme list -o json` prints nvme-cli's shape, which has none of these."""
    from ssdtwin.commands.common import drive_view

    return [dict(r) for r in drive_view(path).list_ns()]


# The images check_image passed, by their bytes (_checked_key).
_CHECKED: set[tuple[tuple[str, str], ...]] = set()


def _checked_key(path: Path) -> tuple[tuple[str, str], ...] | None:
    """An image's bytes as its files' digests, if that costs little: every file above 1 MiB
    (the maps) must have a digest kept (file_digest) or be a settled hard link (a copy of a
    template's, copy_image: hashed once, then kept for every copy); else None."""
    key = []
    for p in sorted(path.rglob("*")):
        if not p.is_file() or p.name == "LOCK":
            continue
        st = p.stat()
        kept = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) in _DIGESTS
        hard_link_settled = st.st_nlink > 1 and time.time_ns() - st.st_mtime_ns >= DIGEST_SETTLED_NS
        if st.st_size > 1 << 20 and not kept and not hard_link_settled:
            return None
        key.append((str(p.relative_to(path)), file_digest(p)))
    return tuple(key)


def check_image(path: Path) -> None:
    """What `ssdtwin check PATH` does, in process (0.1 s for a 1/64 CM6): open read-only
    (replaying a crashed server's journal in memory) and run the full FTL check; a failure
    fails the test with the image's path and the reason. An image of the same bytes as one
    already checked (an untouched copy of a template) passes without a second check: the
    check reads nothing but the image."""
    from ssdtwin import Drive, _core

    key = _checked_key(path)
    if key is not None and key in _CHECKED:
        return
    try:
        d = Drive.open(path, writable=False)
        try:
            d.check()
        finally:
            d.close()
    except (_core.SsdtwinError, OSError) as e:
        raise AssertionError(f"ssdtwin check {path}: {e}") from e
    if key is not None and key == _checked_key(path):
        _CHECKED.add(key)


def check_shared_images(base: Path, tests_own: Collection[str]) -> list[Path]:
    """`check_image` on every drive image under ``base`` (pytest's base temp) outside the
    folders named in ``tests_own`` (the tests' own tmp_paths, checked as each test ends):
    the images of templates and of module/session fixtures. Skips pytest's NAMEcurrent
    links (the same folder as NAMEn) and an image with a file named DAMAGED in it (a
    fixture's image damaged on purpose). Returns the images checked; every failure is
    reported at once, one line each."""
    checked: list[Path] = []
    failures: list[str] = []
    for folder in sorted(base.iterdir()):
        if folder.name in tests_own or folder.is_symlink() or not folder.is_dir():
            continue
        for manifest in sorted(folder.rglob("ssdtwin.toml")):
            image = manifest.parent
            if (image / "DAMAGED").exists():
                continue
            try:
                check_image(image)
            except AssertionError as e:
                failures.append(str(e))
            checked.append(image)
    if failures:
        raise AssertionError("shared images left inconsistent:\n" + "\n".join(failures))
    return checked


def image_digest(path: Path) -> dict[str, str]:
    """sha256 of every file of an image, by relative path, over its bytes.

    LOCK is left out: it is the advisory lock file, not image state; every writable open
    rewrites it with the opener's pid.
    """
    out: dict[str, str] = {}
    for p in sorted(path.rglob("*")):
        if p.is_file() and p.name != "LOCK":
            out[str(p.relative_to(path))] = file_digest(p)
    return out


DIGEST_BLOCK_BYTES = 4096


# A file's digest by its identity and state (device, inode, size, mtime) once its mtime is
# DIGEST_SETTLED_NS old: see file_digest.
_DIGESTS: dict[tuple[int, int, int, int], str] = {}
DIGEST_SETTLED_NS = 1_000_000_000


def file_digest(path: Path) -> str:
    """sha256 over a file's size and its nonzero 4 KiB blocks, each with its offset: equal
    for two files exactly when their bytes are equal, however the file system stores them.

    Why not hash every byte: an image's maps are sparse files (a 1/454 CM6's are 27 MiB with
    a few KiB written), and reading their holes as zeros made hashing images a large share
    of the test suite's CPU. Only the data regions (SEEK_DATA / SEEK_HOLE) are read, and zero
    blocks are skipped wherever they are, so a hole and written zeros digest alike.

    A file hashed once is not hashed again while its inode, size and mtime stay as they were,
    if that mtime was at least DIGEST_SETTLED_NS old when it was hashed: a write after that
    sets the mtime to its own time, later than the one kept (the kernel's file times tick
    in milliseconds), so the file's state is a new one. Most digests are of the same maps:
    every copy of a template hard-links them (copy_image), and they hashed 2.8 million
    4 KiB blocks in tests/test_bad_input.py alone. (Only setting a file's mtime back by
    hand, os.utime, could fool this; no test or command does.)
    """
    before = os.stat(path)
    key = (before.st_dev, before.st_ino, before.st_size, before.st_mtime_ns)
    known = _DIGESTS.get(key)
    if known is not None:
        return known
    digest = _file_digest(path)
    after = os.stat(path)
    settled = time.time_ns() - before.st_mtime_ns >= DIGEST_SETTLED_NS
    if settled and key == (after.st_dev, after.st_ino, after.st_size, after.st_mtime_ns):
        _DIGESTS[key] = digest
    return digest


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    zero = bytes(DIGEST_BLOCK_BYTES)
    with open(path, "rb") as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        h.update(size.to_bytes(8, "little"))
        hashed_to = 0  # blocks before this offset are in the digest already
        for start, end in _data_regions(fd, size):
            # Align to the digest's block, so that the same bytes give the same blocks
            # whatever the regions (a file system's blocks may be smaller).
            offset = max(start - start % DIGEST_BLOCK_BYTES, hashed_to)
            f.seek(offset)
            while offset < end:
                block = f.read(DIGEST_BLOCK_BYTES)
                if block and block != zero[: len(block)]:
                    h.update(offset.to_bytes(8, "little"))
                    h.update(block)
                offset += DIGEST_BLOCK_BYTES
            hashed_to = offset
    return h.hexdigest()


def zeroes_from(path: Path, start: int) -> bool:
    """Whether every byte of a file from offset ``start`` on is zero. A hole reads zeroes, so
    only the file's data regions are read (SEEK_DATA / SEEK_HOLE): a namespace copied out
    to a 1 GiB sparse file and read whole cost a test 3-5 s of system time."""
    with open(path, "rb") as f:
        fd = f.fileno()
        for begin, end in _data_regions(fd, os.fstat(fd).st_size):
            offset = max(begin, start)
            f.seek(offset)
            while offset < end:
                chunk = f.read(min(end - offset, 1 << 20))
                if not chunk:
                    break
                if chunk.count(0) != len(chunk):
                    return False
                offset += len(chunk)
    return True


def _data_regions(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """The [start, end) byte ranges of a file that may hold data (the whole file where the
    file system cannot say)."""
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:  # no data after `offset`
                return
            if e.errno in (errno.EINVAL, errno.EOPNOTSUPP):
                yield offset, size
                return
            raise
        end = os.lseek(fd, start, os.SEEK_HOLE)
        yield start, end
        offset = end


def make_two_namespaces(d: Path, ns1_blocks_512: int, ns2_blocks_4k: int) -> Path:
    """A CM6 at 1/454 whose factory namespace is replaced by two attached ones: ns1 with
    512 B LBAs and ns2 with 4 KiB LBAs (sizes in their own blocks), through the CLI."""
    run_cli("create", d, "--model", CM6, "--scale", "1/454")
    run_cli("nvme", "detach-ns", d, "-n", "1")
    run_cli("nvme", "delete-ns", d, "-n", "1")
    run_cli("nvme", "create-ns", d, "-s", str(ns1_blocks_512), "-c", str(ns1_blocks_512), "-b", "512")
    run_cli("nvme", "create-ns", d, "-s", str(ns2_blocks_4k), "-c", str(ns2_blocks_4k), "-b", "4096")
    run_cli("nvme", "attach-ns", d, "-n", "1", "-c", "1")
    run_cli("nvme", "attach-ns", d, "-n", "2", "-c", "1")
    return d


def copy_image(src: Path, dst: Path) -> Path:
    """Copy an image cheaply: the big map files are hard-linked (the image never rewrites a
    committed file in place: each commit writes a new generation), the rest is copied (LOCK
    must be a file of its own, or the copies would share one flock)."""

    def copy(s: str, d: str) -> None:
        if os.path.basename(s) in ("l2p.bin", "p2l.bin"):
            os.link(s, d)
        else:
            shutil.copy2(s, d)

    shutil.copytree(src, dst, copy_function=copy)
    return dst


def own_copy(path: Path) -> Path:
    """Give a hard-linked file its own inode before a test damages it in place."""
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data)
    return path


# --------------------------------------------------------------------------- ssdtwin fio

# What changes from one run of the same job to the next: the wall-clock time of the report.
FIO_TIMESTAMP_KEYS = ("timestamp", "timestamp_ms", "time", "job_start")


@dataclass
class FioRun:
    """One ``ssdtwin fio`` run: its JSON report (parsed), the directory holding the job
    file, the report and the log files, and the CLI run itself."""

    doc: dict[str, Any]
    dir: Path
    cli: Run

    def job(self, name: str) -> dict[str, Any]:
        (j,) = [j for j in self.doc["jobs"] if j["jobname"] == name]
        return j

    def log_rows(self, filename: str) -> list[list[int]]:
        """Rows of a fio log file (``t, value, ddir, bs[, offset], prio``) as integers."""
        text = (self.dir / filename).read_text()
        return [[int(x) for x in line.split(",")] for line in text.splitlines() if line.strip()]


def run_fio(image: Path, job_text: str, workdir: Path, *args: str, name: str = "job.fio", fmt: str = "json") -> FioRun:
    """Write ``job_text`` to ``workdir/name`` and run ``ssdtwin fio`` on it with the report in
    ``workdir/out.json`` and the log files in ``workdir``. Fails the test if it fails."""
    workdir.mkdir(parents=True, exist_ok=True)
    job = workdir / name
    job.write_text(job_text)
    out = workdir / "out.json"
    r = run_cli("fio", image, job, f"--output-format={fmt}", f"--output={out}", "--log-dir", workdir, *args)
    return FioRun(json.loads(out.read_text()), workdir, r)


def without_timestamps(doc: Any) -> Any:
    """A fio JSON document without the keys that hold the wall-clock time of the run."""
    if isinstance(doc, dict):
        return {k: without_timestamps(v) for k, v in doc.items() if k not in FIO_TIMESTAMP_KEYS}
    if isinstance(doc, list):
        return [without_timestamps(v) for v in doc]
    return doc


def job_file_error(text: str) -> str:
    """The error a fio job file of `text` (named `job.fio`) is refused with: a FioJobError
    whose message is one line naming the file (the parser's bad-input contract)."""
    import pytest

    from ssdtwin.fio import parse_string
    from ssdtwin.fio.errors import FioJobError

    with pytest.raises(FioJobError) as e:
        parse_string(text, name="job.fio")
    message = str(e.value)
    assert "\n" not in message.strip() and "job.fio:" in message, message
    return message
