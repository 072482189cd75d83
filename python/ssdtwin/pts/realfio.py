"""The PTS harness against a real target, driven by the real fio (docs/pts.md, "Real targets").

Three kinds of target, told apart by what the user typed:

- an NBD export (``nbd://host:port/export``, ``nbds://``, ``nbd+unix:///export?socket=PATH``):
  fio's ``nbd`` engine (libnbd), probed with ``nbdinfo``; purged by a TRIM of the whole export;
- a block device (``/dev/nvme0n1``): fio's ``libaio`` engine with ``direct=1`` from the element
  body; purged by ``nvme format --ses=1`` on an NVMe namespace, else by BLKDISCARD (TRIM);
- a regular file (labs trying the harness out, and the tests): ``libaio`` too; purged by
  truncating it to nothing and back (every block deallocated).

Safety: nothing is written to a block device, a file, or an NBD export that ``ssdtwin serve``
did not make, unless ``allow_destroy`` (the CLI's ``--yes-destroy-data``) is given, and every
check that can fail (no such device, permission, in use, connection refused, unknown export,
no fio) runs in the constructor, before anything is written. Errors are one-line PtsErrors.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from ssdtwin.pts.records import FioJson
from ssdtwin.pts.target import DeviceInfo, PtsError

DESTROY_FLAG = "--yes-destroy-data"
PURGE_METHODS = ("auto", "nvme-format", "trim", "none")
NBD_SCHEMES = ("nbd", "nbds", "nbd+unix", "nbds+unix")

# BLKDISCARD = _IO(0x12, 119) from <linux/fs.h>: discard [start, start + len) bytes.
_BLKDISCARD = 0x1277
# One NBD TRIM request carries a 32-bit length; 1 GiB keeps each well inside it.
_NBD_TRIM_CHUNK = 1 << 30
# <linux/prctl.h>: the signal a child gets when its parent thread exits.
_PR_SET_PDEATHSIG = 1
# How long fio gets to stop and write its report after Ctrl-C before it is killed.
_FIO_STOP_GRACE_S = 15.0
# `ssdtwin serve` describes each export as "namespace 1 of <preset> at 1/<scale>: N blocks of
# 512 B, IU 4 KiB" (crates/ssdtwin-serve/src/backend.rs, export_info): a twin's export.
_SSDTWIN_EXPORT = re.compile(r"^namespace (\d+) of (\S+) at (1/\d+): (\d+) blocks of (\d+) B, IU (\d+) KiB")


def is_real_target(target: str) -> bool:
    """Whether ``target`` names a real target (an NBD URI, a block device, a regular file)
    rather than a drive image (a directory): how the CLI picks RealFioTarget or TwinTarget."""
    if _nbd_scheme(target) is not None or target.startswith("/dev/"):
        return True
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return False
    return stat.S_ISBLK(mode) or stat.S_ISREG(mode)


def _nbd_scheme(target: str) -> Optional[str]:
    scheme, sep, _ = target.partition("://")
    return scheme.lower() if sep and scheme.lower() in NBD_SCHEMES else None


@dataclass
class _Fio:
    path: str
    version: str  # "fio-3.33"


def find_fio(fio: str = "fio") -> _Fio:
    """The fio binary (a name on PATH or a path) and its version, or a one-line PtsError."""
    path = shutil.which(fio)
    if path is None:
        where = "is not an executable file" if os.sep in fio else "was not found on PATH"
        raise PtsError(f"fio: `{fio}` {where}: install fio (Debian/Ubuntu: apt-get install fio) or pass the path of a fio binary")
    try:
        p = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PtsError(f"fio: cannot run {path} --version: {e}") from None
    version = p.stdout.strip().splitlines()[0] if p.stdout.strip() else ""
    if p.returncode != 0 or not version.startswith("fio-"):
        raise PtsError(f"fio: {path} --version printed {version or p.stderr.strip()[:80]!r}, not a fio version: is it fio?")
    return _Fio(path, version)


def _check_engine(fio: _Fio, engine: str) -> None:
    """fio knows the engine the target needs (``fio --enghelp=ENGINE`` fails otherwise)."""
    try:
        p = subprocess.run([fio.path, f"--enghelp={engine}"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PtsError(f"fio: cannot run {fio.path} --enghelp={engine}: {e}") from None
    if p.returncode != 0:
        built = {"nbd": "without libnbd (Debian's and Ubuntu's fio have it)", "libaio": "without libaio"}[engine]
        raise PtsError(f"fio: {fio.path} ({fio.version}) has no {engine} engine: it was built {built}")


class RealFioTarget:
    """A PtsTarget on a real NBD export, block device or regular file, run by the real fio.

    ``target``: what the user typed. ``allow_destroy``: the ``--yes-destroy-data`` flag, needed
    for block devices, files, and NBD exports not served by ``ssdtwin serve``. ``purge``: one
    of PURGE_METHODS ("auto" picks nvme-format on an NVMe namespace that supports it, else
    TRIM). ``fio``: the fio binary (name on PATH or path). Every check runs here, before
    anything is written; failures are one-line PtsErrors.
    """

    info: DeviceInfo

    def __init__(self, target: str, *, allow_destroy: bool = False, purge: str = "auto", fio: str = "fio") -> None:
        if purge not in PURGE_METHODS:
            raise PtsError(f"--purge {purge!r}: expected one of {', '.join(PURGE_METHODS)}")
        self.target = target
        self.allow_destroy = allow_destroy
        self.purge_method = purge
        self._proc: Optional[subprocess.Popen[str]] = None
        self._fio = find_fio(fio)
        self.fio_version = self._fio.version
        scheme = _nbd_scheme(target)
        _check_engine(self._fio, "nbd" if scheme is not None else "libaio")
        if scheme is not None:
            self._kind: _Kind = _NbdKind(target, scheme)
        else:
            self._kind = _open_path(target)
        self._kind.check_purge(purge)
        self._kind.check_writable(allow_destroy)
        self.info = self._kind.info
        self.info.extra.setdefault("fio", self._fio.version)
        self.info.extra.setdefault("fio_path", self._fio.path)
        self.info.extra.setdefault("purge_requested", purge)

    # -- the PtsTarget protocol -------------------------------------------------------------

    def target_lines(self) -> str:
        return self._kind.target_lines()

    def purge(self) -> str:
        if self.purge_method == "none":
            return "none (not purged: --purge none)"
        return self._kind.purge(self.purge_method, self._run_purge_job)

    def run_fio(self, job_path: Path, json_path: Path) -> FioJson:
        """``fio --output-format=json+ --output=JSON JOB``; returns the parsed report and leaves
        ``json_path`` holding only the JSON (fio's leading notes are dropped from the file)."""
        # Absolute paths: fio runs in the job's folder (where a job's relative log files go).
        json_path, job_path = Path(json_path).absolute(), Path(job_path).absolute()
        argv = [self._fio.path, "--output-format=json+", f"--output={json_path}", str(job_path)]
        try:
            stderr = self._run(argv, cwd=job_path.parent)
        except KeyboardInterrupt:
            _clean_report(json_path)  # fio wrote what it had when stopped: keep it readable
            raise
        return _read_report(json_path, stderr, str(job_path))

    def idle(self, seconds: float) -> None:
        """Real time: the device is left alone for ``seconds`` (Ctrl-C interrupts the sleep)."""
        if seconds < 0:
            raise PtsError(f"idle: {seconds} s is negative")
        time.sleep(seconds)

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._stop(self._proc)

    # -- running fio --------------------------------------------------------------------------

    def _run(self, argv: list[str], cwd: Path) -> str:
        """Run fio to completion; returns its stderr. fio runs in a session of its own so that a
        terminal Ctrl-C reaches only us: we then stop fio once (SIGINT: it ends its jobs and
        writes its report), kill it if it does not stop in time, and re-raise."""
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        except OSError as e:
            raise PtsError(f"fio: cannot run {argv[0]}: {e.strerror}") from None
        self._proc = proc
        try:
            out, err = proc.communicate()
        except BaseException:
            self._stop(proc)
            raise
        finally:
            self._proc = None
        if proc.returncode != 0:
            raise PtsError(f"fio {argv[-1]} failed (exit {proc.returncode}): {_fio_error_line(err + out)}")
        return err

    @staticmethod
    def _stop(proc: subprocess.Popen[str]) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=_FIO_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()

    def _run_purge_job(self, job_text: str) -> FioJson:
        with tempfile.TemporaryDirectory(prefix="ssdtwin-pts-purge-") as d:
            job = Path(d) / "purge.fio"
            job.write_text(job_text)
            return self.run_fio(job, Path(d) / "purge.json")


def _die_with_parent() -> None:
    """In the forked child, before exec: SIGTERM it when the harness dies (killed, or its
    terminal closed), since its own session shields it from the terminal's signals; fio stops
    its jobs on SIGTERM. Linux's PR_SET_PDEATHSIG; elsewhere nothing."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _fio_error_line(text: str) -> str:
    """The first line of fio's output that says what went wrong, shortened to one line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    noise = ("fio: connected to NBD server",)
    for line in lines:
        if line.startswith("fio:") and not line.startswith(noise):
            return _strip_prefixes(line)
    for line in lines:
        if re.search(r"error|fail|cannot|invalid|unknown|denied|no such", line, re.I):
            return _strip_prefixes(line)
    return lines[0] if lines else "no error message"


def _strip_prefixes(line: str) -> str:
    # "fio: nbd_connect_uri: nbd_connect_uri: connect: ..." → "nbd_connect_uri: connect: ..."
    line = re.sub(r"^(?:\S*/)?(?:fio|nbdinfo):\s*", "", line)
    return re.sub(r"^(\w+: )\1+", r"\1", line)


def _clean_report(json_path: Path) -> None:
    """Best effort after an interrupt: drop fio's notes around the JSON, if there is one."""
    with contextlib.suppress(PtsError):
        _read_report(json_path, "", str(json_path))


def _read_report(json_path: Path, stderr: str, job: str) -> FioJson:
    """Parse fio's JSON report; fio may put notes before it (and warnings after it)."""
    try:
        text = json_path.read_text(errors="replace")
    except OSError as e:
        raise PtsError(f"fio {job}: no report at {json_path} ({e.strerror}): {_fio_error_line(stderr)}") from None
    first = re.search(r"^\{", text, re.M)
    if first is None:
        raise PtsError(f"fio {job}: {json_path} holds no JSON report: {_fio_error_line(text + stderr)}")
    start = first.start()
    try:
        report, end = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as e:
        raise PtsError(f"fio {job}: {json_path} is not valid JSON ({e.msg} at line {e.lineno})") from None
    if start != 0 or text[end:].strip():
        json_path.write_text(text[start:end] + "\n")
    if not isinstance(report, dict) or not isinstance(report.get("jobs"), list):
        raise PtsError(f'fio {job}: {json_path} is not a fio report (no "jobs" list)')
    for j in report["jobs"]:
        if j.get("error"):
            code = int(j["error"])
            why = os.strerror(code) if 0 < code < 200 else f"error {code}"
            raise PtsError(f"fio {job}: job {j.get('jobname', '?')!r} failed: {why}: {_fio_error_line(stderr)}")
    return report


# -- the three kinds of target ------------------------------------------------------------------

_RunJob = Callable[[str], FioJson]


class _Kind(ABC):
    """What differs between an NBD export, a block device and a file."""

    info: DeviceInfo

    @abstractmethod
    def target_lines(self) -> str: ...

    @abstractmethod
    def check_purge(self, method: str) -> None: ...

    @abstractmethod
    def check_writable(self, allow_destroy: bool) -> None: ...

    @abstractmethod
    def purge(self, method: str, run_job: _RunJob) -> str: ...


class _NbdKind(_Kind):
    """An NBD export, reached by fio's nbd engine (libnbd) at the URI the user gave."""

    def __init__(self, uri: str, scheme: str) -> None:
        self.uri = uri
        export = _nbdinfo(uri)
        self.capacity_bytes = int(export.get("export-size", 0))
        if self.capacity_bytes <= 0:
            raise PtsError(f"{uri}: the NBD export is empty (size {self.capacity_bytes})")
        self.read_only = bool(export.get("is_read_only", False))
        self.can_trim = bool(export.get("can_trim", False))
        self.description = str(export.get("description", ""))
        twin = _SSDTWIN_EXPORT.match(self.description)
        self.is_ssdtwin = twin is not None
        lba = int(export.get("block_size_minimum", 512) or 512)
        self.info = DeviceInfo(
            kind="nbd",
            uri=uri,
            model=self.description,
            capacity_bytes=self.capacity_bytes,
            lba_bytes=lba,
            interface=f"NBD ({scheme}://, fio nbd engine over libnbd)",
            preset=twin.group(2) if twin else "",
            scale=twin.group(3) if twin else "",
            extra={
                "export_name": export.get("export-name", ""),
                "description": self.description,
                "served_by": "ssdtwin serve (real time)" if twin else "",
                "block_size_preferred": export.get("block_size_preferred"),
                "block_size_maximum": export.get("block_size_maximum"),
                "can_trim": self.can_trim,
                "can_flush": export.get("can_flush"),
                "can_multi_conn": export.get("can_multi_conn"),
                "tls": export.get("TLS", False),
            },
        )
        if twin:
            self.info.extra["iu_bytes"] = int(twin.group(6)) * 1024

    def target_lines(self) -> str:
        return f"ioengine=nbd\nuri={self.uri}\n"

    def check_purge(self, method: str) -> None:
        if method == "nvme-format":
            raise _not_nvme(self.uri, "an NBD export")
        if method in ("auto", "trim") and not self.can_trim:
            raise PtsError(f"{self.uri}: the NBD export does not support TRIM, so it cannot be purged: use --purge none to test it as is")

    def check_writable(self, allow_destroy: bool) -> None:
        if self.read_only:
            raise PtsError(f"{self.uri}: the NBD export is read-only; the PTS writes the whole range")
        if not self.is_ssdtwin and not allow_destroy:
            raise PtsError(
                f"{self.uri}: refusing to write to an NBD export not served by `ssdtwin serve` without {DESTROY_FLAG} "
                "(the PTS overwrites and trims the whole export)"
            )

    def purge(self, method: str, run_job: _RunJob) -> str:
        """TRIM of every byte through fio's nbd engine: 1 GiB requests, then the tail."""
        report = run_job(nbd_trim_job(self.uri, self.capacity_bytes))
        trimmed = sum(int(j["trim"]["io_bytes"]) for j in report["jobs"])
        if trimmed != self.capacity_bytes:
            raise PtsError(f"{self.uri}: purge by TRIM covered {trimmed} of {self.capacity_bytes} bytes")
        how = "the twin deallocates every LBA" if self.is_ssdtwin else "fallback: NBD has no format or sanitize"
        return f"TRIM of the whole range ({self.capacity_bytes} bytes, fio rw=trim over NBD; {how})"


def nbd_trim_job(uri: str, capacity_bytes: int) -> str:
    """A fio job that trims ``[0, capacity_bytes)`` of an NBD export exactly: fio skips a last
    partial block, so whole 1 GiB blocks first, then one block for the remainder."""
    whole = capacity_bytes // _NBD_TRIM_CHUNK * _NBD_TRIM_CHUNK
    tail = capacity_bytes - whole
    text = f"; purge: TRIM of the whole export\n[global]\nioengine=nbd\nuri={uri}\nrw=trim\niodepth=4\n"
    if whole:
        text += f"\n[purge]\noffset=0\nsize={whole}\nbs={_NBD_TRIM_CHUNK}\n"
    if tail:
        text += f"\n[purge-tail]\noffset={whole}\nsize={tail}\nbs={tail}\n"
    return text


def _nbdinfo(uri: str) -> dict[str, Any]:  # open: nbdinfo's JSON, whose fields vary by server and version
    """The export's facts from ``nbdinfo --json --no-content`` (reads no data)."""
    nbdinfo = shutil.which("nbdinfo")
    if nbdinfo is None:
        raise PtsError(f"{uri}: nbdinfo was not found on PATH: install libnbd-bin (Debian/Ubuntu) to probe NBD exports")
    try:
        p = subprocess.run([nbdinfo, "--json", "--no-content", uri], capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        raise PtsError(f"{uri}: cannot open the NBD export: no answer from nbdinfo within 60 s") from None
    if p.returncode != 0:
        msg = _strip_prefixes(p.stderr.strip().splitlines()[0]) if p.stderr.strip() else f"nbdinfo exited {p.returncode}"
        if "opt_go" in msg or "export" in msg:
            msg += f" (the server's exports: nbdinfo --list {uri})"
        elif uri.startswith("nbds") and "connection is closed" in msg:
            msg += " (nbds:// needs a server offering TLS, and ?tls-certificates=DIR for its CA)"
        raise PtsError(f"{uri}: cannot open the NBD export: {msg}")
    try:
        exports = json.loads(p.stdout)["exports"]
        export = exports[0]
    except (ValueError, KeyError, IndexError, TypeError):
        raise PtsError(f"{uri}: nbdinfo printed no export description") from None
    return dict(export)


def _open_path(target: str) -> _Kind:
    """A block device or a regular file, checked for existence, type and access."""
    try:
        st = os.stat(target)
    except FileNotFoundError:
        what = "no such device" if target.startswith("/dev/") else "no such file"
        raise PtsError(f"{target}: {what} (a real target is an nbd:// URI, a block device or a regular file)") from None
    except OSError as e:
        raise PtsError(f"{target}: cannot open: {e.strerror}") from None
    if stat.S_ISBLK(st.st_mode):
        return _DeviceKind(target)
    if stat.S_ISREG(st.st_mode):
        return _FileKind(target, st.st_size)
    if stat.S_ISDIR(st.st_mode):
        raise PtsError(f"{target}: is a directory, not a block device or file (a drive image is run as a twin: ssdtwin pts DIR)")
    if stat.S_ISCHR(st.st_mode):
        raise PtsError(
            f"{target}: is a character device, not a block device (fio needs the namespace's block device, e.g. /dev/nvme0n1, "
            "not /dev/nvme0 or /dev/ng0n1)"
        )
    raise PtsError(f"{target}: is neither a block device nor a regular file")


def _open_error(target: str, e: OSError, writing: bool) -> PtsError:
    if e.errno in (errno.EACCES, errno.EPERM):
        how = "writing" if writing else "reading"
        return PtsError(f"{target}: permission denied for {how} (run as root, or as a member of the device's group)")
    if e.errno == errno.EBUSY:
        return PtsError(f"{target}: is in use (mounted, swap, or held by LVM/RAID/another program): refusing to write to it")
    if e.errno == errno.EROFS:
        return PtsError(f"{target}: is read-only; the PTS writes the whole range")
    return PtsError(f"{target}: cannot open: {e.strerror}")


def _not_nvme(target: str, what: str) -> PtsError:
    return PtsError(f"--purge nvme-format needs an NVMe block device (/dev/nvmeXnY); {target} is {what}: use --purge trim or none")


def _refuse(target: str, what: str) -> PtsError:
    return PtsError(f"{target}: refusing to write to a {what} without {DESTROY_FLAG} (the PTS overwrites and purges the whole range)")


class _FileKind(_Kind):
    """A regular file: fio's libaio engine with direct=1 (the element body), like a device."""

    def __init__(self, path: str, size: int) -> None:
        self.path = path
        if size <= 0:
            raise PtsError(f"{path}: the file is empty: make it the size to test first (truncate -s 16G FILE)")
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
        except OSError as e:
            if e.errno == errno.EINVAL:
                raise PtsError(f"{path}: the filesystem does not support O_DIRECT, which the jobs use (direct=1)") from None
            raise _open_error(path, e, writing=False) from None
        os.close(fd)
        self.info = DeviceInfo(kind="file", uri=path, model="regular file", capacity_bytes=size, interface="file (fio libaio, direct=1)")
        self.info.extra["path"] = os.path.realpath(path)

    def target_lines(self) -> str:
        return f"ioengine=libaio\nfilename={_fio_escape(self.path)}\n"

    def check_purge(self, method: str) -> None:
        if method == "nvme-format":
            raise _not_nvme(self.path, "a regular file")

    def check_writable(self, allow_destroy: bool) -> None:
        if not allow_destroy:
            raise _refuse(self.path, "file")
        if not os.access(self.path, os.W_OK):
            raise _open_error(self.path, PermissionError(errno.EACCES, "Permission denied"), writing=True)

    def purge(self, method: str, run_job: _RunJob) -> str:
        """Truncate to nothing and back: every block is deallocated and reads as zeroes."""
        size = self.info.capacity_bytes
        try:
            os.truncate(self.path, 0)
            os.truncate(self.path, size)
        except OSError as e:
            raise PtsError(f"{self.path}: purge failed: {e.strerror}") from None
        return f"file truncated to 0 and back to {size} bytes (every block deallocated; TRIM equivalent)"


def _fio_escape(path: str) -> str:
    # fio splits filename= at ':' (several files); a colon in one name is written '\:'.
    return path.replace(":", "\\:")


class _DeviceKind(_Kind):
    """A block device: libaio, direct=1; purged by nvme format or BLKDISCARD."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.name = os.path.basename(os.path.realpath(path))
        self.sysfs = Path("/sys/class/block") / self.name
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as e:
            raise _open_error(path, e, writing=False) from None
        try:
            size = os.lseek(fd, 0, os.SEEK_END)
        finally:
            os.close(fd)
        if size <= 0:
            raise PtsError(f"{path}: the block device has no capacity (size 0: no medium, or a detached loop device)")
        self.is_partition = (self.sysfs / "partition").exists()
        self.disk_sysfs = self.sysfs.resolve().parent if self.is_partition else self.sysfs
        self.nvme = re.fullmatch(r"nvme\d+n\d+", self.disk_sysfs.name) is not None
        self.discard_max_bytes = _read_int(self.disk_sysfs / "queue" / "discard_max_bytes")
        self.info = DeviceInfo(
            kind="device",
            uri=path,
            capacity_bytes=size,
            lba_bytes=_read_int(self.disk_sysfs / "queue" / "logical_block_size") or 512,
            interface=self._interface(),
        )
        self._identify()
        self.id_ctrl = _nvme_id_ctrl(path) if self.nvme else None
        if self.id_ctrl:
            self.info.vendor = self.info.vendor or f"PCI vendor {int(self.id_ctrl.get('vid', 0)):#06x}"
            self.info.model = str(self.id_ctrl.get("mn", self.info.model)).strip()
            self.info.serial = str(self.id_ctrl.get("sn", self.info.serial)).strip()
            self.info.firmware = str(self.id_ctrl.get("fr", self.info.firmware)).strip()
        self.info.extra.update({"sysfs": str(self.sysfs), "partition": self.is_partition, "discard_max_bytes": self.discard_max_bytes})
        self.info.extra["rotational"] = self._rotational()
        # PTS-E asks for the write cache disabled; the kernel's view, recorded, not changed.
        self.info.extra["write_cache"] = _read_text(self.disk_sysfs / "queue" / "write_cache")
        self.info.extra["scheduler"] = _read_text(self.disk_sysfs / "queue" / "scheduler")  # "[none] mq-deadline"

    def _interface(self) -> str:
        if self.nvme:
            transport = _read_text(self.disk_sysfs / "device" / "transport")
            return f"NVMe over {transport}" if transport else "NVMe"
        for prefix, what in (("loop", "loop device"), ("dm-", "device mapper"), ("md", "MD RAID"), ("sd", "SCSI/SATA"), ("vd", "virtio")):
            if self.disk_sysfs.name.startswith(prefix):
                return what
        return "block device"

    def _rotational(self) -> bool:
        return _read_text(self.disk_sysfs / "queue" / "rotational") == "1"

    def _identify(self) -> None:
        """Model, serial, firmware and vendor from sysfs (NVMe controllers and SCSI disks)."""
        dev = self.disk_sysfs / "device"
        self.info.model = _read_text(dev / "model")
        self.info.serial = _read_text(dev / "serial")
        self.info.firmware = _read_text(dev / "firmware_rev") or _read_text(dev / "rev")
        self.info.vendor = _read_text(dev / "vendor")
        if self.disk_sysfs.name.startswith("loop"):
            self.info.model = "loop device"
            self.info.extra["backing_file"] = _read_text(self.disk_sysfs / "loop" / "backing_file")

    def target_lines(self) -> str:
        return f"ioengine=libaio\nfilename={_fio_escape(self.path)}\n"

    def _format_refusal(self) -> Optional[str]:
        """Why ``nvme format --ses=1`` cannot be used here, or None when it can."""
        if not self.nvme:
            return f"{self.path} is not an NVMe namespace"
        if self.is_partition:
            return f"{self.path} is a partition (a format erases the whole namespace)"
        if shutil.which("nvme") is None:
            return "nvme-cli is not installed (apt-get install nvme-cli)"
        if self.id_ctrl is None:
            return f"`nvme id-ctrl {self.path}` failed"
        if not int(self.id_ctrl.get("oacs", 0)) & 0x2:
            return "the controller does not support Format NVM (OACS bit 1)"
        if int(self.id_ctrl.get("fna", 0)) & 0x1 and _namespace_count(self.disk_sysfs) > 1:
            return "the controller formats all its namespaces at once (FNA bit 0) and has more than one"
        return None

    def check_purge(self, method: str) -> None:
        refusal = self._format_refusal()
        if method == "nvme-format" and refusal:
            raise PtsError(f"--purge nvme-format: {refusal}: use --purge trim or none")
        needs_discard = method == "trim" or (method == "auto" and refusal is not None)
        if needs_discard and self.discard_max_bytes == 0:
            why = f" and nvme format is not possible ({refusal})" if method == "auto" else ""
            raise PtsError(f"{self.path}: the device does not support discard (TRIM){why}: use --purge none to test it as is")

    def check_writable(self, allow_destroy: bool) -> None:
        if not allow_destroy:
            raise _refuse(self.path, "block device")
        if _read_text(self.sysfs / "ro") == "1":
            raise PtsError(f"{self.path}: the block device is read-only; the PTS writes the whole range")
        mounted = _mounted_on(self.path, self.sysfs)
        if mounted:
            raise PtsError(f"{self.path}: {mounted}: refusing to write to a device in use")
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_EXCL)
        except OSError as e:
            raise _open_error(self.path, e, writing=True) from None
        os.close(fd)

    def purge(self, method: str, run_job: _RunJob) -> str:
        if method == "nvme-format" or (method == "auto" and self._format_refusal() is None):
            return self._nvme_format()
        return self._discard()

    def _nvme_format(self) -> str:
        argv = ["nvme", "format", self.path, "--ses=1", "--force"]
        p = subprocess.run(argv, capture_output=True, text=True, check=False)
        if p.returncode != 0:
            msg = (p.stderr.strip() or p.stdout.strip() or f"exit {p.returncode}").splitlines()[0]
            raise PtsError(f"{self.path}: nvme format --ses=1 failed: {msg}")
        return "nvme format --ses=1 (User Data Erase)"

    def _discard(self) -> str:
        size = self.info.capacity_bytes
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_EXCL)
        except OSError as e:
            raise _open_error(self.path, e, writing=True) from None
        try:
            fcntl.ioctl(fd, _BLKDISCARD, struct.pack("QQ", 0, size))
        except OSError as e:
            raise PtsError(f"{self.path}: purge by discard (BLKDISCARD) failed: {e.strerror}") from None
        finally:
            os.close(fd)
        return f"TRIM of the whole range ({size} bytes, BLKDISCARD as blkdiscard does; fallback: not an NVMe format)"


def _read_text(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _read_int(path: Path) -> int:
    text = _read_text(path)
    return int(text) if text.isdigit() else 0


def _nvme_id_ctrl(path: str) -> Optional[dict[str, Any]]:  # open: nvme-cli's JSON, as the installed version prints it
    if shutil.which("nvme") is None:
        return None
    try:
        p = subprocess.run(["nvme", "id-ctrl", path, "-o", "json"], capture_output=True, text=True, timeout=30, check=False)
        doc = json.loads(p.stdout) if p.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _namespace_count(disk_sysfs: Path) -> int:
    ctrl = (disk_sysfs / "device").resolve()
    try:
        return sum(1 for p in ctrl.iterdir() if re.fullmatch(r"nvme\d+(c\d+)?n\d+", p.name))
    except OSError:
        return 1


def _mounted_on(path: str, sysfs: Path) -> str:
    """A mount or swap using the device or one of its partitions, described; "" if none."""
    names = {sysfs.name} | {p.name for p in _children(sysfs) if (p / "partition").exists()}
    for table, what in (("/proc/self/mounts", "mounted on"), ("/proc/swaps", "used as swap")):
        try:
            lines = Path(table).read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields and fields[0].startswith("/dev/") and os.path.basename(os.path.realpath(fields[0])) in names:
                where = f" {fields[1]}" if what == "mounted on" and len(fields) > 1 else ""
                return f"{fields[0]} is {what}{where}"
    return ""


def _children(sysfs: Path) -> list[Path]:
    try:
        return list(sysfs.iterdir())
    except OSError:
        return []
